"""Into the gradebook: the regrade's grades.csv joined with a Canvas roster, as a CSV that Canvas's
Gradebook imports as it is.

    python -m autograder.gradebook ROSTER [--grades regrade/grades.csv] [--out gradebook]
        [--assignment "HW4P1 (12345)"] [--due 2026-11-21T00:00:00-05:00]
        [--late-penalty-per-day 10 --late-max-days 3]
    make gradebook ROSTER=canvas_export.csv [GRADES=regrade/grades.csv] [ARGS='--due ...']

``ROSTER`` is Canvas's Gradebook export (Grades > Export): the columns ``Student``, ``ID``,
``SIS User ID``, ``SIS Login ID`` and ``Section`` (then one per assignment; a second row
``Points Possible`` may follow the header). A grades.csv row matches a roster row on its SID
(``SIS User ID``), else its email (``SIS Login ID``, or an ``Email`` column where the roster has
one; a login that is not an address matches the email's name before the @).

``OUT`` receives:

- ``canvas_import.csv``: ``Student, ID, SIS User ID, SIS Login ID, Section`` copied from the roster
  and one column for this assignment, ``--assignment`` (give it as Canvas names it, ``Name (id)``,
  to fill the existing assignment; a name alone makes Canvas create one). Canvas takes every other
  column for an assignment, so nothing else is in this file. A student without a handin, or whose
  grading crashed (a fault of the grader, not theirs: regrade them), is left blank, which Canvas
  leaves unchanged.
- ``gradebook.csv``: the same students with what the import leaves out: the regrade's status and
  total, the submission time, ``late_hours`` (with ``--due``), the late policy's deduction and the
  score imported.
- ``unmatched.txt``: the graded students no roster row matches, and the roster rows with no handin.

The late policy stays the instructor's: without ``--due`` and ``--late-penalty-per-day`` the total
is imported unchanged. With them, a handin submitted after ``--due`` loses that percentage of its
total for each day or part of a day late; after ``--late-max-days`` days it scores 0. Only handins
with a submission time (Gradescope's metadata) can be late; the others are imported unchanged, and
``gradebook.csv`` says that their time is unknown.
"""
from __future__ import annotations

import argparse
import csv
import math
from datetime import datetime
from pathlib import Path

from autograder import rubric

CANVAS_COLUMNS = ("Student", "ID", "SIS User ID", "SIS Login ID", "Section")
POINTS_POSSIBLE = "Points Possible"
DEFAULT_ASSIGNMENT = "HW4P1"
SCORED_STATUSES = ("ok", "invalid", "timeout")  # crashed: the grader's fault, left blank


def read_csv(path: Path) -> tuple[list[str], list[dict]]:
    if not path.is_file():
        raise SystemExit(f"{path} not found")
    with open(path, newline="", encoding="utf-8-sig") as file:  # Canvas writes a BOM
        reader = csv.DictReader(file)
        return list(reader.fieldnames or []), list(reader)


def read_roster(path: Path) -> tuple[list[dict], dict | None]:
    """(student rows, the Points Possible row or None) of a Canvas Gradebook export."""
    columns, rows = read_csv(path)
    missing = [column for column in CANVAS_COLUMNS if column not in columns]
    if missing:
        raise SystemExit(f"{path} is not a Canvas Gradebook export: it has no "
                         f"{', '.join(missing)} column (export it from Grades > Export)")
    points = next((row for row in rows if row["Student"].strip() == POINTS_POSSIBLE), None)
    students = [row for row in rows if row["Student"].strip() != POINTS_POSSIBLE
                and (row["ID"].strip() or row["SIS User ID"].strip())]
    return students, points


def keys_of(roster_row: dict) -> set[str]:
    """What a roster row matches: ``sid:<SIS User ID>`` and ``email:<address or login name>``."""
    keys = set()
    if roster_row.get("SIS User ID", "").strip():
        keys.add(f"sid:{roster_row['SIS User ID'].strip().lower()}")
    for column in ("SIS Login ID", "Email"):
        login = (roster_row.get(column) or "").strip().lower()
        if login:
            keys.add(f"email:{login}" if "@" in login else f"login:{login}")
    return keys


def keys_of_grade(row: dict) -> list[str]:
    """A grades.csv row's keys, most specific first: its SID, its email, its email's name."""
    email = (row.get("email") or (row["student"] if "@" in row["student"] else "")).strip().lower()
    keys = [f"sid:{sid.strip().lower()}" for sid in (row.get("sid") or "").split(";")
            if sid.strip()]
    if email:
        keys += [f"email:{email}", f"login:{email.split('@')[0]}"]
    return keys


def late_hours(submitted_at: str, due: datetime | None) -> float | None:
    """Hours after ``due`` (0 when on time); None without a due time or a submission time."""
    if due is None or not submitted_at:
        return None
    try:
        submitted = datetime.fromisoformat(submitted_at)
    except ValueError:
        return None
    if (submitted.tzinfo is None) != (due.tzinfo is None):
        return None
    return max(0.0, (submitted - due).total_seconds() / 3600)


def late_deduction(total: float, hours: float | None, per_day: float, max_days: float) -> float:
    """Points the late policy takes from ``total``: ``per_day`` percent per started day late,
    everything after ``max_days`` days."""
    if hours is None or hours <= 0 or per_day <= 0:
        return 0.0
    days = math.ceil(hours / 24)
    if days > max_days:
        return total
    return round(min(total, total * per_day / 100 * days), 2)


