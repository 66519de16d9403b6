"""A small test runner that groups test functions into rubric categories.

Every ``tests/test_*.py`` module works two ways:

* ``python -m tests.test_x`` (what the notebook cells call) runs the module's rubric tests and
  prints a per-category PASSED/FAILED report with each failure's message, then a summary.
  ``--json`` also prints the Autolab rubric line ``{"scores": {category: points, ...}}`` last.
* ``pytest`` collects the same functions, because they are plain ``test_*`` functions.

A module declares its categories and their points, tags each test with one category, and ends
with the two-line ``__main__`` block::

    from tests.testing_framework import rubric, run_module

    RUBRIC = {"Linear": 5}

    @rubric("Linear")
    def test_linear_forward_matches_torch():
        ...

    if __name__ == "__main__":
        run_module(__name__)

A category earns its points only when every test in it passes. A category worth 0 points tests
code the handout gives (the tokenizer, the optimizers, beam search, ...): the report labels it
"given code: no action needed", so a student never sees points for work they did not do. Tests
take no arguments, except
``tmp_path`` (a fresh temporary directory, as pytest gives), so both runners can call them.
"""
from __future__ import annotations

import argparse
import ast
import inspect
import json
import sys
import tempfile
import time
import traceback
import types
from pathlib import Path
from typing import Callable

CATEGORY_ATTR = "_rubric_category"
GIVEN_CODE = "given code: no action needed"


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
    return grouped


def _call(test_fn: Callable) -> None:
    params = inspect.signature(test_fn).parameters
    if not params:
        test_fn()
        return
    if list(params) != ["tmp_path"]:
        raise TypeError(f"{test_fn.__name__} may take no arguments or only tmp_path, got {list(params)}")
    with tempfile.TemporaryDirectory(prefix=f"{test_fn.__name__}-") as tmp:
        test_fn(tmp_path=Path(tmp))


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
    message = message.replace("\n", "\n      ")  # keep continuation lines under the first
    return f"{type(error).__name__}: {message}{where}"


def run_categories(grouped: dict[str, list[Callable]], rubric_points: dict[str, float],
                   verbose: bool = True) -> tuple[dict[str, float], set[str]]:
    """Run every test, print the report, return ({category: points earned}, failed categories)."""
    scores: dict[str, float] = {}
    failed_categories: set[str] = set()
    line = "-" * 72
    for category, tests in grouped.items():
        failures = []
        if verbose:
            print(line)
            worth = (f"{rubric_points[category]} points" if rubric_points[category]
                     else f"0 points, {GIVEN_CODE}")
            print(f"{category} ({worth}, {len(tests)} tests)")
        for test_fn in tests:
            start = time.perf_counter()
            try:
                _call(test_fn)
            except (KeyboardInterrupt, SystemExit):
                raise
            except BaseException as error:  # noqa: BLE001 - pytest.fail/raises use BaseException
                failures.append(test_fn.__name__)
                if verbose:
                    print(f"  FAILED  {test_fn.__name__}\n      {_describe(error)}")
            else:
                if verbose:
                    print(f"  passed  {test_fn.__name__} ({time.perf_counter() - start:.2f}s)")
        scores[category] = 0 if failures else rubric_points[category]
        if failures:
            failed_categories.add(category)
        if verbose:
            print(f"  => {category}: {'PASSED' if not failures else 'FAILED'}")
    if verbose:
        print(line)
        print("Summary")
        for category, earned in scores.items():
            status = "FAILED" if category in failed_categories else "PASSED"
            if rubric_points[category]:
                points = f"{earned}/{rubric_points[category]}"
            elif category in failed_categories:
                points = "given code that should pass unchanged: see the failure above"
            else:
                points = GIVEN_CODE
            print(f"  {category:<40s} {status}  {points}")
        print(f"  {'Total':<40s}         {sum(scores.values())}/{sum(rubric_points.values())}")
    return scores, failed_categories


def with_assert_details(module: types.ModuleType) -> types.ModuleType:
    """``module`` executed afresh with pytest's assertion rewriting, as pytest itself runs it.

    A failing ``assert got == expected`` then reports both values (and its message, if any) under
    ``python -m tests.test_x`` too, instead of a bare ``AssertionError``. Returns ``module``
    unchanged when it has no source file.
    """
    from _pytest.assertion.rewrite import rewrite_asserts

    path = getattr(module, "__file__", None)
    if not path or not path.endswith(".py"):
        return module
    source = Path(path).read_bytes()
    tree = ast.parse(source, filename=path)
    rewrite_asserts(tree, source, path)
    spec = getattr(module, "__spec__", None)
    fresh = types.ModuleType(spec.name if spec else module.__name__)
    fresh.__file__, fresh.__package__ = path, module.__package__
    exec(compile(tree, path, "exec"), fresh.__dict__)  # noqa: S102 - the test file itself
    return fresh


def run_module(module_name: str, argv: list[str] | None = None) -> dict[str, float]:
    """Entry point of ``python -m tests.test_x``; exits non-zero when any category failed."""
    parser = argparse.ArgumentParser(description=f"Run the rubric tests of {module_name}.")
    parser.add_argument("--json", action="store_true",
                        help='print the Autolab line {"scores": {...}} as the last line')
    parser.add_argument("--category", action="append",
                        help="run only this category (repeatable)")
    args = parser.parse_args(argv)
    module = with_assert_details(sys.modules[module_name])
    grouped = collect(module)
    rubric_points = dict(module.RUBRIC)
    if args.category:
        unknown = sorted(set(args.category) - set(grouped))
        if unknown:
            parser.error(f"unknown categories {unknown}; choose from {list(grouped)}")
        grouped = {c: fns for c, fns in grouped.items() if c in args.category}
        rubric_points = {c: p for c, p in rubric_points.items() if c in args.category}
    scores, failed_categories = run_categories(grouped, rubric_points)
    if args.json:
        print(json.dumps({"scores": scores}))
    if failed_categories:
        sys.exit(1)
    return scores
