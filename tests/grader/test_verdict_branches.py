# hw4p1: instructor-only
"""The judge's verdict on one test, called directly (``autograder.judging.scoring.verdicts``):
the points a record earns (all of the test's or 0.0) and the message and failure of each way a
test can fail (no record, timed out, each kind of reported error, a check that fails, raises
KeyError or anything else), each message read whole; the limits on the feedback (600 characters,
a line number below 10**6, a function name of 60 characters) on each side; the operands and
shapes a hint quotes.

    .venv/bin/python -m pytest -q tests/grader/test_verdict_branches.py
"""
import os
from types import SimpleNamespace

import numpy as np
import pytest

from autograder.judging.scoring import verdicts
from autograder.judging.scoring.hidden_tests.checks import CheckFailed, HiddenTest
from autograder.judging.scoring.hidden_tests.diagnosis import Failure
from autograder.sandboxed import wire
from autograder.sandboxed.refusals import MADE_AT_RUN_TIME

TEST = HiddenTest("t_linear", "Linear", 2.5, "checks a linear layer", build=None)
FILES = frozenset({"nn/linear.py"})


def steps_of_a_linear() -> tuple[list[dict], dict]:
    """(steps, input arrays) of new Linear, forward(A (4, 3)), backward(dLdZ (4, 5))."""
    program = wire.Program()
    layer = program.new("Linear", 3, 5)
    program.call(layer, "forward", np.zeros((4, 3)))
    program.call(layer, "backward", np.zeros((4, 5), dtype=np.float32))
    return program.steps, program.arrays


def judged(record, check=lambda values: None, **kwargs):
    steps, arrays = steps_of_a_linear()
    return verdicts.judge_test(TEST, record, check, kwargs.pop("note", ""), steps, FILES,
                               arrays=arrays, **kwargs)


def numbers(result) -> tuple:
    return result.max_points, result.points, result.message


def raising(exception):
    def check(values):
        raise exception
    return check


# --- the points and the message ----------------------------------------------------------------

def test_a_test_whose_check_passes_earns_all_its_points():
    seen = []
    result, failure = judged(wire.Record(None, {"v": np.ones(1)}, {}),
                             check=lambda values: seen.append(values[wire.Ref("v")].tolist()))
    assert numbers(result) == (2.5, 2.5, "") and failure is None and seen == [[1.0]]
    assert result.passed


@pytest.mark.parametrize("check, message, kind", [
    (raising(CheckFailed("output differs", Failure("wrong"))), "output differs", "wrong"),
    (raising(CheckFailed("", Failure("wrong"))), "a check failed", "wrong"),
    (raising(KeyError("v")), "a value the test needs was not returned", "stopped"),
    (raising(ZeroDivisionError()), "the values returned could not be compared "
     "(ZeroDivisionError)", "stopped"),
])
def test_a_check_that_fails_earns_nothing_and_says_why(check, message, kind):
    result, failure = judged(wire.Record(None, {}, {}), check=check)
    assert numbers(result) == (2.5, 0.0, message) and failure.kind == kind
    assert not result.passed


@pytest.mark.parametrize("chars, shown", [(600, 600), (601, 600), (599, 599)])
def test_a_message_is_cut_to_600_characters(chars, shown):
    result, _ = judged(wire.Record(None, {}, {}),
                       check=raising(CheckFailed("m" * chars, Failure("wrong"))))
    assert result.message == "m" * shown


def test_a_refused_value_fails_the_check_that_reads_it():
    values = verdicts.Values({"v": np.ones(1)}, {"w": wire.NOT_AN_ARRAY})
    assert values[wire.Ref("v")].tolist() == [1.0]
    with pytest.raises(CheckFailed, match="a value is not a numeric array") as caught:
        values[wire.Ref("w")]
    assert caught.value.failure.kind == "missing"


@pytest.mark.parametrize("timed_out, note, message, kind", [
    ("after 60 s", "", "timed out: this test was still running when the tests were stopped "
     "after 60 s", "timeout"),
    ("", "", "no result: the test process stopped before this test", "stopped"),
    ("", "the worker crashed", "no result: the worker crashed", "stopped"),
])
def test_a_test_without_a_record_earns_nothing(timed_out, note, message, kind):
    result, failure = judged(None, timed_out=timed_out, note=note)
    assert numbers(result) == (2.5, 0.0, message) and failure.kind == kind