def join(roster: list[dict], grades: dict[str, dict], due: datetime | None = None,
         per_day: float = 0.0, max_days: float = math.inf
         ) -> tuple[list[dict], list[str], list[dict]]:
    """(one joined row per roster row, graded students no roster row matches, roster rows with
    no handin)."""
    index: dict[str, int] = {}
    for position, roster_row in enumerate(roster):
        for key in keys_of(roster_row):
            index.setdefault(key, position)
    matched: dict[int, dict] = {}
    unmatched = []
    for student, row in sorted(grades.items()):
        position = next((index[key] for key in keys_of_grade(row) if key in index), None)
        if position is None or position in matched:
            unmatched.append(student if position is None else
                             f"{student} (matches {roster[position]['Student']}, already "
                             f"matched by {matched[position]['student']})")
        else:
            matched[position] = row
    joined = []
    for position, roster_row in enumerate(roster):
        row = matched.get(position)
        entry = {column: roster_row.get(column, "") for column in CANVAS_COLUMNS}
        if row is None:
            joined.append({**entry, "handin": "", "status": "no handin", "total": "",
                           "submitted_at": "", "late_hours": "", "late_deduction": "",
                           "score": ""})
            continue
        total = float(row["total"])
        hours = late_hours(row.get("submitted_at", ""), due)
        deduction = late_deduction(total, hours, per_day, max_days)
        scored = row["status"] in SCORED_STATUSES
        joined.append({**entry, "handin": row["student"], "status": row["status"],
                       "total": row["total"], "submitted_at": row.get("submitted_at", ""),
                       "late_hours": "" if hours is None else round(hours, 2),
                       "late_deduction": deduction if hours is not None else
                       ("time unknown" if due is not None else ""),
                       "score": round(total - deduction, 2) if scored else ""})
    return joined, unmatched, [roster[p] for p in range(len(roster)) if p not in matched]


def write_outputs(out: Path, joined: list[dict], unmatched: list[str], no_handin: list[dict],
                  assignment: str, points_row: dict | None) -> None:
    out.mkdir(parents=True, exist_ok=True)
    with open(out / "canvas_import.csv", "w", newline="", encoding="utf-8") as file:
        writer = csv.writer(file)
        writer.writerow([*CANVAS_COLUMNS, assignment])
        if points_row is not None:
            writer.writerow([POINTS_POSSIBLE, *[""] * (len(CANVAS_COLUMNS) - 1),
                             sum(rubric.RUBRIC.values())])
        for row in joined:
            writer.writerow([*(row[column] for column in CANVAS_COLUMNS), row["score"]])
    with open(out / "gradebook.csv", "w", newline="", encoding="utf-8") as file:
        writer = csv.DictWriter(file, fieldnames=list(joined[0]) if joined else CANVAS_COLUMNS)
        writer.writeheader()
        writer.writerows(joined)
    lines = [f"graded, but no roster row matches ({len(unmatched)}):",
             *(f"  {student}" for student in unmatched),
             f"on the roster, with no handin ({len(no_handin)}):",
             *(f"  {row['Student']} (SIS User ID {row['SIS User ID'] or '-'}, SIS Login ID "
               f"{row['SIS Login ID'] or '-'})" for row in no_handin)]
    (out / "unmatched.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Join the regrade's grades.csv with a Canvas "
                                                 "roster; write a CSV Canvas imports.")
    parser.add_argument("roster", type=Path, help="Canvas's Gradebook export (CSV)")
    parser.add_argument("--grades", type=Path, default=Path("regrade/grades.csv"))
    parser.add_argument("--out", type=Path, default=Path("gradebook"))
    parser.add_argument("--assignment", default=DEFAULT_ASSIGNMENT,
                        help="the assignment's column as Canvas names it, e.g. 'HW4P1 (12345)'")
    parser.add_argument("--due", type=datetime.fromisoformat,
                        help="the deadline, ISO 8601 with its UTC offset (e.g. "
                             "2026-11-21T00:00:00-05:00): late_hours are counted from it")
    parser.add_argument("--late-penalty-per-day", type=float, default=0.0,
                        help="percent of the total taken per started day late (needs --due)")
    parser.add_argument("--late-max-days", type=float, default=math.inf,
                        help="days late after which the score is 0 (needs --due)")
    args = parser.parse_args(argv)
    if args.late_penalty_per_day and args.due is None:
        raise SystemExit("--late-penalty-per-day needs --due (the deadline it counts from)")
    roster, points_row = read_roster(args.roster)
    _, rows = read_csv(args.grades)
    grades = {row["student"] + (f"#{row['version']}" if row.get("versions_graded") == "all"
                                else ""): row for row in rows if row.get("student")}
    joined, unmatched, no_handin = join(roster, grades, args.due, args.late_penalty_per_day,
                                        args.late_max_days)
    write_outputs(args.out, joined, unmatched, no_handin, args.assignment, points_row)
    print(f"{len(joined) - len(no_handin)} of {len(roster)} roster students graded; "
          f"{len(unmatched)} graded students unmatched, {len(no_handin)} roster rows with no "
          f"handin (see {args.out / 'unmatched.txt'}); import {args.out / 'canvas_import.csv'}")


if __name__ == "__main__":
    main()
