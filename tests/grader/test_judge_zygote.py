# hw4p1: instructor-only
"""The bulk regrade's judge zygote (``autograder/judging/isolation/judge_zygote.py``, driven by
``grading_run.run``) grades as the Autolab Makefile does.

A fake judge (tests/grader/fake_judge.py: an autograde.tar whose ``autograder.judging.grade``
reports what it was given and behaves as its handin says) is run both ways and must see the
same arguments, folder, import path, environment, standard input and extracted files, and end the
same way (the zero line after a judge that fails); a timeout, a stop, a zygote that died before or
during a grading each end as they should, with no process or file left. Then one real handin is
graded both ways: the same scores, report and feedback, timings aside.
"""
import dataclasses
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest

from autograder.judging import grading_run
from autograder.judging.isolation import judge_zygote
from autograder.judging.scoring.report import Status
from tests.grader.autograder_helpers import REPO_ROOT, attack_handin, built_autograder
from tests.grader.fake_judge import fake_grader
from tools.make_autograde import makefile_text

TIMING = re.compile(r"\d+(\.\d+)?( s\b| busy)")  # wall seconds and the machine's load


@pytest.fixture(scope="module")
def zygotes():
    with judge_zygote.Zygotes(sys.executable, grading_run.judge_environment(1)) as pool:
        yield pool


def grade(tmp_path: Path, behaviour: str, zygote=None, **options) -> grading_run.GradingRun:
    """The fake judge's grading of a handin saying ``behaviour`` (by make when no ``zygote``)."""
    source = tmp_path / "grader"
    if not source.exists():
        fake_grader(source)
    handin = tmp_path / f"{behaviour}.tar"
    handin.write_text(behaviour)
    return grading_run.run(grading_run.prepare(source, handin, tmp_path), "--flag 'a b'",
                           zygote=zygote, **options)


def seen(graded: grading_run.GradingRun) -> dict:
    """What the fake judge reported, its grading folder named GRADING; its session, not this
    process's, as ``session``: True."""
    line = graded.output.splitlines()[0]
    report = json.loads(line.replace(str(Path(json.loads(line)["cwd"]).parent), "GRADING"))
    report["session"] = report["session"] != os.getsid(0)
    return report


def test_the_makefile_is_built_from_the_steps_the_zygote_follows():
    """One definition: the Makefile's recipe is grading_run.makefile_rules(), whose text is
    what the Autolab Makefile always said (written out here by hand)."""
    assert grading_run.makefile_rules() in makefile_text()
    recipe = ("\t@chmod 600 autograde.tar && (umask 077 && tar --no-same-permissions -xf "
              "autograde.tar) && \\\n\t\tcd autograde && $(PYTHON) -m autograder.judging.grade "
              "../handin.tar --work ../work \\\n\t\t--autograde-tar ../autograde.tar "
              "$(GRADER_FLAGS) || echo '{\"scores\": {")
    assert recipe in makefile_text() and "unexport PYTHONOPTIMIZE\n" in makefile_text()


@pytest.mark.slow  # a zygote's start: import torch
def test_a_forked_judge_is_given_what_make_gives_it(tmp_path, zygotes):
    """The same arguments (the flags split as the shell splits them), folder, import path, own
    package, own session, empty standard input, environment (make's own variables aside),
    extracted files and modes; the zero line after a judge that raises or exits non-zero."""
    zygote = zygotes.for_this_thread()
    for behaviour in ("ok", "raise", "exit 3"):
        made = grade(tmp_path / "make" / behaviour.replace(" ", ""), behaviour)
        forked = grade(tmp_path / "zygote" / behaviour.replace(" ", ""), behaviour, zygote)
        assert seen(made) == seen(forked)
        assert made.output.splitlines()[2:] == forked.output.splitlines()[2:], behaviour
        assert made.scores == forked.scores and not forked.error and not forked.timed_out
    report = seen(forked)
    assert report["argv"] == ["../handin.tar", "--work", "../work",
                              "--autograde-tar", "../autograde.tar", "--flag", "a b",
                              "--results-json", report["argv"][-1]]
    assert report["cwd"] == report["path0"] == "GRADING/autograde"
    assert report["autograder"].startswith(report["cwd"] + "/")  # the extraction's, not ours
    assert report["session"] and report["stdin"] == "" and report["main"] == "__main__"
    assert report["tree"]["autograde/autograder/judging/grade.py"] == "0o600"
    assert forked.output.splitlines()[-1] == grading_run.zero_line()  # exit 3
    assert "PYTHONOPTIMIZE" not in report["env"]


