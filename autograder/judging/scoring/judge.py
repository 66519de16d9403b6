"""The judge of the mytorch categories: builds each hidden test's program, has the sandboxed
worker run it, and decides each test's points from the values that come back (the verdict on one
test and its feedback: ``verdicts.py``).

Runs in the grader's own process (torch, numpy); it never imports the student's code. One worker
start for every category: the worker confines itself and imports numpy once, then runs each
category in a process of its own forked from it (fresh mytorch state, its own time limit, memory
and output), so a crash, a hang, a limit or an import error costs only that category; a worker
broken from inside (killed, its stream over the limit) is started again for the categories after
(:func:`grade_categories`). Inside a category, each hidden test passes or fails on its own and
earns its share of the points.

Every grading draws the tests' inputs from a fresh random seed (``secrets``, never shown), so what a
worker sent back in one grading cannot be replayed in another. The feedback is worded from the
judge's own knowledge (the test, the step, shapes, sizes of errors); nothing the worker prints or
returns is quoted, and a failure reported by the worker is reduced to typed fields checked against
what the judge knows (the exception class against Python's own, the file against the handin's
mytorch files).
"""
from __future__ import annotations

import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from autograder.sandboxed import wire
from autograder.judging.isolation import file_trees, processes, sandbox_modes
from autograder.judging.isolation.sandbox import Sandbox, make_readable
from autograder.judging.scoring.hidden_tests import diagnosis
from autograder.judging.scoring.hidden_tests.diagnosis import Failure
from autograder.judging.scoring.hidden_tests.checks import HiddenTest
from autograder.judging.scoring.hidden_tests.mytorch_hidden import tests_of
from autograder.judging.scoring.report import TestResult
from autograder.judging.scoring.verdicts import judge_test, student_files, worker_note

SEED_BITS = 128


@dataclass
class CategoryRun:
    """A category's test results and what the worker printed."""

    results: list[TestResult]
    output: str
    seconds: float
    note: str  # why the worker stopped early (time limit, exit status), or ''
    timed_out: bool = False
    failures: dict[str, Failure] = field(default_factory=dict)  # test -> what its failure showed


def grade_category(category: str, sandbox: Sandbox, timeout: float, seed: int | None = None,
                   failed: frozenset[str] = frozenset()) -> CategoryRun:
    """Run every hidden test of ``category`` against the student's mytorch in ``sandbox``, with
    inputs drawn from ``seed`` (default: a fresh random one, which is what grading uses);
    ``failed``: the categories that lost points already (the hints point to those this one
    uses)."""
    return grade_categories([category], sandbox, timeout, seed, failed)[category]


def grade_categories(categories: list[str], sandbox: Sandbox, timeout: float,
                     seed: int | None = None,
                     failed: frozenset[str] = frozenset(),
                     graded: Callable[[str, CategoryRun], None] | None = None
                     ) -> dict[str, CategoryRun]:
    """Grade ``categories`` in turn (as :func:`grade_category`, each with ``timeout`` seconds and
    its own inputs: from ``seed`` when given, else fresh) with one worker start: the worker forks
    a process per category (``worker.serve``), so a category's exit, crash, hang, memory or output
    costs that category only. A worker that breaks (its own process killed or stopped, its stream
    over the limit), or whose category left a process running, is started again for the
    categories after that one. A category that lost points joins ``failed`` for the hints of
    those after it; ``graded(category, run)`` is called as each one is judged. Returns
    {category: its run}, in order."""
    runs: dict[str, CategoryRun] = {}

    def judged(category: str, run: CategoryRun) -> None:
        runs[category] = run
        if graded is not None:
            graded(category, run)

    while len(runs) < len(categories):
        session = WorkerSession(categories[len(runs):], sandbox.layout, timeout, seed,
                                failed | {name for name, run in runs.items()
                                          if not all(result.passed for result in run.results)},
                                judged)
        session.prepare(session.categories[0])
        run = sandbox.run(["--input", "{input}", "--output-bytes",
                           str(processes.OUTPUT_HEAD_BYTES), str(processes.OUTPUT_TAIL_BYTES)],
                          timeout, dialogue=session.converse,
                          wall_timeout=len(session.categories) * (timeout + KILL_GRACE_S))
        session.finish_broken(run)
    return runs


