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

A category with points earns them all when every one of its tests passes; a category with a
failing test shows no points here (``None`` in ``--json``): the autograder's hidden tests, other
checks on other inputs with shares of their own, give its partial credit, which no local count
would match. Only the categories the autograder scores on their own carry points (``tests/test_mytorch.py``, from ``hw4lib/grading_numbers.py``);
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
import contextlib
import gc
import json
import linecache
import os
import sys
import time
import types
from contextlib import contextmanager
from typing import Callable
from unittest import mock

import pytest

from tests.failure_messages import describe, device_check_failure, readable

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


TESTS_DIR = os.path.dirname(os.path.abspath(__file__))
FIX = "build it on the input's device (torch.arange(..., device=x.device), ...)"
# Calls that may take tensors on two devices: CPU indices index a GPU tensor; Module.to's check.
UNMIXED = ("__getitem__", "__setitem__", "_has_compatible_shallow_copy_type")


def code_line(frame: types.FrameType | None) -> tuple[str, int, str] | None:
    """(file name, line number, source) of the innermost frame from ``frame`` outwards that is
    neither torch's nor this folder's: the line of the code under test that made a call. None
    when the call came from a test itself."""
    import torch

    torch_dir = os.path.dirname(os.path.abspath(torch.__file__))
    while frame is not None:
        path = os.path.abspath(frame.f_code.co_filename)
        if not path.startswith(torch_dir):
            if path.startswith(TESTS_DIR):
                return None
            source = linecache.getline(path, frame.f_lineno).strip()
            return os.path.basename(path), frame.f_lineno, source
        frame = frame.f_back
    return None


def tensors_in(value) -> list:
    """The tensors in ``value``: a tensor, or a tuple, list or dict holding some (nested)."""
    import torch

    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, dict):
        value = list(value.values())
    if isinstance(value, (tuple, list)):
        return [tensor for item in value for tensor in tensors_in(item)]
    return []


def _make_placement_recorder(device):
    """A torch function mode that follows, for the code under test (:func:`code_line`), the
    tensors it builds off ``device``: where each was first built (``origin``), the first torch
    call that mixes one with a tensor on ``device`` (``mixed``: a crash on a GPU; meta's kernels
    do not always raise), and the copies it makes of a meta tensor on the CPU (``copies``:
    ``.cpu()`` cannot copy out of meta, so it gets zeros of that shape instead, as
    :func:`meta_reads_zeros` reads)."""
    import torch
    from torch.overrides import TorchFunctionMode

    from hw4lib.utils.devices import same_device

    def off(tensor) -> bool:
        return tensor.dim() > 0 and not same_device(tensor.device, device)

    class PlacementRecorder(TorchFunctionMode):
        def __init__(self):
            super().__init__()
            self.built: dict[int, tuple] = {}  # id -> (tensor, where it was first built)
            self.mixed: str | None = None
            self.copies: list[str] = []

        def origin(self, tensor) -> str | None:
            entry = self.built.get(id(tensor))
            return entry[1] if entry is not None and entry[0] is tensor else None

        def __torch_function__(self, func, types_, args=(), kwargs=None):
            kwargs = kwargs or {}
            given = tensors_in(list(args)) + tensors_in(kwargs)
            strays = [tensor for tensor in given if off(tensor)]
            name = getattr(func, "__name__", "")
            if (strays and self.mixed is None and name not in UNMIXED
                    and any(not off(t) and t.dim() > 0 for t in given)):
                where = self.where(func)
                culprit = next(filter(None, map(self.origin, strays)), None)
                if where or culprit:
                    self.mixed = (f"{culprit or 'a tensor'} was built on {strays[0].device} and "
                                  f"meets a tensor on {device} in {where or name}")
            try:
                result = func(*args, **kwargs)
            except NotImplementedError as error:
                if "meta" not in str(error) or not given:
                    raise
                result = torch.zeros(given[0].shape, dtype=given[0].dtype)
                self.copies.append(self.where(func) or name)
            inherited = next(filter(None, map(self.origin, strays)), None)
            for tensor in tensors_in(result):
                if off(tensor) and self.origin(tensor) is None:
                    where = self.where(func)
                    if inherited or where:
                        self.built[id(tensor)] = (tensor, inherited or f"the tensor made by {where}")
            return result

        def where(self, func) -> str | None:
            """The call and its line in the code under test: None from a test."""
            line = code_line(sys._getframe(2))
            if line is None:
                return None
            name = getattr(func, "__name__", readable(func))
            method = "Tensor" in getattr(func, "__qualname__", "")
            call = f".{name}()" if method else f"torch.{name}(...)"
            return f"{call} at {line[0]}:{line[1]} (`{line[2]}`)"

    return PlacementRecorder()


