# hw4p1: instructor-only
"""The TA's own column (autograder/classroom/adjustments.py): adjustments.csv's lines are applied
on top of the autograder's points after every regrade, rescore and gradebook export, shown in
grades.csv, gradebook.csv, the Canvas and Autolab imports and the student's feedback; a hand edit
of grades.csv is refused, naming the line that keeps it, and never silently replaced. Every
number is computed by hand in its test.

    .venv/bin/python -m pytest -q -n 0 tests/classroom/test_adjustments.py
"""
from pathlib import Path

import pytest

from autograder.classroom import adjustments, gradebook, grades_csv, regrade, rescore, spreadsheet
from autograder.judging.scoring.report import GradingReport
from hw4lib.grading_numbers import MYTORCH_RUBRIC
from tests.classroom.regrade_fakes import edit_cell, fake_grader, grade_with

FULL = {name: float(points) for name, points in MYTORCH_RUBRIC.items()}
# ann: full Linear and Softmax (5 + 5), half of each attention (10 + 10), 25.79 for the language
# model: 55.79 (the regrade request: 55.79 -> 60)
ANN = {**FULL, "ScaledDotProductAttention": 10.0, "MultiHeadAttention": 10.0,
       "LanguageModel": 25.79}
# bo: full mytorch (5 + 5 + 20 + 20) and 40 for the language model: 90
BO = {**FULL, "LanguageModel": 40.0}
ROSTER = ("Student,ID,SIS User ID,SIS Login ID,Section\n"
          "\"Lee, Ann\",1001,0042,ann@x.edu,A\n"
          "\"Chen, Bo\",1002,0043,bo@x.edu,A\n")
ADJUSTMENTS = ("student,applies_to,delta,set_to,reason,by\n"
               "ann@x.edu,total,4.21,,regrade request granted (LM measured on the wrong split),"
               "Kim\n"
               "bo@x.edu,Linear,,0,copied linear.py (academic integrity case 12),Lee\n")


def graded_class(tmp_path: Path) -> Path:
    """OUT of a class of two graded rows (ann, bo), written by the regrade's writer, with their
    feedback; the grader in ``tmp_path``'s grader/ is the one that graded them."""
    out = tmp_path / "out"
    (out / "feedback").mkdir(parents=True)
    grader = rescore.grader_in(fake_grader(tmp_path))
    rows = {}
    for student, points in (("ann@x.edu", ANN), ("bo@x.edu", BO)):
        rows[student] = {"student": student, "email": student, "status": "ok", **points,
                         "total": sum(points.values()), "grader_sha256": grader.identity,
                         "scoring": "", "handin_sha256": "x"}
        grades_csv.feedback_path(out, student).write_text(f"the judge's report of {student}\n")
    grades_csv.write_rows(out / "grades.csv", rows)
    return out


def rows_of(out: Path) -> dict[str, dict]:
    return grades_csv.read_rows(out / "grades.csv")


def test_a_hand_edit_is_refused_naming_the_line_that_keeps_it(tmp_path):
    out = graded_class(tmp_path)
    edit_cell(out / "grades.csv", "ann@x.edu", "total", "60")
    with pytest.raises(SystemExit) as refused:
        rescore.rescore_class(out, tmp_path / "grader")
    assert ("grades.csv's total for ann@x.edu was edited by hand (55.79 -> 60); record it in "
            f"{out / 'adjustments.csv'}") in str(refused.value)
    assert "ann@x.edu,total,+4.21,,<why>,<who> (or set_to 60" in str(refused.value)
    assert float(rows_of(out)["ann@x.edu"]["total"]) == 60, "the refusal changed grades.csv"
    edit_cell(out / "grades.csv", "ann@x.edu", "total", "55.79")  # undone: accepted again
    rescore.rescore_class(out, tmp_path / "grader")
    edit_cell(out / "grades.csv", "bo@x.edu", "Linear", "4")
    with pytest.raises(SystemExit, match=r"Linear for bo@x.edu was edited by hand \(5 -> 4\).*"
                                         r"bo@x.edu,Linear,-1,,<why>,<who>"):
        rescore.rescore_class(out, tmp_path / "grader")


