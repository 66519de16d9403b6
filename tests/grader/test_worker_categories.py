# hw4p1: instructor-only
"""One worker start for every mytorch category, each category's failure its own.

The worker confines itself and imports numpy once, then forks a process per category
(``worker.serve``); the judge converses with each in lockstep and ends it
(``judge.grade_categories``). A Softmax that exits, crashes, exhausts its memory, prints
megabytes, hangs or kills the worker itself must cost Softmax only: Linear, SDPA and MHA score
what a worker of their own gives them (``judge.grade_category``, one worker per category, as the
grader did before), and Softmax what its own worker gives it. State one category leaves in mytorch
never reaches the next.

    .venv/bin/python -m pytest -q tests/grader/test_worker_categories.py
"""
import io
import os
import tempfile
import time
from contextlib import redirect_stdout
from pathlib import Path

import pytest

from autograder.sandboxed import wire
from autograder.judging.isolation import processes, sandbox, worker_folders
from autograder.judging.scoring import judge, mytorch_categories, rubric
from autograder.judging.scoring.report import GradingReport, Status
from tests.grader.autograder_helpers import copy_reference_mytorch
from tools import hint_report

MODE = hint_report.MODE
SEED = 5
TIMEOUT_S = 30.0
HANG_TIMEOUT_S = 15.0  # each category of the reference takes well under it, even on loaded cores
# Appended to mytorch/nn/__init__.py: the reference Softmax, whose forward first does {action}.
# Only the Softmax category's programs build nn.Softmax (SDPA and MHA use the reference's own).
SOFTMAX_DOES = '''
import ctypes as _ctypes, os as _os, signal as _signal, sys as _sys, time as _time
import numpy as _np
from .activation import Softmax as _Softmax

_held = []


class Softmax(_Softmax):
    def forward(self, Z):
        {action}
        return super().forward(Z)
'''
ACTIONS = {
    "exits": "_os._exit(3)",
    "crashes the interpreter (SIGSEGV)": "_ctypes.string_at(0)",
    # Address space taken until RLIMIT_AS refuses more, and kept: every later Softmax test fails.
    "exhausts its memory": "while True: _held.append(_np.empty(2**27))",
    "prints 3 MB": "print('x' * 3_000_000, file=_sys.stderr)",
}
HANG = "while True: pass"
# Once, a process that outlives the category's (holding its pipes): the category still ends.
LEAVES_A_PROCESS = ("if not _held and not _os.fork(): _os.setsid(); _time.sleep(600); "
                    "_os._exit(0)\n        _held.append(1)")
KILLS_THE_WORKER = "_os.kill(_os.getppid(), _signal.SIGKILL); _time.sleep(60)"
# Linear leaves a mark in mytorch's module state; an SDPA that sees it answers zeros. A category
# run in a process that Linear ran in would lose SDPA's points.
LEFT_STATE = '''
import numpy as _np
from .linear import Linear as _Linear
from .scaled_dot_product_attention import ScaledDotProductAttention as _Attention

_marks = []


class Linear(_Linear):
    def forward(self, A):
        _marks.append(1)
        return super().forward(A)


class ScaledDotProductAttention(_Attention):
    def forward(self, Q, K, V, mask=None):
        out = super().forward(Q, K, V, mask)
        return _np.zeros_like(out) if _marks else out
'''


def mytorch_with(root: Path, appended: str) -> Path:
    tree = copy_reference_mytorch(root)
    init = tree / "nn" / "__init__.py"
    init.write_text(init.read_text() + appended)
    return tree


def grade_in_one_worker(tree: Path, timeout: float) -> tuple[dict, dict, dict, str]:
    """(scores, report, {category: run}, printed feedback) of ``tree`` through the grader's
    mytorch phase (``mytorch_categories.grade_mytorch``), inputs from SEED."""
    scores, report = {}, GradingReport()
    runs = {}
    with tempfile.TemporaryDirectory(prefix="hw4p1-oneworker-") as scratch:
        layout = worker_folders.worker_layout(Path(scratch), tree)
        graded = judge.grade_categories

        def recorded(*args, **kwargs):
            kwargs["seed"] = SEED
            runs.update(graded(*args, **kwargs))
            return runs

        judge.grade_categories = recorded
        printed = io.StringIO()
        try:
            with redirect_stdout(printed):
                mytorch_categories.grade_mytorch(sandbox.Sandbox.of(MODE, layout), timeout, scores,
                                                 report)
        finally:
            judge.grade_categories = graded
    return scores, report, runs, printed.getvalue()


