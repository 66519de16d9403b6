# hw4p1: instructor-only
"""A mytorch category's score from its tests' results, called directly
(``autograder.judging.scoring.mytorch_categories``): the points added up (rounded to 2 decimals),
each test printed with its numbers and recorded, a timed-out category marking the report, the
worker's output counted and never echoed; and every test at 0 with the reason when no student
code may run.

    .venv/bin/python -m pytest -q tests/grader/test_category_scores.py
"""
from autograder.judging.isolation import sandbox_modes
from autograder.judging.scoring import judge, mytorch_categories
from autograder.judging.scoring.report import GradingReport, Status, TestResult


def result(name: str, points: float, message: str = "", hint: str = "") -> TestResult:
    return TestResult(name, "Linear", 1.25, points, f"checks {name}", message, hint)


def test_a_category_earns_the_sum_of_its_tests_points(capsys):
    report = GradingReport()
    run = judge.CategoryRun([result("a", 1.25), result("b", 0.0, "wrong", "a transpose"),
                             result("c", 1.25), result("d", 0.1)], output="", seconds=3.14159,
                            note="")
    assert mytorch_categories.grade_mytorch_category("Linear", run, report) == 2.6
    assert [test.name for test in report.tests] == ["a", "b", "c", "d"]
    assert report.seconds == {"Linear": 3.14} and report.status == Status.OK
    lines = capsys.readouterr().out.splitlines()
    assert lines[1:] == [
        "== Linear (5 points) ==",
        "  [PASS] a: 1.25/1.25", "         checks: checks a",
        "  [FAIL] b: 0/1.25", "         checks: checks b", "         why: wrong",
        "         likely cause: a transpose",
        "  [PASS] c: 1.25/1.25", "         checks: checks c",
        "  [FAIL] d: 0.1/1.25", "         checks: checks d",
        "  => Linear: 2.6/5   [3.1 s]"]


def test_a_timed_out_category_marks_the_report_and_says_why(capsys):
    report = GradingReport()
    run = judge.CategoryRun([result("a", 1.25)], output="secret\n", seconds=60.0,
                            note="stopped at the 60 s time limit", timed_out=True)
    assert mytorch_categories.grade_mytorch_category("Linear", run, report) == 1.25
    assert report.status == Status.TIMEOUT
    out = capsys.readouterr().out
    assert "secret" not in out
    assert "(your code printed 7 characters; output is not shown" in out
    assert "  => Linear: 1.25/5 (stopped at the 60 s time limit)   [60.0 s]" in out


def test_a_category_with_only_blank_output_mentions_none(capsys):
    run = judge.CategoryRun([], output=" \n", seconds=0.0, note="")
    assert mytorch_categories.grade_mytorch_category("Softmax", run, GradingReport()) == 0
    assert "your code printed" not in capsys.readouterr().out


def test_when_no_student_code_may_run_every_test_scores_zero(capsys):
    report = GradingReport()
    mytorch_categories.skip_mytorch("no sandbox works", report)
    expected = {category: len(judge.tests_of(category)) for category in
                ("Linear", "Softmax", "ScaledDotProductAttention", "MultiHeadAttention")}
    assert {category: sum(test.category == category for test in report.tests)
            for category in expected} == expected == {
        "Linear": 4, "Softmax": 3, "ScaledDotProductAttention": 5, "MultiHeadAttention": 6}
    assert all(test.points == 0.0 and test.max_points > 0 and test.message == "no sandbox works"
               for test in report.tests)
    out = capsys.readouterr().out
    assert "  no sandbox works. 0/5" in out and "  no sandbox works. 0/20" in out


def test_a_sandbox_asked_for_that_does_not_work_here_runs_no_student_code(tmp_path, capsys):
    missing = sandbox_modes.Mode("missing", isolates="nothing", summary="never used",
                                 command="hw4p1-no-such-sandbox-command", package="none")
    layout = sandbox_modes.Layout(*(tmp_path / name for name in ("rt", "pylib", "st", "in",
                                                                 "tmp")))
    report = GradingReport()
    assert mytorch_categories.choose_sandbox(layout, missing, False, report) is None
    assert report.sandbox is None and len(report.tests) == 18
    assert {test.points for test in report.tests} == {0.0}
    assert report.tests[0].message.startswith(
        "the sandbox asked for (--sandbox missing) does not work here, so student code was not "
        "run")
    assert "  not used: missing: no hw4p1-no-such-sandbox-command command" in (
        capsys.readouterr().out)
