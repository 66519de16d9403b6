"""Grade one handin.tar; the last line printed is Autolab's ``{"scores": {...}}``. Stdlib only.

Run from the extracted autograder (the Makefile does this)::

    cd autograde && python3 -m autograder.grade ../handin.tar --work ../work \
        --autograde-tar ../autograde.tar

Steps, in this order on purpose:

1. extract handin.tar safely into ``<work>/handin`` (``autograder.safe_tar``);
2. grade the language model in a child process (``autograder.grade_model``): the reference model
   code rebuilds the handed-in weights and measures per-character perplexity on the hidden test set.
   No student code runs in that process, and the student's self-reported metrics are only echoed;
3. delete what student code must not read: the hidden test set (the shipped copy and the files
   written for the dataset), the reference ``hw4lib`` and the autograde.tar they came in;
4. run each mytorch category of the hidden tests in its own child process, the student's
   ``mytorch/`` first on ``sys.path``, with a time limit and bounded output capture.

Whatever happens, the last line printed is the scores line; a category that cannot be graded
scores 0 and the report says why.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
import traceback
from dataclasses import dataclass
from pathlib import Path

from autograder import rubric
from autograder.safe_tar import Extraction, HandinError, extract_handin

AUTOGRADE_ROOT = Path(__file__).resolve().parents[1]
HIDDEN_SET = Path(__file__).resolve().parent / "hidden_set"
REFERENCE_HW4LIB = AUTOGRADE_ROOT / "hw4lib"
# Written by tools/make_autograde.py. The driver runs only inside a built autograder, never in the
# repository, whose hw4lib it would otherwise delete.
BUILD_INFO = AUTOGRADE_ROOT / "build_info.json"
HIDDEN_TESTS_MODULE = "autograder.hidden_tests.test_mytorch_hidden"
MAX_CHILD_FILE_BYTES = 64 * 2**20  # student code writing a bigger file than this is stopped
_CONTROL_CHARS = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")


@dataclass
class ChildRun:
    """How a child process ended and the part of its output that was kept."""

    returncode: int | None  # None when it was killed at the time limit
    seconds: float
    output: str  # head and tail of stdout+stderr, control characters removed

    @property
    def timed_out(self) -> bool:
        return self.returncode is None


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Grade a hw4p1 handin.tar; the scores line "
                                                 "comes last.")
    parser.add_argument("handin", type=Path, help="the student's handin.tar")
    parser.add_argument("--work", type=Path, default=AUTOGRADE_ROOT.parent / "work",
                        help="scratch folder, emptied first (default: beside the autograder)")
    parser.add_argument("--autograde-tar", type=Path,
                        help="the autograde.tar this autograder came in: deleted with the "
                             "hidden set before student code runs")
    parser.add_argument("--mytorch-timeout", type=float, default=rubric.MYTORCH_TIMEOUT_S,
                        help="seconds allowed to each mytorch category")
    parser.add_argument("--model-timeout", type=float, default=rubric.MODEL_TIMEOUT_S,
                        help="seconds allowed to rebuild and evaluate the model")
    args = parser.parse_args(argv)
    scores = rubric.zero_scores()
    try:
        grade(args, scores)
    except BaseException:  # noqa: BLE001 - a bug of ours must still leave a scores line
        print("The autograder itself failed; please send this output to the course staff:")
        traceback.print_exc(file=sys.stdout)
    finally:
        print_summary(scores)
        print(json.dumps({"scores": scores}), flush=True)


def grade(args: argparse.Namespace, scores: dict[str, float]) -> None:
    """Fill ``scores`` category by category (it stays valid if this stops half-way)."""
    build_info = read_json(BUILD_INFO)
    if not isinstance(build_info, dict):
        print(f"{BUILD_INFO} not found: this is not a built autograder. Run `make autograde` and "
              f"grade with dist/autograde.tar and dist/autograde-Makefile.")
        return
    print(f"hw4p1 autograder built from commit {build_info.get('git_commit', '?')}")
    work = args.work.resolve()
    if work.exists():
        shutil.rmtree(work)
    for sub in ("home", "tmp"):
        (work / sub).mkdir(parents=True)

    section("Unpacking handin.tar")
    try:
        handin = extract_handin(args.handin, work / "handin")
    except HandinError as error:
        print(f"  {error}")
        remove_secrets(work, args.autograde_tar)
        return
    report_extraction(handin)

    section(f"{rubric.LM_CATEGORY} ({rubric.LM_POINTS} points)")
    thresholds = build_info.get("lm_thresholds", {})
    scores[rubric.LM_CATEGORY] = grade_language_model(
        handin, work, args.model_timeout,
        thresholds.get("full_marks_ppl", rubric.FULL_MARKS_PPL),
        thresholds.get("zero_marks_ppl", rubric.ZERO_MARKS_PPL))
    remove_secrets(work, args.autograde_tar)

    for category, points in rubric.MYTORCH_RUBRIC.items():
        section(f"{category} ({points} points)")
        scores[category] = grade_mytorch_category(category, handin, work, args.mytorch_timeout)


def child_environment(work: Path, python_path: list[Path]) -> dict[str, str]:
    """A child's environment: ``python_path`` importable first, caches and temp files in work/."""
    env = {key: value for key, value in os.environ.items()
           if key not in ("PYTHONPATH", "PYTHONSTARTUP", "PYTHONINSPECT", "PYTHONSAFEPATH",
                          "PYTHONUSERBASE")}
    tmp = work / "tmp"
    env.update({
        "PYTHONPATH": os.pathsep.join(str(path) for path in python_path),
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONHASHSEED": "0",
        "PYTHONNOUSERSITE": "1",
        "PYTHONIOENCODING": "utf-8",
        "TQDM_DISABLE": "1",
        "WANDB_MODE": "disabled",
        "HOME": str(work / "home"),
        "TMPDIR": str(tmp),
        "MPLCONFIGDIR": str(tmp / "matplotlib"),
        "XDG_CACHE_HOME": str(tmp / "cache"),
        "TORCH_HOME": str(tmp / "torch"),
    })
    return env


