# hw4p1: instructor-only
"""One grading's steps (autograder/judging/grading_run.py) with tiny stand-ins for the judge: a
Makefile of a line or two that make runs, and a zygote whose judge is a recorded answer. What each
step gives is read by value: the scores line clamped, the folder and archive modes, the extraction
umask, the zero line a failed judge adds, the timeout's zeros, the stop's signals, the Makefile's
command against the zygote's. tests/grader/test_judge_zygote.py and tests/classroom/test_regrade.py
run the real judge (slow); these take a few seconds.

    .venv/bin/python -m pytest -q tests/grader/test_grading_run_units.py
"""
import inspect
import io
import json
import os
import shlex
import signal
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

import pytest

from autograder.judging import grading_run
from autograder.judging.isolation import judge_zygote, thread_policy
from autograder.judging.scoring import rubric
from autograder.judging.scoring.report import GradingReport, Status

FIRST, SECOND = list(rubric.MYTORCH_RUBRIC)[:2]
ZEROS_LINE = json.dumps({"scores": rubric.zero_scores()})


def scores_line(**scores: float) -> str:
    return json.dumps({"scores": scores})


@pytest.mark.parametrize("value, expected", [
    (2.5, 2.5), (0, 0.0), (-0.5, 0.0), (0.5, 0.5), (99, 5.0), (True, 0.0), (False, 0.0),
    ("3", 0.0), (None, 0.0), (float("nan"), 0.0), (float("inf"), 0.0), (-float("inf"), 0.0)])
def test_a_score_is_clamped_to_its_points_and_anything_else_reads_zero(value, expected):
    assert grading_run.clamp(value, 5.0) == expected
    assert type(grading_run.clamp(value, 5)) is float


def test_the_scores_line_gives_every_category_clamped_and_zeros_when_unreadable():
    points = rubric.RUBRIC[FIRST]
    line = scores_line(**{FIRST: points + 1, SECOND: 1.5, "Unknown": 3})
    assert grading_run.parse_scores(line) == {**rubric.zero_scores(), FIRST: float(points),
                                              SECOND: 1.5}
    for unreadable in ("", "not json", "[1, 2]", json.dumps({"score": {FIRST: 1}}), "null"):
        assert grading_run.parse_scores(unreadable) == rubric.zero_scores(), unreadable


def test_a_grading_s_status_is_the_judge_s_unless_it_failed_or_timed_out():
    def status(report, timed_out=False, error=""):
        return grading_run.GradingRun({}, report, "", 0.0, timed_out, error).status

    assert status(GradingReport()) is Status.OK
    assert status(GradingReport(status=Status.TIMEOUT)) is Status.TIMEOUT
    assert status(None) is Status.CRASHED
    assert status(GradingReport(), timed_out=True) is Status.TIMEOUT
    assert status(GradingReport(), timed_out=True, error="why") is Status.CRASHED


def test_the_grading_timeout_outlasts_every_limit_of_the_judge_by_two_minutes():
    assert grading_run.GRADING_TIMEOUT_S == rubric.worst_case_seconds() + 120.0
    assert inspect.signature(grading_run.run).parameters["timeout"].default == \
        grading_run.GRADING_TIMEOUT_S


def autograde_tar(path: Path) -> None:
    """An autograde.tar holding autograde/judge.py (mode 0777) and the folder autograde/sub."""
    with tarfile.open(path, "w") as tar:
        for name, kind, mode in (("autograde/sub", tarfile.DIRTYPE, 0o777),
                                 ("autograde/judge.py", tarfile.REGTYPE, 0o777)):
            info = tarfile.TarInfo(name)
            info.type, info.mode, data = kind, mode, b"print(1)\n"
            info.size = len(data) if kind == tarfile.REGTYPE else 0
            tar.addfile(info, io.BytesIO(data) if kind == tarfile.REGTYPE else None)