@pytest.mark.parametrize("error, message, kind", [
    ({"kind": "raised", "type": "ValueError", "step": -1},
     "mytorch does not import: ValueError", "import"),
    ({"kind": "numpy only", "module": "torch", "step": 1},
     "mytorch must be written with numpy only: it imports torch", "stopped"),
    ({"kind": "numpy only", "module": "mylib", "step": 1},
     "mytorch must be written with numpy only: it imports one", "stopped"),
    ({"kind": "raised", "type": "NotImplementedError", "step": 1, "file": "nn/linear.py",
      "line": 7, "function": "forward"},
     "not written yet: Linear.forward raised NotImplementedError (at mytorch/nn/linear.py:7, "
     "in forward)", "not written"),
])
def test_a_reported_error_earns_nothing_and_is_worded_by_the_judge(error, message, kind):
    result, failure = judged(wire.Record(error, {}, {}))
    assert numbers(result) == (2.5, 0.0, message) and failure.kind == kind


def test_a_step_that_raised_is_named_with_its_inputs_shapes(tmp_path):
    (tmp_path / "nn").mkdir()
    (tmp_path / "nn" / "linear.py").write_text("x = 1\n    dA = dLdZ @ self.W\n")
    error = {"kind": "raised", "type": "ValueError", "step": 2, "file": "nn/linear.py",
             "line": 2, "function": "backward",
             "operands": [1, 10, 2, 4, 6] + [0] * 6 + [1, 11, 2, 5, 3] + [0] * 6}
    result, failure = judged(wire.Record(error, {}, {}), package=tmp_path)
    assert numbers(result) == (2.5, 0.0, "Linear.backward raised ValueError "
                                         "(at mytorch/nn/linear.py:2, in backward)")
    assert (failure.kind, failure.quantity, failure.step, failure.exception, failure.code) == (
        "raised", "backward", "Linear.backward", "ValueError", "dA = dLdZ @ self.W")
    assert failure.operands == (
        "at `dA = dLdZ @ self.W`: dLdZ (4, 6) float16, self.W (5, 3) float32; "
        "Linear.backward was given dLdZ (4, 5) float32; dLdA must be shaped like A, (4, 3)")


def test_a_wrong_value_before_the_raise_is_named_first():
    error = {"kind": "raised", "type": "ValueError", "step": 2}
    wrong = CheckFailed("output differs", Failure("wrong"))
    result, failure = judged(wire.Record(error, {}, {}), check=raising(wrong))
    assert numbers(result) == (2.5, 0.0, "Linear.backward raised ValueError; before it, "
                                         "output differs")
    assert failure is wrong.failure
    missing = CheckFailed("a value is missing", Failure("missing"))
    for check in (raising(missing), raising(KeyError("v"))):
        result, failure = judged(wire.Record(error, {}, {}), check=check)
        assert result.message == "Linear.backward raised ValueError" and failure.kind == "raised"


# --- the words of a reported failure ---------------------------------------------------------

@pytest.mark.parametrize("line, known", [(0, False), (1, True), (10**6 - 1, True),
                                         (10**6, False), ("3", False)])
def test_a_line_number_below_a_million_is_quoted(line, known):
    error = {"kind": "raised", "type": "KeyError", "step": 1, "file": "nn/linear.py",
             "line": line}
    where = f" (at mytorch/nn/linear.py:{line})" if known else ""
    steps, _ = steps_of_a_linear()
    assert verdicts.describe_failure(error, steps, FILES) == f"Linear.forward raised KeyError{where}"
    assert verdicts.describe_failure({**error, "file": "other.py"}, steps, FILES) == (
        "Linear.forward raised KeyError")


@pytest.mark.parametrize("function, named", [("f" * 60, True), ("f" * 61, False),
                                             ("not a name", False), (7, False)])
def test_a_function_name_of_at_most_60_characters_is_quoted(function, named):
    error = {"kind": "raised", "type": "KeyError", "step": 1, "file": "nn/linear.py",
             "line": 3, "function": function}
    steps, _ = steps_of_a_linear()
    inside = f", in {function}" if named else ""
    assert verdicts.describe_failure(error, steps, FILES) == (
        f"Linear.forward raised KeyError (at mytorch/nn/linear.py:3{inside})")