def report_extraction(handin: Extraction) -> None:
    mytorch = sorted(name for name in handin.files if name.startswith("mytorch/"))
    others = sorted(name for name in handin.files if not name.startswith("mytorch/"))
    print(f"  extracted {len(mytorch)} mytorch files and: {', '.join(others) or 'nothing else'}")
    for note in handin.notes:
        print(f"  note: {note}")


def grade_language_model(handin: Extraction, work: Path, timeout: float,
                         full_marks_ppl: float, zero_marks_ppl: float) -> float:
    """Rebuild and evaluate the handed-in model in a child process; return the points earned."""
    missing = [name for name in ("config.yaml", "model_state_dict.pt") if name not in handin.files]
    if missing:
        print(f"  the handin has no {' and no '.join(missing)}: run `make handin` after "
              f"training. 0 points")
        return 0
    result_path = work / "lm" / "result.json"
    command = [sys.executable, "-m", "autograder.grade_model",
               "--handin", str(work / "handin"), "--hidden-set", str(HIDDEN_SET),
               "--work", str(work / "lm"), "--out", str(result_path)]
    run = run_child(command, cwd=AUTOGRADE_ROOT, env=child_environment(work, [AUTOGRADE_ROOT]),
                    timeout=timeout)
    print(indent(run.output))
    if run.timed_out:
        print(f"  evaluating the model took more than the {timeout:.0f} s limit. 0 points")
        return 0
    result = read_json(result_path)
    if run.returncode != 0 or not isinstance(result, dict) or "perplexity_char" not in result:
        print("  the model could not be evaluated (see above). 0 points")
        return 0
    perplexity = result["perplexity_char"]
    points = rubric.lm_score(perplexity, full_marks_ppl, zero_marks_ppl)
    print(f"  per-character perplexity on the hidden test set: {perplexity:.6f} "
          f"(full marks <= {full_marks_ppl}, none >= {zero_marks_ppl}, linear in between) "
          f"-> {points}/{rubric.LM_POINTS}   [{run.seconds:.1f} s]")
    report_self_reported_metrics(handin)
    return points


def report_self_reported_metrics(handin: Extraction) -> None:
    """Echo the student's own test_metrics.json next to the measurement; it never counts."""
    path = handin.files.get("test_metrics.json")
    reported = read_json(path) if path is not None else None
    value = reported.get("perplexity_char") if isinstance(reported, dict) else None
    if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
        print(f"  (your test_metrics.json reports {value:.4f} on the public test set; "
              f"only the measurement above counts)")
    else:
        print("  (no usable perplexity_char in test_metrics.json; only the measurement above "
              "counts)")


def remove_secrets(work: Path, autograde_tar: Path | None) -> None:
    """Delete the hidden test set and the reference solution before any student code runs.

    Student code runs with the grader's permissions and its output is shown to the student, so
    anything left on disk could be printed; nothing after the language model needs these files.
    """
    for path in (HIDDEN_SET, REFERENCE_HW4LIB, work / "lm"):
        shutil.rmtree(path, ignore_errors=True)
    if autograde_tar is not None and autograde_tar.is_file():
        autograde_tar.unlink()


