# hw4p1: instructor-only
"""Tests of the gradebook join (autograder/classroom/gradebook.py) and of the class tools' CSV writer
(autograder/classroom/spreadsheet.py): a Canvas roster export and a regrade's grades.csv make a CSV in
Canvas's Gradebook import format, each cell reached by one listed rule, every other case listed,
the late policy applied only when asked and never switched off by a deadline without an offset,
and no cell a spreadsheet runs. (The realistic class of these cases is
tests/classroom/test_gradebook_class.py, in `make test-class`.)

    .venv/bin/python -m pytest -q tests/classroom/test_gradebook.py
"""
import csv
from pathlib import Path

import pytest

from autograder.classroom import gradebook, grades_csv, handins, late_policy, regrade, spreadsheet

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
DUE = "2026-11-21T00:00:00-05:00"


def write_inputs(tmp_path: Path, grades=GRADES) -> tuple[Path, Path]:
    roster = tmp_path / "roster.csv"
    roster.write_text(ROSTER, encoding="utf-8")
    path = tmp_path / "grades.csv"
    with open(path, "w", newline="") as file:
        writer = csv.writer(file)
        writer.writerow(["student", "email", "sid", "status", "total", "submitted_at"])
        writer.writerows(grades)
    return roster, path


def report_of(out: Path) -> dict[str, dict]:
    return {row["Student"]: row for row in spreadsheet.read_csv(out / "gradebook.csv")[1]}


def test_the_import_file_is_canvas_format_and_every_student_is_accounted_for(tmp_path):
    roster, grades = write_inputs(tmp_path)
    gradebook.main([str(roster), "--grades", str(grades), "--out", str(tmp_path / "out"),
                    "--assignment", "HW4P1 (12345)", "--domain", "x.edu"])
    with open(tmp_path / "out/canvas_import.csv", newline="") as file:
        written = list(csv.reader(file))
    assert written[0] == ["Student", "ID", "SIS User ID", "SIS Login ID", "Section",
                          "HW4P1 (12345)"]
    assert written[1][0] == "Points Possible" and written[1][-1] == "100"
    with open(roster, newline="", encoding="utf-8-sig") as file:
        exported = [row for row in csv.reader(file)][2:]
    assert [row[:5] for row in written[2:]] == [row[:5] for row in exported]  # copied as is
    scores = {row[0]: row[5] for row in written[2:]}
    # Ann by email, Bo by login name (x.edu is the course's domain), Cy by SID; Di crashed
    # (blank), Ed handed nothing in (blank).
    assert scores == {"Lee, Ann": "90.5", "Chen, Bo": "80.0", "Diaz, Cy": "0.0", "Ng, Di": "",
                      "Ono, Ed": ""}
    report = report_of(tmp_path / "out")
    assert {name: row["matched_by"] for name, row in report.items()} == {
        "Lee, Ann": "email ann@x.edu", "Chen, Bo": "login bchen (x.edu)", "Diaz, Cy": "SID 0044",
        "Ng, Di": "email di@x.edu", "Ono, Ed": ""}
    assert report["Lee, Ann"]["submitted_at"] == "2026-11-20T23:59:00-05:00"
    assert report["Ng, Di"]["status"] == "crashed" and report["Ono, Ed"]["status"] == "no handin"
    unmatched = (tmp_path / "out/unmatched.txt").read_text()
    assert ("no roster row matches (1):\n  zed@x.edu (zed@x.edu): no SID; email zed@x.edu is not "
            "on the roster; login zed (x.edu) is not on the roster\n") in unmatched
    assert "with no handin (1):\n  Ono, Ed (SIS User ID 0046" in unmatched
    assert "crashed (1):\n  Ng, Di (SIS User ID 0045, SIS Login ID di@x.edu): di@x.edu" in unmatched
    assert "ARGS='--only di@x.edu'" in unmatched
    summary = (tmp_path / "out/summary.txt").read_text()
    assert "lateness not checked (no --due)" in summary and "then: check" in summary
    # di@x.edu's row has no version: not Autolab's, so Autolab is not named as the cause
    assert "  1 handin has no submission time in the download (a folder" in summary
    assert "Autolab" not in summary


