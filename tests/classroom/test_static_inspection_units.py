# hw4p1: instructor-only
"""The judge's static inspection (``autograder.judging.intake.static_inspection``) on small
handins: the files it reads and the encodings it names, each part's files (the other part's
classes left out), the tracing's bounds at exactly their values, the graded files that define no
graded class of their own, and the judge's timer (its length, its end, a signal left pending, a
call from another thread).

    .venv/bin/python -m pytest -q tests/classroom/test_static_inspection_units.py

Truths written by hand from what each handin's imports bind.
"""
import signal
import threading
import time
from pathlib import Path

import pytest

from autograder.judging.intake import mytorch_resolver, static_inspection
from autograder.judging.intake.static_inspection import Inspection
from tests.classroom.similarity_classes import POISON

NN = "mytorch/nn"
GRADED_INIT = ("from .linear import Linear\nfrom .activation import Softmax\n"
               "from .scaled_dot_product_attention import ScaledDotProductAttention\n"
               "from .multi_head_attention import MultiHeadAttention\n"
               "from .embedding import Embedding\n")
HONEST = {f"{NN}/__init__.py": GRADED_INIT,
          f"{NN}/linear.py": "class Linear:\n    pass\n",
          f"{NN}/activation.py": "class Softmax:\n    pass\n",
          f"{NN}/scaled_dot_product_attention.py": "class ScaledDotProductAttention:\n    pass\n",
          f"{NN}/multi_head_attention.py": "class MultiHeadAttention:\n    pass\n"}
TIMEOUT_FINDING = "its mytorch could not be inspected within 20 s"


def written(folder: Path, sources: dict[str, str | bytes]) -> dict[str, Path]:
    """An extraction's ``files`` ({name: path}) holding ``sources``."""
    files = {}
    for name, text in sources.items():
        files[name] = folder / name
        files[name].parent.mkdir(parents=True, exist_ok=True)
        files[name].write_bytes(text.encode() if isinstance(text, str) else text)
    return files


# ------------------------------------------------------------------------------------------------
# The files read
# ------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("source, finding", [
    (b"x = 1\n", ""),
    (b"# coding: utf-8\n", ""),
    (b"# -*- coding: UTF_8 -*-\n", ""),
    (b"# coding: latin-1\n", "latin-1"),
    (b"# coding: " + b"x" * 40 + b"\n", "x" * 40),
    (b"# coding: " + b"y" * 41 + b"\n", "y" * 40),
])
def test_a_declared_encoding_other_than_utf8_is_named_in_at_most_40_characters(source, finding):
    assert static_inspection.foreign_encoding("mytorch/x.py", source) == (
        f"mytorch/x.py declares the source encoding {finding!r} (not graded; read here as UTF-8)"
        if finding else "")


def test_mytorch_files_are_read_as_utf8_and_those_that_cannot_be_are_findings(tmp_path):
    files = written(tmp_path, {
        "mytorch/a.py": b"x" * 1_000_001, "mytorch/b.py": b"# coding: latin-1\ny = '\xe9'\n",
        "mytorch/c.py": b"\xef\xbb\xbfz = 2\n", "mytorch/d.py": b"w" * 1_000_000,
        "config.yaml": b"x: 1\n", "mytorch/e.txt": b"x\n"})
    sources, findings = static_inspection.mytorch_sources(files)
    assert sources == {"mytorch/b.py": "# coding: latin-1\ny = '\ufffd'\n",
                       "mytorch/c.py": "z = 2\n", "mytorch/d.py": "w" * 1_000_000}
    assert findings == [
        "mytorch/a.py could not be inspected (ValueError: a.py is larger than 1000000 bytes, "
        "the most the grader's inspection reads)",
        "mytorch/b.py declares the source encoding 'latin-1' (not graded; read here as UTF-8)"]


def test_a_handin_s_code_made_at_run_time_is_read_from_every_file(tmp_path):
    files = written(tmp_path, {**HONEST, f"{NN}/a.py": "def (\n", f"{NN}/b.py": "exec(t)\n",
                               f"{NN}/c.py": "import marshal\nmarshal.loads(b)\n"})
    inspection = static_inspection.inspect_mytorch(files)
    assert inspection.runtime == [f"exec ({NN}/b.py:1)", f"marshal.loads ({NN}/c.py:2)"]
    assert inspection.findings == []
    assert sorted(inspection.sources) == sorted(files)


