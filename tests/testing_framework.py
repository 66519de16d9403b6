"""Rubric categories for the test modules, and the report ``python -m tests.test_x`` prints.

Every ``tests/test_*.py`` module works two ways, with one test engine, pytest:

* ``python -m tests.test_x`` (what the notebook cells call) runs the module's tests with
  ``pytest.main`` and a small plugin that prints a per-category PASSED/FAILED report with each
  failure's message, then a summary. ``--json`` also prints the Autolab rubric line
  ``{"scores": {category: points, ...}}`` last; ``--category NAME`` runs one category.
* ``pytest`` collects the same functions directly.

A module declares its categories and their points, tags each test with one category, and ends
with the two-line ``__main__`` block::

    from tests.testing_framework import rubric, run_module

    RUBRIC = {"Linear": 5}

    @rubric("Linear")
    def test_linear_forward_matches_torch():
        ...

    if __name__ == "__main__":
        run_module(__name__)

A category's points are shared equally by its tests: each passing test earns its share, as each of
the autograder's hidden tests earns its own share. Only the categories the autograder scores on
their own carry points (``tests/test_mytorch.py``, from ``hw4lib/grading_numbers.py``);
every other category is worth 0 here, and says why: a module lists in ``THROUGH_LM`` its
categories that are the student's work graded through the language model (the dataset, the
model's parts, greedy search, the trainer: the autograder measures them only by the trained
model's perplexity), in ``BONUS`` those that are ungraded own work, and any other 0-point category
tests code the handout gives (the tokenizer, the optimizers, beam search, ...), labelled "given
code: no action needed", so a student never sees points for work they did not do.
Tests may take any pytest fixture (``tmp_path``, ``monkeypatch``, ``capsys``...).
"""
from __future__ import annotations

import argparse
import gc
import json
import linecache
import os
import re
import sys
import time
import traceback
import types
from contextlib import contextmanager
from pathlib import Path
from typing import Callable
from unittest import mock

import pytest

CATEGORY_ATTR = "_rubric_category"
GIVEN_CODE = "given code: no action needed"
BONUS_WORK = "bonus: your own work, not graded"
THROUGH_LM_WORK = "your work, graded through your language model's perplexity"


def rubric(category: str) -> Callable[[Callable], Callable]:
    """Tag a test function with the rubric category it counts towards."""

    def tag(test_fn: Callable) -> Callable:
        setattr(test_fn, CATEGORY_ATTR, category)
        return test_fn

    return tag


def collect(module) -> dict[str, list[Callable]]:
    """Return {category: [test functions]} in RUBRIC order, tests in source order.

    Raises ValueError when a test names a category missing from the module's RUBRIC, or when a
    RUBRIC category has no test, so a typo cannot silently award or lose points.
    """
    rubric_points = getattr(module, "RUBRIC", None)
    if not isinstance(rubric_points, dict) or not rubric_points:
        raise ValueError(f"{module.__name__} must define RUBRIC = {{category: points, ...}}")
    tests = [
        fn for name, fn in vars(module).items()
        if name.startswith("test_") and callable(fn) and hasattr(fn, CATEGORY_ATTR)
        and getattr(fn, "__module__", None) == module.__name__
    ]
    tests.sort(key=lambda fn: fn.__code__.co_firstlineno)
    grouped: dict[str, list[Callable]] = {category: [] for category in rubric_points}
    for fn in tests:
        category = getattr(fn, CATEGORY_ATTR)
        if category not in grouped:
            raise ValueError(
                f"{fn.__name__} is tagged {category!r}, which is not in RUBRIC {list(rubric_points)}"
            )
        grouped[category].append(fn)
    empty = [category for category, fns in grouped.items() if not fns]
    if empty:
        raise ValueError(f"RUBRIC categories without tests in {module.__name__}: {empty}")
    for kind in OWN_WORK:
        wrong = [c for c in getattr(module, kind, ()) if rubric_points.get(c) != 0]
        if wrong:
            raise ValueError(f"{kind} in {module.__name__} names {wrong}: each must be a RUBRIC "
                             f"category worth 0 points")
    return grouped