KILL_GRACE_S = 5.0  # for a category's process killed at its time limit to be reported dead


@dataclass
class Prepared:
    """A category's tests, their programs and checks, as the judge built them."""

    tests: list[HiddenTest]
    programs: dict[str, wire.Program]
    checks: dict


@dataclass
class WorkerSession:
    """The judge's side of one worker run over ``categories``: for each, the programs built, the
    lockstep dialogue with the category's process (``ChildConversation``), then its end asked for
    (its requests closed; killed at the time limit) and the category judged. ``broken``: the
    category the worker broke in, judged once its run is over (:meth:`finish_broken`)."""

    categories: list[str]
    layout: sandbox_modes.Layout
    timeout: float
    seed: int | None
    failed: frozenset[str]
    judged: Callable[[str, CategoryRun], None]
    prepared: Prepared | None = None
    broken: tuple | None = None

    def prepare(self, category: str) -> None:
        """Build ``category``'s programs and put the first on disk, in an empty input folder."""
        tests = tests_of(category)
        programs, checks = build_programs(tests, secrets.randbits(SEED_BITS)
                                          if self.seed is None else self.seed)
        self.prepared = Prepared(tests, programs, checks)
        if self.layout.input_dir.exists():  # emptied, never replaced: the worker's view holds it
            for entry in list(self.layout.input_dir.iterdir()):
                file_trees.remove_tree(entry)
        else:
            self.layout.input_dir.mkdir(parents=True)
        self.write(tests[0].name)

    def write(self, test: str) -> None:
        self.prepared.programs[test].save(self.layout.input_dir / test)
        make_readable(self.layout.input_dir)

    def converse(self, conversation: processes.Conversation) -> None:
        overall, position = conversation.deadline, 0
        started = 0.0  # the first category's clock starts with the worker
        for index, category in enumerate(self.categories):
            if index:
                self.prepare(category)
                started = time.monotonic() - conversation.start
            stopped_at = started + self.timeout
            conversation.deadline = min(conversation.start + stopped_at, overall)
            child = ChildConversation(conversation, position)
            lockstep = Lockstep([test.name for test in self.prepared.tests], self.write)
            lockstep.converse(child)
            if not child.ended and conversation.ask(b"\n") is not None:
                child.wait_end()
            timed_out = not child.ended and time.monotonic() >= conversation.deadline
            if timed_out:  # killed; a worker that cannot report it in time is broken
                conversation.deadline = min(time.monotonic() + KILL_GRACE_S, overall)
                if conversation.ask(b"!\n") is not None:
                    child.wait_end()
            if not child.ended:
                # the run ends: its status when it is ending (its stream ended), else killed
                conversation.deadline = min(time.monotonic() + KILL_GRACE_S, overall)
                self.broken = (category, child, lockstep, started, stopped_at, timed_out)
                return
            position = child.position
            run = processes.Run(None if timed_out else child.status,
                                (stopped_at if timed_out else child.ended_at) - started,
                                child.output(), bytes(child.result))
            self.finish(category, run, lockstep, stopped_at)
            if child.left_behind:  # killed with this worker; a fresh one for the rest
                conversation.deadline = min(time.monotonic() + KILL_GRACE_S, overall)
                return

    def finish(self, category: str, run: processes.Run, lockstep: Lockstep,
               stopped_at: float) -> None:
        """Judge ``category`` from its process's ``run`` (``stopped_at``: when its time limit
        came, by the worker's clock)."""
        prepared = self.prepared
        records, stream_note = wire.decode_records(
            run.result[:lockstep.end],
            {name: program.returned for name, program in prepared.programs.items()})
        note = worker_note(run, self.timeout, lockstep.note or stream_note)
        files = student_files(self.layout.student_dir / "mytorch")
        running = lockstep.running() if run.timed_out else None
        seconds = lockstep.seconds(stopped_at if run.timed_out else None)
        judged = [judge_test(test, records.get(test.name), prepared.checks[test.name], note,
                             prepared.programs[test.name].steps, files,
                             timed_out=f"after {self.timeout:.0f} s" if test.name == running else "",
                             package=self.layout.student_dir / "mytorch",
                             arrays=prepared.programs[test.name].arrays)
                  for test in prepared.tests]
        results = [result for result, _ in judged]
        for result in results:
            result.seconds = seconds.get(result.name)
        hints = diagnosis.hints(category, {result.name: failure for result, failure in judged},
                                self.failed)
        for result in results:
            if result.name in hints:
                result.hint, result.family = hints[result.name].text, hints[result.name].family
        if not all(result.passed for result in results):
            self.failed = self.failed | {category}
        self.judged(category, CategoryRun(results, run.output, run.seconds, note, run.timed_out,
                                          {result.name: failure for result, failure in judged
                                           if failure}))

    def finish_broken(self, worker: processes.Run) -> None:
        """Judge the category the worker broke in, from what came before it broke: timed out,
        or ended as the worker's own run did."""
        if self.broken is None:
            return
        category, child, lockstep, started, stopped_at, timed_out = self.broken
        ended = stopped_at if timed_out else worker.seconds
        run = processes.Run(None if timed_out else worker.returncode,  # None at its own limit too
                            max(ended - started, 0.0), child.output(), bytes(child.result),
                            worker.result_overflow)
        self.finish(category, run, lockstep, min(ended, stopped_at))