def grade_alone(tree: Path, category: str, timeout: float) -> judge.CategoryRun:
    """``category`` graded by a worker of its own, inputs from SEED (the grader's way before)."""
    with tempfile.TemporaryDirectory(prefix="hw4p1-alone-") as scratch:
        layout = worker_folders.worker_layout(Path(scratch), tree)
        return judge.grade_category(category, sandbox.Sandbox.of(MODE, layout), timeout, seed=SEED)


def outcome(run: judge.CategoryRun) -> list[tuple]:
    """What a category's feedback and scores are made of (its seconds aside)."""
    return [(r.name, r.points, r.message, r.hint, r.family) for r in run.results] + [
        (run.note, run.timed_out, len(run.output))]


def assert_only_softmax_pays(tree: Path, timeout: float, softmax_alone: judge.CategoryRun | None):
    scores, report, runs, printed = grade_in_one_worker(tree, timeout)
    for category, points in rubric.MYTORCH_RUBRIC.items():
        if category != "Softmax":
            assert scores[category] == points, (category, outcome(runs[category]))
            assert runs[category].note == "" and not runs[category].output, category
    assert printed.count("== ") == len(rubric.MYTORCH_RUBRIC), printed
    if softmax_alone is not None:
        assert outcome(runs["Softmax"]) == outcome(softmax_alone)
    return runs["Softmax"], report


@pytest.mark.slow
@pytest.mark.long
def test_a_softmax_that_exits_crashes_exhausts_memory_or_prints_costs_softmax_only(tmp_path,
                                                                                   monkeypatch):
    """Each in both tree caps: a cgroup (the category's process may fork) and none (seccomp
    forbids it any new task)."""
    for cgroup in (True, False):
        if not cgroup:
            monkeypatch.setattr(sandbox.WorkerCgroup, "create", lambda *args: None)
        for name, action in ACTIONS.items():
            tree = mytorch_with(tmp_path / f"{name}-{cgroup}", SOFTMAX_DOES.format(action=action))
            alone = grade_alone(tree, "Softmax", TIMEOUT_S)
            softmax, _ = assert_only_softmax_pays(tree, TIMEOUT_S, alone)
            if name == "prints 3 MB":  # no point lost, and the other categories printed nothing
                assert "bytes of output omitted" in softmax.output, (cgroup, softmax.output[:80])
                continue
            assert not any(r.points for r in softmax.results), (name, outcome(softmax))
            if name == "exhausts its memory":
                assert all("MemoryError" in r.message for r in softmax.results), outcome(softmax)
            else:
                assert "exit status" in softmax.note, (name, cgroup, softmax.note)


@pytest.mark.slow
def test_a_softmax_that_hangs_times_out_alone(tmp_path):
    tree = mytorch_with(tmp_path, SOFTMAX_DOES.format(action=HANG))
    softmax, report = assert_only_softmax_pays(tree, HANG_TIMEOUT_S, None)
    assert not any(r.points for r in softmax.results), outcome(softmax)
    assert softmax.timed_out and report.status == Status.TIMEOUT
    assert softmax.results[0].message.startswith("timed out"), softmax.results[0].message
    assert HANG_TIMEOUT_S - 1 <= softmax.seconds <= HANG_TIMEOUT_S + judge.KILL_GRACE_S + 1


@pytest.mark.slow
def test_a_category_that_kills_the_worker_costs_only_itself(tmp_path):
    """The worker itself killed from Softmax's process: a fresh worker grades SDPA and MHA."""
    tree = mytorch_with(tmp_path, SOFTMAX_DOES.format(action=KILLS_THE_WORKER))
    softmax, _ = assert_only_softmax_pays(tree, TIMEOUT_S, None)
    assert not any(r.points for r in softmax.results) and not softmax.timed_out
    assert "exit status" in softmax.note, softmax.note


