"""Gradescope adapter: grade ``submission/handin.tar`` with the Autolab judge, write results.json.

Standard library only at import, so that it always writes its zero results.json first; reading the
judge's report imports the report's schema (pydantic, from the grading image). ``run_autograder``
(from ``dist/gradescope.zip``) runs::

    python -m autograder.judging.gradescope          # from <root>/source, root = $AUTOGRADER_ROOT

where the root (``/autograder`` on Gradescope; any folder in tests) holds ``source/`` (the zip's
contents, with ``autograde.tar`` and ``autograde-Makefile``), ``submission/`` (the student's files)
and ``results/``. The handin is graded exactly as on Autolab: the same ``make``, judge, limits and
sandbox, in a fresh grading folder. ``results/results.json`` follows Gradescope's specification
(https://gradescope-autograders.readthedocs.io/en/latest/specs/): one test per hidden mytorch test
(its share of its category's points; the category is the test's name prefix, its ``number``
group and its tag) plus one for the language model, the integrity flags (if any) as a test of
no points with ``"visibility": "hidden"`` (staff only), the overall ``score`` (the sum of the tests,
equal to the Autolab total), and as ``output`` a summary of what is visible: notes on the handin,
the language model's measurement, each category's total. Hidden tests' details are shown
``after_due_date`` unless ``--visibility`` says otherwise; the Autolab run's full output goes only
to stdout, which students do not see. A results.json is written first (all zeros, saying the
grader failed) and replaced at the end, so it is never missing or malformed.

``source/autograde.tar`` holds the hidden material: it is copied into the grading folder and then
deleted from ``source/`` before the judge starts, so no student code ever finds a copy (each
submission runs in a fresh container; a second run in the same container says it is missing).
"""
from __future__ import annotations

import argparse
import os
import time
from pathlib import Path
from typing import TYPE_CHECKING

from autograder.judging import grading_run
from autograder.judging.scoring import rubric
from hw4lib.file_io import write_json
from hw4lib.handin_format import HANDIN_ARCHIVE_SUFFIXES, HANDIN_TAR

HIDDEN_SOURCE = grading_run.AUTOGRADE_TAR  # deleted from source/ once copied: the hidden material
MAX_OUTPUT_CHARS = 60_000  # the summary shown to the student; Gradescope truncates long outputs
VISIBILITIES = ("hidden", "after_due_date", "after_published", "visible")

if TYPE_CHECKING:
    from autograder.judging.scoring.report import GradingReport


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Grade a Gradescope submission with the hw4p1 "
                                                 "judge and write results/results.json.")
    parser.add_argument("--root", type=Path,
                        default=Path(os.environ.get("AUTOGRADER_ROOT", "/autograder")),
                        help="Gradescope's autograder folder (default: $AUTOGRADER_ROOT or "
                             "/autograder)")
    parser.add_argument("--visibility", choices=VISIBILITIES, default="after_due_date",
                        help="when students see the hidden tests' details")
    parser.add_argument("--grader-flags", default="",
                        help="GRADER_FLAGS passed to the Autolab Makefile")
    args = parser.parse_args(argv)
    results = args.root / "results" / "results.json"
    results.parent.mkdir(parents=True, exist_ok=True)
    write_json(results, failure_results("The autograder did not finish; please tell the course "
                                        "staff."))
    start = time.monotonic()
    try:
        payload = grade_submission(args.root, args.visibility, args.grader_flags)
    except Exception as error:  # noqa: BLE001 - results.json must stay valid whatever happens
        payload = failure_results(f"The autograder itself failed ({type(error).__name__}: "
                                  f"{error}); please tell the course staff.")
    payload["execution_time"] = round(time.monotonic() - start, 1)
    write_json(results, payload)
    print(payload["output"])


def grade_submission(root: Path, visibility: str, grader_flags: str) -> dict:
    """Grade the submission under ``root``; return the results.json payload."""
    # pydantic: the module docstring
    from autograder.judging.scoring.report import GradingReport, Status

    handin = find_handin(root / "submission")
    grading = grading_run.prepare(root / "source", handin)
    (root / "source" / HIDDEN_SOURCE).unlink()
    graded = grading_run.run(grading, grader_flags)
    print(graded.output)  # the full report, for the staff (stdout_visibility is hidden)
    report = graded.report or GradingReport(status=Status.CRASHED)
    summary = visible_summary(graded.scores, report, handin is not None, visibility)
    return results_payload(graded.scores, report, summary, visibility)