def test_a_file_that_ends_the_parse_is_one_finding_though_both_scans_read_it(tmp_path):
    """The package imports Softmax from deep.py, which the run-time scan and the resolver both
    parse."""
    files = written(tmp_path, {**HONEST, f"{NN}/__init__.py": GRADED_INIT + "from .deep import Softmax\n",
                               f"{NN}/deep.py": POISON[f"{NN}/deep.py"]})
    inspection = static_inspection.inspect_mytorch(files)
    assert inspection.findings == [
        f"{NN}/deep.py could not be inspected (RecursionError: maximum recursion depth exceeded "
        f"during ast construction)", f"{moved('activation')} (Softmax cannot be traced)"]


# ------------------------------------------------------------------------------------------------
# Each part's files
# ------------------------------------------------------------------------------------------------

MIXED = {**HONEST,
         f"{NN}/linear.py": "from .helpers import check\nfrom .embedding import Embedding\n"
                            "class Linear:\n    def f(self):\n        return check, Embedding\n",
         f"{NN}/helpers.py": "def check():\n    pass\n",
         f"{NN}/embedding.py": "from .linear import Linear\nfrom .tables import table\n"
                               "class Embedding:\n    def f(self):\n        return Linear, table\n",
         f"{NN}/tables.py": "def table():\n    pass\n"}


@pytest.mark.parametrize("part, paths", [
    ("graded", ["linear.py", "activation.py", "scaled_dot_product_attention.py",
                "multi_head_attention.py", "helpers.py"]),
    ("bonus", ["embedding.py", "tables.py"]),
])
def test_a_part_holds_what_its_classes_use_and_not_the_other_part_s_classes(tmp_path, part,
                                                                            paths):
    inspection = static_inspection.inspect_mytorch(written(tmp_path, MIXED), part)
    assert inspection.part == [f"{NN}/{path}" for path in paths]
    assert inspection.findings == []


def helpers_of_linear(count: int) -> str:
    """A linear.py whose Linear uses ``count`` functions of its module."""
    names = [f"h{index}" for index in range(count)]
    return (f"class Linear:\n    def f(self):\n        return ({', '.join(names)},)\n"
            + "".join(f"def {name}():\n    pass\n" for name in names))


@pytest.mark.parametrize("helpers, cut", [(495, False), (496, True)])
def test_a_part_of_500_definitions_is_traced_no_further(tmp_path, helpers, cut):
    """The four graded classes and Linear's helpers: helpers + 4 definitions."""
    files = written(tmp_path, {**HONEST, f"{NN}/linear.py": helpers_of_linear(helpers)})
    inspection = static_inspection.inspect_mytorch(files)
    assert inspection.findings == (
        ["its graded classes use more than 500 definitions: traced no further (every file is "
         "compared whole all the same)"] if cut else [])


def test_look_ups_past_20000_are_a_finding(tmp_path, monkeypatch):
    """The real Resolver given a head start of look-ups: the handin's own take it to exactly
    20000 (no finding), or one past."""
    resolvers = []

    def head_start(steps: int):
        class Started(mytorch_resolver.Resolver):
            def __init__(self, sources):
                super().__init__(sources)
                self.steps = steps
                resolvers.append(self)
        monkeypatch.setattr(static_inspection, "Resolver", Started)

    files = written(tmp_path, HONEST)
    head_start(0)
    assert static_inspection.inspect_mytorch(files).findings == []
    own = resolvers[-1].steps
    for start, findings in ((20_000 - own, []), (20_001 - own, [
            "its mytorch's imports could not be traced within 20000 look-ups"])):
        head_start(start)
        assert static_inspection.inspect_mytorch(files).findings == findings
        assert resolvers[-1].steps == start + own


# ------------------------------------------------------------------------------------------------
# Graded files that define no graded class of their own
# ------------------------------------------------------------------------------------------------

def moved(which: str) -> str:
    return f"{NN}/{which}.py defines no graded class of its own"


