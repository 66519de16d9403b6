# hw4p1: instructor-only
"""The fourth TA check's gradebook (issue 59; in `make test-class`, marker class_fixture): a
Gradescope export of a term with two sections, the second with a later deadline and a steeper
penalty, a group whose members are in different sections, CJK, Arabic and accented names, a
regrade request granted and an integrity deduction in adjustments.csv, and a hand edit of
grades.csv; graded by the regrade (its gradings replaced by the total each handin names, as
test_gradebook_class does: seconds) and joined with a Canvas roster. Every cell of the Canvas
import, of gradebook.csv's lateness and adjustment columns and of Autolab's import is checked
against the tables below, written by hand.

    .venv/bin/python -m pytest -q -n 0 -m class_fixture tests/classroom/test_term_four_gradebook.py
"""
from pathlib import Path

import pytest

from autograder.classroom import gradebook, spreadsheet
from tests.classroom.regrade_fakes import edit_cell, graded_export

DUE = "2026-12-05T00:00:00-05:00"  # the course's (section S1's)
S2_DUE = "2026-12-07T00:00:00-05:00"
ROSTER = ("Student,ID,SIS User ID,SIS Login ID,Section\n"
          "\"李, 明\",601,41001,li.ming@uni.edu,S1\n"
          "\"الحداد, نور\",602,41002,nour@uni.edu,S2\n"
          "\"Müller, Zoë\",603,41003,zoe@uni.edu,S1\n"
          "\"Ruiz, Tomás\",604,41004,tomas@uni.edu,S2\n"
          "\"田中, 愛子\",605,41005,aiko@uni.edu,S2\n"
          "\"Yılmaz, Ömer\",606,41006,omer@uni.edu,S1\n")
SUBMISSIONS = {
    # a group across sections, 36 h after S1's deadline, 36 h before S2's
    "submission_2001": ([("李明", "41001", "li.ming@uni.edu"), ("نور الحداد", "41002", "nour@uni.edu")],
                        "2026-12-06 12:00:00 -05:00", "80"),
    # on time; the regrade request: 55.79 -> 60
    "submission_2002": ([("Zoë Müller", "41003", "zoe@uni.edu")],
                        "2026-12-04 22:00:00 -05:00", "55.79"),
    # 5 h after S2's deadline; an integrity deduction of 10
    "submission_2003": ([("Tomás Ruiz", "41004", "tomas@uni.edu")],
                        "2026-12-07 05:00:00 -05:00", "70"),
    # late for S1's deadline, on time for its own section's
    "submission_2004": ([("田中愛子", "41005", "aiko@uni.edu")],
                        "2026-12-06 20:00:00 -05:00", "90"),
}
SECTIONS = f"section,due,late_penalty_per_day\nS2,{S2_DUE},20\n"
ADJUSTMENTS = ("student,applies_to,delta,set_to,reason,by\n"
               "zoe@uni.edu,total,4.21,,regrade request 7 granted,TA Kim\n"
               "tomas@uni.edu,total,-10,,config copied (integrity case 3),Prof. Lee\n")
S1_RULE = f"due {DUE}"
S2_RULE = f"due {S2_DUE} (section S2 deadline)"
# Student: (total, adjusted_total, adjustments, due, late_rule, score), by hand:
GRADEBOOK_TABLE = {
    # S1: 36 h late, 2 started days x 10% of 80 = 16
    "李, 明": ("80.0", "", "", DUE,
              f"36.00 h late (2 started days, {S1_RULE}): 2 x 10% of the total", "64.0"),
    # S2: the same submission on time
    "الحداد, نور": ("80.0", "", "", S2_DUE, f"on time ({S2_RULE})", "80.0"),
    "Müller, Zoë": ("55.79", "60.0", "total +4.21 (regrade request 7 granted, by TA Kim)", DUE,
                    f"on time ({S1_RULE})", "60.0"),
    # 70 - 10 = 60; 5 h late in S2: 1 x 20% of 60 = 12
    "Ruiz, Tomás": ("70.0", "60.0", "total -10 (config copied (integrity case 3), by Prof. Lee)",
                    S2_DUE, f"5.00 h late (1 started day, {S2_RULE}): 1 x 20% of the total",
                    "48.0"),
    "田中, 愛子": ("90.0", "", "", S2_DUE, f"on time ({S2_RULE})", "90.0"),
    "Yılmaz, Ömer": ("", "", "", "", "", ""),
}
# Autolab's import: each member's email, the five problems (the fake gradings' points are all in
# Linear), then Adjustment: what the total's adjustments add.
AUTOLAB_TABLE = ["aiko@uni.edu,90.0,0,0,0,0,0",
                 "li.ming@uni.edu,80.0,0,0,0,0,0",
                 "nour@uni.edu,80.0,0,0,0,0,0",
                 "tomas@uni.edu,70.0,0.0,0.0,0.0,0.0,-10.0",
                 "zoe@uni.edu,55.79,0.0,0.0,0.0,0.0,4.21"]


@pytest.mark.class_fixture
def test_the_fourth_term_s_gradebook_matches_its_tables_cell_by_cell(tmp_path, monkeypatch):
    grades = graded_export(tmp_path, monkeypatch, SUBMISSIONS)
    (tmp_path / "roster.csv").write_text(ROSTER, encoding="utf-8")
    (tmp_path / "sections.csv").write_text(SECTIONS)
    out = tmp_path / "gradebook"
    arguments = [str(tmp_path / "roster.csv"), "--grades", str(grades), "--out", str(out),
                 "--due", DUE, "--late-penalty-per-day", "10", "--sections",
                 str(tmp_path / "sections.csv"), "--exported", "2026-12-09T00:00:00-05:00"]

    # The TA types the granted request into grades.csv: refused, naming the line that keeps it.
    edit_cell(grades, "zoe@uni.edu", "total", "60")
    with pytest.raises(SystemExit, match=r"total for zoe@uni.edu was edited by hand "
                                         r"\(55.79 -> 60\).*zoe@uni.edu,total,\+4.21,,"):
        gradebook.main(arguments)
    (grades.parent / "adjustments.csv").write_text(ADJUSTMENTS)
    gradebook.main(arguments)

    book = {row["Student"]: row for row in spreadsheet.read_csv(out / "gradebook.csv")[1]}
    got = {name: tuple(row[column] for column in ("total", "adjusted_total", "adjustments",
                                                  "due", "late_rule", "score"))
           for name, row in book.items()}
    assert got == GRADEBOOK_TABLE
    canvas = spreadsheet.read_csv(out / "canvas_import.csv")[1]
    assert {row["Student"]: row["HW4P1"] for row in canvas} == {
        name: cells[-1] for name, cells in GRADEBOOK_TABLE.items()}
    assert sorted((out / "autolab_import.csv").read_text(encoding="utf-8").splitlines()) == \
        AUTOLAB_TABLE
    feedback = grades.parent / "feedback"
    assert (feedback / "zoe@uni.edu.txt").read_text().splitlines()[:3] == [
        "Adjusted by the course staff after grading:",
        "  total +4.21 (regrade request 7 granted, by TA Kim)",
        "Your total after them: 60. The report below is the autograder's, before them."]
    assert (feedback / "aiko@uni.edu.txt").read_text() == "report\n"
    grades_rows = {row["student"]: row for row in spreadsheet.read_csv(Path(grades))[1]}
    assert (grades_rows["zoe@uni.edu"]["total"], grades_rows["zoe@uni.edu"]["adjusted_total"]) \
        == ("55.79", "60.0")
