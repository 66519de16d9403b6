"""Into the gradebook: the regrade's grades.csv joined with a Canvas roster, as a CSV that Canvas's
Gradebook imports as it is, and every case the join could not settle listed for the staff.

    python -m autograder.classroom.gradebook [ROSTER] [--grades regrade/grades.csv]
        [--out gradebook] [--assignment "HW4P1 (12345)"] [--domain andrew.cmu.edu ...]
        [--missing blank|zero]
        [--aliases aliases.csv] [--inactive STUDENT ...] [--several-submissions conflict|latest]
        [--due 2026-11-21T00:00:00-05:00 | --due 2026-11-21T00:00 --timezone America/New_York]
        [--extensions extensions.csv] [--sections sections.csv] [--days-grace grace.csv]
        [--grace-minutes 15]
        [--late-penalty-per-day 10 --late-max-days 3] [--opened TIME] [--exported TIME]
    make gradebook ROSTER=canvas_export.csv [GRADES=regrade/grades.csv] [ARGS='--due ...']

``ROSTER`` is Canvas's Gradebook export (Grades > Export): the columns ``Student``, ``ID``,
``SIS User ID``, ``SIS Login ID`` and ``Section`` (then one per assignment; a second row
``Points Possible`` may follow the header).

**The join.** Every member of a grades.csv row (each submitter of a Gradescope group, else the one
student) is matched to a roster row by the first of these rules that finds exactly one:

1. ``SID``: the member's SID is the roster's ``SIS User ID``;
2. ``email``: the member's email is the roster's ``SIS Login ID`` or ``Email``, ignoring case;
3. ``alias``: only with ``--aliases FILE`` (columns ``address``, ``student``: a SIS User ID, SIS
   Login ID or email of the roster): the member's email is an address the TA gave that student;
4. ``login``: only for an email of a course domain given with ``--domain`` (none by default): its
   name before the @ is the roster's ``SIS Login ID`` (or the name of a roster address of a course
   domain). An address of another domain (an auditor's gmail.com) never matches by its name.

A roster row reached by one grade row gets that row's score, in every member's row for a group. A
roster row reached by two different grade rows (a student in a group's submission and in their own,
or two addresses of one student) is imported for neither and listed with both; so are the roster
rows of a member whose later rules reach another student than the first did (a SID typed for
someone else: the grade is nobody's until that is settled); with ``--several-submissions latest``,
a roster row reached by several submissions, each with a submission time, takes the latest
submitted, as Gradescope counts a student's latest submission (listed). Every grade member no rule
matches (auditors, dropped students) and every roster row with no handin is listed with the rules
tried. A roster row with no handin is left blank (Canvas leaves a blank unchanged), or 0 with
``--missing zero``, except Canvas's Test Student and the students named with ``--inactive``
(withdrawn), always left blank and listed; a crashed grading (a fault of the grader, not the
student's: regrade them) is always left blank. With ``versions_graded`` = all, each student's
highest version is imported and the others are listed.

**Lateness.** Without ``--due``, totals are imported unchanged. ``--due`` takes an ISO 8601 time
with its UTC offset; a time without one is refused, unless ``--timezone NAME`` (an IANA name, such
as America/New_York) says once where every time without an offset (``--due`` and the extensions')
is. ``--extensions FILE`` is a CSV with the columns ``student`` (a SIS User ID, SIS Login ID or
email of the roster), and one of ``due`` (a new deadline), ``hours`` (elapsed hours added to
``--due``) or ``days`` (calendar days, as Autolab's extensions count them: the deadline's
wall-clock time that many days later in ``--timezone``, which days need). ``--sections FILE``
(``section``, as the roster's ``Section`` column names it, case aside; ``due``; and where the
section's policy differs ``grace_minutes``, ``late_penalty_per_day``, ``late_max_days``) gives
each section's students that deadline ("Section B deadline" in ``late_rule``) and policy; an
extension counts from the student's section's deadline. ``--days-grace FILE``
(``student``, ``grace_days``) gives each student's grace days left, as Autolab's gradebook shows
them: each started day late spends one before the daily penalty. A handin submitted at most
``--grace-minutes`` after its deadline is on time; otherwise it is late by the hours since the
deadline, and with ``--late-penalty-per-day`` loses that percentage of its total for each started
day late; after ``--late-max-days`` days it scores 0 (with or without a daily penalty). A group's
lateness is counted for each member against that member's own deadline. Only handins with a
submission time (Gradescope's metadata, or an Autolab zip's entry times read by the regrade's
``--autolab-zone``) can be late; the others say "time unknown", are imported without a deduction,
and the summary says what to do. A time that cannot be right, after the export (``--exported``;
default: now) or before the assignment opened (``--opened``), is never scored: its cell is left
blank and listed.

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
  roster rows with no handin or left out, impossible times, crashed gradings, submissions chosen
  as the latest, versions not imported, addresses left out of Autolab's import), each with the
  rule that did or did not match and the command or file that settles it.
- ``autolab_import.csv``: Autolab's bulk grade import (no header: each member's email, then the
  points of each problem in rubric order), from grades.csv alone; the only file, with
  unmatched.txt, when no ROSTER is given (an Autolab-only course).
- ``summary.txt``: the counts, the lateness, and the next steps (also printed).

Every CSV goes through ``autograder/classroom/spreadsheet.py``, so no cell runs as a formula.
"""
from __future__ import annotations