def test_a_login_matches_only_for_the_course_domain(tmp_path):
    """Without --domain, bchen@x.edu does not reach the roster's bchen; an auditor's
    bchen@gmail.com never does, even with --domain x.edu."""
    roster, grades = write_inputs(tmp_path)
    gradebook.main([str(roster), "--grades", str(grades), "--out", str(tmp_path / "plain")])
    assert report_of(tmp_path / "plain")["Chen, Bo"]["status"] == "no handin"
    assert ("submission_7): no SID; email bchen@x.edu is not on the roster; login not tried "
            "(x.edu is not a course domain: --domain gives them)"
            in (tmp_path / "plain/unmatched.txt").read_text())
    roster, grades = write_inputs(tmp_path, [("bchen@gmail.com", "bchen@gmail.com", "", "ok",
                                              "50", "")])
    gradebook.main([str(roster), "--grades", str(grades), "--out", str(tmp_path / "auditor"),
                    "--domain", "x.edu", "--missing", "zero"])
    report = report_of(tmp_path / "auditor")
    assert report["Chen, Bo"]["status"] == "no handin" and report["Chen, Bo"]["score"] == "0"
    assert "login not tried (gmail.com is not a course domain)" in (
        tmp_path / "auditor/unmatched.txt").read_text()


def test_a_group_fills_every_member_and_a_contested_roster_row_imports_neither(tmp_path):
    """A group row (Ann by SID, Cy by email) fills both cells; Bo is reached by a group row and
    by his own row (two grade rows: a conflict, blank, both listed); two rows with the same
    email in different case reach Di (a conflict too)."""
    grades = [("ann@x.edu", "ann@x.edu; cy@x.edu", "0042; ", "ok", "60", ""),
              ("bo-group", "bchen@x.edu; zed@x.edu", "; 0099", "ok", "70", ""),
              ("bo-alone", "bchen@x.edu", "", "ok", "20", ""),
              ("di@x.edu", "di@x.edu", "", "ok", "30", ""),
              ("DI@X.EDU", "DI@X.EDU", "", "ok", "0", "")]
    roster, path = write_inputs(tmp_path, grades)
    result = gradebook.join(gradebook.read_roster(roster)[0],
                            spreadsheet.read_csv(path)[1], ("x.edu",))
    scores = {row["Student"]: (row["status"], row["score"]) for row in result.rows}
    assert scores == {"Lee, Ann": ("ok", 60.0), "Chen, Bo": ("conflict", ""),
                      "Diaz, Cy": ("ok", 60.0), "Ng, Di": ("conflict", ""),
                      "Ono, Ed": ("no handin", "")}
    conflicts = {roster_row["Student"]: sorted(grades_csv.row_key(row) for row, _ in reached)
                 for roster_row, reached in result.conflicts}
    assert conflicts == {"Chen, Bo": ["bo-alone", "bo-group"], "Ng, Di": ["DI@X.EDU", "di@x.edu"]}
    assert [(row["student"], member["sid"]) for row, member, _ in result.unmatched] == [
        ("bo-group", "0099")]
    text = gradebook.unmatched_text(result, "blank")
    assert "Chen, Bo (SIS User ID 0043, SIS Login ID bchen): bo-group by login bchen (x.edu); " \
           "bo-alone by login bchen (x.edu)" in text


def test_every_version_graded_imports_the_highest(tmp_path):
    rows = [{"student": "ann@x.edu", "email": "", "sid": "", "version": v,
             "versions_graded": "all", "status": "ok", "total": t}
            for v, t in (("2", "50"), ("10", "80"), ("9", "99"))]
    roster, _ = write_inputs(tmp_path)
    result = gradebook.join(gradebook.read_roster(roster)[0], rows)
    assert result.rows[0]["score"] == 80.0 and result.rows[0]["handin"] == "ann@x.edu#10"
    assert sorted(grades_csv.row_key(row) for row in result.not_imported) == [
        "ann@x.edu#2", "ann@x.edu#9"]


