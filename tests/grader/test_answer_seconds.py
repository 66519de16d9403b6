# hw4p1: instructor-only
"""Each hidden test's seconds come from the judge's clock, in lockstep (``judge.Lockstep``): the
judge writes a test's program and asks for it only once the answer to the test before it has
come, and times the test from its request to its answer, so a worker can neither start a test
early nor hold answers back to move its time onto other tests.

    .venv/bin/python -m pytest -q tests/grader/test_answer_seconds.py
"""
import os
import shutil
import sys
import time

import pytest

from autograder.sandboxed import wire
from autograder.judging.isolation import processes
from autograder.judging.scoring import judge
from autograder.judging.scoring.hidden_tests import mytorch_hidden
from tools import hint_report
from tests.grader.attack_handins import SLEEP_S, SLOW_FIRST_FORWARD_NN

HOLD_TIMEOUT_S = 8.0
# Prepended to mytorch/__init__.py: the worker's send replaced by one that holds every answer and
# sends them all together once it holds as many as Linear has tests (told here, as a student
# could count them in the handout's feedback). Sent together, each answer but the first would
# show 0 s; in lockstep the first is never followed by a second request.
HOLD_ANSWERS_INIT = f'''
import os as _os, sys as _sys

_worker = _sys.modules["autograder.sandboxed.worker"]
_held = []


def _hold(fd, data):
    _held.append(data)
    if len(_held) == {len(mytorch_hidden.tests_of("Linear"))}:
        _os.write(fd, b"".join(_held))


_worker.send = _hold
'''


def record(test: str) -> bytes:
    return wire.encode_record(test, None, {})


class ScriptedWorker:
    """A ``processes.Conversation`` stand-in: the answer to each test comes ``delay`` seconds
    after its request, as scheduled in ``answers`` ({test: (delay, record bytes)}); a test without
    one is never answered. ``events`` lists the judge's writes and requests and the answers, in
    order."""

    def __init__(self, answers: dict[str, tuple[float, bytes]]) -> None:
        self.answers, self.stream, self.clock, self.ready_at = answers, b"", 0.0, 0.0
        self.events: list[tuple[str, str]] = []

    def ask(self, request: bytes) -> float:
        test = request.decode().strip()
        self.events.append(("ask", test))
        if test in self.answers:
            delay, data = self.answers[test]
            self.stream += data
            self.ready_at = self.clock + delay
        return self.clock

    def wait_for(self, size: int) -> float | None:
        if size > len(self.stream):
            return None
        self.clock = max(self.clock, self.ready_at)
        return self.clock

    def received(self, start: int, end: int) -> bytes:
        return self.stream[start:end]


def lockstep_of(worker: ScriptedWorker, tests: list[str]) -> judge.Lockstep:
    lockstep = judge.Lockstep(tests, lambda test: worker.events.append(("write", test)))
    lockstep.converse(worker)
    return lockstep


def test_each_test_is_timed_from_its_request_to_its_answer():
    worker = ScriptedWorker({"a": (0.5, record("a")), "b": (1.5, record("b")),
                             "c": (0.25, record("c"))})
    lockstep = lockstep_of(worker, ["a", "b", "c"])
    assert lockstep.seconds() == {"a": 0.5, "b": 1.5, "c": 0.25}
    assert lockstep.end == len(worker.stream) and lockstep.note == ""
    # The first program is written before the worker starts; each next one after the answer.
    assert worker.events == [("ask", "a"), ("write", "b"), ("ask", "b"), ("write", "c"),
                             ("ask", "c")]


def test_an_answer_to_another_test_or_a_malformed_one_ends_the_dialogue():
    for answer in (record("b"), b"\xff" * 64):
        worker = ScriptedWorker({"a": (0.5, answer), "b": (0.5, record("b"))})
        lockstep = lockstep_of(worker, ["a", "b"])
        assert lockstep.note.startswith(f"{wire.UNREADABLE} after 0 results"), lockstep.note
        assert lockstep.end == 0 and lockstep.seconds() == {}
        assert ("ask", "b") not in worker.events, worker.events


def test_the_test_unanswered_at_the_limit_is_the_running_one():
    worker = ScriptedWorker({"a": (0.5, record("a"))})
    lockstep = lockstep_of(worker, ["a", "b", "c"])
    assert lockstep.running() == "b" and ("write", "c") not in worker.events
    assert lockstep.seconds(stopped_at=60.0) == {"a": 0.5, "b": 59.5}


def test_a_dialogue_that_fails_still_ends_the_child(tmp_path):
    """The judge's side of the dialogue raising (its disk full, say) never leaves the worker
    running: run_process kills the child and all it started before the error goes up."""
    def dialogue(conversation):
        raise OSError("no space left to write the next program")

    started = time.monotonic()
    with pytest.raises(OSError, match="no space left"):
        processes.run_process([sys.executable, "-c", "import time; time.sleep(60)"], cwd=tmp_path,
                              env={}, timeout=60, limits={}, result_pipe=os.pipe(),
                              request_pipe=os.pipe(), dialogue=dialogue)
    assert time.monotonic() - started < 30 and not processes.descendants(os.getpid())


def reference_tree(tmp_path):
    tree = tmp_path / "mytorch"
    shutil.copytree(hint_report.REPO_ROOT / "mytorch", tree,
                    ignore=shutil.ignore_patterns("__pycache__"))
    return tree


def test_a_slow_test_is_the_one_whose_seconds_show_it(tmp_path):
    tree = reference_tree(tmp_path)
    init = tree / "nn" / "__init__.py"
    init.write_text(init.read_text() + SLOW_FIRST_FORWARD_NN)
    run = hint_report.judge_tree(tree, seed=3).runs["Linear"]
    seconds = {result.name: result.seconds for result in run.results}
    assert all(result.passed for result in run.results), [r.message for r in run.results]
    first = mytorch_hidden.tests_of("Linear")[0].name
    assert seconds[first] >= SLEEP_S, seconds
    assert all(value < SLEEP_S for name, value in seconds.items() if name != first), seconds
    assert sum(seconds.values()) <= run.seconds, (seconds, run.seconds)


def test_answers_held_back_keep_their_time_on_the_held_test(tmp_path):
    """A worker that holds its answers to send them together: its first answer never lets the
    judge ask for a second test, so the time it held stays on that test (timed out, up to the
    limit) and no other test shows seconds it did not take."""
    tree = reference_tree(tmp_path)
    init = tree / "__init__.py"
    init.write_text(HOLD_ANSWERS_INIT + init.read_text())
    run = hint_report.judge_tree(tree, 3, ("Linear",), HOLD_TIMEOUT_S).runs["Linear"]
    seconds = {result.name: result.seconds for result in run.results if result.seconds is not None}
    first = mytorch_hidden.tests_of("Linear")[0].name
    assert list(seconds) == [first] and seconds[first] >= HOLD_TIMEOUT_S - 1, seconds
    assert run.timed_out and not any(result.points for result in run.results)
    assert run.results[0].message.startswith("timed out"), run.results[0].message