@contextmanager
def meta_reads_zeros():
    """While active, reading a value out of a meta tensor (``if t.any()``, ``int(t)``,
    ``.item()``, ``.tolist()``) reads zeros: code that looks at its data runs on meta."""
    import torch

    def reads_zeros(real):
        return lambda self: real(torch.zeros(self.shape, dtype=self.dtype) if self.is_meta
                                 else self)

    with contextlib.ExitStack() as stack:
        for name in ("__bool__", "__int__", "item", "tolist"):
            stack.enter_context(mock.patch.object(torch.Tensor, name,
                                                  reads_zeros(getattr(torch.Tensor, name))))
        yield


def check_built_on_input_device(build: Callable, what: str, built: str = "the result",
                                dtype=None) -> None:
    """Fail unless ``build(device)`` returns tensors on ``device`` (``built``: what they are, in
    the student's words), and no tensor the code under test builds elsewhere meets one on it.

    ``build(device)`` must create its inputs with ``device=device`` (and move any module there).
    It runs on CUDA when there is one, then with the input on ``meta`` (shapes, no data; reading
    one reads zeros) while torch's default device is the CPU, so a tensor built on the CPU
    (``torch.ones(T, T)`` without ``device=``, ``torch.from_numpy``, a ``.cpu()`` copy) is off
    the input's device, as it would be in a GPU run. A module moved to ``device`` by ``build``
    ends on meta. A failure names the first line that built such a tensor. ``dtype``: the
    floating dtype of the input, when every floating result must have it too.
    """
    import torch

    from hw4lib.utils.devices import same_device

    runs = [(torch.device("meta"), torch.device("cpu"))]
    if torch.cuda.is_available():
        runs.insert(0, (torch.device("cuda"), torch.device("cpu")))  # before meta: no way back
    for device, default in runs:
        recorder = _make_placement_recorder(device)
        setting = f"of an input on the {device} device"
        error = None
        try:
            with default, meta_reads_zeros(), recorder:
                result = build(device)
        except NotImplementedError:
            raise  # the handout's stub: not written yet
        except (RuntimeError, TypeError) as raised:
            error = raised
        copies = "".join(f" (from a copy on the CPU made by {where})"
                         for where in recorder.copies[:1])
        if recorder.mixed:
            raise AssertionError(f"{what} {setting}: {recorder.mixed}{copies}; {FIX}")
        if error is not None:
            raise device_check_failure(error, f"{what} {setting}",
                                       f"while torch's default device was {default}",
                                       FIX) from None
        for tensor in tensors_in(result) or [result]:
            origin = recorder.origin(tensor) if isinstance(tensor, torch.Tensor) else None
            assert same_device(tensor.device, device), (
                f"{what} {setting}: {built} was built on {tensor.device}"
                f"{f' ({origin})' if origin else ''}{copies}; {FIX}")
            if dtype is not None and tensor.is_floating_point():
                assert tensor.dtype == dtype, (
                    f"{what} of a {dtype} input: {built} came back in {tensor.dtype}; build every "
                    f"tensor with the input's dtype (dtype=x.dtype)")


def skip_reason(report) -> str:
    """Why pytest skipped or xfailed the test of ``report``, in one line."""
    if hasattr(report, "wasxfail"):
        return report.wasxfail or "no reason given"
    longrepr = report.longrepr
    reason = longrepr[2] if isinstance(longrepr, tuple) and len(longrepr) == 3 else longrepr
    return str(reason).removeprefix("Skipped: ") or "no reason given"