def source_folder(tmp_path: Path, makefile: str = "all:\n") -> Path:
    source = Path(tempfile.mkdtemp(prefix="source-", dir=tmp_path))
    autograde_tar(source / grading_run.AUTOGRADE_TAR)
    (source / grading_run.MAKEFILE).write_text(makefile)
    return source


def test_a_grading_folder_holds_the_archive_the_makefile_and_the_handin(tmp_path):
    source = source_folder(tmp_path, "all:\n\t@true\n")
    handin = tmp_path / "mine.tgz"
    handin.write_bytes(b"handin bytes")
    grading = grading_run.prepare(source, handin, tmp_path)
    assert grading.parent == tmp_path and grading.name.startswith("hw4p1-grading-")
    assert grading.stat().st_mode & 0o777 == 0o755
    assert (grading / "Makefile").read_text() == "all:\n\t@true\n"
    assert (grading / grading_run.AUTOGRADE_TAR).read_bytes() == \
        (source / grading_run.AUTOGRADE_TAR).read_bytes()
    assert (grading / "handin.tar").read_bytes() == b"handin bytes"
    bare = grading_run.prepare(source, None, tmp_path)
    assert sorted(p.name for p in bare.iterdir()) == ["Makefile", grading_run.AUTOGRADE_TAR]


def test_extraction_makes_the_archive_private_and_its_files_too(tmp_path):
    grading = grading_run.prepare(source_folder(tmp_path), None, tmp_path)
    assert grading_run.extract(grading)
    assert (grading / grading_run.AUTOGRADE_TAR).stat().st_mode & 0o777 == 0o600
    assert (grading / "autograde/judge.py").stat().st_mode & 0o777 == 0o700
    assert (grading / "autograde/sub").stat().st_mode & 0o777 == 0o700
    (grading / grading_run.AUTOGRADE_TAR).write_bytes(b"not a tar\n" * 100)
    assert not grading_run.extract(grading)
    (grading / grading_run.AUTOGRADE_TAR).unlink()
    assert not grading_run.extract(grading)


def test_extraction_runs_in_a_session_of_its_own(tmp_path, monkeypatch):
    """A terminal's Ctrl-C to the caller's group must not reach tar: it runs in its own session."""
    shims, sid = tmp_path / "bin", tmp_path / "sid"
    shims.mkdir()
    (shims / "tar").write_text(f"#!/bin/sh\n{sys.executable} -c 'import os; print(os.getsid(0))'"
                               f" > {sid}\nexit 0\n")
    (shims / "tar").chmod(0o755)
    monkeypatch.setenv("PATH", f"{shims}:{os.environ['PATH']}")
    grading = grading_run.prepare(source_folder(tmp_path), None, tmp_path)
    assert grading_run.extract(grading)
    assert int(sid.read_text()) not in (os.getsid(0), 0)


def test_the_makefile_runs_the_judge_as_the_zygote_does():
    """The Makefile's command line (make joins its backslash-continued lines) is the zygote's:
    the same module, the same arguments, in ARCHIVE_ROOT, after the same extraction."""
    rules = grading_run.makefile_rules()
    recipe = rules.split("all:\n", 1)[1].replace("\\\n", " ")
    words = shlex.split(recipe.replace("$(PYTHON)", "PY").replace("$(GRADER_FLAGS)", "FLAGS"))
    assert words[words.index("cd") + 1] == grading_run.ARCHIVE_ROOT
    judge = words.index("PY")
    assert words[judge:judge + 3] == ["PY", "-m", grading_run.JUDGE_MODULE]
    assert words[judge + 3:words.index("FLAGS")] == list(grading_run.JUDGE_ARGUMENTS)
    assert words[-3:] == ["||", "echo", ZEROS_LINE]
    assert f"(umask {grading_run.EXTRACTION_UMASK:03o} && tar --no-same-permissions -xf " \
           f"{grading_run.AUTOGRADE_TAR})" in rules
    assert f"@chmod 600 {grading_run.AUTOGRADE_TAR}" in rules
    assert grading_run.judge_arguments(Path("/g"), "-v") == [
        *grading_run.JUDGE_ARGUMENTS, "-v", "--results-json", "/g/details.json"]
    assert grading_run.make_command(Path("/g"), "", "py") == [
        "make", "--no-print-directory", "PYTHON=py", "GRADER_FLAGS=--results-json /g/details.json"]


