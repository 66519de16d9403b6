# hw4p1: instructor-only
"""The local report's scoring, called directly (``tests/testing_framework.py``'s
``RubricReport``): a category with points earns all of them when every one of its tests ran and
passed, and None (no local points) when one failed or did not run; a 0-point category scores 0
either way; the summary's numbers (earned/worth, tests passing of all, the total) and words; a run
that pytest ended early fails every category.

    .venv/bin/python -m pytest -q tests/kit/test_rubric_scores.py
"""
import io

import pytest

from tests.testing_framework import (BONUS_WORK, GIVEN_CODE, THROUGH_LM_WORK, RubricReport,
                                     label)


def case_a():
    """A stand-in test function (only its name is read)."""


def case_b():
    """A stand-in test function."""


def case_c():
    """A stand-in test function."""


def case_d():
    """A stand-in test function."""


def report_of(rubric: dict, own_work: dict | None = None) -> tuple[RubricReport, io.StringIO]:
    """A report over Linear (2.5 points: case_a, case_b), Data (0 points: case_c) and
    Optimizer (0 points: case_d)."""
    grouped = {"Linear": [case_a, case_b], "Data": [case_c], "Optimizer": [case_d]}
    out = io.StringIO()
    return RubricReport(grouped, rubric, own_work or {}, out), out


POINTS = {"Linear": 2.5, "Data": 0, "Optimizer": 0}


def finished(report: RubricReport, failing: dict[str, str], exit_code=pytest.ExitCode.OK,
             ran=("case_a", "case_b", "case_c", "case_d")) -> dict:
    """Record ``ran`` as run, ``failing`` ({test: category}) as failed, end the run."""
    for name in ran:
        report.ran.add(name)
    for name, category in failing.items():
        report.failures[name] = "differs"
        report.failed.add(category)
    report.stopped(exit_code)
    report.summary()
    return report.scores


def test_every_test_passing_earns_every_point():
    report, out = report_of(POINTS, {"Data": "THROUGH_LM"})
    assert finished(report, {}) == {"Linear": 2.5, "Data": 0, "Optimizer": 0}
    lines = out.getvalue().splitlines()
    assert f"  {'Linear':<40s} PASSED  2.5/2.5" in lines
    assert f"  {'Data':<40s} PASSED  {THROUGH_LM_WORK}" in lines
    assert f"  {'Optimizer':<40s} PASSED  {GIVEN_CODE}" in lines
    assert f"  {'Total':<40s}         2.5/2.5" in lines


@pytest.mark.parametrize("failing", ["case_a", "case_b"])
def test_one_failing_test_leaves_its_category_without_local_points(failing):
    report, out = report_of(POINTS)
    assert finished(report, {failing: "Linear"}) == {"Linear": None, "Data": 0, "Optimizer": 0}
    text = out.getvalue()
    assert f"  {'Linear':<40s} FAILED  no points here (1 of 2 tests pass)" in text
    assert "not known here: Autolab's hidden tests give Linear partial points of their own" in text
    assert "2.5/2.5" not in text


def test_a_failing_zero_point_category_scores_zero_and_says_so():
    report, out = report_of(POINTS, {"Optimizer": "BONUS"})
    assert finished(report, {"case_c": "Data", "case_d": "Optimizer"}) == {
        "Linear": 2.5, "Data": 0, "Optimizer": 0}
    text = out.getvalue()
    assert (f"  {'Data':<40s} FAILED  given code that should pass unchanged: see the failure "
            f"above") in text
    assert f"  {'Optimizer':<40s} FAILED  {BONUS_WORK}" in text
    assert f"  {'Total':<40s}         2.5/2.5" in text


def test_a_module_without_points_prints_no_total():
    report, out = report_of({"Linear": 0, "Data": 0, "Optimizer": 0})
    assert finished(report, {}) == {"Linear": 0, "Data": 0, "Optimizer": 0}
    assert "Total" not in out.getvalue()


def test_a_test_that_did_not_run_fails_every_category():
    report, out = report_of(POINTS)
    scores = finished(report, {}, ran=("case_a", "case_c", "case_d"))
    assert scores == {"Linear": None, "Data": 0, "Optimizer": 0}
    assert report.failed == {"Linear", "Data", "Optimizer"}
    assert report.failures == {"case_b": "did not run: pytest ended the run early (exit code 0: "
                                         "OK; its own message is above)"}
    assert f"  {'Linear':<40s} FAILED  no points here (1 of 2 tests pass)" in out.getvalue()


@pytest.mark.parametrize("exit_code, stops", [(pytest.ExitCode.OK, False),
                                              (pytest.ExitCode.TESTS_FAILED, False),
                                              (pytest.ExitCode.INTERRUPTED, True),
                                              (pytest.ExitCode.INTERNAL_ERROR, True)])
def test_a_run_pytest_ended_abnormally_fails_every_category(exit_code, stops):
    report, out = report_of(POINTS)
    scores = finished(report, {}, exit_code=exit_code)
    assert scores["Linear"] == (None if stops else 2.5)
    assert ("The run stopped before its end" in out.getvalue()) is stops


def test_the_tests_passing_count_only_those_that_ran_and_passed():
    report, _ = report_of(POINTS)
    assert report.passed("Linear") == (0, 2)
    report.ran.update({"case_a", "case_b"})
    assert report.passed("Linear") == (2, 2)
    report.failures["case_b"] = "differs"
    assert report.passed("Linear") == (1, 2)


@pytest.mark.parametrize("points, kind, words", [
    (2.5, None, "2.5 points when all its tests pass"),
    (0, None, f"0 points here, {GIVEN_CODE}"),
    (0, "BONUS", f"0 points here, {BONUS_WORK}"),
    (0, "THROUGH_LM", f"0 points here, {THROUGH_LM_WORK}"),
])
def test_a_category_is_announced_with_its_worth(points, kind, words):
    assert label(points, kind) == words
