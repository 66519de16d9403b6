# hw4p1: instructor-only
"""grades.csv's rows one by one (autograder/classroom/grades_csv.py), without a grading: a row's
numbers from a judge's report (the total to the cent, the seconds to a tenth, a missing
perplexity), the flags across the class (byte-identical weights, run-time code, each other
student named once at their nearest), the columns' order, the rows read back and a row's key,
and the adjustments applied when the rows are written. Every value is worked out by hand here.

    .venv/bin/python -m pytest -q -n 0 tests/classroom/test_grades_csv_units.py
"""
from pathlib import Path

import numpy as np
import torch

from autograder.classroom import adjustments, grades_csv, spreadsheet
from autograder.classroom.handins import Handin
from autograder.judging.grading_run import GradingRun
from autograder.judging.scoring import rubric, weights_fingerprint
from autograder.judging.scoring.report import GradingReport, LanguageModelResult, TestResult

LINEAR = next(iter(rubric.RUBRIC))


def test_a_row_s_numbers_come_from_the_report_rounded():
    tests = [TestResult("linear_forward", LINEAR, 2, 2, "s", "", family="shape-bug", seconds=0.5),
             TestResult("linear_backward", LINEAR, 3, 0, "s", "m", family="Not A Family"),
             TestResult("linear_more", LINEAR, 3, 0, "s", "m", family="shape-bug")]
    report = GradingReport(tests=tests, flags=["a; b"], seconds={LINEAR: 1.5, "other": 2.0},
                           lm=LanguageModelResult(message="", perplexity_char=None,
                                                  weights_fingerprint="edited"))
    graded = GradingRun({LINEAR: 2.004, rubric.LM_CATEGORY: 30.001}, report, "", 12.345, False)
    handin = Handin("ann", Path("ann.tar"), note="chose the latest")
    row = grades_csv.row_of(handin, graded, "h", "g", "highest")
    assert (row["total"], row["seconds"], row["perplexity_recomputed"]) == (32.01, 12.3, "")
    assert (row["likely_causes"], row["integrity_flags"], row["notes"]) == (
        "shape-bug", "a, b", "chose the latest")
    assert (row["test:linear_forward"], row["test:linear_backward"]) == (2, 0)
    assert [key for key in row if key.startswith(("test_seconds:", "seconds:"))] == [
        "test_seconds:linear_forward", f"seconds:{LINEAR}"]
    assert row["weights_fingerprint"] == ""
    assert (row["perplexity_reported"], row["parameters"], row["tokenizer"]) == ("", "", "")
    measured = LanguageModelResult(message="", perplexity_char=3.5, reported_perplexity_char=3.4,
                                   num_parameters=1000, token_type="char")
    row = grades_csv.row_of(handin, GradingRun({}, GradingReport(lm=measured), "", 1.0, False),
                            "h", "g", "highest")
    assert (row["perplexity_recomputed"], row["perplexity_reported"], row["parameters"],
            row["tokenizer"]) == (3.5, 3.4, 1000, "char")
    crashed = grades_csv.row_of(handin, GradingRun({}, None, "", 0.0, False, "no report"), "h",
                                "g", "highest")
    assert (crashed["status"], crashed["notes"]) == ("crashed", "chose the latest; no report")


def fingerprint(shift: float) -> str:
    """A fingerprint of one trained 50-value tensor, its learned part moved by ``shift``."""
    start = {"w": torch.ones(50, dtype=torch.float64)}
    learned = torch.linspace(-1, 1, 50, dtype=torch.float64)
    other = torch.cos(torch.arange(50, dtype=torch.float64))
    return weights_fingerprint.fingerprint({"w": start["w"] + learned + shift * other}, start)


def test_the_flags_name_each_other_student_once_at_their_nearest():
    rows = {"ann": {"student": "ann", "weights_sha256": "s1", "runtime_code": "exec",
                    "integrity_flags": "odd; odder", "weights_fingerprint": fingerprint(0.0)},
            "bo#1": {"student": "bo", "weights_sha256": "s2", "weights_fingerprint":
                     fingerprint(0.001)},
            "bo#2": {"student": "bo", "weights_sha256": "s1", "weights_fingerprint":
                     fingerprint(0.0)},
            "cy": {"student": "cy", "weights_sha256": "", "weights_fingerprint": fingerprint(3)}}
    flags = {key: row["flags"] for key, row in grades_csv.with_flags(rows).items()}
    assert flags["ann"].startswith("odd; odder; its mytorch builds code at run time (exec); "
                                   "shares its weights with bo (byte-identical ")
    assert "distance" not in flags["ann"]  # bo already named as byte-identical
    assert flags["bo#1"].startswith("shares its weights with ann (distance 0.00")
    assert flags["bo#1"].endswith(f": at most {weights_fingerprint.TOLERANCE} is the same "
                                  f"trained weights up to scale and small changes (honest "
                                  f"independent trainings: docs/results.md)")
    assert flags["cy"] == ""