@pytest.mark.parametrize("error, message", [
    ({"kind": "raised", "type": "MyError", "step": 1}, "Linear.forward raised an exception of "
                                                      "its own class"),
    ({"kind": "raised", "type": "SyntaxError", "step": -1, "file": "nn/linear.py", "line": 4},
     "mytorch does not parse: SyntaxError in mytorch/nn/linear.py line 4"),
    ({"kind": "raised", "type": "TabError", "step": -1, "file": "x.py", "line": 4},
     "mytorch does not parse: TabError"),
    ({"kind": "raised", "type": "IndentationError", "step": 1},
     "Linear.forward raised IndentationError"),
    ({"kind": "code at run time", "step": 1, "file": "nn/linear.py", "line": 9},
     f"Linear.forward: {MADE_AT_RUN_TIME} (at mytorch/nn/linear.py:9)"),
    ({"kind": "code at run time", "step": 1},
     f"Linear.forward: {MADE_AT_RUN_TIME}"),
    ({"kind": "not a tuple", "step": 2, "count": 3}, "Linear.backward must return a tuple of 3 "
                                                     "arrays"),
    ({"kind": "not a tuple", "step": 2, "count": "3"}, "Linear.backward failed"),
    ({"kind": "lost", "step": 2}, "the test process lost values the test needs"),
    ({"kind": "other", "step": 0}, "Linear(...) failed"),
])
def test_each_kind_of_failure_is_worded(error, message):
    steps, _ = steps_of_a_linear()
    assert verdicts.describe_failure(error, steps, FILES) == message


@pytest.mark.parametrize("error, kind", [
    ({"kind": "raised", "type": "NotImplementedError", "step": -1}, "not written"),
    ({"kind": "raised", "type": "ValueError", "step": -1}, "import"),
    ({"kind": "raised", "type": "ValueError"}, "import"),
    ({"kind": "raised", "type": "ValueError", "step": 0}, "raised"),
    ({"kind": "numpy only"}, "numpy only"),
])
def test_the_kind_of_failure_comes_first(error, kind):
    assert verdicts.failure_kind(error) == kind


def test_why_tests_lack_a_result():
    def run(returncode, overflow=False):
        return SimpleNamespace(timed_out=returncode is None, result_overflow=overflow,
                               returncode=returncode)
    assert verdicts.worker_note(run(None), 59.6, "n") == (
        "the tests were stopped at the 60 s time limit")
    assert verdicts.worker_note(run(0, True), 60, "n") == (
        "the worker sent more than the grader reads")
    assert verdicts.worker_note(run(-9), 60, "n") == "the test process ended with exit status -9"
    assert verdicts.worker_note(run(0), 60, "n") == "n"


# --- the line and operands a hint quotes -----------------------------------------------------

def test_the_line_that_raised_is_read_from_a_listed_regular_file_only(tmp_path):
    (tmp_path / "a.py").write_text("first\n  second  \n")
    os.symlink(tmp_path / "a.py", tmp_path / "link.py")
    files = frozenset({"a.py", "link.py", "gone.py"})
    read = [verdicts.source_line(tmp_path, files, {"file": name, "line": line})
            for name, line in [("a.py", 2), ("a.py", 1), ("a.py", 0), ("a.py", 10**6),
                               ("a.py", "2"), ("link.py", 1), ("gone.py", 1)]]
    assert read == ["second", "first", "", "", "", "", ""]
    assert verdicts.source_line(None, files, {"file": "a.py", "line": 1}) == ""
    (tmp_path / "long.py").write_bytes(b"\n" * (10**6 - 2) + b"x\ny\n")
    assert [verdicts.source_line(tmp_path, {"long.py"}, {"file": "long.py", "line": line})
            for line in (10**6 - 1, 10**6)] == ["x", ""]
    assert verdicts.source_line(tmp_path, frozenset(), {"file": "a.py", "line": 1}) == ""


