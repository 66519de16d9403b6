# hw4p1: instructor-only
"""The adjustments file's functions one by one (autograder/classroom/adjustments.py), without a
regrade: each refusal naming its line, a delta rounded to the cent, set_to, the categories before
the total, the rows an adjustment reaches, the feedback's block replaced (and a file left alone
when nothing changes), a hand edit found by the record or, without one, by the total, and the
line a refusal proposes. Every number is worked out by hand here.

    .venv/bin/python -m pytest -q -n 0 tests/classroom/test_adjustments_units.py
"""
import os
from dataclasses import FrozenInstanceError
from pathlib import Path

import pytest

from autograder.classroom import adjustments
from autograder.classroom.adjustments import Adjustment
from autograder.judging.scoring import rubric
from tests.classroom.csv_text import written

LINEAR, LM = next(iter(rubric.RUBRIC)), rubric.LM_CATEGORY


def adjustment(applies_to: str, delta: float | None = None, set_to: float | None = None,
               student: str = "ann") -> Adjustment:
    return Adjustment("adjustments.csv line 2", student, applies_to, delta, set_to, "why", "Kim")


def row_of(points: dict[str, float], **cells) -> dict:
    """A grades.csv row (cells as strings) with these category points, 0 elsewhere, and their
    total."""
    full = {category: points.get(category, 0.0) for category in rubric.RUBRIC}
    return {"student": "ann", **{key: str(value) for key, value in full.items()},
            "total": str(sum(full.values())), **cells}


def test_a_file_s_lines_are_read_skipping_blank_ones(tmp_path):
    path = written(tmp_path, "student,applies_to,delta,set_to,reason,by\n"
                             ",,,,,\n"
                             "ann, languagemodel ,2.5,,request,Kim\n"
                             "bo,TOTAL,,60,cheating,Lee\n")
    assert adjustments.read(path) == [
        Adjustment(f"{path} line 3", "ann", LM, 2.5, None, "request", "Kim"),
        Adjustment(f"{path} line 4", "bo", "total", None, 60.0, "cheating", "Lee")]
    assert adjustments.read(tmp_path / "none.csv") == []


@pytest.mark.parametrize("line, refusal", [
    ("ann,total,1,2,why,Kim", "line 2: give one of delta .* not both"),
    ("ann,total,,,why,Kim", "line 2: give one of delta .* not neither"),
    ("ann,total,five,,why,Kim", "line 2: delta 'five' is not a number of points"),
    ("ann,total,,sixty,why,Kim", "line 2: set_to 'sixty' is not a number of points"),
    ("ann,bonus,1,,why,Kim", "line 2: applies_to 'bonus' is none of "
                             + ", ".join([*rubric.RUBRIC, "total"])),
    (",total,1,,why,Kim", "line 2: no student"), ("ann,total,1,,,Kim", "line 2: no reason"),
    ("ann,total,1,,why,", "line 2: no by")])
def test_a_line_that_is_not_one_decision_is_refused_naming_the_line(tmp_path, line, refusal):
    path = written(tmp_path, "student,applies_to,delta,set_to,reason,by\n" + line + "\n")
    with pytest.raises(SystemExit, match=refusal):
        adjustments.read(path)


def test_a_file_without_the_columns_is_refused_naming_those_it_lacks(tmp_path):
    with pytest.raises(SystemExit, match="; it lacks set_to, by$"):
        adjustments.read(written(tmp_path, "student,applies_to,delta,reason\n"))


def test_categories_are_adjusted_first_then_the_total_to_the_cent():
    row = row_of({LINEAR: 4.0, LM: 25.79})
    mine = [adjustment("total", delta=4.216), adjustment(LINEAR, delta=0.333),
            adjustment(LM, set_to=30.0)]
    points = adjustments.adjusted_points(row, mine)
    assert (points[LINEAR], points[LM]) == (4.33, 30.0)
    assert points["total"] == 38.55  # 4.33 + 30 = 34.33, + 4.216 = 38.546 -> 38.55
    assert adjustments.cells(row, mine) == {
        "adjusted_total": 38.55,
        "adjustments": f"total +4.216 (why, by Kim); {LINEAR} +0.333 (why, by Kim); {LM} set to "
                       f"30 (why, by Kim)"}
    assert adjustments.cells(row, []) == {"adjusted_total": "", "adjustments": ""}


def test_an_adjustment_reaches_its_row_by_key_or_by_student_and_names_the_unknown():
    mine = [adjustment("total", 1, student="ann"), adjustment("total", 2, student="ann#2"),
            adjustment("total", 3, student="zed")]
    assert adjustments.of_row(mine, "ann#2", "ann") == mine[:2]
    assert adjustments.of_row(mine, "ann#1", "ann") == mine[:1]
    rows = {"ann#2": {"student": "ann"}}
    assert adjustments.unknown(mine, rows) == [
        "adjustments.csv line 2: no row of 'zed' in grades.csv: not applied (name the row as "
        "grades.csv's student column does)"]


