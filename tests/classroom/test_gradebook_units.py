# hw4p1: instructor-only
"""The gradebook's functions one by one (autograder/classroom/gradebook.py), without the command
line: which roster rows are students, which version and which of several submissions is imported,
each cell's numbers (score to the cent, late hours, the deduction), the words of unmatched.txt and
summary.txt for one and for two of each case, and when the summary sends the staff to
unmatched.txt. Every expected value is worked out by hand here.

    .venv/bin/python -m pytest -q -n 0 tests/classroom/test_gradebook_units.py
"""
from datetime import datetime
from pathlib import Path

import pytest

from autograder.classroom import gradebook
from autograder.classroom.gradebook import Join, join, summary_text, unmatched_text
from autograder.classroom.late_policy import Lateness
from tests.classroom.csv_text import written

DUE = datetime.fromisoformat("2026-11-21T00:00:00-05:00")


def student(name: str, sid: str, login: str, canvas_id: str = "") -> dict:
    return {"Student": name, "ID": canvas_id, "SIS User ID": sid, "SIS Login ID": login,
            "Section": "S1"}


ROSTER = [student("Lee, Ann", "0042", "ann@x.edu"), student("Chen, Bo", "0043", "bo@x.edu"),
          student("Diaz, Cy", "0044", "cy@x.edu")]


def graded(who: str, total: str = "80", submitted_at: str = "", **cells) -> dict:
    """A grades.csv row handed in by the address ``who``."""
    return {"student": who, "email": who, "sid": "", "name": "", "status": "ok",
            "total": total, "submitted_at": submitted_at, **cells}


def test_the_roster_keeps_rows_with_an_id_or_a_sis_id_and_finds_the_points_row(tmp_path):
    path = written(tmp_path, "Student,ID,SIS User ID,SIS Login ID,Section\n"
                             "Points Possible,,,,\n"
                             "\"Lee, Ann\",1001,0042,ann@x.edu,S1\n"
                             "\"Chen, Bo\",,0043,bo@x.edu,S1\n"
                             "\"Diaz, Cy\",1003,,cy@x.edu,S1\n"
                             "Not Enrolled,,,,S1\n")
    students, points = gradebook.read_roster(path)
    assert [row["Student"] for row in students] == ["Lee, Ann", "Chen, Bo", "Diaz, Cy"]
    assert points["Student"] == "Points Possible"


@pytest.mark.parametrize("text, refusal", [
    ("address,student\nann@home.org,0042\nann@home.org,0043\n",
     "line 3: address 'ann@home.org' is given twice"),
    ("address,student\nann@home.org,0042\nann-home,0043\n",
     "line 3: address 'ann-home' is not an email address"),
    ("", r"an aliases file has the columns address and student \(it has none\)")])
def test_an_aliases_file_that_cannot_be_right_is_refused_naming_the_line(tmp_path, text, refusal):
    with pytest.raises(SystemExit, match=refusal):
        gradebook.read_aliases(written(tmp_path, text), ROSTER)


def test_an_aliases_file_maps_each_address_to_its_student(tmp_path):
    path = written(tmp_path, "address,student\nAnn@Home.org,0042\nbo@home.org,bo@x.edu\n")
    assert gradebook.read_aliases(path, ROSTER) == {"ann@home.org": 0, "bo@home.org": 1}


def test_only_the_highest_version_of_a_student_graded_with_every_version_is_imported():
    rows = [graded("ann@x.edu", version=version, versions_graded="all")
            for version in ("3", "1", "12", "2")]
    single = graded("bo@x.edu", version="1")
    kept, left = gradebook.latest_versions([*rows, single])
    assert kept == [rows[2], single]
    assert left == [rows[0], rows[1], rows[3]]


@pytest.mark.parametrize("times, latest", [
    (["2026-11-20T10:00:00-05:00", "2026-11-20T11:00:00-05:00"], 1),
    (["2026-11-20T12:00:00-05:00", "2026-11-20T11:00:00-05:00"], 0),
    (["2026-11-20T12:00:00-05:00", "2026-11-20T12:00:00-05:00"], None),
    (["2026-11-20T09:00:00-05:00", "2026-11-20T12:00:00-05:00", "2026-11-20T12:00:00-05:00"],
     None),
    (["2026-11-20T12:00:00-05:00", ""], None)])
def test_the_latest_of_several_submissions_is_one_with_a_time_later_than_every_other(times,
                                                                                      latest):
    reached = [(graded("ann@x.edu", submitted_at=time), f"rule {index}")
               for index, time in enumerate(times)]
    assert gradebook.latest_of(reached) == (None if latest is None else reached[latest])