def test_the_late_policy_is_applied_only_when_given(tmp_path):
    """Due 2026-11-21 00:00 -05:00, 10% per started day, 0 after 1 day: Ann is on time, Bo 30
    minutes late (-10% of 80), Cy 36 hours late (0); without a policy nothing changes."""
    roster, grades = write_inputs(tmp_path)
    gradebook.main([str(roster), "--grades", str(grades), "--out", str(tmp_path / "late"),
                    "--due", DUE, "--late-penalty-per-day", "10", "--late-max-days", "1",
                    "--domain", "x.edu"])
    report = report_of(tmp_path / "late")
    assert (report["Lee, Ann"]["late_hours"], report["Lee, Ann"]["score"]) == ("0.0", "90.5")
    assert report["Lee, Ann"]["late_rule"] == f"on time (due {DUE})"
    assert (report["Chen, Bo"]["late_hours"], report["Chen, Bo"]["late_deduction"],
            report["Chen, Bo"]["score"]) == ("0.5", "8.0", "72.0")
    assert report["Chen, Bo"]["late_rule"] == (f"0.50 h late (1 started day, due {DUE}): "
                                               f"1 x 10% of the total")
    assert report["Diaz, Cy"]["late_hours"] == "36.0"
    assert report["Diaz, Cy"]["late_rule"].endswith("more than 1 days late: scores 0")
    assert report["Ng, Di"]["late_rule"].startswith("time unknown: the download has no "
                                                    "submission time; imported without")
    assert late_policy.late_deduction(50, 49, 10, 3) == 15.0  # 3 started days
    assert late_policy.late_deduction(50, 73, 10, 3) == 50  # past the last day
    assert late_policy.late_deduction(50, 73, 0, 3) == 50  # a cut-off without a daily penalty
    assert late_policy.late_deduction(50, 71, 0, 3) == 0.0
    hours, deduction, rule = late_policy.lateness("2026-11-21T00:00:00", late_policy.parse_time(
        DUE, None, "--due"), False, 50, late_policy.Lateness())
    assert (hours, deduction) == (None, 0.0) and "is not a time with a UTC offset" in rule
    gradebook.main([str(roster), "--grades", str(grades), "--out", str(tmp_path / "plain"),
                    "--due", DUE, "--domain", "x.edu"])
    assert report_of(tmp_path / "plain")["Chen, Bo"]["score"] == "80.0"
    for flags in (["--late-penalty-per-day", "5"], ["--late-max-days", "2"],
                  ["--grace-minutes", "5"], ["--extensions", "x.csv"]):
        with pytest.raises(SystemExit, match="need --due"):
            gradebook.main([str(roster), "--grades", str(grades), *flags])


def test_a_deadline_without_an_offset_is_refused_or_placed_by_timezone(tmp_path):
    roster, grades = write_inputs(tmp_path)
    with pytest.raises(SystemExit, match=r"has no UTC offset.*--timezone NAME"):
        gradebook.main([str(roster), "--grades", str(grades), "--out", str(tmp_path / "x"),
                        "--due", "2026-11-21T00:00:00"])
    with pytest.raises(SystemExit, match="not a time zone this machine knows"):
        gradebook.main([str(roster), "--grades", str(grades), "--due", DUE,
                        "--timezone", "Mars/Olympus"])
    # New York is 5 hours behind UTC in November: the same deadline as DUE.
    gradebook.main([str(roster), "--grades", str(grades), "--out", str(tmp_path / "tz"),
                    "--due", "2026-11-21T00:00", "--timezone", "America/New_York",
                    "--domain", "x.edu"])
    assert report_of(tmp_path / "tz")["Chen, Bo"]["late_hours"] == "0.5"