def test_the_feedback_s_block_is_replaced_and_an_unchanged_file_is_not_written(tmp_path):
    row = row_of({LINEAR: 4.0})
    mine = [adjustment("total", delta=1.5)]
    block = (f"{adjustments.FEEDBACK_HEADING}\n  total +1.5 (why, by Kim)\nYour total after "
             f"them: 5.5. The report below is the autograder's, before them.\n\n")
    feedback = tmp_path / "ann.txt"
    feedback.write_text("report\n")
    adjustments.update_feedback(feedback, mine, row)
    assert feedback.read_text() == block + "report\n"
    adjustments.update_feedback(feedback, mine, row)
    assert feedback.read_text() == block + "report\n"
    os.utime(feedback, (0, 0))
    adjustments.update_feedback(feedback, mine, row)
    assert feedback.stat().st_mtime == 0  # unchanged: not written again
    adjustments.update_feedback(feedback, [], row)
    assert feedback.read_text() == "report\n"
    adjustments.update_feedback(tmp_path / "none.txt", mine, row)
    assert not (tmp_path / "none.txt").exists()


def test_a_hand_edit_is_found_by_the_record_or_else_by_the_total():
    row = row_of({LINEAR: 4.0})
    row[adjustments.AS_WRITTEN] = adjustments.as_written(row)
    assert adjustments.hand_edits(row, []) == []
    edited = {**row, LINEAR: "5", "total": "n/a"}
    assert adjustments.hand_edits(edited, []) == [(LINEAR, 4.0, 5.0), ("total", 4.0, "n/a")]
    unrecorded = row_of({LINEAR: 4.0}, total="6.0")
    assert adjustments.hand_edits(unrecorded, []) == [("total", 4.0, 6.0)]
    assert adjustments.hand_edits({**unrecorded, LINEAR: ""}, []) == []
    assert adjustments.hand_edits({**unrecorded, LINEAR: "x"}, []) == []
    assert adjustments.as_written({**row, LM: ""}).count('""') == 2  # LM and adjusted_total


def test_an_edit_an_adjustment_keeps_is_undone_and_any_other_refused(tmp_path):
    path = tmp_path / "grades.csv"
    row = row_of({LINEAR: 4.0})
    row[adjustments.AS_WRITTEN] = adjustments.as_written({**row, "adjusted_total": ""})
    rows = {"ann": {**row, "total": "6.0"}}
    kept = adjustments.settle_hand_edits(rows, [adjustment("total", delta=2.0)], path)
    assert kept == [f"{path}: total of ann edited by hand (4.0 -> 6.0): kept by "
                    f"{tmp_path / adjustments.FILE_NAME}; the column shows the autograder's "
                    f"points again"]
    assert rows["ann"]["total"] == 4.0
    rows = {"ann": {**row, "total": "6.5"}}
    with pytest.raises(SystemExit, match=r"\(4 -> 6.5\); record it in .* ann,total,\+2.5,,<why>"):
        adjustments.settle_hand_edits(rows, [adjustment("total", delta=2.0)], path)
    assert rows["ann"]["total"] == "6.5"


def test_a_refusal_proposes_the_line_that_keeps_a_number_and_names_the_file_otherwise():
    path = Path("adjustments.csv")
    assert adjustments.refusal("ann", LINEAR, 4.0, 3.25, path) == (
        f"grades.csv's {LINEAR} for ann was edited by hand (4 -> 3.25); record it in "
        f"adjustments.csv (student,applies_to,delta,set_to,reason,by): ann,{LINEAR},-0.75,,"
        f"<why>,<who> (or set_to 3.25 in place of the delta), then run the command again")
    for column, before, now in [("adjusted_total", 4.0, 5.0), (LINEAR, 4.0, "x"),
                                (LINEAR, "", 5.0)]:
        assert adjustments.refusal("ann", column, before, now, path).endswith(
            "it is written from adjustments.csv; put the decision there")


def test_an_adjustment_is_frozen_and_an_empty_category_counts_as_no_points():
    total = adjustment("total", delta=1.5)
    with pytest.raises(FrozenInstanceError):
        total.delta = 2.0  # read once, applied to every version of the student
    points = adjustments.adjusted_points({"student": "ann"}, [total])
    assert points == {**{category: 0.0 for category in rubric.RUBRIC}, "total": 1.5}


def test_a_refusal_s_delta_is_to_the_cent():
    assert ": ann,total,-0.75,,<why>" in adjustments.refusal("ann", "total", 4.0, 3.2549,
                                                             Path("adjustments.csv"))