def shown(value) -> str:
    """How a case's input reads in a message: shape and dtype of an array, else a short repr."""
    if hasattr(value, "shape") and hasattr(value, "dtype"):
        return f"{tuple(value.shape)} {value.dtype}"
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


# ---------------------------------------------------------------------------------------------
# What an exception of the code under test says about the bug, read from the exception itself
# ---------------------------------------------------------------------------------------------

# The kind of bug each exception shows: (kind, words its message holds), tried in order, after the
# exception's class (:func:`exception_kind`). numpy and torch word the same failure differently.
KIND_WORDS = (
    ("device", ("device", "meta tensor")),
    ("dtype", ("dtype", "scalar type", "can't be cast", "cannot cast", "casting rule",
               "result type", "without overflow", "promotion of")),
    ("index", ("boolean index", "index out of range", "out of bounds for dimension",
               "index ", "indices")),
    ("shape", ("shape", "broadcast", "core dimension", "must match the size", "elements cannot be",
               "for scalar outputs",
               "dimension out of range", "cannot reshape", "size of", "dimension", "axis")),
)
KIND_WORDING = {  # kind -> (how a message names it, what it means when nothing more is known)
    "shape": ("a shape error", "the arrays' shapes do not fit the operation"),
    "dtype": ("a dtype error", "an array or tensor of the wrong dtype"),
    "device": ("a device error", "tensors on different devices (build every tensor on its "
               "input's device: device=x.device)"),
    "index": ("an index error", "an index or a boolean mask that does not fit the indexed array"),
}
# numpy's and torch's messages that need translating: (pattern, plain words with its groups).
TRANSLATIONS = (
    (r"matmul: Input operand 1 has a mismatch in its core dimension 0.*\(size (\d+) is "
     r"different from (\d+)\)",
     "a matrix product A @ B needs A's last dimension to equal B's second to last: here {1} "
     "and {0}"),
    (r"operands could not be broadcast together with shapes ([^\n]*?)\s*$",
     "these shapes do not broadcast against each other: {0} (each dimension pair must be equal "
     "or one of them 1, counted from the right)"),
    (r"boolean index did not match indexed array along (?:axis|dimension) (\d+); size of "
     r"(?:axis|dimension) is (\d+) but size of corresponding boolean (?:axis|dimension) is (\d+)",
     "indexing with a boolean mask needs the mask's shape to equal the indexed array's leading "
     "dimensions (here the array's size {1} against the mask's {2} along dimension {0}); a mask "
     "that only broadcasts (e.g. (L, S) against (N, H, L, S)) goes through np.where or "
     "np.broadcast_to"),
    (r"result type (\w+) can't be cast to the desired output type (\w+)",
     "an in-place operation (+=, add_, an indexed assignment) writes {0} values into a {1} "
     "tensor: create that tensor with the dtype of what goes into it"),
    (r"Promotion of int\.([\w/]+)\(float\) in in-place ops",
     "an in-place {0} (+=, -=) writes float values into an integer tensor: create that tensor "
     "with the dtype of what goes into it"),
    (r"Cannot cast ufunc '(\w+)' output from dtype\('(\w+)'\) to dtype\('(\w+)'\)",
     "an in-place {0} (+=, -=, out=) writes {1} values into a {2} array: create that array "
     "with the dtype of what goes into it"),
    (r"grad can be implicitly created only for scalar outputs",
     "backward() without an argument needs a single number (a 0-d tensor, e.g. a loss reduced to "
     "its mean): reduce it first (reduction='mean', or .mean() as the docstring says)"),
    (r"a Tensor with (\d+) elements cannot be converted to Scalar",
     "a single number was expected (a 0-d tensor, e.g. a loss reduced to its mean), got a tensor "
     "of {0} elements: reduce it (reduction='mean', or .mean() / .sum() as the docstring says)"),
)
# Frames of these folders are not the code under test: the line a message names is the innermost
# one outside them (the student's, or failing that the test's own).
LIBRARY_PARTS = ("site-packages", "dist-packages", f"{os.sep}lib{os.sep}python")
GIVEN_HELPERS = ("testing_framework.py", "numeric_checks.py", "_checks.py")
MAX_OPERANDS = 6
DOTTED_NAME = re.compile(r"(?<![\w.'\"])[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*")


