# hw4p1: instructor-only
"""The judge's worker sessions, fast (``autograder.judging.scoring.judge.grade_categories``,
``WorkerSession``, ``ChildConversation``): the hidden tests' real programs answered by the
worker's own replay code in this process, framed as the worker frames them, on a scripted clock;
each way a category's process or the worker can end, and what each gives in points, seconds,
notes and hints.

    .venv/bin/python -m pytest -q tests/grader/test_worker_session.py

``InProcessWorker`` stands for the sandboxed worker (``autograder.sandboxed.worker.serve``): a
test's name runs ``replay.run_test`` on the program the judge wrote and its record arrives
``seconds`` later; an empty line ends the category's process (status 0) unless it hangs; '!'
kills it (status -9, reported half a second later). Its stream and clock follow
``processes.Conversation``: a wait returns when the bytes arrived, or at the deadline with
nothing (at once when the worker has died). The end-to-end tests (tests/grader/
test_worker_categories.py) run the real worker in its sandbox. Truths: the reference mytorch
passes every test; the seconds are the script's; the programs are those of the seed given.
"""
import importlib
import types
from pathlib import Path

import numpy as np
import pytest

from autograder.judging.isolation.processes import Run
from autograder.judging.isolation.sandbox_modes import Layout
from autograder.judging.scoring import judge
from autograder.judging.scoring.hidden_tests import mytorch_hidden
from autograder.sandboxed import replay, wire

REFERENCE = importlib.import_module("mytorch.nn")
REPO_MYTORCH_PARENT = Path(REFERENCE.__file__).resolve().parents[2]
TIMEOUT = 10.0
ANSWER_S = 0.5   # a test's answer arrives this long after its request
KILLED_S = 0.5   # a killed process's end arrives this long after '!'


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def monotonic(self) -> float:
        return self.now


class InProcessWorker:
    """One worker run as the judge converses with it (``processes.Conversation``'s interface);
    ``script[test]``: "hang" (never answers), "crash" (its process exits 1 without answering),
    "die" (the worker itself dies: its stream ends), "other" (answers with another test's
    record, named another_test); any other test answers. ``left_behind``: each process's end says it left one."""

    def __init__(self, clock: Clock, input_dir: Path, nn, script: dict, wall_timeout: float,
                 left_behind: bool = False, printed: bytes = b"") -> None:
        self.clock, self.input_dir, self.nn, self.script = clock, input_dir, nn, script
        self.left_behind, self.printed = left_behind, printed
        self.start = clock.now
        self.deadline = self.start + wall_timeout
        self.chunks: list[tuple[float, bytes]] = []  # (when it arrives, bytes)
        self.requests: list[bytes] = []
        self.alive, self.running, self.hanging = True, False, False

    # the judge's side ----------------------------------------------------------------------
    def ask(self, request: bytes) -> float | None:
        if not self.alive:
            return None
        self.requests.append(request)  # sent at once: only answers take time
        line = request[:-1].decode()
        if line == "!":
            self.end(-9, KILLED_S)
        elif line == "":
            if not self.hanging:
                self.end(0, 0.0)
        else:
            self.running = True
            self.run(line, self.script.get(line, "answer"))
        return self.clock.now - self.start

    def wait_for(self, size: int) -> float | None:
        arrived, total = None, 0
        for at, data in self.chunks:
            total += len(data)
            if total >= size:
                arrived = at
                break
        if arrived is not None and arrived <= self.deadline:
            self.clock.now = max(self.clock.now, arrived)
            return self.clock.now - self.start
        if self.alive:  # nothing more by the deadline
            self.clock.now = max(self.clock.now, self.deadline)
        return None

    def received(self, start: int, end: int) -> bytes:
        return b"".join(data for _, data in self.chunks)[start:end]

    # the worker's side ---------------------------------------------------------------------
    def run(self, test: str, what: str) -> None:
        if what == "hang":
            self.hanging = True
        elif what == "crash":
            self.end(1, 0.0)
        elif what == "die":
            self.alive = False
        else:
            record = (wire.encode_record("another_test", None, {"v": np.zeros(2)})
                      if what == "other" else replay.run_test(self.nn, self.input_dir / test, test))
            self.chunks.append((self.clock.now + ANSWER_S, wire.frame(wire.RESULT, record)))

    def end(self, status: int, after: float) -> None:
        if not self.running:
            return
        self.running, self.hanging = False, False
        self.chunks.append((self.clock.now + after, wire.frame(wire.OUTPUT_HEAD, self.printed)
                            + wire.frame(wire.ENDED, wire.ENDED_PAYLOAD.pack(
                                status, 3 if self.printed else 0, self.left_behind))))


