# hw4p1: instructor-only
"""Sections (autograder/classroom/late_policy.py, ``make gradebook ARGS='--sections FILE'``): each
section of the roster's Section column gets its own deadline and, where it differs, its own late
policy; the gradebook says "Section B deadline" (as the roster names it; "section B deadline"
for a roster's "B"), never "(extension)", and a student's extension
counts from their section's deadline. Every score is computed by hand in the test.

    .venv/bin/python -m pytest -q -n 0 tests/classroom/test_sections.py
"""
import csv
from pathlib import Path

import pytest

from autograder.classroom import gradebook, spreadsheet
from autograder.classroom.late_policy import Section

ROSTER = ("Student,ID,SIS User ID,SIS Login ID,Section\n"
          "\"Lee, Ann\",1001,0042,ann@x.edu,Section A\n"
          "\"Chen, Bo\",1002,0043,bo@x.edu,Section B\n"
          "\"Diaz, Cy\",1003,0044,cy@x.edu,section b\n"
          "\"Ng, Di\",1004,0045,di@x.edu,Section B\n"
          "\"Ono, Ed\",1005,0046,ed@x.edu,\n")
GRADES = [  # student, email, status, total, submitted_at
    ("ann@x.edu", "ann@x.edu", "ok", "80", "2026-11-21T10:00:00-05:00"),
    ("bo@x.edu", "bo@x.edu", "ok", "90", "2026-11-22T12:00:00-05:00"),
    ("cy@x.edu", "cy@x.edu", "ok", "50", "2026-11-23T06:00:00-05:00"),
    ("di@x.edu", "di@x.edu", "ok", "70", "2026-11-23T20:00:00-05:00"),
    ("ed@x.edu", "ed@x.edu", "ok", "60", "2026-11-21T10:00:00-05:00"),
]
DUE = "2026-11-21T00:00:00-05:00"
SECTIONS = ("section,due,late_penalty_per_day\n"
            "Section B,2026-11-23T00:00:00-05:00,20\n")


def gradebook_of(tmp_path: Path, sections: str = SECTIONS, extensions: str | None = None,
                 ) -> dict[str, dict]:
    """gradebook.csv's rows by student after `make gradebook` with --due DUE, 10% a day and the
    sections file ``sections`` (and ``extensions``)."""
    (tmp_path / "roster.csv").write_text(ROSTER)
    with open(tmp_path / "grades.csv", "w", newline="") as file:
        writer = csv.writer(file)
        writer.writerow(["student", "email", "status", "total", "submitted_at"])
        writer.writerows(GRADES)
    (tmp_path / "sections.csv").write_text(sections)
    arguments = [str(tmp_path / "roster.csv"), "--grades", str(tmp_path / "grades.csv"),
                 "--out", str(tmp_path / "out"), "--due", DUE, "--late-penalty-per-day", "10",
                 "--sections", str(tmp_path / "sections.csv")]
    if extensions is not None:
        (tmp_path / "extensions.csv").write_text(extensions)
        arguments += ["--extensions", str(tmp_path / "extensions.csv")]
    gradebook.main(arguments)
    return {row["Student"]: row for row in
            spreadsheet.read_csv(tmp_path / "out/gradebook.csv")[1]}


def test_each_section_has_its_deadline_and_its_late_policy(tmp_path):
    book = gradebook_of(tmp_path, extensions="student,hours\ndi@x.edu,24\n")
    b_due = "2026-11-23T00:00:00-05:00"
    expected = {
        # A: the course's deadline and 10% a day; 10 h late: 1 day, 10% of 80 = 8
        "Lee, Ann": ("72.0", DUE, f"10.00 h late (1 started day, due {DUE}): 1 x 10% of the "
                                  f"total"),
        # B: due two days later, on time there
        "Chen, Bo": ("90.0", b_due, f"on time (due {b_due} (Section B deadline))"),
        # B (the roster's case differs): 6 h late, B's 20% a day: 20% of 50 = 10
        "Diaz, Cy": ("40.0", b_due, f"6.00 h late (1 started day, due {b_due} (Section B "
                                    f"deadline)): 1 x 20% of the total"),
        # B with a 24-hour extension, from B's deadline: due 11-24 00:00, on time at 11-23 20:00
        "Ng, Di": ("70.0", "2026-11-24T00:00:00-05:00",
                   "on time (due 2026-11-24T00:00:00-05:00 (extension))"),
        # no section: the course's deadline, 10 h late, 10% of 60 = 6
        "Ono, Ed": ("54.0", DUE, f"10.00 h late (1 started day, due {DUE}): 1 x 10% of the "
                                 f"total"),
    }
    got = {name: (row["score"], row["due"], row["late_rule"]) for name, row in book.items()}
    assert got == expected
    summary = (tmp_path / "out/summary.txt").read_text()
    assert f"lateness from {DUE} (Section B from {b_due}, 1 extensions" in summary


def test_a_section_s_own_grace_and_limit(tmp_path):
    """B: 7 hours of grace (cy, 6 h late: on time) and at most 1 day late (none here)."""
    book = gradebook_of(tmp_path, "section,due,grace_minutes,late_max_days\n"
                                  "Section B,2026-11-23T00:00:00-05:00,420,1\n")
    assert book["Diaz, Cy"]["score"] == "50.0"
    assert "within the 420-minute grace period" in book["Diaz, Cy"]["late_rule"]
    assert book["Lee, Ann"]["score"] == "72.0", "a section's grace reached another section"


def test_a_section_named_by_its_letter_says_section():
    assert Section("B", None).label == "section B"
    assert Section("Section B", None).label == "Section B"


@pytest.mark.parametrize("sections, refusal", [
    ("section,due\nSection C,2026-11-23T00:00:00-05:00\n",
     "line 2: no roster row is in section 'Section C' .*Section A, Section B, section b"),
    ("section,due\nSection B,2026-11-23T00:00:00-05:00\nsection b,2026-11-24T00:00:00-05:00\n",
     "line 3: section 'section b' is given twice"),
    ("section,due\nSection B,2026-11-23\n", "line 2: due 2026-11-23 has no UTC offset"),
    ("section,due,late_penalty_per_day\nSection B,2026-11-23T00:00:00-05:00,ten\n",
     "line 2: late_penalty_per_day 'ten' is not a number"),
    ("section,deadline\n", "a sections file has the columns section and due"),
])
def test_a_sections_file_that_cannot_be_right_is_refused(tmp_path, sections, refusal):
    with pytest.raises(SystemExit, match=refusal):
        gradebook_of(tmp_path, sections)


def test_sections_need_a_course_deadline(tmp_path):
    (tmp_path / "roster.csv").write_text(ROSTER)
    (tmp_path / "sections.csv").write_text(SECTIONS)
    with pytest.raises(SystemExit, match="--sections and --days-grace need --due"):
        gradebook.main([str(tmp_path / "roster.csv"), "--sections",
                        str(tmp_path / "sections.csv")])
