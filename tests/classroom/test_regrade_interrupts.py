# hw4p1: instructor-only
"""An interrupt of the bulk regrade (autograder/classroom/regrade.py) loses no grading: Ctrl-C sent
to the regrade's whole process group, as a terminal sends it, at several moments (while a grading
extracts its grader, while its judge runs, just after a row is written), with one and two job
slots, through the real entry point (``make regrade`` and ``python -m``). Once: every running
grading finishes and is written with its true row. Twice, or a kill: the running gradings leave no
row, and the resume grades them. A crashed row is graded again by every run, ``--only`` included.

The judge is a fake one (an autograde.tar whose ``autograder.judging.grade`` sleeps as many
seconds as its handin says, then writes an ok report and its scores line), forked from the
regrade's zygotes as the real one is; a ``tar`` on PATH that waits EXTRACT_S seconds
(tests/classroom/regrade_fakes.py's slow_tar) widens the moment a grading extracts its grader.

    .venv/bin/python -m pytest -q -n 0 tests/classroom/test_regrade_interrupts.py
"""
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from autograder.classroom import grades_csv, regrade
from autograder.judging import grading_run
from autograder.judging.scoring.report import GradingReport
from tests.classroom.regrade_fakes import (fake_grader as files_only_grader, grade_with, markers,
                                           slow_tar)
from tests.grader.fake_judge import fake_grader

REPO = Path(__file__).resolve().parents[2]
LINEAR = 5.0  # the fake judge's points, in Linear
FAKE_JUDGE = r'''
import json, pathlib, sys, time
seconds = float(pathlib.Path(sys.argv[1]).read_text())
pathlib.Path("../../judging-" + pathlib.Path.cwd().parent.name).touch()
time.sleep(seconds)
pathlib.Path(sys.argv[sys.argv.index("--results-json") + 1]).write_text(REPORT)
print(json.dumps({"scores": {"Linear": LINEAR}}))
'''


def sleepy_grader(folder: Path) -> Path:
    """A grader folder: the real Makefile, and an autograde.tar whose judge sleeps its handin's
    seconds, touches ``judging-<grading folder>`` beside its grading folder (in TMPDIR) when it
    starts, then reports an ok grading worth LINEAR points (tests/grader/fake_judge.py's grader,
    with this judge)."""
    judge = (FAKE_JUDGE.replace("REPORT", repr(json.dumps(GradingReport().to_json())))
             .replace("LINEAR", repr(LINEAR)))
    return fake_grader(folder, judge)


def start(tmp_path: Path, sleeps: dict[str, float], jobs: int, through_make: bool = False
          ) -> subprocess.Popen:
    """The regrade of handins whose judges sleep ``sleeps`` seconds, in a process group of its
    own (as a terminal's foreground job), SIGINT at its default disposition."""
    handins = tmp_path / "handins"
    handins.mkdir(exist_ok=True)
    for student, seconds in sleeps.items():
        (handins / f"{student}.tar").write_text(str(seconds))
    source = tmp_path / "grader"
    if not source.exists():
        sleepy_grader(source)
    temp = tmp_path / "tmp"
    temp.mkdir(exist_ok=True)
    shims = tmp_path / "bin" if (tmp_path / "bin").exists() else slow_tar(tmp_path / "bin")
    arguments = [str(handins), "--out", str(tmp_path / "out"), "--autograder", str(source)]
    command = (["make", "--no-print-directory", "regrade", f"HANDINS={handins}",
                f"JOBS={jobs}", f"OUT={tmp_path / 'out'}", f"ARGS=--autograder {source}"]
               if through_make else
               [sys.executable, "-m", "autograder.classroom.regrade", *arguments,
                "--jobs", str(jobs)])
    return subprocess.Popen(command, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, process_group=0,
                            env={**os.environ, "TQDM_DISABLE": "1", "TMPDIR": str(temp),
                                 "PATH": f"{shims}:{os.environ['PATH']}"},
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))


def wait_for(condition, seconds: float = 120) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "the regrade did not get there in time"
        time.sleep(0.05)


def rows(tmp_path: Path) -> dict[str, dict]:
    return grades_csv.read_rows(tmp_path / "out" / "grades.csv")


def interrupt(run: subprocess.Popen, signals: int = 1, signum: int = signal.SIGINT) -> str:
    """Send ``signals`` ``signum`` to the run's process group a second apart; its standard error
    once it ended (exit 130 asserted for SIGINT)."""
    for index in range(signals):
        if index:
            time.sleep(1)
        os.killpg(run.pid, signum)
    _, stderr = run.communicate(timeout=120)
    if signum == signal.SIGINT:
        # python's exit code, or make's end by the SIGINT it got too
        assert run.returncode in (130, -signal.SIGINT), stderr[-3000:]
    return stderr


def true_row(row: dict) -> bool:
    """The fake judge's whole result: ok, LINEAR points, nothing noted."""
    return row["status"] == "ok" and float(row["Linear"]) == LINEAR \
        and float(row["total"]) == LINEAR and row["notes"] == ""


def resume(tmp_path: Path, sleeps: dict[str, float], jobs: int) -> tuple[str, dict[str, dict]]:
    """Run the regrade again to its end: (its standard error, its rows)."""
    run = start(tmp_path, sleeps, jobs)
    _, stderr = run.communicate(timeout=300)
    assert run.returncode == 0, stderr[-3000:]
    return stderr, rows(tmp_path)


