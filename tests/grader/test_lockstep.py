# hw4p1: instructor-only
"""The judge's lockstep dialogue with the worker, called directly over a scripted stream
(``autograder.judging.scoring.judge.Lockstep``): each test written and asked only after the
answer before it came whole, its seconds from request to answer (3 decimals), an answer to
another test or cut short ending the dialogue, the running test's seconds up to the stop; and
mytorch sources declaring an encoding other than UTF-8 dropped with a note.

    .venv/bin/python -m pytest -q tests/grader/test_lockstep.py
"""
import numpy as np
import pytest

from autograder.judging.scoring import judge
from autograder.sandboxed import wire


class Scripted:
    """A worker conversation whose result stream is ``stream``; the clock advances 1.25 s per
    request and reads 0.5049 s past the request when a wait is satisfied. ``asks`` requests are
    answered, then the worker has stopped (None)."""

    def __init__(self, stream: bytes, asks: int = 99) -> None:
        self.stream, self.asks, self.clock, self.requests = stream, asks, 0.0, []

    def ask(self, request: bytes) -> float | None:
        if len(self.requests) == self.asks:
            return None
        self.requests.append(request)
        self.clock += 1.25
        return self.clock

    def wait_for(self, size: int) -> float | None:
        return self.clock + 0.5049 if size <= len(self.stream) else None

    def received(self, start: int, end: int) -> bytes:
        return self.stream[start:end]


def answer(test: str) -> bytes:
    return wire.encode_record(test, None, {"v": np.arange(3)})


def talk(stream: bytes, tests=("a", "b", "c"), asks: int = 99) -> tuple:
    """(the Lockstep after its dialogue over ``stream``, the tests it wrote, the conversation)."""
    written = []
    lockstep = judge.Lockstep(list(tests), written.append)
    conversation = Scripted(stream, asks)
    lockstep.converse(conversation)
    return lockstep, written, conversation


def test_each_test_is_asked_once_the_answer_before_it_came():
    stream = answer("a") + answer("b") + answer("c")
    lockstep, written, conversation = talk(stream)
    assert written == ["b", "c"] and conversation.requests == [b"a\n", b"b\n", b"c\n"]
    assert lockstep.asked == {"a": 1.25, "b": 2.5, "c": 3.75}
    assert lockstep.seconds() == {"a": 0.505, "b": 0.505, "c": 0.505}
    assert lockstep.end == len(stream) and lockstep.note == "" and lockstep.running() is None


def test_an_answer_cut_short_leaves_its_test_running_until_the_stop():
    stream = answer("a") + answer("b")[:-1]
    lockstep, written, _ = talk(stream)
    assert lockstep.end == len(answer("a")) and list(lockstep.answered) == ["a"]
    assert lockstep.running() == "b" and lockstep.note == ""
    assert lockstep.seconds(stopped_at=10.0049) == {"a": 0.505, "b": 7.505}
    assert lockstep.seconds(stopped_at=1.0) == {"a": 0.505, "b": 0.0}
    assert lockstep.seconds() == {"a": 0.505}


@pytest.mark.parametrize("cut", [3, wire.LENGTH_BYTES + 5])
def test_a_stream_that_ends_in_the_framing_answers_nothing(cut):
    lockstep, written, _ = talk(answer("a")[:cut])
    assert lockstep.answered == {} and lockstep.running() == "a" and written == []
    lockstep, written, _ = talk(answer("a") + answer("b")[:cut])
    assert list(lockstep.answered) == ["a"] and lockstep.running() == "b"
    assert lockstep.note == "" and written == ["b"]


def test_an_answer_to_another_test_ends_the_dialogue_with_a_note():
    lockstep, written, _ = talk(answer("a") + answer("c"))
    assert list(lockstep.answered) == ["a"] and written == ["b"]
    assert lockstep.note == (f"{wire.UNREADABLE} after 1 results (ValueError: an answer to "
                             f"another test than the one asked)")


def test_a_worker_that_stopped_is_asked_nothing_more():
    lockstep, written, conversation = talk(answer("a") + answer("b"), asks=1)
    assert list(lockstep.asked) == ["a"] and written == ["b"]
    assert conversation.requests == [b"a\n"]


def test_a_mytorch_source_in_another_encoding_is_not_graded(tmp_path):
    sources = {"mytorch/a.py": b"# coding: latin-1\n", "mytorch/b.py": b"# coding: utf-8\n",
               "mytorch/c.py": b"x = 1\n", "config.yaml": b"# coding: latin-1\n"}
    files = {}
    for name, data in sources.items():
        files[name] = tmp_path / name.replace("/", "_")
        files[name].write_bytes(data)
    notes: list[str] = []
    judge.refuse_foreign_encodings(files, notes)
    assert sorted(files) == ["config.yaml", "mytorch/b.py", "mytorch/c.py"]
    assert len(notes) == 1 and notes[0].startswith(
        "mytorch/a.py: declares the source encoding 'latin-1'; the grader reads mytorch as UTF-8")