def label(points: float, kind: str | None) -> str:
    """What a category is worth, as the report says it (``kind``: its :data:`OWN_WORK` key)."""
    if points:
        return f"{points:g} points when all its tests pass"
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
        self.scores: dict[str, float | None] = {}
        self.failed: set[str] = set()

    def _print(self, text: str) -> None:
        print(text, file=self.out or sys.stdout,
              flush=True)  # pragma: no mutate (equivalent: when the line is written, not what)

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
        if item.name in self.failures:
            return
        if report.skipped or hasattr(report, "wasxfail"):
            # pytest.skip(), pytest.xfail() or a marker, from the test or the code it calls: the
            # test did not show the code works, so it earns nothing.
            self.failures[item.name] = (f"{'xfail' if hasattr(report, 'wasxfail') else 'skipped'}"
                                        f" ({skip_reason(report)}): a test that does not run to "
                                        f"its end earns no points; nothing may skip or xfail it")
        elif report.failed:
            error = call.excinfo.value if call.excinfo is not None else None
            try:
                self.failures[item.name] = (describe(error) if error is not None
                                            else report.longreprtext.strip())
            except Exception as broken:  # noqa: BLE001 - the report must go on; pytest's own text
                self.failures[item.name] = (f"{report.longreprtext.strip()}\n      (the report "
                                            f"could not word this failure: {broken!r})")
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

    def stopped(self, exit_code: int) -> None:
        """Account for a run that pytest ended with ``exit_code``: every test that did not run
        fails (a crash or an interruption earns nothing for what it left unrun), and a run that
        did not end normally (an internal error of pytest or of this report, an interruption,
        ``pytest.exit``) fails every category, so that nothing of it reads as a pass."""
        unrun = [name for name in self.order if name not in self.ran]
        normal = exit_code in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED)
        if normal and not unrun:
            return
        why = (f"pytest ended the run early (exit code {int(exit_code)}: "
               f"{pytest.ExitCode(exit_code).name}; its own message is above)")
        self._print(self.line)
        self._print(f"The run stopped before its end: {why}. No category passes; rerun after "
                    f"fixing what stopped it.")
        for name in unrun:
            self.failures[name] = f"did not run: {why}"
            self._print(f"  FAILED  {name}\n      did not run")
        self.failed.update(self.rubric_points)

    def passed(self, category: str) -> tuple[int, int]:
        """(tests of ``category`` that ran and passed, tests of ``category``)."""
        tests = [name for name, c in self.category.items() if c == category]
        return sum(name in self.ran and name not in self.failures for name in tests), len(tests)

    def summary(self) -> None:
        """Score each category (its points when every test of it passed, None when one failed
        and the category has points) and print the summary."""
        self.scores = {}
        for category, points in self.rubric_points.items():
            self.scores[category] = (points if category not in self.failed
                                     else None if points else 0)
        self._print(self.line)
        self._print("Summary")
        for category, earned in self.scores.items():
            status = "FAILED" if category in self.failed else "PASSED"
            if self.rubric_points[category]:
                passed, count = self.passed(category)
                points = (f"{earned:g}/{self.rubric_points[category]:g}" if earned is not None
                          else f"no points here ({passed} of {count} tests pass)")
            elif category in self.own_work:
                points = OWN_WORK[self.own_work[category]]
            elif category in self.failed:
                points = "given code that should pass unchanged: see the failure above"
            else:
                points = GIVEN_CODE
            self._print(f"  {category:<40s} {status}  {points}")
        total = sum(self.rubric_points.values())
        if not total:
            return
        failing = [c for c, earned in self.scores.items() if earned is None]
        if failing:
            self._print(f"  {'Total':<40s}         not known here: Autolab's hidden tests give "
                        f"{', '.join(failing)} partial points of their own")
        else:
            self._print(f"  {'Total':<40s}         {total:g}/{total:g}")
        self._print("  Autolab grades these categories with its own hidden tests, on other inputs: "
                    "a category whose tests all pass here is expected to earn its points there.")


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
            exit_code = pytest.main(["-p", "no:terminal", "-p", "no:cacheprovider", "-o",
                                     "addopts=", *tests], plugins=[report])
    finally:
        gc.unfreeze()
    report.stopped(exit_code)
    report.summary()
    return report


def run_module(module_name: str, argv: list[str] | None = None,
               out=None) -> dict[str, float | None]:
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
