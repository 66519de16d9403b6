# hw4p1: instructor-only
"""The hidden mytorch tests, one module per category: what the judge runs and where it finds them.

Same categories and points as ``tests/test_mytorch.py``, with other shapes. The inputs are drawn
from a generator the judge seeds afresh at every grading (``secrets``), so the worker's calls
differ each time and results recorded in one grading are worthless in the next; the tolerances
hold for any draw, so a handin scores the same every time. Checks that a shortcut cannot pass:
every gradient is compared for two different upstream gradients, a second forward must replace
what the first stored, inputs and upstream gradients must come back unmodified (checked before
any value computed from them), masked keys must not influence the output, every projection's
dLdW/dLdb is checked, and finite differences of the student's forward must match both the
student's backward and the PyTorch gradient while the unperturbed forward matches PyTorch's, so
no one of them can be faked alone. A query row whose keys are all masked passes in either
convention described in ``tests/numeric_checks.py``.

``checks.py`` holds what the tests share (the registry, the checks, the finite differences);
``linear_tests.py``, ``softmax_tests.py``, ``sdpa_tests.py`` and ``mha_tests.py`` the tests of
each category, registered when imported here.
"""
from __future__ import annotations

# Importing each category's module registers its tests, in the rubric's order.
from autograder.judging.scoring.hidden_tests import linear_tests  # noqa: F401
from autograder.judging.scoring.hidden_tests import softmax_tests  # noqa: F401
from autograder.judging.scoring.hidden_tests import sdpa_tests  # noqa: F401
from autograder.judging.scoring.hidden_tests import mha_tests  # noqa: F401
from autograder.judging.scoring.hidden_tests.checks import HIDDEN_TESTS, HiddenTest


def tests_of(category: str) -> list[HiddenTest]:
    """The hidden tests of ``category``, in the order the judge runs them."""
    return [test for test in HIDDEN_TESTS if test.category == category]
