"""The judge of the mytorch categories: builds each hidden test's program, has the sandboxed
worker run it, and decides each test's points from the values that come back.

Runs in the grader's own process (torch, numpy); it never imports the student's code. One worker
per category, so a crash, a hang or an import error costs only that category; inside a category,
each hidden test passes or fails on its own and earns its share of the points.
"""
from __future__ import annotations

import json
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path

from autograder import sandbox, wire
from autograder.hidden_tests.mytorch_hidden import HiddenTest, tests_of

MAX_MESSAGE_CHARS = 600


@dataclass
class TestResult:
    """The outcome of one hidden test, as both platforms report it."""

    name: str
    category: str
    max_points: float
    points: float
    summary: str  # what the test checks
    message: str  # empty when it passed; what differed otherwise (no hidden inputs)

    @property
    def passed(self) -> bool:
        return self.points == self.max_points


@dataclass
class CategoryRun:
    """A category's test results and what the worker printed."""

    results: list[TestResult]
    output: str
    seconds: float
    note: str  # why the worker stopped early (time limit, exit status), or ''


def grade_category(category: str, layout: sandbox.Layout, mode: str,
                   timeout: float) -> CategoryRun:
    """Run every hidden test of ``category`` against the student's mytorch in ``mode``."""
    tests = tests_of(category)
    checks, returned = {}, {}
    if layout.input_dir.exists():
        shutil.rmtree(layout.input_dir)
    layout.input_dir.mkdir(parents=True)
    for test in tests:
        program = wire.Program()
        checks[test.name] = test.build(program)
        returned[test.name] = program.returned
        program.save(layout.input_dir / test.name)
    (layout.input_dir / "tests.json").write_text(json.dumps([t.name for t in tests]))
    sandbox.make_readable(layout.input_dir)
    run = sandbox.run_worker(mode, layout, python_executable(), ["--input", "{input}"], timeout)
    records, stream_note = wire.decode_records(run.result, returned)
    note = worker_note(run, timeout, stream_note)
    results = [judge_test(test, records.get(test.name), checks[test.name], note)
               for test in tests]
    return CategoryRun(results, run.output, run.seconds, note)


def worker_note(run: sandbox.Run, timeout: float, stream_note: str) -> str:
    """Why tests may lack a result, in words."""
    if run.timed_out:
        return f"the tests were stopped at the {timeout:.0f} s time limit"
    if run.result_overflow:
        return "the worker sent more than the grader reads"
    if run.returncode != 0:
        return f"the test process ended with exit status {run.returncode}"
    return stream_note


def judge_test(test: HiddenTest, record: wire.Record | None, check, note: str) -> TestResult:
    """Pass or fail one test from the worker's record."""
    def result(message: str) -> TestResult:
        points = 0.0 if message else float(test.points)
        return TestResult(test.name, test.category, float(test.points), points, test.summary,
                          message[:MAX_MESSAGE_CHARS])

    if record is None:
        return result(f"no result: {note or 'the test process stopped before this test'}")
    if record.error:
        return result(record.error)
    try:
        check(Values(record.values, record.problems))
    except AssertionError as error:
        return result(str(error) or "a check failed")
    except KeyError:
        return result("a value the test needs was not returned")
    except (ValueError, TypeError, IndexError, ArithmeticError) as error:
        return result(f"the values returned could not be compared ({type(error).__name__}: "
                      f"{wire.printable(str(error))[:200]})")
    return result("")


class Values(dict):
    """The worker's returned values, looked up by the Refs the test recorded; reading a value that
    was refused (not a numeric array) fails the test with the reason."""

    def __init__(self, values: dict, problems: dict[str, str]) -> None:
        super().__init__(values)
        self.problems = problems

    def __getitem__(self, ref: wire.Ref):
        if ref.name in self.problems:
            raise AssertionError(f"a value is not a numeric array: {self.problems[ref.name]}")
        return super().__getitem__(ref.name)


def python_executable() -> str:
    """The real interpreter (not a virtual environment's link): the worker runs it with -I -S."""
    return str(Path(sys.executable).resolve())