@pytest.mark.parametrize("row, text", [
    ([1, 11, 2, 4, 3] + [0] * 6, "(4, 3) float32"),
    ([1, 0, 8] + list(range(1, 9)), "(1, 2, 3, 4, 5, 6, 7, 8) of another dtype"),
    ([1, 12, 9] + [1] * 8, "an array of 9 dimensions, float64"),
    ([2, 15, 0, 5, 1] + [0] * 6, "= -5"),
    ([2, 15, 0, 5, 0] + [0] * 6, "= 5"),
    ([2, 16] + [0] * 9, "a Python float"),
    ([2, 11] + [0] * 9, "a float32 scalar"),
    ([3, 0] + [0] * 9, "None"),
    ([0, 0] + [0] * 9, ""),
    ([4, 12] + [0] * 9, ""),
])
def test_each_operand_row_reads_as_the_value_it_describes(row, text):
    assert verdicts.operand_text(verdicts.held_operands("f(x)", {"operands": row})["x"]) == text


def test_operands_are_quoted_only_when_they_fit_the_line():
    code = "y = a  # `b`"
    rows = [1, 12, 1, 3] + [0] * 7 + [0, 0] + [0] * 9
    assert verdicts.line_operands("y = a @ b", {"operands": rows}) == "at `y = a @ b`: a (3,) float64"
    assert verdicts.line_operands("y = a @ b", {"operands": rows[:11]}) == ""
    assert verdicts.line_operands("y = a @ b", {"operands": [0] * 22}) == ""
    assert verdicts.line_operands("y = 1", {"operands": []}) == ""
    assert verdicts.line_operands(code, {"operands": rows[:11]}) == "at `y = a`: a (3,) float64"


def test_a_backward_names_the_shapes_of_its_last_forwards_inputs_only():
    program = wire.Program()
    layer, other = program.new("Linear", 3, 5), program.new("Linear", 2, 2)
    program.call(layer, "forward", np.zeros((4, 3)))
    program.call(other, "forward", np.zeros((9, 2)))
    program.call(layer, "forward", np.zeros((7, 3)))
    program.call(other, "forward", np.zeros((8, 2)))
    program.call(layer, "backward", np.zeros((7, 5)))
    steps, arrays = program.steps, program.arrays
    assert verdicts.step_operands(steps, 6, arrays) == (
        "Linear.backward was given dLdZ (7, 5) float64; dLdA must be shaped like A, (7, 3)")
    assert verdicts.step_operands(steps, 2, arrays) == "Linear.forward was given A (4, 3) float64"
    assert verdicts.step_operands(steps, 4, arrays) == "Linear.forward was given A (7, 3) float64"
    assert [verdicts.step_operands(steps, index, arrays) for index in (-1, 0, 7)] == ["", "", ""]
    assert verdicts.call_inputs({"args": [{"lit": 3}], "kwargs": {"A": {"ref": "in9"}}},
                                "Linear.forward", arrays) == {}


def test_only_an_array_has_a_shape_to_show():
    assert verdicts.shape_of(np.zeros((2, 3), dtype=np.int8)) == "(2, 3) int8"
    assert verdicts.shape_of(SimpleNamespace(shape=(2,), dtype=None)) == ""
    assert verdicts.shape_of(SimpleNamespace(shape=[2], dtype="f")) == ""
    assert verdicts.shape_of(None) == ""


def test_an_error_without_a_step_is_one_importing_mytorch():
    steps, _ = steps_of_a_linear()
    error = {"kind": "raised", "type": "ValueError"}
    assert verdicts.describe_failure(error, steps, FILES) == "mytorch does not import: ValueError"
    assert verdicts.describe_failure({"kind": "lost"}, steps, FILES) == (
        "the test process lost values the test needs")
    stub = {"kind": "raised", "type": "NotImplementedError"}
    result, failure = judged(wire.Record(stub, {}, {}))
    assert result.message == "not written yet: importing mytorch raised NotImplementedError"
    assert (failure.kind, failure.step, failure.operands) == ("not written", "importing mytorch",
                                                              "")
    result, failure = judged(wire.Record({**stub, "step": 1}, {}, {}))
    assert (failure.step, failure.operands) == ("Linear.forward",
                                                "Linear.forward was given A (4, 3) float64")


def test_the_files_feedback_may_name_are_the_handins_regular_py_files(tmp_path):
    (tmp_path / "nn").mkdir()
    for name in ("nn/linear.py", "setup.py", "notes.txt"):
        (tmp_path / name).write_text("")
    os.symlink(tmp_path / "setup.py", tmp_path / "link.py")
    (tmp_path / "dir.py").mkdir()
    assert verdicts.student_files(tmp_path) == {"nn/linear.py", "setup.py"}