def visible_summary(scores: dict[str, float], report: GradingReport, found_handin: bool,
                    visibility: str) -> str:
    """What every student may see at once: notes on the handin, the language model's measurement
    and each category's total; never a hidden test's details or anything the worker produced."""
    lines = [] if found_handin else [f"No {HANDIN_TAR} was found in the submission: upload the "
                                     f"{HANDIN_TAR} that `make handin` writes."]
    lines += [f"{HANDIN_TAR}: {note}" for note in report.handin_notes]
    lines.append(f"{rubric.LM_CATEGORY}: {report.lm and report.lm.message or 'not graded'}")
    for category, points in rubric.RUBRIC.items():
        lines.append(f"  {category:<28s} {scores[category]:>6g}/{points}")
    lines.append(f"  {'Total':<28s} {round(sum(scores.values()), 2):>6g}/"
                 f"{sum(rubric.RUBRIC.values())}")
    lines.append(f"The hidden mytorch tests' details: {visibility.replace('_', ' ')}.")
    return "\n".join(lines)


def find_handin(submission: Path) -> Path | None:
    """``handin.tar``, else the only tar or zip file uploaded, else None."""
    if (submission / HANDIN_TAR).is_file():
        return submission / HANDIN_TAR
    if not submission.is_dir():
        return None
    candidates = [p for p in submission.glob("*") if p.is_file()
                  and p.name.endswith(HANDIN_ARCHIVE_SUFFIXES)]
    return candidates.pop() if len(candidates) == 1 else None


def results_payload(scores: dict[str, float], report: GradingReport, summary: str,
                    visibility: str) -> dict:
    """Gradescope's results.json: one test per hidden test and one for the language model."""
    # the module docstring
    from autograder.judging.scoring.report import LanguageModelResult, TestResult

    tests = []
    for number, category in enumerate(rubric.MYTORCH_RUBRIC, start=1):
        ran = [test for test in report.tests if test.category == category]
        if not ran or abs(sum(grading_run.clamp(test.points, test.max_points) for test in ran)
                          - scores[category]) > 0.01:
            ran = [TestResult("all tests", category, rubric.MYTORCH_RUBRIC[category],
                              scores[category], f"the hidden tests of {category}",
                              "" if scores[category] else "not graded: see the summary")]
        for index, test in enumerate(ran, start=1):
            max_points = float(test.max_points)
            points = grading_run.clamp(test.points, max_points)
            output = f"Checks: {test.summary}"
            if test.message:
                output += f"\nWhat differed: {test.message}"
            if test.message and test.hint:
                output += f"\nLikely cause: {test.hint}"
            tests.append({"name": f"{category}: {test.name}", "number": f"{number}.{index}",
                          "score": points, "max_score": max_points,
                          "status": "passed" if points == max_points else "failed",
                          "output": output, "tags": [category], "visibility": visibility})
    lm = report.lm or LanguageModelResult(message="")
    lm_points = scores[rubric.LM_CATEGORY]
    tests.append({"name": f"{rubric.LM_CATEGORY}: perplexity on the hidden test set",
                  "number": f"{len(rubric.MYTORCH_RUBRIC) + 1}.1", "score": lm_points,
                  "max_score": float(rubric.LM_POINTS),
                  "status": "passed" if lm_points == rubric.LM_POINTS else "failed",
                  "output": (lm.message or "see the summary")
                  + (f"\nLikely cause: {lm.hint}" if lm.hint else ""),
                  "tags": [rubric.LM_CATEGORY], "visibility": "visible"})
    flags = report.flags
    if flags:  # facts for the staff: a test no student ever sees (Gradescope's "hidden")
        tests.append({"name": f"{rubric.LM_CATEGORY}: integrity notes for the course staff (no "
                              f"score depends on them)",
                      "number": f"{len(rubric.MYTORCH_RUBRIC) + 1}.2", "score": 0.0,
                      "max_score": 0.0, "status": "failed",
                      "output": "\n".join(f"- {flag}" for flag in flags),
                      "tags": [rubric.LM_CATEGORY, "integrity"], "visibility": "hidden"})
    payload = {"score": round(sum(test["score"] for test in tests), 2),
               "output": summary[-MAX_OUTPUT_CHARS:], "visibility": "visible",
               "stdout_visibility": "hidden", "tests": tests}
    board = report.scoreboard()
    if board is not None:
        payload["leaderboard"] = [
            {"name": column["hdr"], "value": value, **({"order": "asc"} if column.get("asc") else {})}
            for column, value in zip(rubric.SCOREBOARD_COLUMNS, board)]
    return payload


def failure_results(message: str) -> dict:
    """A valid results.json awarding nothing, for when grading could not finish."""
    return {"score": 0.0, "output": message, "visibility": "visible",
            "stdout_visibility": "hidden",
            "tests": [{"name": f"{category}", "number": f"{number}", "score": 0.0,
                       "max_score": float(points), "status": "failed", "output": message,
                       "tags": [category], "visibility": "visible"}
                      for number, (category, points) in enumerate(rubric.RUBRIC.items(), 1)]}


if __name__ == "__main__":
    main()