@pytest.mark.parametrize("changes, findings", [
    ({}, []),
    ({f"{NN}/linear.py": "from .impl import Linear\n", f"{NN}/impl.py": "class Linear:\n    pass\n"},
     [f"{moved('linear')} (Linear is defined in {NN}/impl.py)"]),
    ({f"{NN}/activation.py": "from .impl import Softmax\n",
      f"{NN}/impl.py": "class Softmax:\n    pass\n"},
     [f"{moved('activation')} (Softmax is defined in {NN}/impl.py)"]),
    ({f"{NN}/linear.py": None, f"{NN}/activation.py": "x = 1\n"},
     [f"{moved('activation')} (Softmax cannot be traced)"]),
    ({f"{NN}/linear.py": "class (\n", f"{NN}/multi_head_attention.py": "y = 2\n"},
     [f"{moved('multi_head_attention')} (MultiHeadAttention cannot be traced)"]),
])
def test_a_graded_file_whose_classes_come_from_elsewhere_is_a_finding(tmp_path, changes,
                                                                      findings):
    """``changes``: a file's new text, or None when it is not handed in. A file that does not
    parse fails the grader's import on its own: no finding here."""
    sources = {**HONEST, **changes}
    files = written(tmp_path, {name: text for name, text in sources.items() if text is not None})
    assert static_inspection.inspect_mytorch(files).findings == findings


# ------------------------------------------------------------------------------------------------
# The judge's timer
# ------------------------------------------------------------------------------------------------

@pytest.fixture
def alarm_handler():
    """A SIGALRM handler of the test's own, recording its calls; SIGALRM's handler and the timer
    restored afterwards."""
    calls = []
    previous = signal.signal(signal.SIGALRM, lambda signum, frame: calls.append(signum))
    yield calls
    signal.setitimer(signal.ITIMER_REAL, 0)
    signal.signal(signal.SIGALRM, previous)


def test_the_judge_s_inspection_runs_under_a_20_s_timer_then_stopped(monkeypatch, alarm_handler):
    remaining = []

    def inspection(files):
        remaining.append(signal.getitimer(signal.ITIMER_REAL)[0])
        return Inspection(runtime=["exec (a.py:1)"], findings=["a finding"])

    monkeypatch.setattr(static_inspection, "inspect_mytorch", inspection)
    assert static_inspection.inspect_handin({}) == (["exec (a.py:1)"], ["a finding"])
    assert 19.0 < remaining[0] <= 20.0
    assert signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)
    signal.raise_signal(signal.SIGALRM)
    assert alarm_handler == [signal.SIGALRM], "SIGALRM's handler was not put back"


def test_an_inspection_past_its_time_is_one_finding(monkeypatch, alarm_handler):
    def inspection(files):
        signal.setitimer(signal.ITIMER_REAL, 0.01)  # the judge's timer, ending now
        time.sleep(5)
        return Inspection()

    monkeypatch.setattr(static_inspection, "inspect_mytorch", inspection)
    start = time.monotonic()
    assert static_inspection.inspect_handin({}) == ([], [TIMEOUT_FINDING])
    assert time.monotonic() - start < 4
    assert alarm_handler == []


def test_an_inspection_that_raises_is_one_finding(monkeypatch, alarm_handler):
    def inspection(files):
        raise ValueError("bad")

    monkeypatch.setattr(static_inspection, "inspect_mytorch", inspection)
    assert static_inspection.inspect_handin({}) == (
        [], ["its mytorch could not be inspected (ValueError: bad)"])


class LateAlarm:
    """The signal module as static_inspection sees it, but the timer's stop (``setitimer(...,
    0)``) is preceded by its SIGALRM: the timer ending just as the inspection does."""

    def __getattr__(self, name):
        return getattr(signal, name)

    @staticmethod
    def setitimer(which, seconds):
        if seconds == 0:
            signal.raise_signal(signal.SIGALRM)  # its handler runs before this returns
        return signal.setitimer(which, seconds)


def test_a_signal_as_the_inspection_ends_raises_nothing(monkeypatch, alarm_handler):
    monkeypatch.setattr(static_inspection, "inspect_mytorch",
                        lambda files: Inspection(findings=["a finding"]))
    monkeypatch.setattr(static_inspection, "signal", LateAlarm())
    assert static_inspection.inspect_handin({}) == ([], ["a finding"])
    assert alarm_handler == []


def test_from_another_thread_the_inspection_runs_without_a_timer(tmp_path, alarm_handler):
    files = written(tmp_path, {**HONEST, f"{NN}/b.py": "exec(t)\n"})
    results = []
    thread = threading.Thread(target=lambda: results.append(
        (static_inspection.inspect_handin(files), signal.getitimer(signal.ITIMER_REAL))))
    thread.start()
    thread.join()
    assert results == [(([f"exec ({NN}/b.py:1)"], []), (0.0, 0.0))]
