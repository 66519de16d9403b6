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


if __name__ == "__main__":
    from tests.testing_framework import run_module

    run_module(__name__)
