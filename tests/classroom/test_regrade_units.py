# hw4p1: instructor-only
"""The regrade's decisions without a grading (autograder/classroom/regrade.py): which handins a
run grades, rescores or keeps (--only, a timeout graded again once), which rows of OUT it keeps
(exactly half of OUT's students gone is still this download, one more is another), what --fresh
moves aside (grades.csv and the feedback folder among them), and the judge's last exception.
Every expected value is worked out by hand here.

    .venv/bin/python -m pytest -q -n 0 tests/classroom/test_regrade_units.py
"""
from pathlib import Path

import pytest

from autograder.classroom import regrade, rescore
from autograder.classroom.grades_csv import RETRIED_NOTE
from autograder.classroom.handins import Handin
from autograder.judging.scoring.report import Status
from hw4lib.file_io import file_sha256


def handins_in(folder: Path, *students: str) -> dict[str, Handin]:
    folder.mkdir(exist_ok=True)
    found = {}
    for student in students:
        (folder / f"{student}.tar").write_bytes(student.encode())
        found[student] = Handin(student, folder / f"{student}.tar", email=f"{student}@x.edu")
    return found


def graded_row(handin: Handin, **cells) -> dict:
    """A row this grader graded from ``handin`` as it is, under no recorded scoring line."""
    return {"student": handin.student, "status": "ok", "handin_sha256": file_sha256(handin.path),
            "grader_sha256": "g", "scoring": "", **cells}


GRADER = rescore.Grader("g", None)


def test_a_run_grades_what_changed_and_a_timeout_once_more(tmp_path):
    handins = handins_in(tmp_path, "ann", "bo", "cy", "di")
    rows = {"ann": graded_row(handins["ann"]),
            "bo": graded_row(handins["bo"], status=Status.TIMEOUT),
            "cy": graded_row(handins["cy"], status=Status.TIMEOUT, notes=f"x; {RETRIED_NOTE}")}
    todo, rescoring, reasons = regrade.to_grade(handins, rows, GRADER, False, None)
    assert sorted(todo) == ["bo", "di"] and rescoring == set()
    assert todo["bo"] == (handins["bo"], file_sha256(handins["bo"].path), RETRIED_NOTE)
    assert todo["di"][2] == ""
    assert (reasons["ann"], reasons["cy"], reasons["di"]) == (rescore.UNCHANGED,
                                                              rescore.UNCHANGED, "not graded yet")


def test_only_grades_the_named_by_key_or_student_and_refuses_an_unknown_name(tmp_path):
    handins = handins_in(tmp_path, "ann", "bo")
    todo, _, reasons = regrade.to_grade(handins, {}, GRADER, False, ["bo"])
    assert list(todo) == ["bo"] and reasons["ann"] == "not named by --only: kept"
    with pytest.raises(SystemExit, match=r"--only: no handin of zed in this download "
                                         r"\(students: ann, bo\)"):
        regrade.to_grade(handins, {}, GRADER, False, ["zed", "bo"])


def test_half_of_out_s_students_gone_is_this_download_and_one_more_is_another(tmp_path, capsys):
    handins = handins_in(tmp_path / "h", "ann", "bo")
    old = {key: {"student": key, "name": "old name"} for key in ("ann", "bo", "cy", "di")}
    kept = regrade.kept_rows(old, handins, "latest", tmp_path, False)
    assert kept == {key: {"student": key, **regrade.identity_of(handins[key], "latest")}
                    for key in ("ann", "bo")}
    assert "2 rows left grades.csv, their handins are not in this download" in \
        capsys.readouterr().err
    with pytest.raises(SystemExit, match="3 of the 4 students graded in .* are not in this "
                                         "download"):
        regrade.kept_rows(old, {"ann": handins["ann"]}, "latest", tmp_path, False)


def test_fresh_moves_every_file_of_out_aside_and_keeps_no_row(tmp_path):
    out = tmp_path / "out"
    (out / "feedback").mkdir(parents=True)
    (out / "feedback/ann.txt").write_text("report")
    for name in ("grades.csv", "summary.txt", "rescore.txt", "adjustments.csv", "other.txt"):
        (out / name).write_text(name)
    old = {"zed": {"student": "zed"}}
    assert regrade.kept_rows(old, handins_in(tmp_path / "h", "ann"), "latest", out, True) == {}
    (moved,) = out.glob("replaced-*")
    assert sorted(path.name for path in moved.iterdir()) == [
        "adjustments.csv", "feedback", "grades.csv", "rescore.txt", "summary.txt"]
    assert (moved / "feedback/ann.txt").read_text() == "report"
    assert sorted(path.name for path in out.iterdir()) == ["other.txt", moved.name]
    assert regrade.kept_rows({}, {}, "latest", out, True) == {}
    assert len(list(out.glob("replaced-*"))) == 1  # nothing to set aside: nothing moved


def test_the_judge_s_last_exception_is_named_and_cut():
    output = ("Traceback\nValueError: first\n  File x\nmodule.KeyError: 'k'\nnot an Error: no\n"
              + "RuntimeError: " + "x" * 300 + "\n")
    assert regrade.last_exception(output) == ("RuntimeError: " + "x" * 300)[:200]
    assert regrade.last_exception("ValueError: a\nKeyboardInterrupt\n") == "KeyboardInterrupt"
    assert regrade.last_exception("all fine\n") == "no traceback in its output"
