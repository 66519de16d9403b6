# hw4p1: instructor-only
"""Tests of the bulk regrade (autograder/regrade.py): both download layouts, one row per student,
faults isolated between concurrent gradings, resumable, a summary.

    python -m tests.test_regrade     (or: .venv/bin/python -m pytest -q tests/test_regrade.py)
"""
import csv
import json
import shutil
from pathlib import Path

import pytest

from autograder import regrade, rubric
from tests.test_autograder import (MYTORCH_ZERO, attack_handin, built_autograder, honest_scores,
                                   session_folder)
from tests.testing_framework import rubric as rubric_category, run_module

RUBRIC = {"Regrade": 0}
REPO = Path(__file__).resolve().parents[1]
HANG = "while True:\n    pass\n"
EXHAUST_MEMORY = "_blocks = []\nwhile True:\n    _blocks.append(bytearray(256 * 2**20))\n"
FORK_BOMB = """
import os
while True:
    try:
        os.fork()
    except OSError:
        pass
"""


@rubric_category("Regrade")
def test_both_download_layouts_name_each_student_once(tmp_path):
    (tmp_path / "ann@x.edu_3_handin.tar").write_bytes(b"")
    (tmp_path / "bo.tar.gz").write_bytes(b"")
    (tmp_path / "notes.txt").write_text("not a handin")
    (tmp_path / "cy").mkdir()
    (tmp_path / "cy/handin.tar").write_bytes(b"")
    (tmp_path / "cy/submission_metadata.yml").write_text("")
    (tmp_path / "di").mkdir()
    (tmp_path / "di/my-upload.zip").write_bytes(b"")
    (tmp_path / "empty").mkdir()
    found = regrade.find_handins(tmp_path)
    assert found == {"ann@x.edu": tmp_path / "ann@x.edu_3_handin.tar", "bo": tmp_path / "bo.tar.gz",
                     "cy": tmp_path / "cy/handin.tar", "di": tmp_path / "di/my-upload.zip"}, found
    (tmp_path / "bo").mkdir()
    (tmp_path / "bo/handin.tar").write_bytes(b"")
    with pytest.raises(SystemExit, match="two handins for bo"):
        regrade.find_handins(tmp_path)


@pytest.mark.slow
@rubric_category("Regrade")
def test_hostile_handins_change_no_other_row_and_a_rerun_resumes(tmp_path, capsys):
    """Three honest handins among one that hangs, one that exhausts its memory and one that forks
    without end, graded two at a time: every honest row is the honest scores; the others lose
    only mytorch. A rerun grades nothing; a changed handin alone is graded again."""
    folder = session_folder("hw4p1-regrade-")
    folder.chmod(0o755)
    handins = folder / "handins"
    handins.mkdir()
    plants = {"hang": HANG, "memory": EXHAUST_MEMORY, "forks": FORK_BOMB}
    for student, init in {"honest1": "", "honest2": "", "honest3": "", **plants}.items():
        built = attack_handin(folder / "build" / student, init, None)
        if student in ("honest2", "forks"):  # Gradescope's layout
            (handins / student).mkdir()
            shutil.copy(built, handins / student / "handin.tar")
        else:  # Autolab's
            shutil.copy(built, handins / f"{student}_1_handin.tar")
    out = folder / "out"
    rows = regrade.regrade(handins, out, built_autograder(), jobs=2,
                           grader_flags="--mytorch-timeout 5", progress=False)
    honest = honest_scores()
    assert sorted(rows) == sorted(["honest1", "honest2", "honest3", *plants]), sorted(rows)
    for student, row in rows.items():
        scores = {category: float(row[category]) for category in rubric.RUBRIC}
        expected = honest if student.startswith("honest") else {**MYTORCH_ZERO,
                                                                "LanguageModel": honest["LanguageModel"]}
        assert scores == expected, (student, row)
        assert float(row["total"]) == pytest.approx(sum(expected.values()))
        last_line = (out / "feedback" / f"{student}.txt").read_text().splitlines()[-1]
        assert json.loads(last_line)["scores"] == scores, student
    statuses = {student: row["status"] for student, row in rows.items()}
    assert statuses.pop("memory") in ("ok", "timeout"), rows["memory"]  # refused, or thrashing
    assert statuses == {"honest1": "ok", "honest2": "ok", "honest3": "ok", "hang": "timeout",
                        "forks": "timeout"}
    assert all(float(rows[s]["perplexity_recomputed"]) > 1 and rows[s]["tokenizer"] == "char"
               for s in rows)
    with open(out / "grades.csv", newline="") as file:
        written = list(csv.DictReader(file))
    assert [row["student"] for row in written] == sorted(rows)
    assert (out / "summary.png").stat().st_size > 1000
    summary = (out / "summary.txt").read_text()
    assert summary.startswith("6 handins: ") and "0 invalid" in summary and "0 crashed" in summary

    capsys.readouterr()
    regrade.regrade(handins, out, built_autograder(), jobs=2, progress=False)
    assert "6 already graded by this grader, 0 to grade" in capsys.readouterr().err
    shutil.copy(attack_handin(folder / "build" / "changed", "", None),
                handins / "hang_1_handin.tar")
    rows = regrade.regrade(handins, out, built_autograder(), jobs=2, progress=False)
    assert "5 already graded by this grader, 1 to grade" in capsys.readouterr().err
    assert rows["hang"]["status"] == "ok" and float(rows["hang"]["total"]) == sum(honest.values())



