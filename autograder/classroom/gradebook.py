"""Into the gradebook: the regrade's grades.csv joined with a Canvas roster, as a CSV that Canvas's
Gradebook imports as it is, and every case the join could not settle listed for the staff.

    python -m autograder.classroom.gradebook ROSTER [--grades regrade/grades.csv] [--out gradebook]
        [--assignment "HW4P1 (12345)"] [--domain andrew.cmu.edu ...] [--missing blank|zero]
        [--due 2026-11-21T00:00:00-05:00 | --due 2026-11-21T00:00 --timezone America/New_York]
        [--extensions extensions.csv] [--grace-minutes 15]
        [--late-penalty-per-day 10 --late-max-days 3]
    make gradebook ROSTER=canvas_export.csv [GRADES=regrade/grades.csv] [ARGS='--due ...']

``ROSTER`` is Canvas's Gradebook export (Grades > Export): the columns ``Student``, ``ID``,
``SIS User ID``, ``SIS Login ID`` and ``Section`` (then one per assignment; a second row
``Points Possible`` may follow the header).

**The join.** Every member of a grades.csv row (each submitter of a Gradescope group, else the one
student) is matched to a roster row by the first of these rules that finds exactly one:

1. ``SID``: the member's SID is the roster's ``SIS User ID``;
2. ``email``: the member's email is the roster's ``SIS Login ID`` or ``Email``, ignoring case;
3. ``login``: only for an email of a course domain given with ``--domain`` (none by default): its
   name before the @ is the roster's ``SIS Login ID`` (or the name of a roster address of a course
   domain). An address of another domain (an auditor's gmail.com) never matches by its name.

A roster row reached by one grade row gets that row's score, in every member's row for a group.
A roster row reached by two different grade rows (a student in a group's submission and in their
own, or two addresses of one student) is imported for neither and listed with both; so are the
roster rows of a member whose later rules reach another student than the first did (a SID typed
for someone else: the grade is nobody's until that is settled). Every grade member no rule
matches (auditors, dropped students) and every roster row with no handin is listed with the rules
tried. A roster row with no handin is left blank (Canvas leaves a blank unchanged),
or 0 with ``--missing zero``; a crashed grading (a fault of the grader, not the student's: regrade
them) is always left blank. With ``versions_graded`` = all, each student's highest version is
imported and the others are listed.

**Lateness.** Without ``--due``, totals are imported unchanged. ``--due`` takes an ISO 8601 time
with its UTC offset; a time without one is refused, unless ``--timezone NAME`` (an IANA name, such
as America/New_York) says once where every time without an offset (``--due`` and the extensions')
is. ``--extensions FILE`` is a CSV with the columns ``student`` (a SIS User ID, SIS Login ID or
email of the roster), and ``due`` (a new deadline) or ``hours`` (hours added to ``--due``), one of
the two per row. A handin submitted at most ``--grace-minutes`` after its deadline is on time;
otherwise it is late by the hours since the deadline, and with ``--late-penalty-per-day`` loses
that percentage of its total for each started day late; after ``--late-max-days`` days it scores 0
(with or without a daily penalty).
A group's lateness is counted for each member against that member's own deadline. Only handins
with a submission time (Gradescope's metadata) can be late: an Autolab download carries none
(Autolab keeps lateness in its own gradebook), so such rows say "time unknown", are imported
without a deduction, and the summary says what to do.

``OUT`` receives:

- ``canvas_import.csv``: ``Student, ID, SIS User ID, SIS Login ID, Section`` copied from the roster
  and one column for this assignment, ``--assignment`` (give it as Canvas names it, ``Name (id)``,
  to fill the existing assignment; a name alone makes Canvas create one). Canvas takes every other
  column for an assignment, so nothing else is in this file. Canvas matches its rows by ``ID``,
  so a name or login written with a leading apostrophe (``spreadsheet.py``) still reaches its
  student.
- ``gradebook.csv``: the same students with what the import leaves out: the grade rows that
  reached each (``handin``), the rule that matched (``matched_by``), the regrade's status and total,
  the submission time, the deadline applied, ``late_hours``, the late deduction, the lateness rule
  applied (``late_rule``) and the score imported.
- ``unmatched.txt``: every case not imported as it is (conflicts, grade rows with no roster row,
  roster rows with no handin, crashed gradings, versions not imported), each with the rule that
  did or did not match and the next step.
- ``summary.txt``: the counts, the lateness, and the next steps (also printed).

Every CSV goes through ``autograder/classroom/spreadsheet.py``, so no cell runs as a formula.
"""
from __future__ import annotations