def test_judges_forked_from_one_zygote_draw_different_random_numbers(tmp_path, zygotes):
    """Python's and numpy's global generators differ from one judge to the next, as between two
    fresh interpreters."""
    zygote = zygotes.for_this_thread()
    python, numpy = zip(*(json.loads(grade(tmp_path / str(index), "ok", zygote).output
                                     .splitlines()[1])["random"] for index in range(2)))
    assert python[0] != python[1] and numpy[0] != numpy[1], (python, numpy)


def process_gone(pgid: int) -> bool:
    """Whether no process of group ``pgid`` runs (a zombie, reaped later, has ended)."""
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == pgid and fields[0] != "Z":
            return False
    return True


def test_a_timeout_and_a_stop_end_the_forked_judge_and_leave_nothing(tmp_path, zygotes,
                                                                     monkeypatch):
    """A judge past the timeout is killed whole (timed out, no scores); one stopped from another
    thread gets SIGINT first, as make's would. Neither leaves its folder or its output file."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    zygote = zygotes.for_this_thread()
    judges = []
    graded = grade(tmp_path / "timeout", "sleep", zygote, timeout=1.0, started=judges.append)
    assert graded.timed_out and graded.scores == grading_run.parse_scores("")
    assert judges[0].returncode == -signal.SIGKILL and process_gone(judges[0].pid)

    def stop_soon(process) -> None:
        judges.append(process)
        threading.Timer(1.0, grading_run.stop, (process,)).start()

    graded = grade(tmp_path / "stop", "sleep", zygote, started=stop_soon)
    assert judges[1].returncode == 130 and "interrupted" in graded.output
    assert not graded.timed_out and process_gone(judges[1].pid)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["stop", "timeout"]  # no output file
    assert not any(p.name.startswith("hw4p1-grading-") for p in tmp_path.rglob("*"))


def test_a_stop_interrupts_a_judge_forked_by_a_zygote_started_with_sigint_ignored(tmp_path):
    """A regrade started as a shell's background job passes SIGINT on ignored; the judges its
    zygotes fork still end on the stop's SIGINT (exit 130, "interrupted"), not on the SIGKILL
    that follows its grace."""
    before = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        with judge_zygote.Zygotes(sys.executable, grading_run.judge_environment(1)) as pool:
            zygote = pool.for_this_thread()
            judges = []

            def stop_soon(process) -> None:
                judges.append(process)
                threading.Timer(1.0, grading_run.stop, (process,), {"grace": 30.0}).start()

            graded = grade(tmp_path, "sleep", zygote, started=stop_soon)
    finally:
        signal.signal(signal.SIGINT, before)
    assert judges[0].returncode == 130 and "interrupted" in graded.output, judges[0].returncode


@pytest.mark.slow
def test_a_zygote_that_dies_loses_no_handin(tmp_path, zygotes, capsys):
    """Dead before the grading: make grades it (said on standard error), and the thread's next
    grading gets a new zygote. Dead during it: the judge is killed and the grading is a crash
    that says why."""
    zygote = zygotes.for_this_thread()
    zygote._process.kill()
    zygote._process.wait()
    graded = grade(tmp_path / "before", "ok", zygote)
    assert graded.scores["Linear"] == 5 and not graded.error
    assert "grading hw4p1-grading-" in capsys.readouterr().err
    fresh = zygotes.for_this_thread()
    assert fresh is not zygote and fresh.alive()

    judges = []

    def kill_the_zygote(process) -> None:
        judges.append(process)
        threading.Timer(1.0, fresh._process.kill).start()

    start = time.monotonic()
    graded = grade(tmp_path / "during", "sleep", fresh, started=kill_the_zygote)
    assert time.monotonic() - start < 60
    assert graded.status is Status.CRASHED and "zygote died while it graded" in graded.error
    time.sleep(0.5)  # the orphaned judge, killed, is reaped by init
    assert process_gone(judges[0].pid)


@pytest.mark.slow  # two gradings of a real handin
def test_a_real_handin_is_graded_the_same_both_ways(tmp_path, zygotes, monkeypatch):
    """The same scores, report (timings aside) and feedback (timings and load masked) from the
    real judge started by make and forked from the zygote; the zygote's judge forks its model
    child as make's does."""
    monkeypatch.setenv("HW4P1_MATH_THREADS", "1")  # the rule's load reading aside
    handin = attack_handin(tmp_path / "handin", "", None)
    made = grading_run.run(grading_run.prepare(built_autograder(), handin))
    forked = grading_run.run(grading_run.prepare(built_autograder(), handin),
                             zygote=zygotes.for_this_thread())
    assert made.status is forked.status is Status.OK and made.scores == forked.scores
    assert forked.report.model_child == "forked from the judge"

    def untimed(value):
        if isinstance(value, dict):
            return {k: untimed(v) for k, v in value.items()
                    if k not in ("seconds", "phase_seconds", "load")}
        if isinstance(value, list):
            return [untimed(v) for v in value]
        return value

    assert untimed(dataclasses.asdict(made.report)) == untimed(dataclasses.asdict(forked.report))
    assert TIMING.sub("#", made.output) == TIMING.sub("#", forked.output)


