"""One grading as Autolab runs it, for the platforms that drive the judge themselves (Gradescope's
adapter, the bulk regrade). Standard library only at import: the judge's report is read through
``autograder/judging/scoring/report.py`` (pydantic), imported where it is read.

:func:`prepare` makes a fresh grading folder holding ``autograde.tar``, the Autolab Makefile and the
handin; :func:`run` runs ``make`` there (the same judge, limits and sandbox as Autolab), or, given
a judge zygote (the bulk regrade's: ``autograder/judging/isolation/judge_zygote.py``), does what
that Makefile does with a judge forked from the zygote; then it reads the scores line and the
judge's report (``--results-json``, read by ``autograder/judging/scoring/report.py``) and removes
the folder.

The Makefile's steps are defined here once (:func:`makefile_rules`, which ``make autograde``
writes into it, and the constants it is built from, which the zygote's path follows).
"""
from __future__ import annotations

import json
import locale
import math
import os
import shutil
import signal
import shlex
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Callable

from autograder.judging.isolation import file_trees, judge_zygote, thread_policy
from autograder.judging.scoring import rubric
from hw4lib.handin_format import HANDIN_TAR

AUTOGRADE_TAR, MAKEFILE = "autograde.tar", "autograde-Makefile"
GRADING_TIMEOUT_S = rubric.worst_case_seconds() + 120.0  # the judge always finishes first
# The Autolab Makefile's steps (:func:`makefile_rules`): autograde.tar made private, extracted
# with a private umask into ARCHIVE_ROOT, and the judge run there on the handin.
ARCHIVE_ROOT = "autograde"
ARCHIVE_MODE, EXTRACTION_UMASK = 0o600, 0o077
EXTRACT_COMMAND = ("tar", "--no-same-permissions", "-xf", AUTOGRADE_TAR)
JUDGE_MODULE = "autograder.judging.grade"
JUDGE_ARGUMENTS = (f"../{HANDIN_TAR}", "--work", "../work",
                   "--autograde-tar", f"../{AUTOGRADE_TAR}")
UNEXPORTED = ("PYTHONOPTIMIZE",)  # python -O would strip asserts; the judge refuses to run under it

if TYPE_CHECKING:
    from autograder.judging.scoring.report import GradingReport, Status


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
        from autograder.judging.scoring.report import Status  # pydantic: the module docstring

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
        started: Callable[[subprocess.Popen], None] | None = None,
        zygote: judge_zygote.JudgeZygote | None = None) -> GradingRun:
    """Grade in ``grading`` (from :func:`prepare`), then remove it. ``gradings``: how many
    gradings run side by side on this machine; the judge shares the CPUs out between them when it
    chooses its math threads (``autograder.judging.isolation.thread_policy``). ``started`` receives
    the judge's process once it runs (make's, or the forked judge: ``pid``, ``returncode`` and
    ``wait(timeout)``; the bulk regrade stops it on a second Ctrl-C, see :func:`stop`).
    ``zygote``: fork the judge from it instead of running make (the grading the Makefile of
    :func:`makefile_rules` gives); when it cannot fork one, make grades."""
    # pydantic: the module docstring
    from autograder.judging.scoring.report import ReportError, load

    start = time.monotonic()
    judged = None
    if zygote is not None:
        judged = judge_forked(grading, grader_flags, gradings, timeout, started, zygote)
    if judged is None:
        judged = judge_with_make(grading, grader_flags, python, gradings, timeout, started)
    output, timed_out, error = judged
    details = grading / "details.json"
    try:
        report, refused = (load(details), "") if details.exists() else (None, "")
    except ReportError as refusal:
        report, refused = None, f"the judge's report was refused: {refusal}"
    finally:
        try:
            file_trees.remove_tree(grading)
        except OSError:  # a folder make could not hand back: the next grading uses a fresh one
            pass
    lines = output.splitlines()
    return GradingRun(parse_scores(lines[-1] if lines and not timed_out else ""), report, output,
                      time.monotonic() - start, timed_out, error or refused)


def judge_with_make(grading: Path, grader_flags: str, python: str, gradings: int,
                    timeout: float, started: Callable | None) -> tuple[str, bool, str]:
    """Run make in ``grading``: (its standard output, whether it outlived ``timeout``, '')."""
    # A session of its own: a Ctrl-C of the caller's stops no grading, and a grading that outlives
    # its timeout is killed whole.
    process = subprocess.Popen(make_command(grading, grader_flags, python), cwd=grading,
                               env=make_environment(gradings), stdin=subprocess.DEVNULL,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               errors="replace", start_new_session=True)  # errors=: text pipes
    if started is not None:
        started(process)
    try:
        output, _ = process.communicate(timeout=timeout)
        return output, False, ""
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        output, _ = process.communicate()
        return output, True, ""