import argparse
import math
from dataclasses import dataclass
from pathlib import Path

from autograder.judging import rubric
from autograder.classroom import spreadsheet
from autograder.classroom.handins import members_of
from autograder.classroom.late_policy import (DUE_EXAMPLE, Lateness, lateness, parse_time,
                                             read_extensions, time_zone)
from autograder.classroom.roster_match import match, roster_index
from autograder.classroom.grades_csv import row_key
from autograder.judging.report import Status

CANVAS_COLUMNS = ("Student", "ID", "SIS User ID", "SIS Login ID", "Section")
REPORT_COLUMNS = (*CANVAS_COLUMNS, "handin", "matched_by", "status", "total", "submitted_at",
                  "due", "late_hours", "late_deduction", "late_rule", "score")
GRADES_COLUMNS = ("student", "status", "total")  # of grades.csv, read here
POINTS_POSSIBLE = "Points Possible"
DEFAULT_ASSIGNMENT = "HW4P1"
# the grading statuses whose total is the student's score; crashed is the grader's fault, left blank
SCORED_STATUSES = frozenset(Status) - {Status.CRASHED}
MISSING_CHOICES = ("blank", "zero")
NO_HANDIN, CONFLICT = "no handin", "conflict"


def read_roster(path: Path) -> tuple[list[dict], dict | None]:
    """(student rows, the Points Possible row or None) of a Canvas Gradebook export."""
    columns, rows = spreadsheet.read_csv(path)
    missing = [column for column in CANVAS_COLUMNS if column not in columns]
    if missing:
        raise SystemExit(f"{path} is not a Canvas Gradebook export: it has no "
                         f"{', '.join(missing)} column (export it from Grades > Export)")
    points = next((row for row in rows if row["Student"].strip() == POINTS_POSSIBLE), None)
    students = [row for row in rows if row["Student"].strip() != POINTS_POSSIBLE
                and (row["ID"].strip() or row["SIS User ID"].strip())]
    return students, points


def read_grades(path: Path) -> list[dict]:
    """The rows of a regrade's grades.csv; another file (the platform's own score export), or a
    total that is not a number, is refused naming the fix."""
    columns, rows = spreadsheet.read_csv(path)
    missing = [column for column in GRADES_COLUMNS if column not in columns]
    if missing:
        raise SystemExit(f"{path} has no {', '.join(missing)} column: give --grades the "
                         f"grades.csv that `make regrade` writes (not the platform's own export)")
    for line, row in enumerate(rows, start=2):
        try:
            float(row["total"])
        except ValueError:
            if row["student"]:
                raise SystemExit(f"{path} line {line}: total {row['total']!r} of "
                                 f"{row['student']} is not a number: grade it again with `make "
                                 f"regrade ... ARGS='--only {row['student']}'`") from None
    return [row for row in rows if row["student"]]