import argparse
import math
from dataclasses import dataclass, field
from pathlib import Path

from autograder.judging.scoring import rubric
from autograder.classroom import spreadsheet
from autograder.classroom.handins import GRADESCOPE_METADATA, members_of, submitted_time
from autograder.classroom.late_policy import (DUE_EXAMPLE, Lateness, impossible_time, lateness,
                                             parse_time, read_extensions, read_grace_days,
                                             read_sections, time_zone)
from autograder.classroom.roster_match import match, roster_index, student_position
from autograder.classroom import adjustments
from autograder.classroom.grades_csv import read_settled, row_key, write_rows
from autograder.judging.scoring.report import Status

CANVAS_COLUMNS = ("Student", "ID", "SIS User ID", "SIS Login ID", "Section")
REPORT_COLUMNS = (*CANVAS_COLUMNS, "handin", "matched_by", "status", "total", "adjusted_total",
                  "adjustments", "submitted_at", "due", "late_hours", "late_deduction",
                  "late_rule", "score")
GRADES_COLUMNS = ("student", "status", "total")  # of grades.csv, read here
POINTS_POSSIBLE = "Points Possible"
DEFAULT_ASSIGNMENT = "HW4P1"
# the grading statuses whose total is the student's score; crashed is the grader's fault, left blank
SCORED_STATUSES = frozenset(Status) - {Status.CRASHED}
MISSING_CHOICES = ("blank", "zero")
SEVERAL_CHOICES = ("conflict", "latest")  # a roster row reached by several submissions
NO_HANDIN, CONFLICT, LEFT_OUT = "no handin", "conflict", "left out"
AUTOLAB_IMPORT = "autolab_import.csv"
ADJUSTMENT = "Adjustment"  # Autolab's last problem, where a total is adjusted
# Canvas's Student View user, in every course's export (as "Student, Test" or "Test Student")
TEST_STUDENT_NAMES = frozenset({"Student, Test", "Test Student"})


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
    left_out: list[tuple[dict, str]] = field(default_factory=list)  # roster row, who it is
    impossible: list[tuple[dict, dict, str]] = field(default_factory=list)  # roster, grade, why
    latest_taken: list[tuple[dict, list[dict]]] = field(default_factory=list)  # roster, rows


