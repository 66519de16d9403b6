"""Step 5 of the judge: choose the strongest sandbox that works here
(``autograder.judging.isolation.sandbox``), then judge every mytorch category with one sandboxed
worker (``autograder.judging.scoring.judge``), print each test's outcome and fill the scores and the
report; or, when no student code may run, fail every test with the reason."""
from __future__ import annotations

from autograder.judging.isolation import sandbox_modes
from autograder.judging.scoring import judge, report as grading_report, rubric
from autograder.judging.scoring.feedback import indent, section
from autograder.judging.isolation.sandbox import Sandbox, choose, python_executable


def choose_sandbox(layout: sandbox_modes.Layout, asked: sandbox_modes.Mode | None,
                   allow_unisolated: bool,
                   report: grading_report.GradingReport) -> Sandbox | None:
    """The strongest sandbox that works here (``asked`` alone when given), printed and recorded
    in ``report``; None, with every mytorch test failed, when none may run student code."""
    section("Sandbox")
    chosen, notes = choose(layout, python_executable(), asked, allow_unisolated)
    for note in notes:
        print(f"  not used: {note}")
    if chosen is None:
        skip_mytorch(f"the sandbox asked for (--sandbox {asked.name}) does not work here, so "
                     f"student code was not run; grade without --sandbox to use the strongest "
                     f"mode that works" if asked else
                     "no sandbox layer works here (see the notes above), so student code was not "
                     "run", report)
        return None
    description = chosen.describe()
    report.sandbox = description.mode
    print(f"  {description.summary}")
    print(f"  layers: {description.layers}")
    if description.cap_note:
        print(f"  note: {description.cap_note}")
    return chosen


def skip_mytorch(reason: str, report: grading_report.GradingReport) -> None:
    """Every mytorch test fails with ``reason`` (each category scores 0)."""
    for category, points in rubric.MYTORCH_RUBRIC.items():
        section(f"{category} ({points} points)")
        print(f"  {reason}. 0/{points}")
        report.tests += [grading_report.TestResult(test.name, category, float(test.points), 0.0,
                                                   test.summary, reason)
                         for test in judge.tests_of(category)]


def grade_mytorch(sandbox: Sandbox, timeout: float, scores: dict[str, float],
                  report: grading_report.GradingReport) -> None:
    """Judge every mytorch category in turn with one worker start in ``sandbox``
    (``judge.grade_categories``), ``timeout`` seconds each; print each category's outcome as it
    is judged and fill its score."""
    def graded(category: str, run: judge.CategoryRun) -> None:
        scores[category] = grade_mytorch_category(category, run, report)

    judge.grade_categories(list(rubric.MYTORCH_RUBRIC), sandbox, timeout, graded=graded)


def grade_mytorch_category(category: str, run: judge.CategoryRun,
                           report: grading_report.GradingReport) -> float:
    """Print one category's section and each test's outcome from its ``run``; return the
    points."""
    points = rubric.MYTORCH_RUBRIC[category]
    section(f"{category} ({points} points)")
    if run.timed_out:
        report.status = grading_report.Status.TIMEOUT
    report.seconds[category] = round(run.seconds, 2)
    for result in run.results:
        verdict = "PASS" if result.passed else "FAIL"
        print(f"  [{verdict}] {result.name}: {result.points:g}/{result.max_points:g}")
        print(f"         checks: {result.summary}")
        if result.message:
            print(indent(result.message, "         why: "))
        if result.hint:
            print(indent(result.hint, "         likely cause: "))
        report.tests.append(result)
    if run.output.strip():  # never echoed: it could carry whatever the worker could read
        print(f"  (your code printed {len(run.output)} characters; output is not shown, run the "
              f"public tests to see it)")
    earned = rubric.added(result.points for result in run.results)
    reason = f" ({run.note})" if run.note else ""
    print(f"  => {category}: {earned:g}/{points}{reason}   [{run.seconds:.1f} s]")
    return earned
