# hw4p1: instructor-only
"""The fourth TA check's two cases that need the real judge (issue 59), graded end to end through
``make regrade``: a terminal's Ctrl-C (SIGINT to the whole process group) at JOBS=2 just after a
row is written, and a trained handin with a 205 MiB checkpoint appended last. Every cell named is
checked against the honest handin's own grading (``honest_scores``). The cases that need no
grading are direct tests: tests/classroom/test_regrade_interrupts.py (a fake judge, every moment
of an interrupt), test_adjustments.py, test_sections.py, test_oversized_handin.py.

    .venv/bin/python -m pytest -q -n 0 -m class_fixture tests/classroom/test_term_four_class.py
"""
import os
import shutil
import signal
import subprocess
import tarfile
import time
from pathlib import Path

import pytest

from autograder.classroom import grades_csv, regrade
from autograder.judging.scoring import rubric
from tests.classroom.regrade_fakes import markers, slow_tar
from tests.grader.autograder_helpers import (attack_handin, built_autograder, honest_scores,
                                             session_folder)

REPO = Path(__file__).resolve().parents[2]
MIB = 2**20


def make_regrade(folder: Path, jobs: int) -> subprocess.Popen:
    """``make regrade HANDINS=folder/handins JOBS=... OUT=folder/out`` in a process group of its
    own (as a terminal's foreground job), SIGINT at its default disposition, its gradings in
    ``folder/tmp``, with test_regrade_interrupts' slow ``tar`` (folder/bin) on PATH."""
    return subprocess.Popen(
        ["make", "--no-print-directory", "regrade", f"HANDINS={folder / 'handins'}",
         f"JOBS={jobs}", f"OUT={folder / 'out'}", f"ARGS=--autograder {built_autograder()}"],
        cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, process_group=0,
        env={**os.environ, "TQDM_DISABLE": "1", "TMPDIR": str(folder / "tmp"),
             "PATH": f"{folder / 'bin'}:{os.environ['PATH']}"},
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))


def honest_row(row: dict) -> bool:
    """The honest tiny handin's whole grading: ok, each category its points, no note."""
    return row["status"] == "ok" and row["notes"] == "" and all(
        float(row[category]) == points for category, points in honest_scores().items())


def unlike_honest(rows: dict[str, dict]) -> dict[str, tuple]:
    """Each row that is not :func:`honest_row`'s: its status, notes and category scores."""
    return {student: (row["status"], row["notes"], {c: row[c] for c in honest_scores()})
            for student, row in rows.items() if not honest_row(row)}


@pytest.mark.class_fixture
@pytest.mark.slow
@pytest.mark.long
def test_ctrl_c_to_the_process_group_writes_the_running_gradings_true_rows():
    """The TA's case: SIGINT to `make regrade JOBS=2`'s process group once a row is written and
    the next grading extracts its grader: the gradings under way finish and are written with
    their true rows, none crashed; the resume grades the rest alone."""
    folder = session_folder("hw4p1-term4-interrupt-")
    folder.chmod(0o755)
    handins, out = folder / "handins", folder / "out"
    handins.mkdir()
    (folder / "tmp").mkdir(mode=0o755)
    slow_tar(folder / "bin")
    built = attack_handin(folder / "build", "", None)
    students = [f"student{index}" for index in range(5)]
    for student in students:
        shutil.copy(built, handins / f"{student}.tar")
    run = make_regrade(folder, jobs=2)
    deadline = time.monotonic() + 600
    while not (grades_csv.read_rows(out / "grades.csv")
               and markers(folder, "extracting") > 2) and time.monotonic() < deadline:
        time.sleep(0.05)
    os.killpg(run.pid, signal.SIGINT)
    _, stderr = run.communicate(timeout=600)
    assert "interrupted" in stderr, stderr[-3000:]
    kept = grades_csv.read_rows(out / "grades.csv")
    assert 1 <= len(kept) < len(students), (kept, stderr[-3000:])
    assert all(honest_row(row) for row in kept.values()), (unlike_honest(kept), stderr[-3000:])
    run = make_regrade(folder, jobs=2)
    _, stderr = run.communicate(timeout=1200)
    assert run.returncode == 0, stderr[-3000:]
    assert (f"{len(kept)} already graded by this grader, {len(students) - len(kept)} to grade"
            in stderr), stderr[-3000:]
    rows = grades_csv.read_rows(out / "grades.csv")
    assert sorted(rows) == students and all(honest_row(row) for row in rows.values()), \
        unlike_honest(rows)


@pytest.mark.class_fixture
@pytest.mark.slow
@pytest.mark.long
def test_a_checkpoint_appended_past_the_limit_is_graded_as_the_handin_before_it():
    """The TA's case: the honest handin, and the same with a 205 MiB checkpoint appended last
    (a 205 MiB file): both rows ok with the honest handin's points; the oversized one's
    feedback names the checkpoint as not graded."""
    folder = session_folder("hw4p1-term4-oversized-")
    folder.chmod(0o755)
    handins, out = folder / "handins", folder / "out"
    handins.mkdir()
    built = attack_handin(folder / "build", "", None)
    shutil.copy(built, handins / "honest.tar")
    oversized = shutil.copy(built, handins / "oversized.tar")
    checkpoint = folder / "epoch_12.pt"
    with open(checkpoint, "wb") as file:
        file.truncate(205 * MIB)
    with tarfile.open(oversized, "a") as tar:
        tar.add(checkpoint, "handin/epoch_12.pt")
    assert Path(oversized).stat().st_size > 205 * MIB
    rows = regrade.regrade(handins, out, built_autograder(), jobs=1, progress=False)
    assert honest_row(rows["honest"]) and honest_row(rows["oversized"]), rows
    assert float(rows["oversized"]["total"]) == rubric.added(honest_scores().values())
    feedback = (out / "feedback/oversized.txt").read_text()
    assert "'handin/epoch_12.pt', 205 MiB, and what follows it are not graded" in feedback, \
        feedback[:3000]
