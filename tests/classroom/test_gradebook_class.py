# hw4p1: instructor-only
"""The gradebook's realistic class (in `make test-class`, marker class_fixture): a Gradescope
export of groups, a resubmission, a student in two submissions, the same student under two
differently cased emails, an auditor of another domain, a dropped student, non-ASCII names and
names a spreadsheet would run, late handins with one extension and a grace period, graded by the
regrade (its gradings replaced by the scores each handin names: no training, seconds) and joined
with a Canvas roster. The Canvas import is checked cell by cell against CANVAS_TABLE, written by
hand below.

    .venv/bin/python -m pytest -q -m class_fixture tests/classroom/test_gradebook_class.py
"""
import csv

import pytest

from autograder.classroom import gradebook, regrade, spreadsheet
from tests.classroom.regrade_fakes import fake_grader, graded_export

DOMAIN = "campus.example.edu"
ASSIGNMENT = "HW4P1 (777)"
EXPORTED = "2026-12-08T09:00:00-05:00"  # when the export was made: no submission is later
ROSTER = ("\ufeffStudent,ID,SIS User ID,SIS Login ID,Section,HW3P1 (700)\n"
          "    Points Possible,,,,,100\n"
          "\"Adeyemi, Tolu\",501,31001,tadeyemi@campus.example.edu,S1,90\n"
          "\"Brandt, Lena\",502,31002,lbrandt,S1,81\n"
          "\"Çelik, Emre\",503,31003,ecelik@campus.example.edu,S2,77\n"
          "\"=Dubois, Marc\",504,31004,mdubois@campus.example.edu,S2,60\n"
          "\"Eriksen, Siv\",505,31005,seriksen@campus.example.edu,S1,99\n"
          "\"Fujita, Ren\",506,31006,rfujita@campus.example.edu,S2,85\n"
          "\"Garcia, Inés\",507,31007,igarcia@campus.example.edu,S1,70\n"
          "\"Haddad, Omar\",508,31008,ohaddad@campus.example.edu,S2,64\n"
          "\"Ivanova, Dasha\",509,31009,divanova@campus.example.edu,S1,88\n"
          "\"Jensen, Kai\",510,31010,kjensen@campus.example.edu,S2,91\n"
          "\"Kowalski, Piotr\",511,31011,pkowalski@campus.example.edu,S1,50\n"
          "\"Zhao, Mei\",512,31012,mzhao,S2,73\n")
