"""The rows of a regrade's grades.csv: one per graded handin, built from the judge's report
(``autograder/judging/scoring/report.py``), flagged for the staff across the class, read and written
atomically by the one CSV writer (``autograder/classroom/spreadsheet.py``). The columns are the
regrade's (``autograder/classroom/regrade.py``'s docstring); the rescore and the gradebook read
the rows back with :func:`read_rows` and :func:`row_key`."""
from __future__ import annotations

import re
import sys
from pathlib import Path

from autograder.classroom import adjustments, spreadsheet
from autograder.classroom.handins import Handin
from autograder.judging import grading_run
from autograder.judging.scoring import rubric, weights_fingerprint
from autograder.judging.scoring.report import GradingReport, LanguageModelResult, Status
from hw4lib.handin_format import STATE_DICT_FILE

COLUMNS = ["student", "name", "email", "sid", "version", "versions_found", "versions_graded",
           "submitted_at", "status", *rubric.RUBRIC, "total", "adjusted_total", "adjustments",
           "perplexity_recomputed",
           "perplexity_reported", "parameters", "tokenizer", "seconds", "likely_causes", "flags",
           "notes", "integrity_flags", "runtime_code", "weights_sha256", "handin_sha256",
           "grader_sha256", "scoring", "weights_fingerprint", adjustments.AS_WRITTEN]
RETRIED_NOTE = "graded again after a timeout (the host may have been the cause)"
# What byte-identical weights can mean and what to compare next (without "; ", which separates
# the flags of a cell). The run cards are not in the rows: the staff read them in the handins.
SAME_BYTES = ("one training, copied or run twice: the same code, data, seed and hardware give "
              "the same bytes, and each run draws its own seed, so honest students match only "
              "by giving the same one (the same --seed N or seed: N). Compare next the seed and "
              "wall_seconds of their run_card.json, then make similarity's share for the pair")
# What a row says of who handed in what and when: always the current download's, also in a row
# whose grading is kept (a re-export after a group was fixed, a second term's metadata).
IDENTITY = ("name", "email", "sid", "version", "versions_found", "versions_graded",
            "submitted_at")


def identity_of(handin: Handin, versions: str) -> dict:
    """The IDENTITY cells of ``handin``'s row, as the download says them."""
    return {"name": handin.name, "email": handin.email, "sid": handin.sid,
            "version": handin.version, "versions_found": handin.versions_found,
            "versions_graded": versions, "submitted_at": handin.submitted_at}


def row_of(handin: Handin, graded: grading_run.GradingRun, handin_sha: str, grader_sha: str,
           versions: str) -> dict:
    report = graded.report or GradingReport(status=Status.CRASHED)
    lm = report.lm or LanguageModelResult(message="")
    integrity = [flag.replace("; ", ", ") for flag in report.flags]  # "; " separates CSV flags
    integrity += report.static_findings  # one line each, without "; " (handin_guard.describe)
    notes = [note for note in (handin.note, graded.error) if note]
    return {"student": handin.student, **identity_of(handin, versions),
            "status": graded.status, **graded.scores,
            "total": round(sum(graded.scores.values()), 2),
            "perplexity_recomputed": "" if lm.perplexity_char is None else lm.perplexity_char,
            "perplexity_reported": lm.reported_perplexity_char or "",
            "parameters": lm.num_parameters or "", "tokenizer": lm.token_type or "",
            "seconds": round(graded.seconds, 1),
            "likely_causes": " ".join(likely_causes(report)),
            "notes": "; ".join(notes), "integrity_flags": "; ".join(integrity),
            "runtime_code": ", ".join(report.runtime_code),
            **{f"test:{test.name}": test.points for test in report.tests},
            **{f"test_seconds:{test.name}": test.seconds for test in report.tests
               if test.seconds is not None},
            **{f"seconds:{category}": value for category, value in report.seconds.items()
               if category in rubric.RUBRIC},
            "weights_sha256": report.weights_sha256,
            "handin_sha256": handin_sha, "grader_sha256": grader_sha,
            "weights_fingerprint": fingerprint_of(lm)}


def fingerprint_of(lm: LanguageModelResult) -> str:
    """The judge's ``weights_fingerprint`` of the handin's model when it is one, else ''."""
    text = lm.weights_fingerprint
    return text if text and weights_fingerprint.decode(text) else ""


def likely_causes(report: GradingReport) -> list[str]:
    """The bug families the hints named for a handin's failed hidden tests (sorted, once each)."""
    return sorted({test.family for test in report.tests
                   if re.fullmatch(r"[a-z0-9-]+", test.family)})


def other_students(pairs: list[tuple[str, float]], rows: dict[str, dict], student: str,
                   identical: list[str]) -> dict[str, float]:
    """{student: distance} of ``pairs`` ((row key, distance), nearest first), each student once at
    their nearest, leaving out ``student`` and those already named as ``identical``."""
    found: dict[str, float] = {}
    for other, gap in pairs:
        name = rows[other]["student"]
        if name != student and name not in identical:
            found.setdefault(name, gap)
    return found