def exception_kind(error: BaseException) -> str:
    """'shape', 'dtype', 'device', 'index' or '' (none of them), decided from ``error`` itself:
    its class first (IndexError, numpy's AxisError and UFuncTypeError), then its message's
    words (:data:`KIND_WORDS`), so a dtype bug raised in a device check is still a dtype bug."""
    name = type(error).__name__
    if name == "AxisError":
        return "shape"
    if "UFuncTypeError" in (cls.__name__ for cls in type(error).__mro__):
        return "dtype"
    message = str(error).lower()
    for kind, words in KIND_WORDS:
        if any(word in message for word in words):
            return kind
    return "index" if isinstance(error, IndexError) else ""


def translated(error: BaseException) -> str:
    """``error``'s message in plain words when it is one of :data:`TRANSLATIONS`, else ''."""
    message = str(error).strip()
    for pattern, words in TRANSLATIONS:
        found = re.search(pattern, message, re.DOTALL)
        if found:
            return words.format(*found.groups())
    return ""


def culprit(error: BaseException) -> tuple[types.FrameType, int] | None:
    """(frame, line number) of the innermost entry of ``error``'s traceback in code of this
    repository: not a library, not a given helper (the checks that raise on their caller's
    behalf); None if there is none."""
    found = None
    entry = error.__traceback__
    while entry is not None:
        filename = entry.tb_frame.f_code.co_filename
        if (not any(part in filename for part in LIBRARY_PARTS)
                and Path(filename).name not in GIVEN_HELPERS and not filename.startswith("<")):
            found = (entry.tb_frame, entry.tb_lineno)
        entry = entry.tb_next
    return found


def operands(frame: types.FrameType, line: str) -> list[str]:
    """``name shape dtype`` for each array or tensor the source ``line`` names: plain names and
    attribute chains, each as far as it holds an array (``self.W.T``; ``x`` of ``x.reshape``),
    read from ``frame`` without calling anything."""
    found = []
    for dotted in dict.fromkeys(DOTTED_NAME.findall(line.split("#")[0])):
        head, *attributes = dotted.split(".")
        scope = frame.f_locals if head in frame.f_locals else frame.f_globals
        if head not in scope:
            continue
        value, named, array = scope[head], head, None
        for attribute in [None, *attributes]:
            try:
                if attribute is not None:
                    value, named = getattr(value, attribute), f"{named}.{attribute}"
            except Exception:  # noqa: BLE001 - a property that raises
                break
            if hasattr(value, "shape") and hasattr(value, "dtype") and not isinstance(value, type):
                array = f"{named} {shown(value)}"
        if array is not None and array not in found:
            found.append(array)
    return found[:MAX_OPERANDS]


def explain(error: BaseException, expect: str = "") -> list[str]:
    """Lines that say what ``error`` shows, for its failure message: its kind (shape, dtype,
    device, index) and numpy's or torch's words translated, the line that raised with the shapes
    of the arrays it names, and ``expect`` (what the docstring promises, when the test knows it).
    [] for an exception of none of these kinds."""
    kind = exception_kind(error)
    if not kind:
        return []
    label, meaning = KIND_WORDING[kind]
    lines = [f"{label}: {translated(error) or meaning}"]
    found = culprit(error)
    if found is not None:
        frame, number = found
        source = linecache.getline(frame.f_code.co_filename, number).strip()
        names = operands(frame, source)
        lines.append(f"raised at {Path(frame.f_code.co_filename).name}:{number}: {source}"
                     + (f"\n        with {', '.join(names)}" if names else ""))
    if expect:
        lines.append(f"expected: {expect}")
    return lines


EXPLAINED = "_hw4p1_explained"  # set on an exception whose explanation is in its notes