class ChildConversation:
    """One category's process as :class:`Lockstep` converses with it (``ask``, ``wait_for``,
    ``received``): the worker's frames (``wire.frame``) read from its stream as they come, the
    category's records gathered in ``result``, its printed head and tail, and its end (exit
    status, when it came). Nothing waits past the conversation's deadline."""

    def __init__(self, conversation: processes.Conversation, position: int) -> None:
        self.conversation = conversation
        self.position = position  # where this category's frames start in the worker's stream
        self.result = bytearray()
        self.head, self.tail, self.omitted = b"", b"", 0
        self.left_behind = False  # pragma: no mutate (equivalent: read only once the process's end, which sets it, came)
        self.status: int | None = None
        self.ended = False
        self.ended_at: float | None = None

    def ask(self, request: bytes) -> float | None:
        return None if self.ended else self.conversation.ask(request)

    def received(self, start: int, end: int) -> bytes:
        return bytes(self.result[start:end])

    def wait_for(self, size: int) -> float | None:
        """When this category's records reached ``size`` bytes; None when its process ended
        short of it, or the worker's stream did, or the deadline came."""
        arrived = None
        while len(self.result) < size:
            arrived = self.next_frame()
            if arrived is None:
                return None
        return arrived if arrived is not None else time.monotonic() - self.conversation.start

    def wait_end(self) -> None:
        """Read frames until this category's process ended (or the stream or deadline did)."""
        while not self.ended and self.next_frame() is not None:
            pass

    def next_frame(self) -> float | None:
        """Read the next frame; when it came, or None (ended, a malformed frame, or nothing
        more by the deadline)."""
        if self.ended:
            return None
        start = self.position
        if self.conversation.wait_for(start + wire.FRAME_BYTES) is None:
            return None
        try:  # the worker's own frames: garbled only if its process was broken into
            kind, length = wire.frame_header(self.conversation.received(
                start, start + wire.FRAME_BYTES))
        except ValueError:
            return None
        end = start + wire.FRAME_BYTES + length
        arrived = self.conversation.wait_for(end)
        if arrived is None:
            return None
        payload = self.conversation.received(start + wire.FRAME_BYTES, end)
        self.position = end
        if kind == wire.RESULT:
            self.result += payload
        elif kind == wire.OUTPUT_HEAD:
            self.head = payload
        elif kind == wire.OUTPUT_TAIL:
            self.tail = payload
        else:
            self.status, self.omitted, self.left_behind = wire.ENDED_PAYLOAD.unpack(payload)
            self.ended, self.ended_at = True, arrived
        return arrived

    def output(self) -> str:
        """What the process printed, as ``processes.BoundedCapture.text`` gives it."""
        capture = processes.BoundedCapture(None, 0, 0)  # pragma: no mutate (equivalent: text() reads no limit)
        capture.head, capture.tail, capture.omitted = (bytearray(self.head),
                                                       bytearray(self.tail), self.omitted)
        return capture.text()


