"""Where a built autograder's parts lie (``tools/make_autograde.py`` lays them out): the judge's
package, the hidden material that step 4 of :mod:`autograder.judging.grade` deletes
(:func:`remove_hidden_material`), the public test split and the build's record."""
from __future__ import annotations

from pathlib import Path

from autograder.judging.isolation.file_trees import remove_tree

AUTOGRADER_PACKAGE = Path(__file__).resolve().parents[2]
AUTOGRADE_ROOT = AUTOGRADER_PACKAGE.parent
HIDDEN_SET = AUTOGRADER_PACKAGE / "hidden_set"
# The public test split, not secret: a run's test_metrics.json is checked on the part it measured.
PUBLIC_SET = AUTOGRADER_PACKAGE / "public_test"
HIDDEN_TESTS = AUTOGRADER_PACKAGE / "judging" / "scoring" / "hidden_tests"
REFERENCE_HW4LIB = AUTOGRADE_ROOT / "hw4lib"
# Written by tools/make_autograde.py. The driver runs only inside a built autograder, never in the
# repository, whose hw4lib it would otherwise delete.
BUILD_INFO = AUTOGRADE_ROOT / "build_info.json"


def remove_hidden_material(work: Path, autograde_tar: Path | None) -> None:
    """Delete every copy of the hidden material on disk once the model is graded, before any
    student code runs: the hidden test set, the hidden mytorch tests (imported at the start), the
    reference solution and the archive they came in.

    So that no mode of the sandbox, however weak, leaves them readable to the worker.
    """
    for path in (HIDDEN_SET, HIDDEN_TESTS, REFERENCE_HW4LIB, work / "lm"):
        remove_tree(path)
    if autograde_tar is not None and autograde_tar.is_file():
        autograde_tar.unlink()