def processes_with(variable: str) -> list[int]:
    """The pids of the processes whose environment holds ``variable`` (NAME=value)."""
    found = []
    for environ in Path("/proc").glob("[0-9]*/environ"):
        try:
            if variable.encode() in environ.read_bytes().split(b"\0"):
                found.append(int(environ.parent.name))
        except OSError:
            continue
    return found


@pytest.mark.slow  # two zygotes' start: import torch
def test_ctrl_c_twice_stops_the_forked_judges_and_ends_the_zygotes(tmp_path):
    """A regrade at --jobs 2 whose judges (forked from its zygotes) would sleep 300 s: Ctrl-C
    twice stops them, and the regrade ends with no zygote, judge or folder left behind."""
    source = fake_grader(tmp_path / "grader")
    handins, temp = tmp_path / "handins", tmp_path / "tmp"
    handins.mkdir()
    temp.mkdir()
    for student in ("a", "b", "c"):
        (handins / f"{student}.tar").write_text("sleep")
    marker = f"TMPDIR={temp}"
    run = subprocess.Popen([sys.executable, "-m", "autograder.classroom.regrade", str(handins),
                            "--out", str(tmp_path / "out"), "--autograder", str(source),
                            "--jobs", "2"],
                           cwd=REPO_ROOT,
                           env={**os.environ, "TQDM_DISABLE": "1", "TMPDIR": str(temp)},
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                           preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    deadline = time.monotonic() + 120
    while len(processes_with(marker)) < 5 and time.monotonic() < deadline:  # regrade, 2 x 2
        time.sleep(0.2)
    for _ in range(2):
        run.send_signal(signal.SIGINT)
        time.sleep(1)
    _, stderr = run.communicate(timeout=60)
    assert run.returncode == 130 and "stopping the 2 running gradings" in stderr, stderr[-2000:]
    assert time.monotonic() < deadline + 30
    assert processes_with(marker) == [] and list(temp.iterdir()) == [], stderr[-2000:]