@rubric_category("Regrade")
def test_the_likely_causes_are_listed_per_student_and_counted_for_the_class(tmp_path):
    tests = [{"name": "a", "family": "sdpa-scale"}, {"name": "b", "family": "sdpa-scale"},
             {"name": "c", "family": ""}, {"name": "d", "family": "linear-bias"},
             {"name": "e", "family": "not a family; =cmd"}, "not a test"]
    assert regrade.likely_causes({"tests": tests}) == ["linear-bias", "sdpa-scale"]
    assert regrade.likely_causes({"tests": None}) == []
    rows = {student: {"student": student, "status": "ok", "total": "50", "likely_causes": causes}
            for student, causes in (("ann", "linear-bias sdpa-scale"), ("bob", "sdpa-scale"),
                                    ("cy", ""))}
    summary = regrade.summarize(rows, tmp_path)
    assert "likely causes of failed hidden tests (students): sdpa-scale 2, linear-bias 1" in summary
    assert "likely causes" not in regrade.summarize({"cy": rows["cy"]}, tmp_path)


@pytest.mark.slow
@rubric_category("Regrade")
def test_ctrl_c_keeps_every_finished_row_and_the_rerun_goes_on(tmp_path, capsys):
    """SIGINT once the first row is written: the run waits for the grading under way, exits 130,
    and leaves a CSV whose every row is whole; a rerun grades only the rest."""
    import os
    import signal
    import subprocess
    import sys
    import time

    folder = session_folder("hw4p1-regrade-interrupt-")
    folder.chmod(0o755)
    handins = folder / "handins"
    handins.mkdir()
    for index in range(3):
        shutil.copy(attack_handin(folder / "build" / str(index), "", None),
                    handins / f"student{index}.tar")
    out = folder / "out"
    run = subprocess.Popen([sys.executable, "-m", "autograder.regrade", str(handins), "--out",
                            str(out), "--autograder", str(built_autograder())],
                           cwd=REPO, env={**os.environ, "TQDM_DISABLE": "1"},
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 300
    while not regrade.read_rows(out / "grades.csv") and time.monotonic() < deadline:
        time.sleep(0.2)
    run.send_signal(signal.SIGINT)
    _, stderr = run.communicate(timeout=300)
    assert run.returncode == 130, stderr[-2000:]
    assert "interrupted" in stderr, stderr[-2000:]
    kept = regrade.read_rows(out / "grades.csv")
    assert 1 <= len(kept) < 3, kept
    assert all(row["status"] == "ok" and float(row["total"]) == sum(honest_scores().values())
               for row in kept.values()), kept
    capsys.readouterr()
    rows = regrade.regrade(handins, out, built_autograder(), progress=False)
    assert f"{len(kept)} already graded by this grader, {3 - len(kept)} to grade" in \
        capsys.readouterr().err
    assert len(rows) == 3 and all(row["status"] == "ok" for row in rows.values())


if __name__ == "__main__":
    run_module(__name__)