def add_notes(error: BaseException, notes: list[str]) -> None:
    # Exception.add_note is Python 3.11+; the attribute is the same list on 3.10.
    error.__notes__ = [*getattr(error, "__notes__", []), *notes]


@contextmanager
def in_case(what: str, expect: str = "", **inputs):
    """Name the case when the code under test raises inside the block, as a failed comparison
    names it: ``with in_case("causal mask", x=x, attn_mask=mask): out = layer(x, attn_mask=mask)``.

    The exception keeps its type and message and gains notes: what kind of bug it shows and the
    line that raised, with its arrays' shapes (:func:`explain`), ``expect`` (what the docstring
    promises for this case, e.g. ``"Z of shape (2, 3, 4)"``), then ``in the case: what (x (3, 6,
    16) torch.float32, ...)``; the rubric report and pytest print them. Failed checks
    (AssertionError) name their case already, and an unfinished stub (NotImplementedError) is the
    same in every case.
    """
    try:
        yield
    except (AssertionError, NotImplementedError):
        raise
    except Exception as error:
        details = ", ".join(f"{name} {shown(value)}" for name, value in inputs.items())
        notes = [] if getattr(error, EXPLAINED, False) else explain(error, expect)
        add_notes(error, [*notes, f"in the case: {what}" + (f" ({details})" if details else "")])
        try:
            setattr(error, EXPLAINED, True)
        except AttributeError:  # an exception class with __slots__: its notes say it once anyway
            pass
        raise


def check_built_on_input_device(build: Callable, what: str) -> None:
    """Fail unless ``build(device)`` returns a tensor on ``device``, with every tensor the student's
    code creates placed on its input's device.

    ``build(device)`` must create its inputs with ``device=device``. It runs with a CPU input while
    torch's default device is ``meta`` (shapes, no data), so a tensor made without ``device=``
    lands on meta instead of the input's device, as it would land on the CPU in a GPU run; then
    on CUDA, when there is one.
    """
    import torch

    from hw4lib.utils.devices import same_device

    runs = [(torch.device("cpu"), torch.device("meta"))]
    if torch.cuda.is_available():
        runs.append((torch.device("cuda"), torch.device("cpu")))
    fix = "build every tensor on the input's device (torch.arange(..., device=x.device), ...)"
    for device, default in runs:
        try:
            with default:
                result = build(device)
        except NotImplementedError:
            raise
        except RuntimeError as error:
            raise device_check_failure(error, f"{what} of an input on the {device} device",
                                       f"while torch's default device was {default}", fix) from None
        assert same_device(result.device, device), (
            f"{what} of an input on the {device} device returned a tensor on {result.device} "
            f"(torch's default device in this check): {fix}")


def device_check_failure(error: BaseException, what: str, setting: str,
                         fix: str) -> AssertionError:
    """The failure of a device check (code run with its tensors on one device, e.g. meta) that
    raised ``error``: a dtype, shape or index bug named as such, from the exception, and only a
    device error (or one of no known kind) named as a device bug with ``fix``."""
    kind = exception_kind(error)
    if kind in ("", "device"):
        return AssertionError(f"{what} failed {setting} ({error}): {fix}")
    notes = "; ".join(explain(error))
    return AssertionError(f"{what} raised {type(error).__name__} ({error}): {notes}; not a "
                          f"device problem, the same code fails on any device")


def _describe(error: BaseException) -> str:
    """One readable line or a few: the exception type, its message, and where it was raised."""
    frames = traceback.extract_tb(error.__traceback__)
    message = str(error).strip()
    if not message:
        line = frames[-1].line if frames and frames[-1].line else ""
        message = f"this check failed: {line}" if line else "(no message)"
    where = ""
    if frames:
        last = frames[-1]
        where = f"\n      at {Path(last.filename).name}:{last.lineno} in {last.name}"
    notes = list(getattr(error, "__notes__", []))
    if not (getattr(error, EXPLAINED, False)
            or isinstance(error, (AssertionError, NotImplementedError))):
        notes = explain(error) + notes  # raised outside in_case: at the test's line, or setup
    notes = "".join(f"\n      {note}" for note in notes)
    message = message.replace("\n", "\n      ")  # keep continuation lines under the first
    return f"{type(error).__name__}: {message}{where}{notes}"


