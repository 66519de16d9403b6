"""One grading as Autolab runs it, for the platforms that drive the judge themselves (Gradescope's
adapter, the bulk regrade). Standard library only.

:func:`prepare` makes a fresh grading folder holding ``autograde.tar``, the Autolab Makefile and the
handin; :func:`run` runs ``make`` there (the same judge, limits and sandbox as Autolab), reads the
scores line and the judge's report (``--results-json``, read by ``autograder/judging/report.py``),
and removes the folder.
"""
from __future__ import annotations

import json
import math
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from autograder.judging import file_trees, rubric, thread_policy
from autograder.judging.report import GradingReport, ReportError, Status, load
from hw4lib.handin_format import HANDIN_TAR

AUTOGRADE_TAR, MAKEFILE = "autograde.tar", "autograde-Makefile"
GRADING_TIMEOUT_S = rubric.worst_case_seconds() + 120.0  # the judge always finishes first


@dataclass
class GradingRun:
    scores: dict[str, float]  # every category, clamped to its points (zeros when unreadable)
    report: GradingReport | None  # the judge's --results-json; None when it wrote none
    output: str  # make's stdout: the full report, for the staff
    seconds: float
    timed_out: bool  # make itself outlived GRADING_TIMEOUT_S (the judge's limits failed)
    error: str = ""  # why this grading could not be run or read (then the status is crashed)

    @property
    def status(self) -> Status:
        """The judge's own status, or crashed without a report."""
        if self.error:
            return Status.CRASHED
        if self.timed_out:
            return Status.TIMEOUT
        return self.report.status if self.report is not None else Status.CRASHED


def prepare(source: Path, handin: Path | None, parent: Path | None = None) -> Path:
    """A fresh grading folder (0755: the sandbox's uid must reach the worker's files) holding
    ``source``'s autograde.tar, its Makefile and ``handin`` as handin.tar."""
    grading = Path(tempfile.mkdtemp(prefix="hw4p1-grading-", dir=parent))
    grading.chmod(0o755)
    shutil.copy(source / AUTOGRADE_TAR, grading / AUTOGRADE_TAR)
    shutil.copy(source / MAKEFILE, grading / "Makefile")
    if handin is not None:
        shutil.copyfile(handin, grading / HANDIN_TAR)
    return grading


def run(grading: Path, grader_flags: str = "", python: str = sys.executable,
        timeout: float = GRADING_TIMEOUT_S, gradings: int = 1,
        started: Callable[[subprocess.Popen], None] | None = None) -> GradingRun:
    """Run make in ``grading`` (from :func:`prepare`), then remove it. ``gradings``: how many
    gradings run side by side on this machine; the judge shares the CPUs out between them when it
    chooses its math threads (``autograder.judging.thread_policy``). ``started`` receives make's
    process once it runs (the bulk regrade stops it on a second Ctrl-C; see :func:`stop`)."""
    start = time.monotonic()
    # A session of its own: a Ctrl-C of the caller's stops no grading, and a grading that outlives
    # its timeout is killed whole.
    process = subprocess.Popen(make_command(grading, grader_flags, python), cwd=grading,
                               env=make_environment(gradings), stdin=subprocess.DEVNULL,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               errors="replace", start_new_session=True)
    if started is not None:
        started(process)
    try:
        output, _ = process.communicate(timeout=timeout)
        timed_out = False
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        output, _ = process.communicate()
        timed_out = True
    details = grading / "details.json"
    try:
        report, error = (load(details), "") if details.exists() else (None, "")
    except ReportError as refused:
        report, error = None, f"the judge's report was refused: {refused}"
    finally:
        try:
            file_trees.remove_tree(grading)
        except OSError:  # a folder make could not hand back: the next grading uses a fresh one
            pass
    lines = output.splitlines()
    return GradingRun(parse_scores(lines[-1] if lines and not timed_out else ""), report, output,
                      time.monotonic() - start, timed_out, error)


def make_command(grading: Path, grader_flags: str = "", python: str = sys.executable) -> list[str]:
    """The make command line that grades ``grading`` and writes its details.json there."""
    flags = f"{grader_flags} --results-json {grading / 'details.json'}".strip()
    return ["make", "--no-print-directory", f"PYTHON={python}", f"GRADER_FLAGS={flags}"]


def make_environment(gradings: int = 1) -> dict[str, str]:
    """This process's environment for make, outside any make of the caller's, telling the judge
    how many gradings run side by side."""
    env = {k: v for k, v in os.environ.items() if k not in ("MAKELEVEL", "MAKEFLAGS", "MFLAGS")}
    env[thread_policy.GRADINGS_VARIABLE] = str(gradings)
    return env


def stop(process: subprocess.Popen, grace: float = 10.0) -> None:
    """Stop a grading :func:`run` started: SIGINT to its session (the judge then kills its
    workers and prints its scores line), SIGKILL to what is left after ``grace`` seconds."""
    for sig, wait_s in ((signal.SIGINT, grace), (signal.SIGKILL, None)):
        try:
            os.killpg(process.pid, sig)
        except ProcessLookupError:
            return
        try:
            process.wait(wait_s)
            return
        except subprocess.TimeoutExpired:
            continue


def parse_scores(line: str) -> dict[str, float]:
    """The judge's scores line, each category clamped to its points; zeros when unreadable."""
    try:
        scores = json.loads(line)["scores"]
    except (ValueError, KeyError, TypeError):
        return rubric.zero_scores()
    return {category: clamp(scores.get(category), points)
            for category, points in rubric.RUBRIC.items()}


def clamp(value, points: float) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return 0.0
    return float(min(max(value, 0), points))