def test_the_latest_submission_is_imported_with_its_own_rule():
    group = graded("ann@x.edu", "60", "2026-11-20T10:00:00-05:00",
                   email="ann@x.edu; bo@x.edu", sid="; ", name="; ", student="submission_1")
    own = graded("ann@x.edu", "70", "2026-11-20T11:00:00-05:00")
    result = join(ROSTER, [group, own], several="latest")
    ann, bo = result.rows[0], result.rows[1]
    assert (ann["handin"], ann["score"]) == ("ann@x.edu", 70.0)
    assert ann["matched_by"] == ("email ann@x.edu (the latest of 2 submissions, "
                                 "--several-submissions latest)")
    assert (bo["handin"], bo["matched_by"], bo["score"]) == ("submission_1", "email bo@x.edu",
                                                             60.0)
    assert result.latest_taken == [(ROSTER[0], [group, own])]


def test_each_cell_s_numbers_score_to_the_cent_late_hours_and_deduction():
    policy = Lateness(due=DUE, per_day=10)
    rows = [graded("ann@x.edu", "90.456", "2026-11-20T23:00:00-05:00"),
            graded("bo@x.edu", "80", "2026-11-21T06:00:00-05:00"),
            graded("cy@x.edu", "10", "2026-11-22T00:00:00-05:00")]
    cells = [{key: row[key] for key in ("late_hours", "late_deduction", "score")}
             for row in join(ROSTER, rows, policy=policy).rows]
    assert cells == [{"late_hours": 0.0, "late_deduction": 0.0, "score": 90.46},
                     {"late_hours": 6.0, "late_deduction": 8.0, "score": 72.0},
                     {"late_hours": 24.0, "late_deduction": 1.0, "score": 9.0}]


def test_unmatched_txt_names_a_member_by_email_then_sid_then_name():
    members = [graded("", email="", sid="0099", name="Sid Only"),
               graded("", email="", sid="", name="Name Only"),
               graded("", email="", sid="", name="")]
    for index, row in enumerate(members):
        row["student"] = f"handin_{index}"
    text = unmatched_text(join(ROSTER, members), "blank")
    assert "  0099 (handin_0, Sid Only): " in text
    assert "  Name Only (handin_1, Name Only): " in text
    assert "  ? (handin_2): " in text


@pytest.mark.parametrize("missing, said", [
    ("zero", "  imported as 0 (--missing zero)\n"),
    ("blank", "  imported as blank, which Canvas leaves unchanged (--missing zero imports 0)\n")])
def test_unmatched_txt_says_what_a_row_with_no_handin_imports(missing, said):
    result = join(ROSTER, [graded("ann@x.edu")], missing=missing)
    assert [row["score"] for row in result.rows] == [80.0, *[0 if missing == "zero" else ""] * 2]
    assert said in unmatched_text(result, missing)


TEN_PERCENT = Lateness(due=DUE, per_day=10)


def summary_of(tmp_path: Path, rows: list[dict], policy: Lateness = TEN_PERCENT) -> str:
    return summary_text(join(ROSTER, rows, policy=policy), policy, tmp_path)


def test_the_summary_counts_the_imported_and_the_late_with_a_deduction(tmp_path):
    rows = [graded("ann@x.edu", "80", "2026-11-21T06:00:00-05:00"),  # deducted 8
            graded("bo@x.edu", "80", "2026-11-20T06:00:00-05:00")]  # on time: deducted 0.0
    summary = summary_of(tmp_path, rows)
    assert summary.startswith("3 roster rows: 2 reached by one grade row, 2 with a score to "
                              "import; 0 conflicts (imported for neither), 1 with no handin, ")
    assert ": 1 late with a deduction, 0 whose lateness is unknown" in summary


@pytest.mark.parametrize("autolab, others, said", [
    (1, 0, ["  1 Autolab handin has no submission time"]),
    (2, 0, ["  2 Autolab handins have no submission time"]),
    (0, 1, ["  1 handin has no submission time in the download"]),
    (1, 2, ["  1 Autolab handin has", "  2 handins have no submission time in the download"]),
    (0, 0, [])])
def test_the_summary_says_how_many_handins_have_no_time_and_of_which_platform(
        tmp_path, autolab, others, said):
    rows = [graded(row["SIS Login ID"], version="1" if index < autolab else "",
                   submitted_at="" if index < autolab + others else "2026-11-20T06:00:00-05:00")
            for index, row in enumerate(ROSTER)]
    lines = [line for line in summary_of(tmp_path, rows).splitlines()
             if "no submission time" in line]
    assert [line[:len(start)] for line, start in zip(lines, said)] == said
    assert len(lines) == len(said)