def test_only_a_makefile_holding_these_rules_is_graded_by_a_zygote(tmp_path):
    source = tmp_path / "source"
    source.mkdir()
    assert not grading_run.zygote_can_grade(source)  # no Makefile
    makefile = source / grading_run.MAKEFILE
    makefile.write_text("PYTHON ?= python3\n" + grading_run.makefile_rules())
    assert grading_run.zygote_can_grade(source)
    makefile.write_text(grading_run.makefile_rules().replace("-m", "-X dev -m"))
    assert not grading_run.zygote_can_grade(source)
    makefile.write_bytes(b"\xff\xfe" + grading_run.makefile_rules().encode())
    assert not grading_run.zygote_can_grade(source)


def test_make_and_the_judge_are_told_how_many_gradings_share_the_machine(monkeypatch):
    monkeypatch.setenv("MAKEFLAGS", "-j8")
    monkeypatch.setenv("MAKELEVEL", "1")
    monkeypatch.setenv("MFLAGS", "-j8")
    monkeypatch.setenv("PYTHONOPTIMIZE", "1")
    env = grading_run.make_environment(3)
    assert env[thread_policy.GRADINGS_VARIABLE] == "3" and env["PYTHONOPTIMIZE"] == "1"
    assert not {"MAKEFLAGS", "MAKELEVEL", "MFLAGS"} & set(env)
    assert grading_run.make_environment()[thread_policy.GRADINGS_VARIABLE] == "1"
    judge_env = grading_run.judge_environment(2)
    assert judge_env[thread_policy.GRADINGS_VARIABLE] == "2" and "PYTHONOPTIMIZE" not in judge_env
    assert grading_run.judge_environment()[thread_policy.GRADINGS_VARIABLE] == "1"
    assert inspect.signature(grading_run.run).parameters["gradings"].default == 1


def graded_by_make(tmp_path: Path, recipe: str, **run_options) -> grading_run.GradingRun:
    """grading_run.run on a grading whose Makefile's one rule is ``recipe``'s lines."""
    source = source_folder(tmp_path, "all:\n" + "".join(f"\t@{line}\n" for line in recipe))
    return grading_run.run(grading_run.prepare(source, None, tmp_path), **run_options)


def test_make_s_last_line_is_the_score_and_its_report_is_read(tmp_path):
    report = json.dumps(GradingReport(handin_notes=["n"]).to_json())
    started = []
    graded = graded_by_make(
        tmp_path, [f"echo '{report}' > details.json", "echo judge output",
                   f"echo '{scores_line(**{FIRST: 2})}'"],
        gradings=4, started=started.append)
    assert graded.scores == {**rubric.zero_scores(), FIRST: 2.0}
    assert graded.output.splitlines()[0] == "judge output" and isinstance(graded.output, str)
    assert graded.report.handin_notes == ["n"] and graded.status is Status.OK
    assert not graded.timed_out and graded.error == "" and 0 <= graded.seconds < 60
    assert [process.returncode for process in started] == [0]
    assert not list(tmp_path.glob("hw4p1-grading-*")), "the grading folder is removed"


def test_make_runs_in_its_own_session_with_the_gradings_count(tmp_path):
    graded = graded_by_make(tmp_path, [
        f"{sys.executable} -c 'import os; print(os.getsid(0) == os.getpid(), "
        f"os.environ[\"{thread_policy.GRADINGS_VARIABLE}\"])'",
        "printf 'bad byte \\377\\n'"], gradings=3)
    assert graded.output.splitlines()[0] == "False 3"
    assert graded.output.splitlines()[1] == "bad byte \ufffd"
    probe = graded_by_make(tmp_path, [f"{sys.executable} -c 'import os; print(os.getsid(0))'"])
    assert int(probe.output) != os.getsid(0)