def latest_versions(rows: list[dict]) -> tuple[list[dict], list[dict]]:
    """(the rows to import, the rows not imported): of a student graded with
    ``versions_graded`` = all, only the highest version is imported."""
    highest: dict[str, dict] = {}
    for row in rows:
        if row.get("versions_graded") == "all" and row.get("version", "").isdigit():
            best = highest.get(row["student"])
            if best is None or int(row["version"]) > int(best["version"]):
                highest[row["student"]] = row
    kept, left = [], []
    for row in rows:
        imported = (row.get("versions_graded") != "all"
                    or highest.get(row["student"], row) is row)
        (kept if imported else left).append(row)
    return kept, left


@dataclass
class Join:
    rows: list[dict]  # one per roster row, REPORT_COLUMNS
    conflicts: list[tuple[dict, list[tuple[dict, str]]]]  # roster row, [(grade row, rule)]
    unmatched: list[tuple[dict, dict, str]]  # grade row, member, the rules tried
    no_handin: list[dict]  # roster rows
    crashed: list[tuple[dict, dict]]  # roster row, grade row
    not_imported: list[dict]  # grade rows of earlier versions


def join(roster: list[dict], grades: list[dict], domains: tuple[str, ...] = (),
         policy: Lateness | None = None, missing: str = "blank") -> Join:
    """Match every member of every grade row to the roster (see the module docstring)."""
    policy = policy or Lateness()
    grades, not_imported = latest_versions(grades)
    index = roster_index(roster, domains)
    claims: dict[int, dict[int, tuple[dict, str]]] = {}  # position -> {id(grade row): claim}
    unmatched, contested = [], set()  # contested: reached by a member whose rules disagree
    for row in grades:
        for member in members_of(row):
            positions, rule = match(member, index, domains)
            if not positions:
                unmatched.append((row, member, rule))
            for position in positions:
                claims.setdefault(position, {}).setdefault(id(row), (row, rule))
            if len(positions) > 1:
                contested.update(positions)
    result = Join([], [], unmatched, [], [], not_imported)
    for position, roster_row in enumerate(roster):
        entry = {column: roster_row.get(column, "") for column in CANVAS_COLUMNS}
        reached = list(claims.get(position, {}).values())
        if len(reached) != 1 or position in contested:
            status = CONFLICT if reached else NO_HANDIN
            if reached:
                result.conflicts.append((roster_row, reached))
            else:
                result.no_handin.append(roster_row)
            result.rows.append({**entry, "status": status,
                                "handin": ", ".join(row_key(row) for row, _ in reached),
                                "matched_by": ", ".join(rule for _, rule in reached),
                                "score": 0 if status == NO_HANDIN and missing == "zero" else ""})
            continue
        row, rule = reached[0]
        total = float(row["total"])
        deadline = policy.extensions.get(position, policy.due)
        hours, deduction, late_rule = lateness(row.get("submitted_at", ""), deadline,
                                               position in policy.extensions, total, policy)
        scored = row["status"] in SCORED_STATUSES
        if not scored:
            result.crashed.append((roster_row, row))
        result.rows.append({**entry, "handin": row_key(row), "matched_by": rule,
                            "status": row["status"], "total": row["total"],
                            "submitted_at": row.get("submitted_at", ""),
                            "due": deadline.isoformat() if deadline else "",
                            "late_hours": "" if hours is None else round(hours, 2),
                            "late_deduction": deduction if hours is not None else "",
                            "late_rule": late_rule,
                            "score": round(total - deduction, 2) if scored else ""})
    return result


def roster_name(roster_row: dict) -> str:
    return (f"{roster_row['Student']} (SIS User ID {roster_row['SIS User ID'] or '-'}, "
            f"SIS Login ID {roster_row['SIS Login ID'] or '-'})")


