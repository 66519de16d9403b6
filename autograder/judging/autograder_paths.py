"""Where a built autograder's parts lie (``tools/make_autograde.py`` lays them out): the judge's
package, the hidden material that step 4 of :mod:`autograder.judging.grade` deletes, the public test
split and the build's record."""
from __future__ import annotations

from pathlib import Path

AUTOGRADER_PACKAGE = Path(__file__).resolve().parents[1]
AUTOGRADE_ROOT = AUTOGRADER_PACKAGE.parent
HIDDEN_SET = AUTOGRADER_PACKAGE / "hidden_set"
# The public test split, not secret: a run's test_metrics.json is checked on the part it measured.
PUBLIC_SET = AUTOGRADER_PACKAGE / "public_test"
HIDDEN_TESTS = Path(__file__).resolve().parent / "hidden_tests"
REFERENCE_HW4LIB = AUTOGRADE_ROOT / "hw4lib"
# Written by tools/make_autograde.py. The driver runs only inside a built autograder, never in the
# repository, whose hw4lib it would otherwise delete.
BUILD_INFO = AUTOGRADE_ROOT / "build_info.json"