class InProcessSandbox:
    """A Sandbox whose every run is an InProcessWorker; records each run's wall limit and how
    long the judge gave the worker to report its end once the dialogue was over."""

    def __init__(self, folder: Path, clock: Clock, nn=REFERENCE, script: dict | None = None,
                 left_behind: bool = False, printed: bytes = b"",
                 short_seconds: float = 0.0) -> None:
        self.layout = Layout(runtime_dir=folder / "runtime", pylib_dir=folder / "pylib",
                             student_dir=REPO_MYTORCH_PARENT,
                             input_dir=folder / "not/yet/input", tmp_dir=folder / "tmp")
        self.clock, self.nn, self.script = clock, nn, script or {}
        self.left_behind, self.printed, self.short_seconds = left_behind, printed, short_seconds
        self.workers: list[InProcessWorker] = []
        self.wall_timeouts: list[float] = []
        self.grace: list[float] = []

    def run(self, argv: list[str], timeout: float, dialogue, wall_timeout: float) -> Run:
        self.wall_timeouts.append(wall_timeout)
        worker = InProcessWorker(self.clock, self.layout.input_dir, self.nn, self.script,
                                 wall_timeout, self.left_behind, self.printed)
        self.workers.append(worker)
        dialogue(worker)
        self.grace.append(round(worker.deadline - self.clock.now, 6))
        # the sandbox's own clock may read a little less than the dialogue's
        return Run(0 if worker.alive else -9, self.clock.now - worker.start - self.short_seconds,
                   "", b"")


@pytest.fixture
def clock(monkeypatch) -> Clock:
    """The judge's clock, scripted: only the worker's requests and answers move it."""
    clock = Clock()
    monkeypatch.setattr(judge, "time", types.SimpleNamespace(monotonic=clock.monotonic))
    return clock


def names(category: str) -> list[str]:
    return [test.name for test in mytorch_hidden.tests_of(category)]


def grade(sandbox: InProcessSandbox, categories: list[str], seed: int | None = 5) -> dict:
    graded = []
    runs = judge.grade_categories(categories, sandbox, TIMEOUT, seed,
                                  graded=lambda category, run: graded.append(category))
    assert graded == list(runs) == categories
    return runs


# ------------------------------------------------------------------------------------------------
# Every answer in time
# ------------------------------------------------------------------------------------------------

def test_one_worker_answers_every_category_in_order(tmp_path, clock):
    sandbox = InProcessSandbox(tmp_path, clock)
    runs = grade(sandbox, ["Linear", "Softmax"])
    for category, run in runs.items():
        assert [result.name for result in run.results] == names(category)
        assert all(result.passed for result in run.results), category
        assert [result.seconds for result in run.results] == [ANSWER_S] * len(run.results)
        assert run.note == "" and run.timed_out is False and run.failures == {}
        # each process: its tests asked one by one, its end as soon as its last answer came
        assert run.seconds == len(run.results) * ANSWER_S
    assert len(sandbox.workers) == 1 and sandbox.wall_timeouts == [2 * (TIMEOUT + 5.0)]
    assert sandbox.workers[0].requests == (
        [f"{name}\n".encode() for name in names("Linear")] + [b"\n"]
        + [f"{name}\n".encode() for name in names("Softmax")] + [b"\n"])
    # the input folder was made, then emptied for each category: the last one's programs only
    assert sorted(path.name for path in sandbox.layout.input_dir.iterdir()) == sorted(
        names("Softmax"))