@pytest.mark.slow  # each zygote imports torch
@pytest.mark.parametrize("jobs, moment, through_make", [
    (2, "extracting", True), (2, "judging", False), (2, "written", False),
    (1, "extracting", False), (1, "written", True)])
def test_ctrl_c_once_writes_the_true_rows_of_the_running_gradings(tmp_path, jobs, moment,
                                                                   through_make):
    """SIGINT to the process group while ``jobs`` gradings extract their grader, while their
    judges run, or just after a row is written (the next grading then extracts): each grading
    under way is written with its true row, none starts after it, and the resume grades the
    rest alone."""
    sleeps = {"a": 0, "b": 0, "c": 2, "d": 2, "e": 0, "f": 0}
    run = start(tmp_path, sleeps, jobs, through_make)
    if moment == "written":
        wait_for(lambda: len(rows(tmp_path)) >= 1 and markers(tmp_path, "extracting") > jobs)
    else:
        wait_for(lambda: markers(tmp_path, moment) >= jobs)
    stderr = interrupt(run)
    started, kept = markers(tmp_path, "extracting"), rows(tmp_path)
    seen = (sorted(path.name for path in (tmp_path / "tmp").iterdir()),
            {key: (row["status"], row["total"], row["notes"]) for key, row in kept.items()})
    assert all(true_row(row) for row in kept.values()), (seen, stderr[-3000:])
    assert len(kept) == started < len(sleeps), (started, seen, stderr[-3000:])
    stderr, graded = resume(tmp_path, sleeps, jobs)
    assert (f"{started} already graded by this grader, {len(sleeps) - started} to grade"
            in stderr), stderr[-3000:]
    assert sorted(graded) == sorted(sleeps) and all(true_row(row) for row in graded.values())


@pytest.mark.slow  # each zygote imports torch
@pytest.mark.parametrize("signals, signum", [(2, signal.SIGINT), (1, signal.SIGKILL)])
def test_a_grading_cut_short_leaves_no_row_and_the_resume_grades_it(tmp_path, signals, signum):
    """Ctrl-C twice, or the regrade killed (as a power cut ends it), while two judges run: their
    gradings leave no row (nor a crashed one), the finished rows stay, and the resume grades the
    two that were cut short."""
    sleeps = {"a": 0, "b": 0, "c": 30, "d": 30}
    run = start(tmp_path, sleeps, jobs=2)
    wait_for(lambda: markers(tmp_path, "judging") >= 4)
    stderr = interrupt(run, signals, signum)
    assert sorted(rows(tmp_path)) == ["a", "b"] and all(map(true_row, rows(tmp_path).values())), \
        stderr[-3000:]
    sleeps.update(c=0, d=0)
    stderr, graded = resume(tmp_path, sleeps, jobs=2)
    assert "2 already graded by this grader, 2 to grade" in stderr, stderr[-3000:]
    assert all(true_row(row) for row in graded.values()) and len(graded) == 4


def test_a_crashed_row_is_graded_again_by_every_run_and_by_only(tmp_path, monkeypatch, capsys):
    """A crashed row (the grader failed, not the student) is never unchanged: a plain rerun grades
    it again, and so does ``--only`` without ``--force``; an ok row is kept by both."""
    outcomes = {"ann": grading_run.GradingRun({"Linear": 0.0}, None, "", 1.0, False,
                                              error="the judge failed: no traceback"),
                "bo": grading_run.GradingRun({"Linear": 2.0}, GradingReport(), "", 1.0, False)}
    graded = []

    def fake_run(grading, grader_flags="", gradings=1, started=None, zygote=None):
        student = grading.read_text()
        graded.append(student)
        return outcomes[student]

    grade_with(fake_run, monkeypatch, tmp_path)
    handins, out = tmp_path / "handins", tmp_path / "out"
    handins.mkdir()
    for student in outcomes:
        (handins / f"{student}.tar").write_text(student)
    source = files_only_grader(tmp_path)
    rows_now = regrade.regrade(handins, out, source, progress=False, zygotes=False)
    assert rows_now["ann"]["status"] == "crashed" and graded == ["ann", "bo"]
    capsys.readouterr()
    regrade.regrade(handins, out, source, progress=False, zygotes=False)
    err = capsys.readouterr().err
    assert graded[2:] == ["ann"] and "1 to grade" in err, err
    assert "1 it crashed last time (the grader failed, not the student): graded again: ann" \
        in err, err
    regrade.regrade(handins, out, source, progress=False, zygotes=False, only=["ann"])
    assert graded[3:] == ["ann"]
    regrade.regrade(handins, out, source, progress=False, zygotes=False, only=["bo"])
    assert graded[4:] == [], "--only graded an ok row again without --force"
    outcomes["ann"] = outcomes["bo"]
    final = regrade.regrade(handins, out, source, progress=False, zygotes=False)
    assert graded[4:] == ["ann"] and final["ann"]["status"] == "ok"
    regrade.regrade(handins, out, source, progress=False, zygotes=False)
    assert graded[5:] == [], "an ok row was graded again"
