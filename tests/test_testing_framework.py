# hw4p1: instructor-only
"""The rubric runner: grouping, all-or-nothing categories, failures of every kind reported."""
import types

import pytest

from tests.testing_framework import collect, rubric, run_categories

RUBRIC = {"Framework": 0}


def _module(rubric_points: dict, **tests) -> types.ModuleType:
    module = types.ModuleType("fake_tests")
    module.RUBRIC = rubric_points
    for name, fn in tests.items():
        fn.__module__ = module.__name__
        setattr(module, name, fn)
    return module


def _passes():
    assert 1 + 1 == 2


def _copy(fn):
    """A new function object with ``fn``'s code, so that tagging it leaves ``fn`` alone."""
    return types.FunctionType(fn.__code__, fn.__globals__, fn.__name__)


def _fails_assert():
    assert 1 + 1 == 3, "arithmetic is broken"


def _fails_pytest():
    pytest.fail("pytest.fail is a BaseException")


def _uses_tmp_path(tmp_path):
    (tmp_path / "f.txt").write_text("x")
    assert (tmp_path / "f.txt").read_text() == "x"


@rubric("Framework")
def test_category_scores_all_or_nothing():
    module = _module({"Good": 5, "Bad": 7, "Free": 0},
                     test_a=rubric("Good")(_passes), test_b=rubric("Good")(_uses_tmp_path),
                     test_c=rubric("Bad")(_passes), test_d=rubric("Bad")(_fails_assert),
                     test_e=rubric("Free")(_fails_pytest))
    scores, failed = run_categories(collect(module), module.RUBRIC, verbose=False)
    assert scores == {"Good": 5, "Bad": 0, "Free": 0}
    # a zero-point category still reports its failure
    assert failed == {"Bad", "Free"}


@rubric("Framework")
def test_unknown_or_empty_category_is_an_error():
    with pytest.raises(ValueError, match="not in RUBRIC"):
        collect(_module({"Good": 5}, test_a=rubric("Typo")(_passes)))
    with pytest.raises(ValueError, match="without tests"):
        collect(_module({"Good": 5, "Empty": 3}, test_a=rubric("Good")(_passes)))


@rubric("Framework")
def test_run_module_exits_non_zero_on_any_failure_and_labels_given_code():
    import contextlib
    import io
    import sys

    from tests.testing_framework import GIVEN_CODE, run_module

    for failing in ("Graded", "Given"):
        module = _module({"Graded": 5, "Given": 0},
                         test_a=rubric("Graded")(_copy(_fails_assert if failing == "Graded" else _passes)),
                         test_b=rubric("Given")(_copy(_fails_assert if failing == "Given" else _passes)))
        sys.modules[module.__name__] = module
        try:
            with pytest.raises(SystemExit) as exit_info, contextlib.redirect_stdout(io.StringIO()):
                run_module(module.__name__, argv=[])
        finally:
            del sys.modules[module.__name__]
        assert exit_info.value.code == 1, (
            f"a failure in the {failing} category must exit with status 1 (what make mutants and the "
            f"notebook rely on), got {exit_info.value.code!r}"
        )

    module = _module({"Graded": 5, "Given": 0},
                     test_a=rubric("Graded")(_copy(_passes)), test_b=rubric("Given")(_copy(_passes)))
    sys.modules[module.__name__] = module
    report = io.StringIO()
    try:
        with contextlib.redirect_stdout(report):
            scores = run_module(module.__name__, argv=[])
    finally:
        del sys.modules[module.__name__]
    assert scores == {"Graded": 5, "Given": 0}, f"expected scores {{'Graded': 5, 'Given': 0}}, got {scores}"
    given_lines = [line for line in report.getvalue().splitlines() if line.strip().startswith("Given ")]
    assert given_lines and all(GIVEN_CODE in line for line in given_lines), (
        f"the header and summary lines of a 0-point category must say {GIVEN_CODE!r}, got {given_lines}"
    )
    assert not any(GIVEN_CODE in line for line in report.getvalue().splitlines() if "Graded" in line), (
        "a graded category must not be labelled as given code"
    )


@rubric("Framework")
def test_bare_asserts_report_both_values_outside_pytest(tmp_path):
    import importlib.util

    from tests.testing_framework import _describe, with_assert_details

    path = tmp_path / "bare_module.py"
    path.write_text("def test_compare():\n    got = [1, 2]\n    assert got == [1, 3]\n")
    spec = importlib.util.spec_from_file_location("bare_module", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    detailed = with_assert_details(module)
    with pytest.raises(AssertionError) as error:
        detailed.test_compare()
    described = _describe(error.value)
    assert "[1, 2]" in described and "[1, 3]" in described, (
        f"a bare assert must report what it got and what it expected, got: {described}"
    )


@rubric("Framework")
def test_mutant_runner_matches_whole_lines_at_any_indentation():
    from tools.mutants import CatalogueError, Mutant, locate, load_catalogue, mutate

    source = "def f(x):\n    if x:\n        y = x + 1\n        return y\n    z = x + 1\n    return z\n"
    block = Mutant("m", "f.py", "y = x + 1\nreturn y\n", "y = x - 1\nreturn y\n", "tests.test_x", "bug", "c")
    assert len(locate(source, block)) == 1, f"a two-line find must match once, got {locate(source, block)}"
    expected = source.replace("        y = x + 1", "        y = x - 1")
    assert mutate(source, block) == expected, f"expected\n{expected}\ngot\n{mutate(source, block)}"
    line = Mutant("m", "f.py", "x + 1\n", "x\n", "tests.test_x", "bug", "c")
    assert len(locate(source, line)) == 0, "a whole-line find must not match the end of a longer line"
    fragment = Mutant("m", "f.py", "x + 1", "x", "tests.test_x", "bug", "c")
    assert len(locate(source, fragment)) == 2, "a fragment (no final newline) matches anywhere"

    def catalogue(tmp, text):
        path = tmp / "c.yaml"
        path.write_text(text)
        return load_catalogue([path])

    import tempfile
    from pathlib import Path

    with tempfile.TemporaryDirectory() as tmp:
        entry = "- {id: a-b, file: f.py, find: x, replace: y, test: tests.test_x, bug: z}\n"
        assert [m.id for m in catalogue(Path(tmp), entry)] == ["a-b"], "a valid entry must load"
        for bad, why in ((entry * 2, "already used"), (entry.replace("a-b", "A_b"), "kebab-case"),
                         (entry.replace(", bug: z", ""), "exactly the keys"),
                         (entry.replace("tests.test_x", "test_x"), "tests.test_x")):
            with pytest.raises(CatalogueError, match=why):
                catalogue(Path(tmp), bad)


if __name__ == "__main__":
    from tests.testing_framework import run_module

    run_module(__name__)