def test_extensions_and_a_grace_period(tmp_path):
    """Bo (30 minutes late) is within a 45-minute grace; Cy (36 h late) has 48 extra hours
    (on time), Ann a new deadline a day earlier (so 23.98 h late: one started day, -10%)."""
    roster, grades = write_inputs(tmp_path)
    extensions = tmp_path / "extensions.csv"
    extensions.write_text("student,due,hours\n0044,,48\nANN@x.edu,2026-11-20T00:00:00,\n")
    gradebook.main([str(roster), "--grades", str(grades), "--out", str(tmp_path / "ext"),
                    "--due", DUE, "--timezone", "America/New_York", "--extensions",
                    str(extensions), "--grace-minutes", "45", "--late-penalty-per-day", "10",
                    "--domain", "x.edu"])
    report = report_of(tmp_path / "ext")
    assert (report["Chen, Bo"]["score"], report["Chen, Bo"]["late_rule"]) == (
        "80.0", f"0.50 h late, within the 45-minute grace period: on time (due {DUE})")
    assert report["Diaz, Cy"]["due"] == "2026-11-23T00:00:00-05:00"
    assert report["Diaz, Cy"]["late_rule"].startswith("on time (due 2026-11-23T00:00:00-05:00 "
                                                      "(extension))")
    assert (report["Lee, Ann"]["late_hours"], report["Lee, Ann"]["score"]) == ("23.98", "81.45")
    for text, error in (("student,due\nnobody@x.edu,2026-11-22T00:00:00-05:00\n", "on no roster"),
                        ("student,due,hours\n0042,,\n", "not neither"),
                        ("student,hours\n0042,two\n", "is not a number"),
                        ("student,hours\n0042,1\nann@x.edu,2\n", "a second row for"),
                        ("name,days\n", "has the columns student and due, hours or days; it has name, days")):
        extensions.write_text(text)
        with pytest.raises(SystemExit, match=error):
            gradebook.main([str(roster), "--grades", str(grades), "--due", DUE,
                            "--extensions", str(extensions)])


def test_a_groups_lateness_is_each_members_own(tmp_path):
    """Ann and Cy hand in together 10 hours late; Cy has 24 more hours: Ann loses 10% of 60,
    Cy nothing."""
    roster, _ = write_inputs(tmp_path)
    students = gradebook.read_roster(roster)[0]
    due = late_policy.parse_time(DUE, None, "--due")
    policy = late_policy.Lateness(due, {2: late_policy.parse_time("2026-11-22T00:00:00-05:00", None,
                                                              "due")}, per_day=10)
    group = {"student": "ann@x.edu", "email": "ann@x.edu; cy@x.edu", "sid": "; ",
             "status": "ok", "total": "60", "submitted_at": "2026-11-21T10:00:00-05:00"}
    rows = {row["Student"]: row for row in gradebook.join(students, [group], (), policy).rows}
    assert (rows["Lee, Ann"]["score"], rows["Diaz, Cy"]["score"]) == (54.0, 60.0)
    assert rows["Diaz, Cy"]["late_rule"] == "on time (due 2026-11-22T00:00:00-05:00 (extension))"


def test_a_roster_that_is_not_a_canvas_export_is_refused(tmp_path):
    (tmp_path / "roster.csv").write_text("name,email\nAnn,ann@x.edu\n")
    with pytest.raises(SystemExit, match="no Student, ID, SIS User ID, SIS Login ID, Section"):
        gradebook.read_roster(tmp_path / "roster.csv")


