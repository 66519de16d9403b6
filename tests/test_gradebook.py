# hw4p1: instructor-only
"""Tests of the gradebook join (autograder/gradebook.py): a Canvas roster export and a regrade's
grades.csv make a CSV in Canvas's Gradebook import format, with every student accounted for and
the late policy applied only when asked.

    python -m tests.test_gradebook     (or: .venv/bin/python -m pytest -q tests/test_gradebook.py)
"""
import csv
from datetime import datetime
from pathlib import Path

import pytest

from autograder import gradebook
from tests.testing_framework import rubric, run_module

RUBRIC = {"Gradebook": 0}
# Canvas's Gradebook export: a BOM, the five identity columns, an assignment column, then the
# Points Possible row.
ROSTER = ("\ufeffStudent,ID,SIS User ID,SIS Login ID,Section,Quiz 1 (111)\n"
          "    Points Possible,,,,,10\n"
          "\"Lee, Ann\",1001,0042,ann@x.edu,S1,9\n"
          "\"Chen, Bo\",1002,0043,bchen,S1,8\n"
          "\"Diaz, Cy\",1003,0044,cy@x.edu,S2,7\n"
          "\"Ng, Di\",1004,0045,di@x.edu,S2,6\n"
          "\"Ono, Ed\",1005,0046,ed@x.edu,S2,5\n")
GRADES = [  # student, email, sid, status, total, submitted_at
    ("ann@x.edu", "ann@x.edu", "", "ok", "90.5", "2026-11-20T23:59:00-05:00"),
    ("submission_7", "bchen@x.edu", "", "ok", "80", "2026-11-21T00:30:00-05:00"),
    ("cy-folder", "", "0044", "invalid", "0", "2026-11-22T12:00:00-05:00"),
    ("di@x.edu", "di@x.edu", "", "crashed", "0", ""),
    ("zed@x.edu", "zed@x.edu", "", "ok", "70", ""),
]


def write_inputs(tmp_path: Path) -> tuple[Path, Path]:
    roster = tmp_path / "roster.csv"
    roster.write_text(ROSTER, encoding="utf-8")
    grades = tmp_path / "grades.csv"
    with open(grades, "w", newline="") as file:
        writer = csv.writer(file)
        writer.writerow(["student", "email", "sid", "status", "total", "submitted_at"])
        writer.writerows(GRADES)
    return roster, grades


@rubric("Gradebook")
def test_the_import_file_is_canvas_format_and_every_student_is_accounted_for(tmp_path):
    roster, grades = write_inputs(tmp_path)
    gradebook.main([str(roster), "--grades", str(grades), "--out", str(tmp_path / "out"),
                    "--assignment", "HW4P1 (12345)"])
    with open(tmp_path / "out/canvas_import.csv", newline="") as file:
        written = list(csv.reader(file))
    assert written[0] == ["Student", "ID", "SIS User ID", "SIS Login ID", "Section",
                          "HW4P1 (12345)"]
    assert written[1][0] == "Points Possible" and written[1][-1] == "100"
    with open(roster, newline="", encoding="utf-8-sig") as file:
        exported = [row for row in csv.reader(file)][2:]
    assert [row[:5] for row in written[2:]] == [row[:5] for row in exported]  # copied as is
    scores = {row[0]: row[5] for row in written[2:]}
    # Ann by email, Bo by login name, Cy by SID; Di crashed (blank), Ed handed nothing in.
    assert scores == {"Lee, Ann": "90.5", "Chen, Bo": "80.0", "Diaz, Cy": "0.0", "Ng, Di": "",
                      "Ono, Ed": ""}
    unmatched = (tmp_path / "out/unmatched.txt").read_text()
    assert "no roster row matches (1):\n  zed@x.edu\n" in unmatched
    assert "with no handin (1):\n  Ono, Ed" in unmatched
    with open(tmp_path / "out/gradebook.csv", newline="") as file:
        report = {row["Student"]: row for row in csv.DictReader(file)}
    assert report["Lee, Ann"]["submitted_at"] == "2026-11-20T23:59:00-05:00"
    assert report["Ng, Di"]["status"] == "crashed" and report["Ono, Ed"]["status"] == "no handin"


@rubric("Gradebook")
def test_the_late_policy_is_applied_only_when_given(tmp_path):
    """Due 2026-11-21 00:00 -05:00, 10% per started day, 0 after 1 day: Ann is on time, Bo 30
    minutes late (-10% of 80), Cy 36 hours late (0); without a policy nothing changes."""
    roster, grades = write_inputs(tmp_path)
    due = "2026-11-21T00:00:00-05:00"
    gradebook.main([str(roster), "--grades", str(grades), "--out", str(tmp_path / "late"),
                    "--due", due, "--late-penalty-per-day", "10", "--late-max-days", "1"])
    with open(tmp_path / "late/gradebook.csv", newline="") as file:
        report = {row["Student"]: row for row in csv.DictReader(file)}
    assert (report["Lee, Ann"]["late_hours"], report["Lee, Ann"]["score"]) == ("0.0", "90.5")
    assert (report["Chen, Bo"]["late_hours"], report["Chen, Bo"]["late_deduction"],
            report["Chen, Bo"]["score"]) == ("0.5", "8.0", "72.0")
    assert report["Diaz, Cy"]["late_hours"] == "36.0"
    assert report["Ng, Di"]["late_deduction"] == "time unknown"
    assert gradebook.late_deduction(50, 49, 10, 3) == 15.0  # 3 started days
    assert gradebook.late_deduction(50, 73, 10, 3) == 50  # past the last day
    assert gradebook.late_hours("2026-11-21T00:00:00", datetime.fromisoformat(due)) is None
    gradebook.main([str(roster), "--grades", str(grades), "--out", str(tmp_path / "plain"),
                    "--due", due])
    with open(tmp_path / "plain/gradebook.csv", newline="") as file:
        assert {row["Student"]: row["score"] for row in csv.DictReader(file)}["Chen, Bo"] == "80.0"
    with pytest.raises(SystemExit, match="needs --due"):
        gradebook.main([str(roster), "--grades", str(grades), "--late-penalty-per-day", "5"])


@rubric("Gradebook")
def test_a_roster_that_is_not_a_canvas_export_is_refused(tmp_path):
    (tmp_path / "roster.csv").write_text("name,email\nAnn,ann@x.edu\n")
    with pytest.raises(SystemExit, match="no Student, ID, SIS User ID, SIS Login ID, Section"):
        gradebook.read_roster(tmp_path / "roster.csv")


if __name__ == "__main__":
    run_module(__name__)