# submission folder: (submitters as (name, sid, email), created_at, what its grading gives)
SUBMISSIONS = {
    # a group of three, two with no SID: one email in other case, one matched by its login
    "submission_1001": ([("Tolu Adeyemi", "", "TAdeyemi@Campus.Example.edu"),
                         ("Lena Brandt", "", "lbrandt@campus.example.edu"),
                         ("Emre Çelik", "31003", "ecelik@campus.example.edu")],
                        "2026-12-04 20:00:00 -05:00", "88.5"),
    # Siv's resubmission: the later one is graded
    "submission_1002": ([("Siv Eriksen", "31005", "seriksen@campus.example.edu")],
                        "2026-12-03 10:00:00 -05:00", "40"),
    "submission_1003": ([("Siv Eriksen", "31005", "seriksen@campus.example.edu")],
                        "2026-12-04 23:05:00 -05:00", "77"),
    # 6 minutes late: within the 10-minute grace period
    "submission_1004": ([("@Marc Dubois", "31004", "mdubois@campus.example.edu")],
                        "2026-12-05 00:05:00 -05:00", "91"),
    # 13 hours late: one started day, -10%
    "submission_1005": ([("+Ren Fujita", "31006", "rfujita@campus.example.edu")],
                        "2026-12-05 13:00:00 -05:00", "80"),
    # 36 hours late, with 48 hours of extension: on time
    "submission_1006": ([("Inés García", "31007", "igarcia@campus.example.edu")],
                        "2026-12-06 12:00:00 -05:00", "65"),
    # Omar in a group with Dasha and alone: Dasha gets the group's grade, Omar neither
    "submission_1007": ([("Dasha Ivanova", "31009", "divanova@campus.example.edu"),
                         ("Omar Haddad", "31008", "ohaddad@campus.example.edu")],
                        "2026-12-04 18:00:00 -05:00", "70"),
    "submission_1008": ([("Omar Haddad", "31008", "ohaddad@campus.example.edu")],
                        "2026-12-04 19:00:00 -05:00", "95"),
    # Kai twice, under differently cased emails and no SID: two rows, one roster row
    "submission_1009": ([("Kai Jensen", "", "kjensen@campus.example.edu")],
                        "2026-12-04 12:00:00 -05:00", "50"),
    "submission_1010": ([("Kai Jensen", "", "KJensen@campus.example.edu")],
                        "2026-12-04 13:00:00 -05:00", "60"),
    # an auditor whose address has the name of a roster login, at another domain
    "submission_1011": ([("Min Zhao", "", "mzhao@outlook.com")],
                        "2026-12-04 09:00:00 -05:00", "83"),
    # a dropped student (an address a spreadsheet would run)
    "submission_1012": ([("Quinn Baker", "30999", "+qbaker@campus.example.edu")],
                        "2026-12-04 08:00:00 -05:00", "45"),
}
CANVAS_HEADER = ["Student", "ID", "SIS User ID", "SIS Login ID", "Section", ASSIGNMENT]
# The Canvas import, cell by cell, as the file holds it (a formula-like name with its apostrophe).
CANVAS_TABLE = [
    ["Points Possible", "", "", "", "", "100"],
    ["Adeyemi, Tolu", "501", "31001", "tadeyemi@campus.example.edu", "S1", "88.5"],
    ["Brandt, Lena", "502", "31002", "lbrandt", "S1", "88.5"],
    ["Çelik, Emre", "503", "31003", "ecelik@campus.example.edu", "S2", "88.5"],
    ["'=Dubois, Marc", "504", "31004", "mdubois@campus.example.edu", "S2", "91.0"],
    ["Eriksen, Siv", "505", "31005", "seriksen@campus.example.edu", "S1", "77.0"],
    ["Fujita, Ren", "506", "31006", "rfujita@campus.example.edu", "S2", "72.0"],
    ["Garcia, Inés", "507", "31007", "igarcia@campus.example.edu", "S1", "65.0"],
    ["Haddad, Omar", "508", "31008", "ohaddad@campus.example.edu", "S2", ""],
    ["Ivanova, Dasha", "509", "31009", "divanova@campus.example.edu", "S1", "70.0"],
    ["Jensen, Kai", "510", "31010", "kjensen@campus.example.edu", "S2", ""],
    ["Kowalski, Piotr", "511", "31011", "pkowalski@campus.example.edu", "S1", ""],
    ["Zhao, Mei", "512", "31012", "mzhao", "S2", ""],
]