def read_aliases(path: Path, roster: list[dict]) -> dict[str, int]:
    """{address, lower case: roster position} from the TA's aliases CSV (``address``,
    ``student``: a SIS User ID, SIS Login ID or email of the roster)."""
    columns, rows = spreadsheet.read_csv(path)
    if not {"address", "student"} <= set(columns):
        raise SystemExit(f"{path}: an aliases file has the columns address and student (it has "
                         f"{', '.join(columns) or 'none'})")
    index = roster_index(roster, ())
    aliases: dict[str, int] = {}
    for line, row in enumerate(rows, start=2):
        address = row["address"].strip().lower()
        if "@" not in address or address in aliases:
            raise SystemExit(f"{path} line {line}: address {row['address']!r} is "
                             f"{'given twice' if address in aliases else 'not an email address'}")
        aliases[address] = student_position(index, row["student"], f"{path} line {line}")
    return aliases


def left_out_of_missing(roster: list[dict], inactive: set[int]) -> dict[int, str]:
    """{roster position: who it is} of the rows --missing zero never scores: Canvas's Test
    Student and the inactive enrollments the TA names (--inactive)."""
    return {position: ("Canvas's Test Student" if row["Student"].strip() in TEST_STUDENT_NAMES
                       else "an inactive enrollment (--inactive)")
            for position, row in enumerate(roster)
            if row["Student"].strip() in TEST_STUDENT_NAMES or position in inactive}


def latest_of(reached: list[tuple[dict, str]]) -> tuple[dict, str] | None:
    """The latest submitted of several grade rows reaching one student, as Gradescope counts a
    student's latest submission; None unless each has a submission time and one is latest."""
    times = [submitted_time(row.get("submitted_at", "")) for row, _ in reached]
    if None in times or times.count(max(times)) > 1:
        return None
    return reached[times.index(max(times))]