def unmatched_text(result: Join, missing: str) -> str:
    """unmatched.txt: every case not imported as it is, with the rule and the next step."""
    lines = [f"roster rows reached by two or more grade rows, or by a member whose SID and "
             f"email reach different rows: imported for none ({len(result.conflicts)}):",
             *(f"  {roster_name(roster_row)}: "
               + "; ".join(f"{row_key(row)} by {rule}" for row, rule in reached)
               for roster_row, reached in result.conflicts),
             *(["  next: decide which handin counts (a student in a group's submission and in "
                "their own, two addresses of one student) and enter that grade in Canvas by "
                "hand, or fix the submissions and export again"] if result.conflicts else []),
             f"graded, but no roster row matches ({len(result.unmatched)}):",
             *(f"  {member['email'] or member['sid'] or member['name'] or '?'} ({row_key(row)}"
               + (f", {member['name']}" if member["name"] else "") + f"): {rule}"
               for row, member, rule in result.unmatched),
             *(["  next: auditors and dropped students need nothing; a student of the course "
                "who handed in under another address is matched by --domain (the course's own "
                "email domain) or by their SID"] if result.unmatched else []),
             f"on the roster, with no handin ({len(result.no_handin)}):",
             *(f"  {roster_name(roster_row)}: no grade row has this SID, email or login"
               for roster_row in result.no_handin),
             *(["  imported as " + ("0 (--missing zero)" if missing == "zero" else
                                    "blank, which Canvas leaves unchanged (--missing zero "
                                    "imports 0)")] if result.no_handin else []),
             f"graded but left blank, the grading crashed ({len(result.crashed)}):",
             *(f"  {roster_name(roster_row)}: {row_key(row)}"
               for roster_row, row in result.crashed),
             *(["  next: read the row's notes in grades.csv, then grade them again with "
                "make regrade HANDINS=... ARGS='--only " + " ".join(
                    row["student"] for _, row in result.crashed) + "'"]
               if result.crashed else [])]
    if result.not_imported:
        lines += [f"earlier versions, not imported (grades.csv holds every version; each "
                  f"student's highest is imported) ({len(result.not_imported)}):",
                  *(f"  {row_key(row)}" for row in result.not_imported)]
    return "\n".join(lines) + "\n"


def summary_text(result: Join, policy: Lateness, out: Path) -> str:
    """summary.txt: the counts, the lateness and the next steps."""
    imported = [row for row in result.rows if row["score"] != ""]
    graded = [row for row in result.rows if row["status"] not in (NO_HANDIN, CONFLICT)]
    late = [row for row in graded if row["late_deduction"] not in ("", 0, 0.0)]
    unknown = [row for row in graded if row["late_rule"].startswith("time unknown")]
    untimed = [row for row in graded if not row["submitted_at"]]
    lines = [f"{len(result.rows)} roster rows: {len(graded)} reached by one grade row, "
             f"{len(imported)} with a score to import; {len(result.conflicts)} conflicts "
             f"(imported for neither), {len(result.no_handin)} with no handin, "
             f"{len(result.crashed)} crashed; {len(result.unmatched)} grade members reach no "
             f"roster row"]
    if policy.due is not None:
        lines.append(f"lateness from {policy.due.isoformat()} ({len(policy.extensions)} "
                     f"extensions, {policy.grace_minutes:g}-minute grace): {len(late)} late with "
                     f"a deduction, {len(unknown)} whose lateness is unknown")
    else:
        lines.append("lateness not checked (no --due): every total is imported unchanged")
    if untimed:
        lines.append(f"  {len(untimed)} handin{' has' if len(untimed) == 1 else 's have'} no "
                     f"submission time: an Autolab download "
                     f"carries none (Autolab records lateness, and applies its own late policy "
                     f"and grace days, only in its own gradebook), so they are imported without "
                     f"a late deduction. next: look up the late ones in Autolab's gradebook for "
                     f"this assessment and enter their penalty in Canvas by hand")
    if result.conflicts or result.unmatched or result.no_handin or result.crashed:
        lines.append(f"next: read {out / 'unmatched.txt'}: each case, the rule that did or did "
                     f"not match, and what to do")
    lines.append(f"then: check {out / 'gradebook.csv'} and import {out / 'canvas_import.csv'} "
                 f"in Canvas (Grades > Import)")
    return "\n".join(lines) + "\n"