@pytest.mark.class_fixture
def test_the_gradebook_of_a_realistic_class_matches_its_table_cell_by_cell(tmp_path, monkeypatch,
                                                                           capsys):
    grades = graded_export(tmp_path, monkeypatch, SUBMISSIONS)
    rows = regrade.read_rows(grades)
    assert sorted(rows) == sorted([
        "TAdeyemi@Campus.Example.edu", "seriksen@campus.example.edu",
        "mdubois@campus.example.edu", "rfujita@campus.example.edu", "igarcia@campus.example.edu",
        "divanova@campus.example.edu", "ohaddad@campus.example.edu", "kjensen@campus.example.edu",
        "KJensen@campus.example.edu", "mzhao@outlook.com", "+qbaker@campus.example.edu"]), rows
    group = rows["TAdeyemi@Campus.Example.edu"]
    assert (group["name"], group["sid"]) == ("Tolu Adeyemi; Lena Brandt; Emre Çelik",
                                             "; ; 31003"), group
    assert rows["seriksen@campus.example.edu"]["total"] == "77.0"  # the resubmission
    raw = (tmp_path / "regrade/grades.csv").read_text(encoding="utf-8")
    assert "\n'+qbaker@campus.example.edu," in raw and ",'@Marc Dubois," in raw
    capsys.readouterr()  # the hostile key reads back as written: nothing is graded again
    regrade.regrade(tmp_path / "export", tmp_path / "regrade", fake_grader(tmp_path),
                    progress=False)
    assert "11 already graded by this grader, 0 to grade" in capsys.readouterr().err

    roster = tmp_path / "roster.csv"
    roster.write_text(ROSTER, encoding="utf-8")
    extensions = tmp_path / "extensions.csv"
    extensions.write_text("student,hours\nIGARCIA@campus.example.edu,48\n")
    out = tmp_path / "gradebook"
    common = [str(roster), "--grades", str(grades), "--out", str(out), "--assignment",
              ASSIGNMENT, "--domain", DOMAIN, "--extensions", str(extensions),
              "--grace-minutes", "10", "--late-penalty-per-day", "10", "--late-max-days", "3",
              "--exported", EXPORTED]
    with pytest.raises(SystemExit, match="--due 2026-12-04T23:59 has no UTC offset"):
        gradebook.main([*common, "--due", "2026-12-04T23:59"])
    assert not out.exists()
    gradebook.main([*common, "--due", "2026-12-04T23:59", "--timezone", "America/New_York"])

    with open(out / "canvas_import.csv", newline="", encoding="utf-8") as file:
        written = list(csv.reader(file))
    assert written[0] == CANVAS_HEADER
    wrong = [f"row {index} ({expected[0]}), {column}: {got!r}, wanted {want!r}"
             for index, (expected, row) in enumerate(zip(CANVAS_TABLE, written[1:]), start=1)
             for column, want, got in zip(CANVAS_HEADER, expected, row) if got != want]
    assert len(written) - 1 == len(CANVAS_TABLE) and all(len(row) == 6 for row in written)
    assert not wrong, "cells that differ from CANVAS_TABLE:\n  " + "\n  ".join(wrong)

    report = {row["Student"]: row for row in spreadsheet.read_csv(out / "gradebook.csv")[1]}
    assert {name: row["matched_by"] for name, row in report.items()} == {
        "Adeyemi, Tolu": f"email tadeyemi@{DOMAIN}", "Brandt, Lena": f"login lbrandt ({DOMAIN})",
        "Çelik, Emre": "SID 31003", "=Dubois, Marc": "SID 31004", "Eriksen, Siv": "SID 31005",
        "Fujita, Ren": "SID 31006", "Garcia, Inés": "SID 31007",
        "Haddad, Omar": "SID 31008, SID 31008", "Ivanova, Dasha": "SID 31009",
        "Jensen, Kai": f"email kjensen@{DOMAIN}, email kjensen@{DOMAIN}",
        "Kowalski, Piotr": "", "Zhao, Mei": ""}
    assert report["=Dubois, Marc"]["late_rule"] == (
        "0.10 h late, within the 10-minute grace period: on time (due 2026-12-04T23:59:00-05:00)")
    assert report["Fujita, Ren"]["late_rule"] == ("13.02 h late (1 started day, due "
                                                  "2026-12-04T23:59:00-05:00): 1 x 10% of the "
                                                  "total")
    assert report["Garcia, Inés"]["due"] == "2026-12-06T23:59:00-05:00"
    unmatched = (out / "unmatched.txt").read_text(encoding="utf-8")
    for line in (
            "  Haddad, Omar (SIS User ID 31008, SIS Login ID ohaddad@campus.example.edu): "
            "divanova@campus.example.edu by SID 31008; ohaddad@campus.example.edu by SID 31008",
            "  Jensen, Kai (SIS User ID 31010, SIS Login ID kjensen@campus.example.edu): "
            "KJensen@campus.example.edu by email kjensen@campus.example.edu; "
            "kjensen@campus.example.edu by email kjensen@campus.example.edu",
            "  mzhao@outlook.com (mzhao@outlook.com, Min Zhao): no SID; email mzhao@outlook.com "
            "is not on the roster; login not tried (outlook.com is not a course domain)",
            "  +qbaker@campus.example.edu (+qbaker@campus.example.edu, Quinn Baker): SID 30999 "
            "is not on the roster; email +qbaker@campus.example.edu is not on the roster; login "
            "+qbaker (campus.example.edu) is not on the roster",
            "on the roster, with no handin (2):\n  Kowalski, Piotr",
            "  Zhao, Mei (SIS User ID 31012, SIS Login ID mzhao): no grade row"):
        assert line in unmatched, (line, unmatched)
    summary = (out / "summary.txt").read_text(encoding="utf-8")
    assert summary.startswith("12 roster rows: 8 reached by one grade row, 8 with a score to "
                              "import; 2 conflicts (imported for neither), 2 with no handin, 0 "
                              "crashed; 2 grade members reach no roster row\n"), summary
    assert "(1 extensions, 10-minute grace): 1 late with a deduction, 0 whose lateness is unknown" \
        in summary
