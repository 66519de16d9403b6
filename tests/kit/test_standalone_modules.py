# hw4p1: instructor-only
"""Every test module the handout ships passes standalone (``python -m tests.X``, the runner
students use) on the reference solution. ``make mutants`` runs each shipped module it tests so
first (its baseline stops when one fails or prints no summary), so ``make test`` runs only the
others standalone. How each fails on the untouched handout is checked in tests/kit/test_handout.py
(a NotImplementedError naming the piece)."""
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tools.handout_files import exclusion_reason
from tools.mutants import CATALOGUE_DIR, load_catalogue, runs_standalone

REPO = Path(__file__).resolve().parents[2]


def shipped_test_modules() -> list[str]:
    return sorted(path.stem for path in (REPO / "tests").glob("test_*.py")
                  if exclusion_reason(path.relative_to(REPO).as_posix(), REPO) is None)


def modules_run_by_mutants() -> set[str]:
    """The shipped modules ``make mutants`` runs standalone on the solution (its baseline)."""
    tests = {m.test for m in load_catalogue(sorted(CATALOGUE_DIR.glob("*.yaml")))}
    return {test.removeprefix("tests.") for test in tests if runs_standalone(test)}


def test_the_handout_ships_the_modules_students_run():
    modules = shipped_test_modules()
    assert "test_handin" in modules and "test_transformer_decoder_only" in modules, modules
    by_mutants = modules_run_by_mutants()
    assert by_mutants <= set(modules), by_mutants - set(modules)
    assert {"test_mytorch", "test_lm_trainer"} <= by_mutants, by_mutants


# One test per module, so that pytest-xdist spreads them over its workers (in one test they were
# a block of 200 s that one worker ran alone, measured with -n 1 on a loaded AMD EPYC).
@pytest.mark.slow
@pytest.mark.parametrize("module", sorted(set(shipped_test_modules()) - modules_run_by_mutants()))
def test_a_shipped_module_passes_standalone_on_the_solution(module):
    environment = {**os.environ, "WANDB_MODE": "disabled", "OMP_NUM_THREADS": "1"}
    run = subprocess.run([sys.executable, "-m", f"tests.{module}"], cwd=REPO, env=environment,
                         capture_output=True, text=True, timeout=600)
    assert run.returncode == 0 and "Summary" in run.stdout, (
        f"python -m tests.{module} fails on the solution:\n" + (run.stdout + run.stderr)[-2000:])