def test_a_member_whose_sid_and_email_reach_different_students_is_imported_for_neither(tmp_path):
    """Cy's submission carries Ann's SID (a typo in the platform's roster): SID and email reach
    two roster rows, so neither cell gets Cy's grade, nor a 0 with --missing zero; both rows
    are conflicts, listed with both rules."""
    roster, grades = write_inputs(tmp_path, [("cy@x.edu", "cy@x.edu", "0042", "ok", "80", "")])
    result = gradebook.join(gradebook.read_roster(roster)[0], spreadsheet.read_csv(grades)[1],
                            missing="zero")
    scores = {row["Student"]: (row["status"], row["score"]) for row in result.rows}
    assert scores["Lee, Ann"] == scores["Diaz, Cy"] == ("conflict", "")
    assert scores["Chen, Bo"] == ("no handin", 0) and result.unmatched == []
    assert [roster_row["Student"] for roster_row, _ in result.conflicts] == ["Lee, Ann",
                                                                           "Diaz, Cy"]
    [(_, rule)] = result.conflicts[0][1]
    assert "SID 0042 and email cy@x.edu reach different roster rows" in rule, rule


def test_extra_hours_are_hours_across_a_change_of_daylight_saving_time(tmp_path):
    """New York leaves daylight saving time on 2026-11-01: 24 hours after 2026-10-31 12:00 EDT
    (16:00 UTC) is 2026-11-01 11:00 EST, not 12:00 (25 hours)."""
    roster, _ = write_inputs(tmp_path)
    extensions = tmp_path / "extensions.csv"
    extensions.write_text("student,hours\n0042,24\n")
    zone = late_policy.time_zone("America/New_York")
    due = late_policy.parse_time("2026-10-31T12:00", zone, "--due")
    deadlines = late_policy.read_extensions(extensions, gradebook.read_roster(roster)[0], due, zone)
    assert deadlines[0].timestamp() - due.timestamp() == 24 * 3600
    assert deadlines[0].isoformat() == "2026-11-01T11:00:00-05:00"


def test_a_file_that_is_not_utf8_or_not_a_grades_csv_is_refused_naming_the_fix(tmp_path):
    """A roster or extensions file saved by Excel as "CSV (Comma delimited)" (cp1252), and a
    --grades file that is not the regrade's grades.csv, end with an error naming the fix, not a
    traceback nor an import of blanks."""
    roster, grades = write_inputs(tmp_path)
    latin = tmp_path / "latin.csv"
    latin.write_bytes(ROSTER.replace("\ufeff", "").replace("Lee", "Müller").encode("cp1252"))
    with pytest.raises(SystemExit, match=r"latin.csv is not UTF-8.*CSV UTF-8"):
        gradebook.main([str(latin), "--grades", str(grades), "--out", str(tmp_path / "out")])
    for text, error in (("First Name,Last Name,SID,Total Score\nAnn,Lee,0042,90\n",
                         "has no student, status, total column"),
                        ("student,status,total\nann@x.edu,ok,\n",
                         "line 2: total '' of ann@x.edu is not a number")):
        grades.write_text(text)
        with pytest.raises(SystemExit, match=error):
            gradebook.main([str(roster), "--grades", str(grades), "--out", str(tmp_path / "out")])


FORMULAS = ["=HYPERLINK(\"http://x\",\"y\")", "+1 555", "-eve@x.edu", "@SUM(A1)", "\t=1", "\r=1",
            "=", "'=already", "'", "''"]  # the apostrophes are doubled, for the round trip
PLAIN = ["Zoë Ångström", "O'Hara", "plain", "3.25", ""]
HOSTILE = FORMULAS + PLAIN