@dataclass
class Lockstep:
    """The judge's side of its dialogue with the worker: each test's program is written, then
    asked for by name, only once the whole answer to the test before it has come (the first is
    written before the worker starts), so the worker can neither start a test early nor hold an
    answer back to move its time onto another test. A test's seconds run from its request to
    the arrival of its answer's last byte, by the judge's clock (the first request goes out as
    the worker starts, or as the category's process is forked, so it holds the start-up and
    mytorch's import).

    ``write(test)`` puts a test's program on disk; after :meth:`converse`, ``end`` is where the
    answers taken end in the result stream and ``note`` says why the dialogue stopped early ('':
    it did not, or the worker ended or ran out of time: ``worker_note`` says which)."""

    tests: list[str]
    write: Callable[[str], None]
    asked: dict[str, float] = field(default_factory=dict)
    answered: dict[str, float] = field(default_factory=dict)
    end: int = 0
    note: str = ""

    def converse(self, conversation: processes.Conversation) -> None:
        for index, test in enumerate(self.tests):
            if index:
                self.write(test)
            sent = conversation.ask(f"{test}\n".encode())
            if sent is None:
                return
            self.asked[test] = sent
            try:
                answer = self.await_answer(conversation, test)
            except Exception as error:  # noqa: BLE001 - any surprise in hostile bytes
                self.note = wire.unreadable(len(self.answered), error)
                return
            if answer is None:
                return
            self.answered[test], self.end = answer

    def await_answer(self, conversation: processes.Conversation,
                     test: str) -> tuple[float, int] | None:
        """(when it came, where it ends) of the record answering ``test``; None when it did not
        come whole before the worker stopped or the time limit. A record of another test, or a
        malformed one, raises (the dialogue ends there)."""
        start = self.end
        if conversation.wait_for(start + wire.LENGTH_BYTES) is None:
            return None
        framing = wire.framing_size(conversation.received(start, start + wire.LENGTH_BYTES))
        if conversation.wait_for(start + framing) is None:
            return None
        named, size = wire.record_extent(conversation.received(start, start + framing))
        if named != test:
            raise ValueError("an answer to another test than the one asked")
        arrived = conversation.wait_for(start + size)
        return None if arrived is None else (arrived, start + size)

    def running(self) -> str | None:
        """The test asked for whose answer never came (the one running at the time limit)."""
        return next((test for test in self.asked if test not in self.answered), None)

    def seconds(self, stopped_at: float | None = None) -> dict[str, float]:
        """{test: seconds} of the tests answered; with ``stopped_at`` (the seconds at which the
        worker was stopped), the running test's too, up to then."""
        seconds = {test: round(self.answered[test] - self.asked[test], 3)
                   for test in self.answered}
        running = self.running()
        if stopped_at is not None and running is not None:
            seconds[running] = round(max(stopped_at - self.asked[running], 0.0), 3)
        return seconds


def build_programs(tests: list[HiddenTest], seed: int) -> tuple[dict[str, wire.Program], dict]:
    """Each test's program (the worker's calls, with the inputs drawn from ``seed``) and check."""
    generators = [np.random.default_rng(child)
                  for child in np.random.SeedSequence(seed).spawn(len(tests))]
    programs, checks = {}, {}
    for test, rng in zip(tests, generators):
        programs[test.name] = wire.Program()
        checks[test.name] = test.build(programs[test.name], rng)
    return programs, checks


def refuse_foreign_encodings(files: dict[str, Path], notes: list[str]) -> None:
    """Drop from ``files`` ({handin path: extracted file}) every mytorch source that declares an
    encoding Python does not read natively as UTF-8 (``wire.is_native_utf8``), with a note naming
    it: such a file reads as something else to every tool (and person) that reads it as UTF-8, or
    is decoded by whatever codec the student's code registered, so what runs could hide from any
    reading. The worker's audit hook refuses to compile such a file all the same."""
    for name in sorted(files):
        if not name.endswith(".py"):
            continue
        encoding = wire.declared_encoding(files[name].read_bytes())
        if encoding is not None and not wire.is_native_utf8(encoding):
            del files[name]
            notes.append(f"{name}: declares the source encoding {encoding!r}; the grader reads "
                         f"mytorch as UTF-8 only, declared as 'utf-8' or not at all (any other "
                         f"name, even another for UTF-8, is decoded by a codec that code run "
                         f"before can replace), so this file is not graded (save it as UTF-8 "
                         f"and remove the coding line)")