def judge_forked(grading: Path, grader_flags: str, gradings: int, timeout: float,
                 started: Callable | None, zygote: judge_zygote.JudgeZygote
                 ) -> tuple[str, bool, str] | None:
    """What make does in ``grading``, with the judge forked from ``zygote``: (the judge's standard
    output, then the zero line if it failed, as the Makefile's ``|| echo``; whether it outlived
    ``timeout``; why its end is unknown, else ''). None, with the extraction undone, when the
    zygote forked no judge: make then grades."""
    if not extract(grading):
        return zero_line() + "\n", False, ""
    descriptor, name = tempfile.mkstemp(prefix="hw4p1-judge-output-")
    os.close(descriptor)
    output_file = Path(name)
    try:
        try:
            # PWD and OLDPWD: what the Makefile's `cd` leaves them
            env = {**judge_environment(gradings), "PWD": str(grading / ARCHIVE_ROOT),
                   "OLDPWD": str(grading)}
            process = zygote.fork_judge(grading / ARCHIVE_ROOT, JUDGE_MODULE,
                                        judge_arguments(grading, grader_flags), env, output_file)
        except judge_zygote.ZygoteUnavailable as why:
            print(f"hw4p1 regrade: {why}; grading {grading.name} with make", file=sys.stderr)
            file_trees.remove_tree(grading / ARCHIVE_ROOT)
            return None
        if started is not None:
            started(process)
        try:
            code, timed_out = process.wait(timeout), False
        except subprocess.TimeoutExpired:
            stop(process, grace=None)
            code, timed_out = process.returncode, True
        if process.lost:  # it may still run, orphaned: its session goes (its zygote reaps none)
            try:
                os.killpg(process.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        # Read as subprocess's text mode reads make's output. True would set the environment's
        # LC_CTYPE first: the same encoding, since nothing in the regrade changes its locale.
        encoding = locale.getpreferredencoding(False)  # pragma: no mutate (equivalent: above)
        with open(output_file, encoding=encoding, errors="replace") as read:
            output = read.read()
    finally:
        output_file.unlink()
    if code != 0 and not timed_out:
        output += zero_line() + "\n"
    lost = f"the judge's zygote died while it graded: {process.lost}" if process.lost else ""
    return output, timed_out, lost


def extract(grading: Path) -> bool:
    """Extract ``grading``'s autograde.tar as the Makefile does (ARCHIVE_MODE, EXTRACTION_UMASK,
    EXTRACT_COMMAND); False when that fails."""
    try:
        (grading / AUTOGRADE_TAR).chmod(ARCHIVE_MODE)
        # A session of its own, as make's: the caller's Ctrl-C (a terminal's, to its whole
        # process group) would otherwise end tar, and the grading would read as the judge's crash.
        subprocess.run(EXTRACT_COMMAND, cwd=grading, umask=EXTRACTION_UMASK, check=True,
                       stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL, start_new_session=True)
    except (OSError, subprocess.CalledProcessError):
        return False
    return True


def judge_arguments(grading: Path, grader_flags: str = "") -> list[str]:
    """The judge's arguments after ``-m JUDGE_MODULE``, as the Makefile's shell gives them."""
    return [*JUDGE_ARGUMENTS, *shlex.split(results_flags(grading, grader_flags))]


def results_flags(grading: Path, grader_flags: str = "") -> str:
    """``grader_flags`` and the flag that writes ``grading``'s details.json."""
    return f"{grader_flags} --results-json {grading / 'details.json'}".strip()


def makefile_rules() -> str:
    """The Autolab Makefile's rules (``make autograde`` writes them after the variables' defaults
    PYTHON and GRADER_FLAGS); when the judge cannot even start, they print :func:`zero_line`."""
    return (f"# python -O would strip asserts; the judge refuses to run under it.\n"
            f"unexport {' '.join(UNEXPORTED)}\n\nall:\n"
            f"\t@chmod {ARCHIVE_MODE:o} {AUTOGRADE_TAR} && (umask {EXTRACTION_UMASK:03o} && "
            f"{' '.join(EXTRACT_COMMAND)}) && \\\n"
            f"\t\tcd {ARCHIVE_ROOT} && $(PYTHON) -m {JUDGE_MODULE} "
            f"{' '.join(JUDGE_ARGUMENTS[:3])} \\\n"
            f"\t\t{' '.join(JUDGE_ARGUMENTS[3:])} $(GRADER_FLAGS) || echo '{zero_line()}'\n")


def zero_line() -> str:
    """The scores line of a judge that could not run: every category zero."""
    return json.dumps({"scores": rubric.zero_scores()})


def zygote_can_grade(source: Path) -> bool:
    """Whether ``source``'s Makefile grades as :func:`makefile_rules` say, so that a judge forked
    from a zygote grades as it would (a grader built by other code is left to make)."""
    try:
        return makefile_rules() in (source / MAKEFILE).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return False


def make_command(grading: Path, grader_flags: str = "", python: str = sys.executable) -> list[str]:
    """The make command line that grades ``grading`` and writes its details.json there."""
    return ["make", "--no-print-directory", f"PYTHON={python}",
            f"GRADER_FLAGS={results_flags(grading, grader_flags)}"]


def make_environment(gradings: int = 1) -> dict[str, str]:
    """This process's environment for make, outside any make of the caller's, telling the judge
    how many gradings run side by side."""
    env = {k: v for k, v in os.environ.items() if k not in ("MAKELEVEL", "MAKEFLAGS", "MFLAGS")}
    env[thread_policy.GRADINGS_VARIABLE] = str(gradings)
    return env


def judge_environment(gradings: int = 1) -> dict[str, str]:
    """The environment the Makefile gives the judge: :func:`make_environment` without
    UNEXPORTED."""
    return {k: v for k, v in make_environment(gradings).items() if k not in UNEXPORTED}


def stop(process: subprocess.Popen | judge_zygote.ForkedJudge,
         grace: float | None = 10.0) -> None:
    """Stop a grading :func:`run` started: SIGINT to its session (the judge then kills its
    workers and prints its scores line), SIGKILL to what is left after ``grace`` seconds (at
    once when None). Nothing once its end is known (its pid may be another's by then)."""
    steps = ((signal.SIGINT, grace),) if grace is not None else ()
    for sig, wait_s in (*steps, (signal.SIGKILL, None)):
        if process.returncode is not None:
            return
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