def label(points: float, kind: str | None) -> str:
    """What a category is worth, as the report says it (``kind``: its :data:`OWN_WORK` key)."""
    if points:
        return f"{points:g} points, shared equally by its tests"
    return f"0 points here, {OWN_WORK.get(kind, GIVEN_CODE)}"


OWN_WORK = {"BONUS": BONUS_WORK, "THROUGH_LM": THROUGH_LM_WORK}  # module attribute -> its words


class RubricReport:
    """pytest plugin: runs the tests category by category and prints the rubric report.

    Attributes after the run: ``scores`` ({category: points earned}) and ``failed`` (categories
    with a failing test, or whose tests pytest could not even collect).
    """

    line = "-" * 72

    def __init__(self, grouped: dict[str, list[Callable]], rubric_points: dict[str, float],
                 own_work: dict[str, str], out=None):
        self.order = [fn.__name__ for fns in grouped.values() for fn in fns]
        self.category = {fn.__name__: c for c, fns in grouped.items() for fn in fns}
        self.last = {fns[-1].__name__ for fns in grouped.values()}
        self.rubric_points, self.own_work, self.out = rubric_points, own_work, out
        self.failures: dict[str, str] = {}
        self.stubs: set[str] = set()  # unfinished functions whose NotImplementedError was printed
        self.errors: dict[str, BaseException] = {}  # what each failed test raised, when known
        self.ran: set[str] = set()
        self.started: dict[str, float] = {}
        self.scores: dict[str, float] = {}
        self.failed: set[str] = set()

    def _print(self, text: str) -> None:
        print(text, file=self.out or sys.stdout, flush=True)

    def pytest_collection_modifyitems(self, items) -> None:
        """Run the tests in rubric order: by category, then in source order."""
        items.sort(key=lambda item: self.order.index(item.name) if item.name in self.order
                   else len(self.order))

    def pytest_collectreport(self, report) -> None:
        if report.failed:
            self.failed.update(self.rubric_points)
            self._print(f"the tests could not be collected:\n{report.longreprtext}")

    def pytest_runtest_logstart(self, nodeid: str, location) -> None:
        name = nodeid.rpartition("::")[2]
        category = self.category.get(name)
        if category and not any(self.category.get(n) == category for n in self.ran):
            count = sum(1 for c in self.category.values() if c == category)
            self._print(self.line)
            worth = label(self.rubric_points[category], self.own_work.get(category))
            self._print(f"{category} ({worth}, {count} tests)")
        self.started[name] = time.perf_counter()

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_makereport(self, item, call):
        outcome = yield
        report = outcome.get_result()
        if report.failed and item.name not in self.failures:
            error = call.excinfo.value if call.excinfo is not None else None
            self.failures[item.name] = (_describe(error) if error is not None
                                        else report.longreprtext.strip())
            if error is not None:
                self.errors[item.name] = error

    def pytest_runtest_logfinish(self, nodeid: str, location) -> None:
        name = nodeid.rpartition("::")[2]
        category = self.category.get(name)
        if category is None:
            return
        self.ran.add(name)
        if name in self.failures:
            self.failed.add(category)
            self._print(f"  FAILED  {name}\n      {self._failure(name)}")
        else:
            self._print(f"  passed  {name} ({time.perf_counter() - self.started[name]:.2f}s)")
        if name in self.last:
            self._print(f"  => {category}: {'FAILED' if category in self.failed else 'PASSED'}")

    def _failure(self, name: str) -> str:
        """The failure of test ``name`` as the report prints it: an unfinished function's
        NotImplementedError in full the first time, in a line after that."""
        error = self.errors.get(name)
        if not isinstance(error, NotImplementedError):
            return self.failures[name]
        function = str(error).partition(":")[0]
        if " " in function:  # not a stub's "module.function: TODO" message
            return self.failures[name]
        if function in self.stubs:
            return f"NotImplementedError: {function} is not written yet (as above)"
        self.stubs.add(function)
        return self.failures[name]

    def passed(self, category: str) -> tuple[int, int]:
        """(tests of ``category`` that ran and passed, tests of ``category``)."""
        tests = [name for name, c in self.category.items() if c == category]
        return sum(name in self.ran and name not in self.failures for name in tests), len(tests)

    def summary(self) -> None:
        """Score each category (its points shared equally by its tests) and print the summary."""
        self.scores = {}
        for category, points in self.rubric_points.items():
            passed, count = self.passed(category)
            self.scores[category] = round(points * passed / count, 2)
        self._print(self.line)
        self._print("Summary")
        for category, earned in self.scores.items():
            status = "FAILED" if category in self.failed else "PASSED"
            if self.rubric_points[category]:
                passed, count = self.passed(category)
                points = (f"{earned:g}/{self.rubric_points[category]:g}  ({passed} of {count} "
                          f"tests pass)")
            elif category in self.own_work:
                points = OWN_WORK[self.own_work[category]]
            elif category in self.failed:
                points = "given code that should pass unchanged: see the failure above"
            else:
                points = GIVEN_CODE
            self._print(f"  {category:<40s} {status}  {points}")
        total = sum(self.rubric_points.values())
        if total:
            self._print(f"  {'Total':<40s}         {round(sum(self.scores.values()), 2):g}/{total:g}")
            self._print("  Autolab grades these categories with its own hidden tests, on other "
                        "inputs; each of them, too, earns its share of its category's points.")