def test_a_refused_report_or_none_is_a_crash_with_its_reason(tmp_path):
    refused = graded_by_make(tmp_path, ["echo '{\"version\": 0}' > details.json",
                                        f"echo '{scores_line(**{FIRST: 1})}'"])
    assert refused.report is None and refused.status is Status.CRASHED
    assert refused.error.startswith("the judge's report was refused: ")
    assert refused.scores[FIRST] == 1.0
    silent = graded_by_make(tmp_path, [])
    assert silent.report is None and silent.error == "" and silent.status is Status.CRASHED
    assert silent.scores == rubric.zero_scores()


def test_a_grading_past_its_timeout_is_killed_and_scores_zero(tmp_path):
    start = time.monotonic()
    graded = graded_by_make(tmp_path, [f"echo '{scores_line(**{FIRST: 1})}'", "sleep 30"],
                            timeout=1.0)
    assert time.monotonic() - start < 20
    assert graded.timed_out and graded.status is Status.TIMEOUT
    assert graded.scores == rubric.zero_scores(), "a scores line before the kill is not read"
    assert graded.output.strip() == scores_line(**{FIRST: 1})


class FakeJudge:
    """A forked judge whose end is given: its exit code, or a timeout; ``lost`` as the zygote's."""

    def __init__(self, code: int | None, lost: str = "") -> None:
        self.pid, self.code, self.lost = 2**22 + 12345, code, lost  # a pid no process has
        self.returncode = None if code is None else code

    def wait(self, timeout=None):
        if self.code is None:
            raise subprocess.TimeoutExpired("judge", timeout)
        return self.code


class FakeZygote:
    """``fork_judge``: records its request, writes ``printed`` to the output, returns ``judge``."""

    def __init__(self, judge: FakeJudge | None, printed: str = "") -> None:
        self.judge, self.printed, self.requests = judge, printed, []

    def fork_judge(self, cwd, module, arguments, env, output):
        self.requests.append((cwd, module, arguments, env, cwd.is_dir()))
        if self.judge is None:
            raise judge_zygote.ZygoteUnavailable("the zygote has ended")
        Path(output).write_text(self.printed)
        return self.judge


def forked(tmp_path: Path, zygote: FakeZygote, **options) -> tuple[str, bool, str]:
    grading = grading_run.prepare(source_folder(tmp_path), None, tmp_path)
    return grading_run.judge_forked(grading, options.get("flags", ""), options.get("gradings", 1),
                                    options.get("timeout", 5.0), options.get("started"), zygote)


def test_a_forked_judge_is_asked_as_the_makefile_would_run_it(tmp_path):
    zygote, started = FakeZygote(FakeJudge(0), "report\n" + scores_line(**{FIRST: 1})), []
    output, timed_out, lost = forked(tmp_path, zygote, flags="-v", gradings=2,
                                     started=started.append)
    assert (output, timed_out, lost) == ("report\n" + scores_line(**{FIRST: 1}), False, "")
    ((cwd, module, arguments, env, extracted),) = zygote.requests
    grading = cwd.parent
    assert cwd == grading / grading_run.ARCHIVE_ROOT and extracted
    assert module == grading_run.JUDGE_MODULE
    assert arguments == grading_run.judge_arguments(grading, "-v")
    assert env["PWD"] == str(cwd) and env["OLDPWD"] == str(grading)
    assert env[thread_policy.GRADINGS_VARIABLE] == "2"
    assert started == [zygote.judge]


def test_a_forked_judge_that_failed_adds_the_zero_line_and_one_that_timed_out_does_not(tmp_path):
    failed = forked(tmp_path, FakeZygote(FakeJudge(1), "Traceback\n"))
    assert failed == ("Traceback\n" + ZEROS_LINE + "\n", False, "")
    killed = FakeJudge(None)
    killed.returncode = -signal.SIGKILL  # stop() finds its end known: it signals nothing
    timed_out = forked(tmp_path, FakeZygote(killed, "partial\n"), timeout=0.1)
    assert timed_out == ("partial\n", True, "")


