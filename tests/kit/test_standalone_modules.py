# hw4p1: instructor-only
"""Every test module the handout ships passes standalone (``python -m tests.X``, the runner
students use) on the reference solution. How each fails on the untouched handout is checked in
tests/kit/test_handout.py (a NotImplementedError naming the piece)."""
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tools.handout_files import exclusion_reason

REPO = Path(__file__).resolve().parents[2]


def shipped_test_modules() -> list[str]:
    return sorted(path.stem for path in (REPO / "tests").glob("test_*.py")
                  if exclusion_reason(path.relative_to(REPO).as_posix(), REPO) is None)


@pytest.mark.slow
def test_every_shipped_module_passes_standalone_on_the_solution():
    modules = shipped_test_modules()
    assert "test_handin" in modules and "test_transformer_decoder_only" in modules, modules
    environment = {**os.environ, "WANDB_MODE": "disabled", "OMP_NUM_THREADS": "1"}
    failed = {}
    for module in modules:
        run = subprocess.run([sys.executable, "-m", f"tests.{module}"], cwd=REPO, env=environment,
                             capture_output=True, text=True, timeout=600)
        if run.returncode != 0 or "Summary" not in run.stdout:
            failed[module] = (run.stdout + run.stderr)[-2000:]
    assert not failed, "standalone runs that fail on the solution:\n" + "\n".join(
        f"--- {module}\n{output}" for module, output in failed.items())