def test_no_cell_is_a_formula_and_every_cell_reads_back_as_written(tmp_path):
    """Every text cell a spreadsheet would run starts with an apostrophe in the file; numbers,
    plain and non-ASCII text are written as they are; reading gives back exactly what was
    written, so grades.csv's keys survive a rerun."""
    for number in ("-3.5", "+1e3", "0042", "12.", ".5", "-0"):
        assert spreadsheet.safe_cell(number) == number
    for text in ("-inf", "-1+2", "+", "-1e", "- 3"):
        assert spreadsheet.safe_cell(text) == "'" + text
    path = tmp_path / "cells.csv"
    spreadsheet.write_csv(path, ["=h", "b"], [{"=h": text, "b": 1} for text in HOSTILE])
    with open(path, newline="", encoding="utf-8") as file:
        raw = list(csv.reader(file))
    assert raw[0] == ["'=h", "b"]
    assert all(not cell.startswith(spreadsheet.FORMULA_STARTS) for row in raw for cell in row)
    assert [row[0] for row in raw[1:]] == ["'" + text for text in FORMULAS] + PLAIN
    header, rows = spreadsheet.read_csv(path)
    assert header == ["=h", "b"] and [row["=h"] for row in rows] == HOSTILE
    grades = tmp_path / "grades.csv"  # the regrade's own file: same keys after a round trip
    written = {text: {"student": text, "name": text, "status": "ok", "total": 1}
               for text in HOSTILE if text}
    regrade.write_rows(grades, written)
    assert sorted(regrade.read_rows(grades)) == sorted(written)


METADATA = """submission_301:
  :submitters:
  - :name: "=Sum; of parts"
    :sid: '7001'
    :email: Ana@x.edu
  - :name: Björn Ek
    :email: bjorn@x.edu
  :created_at: 2026-11-20 10:00:00.000000000 -05:00
submission_302:
  :submitters:
  - :name: Cy Diaz
    :sid: '7003'
    :email: cy@x.edu
  :created_at: 2026-11-20 09:00:00.000000000 -05:00
submission_303:
  :submitters:
  - :name: Cy Diaz
    :sid: '7003'
    :email: cy@x.edu
  :created_at: 2026-11-20 11:00:00.000000000 -05:00
submission_304:
  :submitters:
  - :name: Ana
    :sid: '7001'
    :email: Ana@x.edu
  :created_at: 2026-11-20 12:00:00.000000000 -05:00
"""


def test_gradescope_groups_keep_every_member_and_a_resubmission_grades_the_latest(tmp_path):
    """A group row keeps both members, aligned field by field (a ';' in a name is no
    separator); Cy's later submission is graded although its file is older; Ana leads a group's
    submission and her own: two rows, each named by its folder too."""
    (tmp_path / "submission_metadata.yml").write_text(METADATA)
    for folder in ("submission_301", "submission_303", "submission_302", "submission_304"):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "handin.tar").write_bytes(folder.encode())  # 302 written last
    found = handins.find_handins(tmp_path)
    assert sorted(found) == ["Ana@x.edu_submission_301", "Ana@x.edu_submission_304", "cy@x.edu"]
    group = found["Ana@x.edu_submission_301"]
    assert handins.members_of(vars(group)) == [
        {"name": "=Sum, of parts", "email": "Ana@x.edu", "sid": "7001"},
        {"name": "Björn Ek", "email": "bjorn@x.edu", "sid": ""}]
    assert "another submission with other members" in group.note
    assert found["cy@x.edu"].path.parent.name == "submission_303"
    assert "graded the latest submitted, submission_303/" in found["cy@x.edu"].note


def test_a_group_resubmission_listing_its_members_in_another_order_is_one_row(tmp_path):
    """Bo resubmits the group's handin that Ann first submitted, and Gradescope lists him first
    this time: still one group's resubmission (the later graded), not two rows that make both
    members a conflict."""
    entry = ("submission_{}:\n  :submitters:\n{}  :created_at: 2026-11-20 {}:00:00 -05:00\n")
    ann = "  - :name: Ann\n    :sid: '1'\n    :email: ann@x.edu\n"
    bo = "  - :name: Bo\n    :sid: '2'\n    :email: Bo@x.edu\n"
    (tmp_path / "submission_metadata.yml").write_text(entry.format(1, ann + bo, 10)
                                                      + entry.format(2, bo + ann, 12))
    for folder in ("submission_1", "submission_2"):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "handin.tar").write_bytes(folder.encode())
    [(key, handin)] = handins.find_handins(tmp_path).items()
    assert handin.path.parent.name == "submission_2", (key, handin)
    assert "graded the latest submitted, submission_2/" in handin.note