def test_other_students_are_each_named_once_without_the_student_or_the_identical():
    rows = {"a": {"student": "ann"}, "b1": {"student": "bo"}, "b2": {"student": "bo"},
            "c": {"student": "cy"}, "d": {"student": "di"}}
    pairs = [("a", 0.0), ("b2", 0.01), ("b1", 0.02), ("c", 0.03), ("d", 0.04)]
    assert grades_csv.other_students(pairs, rows, "ann", ["di"]) == {"bo": 0.01, "cy": 0.03}


def test_the_columns_are_the_fixed_ones_then_each_test_then_each_category_s_seconds():
    rows = {"a": {"test:b": 1, "test_seconds:b": 0.1, "test:a": 2, f"seconds:{LINEAR}": 1,
                  "seconds:zz": 2, f"seconds:{rubric.LM_CATEGORY}": 3}}
    assert grades_csv.columns_of(rows)[len(grades_csv.COLUMNS):] == [
        "test:a", "test:b", "test_seconds:b", f"seconds:{LINEAR}",
        f"seconds:{rubric.LM_CATEGORY}", "seconds:zz"]


def test_rows_are_read_back_by_their_key_and_written_with_their_adjustments(tmp_path):
    path = tmp_path / "grades.csv"
    assert grades_csv.read_rows(path) == {}
    rows = {"ann#2": {"student": "ann", "version": "2", "versions_graded": "all",
                      LINEAR: "4.0", "total": "4.0"},
            "bo": {"student": "bo", "version": "3", "versions_graded": "highest",
                   LINEAR: "1.0", "total": "1.0"}}
    (tmp_path / "feedback").mkdir()
    (tmp_path / "feedback/ann_v2.txt").write_text("report\n")
    (tmp_path / adjustments.FILE_NAME).write_text(
        "student,applies_to,delta,set_to,reason,by\nann,total,1.5,,request,Kim\n")
    grades_csv.write_rows(path, rows)
    back = grades_csv.read_rows(path)
    assert sorted(back) == ["ann#2", "bo"]
    assert (back["ann#2"]["adjusted_total"], back["bo"]["adjusted_total"]) == ("5.5", "")
    assert (tmp_path / "feedback/ann_v2.txt").read_text().startswith(
        adjustments.FEEDBACK_HEADING)
    assert grades_csv.feedback_path(tmp_path, "ann#2") == tmp_path / "feedback/ann_v2.txt"
    spreadsheet.write_csv(path, ["student", "total"], [["", "1"], ["cy", "2"]])
    assert list(grades_csv.read_rows(path)) == ["cy"]


def test_an_adjustment_naming_no_row_is_said_on_standard_error(tmp_path, capsys):
    path = tmp_path / "grades.csv"
    grades_csv.write_rows(path, {"bo": {"student": "bo", LINEAR: "1.0", "total": "1.0"}}, [])
    (tmp_path / adjustments.FILE_NAME).write_text(
        "student,applies_to,delta,set_to,reason,by\nzed,total,1,,request,Kim\n")
    rows, staff = grades_csv.read_settled(path)
    assert list(rows) == ["bo"] and [adjustment.student for adjustment in staff] == ["zed"]
    assert "no row of 'zed' in grades.csv: not applied" in capsys.readouterr().err
    assert np.isclose(float(rows["bo"]["total"]), 1.0)


def test_weights_that_compute_the_same_are_flagged_with_their_output_distance():
    def probed(values: list[float]) -> str:
        return weights_fingerprint.fingerprint(
            {"w": torch.tensor([1.0, 2.0])}, {"w": torch.tensor([2.0, 1.0])},
            ("a" * 16, np.float32(values)))

    rows = {"ann": {"student": "ann", "weights_fingerprint": probed([0.0, 0.0])},
            "bo": {"student": "bo", "weights_fingerprint": probed([0.005, -0.005])}}
    flags = grades_csv.with_flags(rows)["ann"]["flags"]
    assert flags.endswith(f"computes what bo's weights compute (output distance 0.005): at most "
                          f"{weights_fingerprint.OUTPUT_TOLERANCE} nats per token on the probe "
                          f"batch is the same function (honest independent trainings: "
                          f"docs/results.md)")