def test_a_grades_csv_written_before_the_record_is_checked_by_its_total(tmp_path):
    """A grades.csv of an earlier version of the tools (no points_as_written): a total that is
    not its categories added up is a hand edit; one that is, is not; a file without the
    categories (another tool's) is not judged."""
    ann = {"student": "ann", **{k: str(v) for k, v in ANN.items()}, "total": "55.79"}
    assert adjustments.hand_edits(ann, []) == []
    assert adjustments.hand_edits({**ann, "total": "60"}, []) == [("total", 55.79, 60.0)]
    assert adjustments.hand_edits({"student": "ann", "total": "60"}, []) == []


def test_recorded_adjustments_stand_through_rescore_regrade_and_gradebook(tmp_path,
                                                                          monkeypatch):
    out = graded_class(tmp_path)
    edit_cell(out / "grades.csv", "ann@x.edu", "total", "60")
    (out / "adjustments.csv").write_text(ADJUSTMENTS)
    rescore.rescore_class(out, tmp_path / "grader")
    rows = rows_of(out)
    # ann: the autograder's 55.79 back in total, 60 beside it; bo: 90 - 5 (Linear set to 0) = 85
    assert (rows["ann@x.edu"]["total"], rows["ann@x.edu"]["adjusted_total"]) == ("55.79", "60.0")
    assert rows["ann@x.edu"]["adjustments"] == (
        "total +4.21 (regrade request granted (LM measured on the wrong split), by Kim)")
    assert (rows["bo@x.edu"]["total"], rows["bo@x.edu"]["adjusted_total"]) == ("90.0", "85.0")
    assert rows["bo@x.edu"]["Linear"] == "5.0", "an adjustment changed the autograder's points"
    feedback = (out / "feedback/ann@x.edu.txt").read_text()
    assert feedback == (f"{adjustments.FEEDBACK_HEADING}\n  total +4.21 (regrade request "
                        f"granted (LM measured on the wrong split), by Kim)\nYour total after "
                        f"them: 60. The report below is the autograder's, before them.\n\n"
                        f"the judge's report of ann@x.edu\n")
    rescore.rescore_class(out, tmp_path / "grader")  # again: the same file, one block
    assert (out / "feedback/ann@x.edu.txt").read_text() == feedback
    assert ("adjusted by the staff (adjustments.csv; the adjusted_total column): ann@x.edu, "
            "bo@x.edu\n") in (out / "summary.txt").read_text()

    # A regrade of the whole class (--force) keeps the decisions.
    handins = tmp_path / "handins"
    handins.mkdir()
    for student in ("ann@x.edu", "bo@x.edu"):
        (handins / f"{student}.tar").write_text(student)
    graded = {"ann@x.edu": ANN, "bo@x.edu": BO}

    def fake_run(grading, grader_flags="", gradings=1, started=None, zygote=None):
        points = graded[grading.read_text()]
        return regrade.grading_run.GradingRun(points, GradingReport(), "report\n", 1.0,
                                              False)

    grade_with(fake_run, monkeypatch, tmp_path)
    regrade.regrade(handins, out, tmp_path / "grader", progress=False, force=True,
                    zygotes=False)
    rows = rows_of(out)
    assert rows["ann@x.edu"]["adjusted_total"] == "60.0"
    assert rows["bo@x.edu"]["adjusted_total"] == "85.0"
    assert (out / "feedback/ann@x.edu.txt").read_text().startswith(
        f"{adjustments.FEEDBACK_HEADING}\n  total +4.21")

    # The gradebook: the adjusted total scored, the adjustment beside it; Autolab's import
    # with bo's Linear at 0 and ann's +4.21 as the Adjustment problem.
    roster = tmp_path / "roster.csv"
    roster.write_text(ROSTER)
    gradebook.main([str(roster), "--grades", str(out / "grades.csv"), "--out",
                    str(tmp_path / "book")])
    book = {row["Student"]: row for row in
            spreadsheet.read_csv(tmp_path / "book/gradebook.csv")[1]}
    assert (book["Lee, Ann"]["total"], book["Lee, Ann"]["adjusted_total"],
            book["Lee, Ann"]["score"]) == ("55.79", "60.0", "60.0")
    assert book["Lee, Ann"]["adjustments"].startswith("total +4.21 (regrade request")
    assert book["Chen, Bo"]["score"] == "85.0"
    canvas = spreadsheet.read_csv(tmp_path / "book/canvas_import.csv")[1]
    assert [row["HW4P1"] for row in canvas] == ["60.0", "85.0"]
    autolab = (tmp_path / "book/autolab_import.csv").read_text().splitlines()
    assert autolab == ["ann@x.edu,5.0,5.0,10.0,10.0,25.79,4.21",
                       "bo@x.edu,0.0,5.0,20.0,20.0,40.0,0.0"]
    assert "LanguageModel, Adjustment (no header" in (tmp_path / "book/unmatched.txt").read_text()
    assert "2 scored from the total after the staff's adjustments" in \
        (tmp_path / "book/summary.txt").read_text()

    # A hand edit stops a regrade before anything is graded.
    edit_cell(out / "grades.csv", "bo@x.edu", "total", "99")
    with pytest.raises(SystemExit, match=r"total for bo@x.edu was edited by hand \(90 -> 99\)"):
        regrade.regrade(handins, out, tmp_path / "grader", progress=False, zygotes=False)
    edit_cell(out / "grades.csv", "bo@x.edu", "total", "90")

    # An adjustment taken out of the file leaves every column and the feedback.
    (out / "adjustments.csv").write_text(ADJUSTMENTS.splitlines()[0] + "\n"
                                         + ADJUSTMENTS.splitlines()[2] + "\n")
    gradebook.main([str(roster), "--grades", str(out / "grades.csv"), "--out",
                    str(tmp_path / "book")])
    assert rows_of(out)["ann@x.edu"]["adjusted_total"] == ""
    assert (out / "feedback/ann@x.edu.txt").read_text() == "report\n"
    assert spreadsheet.read_csv(tmp_path / "book/canvas_import.csv")[1][0]["HW4P1"] == "55.79"