def test_the_programs_are_drawn_from_the_seed_given_else_from_128_fresh_bits(tmp_path, clock,
                                                                              monkeypatch):
    def programs_run(seed: int | None) -> dict:
        sandbox = InProcessSandbox(tmp_path / str(seed), clock)
        grade(sandbox, ["Linear"], seed)
        return {name: wire.load_program(sandbox.layout.input_dir / name)[0]
                for name in names("Linear")}

    drawn = []
    monkeypatch.setattr(judge, "secrets", types.SimpleNamespace(
        randbits=lambda bits: drawn.append(bits) or 77))
    programs, _ = judge.build_programs(mytorch_hidden.tests_of("Linear"), 77)
    for run in (programs_run(77), programs_run(None)):
        for name, arrays in run.items():
            assert arrays.keys() == programs[name].arrays.keys()
            for key, value in arrays.items():
                np.testing.assert_array_equal(value, programs[name].arrays[key])
    assert drawn == [128]


# ------------------------------------------------------------------------------------------------
# A category's process that fails, hangs or leaves a process behind
# ------------------------------------------------------------------------------------------------

def test_a_process_that_exits_costs_its_category_the_tests_not_answered(tmp_path, clock):
    first, second, *rest = names("Linear")
    sandbox = InProcessSandbox(tmp_path, clock, script={second: "crash"})
    runs = grade(sandbox, ["Linear", "Softmax"])
    linear = runs["Linear"]
    assert [result.passed for result in linear.results] == [True] + [False] * (1 + len(rest))
    assert linear.note == "the test process ended with exit status 1"
    assert linear.timed_out is False and linear.seconds == ANSWER_S
    assert all(result.passed for result in runs["Softmax"].results)
    # its end came by itself: no empty line, no '!', and the same worker goes on
    assert sandbox.workers[0].requests[:3] == [f"{first}\n".encode(), f"{second}\n".encode(),
                                               f"{names('Softmax')[0]}\n".encode()]
    assert len(sandbox.workers) == 1


def test_a_test_past_the_time_limit_is_stopped_there_and_the_next_category_runs(tmp_path,
                                                                                clock):
    first, second, *_ = names("Linear")
    sandbox = InProcessSandbox(tmp_path, clock, script={second: "hang"}, printed=b"hi\n")
    runs = grade(sandbox, ["Linear", "Softmax"])
    linear = runs["Linear"]
    assert linear.timed_out is True and linear.seconds == TIMEOUT
    assert linear.note == f"the tests were stopped at the {TIMEOUT:.0f} s time limit"
    stopped = next(result for result in linear.results if result.name == second)
    assert "after 10 s" in stopped.message
    assert sum("after 10 s" in result.message for result in linear.results) == 1
    # from its request (once the first test's answer came) to the limit
    assert stopped.seconds == TIMEOUT - ANSWER_S
    assert linear.results[0].passed and linear.results[0].seconds == ANSWER_S
    assert "hi" in linear.output and "3 bytes of output omitted" in linear.output
    assert sandbox.workers[0].requests[2:4] == [b"\n", b"!\n"]
    softmax = runs["Softmax"]
    assert all(result.passed for result in softmax.results) and softmax.note == ""
    assert [result.seconds for result in softmax.results] == [ANSWER_S] * len(softmax.results)
    assert len(sandbox.workers) == 1


def test_a_process_left_behind_costs_a_fresh_worker_for_the_categories_after(tmp_path, clock):
    sandbox = InProcessSandbox(tmp_path, clock, left_behind=True)
    runs = grade(sandbox, ["Linear", "Softmax", "ScaledDotProductAttention"])
    assert all(result.passed for run in runs.values() for result in run.results)
    assert len(sandbox.workers) == 3
    assert sandbox.wall_timeouts == [n * (TIMEOUT + 5.0) for n in (3, 2, 1)]
    assert sandbox.grace == [5.0, 5.0, 5.0]  # each worker has 5 s to report its end


