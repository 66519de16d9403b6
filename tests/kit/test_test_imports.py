# hw4p1: instructor-only
"""What tests share lives in helper modules (``tests/grader/autograder_helpers.py``,
``attack_handins.py``, ``tests/classroom/similarity_classes.py``, ...), never in a test module:
importing a ``test_*.py`` module runs its module-level code and ties one test file's edits to
another's. Read from the source: every ``import`` statement, at any depth.

    .venv/bin/python -m pytest -q tests/kit/test_test_imports.py
"""
import ast
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]
# The borrowings left (importer, test module imported), each to move into a helper module; the
# list only shrinks: a pair that no longer occurs fails the test until it is removed here.
REMAINING = {
    ("tests/test_decoderlayer_selfattention.py", "tests.test_sublayer_feedforward"),
    ("tests/test_decoderlayer_selfattention.py", "tests.test_sublayer_selfattention"),
    ("tests/library/test_config_reads.py", "tests.test_lm_trainer"),
    ("tests/library/test_host_reads.py", "tests.library.test_kv_cache"),
    ("tests/grader/test_gradescope.py", "tests.grader.test_autograder_e2e"),
    ("tests/grader/test_hints.py", "tests.grader.test_grade_model"),
    ("tests/grader/test_lm_integrity.py", "tests.grader.test_grade_model"),
    ("tests/grader/test_model_fork.py", "tests.grader.test_grade_model"),
    ("tests/grader/test_run_card_sample.py", "tests.grader.test_grade_model"),
    ("tests/grader/test_weights_fingerprint.py", "tests.grader.test_grade_model"),
}


def borrowings(root: Path = TESTS) -> set[tuple[str, str]]:
    """(importer, imported): each module under ``root`` that imports a ``test_*`` module other
    than itself (paths relative to the repository, modules dotted)."""
    found = set()
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = ([alias.name for alias in node.names] if isinstance(node, ast.Import)
                     else [node.module] if isinstance(node, ast.ImportFrom) and node.module
                     else [])
            for name in names:
                relative = path.relative_to(root.parent)
                if (name.split(".")[-1].startswith("test_")
                        and name != ".".join(relative.with_suffix("").parts)):
                    found.add((str(relative), name))
    return found


def test_borrowings_are_found(tmp_path):
    """The reader finds a borrowing at module level and inside a function, as ``import`` and as
    ``from``; a module's import of itself (a child process re-importing it) is none."""
    package = tmp_path / "tests"
    package.mkdir()
    (package / "test_a.py").write_text("from tests.test_b import x\n"
                                       "def f():\n    import tests.sub.test_c\n")
    (package / "test_self.py").write_text("from tests.test_self import y\n")
    (package / "helpers.py").write_text("from tests.grader.autograder_helpers import z\n")
    assert borrowings(package) == {("tests/test_a.py", "tests.test_b"),
                                   ("tests/test_a.py", "tests.sub.test_c")}


def test_the_platform_rows_and_the_helpers_borrow_from_no_test_module():
    """tests/platforms/ and every helper module (not ``test_*.py``) import no test module."""
    found = {(importer, name) for importer, name in borrowings()
             if importer.startswith("tests/platforms/")
             or not Path(importer).name.startswith("test_")}
    assert found == set(), sorted(found)


def test_no_test_module_borrows_from_another_beyond_the_list():
    """Every other borrowing is one of REMAINING, and each of REMAINING still occurs."""
    found = borrowings()
    assert found - REMAINING == set(), sorted(found - REMAINING)
    assert REMAINING - found == set(), f"moved: remove from REMAINING {sorted(REMAINING - found)}"