def test_a_time_that_cannot_be_right_is_listed_and_left_blank(tmp_path):
    """A submission after the export (2099) or before the assignment opened is left for the
    staff, never scored 0 as 'more than 3 days late'."""
    roster, grades = write_inputs(tmp_path, [
        ("ann@x.edu", "ann@x.edu", "", "ok", "95.43", "2099-01-01T00:00:00-05:00"),
        ("cy@x.edu", "cy@x.edu", "", "ok", "70", "2026-11-01T00:00:00-05:00"),
        ("di@x.edu", "di@x.edu", "", "ok", "60", "2026-11-20T00:00:00-05:00")])
    gradebook.main([str(roster), "--grades", str(grades), "--out", str(tmp_path / "out"),
                    "--due", DUE, "--late-penalty-per-day", "10", "--late-max-days", "3",
                    "--opened", "2026-11-10T00:00:00-05:00"])
    report = report_of(tmp_path / "out")
    assert (report["Lee, Ann"]["score"], report["Diaz, Cy"]["score"],
            report["Ng, Di"]["score"]) == ("", "", "60.0")
    assert "after the export" in report["Lee, Ann"]["late_rule"]
    unmatched = (tmp_path / "out/unmatched.txt").read_text()
    assert "cannot be right, left blank for the staff (2):" in unmatched
    assert "before the assignment opened (2026-11-10T00:00:00-05:00, --opened)" in unmatched


def test_calendar_day_extensions_and_grace_days_as_autolab_counts_them(tmp_path):
    """3 days from 2026-10-30 23:59 EDT is 2026-11-02 23:59 EST (73 hours: New York leaves
    daylight saving time on 2026-11-01); days need the zone. Grace days cover started days
    late before the daily penalty: 61 h late with 2 grace days loses 1 x 10%."""
    roster, _ = write_inputs(tmp_path)
    extensions = tmp_path / "extensions.csv"
    extensions.write_text("student,days\n0042,3\n")
    zone = late_policy.time_zone("America/New_York")
    due = late_policy.parse_time("2026-10-30T23:59", zone, "--due")
    students = gradebook.read_roster(roster)[0]
    [deadline] = late_policy.read_extensions(extensions, students, due, zone).values()
    assert deadline.isoformat() == "2026-11-02T23:59:00-05:00"
    assert deadline.timestamp() - due.timestamp() == 73 * 3600
    with pytest.raises(SystemExit, match="days are calendar days in the course's time zone"):
        late_policy.read_extensions(extensions, students, due, None)
    assert late_policy.late_deduction(100, 61, 10, 5, grace_days=2) == 10.0
    assert late_policy.late_deduction(100, 47, 10, 5, grace_days=2) == 0.0
    assert late_policy.late_deduction(100, 61, 10, 5) == 30.0
    grace = tmp_path / "grace.csv"
    grace.write_text("student,grace_days\nann@x.edu,1\n")
    assert late_policy.read_grace_days(grace, students) == {0: 1}
    grace.write_text("student,grace_days\nann@x.edu,-1\n")
    with pytest.raises(SystemExit, match="not a whole number of days, 0 or more"):
        late_policy.read_grace_days(grace, students)
    for text, error in (("student,grace_days\nann@x.edu,1\nann@x.edu,3\n",
                         "line 3: a second row for Lee, Ann in a grace days file: keep one"),
                        ("student,days\nann@x.edu,1\n",
                         "has the columns student and grace_days; it has student, days")):
        grace.write_text(text)
        with pytest.raises(SystemExit, match=error):
            late_policy.read_grace_days(grace, students)