def join(roster: list[dict], grades: list[dict], domains: tuple[str, ...] = (),
         policy: Lateness | None = None, missing: str = "blank",
         aliases: dict[str, int] | None = None, inactive: set[int] | None = None,
         several: str = "conflict") -> Join:
    """Match every member of every grade row to the roster (see the module docstring)."""
    policy = policy or Lateness()
    grades, not_imported = latest_versions(grades)
    index = roster_index(roster, domains)
    for address, position in (aliases or {}).items():
        index[f"alias:{address}"] = [position]
    not_students = left_out_of_missing(roster, inactive or set())
    claims: dict[int, dict[int, tuple[dict, str]]] = {}  # position -> {id(grade row): claim}
    unmatched, contested = [], set()  # contested: reached by a member whose rules disagree
    for row in grades:
        for member in members_of(row):
            positions, rule = match(member, index, domains, bool(aliases))
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
        latest = (latest_of(reached) if several == "latest" and len(reached) > 1
                  and position not in contested else None)
        if latest is not None:
            result.latest_taken.append((roster_row, [row for row, _ in reached]))
            reached = [(latest[0], f"{latest[1]} (the latest of {len(reached)} submissions, "
                                   f"--several-submissions latest)")]
        if len(reached) != 1 or position in contested:
            status = CONFLICT if reached else LEFT_OUT if position in not_students else NO_HANDIN
            if reached:
                result.conflicts.append((roster_row, reached))
            elif status == LEFT_OUT:
                result.left_out.append((roster_row, not_students[position]))
            else:
                result.no_handin.append(roster_row)
            result.rows.append({**entry, "status": status,
                                "handin": ", ".join(row_key(row) for row, _ in reached),
                                "matched_by": ", ".join(rule for _, rule in reached),
                                "score": 0 if status == NO_HANDIN and missing == "zero" else ""})
            continue
        (row, rule), = reached
        total = float(row.get("adjusted_total") or row["total"])  # the staff's adjustments in
        deadline, whose, own = policy.of_student(position)
        hours, deduction, late_rule = lateness(row.get("submitted_at", ""), deadline, whose,
                                               total, own, policy.grace_days.get(position, 0))
        why_not = impossible_time(row.get("submitted_at", ""), policy)
        if why_not:
            result.impossible.append((roster_row, row, why_not))
            hours, late_rule = None, f"{why_not}: left for the staff"
        scored = row["status"] in SCORED_STATUSES and not why_not
        if row["status"] not in SCORED_STATUSES:
            result.crashed.append((roster_row, row))
        result.rows.append({**entry, "handin": row_key(row), "matched_by": rule,
                            "autolab": bool(row.get("version")),
                            "status": row["status"], "total": row["total"],
                            "adjusted_total": row.get("adjusted_total", ""),
                            "adjustments": row.get("adjustments", ""),
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
                "hand, or fix the submissions and export again; to count each student's latest "
                "submission as Gradescope does, run make gradebook again with ARGS='"
                "--several-submissions latest'"] if result.conflicts else []),
             f"graded, but no roster row matches ({len(result.unmatched)}):",
             *(f"  {member['email'] or member['sid'] or member['name'] or '?'} ({row_key(row)}"
               + (f", {member['name']}" if member["name"] else "") + f"): {rule}"
               for row, member, rule in result.unmatched),
             *(["  next: auditors and dropped students need nothing; a student of the course "
                "who handed in under another address is matched by --domain (the course's own "
                "email domain), by their SID, or by a line 'address,student' in an --aliases "
                "file (student: their SIS User ID, SIS Login ID or email)"]
               if result.unmatched else []),
             f"on the roster, with no handin ({len(result.no_handin)}):",
             *(f"  {roster_name(roster_row)}: no grade row has this SID, email or login"
               for roster_row in result.no_handin),
             *(["  imported as " + ("0 (--missing zero)" if missing == "zero" else
                                    "blank, which Canvas leaves unchanged (--missing zero "
                                    "imports 0)"),
                "  next: a student who handed in under another address: a line in an --aliases "
                "file; one who withdrew: --inactive <their SIS User ID>"]
               if result.no_handin else []),
             f"left out of --missing zero, imported blank ({len(result.left_out)}):",
             *(f"  {roster_name(roster_row)}: {who}" for roster_row, who in result.left_out),
             *(["  next: nothing; a student named by --inactive by mistake: run make gradebook "
                "again without them"] if result.left_out else []),
             f"submission times that cannot be right, left blank for the staff "
             f"({len(result.impossible)}):",
             *(f"  {roster_name(roster_row)}: {row_key(row)}: {why}"
               for roster_row, row, why in result.impossible),
             *(["  next: look the handin up on the platform; enter its grade in Canvas by hand, "
                "or correct --opened or --exported (the export's time) and run make gradebook "
                "again"] if result.impossible else []),
             f"graded but left blank, the grading crashed ({len(result.crashed)}):",
             *(f"  {roster_name(roster_row)}: {row_key(row)}"
               for roster_row, row in result.crashed),
             *(["  next: read the row's notes in grades.csv, then grade them again with "
                "make regrade HANDINS=... ARGS='--only " + " ".join(
                    row["student"] for _, row in result.crashed) + "'"]
               if result.crashed else [])]
    if result.latest_taken:
        lines += [f"reached by several submissions, the latest imported (--several-submissions "
                  f"latest) ({len(result.latest_taken)}):",
                  *(f"  {roster_name(roster_row)}: " + ", ".join(
                      f"{row_key(row)} at {row.get('submitted_at', '')}" for row in rows)
                    for roster_row, rows in result.latest_taken),
                  "  next: check each; without --several-submissions latest they are conflicts"]
    if result.not_imported:
        lines += [f"earlier versions, not imported (grades.csv holds every version; each "
                  f"student's highest is imported) ({len(result.not_imported)}):",
                  *(f"  {row_key(row)}" for row in result.not_imported),
                  "  next: nothing (make regrade without ARGS='--versions all' grades only each "
                  "student's highest)"]
    return "\n".join(lines) + "\n"


