# hw4p1: instructor-only
"""Each hidden test's seconds come from the judge's clock: when its answer arrived on the result
pipe, less when the answer before it arrived (``judge.answer_seconds``).

    .venv/bin/python -m pytest -q tests/test_answer_seconds.py
"""
import shutil

from autograder import judge, processes, wire
from autograder.hidden_tests import mytorch_hidden
from tests.testing_framework import rubric, run_module
from tools import hint_report

RUBRIC = {"Seconds of each hidden test": 0}
SLEEP_S = 3.0
# Appended to mytorch/nn/__init__.py: the reference Linear, whose first forward call sleeps.
SLOW_FIRST_FORWARD_NN = f'''
import time as _time

from .linear import Linear as _Linear

_slept = []


class Linear(_Linear):
    def forward(self, A):
        if not _slept:
            _slept.append(_time.sleep({SLEEP_S}))
        return super().forward(A)
'''


def record(end: int) -> wire.Record:
    return wire.Record(None, {}, {}, end)


@rubric("Seconds of each hidden test")
def test_seconds_are_the_gaps_between_arrivals():
    run = processes.Run(0, 3.0, "", b"", result_arrivals=((100, 0.5), (250, 2.0), (400, 2.25)))
    records = {"c": record(400), "a": record(100), "b": record(250)}
    assert judge.answer_seconds(records, run, None) == {"a": 0.5, "b": 1.5, "c": 0.25}


@rubric("Seconds of each hidden test")
def test_answers_read_together_share_their_arrival():
    run = processes.Run(0, 3.0, "", b"", result_arrivals=((250, 2.0),))
    assert judge.answer_seconds({"a": record(100), "b": record(200)}, run, None) == {
        "a": 2.0, "b": 0.0}


@rubric("Seconds of each hidden test")
def test_the_running_test_at_the_limit_gets_the_rest_and_unknown_arrivals_are_left_out():
    run = processes.Run(None, 60.0, "", b"", result_arrivals=((100, 0.5),))
    records = {"a": record(100), "b": record(400)}  # b's bytes came after the arrivals noted
    assert judge.answer_seconds(records, run, "c") == {"a": 0.5, "c": 59.5}


@rubric("Seconds of each hidden test")
def test_a_slow_test_is_the_one_whose_seconds_show_it(tmp_path):
    tree = tmp_path / "mytorch"
    shutil.copytree(hint_report.REPO_ROOT / "mytorch", tree,
                    ignore=shutil.ignore_patterns("__pycache__"))
    init = tree / "nn" / "__init__.py"
    init.write_text(init.read_text() + SLOW_FIRST_FORWARD_NN)
    run = hint_report.judge_tree(tree, seed=3).runs["Linear"]
    seconds = {result.name: result.seconds for result in run.results}
    assert all(result.passed for result in run.results), [r.message for r in run.results]
    first = mytorch_hidden.tests_of("Linear")[0].name
    assert seconds[first] >= SLEEP_S, seconds
    assert all(value < SLEEP_S for name, value in seconds.items() if name != first), seconds
    assert sum(seconds.values()) <= run.seconds, (seconds, run.seconds)


if __name__ == "__main__":
    run_module(__name__)
