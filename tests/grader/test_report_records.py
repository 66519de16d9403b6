# hw4p1: instructor-only
"""The grading report's records, called directly (``autograder.judging.scoring.report``): the
version read (2) and the ones refused; which field a refusal names (the first refused, a
positional argument by its field's name, one past the fields by its index); a test passed only
at its full points; an LM result not timed out unless said; the leaderboard's perplexity rounded
to 2 decimals.

    .venv/bin/python -m pytest -q tests/grader/test_report_records.py
"""
import pytest

from autograder.judging.scoring import report
from autograder.judging.scoring.report import (GradingReport, LanguageModelResult, ReportError,
                                               TestResult)


@pytest.mark.parametrize("version, read", [(1, False), (2, True), (3, False)])
def test_only_reports_of_version_2_are_read(version, read):
    if read:
        assert report.from_json({"version": version}).version == 2
        assert GradingReport().to_json()["version"] == 2
    else:
        with pytest.raises(ReportError, match=f"of version {version}, and this tool reads "
                                              f"version 2"):
            report.from_json({"version": version})


def test_a_refusal_names_the_first_field_refused():
    with pytest.raises(ReportError, match=r"^TestResult\.category is 1, not a valid string"):
        TestResult("n", 1, 2.0, True, "s", "m")
    with pytest.raises(ReportError, match=r"^TestResult\.max_points is 'x', not a valid integer "
                                          r"or a valid number"):
        TestResult(name="n", category="c", max_points="x", points=None, summary="s", message="m")
    with pytest.raises(ReportError, match=r"^TestResult\.9 is not a field of the report"):
        TestResult("n", "c", 2.0, 0.0, "s", "m", "h", "f", None, "one too many")
    with pytest.raises(ReportError, match=r"^GradingReport\.threads\['a'\] is \[1\], not a valid"):
        GradingReport(threads={"a": [1]})


@pytest.mark.parametrize("points, passed", [(2.5, True), (2.49, False), (0, False)])
def test_a_test_passed_only_at_its_full_points(points, passed):
    assert TestResult("n", "c", 2.5, points, "s", "").passed is passed


def test_an_lm_result_is_not_timed_out_unless_said_and_its_board_row_has_2_decimals():
    result = LanguageModelResult("m", perplexity_char=12.3456, num_parameters=7,
                                 token_type="char")
    assert result.timed_out is False
    assert result.scoreboard() == [12.35, 7, "char"]
    assert GradingReport(lm=result).scoreboard() == [12.35, 7, "char"]
    assert LanguageModelResult("m").scoreboard() is None and GradingReport().scoreboard() is None
