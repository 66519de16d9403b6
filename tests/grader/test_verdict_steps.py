# hw4p1: instructor-only
"""Which step of a program a reported failure names (``autograder.judging.scoring.verdicts``):
a call of a method only, never the last step for importing mytorch (-1), nothing past the steps;
a failure that names no step reads as importing mytorch in its kind, its words and its hint.

    .venv/bin/python -m pytest -q tests/grader/test_verdict_steps.py
"""
import numpy as np
import pytest

from autograder.judging.scoring import verdicts
from autograder.sandboxed import wire


def linear_program() -> tuple[list[dict], dict]:
    """(steps, input arrays): 0 new Linear, 1 forward(A (4, 3)), 2 backward(dLdZ (4, 5))."""
    program = wire.Program()
    layer = program.new("Linear", 3, 5)
    program.call(layer, "forward", np.zeros((4, 3)))
    program.call(layer, "backward", np.zeros((4, 5)))
    return program.steps, program.arrays


@pytest.mark.parametrize("index, call", [(-1, None), (0, None), (1, 1), (2, 2), (3, None)])
def test_only_a_call_among_the_steps_is_a_call_step(index, call):
    steps, _ = linear_program()
    assert verdicts.call_step(steps, index) is (None if call is None else steps[call])


def test_importing_mytorch_reads_no_step_s_inputs_even_when_the_last_is_a_call():
    steps, arrays = linear_program()
    for error in ({"kind": "raised", "type": "ValueError", "step": -1},
                  {"kind": "raised", "type": "ValueError"}):
        failure = verdicts.raised_failure(error, steps, "", arrays)
        assert failure.step == "importing mytorch" and failure.given == {}
        assert failure.operands == "" and failure.earlier == {}
        assert verdicts.describe_failure(error, steps, frozenset()) == (
            "mytorch does not import: ValueError")
    assert verdicts.step_operands(steps, -1, arrays) == ""
    assert verdicts.previous_call_inputs(steps, -1, arrays) == {}


def test_a_call_step_s_inputs_are_read():
    steps, arrays = linear_program()
    failure = verdicts.raised_failure({"kind": "raised", "type": "ValueError", "step": 2},
                                      steps, "", arrays)
    assert failure.step == "Linear.backward" and failure.given == {"dLdZ": (4, 5)}
    assert verdicts.step_operands(steps, 2, arrays) == (
        "Linear.backward was given dLdZ (4, 5) float64; dLdA must be shaped like A, (4, 3)")


def linear_calls(layers: int, calls: list[tuple[int, str, tuple[int, int]]]) -> wire.Program:
    """A program of ``layers`` new Linear(3, 5), then ``calls``: (layer, method, input shape)."""
    program = wire.Program()
    made = [program.new("Linear", 3, 5) for _ in range(layers)]
    for layer, method, shape in calls:
        program.call(made[layer], method, np.zeros(shape))
    return program


def test_the_last_earlier_call_and_forward_are_the_ones_read():
    program = linear_calls(1, [(0, "forward", (4, 3)), (0, "forward", (2, 3)),
                               (0, "forward", (6, 3)), (0, "backward", (6, 5))])
    assert verdicts.previous_call_inputs(program.steps, 3, program.arrays) == {"A": (2, 3)}
    assert verdicts.step_operands(program.steps, 4, program.arrays).endswith(
        "dLdA must be shaped like A, (6, 3)")


def test_only_the_same_method_of_the_same_object_is_an_earlier_call():
    program = linear_calls(2, [(0, "forward", (4, 3)), (0, "backward", (4, 5)),
                               (1, "forward", (2, 3)), (0, "forward", (6, 3))])
    assert verdicts.previous_call_inputs(program.steps, 5, program.arrays) == {"A": (4, 3)}


@pytest.mark.parametrize("kind", [0, 3, 4])  # absent, None, other: never a Python int's value
def test_only_a_python_int_scalar_carries_its_value(kind):
    held = verdicts.held_operands("f(x)", {"operands": [kind, 15, 0, 5, 1] + [0] * 6})["x"]
    assert held.value is None and held.kind == ("absent", "array", "scalar", "None", "other")[kind]
    scalar = verdicts.held_operands("f(x)", {"operands": [2, 15, 0, 5, 1] + [0] * 6})["x"]
    assert scalar.value == -5