def write_outputs(out: Path, result: Join, assignment: str, points_row: dict | None,
                  missing: str, policy: Lateness) -> str:
    """Write the four files of ``out``; returns the summary."""
    out.mkdir(parents=True, exist_ok=True)
    points = ([[POINTS_POSSIBLE, *[""] * (len(CANVAS_COLUMNS) - 1), sum(rubric.RUBRIC.values())]]
              if points_row is not None else [])
    spreadsheet.write_csv(out / "canvas_import.csv", [*CANVAS_COLUMNS, assignment],
                          [*points, *([row[column] for column in CANVAS_COLUMNS] + [row["score"]]
                                      for row in result.rows)])
    spreadsheet.write_csv(out / "gradebook.csv", REPORT_COLUMNS, result.rows)
    (out / "unmatched.txt").write_text(unmatched_text(result, missing), encoding="utf-8")
    summary = summary_text(result, policy, out)
    (out / "summary.txt").write_text(summary, encoding="utf-8")
    return summary


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Join the regrade's grades.csv with a Canvas "
                                                 "roster; write a CSV Canvas imports.")
    parser.add_argument("roster", type=Path, help="Canvas's Gradebook export (CSV)")
    parser.add_argument("--grades", type=Path, default=Path("regrade/grades.csv"))
    parser.add_argument("--out", type=Path, default=Path("gradebook"))
    parser.add_argument("--assignment", default=DEFAULT_ASSIGNMENT,
                        help="the assignment's column as Canvas names it, e.g. 'HW4P1 (12345)'")
    parser.add_argument("--domain", action="append", default=[], metavar="DOMAIN",
                        help="the course's own email domain (repeat for several): an address of "
                             "it also matches the roster login before its @; none by default")
    parser.add_argument("--missing", choices=MISSING_CHOICES, default="blank",
                        help="what a roster row with no handin imports (default: blank, which "
                             "Canvas leaves unchanged)")
    parser.add_argument("--due", help=f"the deadline, ISO 8601 with its UTC offset (e.g. "
                                      f"{DUE_EXAMPLE}), or without one and --timezone")
    parser.add_argument("--timezone", metavar="NAME",
                        help="the time zone of every time given without a UTC offset (--due, "
                             "the extensions), e.g. America/New_York")
    parser.add_argument("--extensions", type=Path, metavar="FILE",
                        help="CSV: student (SIS User ID, SIS Login ID or email), due or hours")
    parser.add_argument("--grace-minutes", type=float, default=0.0,
                        help="a handin at most this late is on time (needs --due)")
    parser.add_argument("--late-penalty-per-day", type=float, default=0.0,
                        help="percent of the total taken per started day late (needs --due)")
    parser.add_argument("--late-max-days", type=float, default=math.inf,
                        help="days late after which the score is 0 (needs --due)")
    args = parser.parse_args(argv)
    if args.due is None and (args.late_penalty_per_day or args.grace_minutes or args.extensions
                             or args.late_max_days != math.inf):
        raise SystemExit("--late-penalty-per-day, --late-max-days, --grace-minutes and "
                         "--extensions need --due (the deadline they count from)")
    timezone = time_zone(args.timezone)
    roster, points_row = read_roster(args.roster)
    due = parse_time(args.due, timezone, "--due") if args.due is not None else None
    policy = Lateness(due, read_extensions(args.extensions, roster, due, timezone)
                      if args.extensions else {}, args.grace_minutes,
                      args.late_penalty_per_day, args.late_max_days)
    domains = tuple(domain.strip().lower().lstrip("@") for domain in args.domain)
    grades = read_grades(args.grades)
    result = join(roster, grades, domains, policy, args.missing)
    print(write_outputs(args.out, result, args.assignment, points_row, args.missing, policy),
          end="")


if __name__ == "__main__":
    main()
