# hw4p1: instructor-only
"""A test skips only for a stated necessity (tests/conftest.py NECESSITIES): any other skip fails
the session, named at its end.

    .venv/bin/python -m pytest -q tests/kit/test_skip_policy.py
"""
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
MODULE = '''
import pytest


def test_runs():
    pass


def test_needs_a_tool():
    pytest.skip("no bwrap here")
'''


@pytest.mark.slow
@pytest.mark.parametrize("reason, status", [(None, 0), ("not written yet", 1)])
def test_an_unexplained_skip_fails_the_session(tmp_path, reason, status):
    """Under xdist, as make test runs: the workers' skips reach the session's end."""
    extra = "" if reason is None else f"\n\ndef test_later():\n    pytest.skip({reason!r})\n"
    (tmp_path / "test_x.py").write_text(MODULE + extra)
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "tests.conftest", "-rs",
                          "-n", "2", str(tmp_path / "test_x.py")], cwd=REPO, capture_output=True,
                         text=True, timeout=300)
    assert run.returncode == status, run.stdout[-3000:]
    assert ("test_x.py::test_later: not written yet" in run.stdout) == bool(reason), run.stdout
    assert "no bwrap here" in run.stdout  # -rs lists every skip with its reason