def summary_text(result: Join, policy: Lateness, out: Path) -> str:
    """summary.txt: the counts, the lateness and the next steps."""
    imported = [row for row in result.rows if row["score"] != ""]
    graded = [row for row in result.rows if row["status"] not in (NO_HANDIN, CONFLICT, LEFT_OUT)]
    late = [row for row in graded if row["late_deduction"] not in ("", 0)]  # 0.0 == 0
    unknown = [row for row in graded if row["late_rule"].startswith("time unknown")]
    untimed = [row for row in graded if not row["submitted_at"]]
    autolab = [row for row in untimed if row["autolab"]]
    lines = [f"{len(result.rows)} roster rows: {len(graded)} reached by one grade row, "
             f"{len(imported)} with a score to import; {len(result.conflicts)} conflicts "
             f"(imported for neither), {len(result.no_handin)} with no handin, "
             + (f"{len(result.left_out)} left out (Canvas's Test Student, --inactive), "
                if result.left_out else "") +
             f"{len(result.crashed)} crashed; {len(result.unmatched)} grade members reach no "
             f"roster row"]
    adjusted = [row for row in graded if row.get("adjustments")]
    if adjusted:
        lines.append(f"{len(adjusted)} scored from the total after the staff's adjustments "
                     f"(adjustments.csv beside grades.csv; gradebook.csv's adjustments column)")
    if policy.due is not None:
        sections = sorted({(section.label, section.due.isoformat())
                           for section in policy.sections.values()})
        lines.append(f"lateness from {policy.due.isoformat()} ("
                     + "".join(f"{label} from {due}, " for label, due in sections)
                     + f"{len(policy.extensions)} extensions, {policy.grace_minutes:g}-minute "
                       f"grace): {len(late)} late with a deduction, {len(unknown)} whose "
                       f"lateness is unknown")
    else:
        lines.append("lateness not checked (no --due): every total is imported unchanged")
    if autolab:
        lines.append(f"  {len(autolab)} Autolab handin{' has' if len(autolab) == 1 else 's have'}"
                     f" no submission time: an Autolab download holds none but the download "
                     f"zip's entry times (make regrade ... ARGS='--autolab-zone <the server's "
                     f"zone>' reads them), so they are imported without a late deduction. next: "
                     f"read the zip's times, or look up the late ones in Autolab's gradebook and "
                     f"enter their penalty in Canvas by hand")
    if len(untimed) > len(autolab):
        others = len(untimed) - len(autolab)
        lines.append(f"  {others} handin{' has' if others == 1 else 's have'} no submission "
                     f"time in the download (a folder {GRADESCOPE_METADATA} does not list, or "
                     f"an archive named by student alone), so imported without a late "
                     f"deduction. next: look their time up on the platform")
    if result.impossible:
        lines.append(f"  {len(result.impossible)} submission time"
                     f"{' cannot' if len(result.impossible) == 1 else 's cannot'} be right "
                     f"(after the export, or before the assignment opened): left blank for the "
                     f"staff, listed in {out / 'unmatched.txt'}")
    if (result.conflicts or result.unmatched or result.no_handin or result.crashed
            or result.impossible):
        lines.append(f"next: read {out / 'unmatched.txt'}: each case, the rule that did or did "
                     f"not match, and what to do")
    lines.append(f"then: check {out / 'gradebook.csv'} and import {out / 'canvas_import.csv'} "
                 f"in Canvas (Grades > Import)")
    return "\n".join(lines) + "\n"


def autolab_import(grades: list[dict], staff: list[adjustments.Adjustment] = ()
                   ) -> tuple[list[list], list[str]]:
    """(the lines of Autolab's grade import: each member's email, then the points of each
    problem in rubric order, after the ``staff``'s adjustments, then the adjustment of the total
    as a last problem, ADJUSTMENT, where one adjusts a total, for every graded row of each
    student's highest version; the addresses left out, in two rows, with those rows). Crashed
    rows are left out (listed elsewhere); lateness is Autolab's own."""
    extra = any(adjustment.applies_to == adjustments.TOTAL for adjustment in staff)
    by_address: dict[str, list[tuple[str, dict]]] = {}
    for row in latest_versions(grades)[0]:
        if row["status"] in SCORED_STATUSES:
            for member in members_of(row):
                if member["email"]:
                    by_address.setdefault(member["email"].lower(), []).append(
                        (member["email"], row))
    lines, doubles = [], []
    for found in (by_address[address] for address in sorted(by_address)):
        if len(found) > 1:
            doubles.append(f"{found[0][0]}: in " + ", ".join(row_key(row) for _, row in found))
        else:
            (address, row), = found
            mine = adjustments.of_row(staff, row_key(row), row["student"])
            points = adjustments.adjusted_points(row, mine) if mine else row
            lines.append([address, *(points.get(category, "") for category in rubric.RUBRIC)]
                         + ([adjustment_problem(points) if mine else 0] if extra else []))
    return lines, doubles