def test_an_answer_to_another_test_ends_the_category_with_a_note(tmp_path, clock):
    first, second, *_ = names("Linear")
    runs = grade(InProcessSandbox(tmp_path, clock, script={second: "other"}), ["Linear"])
    linear = runs["Linear"]
    assert linear.results[0].passed and not any(result.passed for result in linear.results[1:])
    assert linear.note.startswith(f"{wire.UNREADABLE} after 1 results")


# ------------------------------------------------------------------------------------------------
# A worker that dies
# ------------------------------------------------------------------------------------------------

def test_a_worker_that_dies_is_judged_from_what_came_and_started_again(tmp_path, clock):
    second = names("Softmax")[1]
    sandbox = InProcessSandbox(tmp_path, clock, script={second: "die"}, short_seconds=2.0)
    runs = grade(sandbox, ["Linear", "Softmax", "ScaledDotProductAttention"])
    assert all(result.passed for result in runs["Linear"].results)
    softmax = runs["Softmax"]
    assert [result.passed for result in softmax.results] == [True, False, False]
    assert softmax.note == "the test process ended with exit status -9"
    assert "omitted" not in softmax.output  # its end never came: nothing known to be omitted
    assert softmax.timed_out is False
    # the worker's run read 2 s short of the dialogue's clock, less than the category had run:
    # never a negative time
    assert softmax.seconds == 0.0
    assert all(result.passed for result in runs["ScaledDotProductAttention"].results)
    assert len(sandbox.workers) == 2 and sandbox.grace[0] == 5.0


def test_a_worker_that_dies_in_its_first_category_counts_from_its_start(tmp_path, clock):
    second = names("Linear")[1]
    sandbox = InProcessSandbox(tmp_path, clock, script={second: "die"})
    linear = grade(sandbox, ["Linear"])["Linear"]
    assert linear.seconds == ANSWER_S
    assert [result.passed for result in linear.results][:2] == [True, False]


# ------------------------------------------------------------------------------------------------
# Hints across categories
# ------------------------------------------------------------------------------------------------

class WrongSoftmax(REFERENCE.Softmax):
    def forward(self, x):
        return super().forward(x) * 1.5


class WrongAttention(REFERENCE.ScaledDotProductAttention):
    def forward(self, *args, **kwargs):
        return super().forward(*args, **kwargs) + 1.0


WRONG = types.SimpleNamespace(**{**vars(REFERENCE), "Softmax": WrongSoftmax,
                                 "ScaledDotProductAttention": WrongAttention})
USES_FAILING = "ScaledDotProductAttention calls your Softmax, which fails its own hidden tests"


@pytest.mark.parametrize("left_behind", [False, True])
def test_a_category_that_lost_points_is_named_in_the_hints_of_those_using_it(tmp_path, clock,
                                                                             left_behind):
    sandbox = InProcessSandbox(tmp_path, clock, nn=WRONG, left_behind=left_behind)
    runs = grade(sandbox, ["Linear", "Softmax", "ScaledDotProductAttention"])
    assert all(result.passed for result in runs["Linear"].results)
    assert not all(result.passed for result in runs["Softmax"].results)
    failing = [result for result in runs["ScaledDotProductAttention"].results if not result.passed]
    assert failing and all(result.hint.startswith(USES_FAILING) for result in failing)
    assert all(result.family == "uses-a-failing-class" for result in failing)
    assert len(sandbox.workers) == (3 if left_behind else 1)


def test_without_a_failing_class_the_category_s_own_hints_are_given(tmp_path, clock):
    only_attention = types.SimpleNamespace(**{**vars(REFERENCE),
                                              "ScaledDotProductAttention": WrongAttention})
    runs = grade(InProcessSandbox(tmp_path, clock, nn=only_attention),
                 ["Softmax", "ScaledDotProductAttention"])
    failing = [result for result in runs["ScaledDotProductAttention"].results if not result.passed]
    assert failing and not any(result.hint.startswith(USES_FAILING) for result in failing)
    assert set(runs["ScaledDotProductAttention"].failures) == {result.name for result in failing}