@pytest.mark.slow
def test_a_process_left_behind_neither_holds_its_category_nor_reaches_the_next(tmp_path):
    """Its category ends when its own process does (not at the time limit), and the categories
    after it run in a fresh worker, as they ran in fresh workers before."""
    tree = mytorch_with(tmp_path, SOFTMAX_DOES.format(action=LEAVES_A_PROCESS))
    started = time.monotonic()
    softmax, _ = assert_only_softmax_pays(tree, TIMEOUT_S, grade_alone(tree, "Softmax",
                                                                        TIMEOUT_S))
    assert time.monotonic() - started < TIMEOUT_S and not softmax.timed_out
    assert not processes.descendants(os.getpid())


@pytest.mark.slow
def test_no_category_runs_where_another_left_its_state(tmp_path):
    tree = mytorch_with(tmp_path, LEFT_STATE)
    scores, _, runs, _ = grade_in_one_worker(tree, TIMEOUT_S)
    assert scores == rubric.MYTORCH_RUBRIC, {c: outcome(run) for c, run in runs.items()}


class Stream:
    """A ``processes.Conversation`` stand-in over a fixed stream of the worker's frames."""

    def __init__(self, data: bytes) -> None:
        self.data, self.start, self.asked = data, 0.0, []

    def ask(self, request: bytes) -> float:
        self.asked.append(request)
        return 0.0

    def wait_for(self, size: int) -> float | None:
        return 1.0 if size <= len(self.data) else None

    def received(self, start: int, end: int) -> bytes:
        return self.data[start:end]


def test_a_category_s_frames_give_its_records_its_output_and_its_end():
    first, second = wire.encode_record("a", None, {}), wire.encode_record("b", None, {})
    ended = wire.frame(wire.OUTPUT_HEAD, b"hi") + wire.frame(wire.OUTPUT_TAIL, b"there") + \
        wire.frame(wire.ENDED, wire.ENDED_PAYLOAD.pack(-11, 7, False))
    # The first category's process died half-way through its second record; the next follows.
    stream = Stream(wire.frame(wire.RESULT, first + second[:5]) + wire.frame(wire.RESULT, b"")
                    + ended + wire.frame(wire.RESULT, second) + ended)
    child = judge.ChildConversation(stream, 0)
    lockstep = judge.Lockstep(["a", "b"], lambda test: None)
    lockstep.converse(child)
    assert list(lockstep.answered) == ["a"] and lockstep.end == len(first)
    assert child.ended and child.status == -11 and child.received(0, len(first)) == first
    assert child.output() == "hi\n[... 7 bytes of output omitted ...]\nthere"
    after = judge.ChildConversation(stream, child.position)
    assert after.wait_for(len(second)) == 1.0 and after.received(0, len(second)) == second
    assert not after.ended and after.ask(b"b\n") == 0.0
    after.wait_end()
    assert after.ended and after.position == len(stream.data) and after.ask(b"c\n") is None
    # A frame of a kind the worker never sends ends the category, unanswered.
    garbled = judge.ChildConversation(Stream(b"Z" + bytes(wire.FRAME_BYTES)), 0)
    assert garbled.wait_for(1) is None and not garbled.ended


def test_the_worker_frames_what_its_category_process_printed_as_the_judge_keeps_it():
    """The worker's head and tail of a process's output match processes.BoundedCapture's."""
    from autograder.sandboxed import worker

    data = bytes(range(256)) * 100
    child = worker.Category(0, None, None, None)
    for start in range(0, len(data), 999):
        worker.keep_output(child, data[start:start + 999], processes.OUTPUT_HEAD_BYTES,
                           processes.OUTPUT_TAIL_BYTES)
    capture = processes.BoundedCapture(io.BufferedReader(io.BytesIO(data)),
                                       processes.OUTPUT_HEAD_BYTES, processes.OUTPUT_TAIL_BYTES)
    capture.read_all()
    assert (bytes(child.head), bytes(child.tail), child.omitted) == (
        bytes(capture.head), bytes(capture.tail), capture.omitted)