def adjustment_problem(points: dict) -> float:
    """The ADJUSTMENT problem's points: what the total's adjustments add to the categories."""
    return round(points[adjustments.TOTAL] - rubric.added(points[category]
                                                          for category in rubric.RUBRIC), 2)


def autolab_text(lines: list[list], doubles: list[str]) -> str:
    """The Autolab import's part of unmatched.txt."""
    problems = [*rubric.RUBRIC, *([ADJUSTMENT] if lines and len(lines[0]) > 1 + len(
        rubric.RUBRIC) else [])]
    return "\n".join([
        f"{AUTOLAB_IMPORT}: {len(lines)} addresses; its columns: email, "
        + ", ".join(problems) + " (no header: define the assessment's problems in this "
        "order, then Gradebook > Import grades (bulk grade) in Autolab"
        + (f"; {ADJUSTMENT} holds the adjustments of totals in {adjustments.FILE_NAME}, a "
           f"problem of its own as Autolab keeps a tweak apart"
           if len(problems) > len(rubric.RUBRIC) else "") + ")",
        f"addresses in two grade rows, left out of {AUTOLAB_IMPORT} ({len(doubles)}):",
        *(f"  {line}" for line in doubles),
        *(["  next: decide which row counts and enter it in Autolab by hand"] if doubles else [])]
    ) + "\n"