def test_a_judge_whose_zygote_died_is_an_error_and_its_session_is_killed(tmp_path, monkeypatch):
    killed = []
    monkeypatch.setattr(grading_run.os, "killpg", lambda pid, sig: killed.append((pid, sig)))
    judge = FakeJudge(-signal.SIGKILL, lost="EOF")
    output, timed_out, lost = forked(tmp_path, FakeZygote(judge, "half"))
    assert lost == "the judge's zygote died while it graded: EOF" and not timed_out
    assert output == "half" + ZEROS_LINE + "\n"
    assert killed == [(judge.pid, signal.SIGKILL)]


def test_no_zygote_judge_means_make_grades_an_unextracted_folder(tmp_path, capsys):
    zygote = FakeZygote(None)
    grading = grading_run.prepare(source_folder(tmp_path), None, tmp_path)
    assert grading_run.judge_forked(grading, "", 1, 5.0, None, zygote) is None
    assert not (grading / grading_run.ARCHIVE_ROOT).exists()
    assert f"the zygote has ended; grading {grading.name} with make" in capsys.readouterr().err
    # run() then grades with make: the Makefile's own output is the grading's
    source = source_folder(tmp_path, f"all:\n\t@echo '{scores_line(**{SECOND: 2})}'\n")
    graded = grading_run.run(grading_run.prepare(source, None, tmp_path), zygote=zygote)
    assert graded.scores[SECOND] == 2.0 and len(zygote.requests) == 2


def test_a_grading_whose_archive_cannot_be_extracted_scores_zero_without_a_judge(tmp_path):
    zygote = FakeZygote(FakeJudge(0), scores_line(**{FIRST: 1}))
    grading = grading_run.prepare(source_folder(tmp_path), None, tmp_path)
    (grading / grading_run.AUTOGRADE_TAR).write_bytes(b"garbage" * 200)
    assert grading_run.judge_forked(grading, "", 1, 5.0, None, zygote) == (
        ZEROS_LINE + "\n", False, "")
    assert zygote.requests == []


def session(code: str) -> subprocess.Popen:
    """A python child in a session of its own running ``code``, once it has started."""
    process = subprocess.Popen([sys.executable, "-c", "import signal, sys, time\n" + code +
                                "\nprint('up', flush=True)\ntime.sleep(60)"],
                               stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                               start_new_session=True)
    assert process.stdout.readline() == "up\n"
    return process


def test_stop_interrupts_then_kills_what_outlives_the_grace():
    interrupted = session("")
    grading_run.stop(interrupted, grace=5.0)
    assert interrupted.returncode == -signal.SIGINT  # python's end on a KeyboardInterrupt
    stubborn = session("signal.signal(signal.SIGINT, signal.SIG_IGN)")
    start = time.monotonic()
    grading_run.stop(stubborn, grace=0.3)
    assert stubborn.returncode == -signal.SIGKILL and time.monotonic() - start < 5
    at_once = session("")
    grading_run.stop(at_once, grace=None)
    assert at_once.returncode == -signal.SIGKILL
    assert inspect.signature(grading_run.stop).parameters["grace"].default == 10.0


def test_stop_signals_nothing_once_the_end_is_known_or_the_group_is_gone(monkeypatch):
    sent = []
    monkeypatch.setattr(grading_run.os, "killpg", lambda pid, sig: sent.append(sig))
    grading_run.stop(FakeJudge(0))
    assert sent == []

    def gone(pid, sig):
        sent.append(sig)
        raise ProcessLookupError

    monkeypatch.setattr(grading_run.os, "killpg", gone)
    grading_run.stop(FakeJudge(None))
    assert sent == [signal.SIGINT]
