# hw4p1: instructor-only
"""make mutants runs each test module up to its first failing test (tools/mutants.py): a
student's module as ``python -m tests.test_x`` and an instructor's under pytest. A mutant that
fails only the module's last test is still rejected; one that fails its first test stops there.
The runs of one worker are children of one preloaded parent: each imports the tree's modules as
they are when it starts (the mutated file), never the previous run's.

    .venv/bin/python -m pytest -q tests/kit/test_mutants_exit_first.py
"""
import shutil
from pathlib import Path

import pytest

from tools import mutants

REPO = Path(__file__).resolve().parents[2]
MODULE = '''
from tests.testing_framework import rubric, run_module

RUBRIC = {"Part": 3}
from tests.broken import BROKEN


@rubric("Part")
def test_first():
    assert BROKEN != "first"


@rubric("Part")
def test_middle():
    open("middle-ran", "w").close()


@rubric("Part")
def test_last():
    assert BROKEN != "last"


if __name__ == "__main__":
    run_module(__name__)
'''


@pytest.fixture
def tree(tmp_path):
    """A tree holding the rubric runner and one student's module (tests.test_x), and a copy of it
    as an instructor's module (tests.kit.test_x)."""
    (tmp_path / "tests/kit").mkdir(parents=True)
    for name in ("__init__.py", "kit/__init__.py"):
        (tmp_path / "tests" / name).write_text("")
    for name in ("testing_framework.py", "failure_messages.py"):  # the runner and its messages
        shutil.copy(REPO / "tests" / name, tmp_path / "tests" / name)
    (tmp_path / "tests/test_x.py").write_text(MODULE)
    (tmp_path / "tests/kit/test_x.py").write_text(MODULE.split('\n\nif __name__')[0])
    return tmp_path


@pytest.mark.slow
@pytest.mark.parametrize("test", ["tests.test_x", "tests.kit.test_x"])
def test_a_module_runs_up_to_its_first_failure(tree, test):
    ran = {}
    with mutants.Preloaded(tree) as runner:
        for broken in ("nothing", "first", "last"):
            (tree / "tests/broken.py").write_text(f"BROKEN = {broken!r}\n")  # the mutated module
            (tree / "middle-ran").unlink(missing_ok=True)
            outcome = runner.run(test, 120)
            ran[broken] = (outcome.returncode != 0, (tree / "middle-ran").exists())
    assert ran["nothing"] == (False, True), ran
    assert ran["last"][0] and ran["last"][1], ran  # rejected, after running the middle test
    assert ran["first"] == (True, False), ran  # rejected at once: the middle test never ran