def write_outputs(out: Path, result: Join, assignment: str, points_row: dict | None,
                  missing: str, policy: Lateness, grades: list[dict],
                  staff: list[adjustments.Adjustment] = ()) -> str:
    """Write the five files of ``out``; returns the summary."""
    out.mkdir(parents=True, exist_ok=True)
    autolab_lines, doubles = autolab_import(grades, staff)
    spreadsheet.write_csv(out / AUTOLAB_IMPORT, None, autolab_lines)
    points = ([[POINTS_POSSIBLE, *[""] * (len(CANVAS_COLUMNS) - 1), sum(rubric.RUBRIC.values())]]
              if points_row is not None else [])
    spreadsheet.write_csv(out / "canvas_import.csv", [*CANVAS_COLUMNS, assignment],
                          [*points, *([row[column] for column in CANVAS_COLUMNS] + [row["score"]]
                                      for row in result.rows)])
    spreadsheet.write_csv(out / "gradebook.csv", REPORT_COLUMNS, result.rows)
    (out / "unmatched.txt").write_text(unmatched_text(result, missing)
                                       + autolab_text(autolab_lines, doubles), encoding="utf-8")
    summary = summary_text(result, policy, out)
    (out / "summary.txt").write_text(summary, encoding="utf-8")
    return summary


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Join the regrade's grades.csv with a Canvas "
                                                 "roster; write a CSV Canvas imports.")
    parser.add_argument("roster", type=Path, nargs="?",
                        help="Canvas's Gradebook export (CSV); without one (an Autolab-only "
                             "course) only autolab_import.csv and unmatched.txt are written")
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
    parser.add_argument("--sections", type=Path, metavar="FILE",
                        help="CSV: section (as the roster's Section column names it), due, and "
                             "where its policy differs grace_minutes, late_penalty_per_day, "
                             "late_max_days: each section's own deadline")
    parser.add_argument("--days-grace", type=Path, metavar="FILE", dest="grace_days",
                        help="CSV: student, grace_days (each student's grace days left, as "
                             "Autolab's gradebook shows them; each started day late uses one)")
    parser.add_argument("--opened", help="when the assignment opened (as --due): an older "
                                         "submission time is listed, not scored")
    parser.add_argument("--exported", help="when the download was exported (as --due; default: "
                                           "now): a later submission time is listed, not scored")
    parser.add_argument("--aliases", type=Path, metavar="FILE",
                        help="CSV: address, student (SIS User ID, SIS Login ID or email): an "
                             "address the student handed in under")
    parser.add_argument("--inactive", nargs="+", default=[], metavar="STUDENT",
                        help="withdrawn students (SIS User ID, SIS Login ID or email): left out "
                             "of --missing zero, like Canvas's Test Student")
    parser.add_argument("--several-submissions", choices=SEVERAL_CHOICES, default="conflict",
                        help="a student reached by several submissions (in two groups): a "
                             "conflict, imported for none (default), or the latest submitted, "
                             "as Gradescope counts it")
    parser.add_argument("--grace-minutes", type=float, default=0.0,
                        help="a handin at most this late is on time (needs --due)")
    parser.add_argument("--late-penalty-per-day", type=float, default=0.0,
                        help="percent of the total taken per started day late (needs --due)")
    parser.add_argument("--late-max-days", type=float, default=math.inf,
                        help="days late after which the score is 0 (needs --due)")
    args = parser.parse_args(argv)
    if args.due is None and (args.late_penalty_per_day or args.grace_minutes or args.extensions
                             or args.late_max_days != math.inf or args.grace_days
                             or args.sections):
        raise SystemExit("--late-penalty-per-day, --late-max-days, --grace-minutes, "
                         "--extensions, --sections and --days-grace need --due (the deadline "
                         "they count from; a section's own deadline replaces it for its "
                         "students)")
    timezone = time_zone(args.timezone)
    staff = with_adjustments(args.grades)
    grades = read_grades(args.grades)
    if args.roster is None:
        args.out.mkdir(parents=True, exist_ok=True)
        lines, doubles = autolab_import(grades, staff)
        spreadsheet.write_csv(args.out / AUTOLAB_IMPORT, None, lines)
        text = autolab_text(lines, doubles)
        (args.out / "unmatched.txt").write_text(text, encoding="utf-8")
        print(text + f"no roster: {args.out / 'canvas_import.csv'} not written", end="")
        return
    roster, points_row = read_roster(args.roster)
    due = parse_time(args.due, timezone, "--due") if args.due is not None else None
    index = roster_index(roster, ())
    sections = read_sections(args.sections, roster, timezone) if args.sections else {}
    policy = Lateness(due, read_extensions(args.extensions, roster, due, timezone, sections)
                      if args.extensions else {}, args.grace_minutes,
                      args.late_penalty_per_day, args.late_max_days,
                      read_grace_days(args.grace_days, roster) if args.grace_days else {},
                      parse_time(args.opened, timezone, "--opened") if args.opened else None,
                      parse_time(args.exported, timezone, "--exported") if args.exported
                      else None, sections)
    domains = tuple(domain.strip().lower().lstrip("@") for domain in args.domain)
    result = join(roster, grades, domains, policy, args.missing,
                  read_aliases(args.aliases, roster) if args.aliases else None,
                  {student_position(index, student, "--inactive") for student in args.inactive},
                  args.several_submissions)
    print(write_outputs(args.out, result, args.assignment, points_row, args.missing, policy,
                        grades, staff), end="")


def with_adjustments(path: Path) -> list[adjustments.Adjustment]:
    """The adjustments file beside the grades.csv ``path``, applied to it again (its
    ``adjusted_total`` and ``adjustments``, and the feedback's block: the file may have changed
    since the regrade), every hand edit of its points settled first (kept by an adjustment, else
    refused naming the line that keeps it)."""
    if not path.is_file():
        raise SystemExit(f"{path} not found: run `make regrade` first, or give --grades the "
                         f"grades.csv it wrote")
    rows, staff = read_settled(path)
    if staff or any(row.get("adjustments") for row in rows.values()):
        write_rows(path, rows, staff)
    return staff


if __name__ == "__main__":
    main()
