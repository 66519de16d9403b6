# hw4p1: instructor-only
"""The instructor tests' session folders (tests.grader.autograder_helpers.session_folder) are
removed when the session ends, in a plain and in an xdist session, and cannot be made where
nothing would remove them (a test session that leaked them filled CI's disk)."""
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.grader.autograder_helpers import session_folder

REPO = Path(__file__).resolve().parents[2]
PROBE = "HW4P1_SESSION_FOLDER_PROBE"  # set: the probe test below writes its folder's path there


@pytest.mark.skipif(PROBE not in os.environ, reason="run by test_session_folders_are_removed_when_the_session_ends")
def test_probe_makes_a_session_folder():
    folder = session_folder("hw4p1-probe-")
    (folder / "payload").write_bytes(b"x" * 1000)
    Path(os.environ[PROBE]).write_text(str(folder))


@pytest.mark.parametrize("workers", [[], ["-n", "1"]], ids=["plain", "xdist"])
def test_session_folders_are_removed_when_the_session_ends(tmp_path, workers):
    record = tmp_path / "folder.txt"
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                          *workers, f"{__file__}::test_probe_makes_a_session_folder"],
                         cwd=REPO, env={**os.environ, PROBE: str(record)},
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0 and "1 passed" in run.stdout, run.stdout[-2000:] + run.stderr[-2000:]
    folder = Path(record.read_text())
    assert folder.name.startswith("hw4p1-probe-"), folder
    assert not folder.exists(), f"{folder} outlived its test session"


def test_session_folder_refuses_where_no_fixture_removes_it():
    code = ("from tests.grader.autograder_helpers import session_folder\n"
            "session_folder('hw4p1-unremoved-')\n")
    run = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True,
                         timeout=120)
    assert run.returncode != 0
    assert "RuntimeError" in run.stderr and "conftest.py" in run.stderr, run.stderr[-2000:]