def grade_mytorch_category(category: str, handin: Extraction, work: Path, timeout: float) -> float:
    """Run one category of the hidden mytorch tests on the student's code; return its points."""
    points = rubric.MYTORCH_RUBRIC[category]
    if not any(name.startswith("mytorch/") for name in handin.files):
        print(f"  the handin has no mytorch/ .py files. 0/{points}")
        return 0
    student = work / "handin"
    command = [sys.executable, "-m", HIDDEN_TESTS_MODULE, "--category", category, "--json"]
    # The student's folder holds nothing importable but mytorch/ (safe_tar extracts nothing else
    # with a .py suffix), so it can go first on sys.path without shadowing the grader's modules.
    run = run_child(command, cwd=student, env=child_environment(work, [student, AUTOGRADE_ROOT]),
                    timeout=timeout, max_file_bytes=MAX_CHILD_FILE_BYTES)
    print(indent(run.output))
    if run.timed_out:
        print(f"  => {category}: stopped at the {timeout:.0f} s time limit (an infinite loop, "
              f"or far too slow). 0/{points}")
        return 0
    earned = parse_category_score(run.output, category)
    if run.returncode != 0 or earned is None:
        reason = (f"the tests exited with status {run.returncode}" if run.returncode != 0
                  else "the tests printed no scores line last (does something print after them?)")
        print(f"  => {category}: {reason}. 0/{points}   [{run.seconds:.1f} s]")
        return 0
    earned = min(max(earned, 0), points)
    print(f"  => {category}: {earned}/{points}   [{run.seconds:.1f} s]")
    return earned


def parse_category_score(output: str, category: str) -> float | None:
    """The category's points from the last non-empty output line, if it is a valid scores line."""
    lines = [line for line in output.splitlines() if line.strip()]
    if not lines:
        return None
    try:
        parsed = json.loads(lines[-1])
    except ValueError:
        return None
    if not isinstance(parsed, dict) or not isinstance(parsed.get("scores"), dict):
        return None
    value = parsed["scores"].get(category)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    return value


def run_child(command: list[str], cwd: Path, env: dict[str, str], timeout: float,
              max_file_bytes: int | None = None) -> ChildRun:
    """Run ``command`` in a new process group; kill the whole group when it ends or times out.

    stdout and stderr are read as they come and only the first OUTPUT_HEAD_BYTES and the last
    OUTPUT_TAIL_BYTES are kept, so a flood of prints costs neither memory nor disk.
    """
    def limit_resources() -> None:  # runs in the child between fork and exec
        import resource

        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        if max_file_bytes is not None:
            resource.setrlimit(resource.RLIMIT_FSIZE, (max_file_bytes, max_file_bytes))

    start = time.monotonic()
    process = subprocess.Popen(command, cwd=cwd, env=env, stdin=subprocess.DEVNULL,
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                               start_new_session=True, preexec_fn=limit_resources)
    capture = _BoundedCapture(process.stdout)
    reader = threading.Thread(target=capture.read_all, daemon=True)
    reader.start()
    try:
        returncode = process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        returncode = None
    seconds = time.monotonic() - start
    _kill_group(process.pid)  # the child at the time limit, and whatever it started and left behind
    process.wait()
    reader.join(timeout=5)
    return ChildRun(returncode, seconds, capture.text())


def _kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass  # the group is already gone


class _BoundedCapture:
    """Keep the head and the tail of a byte stream; count the bytes dropped in between."""

    def __init__(self, stream) -> None:
        self.stream = stream
        self.head = bytearray()
        self.tail = bytearray()
        self.omitted = 0

    def read_all(self) -> None:
        while chunk := self.stream.read1(65536):
            room = rubric.OUTPUT_HEAD_BYTES - len(self.head)
            if room > 0:
                self.head += chunk[:room]
                chunk = chunk[room:]
            self.tail += chunk
            overflow = len(self.tail) - rubric.OUTPUT_TAIL_BYTES
            if overflow > 0:
                del self.tail[:overflow]
                self.omitted += overflow

    def text(self) -> str:
        head = _printable(self.head.decode("utf-8", errors="replace"))
        tail = _printable(self.tail.decode("utf-8", errors="replace"))
        if not self.omitted:
            return head + tail
        return f"{head}\n[... {self.omitted:,} bytes of output omitted ...]\n{tail}"


def _printable(text: str) -> str:
    """Text with line breaks normalised and other control characters (terminal escapes) removed."""
    return _CONTROL_CHARS.sub("", text.replace("\r\n", "\n").replace("\r", "\n"))


def read_json(path: Path):
    """Parsed JSON from ``path``, or None when it is missing or not JSON."""
    try:
        return json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def indent(text: str) -> str:
    """Child output, each line prefixed so it cannot be mistaken for the grader's own lines."""
    if not text.strip():
        return "    | (no output)"
    return "\n".join("    | " + line for line in text.rstrip("\n").splitlines())


def section(title: str) -> None:
    print(f"\n== {title} ==", flush=True)


def print_summary(scores: dict[str, float]) -> None:
    section("Summary")
    for category, points in rubric.RUBRIC.items():
        print(f"  {category:<28s} {scores[category]:>6}/{points}")
    total = round(sum(scores.values()), 2)
    print(f"  {'Total':<28s} {total:>6}/{sum(rubric.RUBRIC.values())}", flush=True)


if __name__ == "__main__":
    main()