def test_the_ta_decides_aliases_test_student_inactive_and_the_latest_submission(tmp_path):
    """An alias file matches an address of another domain; Canvas's Test Student and a student
    named --inactive get no 0 from --missing zero; Bo, in two submissions, is a conflict unless
    --several-submissions latest takes the later, as Gradescope does."""
    roster, grades = write_inputs(tmp_path, [
        ("ann.lee@gmail.com", "ann.lee@gmail.com", "", "ok", "90", "2026-11-20T10:00:00-05:00"),
        ("bo1", "bchen@x.edu", "0043", "ok", "50", "2026-11-20T09:00:00-05:00"),
        ("bo2", "bchen@x.edu", "0043", "ok", "70", "2026-11-20T11:00:00-05:00")])
    roster.write_text(ROSTER + "\"Student, Test\",1999,,,S1,\n", encoding="utf-8")
    aliases = tmp_path / "aliases.csv"
    aliases.write_text("address,student\nAnn.Lee@gmail.com,0042\n")
    common = [str(roster), "--grades", str(grades), "--missing", "zero", "--inactive", "di@x.edu"]
    gradebook.main([*common, "--out", str(tmp_path / "plain")])
    scores = {name: row["score"] for name, row in report_of(tmp_path / "plain").items()}
    assert scores == {"Lee, Ann": "0", "Chen, Bo": "", "Diaz, Cy": "0", "Ng, Di": "",
                      "Ono, Ed": "0", "Student, Test": ""}
    gradebook.main([*common, "--out", str(tmp_path / "ta"), "--aliases", str(aliases),
                    "--several-submissions", "latest"])
    report = report_of(tmp_path / "ta")
    assert (report["Lee, Ann"]["score"], report["Lee, Ann"]["matched_by"]) == (
        "90.0", "alias ann.lee@gmail.com")
    assert (report["Chen, Bo"]["score"], report["Chen, Bo"]["handin"]) == ("70.0", "bo2")
    unmatched = (tmp_path / "ta/unmatched.txt").read_text()
    assert "  Student, Test (SIS User ID -, SIS Login ID -): Canvas's Test Student\n" in unmatched
    assert "an inactive enrollment (--inactive)" in unmatched


def test_a_name_given_as_a_list_is_written_as_a_name(tmp_path):
    (tmp_path / "submission_1").mkdir()
    (tmp_path / "submission_1/handin.tar").write_text("x")
    (tmp_path / "submission_metadata.yml").write_text(
        "submission_1:\n  :submitters:\n  - :name: [Mallory, Stone]\n    :sid: '1'\n"
        "    :email: ms@x.edu\n  :created_at: 2026-11-20 12:00:00 -05:00\n")
    assert handins.find_handins(tmp_path)["ms@x.edu"].name == "Mallory Stone"


def test_autolab_s_grade_import_is_email_then_each_problem(tmp_path):
    """No header (Autolab reads every line as a student); each problem in rubric order; the
    highest version only; a crashed row and an address in two rows are left out."""
    columns = ["student", "email", "status", "total", "version", "versions_graded",
               *regrade.rubric.RUBRIC]
    path = tmp_path / "grades.csv"
    spreadsheet.write_csv(path, columns, [
        ["ann@x.edu", "", "ok", "30", "1", "all", 5, 5, 20, 0, 0],
        ["ann@x.edu", "", "ok", "80", "2", "all", 5, 5, 20, 20, 30],
        ["bo@x.edu", "", "crashed", "0", "1", "all", 0, 0, 0, 0, 0],
        ["g1", "cy@x.edu; di@x.edu", "ok", "40", "", "all", 5, 5, 10, 10, 10],
        ["g2", "cy@x.edu", "ok", "50", "", "all", 5, 5, 10, 10, 20]])
    gradebook.main(["--grades", str(path), "--out", str(tmp_path / "out")])
    with open(tmp_path / "out/autolab_import.csv", newline="") as file:
        assert list(csv.reader(file)) == [["ann@x.edu", "5", "5", "20", "20", "30"],
                                          ["di@x.edu", "5", "5", "10", "10", "10"]]
    unmatched = (tmp_path / "out/unmatched.txt").read_text()
    assert "left out of autolab_import.csv (1):\n  cy@x.edu: in g1, g2\n" in unmatched