@pytest.mark.parametrize("count, said", [(1, "  1 submission time cannot be right"),
                                         (2, "  2 submission times cannot be right")])
def test_the_summary_counts_the_times_that_cannot_be_right(tmp_path, count, said):
    policy = Lateness(due=DUE, exported=DUE)
    rows = [graded(row["SIS Login ID"], submitted_at="2026-11-21T01:00:00-05:00")
            for row in ROSTER[:count]]
    assert said + f" (after the export, or before the assignment opened): left blank for the " \
                  f"staff, listed in {tmp_path / 'unmatched.txt'}" in summary_of(tmp_path, rows,
                                                                                 policy)


@pytest.mark.parametrize("case", ["conflicts", "unmatched", "no_handin", "crashed", "impossible",
                                  None])
def test_the_summary_sends_the_staff_to_unmatched_txt_for_each_kind_of_case(tmp_path, case):
    result = Join([], [], [], [], [], [])
    if case is not None:
        getattr(result, case).append(("roster row", "grade row"))
    summary = summary_text(result, Lateness(), tmp_path)
    assert (f"next: read {tmp_path / 'unmatched.txt'}: each case" in summary) == (case is not None)
    assert summary.endswith(f"then: check {tmp_path / 'gradebook.csv'} and import "
                            f"{tmp_path / 'canvas_import.csv'} in Canvas (Grades > Import)\n")


@pytest.mark.parametrize("option", [["--late-penalty-per-day", "10"], ["--grace-minutes", "5"],
                                    ["--extensions", "x.csv"], ["--late-max-days", "3"],
                                    ["--days-grace", "x.csv"], ["--sections", "x.csv"]])
def test_each_late_option_without_a_deadline_is_refused(tmp_path, option):
    with pytest.raises(SystemExit, match="need --due"):
        gradebook.main(["roster.csv", "--grades", str(tmp_path / "none.csv"), *option])


def test_grades_that_are_not_there_are_refused_naming_the_command(tmp_path):
    with pytest.raises(SystemExit, match="none.csv not found: run `make regrade` first"):
        gradebook.main(["--grades", str(tmp_path / "none.csv")])


def test_by_default_a_late_handin_keeps_its_total_and_the_points_row_sums_the_rubric(tmp_path):
    roster = written(tmp_path, "Student,ID,SIS User ID,SIS Login ID,Section\n"
                               "Points Possible,,,,\n\"Lee, Ann\",1001,0042,ann@x.edu,S1\n")
    grades = tmp_path / "grades.csv"
    grades.write_text("student,email,status,total,submitted_at\n"
                      "ann@x.edu,ann@x.edu,ok,80,2026-11-21T00:00:30-05:00\n")
    gradebook.main([str(roster), "--grades", str(grades), "--out", str(tmp_path / "out"),
                    "--due", DUE.isoformat()])
    (row,) = gradebook.spreadsheet.read_csv(tmp_path / "out/gradebook.csv")[1]
    assert (row["late_hours"], row["late_deduction"], row["score"]) == ("0.01", "0.0", "80.0")
    assert row["late_rule"].endswith(": no --late-penalty-per-day: no deduction")
    canvas = (tmp_path / "out/canvas_import.csv").read_text().splitlines()
    assert canvas[1] == f"Points Possible,,,,,{sum(gradebook.rubric.RUBRIC.values())}"
    assert canvas[2] == "\"Lee, Ann\",1001,0042,ann@x.edu,S1,80.0"


def adjustment(student: str, applies_to: str, delta: float) -> gradebook.adjustments.Adjustment:
    return gradebook.adjustments.Adjustment("adjustments.csv line 2", student, applies_to, delta,
                                            None, "a regrade request", "Kim")


def points_row(who: str, points: list[float]) -> dict:
    """A graded row of ``who`` with these points in rubric order, and their total."""
    return graded(who, str(sum(points)), **dict(zip(gradebook.rubric.RUBRIC, map(str, points))))