def with_flags(rows: dict[str, dict]) -> dict[str, dict]:
    """Each row's ``flags``: the judge's integrity notes, run-time code, weights byte-identical to
    another student's, weights another student's agree with up to scale and small changes
    (``autograder.judging.scoring.weights_fingerprint``: its distance, at most its TOLERANCE), and
    weights that compute what another student's do (its output distance, at most
    OUTPUT_TOLERANCE)."""
    owners: dict[str, set[str]] = {}
    for row in rows.values():
        if row.get("weights_sha256"):
            owners.setdefault(row["weights_sha256"], set()).add(row["student"])
    fingerprints = {key: row.get("weights_fingerprint") or "" for key, row in rows.items()}
    close = weights_fingerprint.shared_weights(fingerprints)
    alike = weights_fingerprint.same_outputs(fingerprints)
    for key, row in rows.items():
        flags = [flag for flag in row.get("integrity_flags", "").split("; ") if flag]
        if row.get("runtime_code"):
            flags.append(f"its mytorch builds code at run time ({row['runtime_code']})")
        identical = sorted(owners.get(row.get("weights_sha256") or "", set()) - {row["student"]})
        if identical:
            flags.append(f"shares its weights with {', '.join(identical)} (byte-identical "
                         f"{STATE_DICT_FILE}): {SAME_BYTES}")
        nearest = other_students(close.get(key, []), rows, row["student"], identical)
        if nearest:
            flags.append("shares its weights with " + ", ".join(
                f"{student} (distance {gap:.4f})" for student, gap in nearest.items())
                + f": at most {weights_fingerprint.TOLERANCE} is the same trained weights up to "
                  f"scale and small changes (honest independent trainings: docs/results.md)")
        same = other_students(alike.get(key, []), rows, row["student"], identical)
        if same:
            flags.append("computes what " + ", ".join(
                f"{student}'s weights compute (output distance {gap:.2g})"
                for student, gap in same.items())
                + f": at most {weights_fingerprint.OUTPUT_TOLERANCE} nats per token on the probe "
                  f"batch is the same function (honest independent trainings: docs/results.md)")
        row["flags"] = "; ".join(flags)
    return rows


def read_rows(path: Path) -> dict[str, dict]:
    """{row key: row} of a grades.csv this module wrote ({} without one), cells as written."""
    if not path.is_file():
        return {}
    return {row_key(row): row for row in spreadsheet.read_csv(path)[1] if row.get("student")}


def row_key(row: dict) -> str:
    return (f"{row['student']}#{row['version']}" if row.get("versions_graded") == "all"
            and row.get("version") else row["student"])


def columns_of(rows: dict[str, dict]) -> list[str]:
    """COLUMNS, then each hidden test's points and seconds, then each category's seconds in
    rubric order."""
    order = {category: index for index, category in enumerate(rubric.RUBRIC)}
    tests = sorted({key.split(":", 1)[1] for row in rows.values() for key in row
                    if key.startswith(("test:", "test_seconds:"))})
    seconds = {key for row in rows.values() for key in row if key.startswith("seconds:")}
    present = {key for row in rows.values() for key in row}
    return [*COLUMNS,
            *[key for name in tests for key in (f"test:{name}", f"test_seconds:{name}")
              if key in present],
            *sorted(seconds, key=lambda key: order.get(key.split(":", 1)[1], len(order)))]


def write_rows(path: Path, rows: dict[str, dict],
               staff: list[adjustments.Adjustment] | None = None) -> None:
    """The CSV, replaced atomically: a reader (or an interrupted run) never sees half a file.
    Each row's ``adjusted_total`` and ``adjustments`` are those of ``staff`` (None: the
    adjustments file beside ``path``), and so is the block at the top of its feedback."""
    if staff is None:
        staff = adjustments.read(adjustments.beside(path))
    with_flags(rows)
    for key, row in rows.items():
        mine = adjustments.of_row(staff, key, row["student"])
        if mine or row.get("adjustments"):
            adjustments.update_feedback(feedback_path(path.parent, key), mine, row)
        row.update(adjustments.cells(row, mine))
        row[adjustments.AS_WRITTEN] = adjustments.as_written(row)
    spreadsheet.write_csv(path, columns_of(rows), (rows[key] for key in sorted(rows)))


def read_settled(path: Path) -> tuple[dict[str, dict], list[adjustments.Adjustment]]:
    """(:func:`read_rows` of ``path``, the adjustments file beside it), every hand edit of its
    points settled (``adjustments.settle_hand_edits``: kept by an adjustment, else refused) and
    every adjustment that names no row said, on standard error."""
    rows = read_rows(path)
    staff = adjustments.read(adjustments.beside(path))
    for line in (*adjustments.settle_hand_edits(rows, staff, path),
                 *adjustments.unknown(staff, rows)):
        print(line, file=sys.stderr)
    return rows, staff


def feedback_path(out: Path, key: str) -> Path:
    return out / "feedback" / f"{key.replace('#', '_v')}.txt"