def run_tests(module: types.ModuleType, grouped: dict[str, list[Callable]],
              rubric_points: dict[str, float], out=None) -> RubricReport:
    """Run ``grouped``'s tests of ``module`` with pytest, printing the rubric report to ``out``
    (default stdout); return the finished report."""
    own_work = {category: kind for kind in OWN_WORK for category in getattr(module, kind, ())}
    report = RubricReport(grouped, rubric_points, own_work, out)
    tests = [f"{module.__file__}::{fn.__name__}" for fns in grouped.values() for fn in fns]
    # -p no:terminal: the report above is all the output; addopts and the cache stay out of it.
    # No installed plugin is loaded (xdist, anyio, ... cost a few tenths of a second to import
    # and add nothing to one module's tests).
    # gc.freeze(): the objects that exist now (torch's and numpy's, a few hundred thousand) live
    # until the process ends; frozen, pytest's forced collections at its start and end (several
    # gc.collect() for unraisable exceptions) no longer walk them: 0.3-0.5 CPU s of a module.
    gc.freeze()
    try:
        with mock.patch.dict(os.environ, {"PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}):
            pytest.main(["-p", "no:terminal", "-p", "no:cacheprovider", "-o", "addopts=", *tests],
                        plugins=[report])
    finally:
        gc.unfreeze()
    report.summary()
    return report


def run_module(module_name: str, argv: list[str] | None = None, out=None) -> dict[str, float]:
    """Entry point of ``python -m tests.test_x``: run the module's tests with pytest, print the
    rubric report (to ``out``, default stdout); exit non-zero when any category failed."""
    parser = argparse.ArgumentParser(description=f"Run the rubric tests of {module_name}.")
    parser.add_argument("--json", action="store_true",
                        help='print the Autolab line {"scores": {...}} as the last line')
    parser.add_argument("--category", action="append",
                        help="run only this category (repeatable)")
    args = parser.parse_args(argv)
    module = sys.modules[module_name]
    grouped = collect(module)
    rubric_points = dict(module.RUBRIC)
    if args.category:
        unknown = sorted(set(args.category) - set(grouped))
        if unknown:
            parser.error(f"unknown categories {unknown}; choose from {list(grouped)}")
        grouped = {c: fns for c, fns in grouped.items() if c in args.category}
        rubric_points = {c: p for c, p in rubric_points.items() if c in args.category}
    report = run_tests(module, grouped, rubric_points, out)
    if args.json:
        print(json.dumps({"scores": report.scores}), file=out or sys.stdout)
    if report.failed:
        sys.exit(1)
    return report.scores