def test_autolab_s_import_adds_a_problem_only_for_an_adjusted_total():
    points = [1.0, 2.0, 3.0, 4.0, 10.0]
    rows = [points_row("ann@x.edu", points), points_row("bo@x.edu", points)]
    lines, doubles = gradebook.autolab_import(rows, [adjustment("ann@x.edu", "Linear", 0.5)])
    assert lines == [["ann@x.edu", 1.5, 2.0, 3.0, 4.0, 10.0], ["bo@x.edu", *map(str, points)]]
    lines, _ = gradebook.autolab_import(rows, [adjustment("ann@x.edu", "total", 2.25)])
    assert lines == [["ann@x.edu", *points, 2.25], ["bo@x.edu", *map(str, points), 0]]
    assert doubles == []
    set_to = gradebook.adjustments.Adjustment("adjustments.csv line 2", "ann@x.edu", "total",
                                              None, 22.125, "a regrade request", "Kim")
    assert gradebook.autolab_import(rows, [set_to])[0][0][-1] == 2.12  # 22.125 - 20 to the cent


def test_an_address_in_two_grade_rows_is_left_out_of_autolab_s_import_as_first_written():
    rows = [graded("submission_1", email="Ann@x.edu"), graded("ann@x.edu")]
    assert gradebook.autolab_import(rows) == ([], ["Ann@x.edu: in submission_1, ann@x.edu"])


@pytest.mark.parametrize("extra, said", [
    (False, ": 1 addresses; its columns: email, " + ", ".join(gradebook.rubric.RUBRIC)
     + " (no header: define the assessment's problems in this order, then Gradebook > Import "
       "grades (bulk grade) in Autolab)\n"),
    (True, ": 1 addresses; its columns: email, " + ", ".join(gradebook.rubric.RUBRIC)
     + f", {gradebook.ADJUSTMENT} (no header: define the assessment's problems in this order, "
       f"then Gradebook > Import grades (bulk grade) in Autolab; {gradebook.ADJUSTMENT} holds the "
       f"adjustments of totals in adjustments.csv, a problem of its own as Autolab keeps a "
       f"tweak apart)\n")])
def test_autolab_s_part_of_unmatched_txt_names_its_columns(extra, said):
    line = ["ann@x.edu", *[1.0] * len(gradebook.rubric.RUBRIC), *([2.0] if extra else [])]
    assert gradebook.autolab_text([line], []).startswith(gradebook.AUTOLAB_IMPORT + said)
    empty = gradebook.autolab_text([], ["a@x.edu: in r1, r2"])
    assert empty.endswith("(1):\n  a@x.edu: in r1, r2\n  next: decide which row counts and "
                          "enter it in Autolab by hand\n")


def test_the_outputs_go_to_a_new_nested_folder_and_again_over_it(tmp_path):
    roster = written(tmp_path, "Student,ID,SIS User ID,SIS Login ID,Section\n"
                               "\"Lee, Ann\",1001,0042,ann@x.edu,S1\n")
    grades = tmp_path / "grades.csv"
    grades.write_text("student,email,status,total\nann@x.edu,ann@x.edu,ok,80\n")
    for arguments in ([str(roster)], [str(roster)], []):
        gradebook.main([*arguments, "--grades", str(grades), "--out", str(tmp_path / "a/b")])
    assert sorted(path.name for path in (tmp_path / "a/b").iterdir()) == [
        "autolab_import.csv", "canvas_import.csv", "gradebook.csv", "summary.txt",
        "unmatched.txt"]
    gradebook.main(["--grades", str(grades), "--out", str(tmp_path / "c/d")])
    assert sorted(path.name for path in (tmp_path / "c/d").iterdir()) == [
        "autolab_import.csv", "unmatched.txt"]


def test_an_adjustments_file_beside_grades_csv_is_applied_before_the_score(tmp_path):
    roster = written(tmp_path, "Student,ID,SIS User ID,SIS Login ID,Section\n"
                               "\"Lee, Ann\",1001,0042,ann@x.edu,S1\n")
    grades = tmp_path / "grades.csv"
    categories = list(gradebook.rubric.RUBRIC)  # 80 points, all in the last
    grades.write_text(f"student,email,status,total,{','.join(categories)}\n"
                      f"ann@x.edu,ann@x.edu,ok,80,{'0,' * (len(categories) - 1)}80\n")
    (tmp_path / "adjustments.csv").write_text("student,applies_to,delta,set_to,reason,by\n"
                                              "ann@x.edu,total,2.5,,request,Kim\n")
    gradebook.main([str(roster), "--grades", str(grades), "--out", str(tmp_path / "out")])
    (row,) = gradebook.spreadsheet.read_csv(tmp_path / "out/gradebook.csv")[1]
    assert (row["adjusted_total"], row["score"]) == ("82.5", "82.5")
