"""Rescoring a graded class after the language model's thresholds move: the seconds ``make rescore``
takes for CLASS_SIZE recorded rows (reading grades.csv, checking and rescoring each row, noting it
in its feedback, writing grades.csv, rescore.txt, summary.txt and summary.png), against the
40-80 minutes of grading the class again (``bench_regrade``).

    .venv/bin/python -m bench bench_rescore      # or: make bench BENCH=bench_rescore

The rows are synthetic but recorded as a regrade records them: every hidden test of the real
grader (passed or failed at random), a measured perplexity (or none, as for an invalid handin),
each category's points from those by the grader's own functions, the grader's identity and
scoring line, and a feedback file of an honest report's size for each.
"""
from __future__ import annotations

import contextlib
import io
import json
import random
import shutil
import statistics
import tarfile
import tempfile
import time
from pathlib import Path

from autograder.judging import grading_run
from autograder.judging.scoring import rubric
from autograder.classroom import regrade, rescore

CLASS_SIZE = 400
REPEATS = 3
FEEDBACK_BYTES = 6_000
OLD_THRESHOLDS = (rubric.FULL_MARKS_PPL, rubric.ZERO_MARKS_PPL)
NEW_THRESHOLDS = (rubric.FULL_MARKS_PPL - 0.25, rubric.ZERO_MARKS_PPL + 0.5)


def grader(folder: Path, line: dict) -> Path:
    """A grader folder whose autograde.tar holds the build_info.json of a grader with ``line``."""
    folder.mkdir(parents=True)
    info = json.dumps({"grader_sha256": "0" * 64, **line}).encode()
    with tarfile.open(folder / grading_run.AUTOGRADE_TAR, "w") as tar:
        member = tarfile.TarInfo(f"autograde/{rescore.BUILD_INFO_NAME}")
        member.size = len(info)
        tar.addfile(member, io.BytesIO(info))
    (folder / grading_run.MAKEFILE).write_text("all:\n")
    return folder


def recorded_class(out: Path, line: dict) -> None:
    """CLASS_SIZE rows graded under ``line``, as grades.csv and feedback files in ``out``."""
    draw = random.Random(0)
    rows = {}
    (out / "feedback").mkdir(parents=True)
    for index in range(CLASS_SIZE):
        student = f"student{index:03d}@uni.edu"
        invalid = draw.random() < 0.03
        passed = {name: not invalid and draw.random() < 0.85
                  for tests in line["test_points"].values() for name in tests}
        perplexity = None if invalid else draw.uniform(3.0, 6.0)
        points = rescore.scores(passed, perplexity, line)
        rows[student] = {
            "student": student, "email": student, "status": "invalid" if invalid else "ok",
            **points, "total": rubric.added(points[category] for category in rubric.RUBRIC),
            "perplexity_recomputed": "" if perplexity is None else perplexity,
            **({} if invalid else {
                f"test:{name}": (value if passed[name] else 0.0)
                for tests in line["test_points"].values() for name, value in tests.items()}),
            "handin_sha256": f"{index:064x}", "grader_sha256": "0" * 64,
            "scoring": rescore.scoring_text(line)}
        regrade.feedback_path(out, student).write_text("x" * FEEDBACK_BYTES + "\n")
    regrade.write_rows(out / "grades.csv", rows)


def main() -> None:
    tests = rescore.hidden_test_points()
    old = rescore.scoring_line(rubric.RUBRIC, tests, *OLD_THRESHOLDS)
    new = rescore.scoring_line(rubric.RUBRIC, tests, *NEW_THRESHOLDS)
    work = Path(tempfile.mkdtemp(prefix="hw4p1-bench-rescore-"))
    try:
        source = grader(work / "grader", new)
        recorded_class(work / "recorded", old)
        seconds, changed = [], ""
        for repeat in range(REPEATS + 1):  # the first is a warm-up (imports, matplotlib's fonts)
            out = work / f"out{repeat}"
            shutil.copytree(work / "recorded", out)
            start = time.perf_counter()
            with contextlib.redirect_stderr(io.StringIO()):  # its log, 30 lines
                rescore.rescore_class(out, source)
            if repeat:
                seconds.append(time.perf_counter() - start)
            changed = (out / "rescore.txt").read_text().splitlines()[0]
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f"{CLASS_SIZE} recorded rows, thresholds {OLD_THRESHOLDS} -> {NEW_THRESHOLDS}: "
          f"{changed}")
    print(f"make rescore: {statistics.median(seconds):.2f} s (median of {REPEATS} after a "
          f"warm-up; min {min(seconds):.2f} s, max {max(seconds):.2f} s)")


if __name__ == "__main__":
    main()