@pytest.mark.parametrize("line, refusal", [
    ("ann,total,5,3,why,Kim", "give one of delta .* not both"),
    ("ann,total,,,why,Kim", "give one of delta .* not neither"),
    ("ann,total,five,,why,Kim", "delta 'five' is not a number"),
    ("ann,Grammar,5,,why,Kim", "applies_to 'Grammar' is none of Linear"),
    ("ann,total,5,,,Kim", "no reason"),
    ("ann,total,5,,why,", "no by"),
    (",total,5,,why,Kim", "no student"),
])
def test_a_line_that_is_not_a_decision_is_refused_naming_it(tmp_path, line, refusal):
    path = tmp_path / "adjustments.csv"
    path.write_text("student,applies_to,delta,set_to,reason,by\nann,total,1,,ok,Kim\n"
                    + line + "\n")
    with pytest.raises(SystemExit, match=f"{path} line 3: {refusal}"):
        adjustments.read(path)
    path.write_text("student,delta\n")
    with pytest.raises(SystemExit, match="lacks applies_to, set_to, reason, by"):
        adjustments.read(path)


def test_categories_first_then_the_total_each_in_the_file_s_order():
    """Linear set to 2 then +1 = 3; Softmax -5 = 0; total = 3 + 0 + 10 + 10 + 25.79 = 48.79,
    set to 50, then +2.5 = 52.5."""
    def line(applies, delta=None, set_to=None):
        return adjustments.Adjustment("here", "ann", applies, delta, set_to, "why", "Kim")

    mine = [line("total", set_to=50.0), line("Linear", set_to=2.0), line("Softmax", delta=-5.0),
            line("Linear", delta=1.0), line("total", delta=2.5)]
    points = adjustments.adjusted_points({"student": "ann", **ANN}, mine)
    assert points == {**ANN, "Linear": 3.0, "Softmax": 0.0, "total": 52.5}
    assert adjustments.adjusted_points({"student": "ann", **ANN}, mine[1:4])["total"] == 48.79


def test_the_adjusted_total_is_written_from_the_file_never_typed(tmp_path):
    """adjusted_total typed over, or cleared, is refused (the file decides it); the file's own
    change is no hand edit."""
    out = graded_class(tmp_path)
    (out / "adjustments.csv").write_text(ADJUSTMENTS)
    rescore.rescore_class(out, tmp_path / "grader")
    for typed, read in (("62", "62.0"), ("", "")):
        edit_cell(out / "grades.csv", "ann@x.edu", "adjusted_total", typed)
        with pytest.raises(SystemExit, match=r"adjusted_total for ann@x.edu was edited by hand "
                                             rf"\(60.0 -> {read}\): it is written from"):
            rescore.rescore_class(out, tmp_path / "grader")
    edit_cell(out / "grades.csv", "ann@x.edu", "adjusted_total", "60.0")
    (out / "adjustments.csv").write_text(ADJUSTMENTS.replace("4.21", "5"))
    rescore.rescore_class(out, tmp_path / "grader")
    assert rows_of(out)["ann@x.edu"]["adjusted_total"] == "60.79"
