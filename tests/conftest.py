"""Shared pytest set-up: wandb off, one torch thread, the repo root importable, no skip without a
stated necessity."""
import os
import re
import sys
from pathlib import Path

import torch

os.environ.setdefault("WANDB_MODE", "disabled")
REPO_ROOT = Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

# The tests' tensors are tiny: a second math thread only adds its start-up and, on a busy machine,
# waits for a core (a tiny model's forward is then two orders of magnitude slower than on one).
torch.set_num_threads(1)

# A test may skip only for a stated necessity: a tool, library, kernel feature, privilege or
# architecture this machine lacks (or a probe that another test runs). Any other skip fails the
# session, listed at its end (pytest.ini's -ra lists every skip with its reason).
NECESSITIES = re.compile(
    r"needs bubblewrap|no bwrap here|libseccomp is not installed|no Landlock on this kernel"
    r"|seccomp is (Linux's|not applied on)|needs a root judge|the profiles are set up as root"
    r"|not root, or not delegated|tgkill's number is not known here|cannot run here: "
    r"|is installed but does not work here|no sandbox mode isolates student code here"
    r"|run by test_session_folders_are_removed")
UNEXPLAINED: list[str] = []


def skip_reason(report) -> str:
    """The reason a skipped test report gives."""
    longrepr = report.longrepr
    return longrepr[2].removeprefix("Skipped: ") if isinstance(longrepr, tuple) else str(longrepr)


def pytest_runtest_logreport(report):
    if report.skipped and not hasattr(report, "wasxfail"):
        reason = skip_reason(report)
        if not NECESSITIES.search(reason):
            UNEXPLAINED.append(f"{report.nodeid}: {reason}")


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    if UNEXPLAINED and not hasattr(config, "workerinput"):
        terminalreporter.section("skips that state no necessity (tests/conftest.py NECESSITIES)")
        for line in UNEXPLAINED:
            terminalreporter.line(line)


def pytest_sessionfinish(session, exitstatus):
    if UNEXPLAINED and not hasattr(session.config, "workerinput") and exitstatus == 0:
        session.exitstatus = 1
