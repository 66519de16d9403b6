"""The gradebook's late policy (``autograder/classroom/gradebook.py``'s docstring, "Lateness"): the
deadline and its time zone, each student's extension and grace days, the grace period, the points
a late handin loses, and the submission times that cannot be right."""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta, tzinfo
from pathlib import Path
from typing import Callable, Iterator

from autograder.classroom import spreadsheet
from autograder.classroom.handins import submitted_time
from autograder.classroom.roster_match import roster_index, student_position

DUE_EXAMPLE = "2026-11-21T00:00:00-05:00"


@dataclass
class Lateness:
    """The late policy: the deadline, each roster row's own (extensions), the grace period and
    the penalty."""

    due: datetime | None = None
    extensions: dict[int, datetime] = field(default_factory=dict)  # roster position -> deadline
    grace_minutes: float = 0.0
    per_day: float = 0.0
    max_days: float = math.inf
    grace_days: dict[int, int] = field(default_factory=dict)  # roster position -> days left
    opened: datetime | None = None  # no handin can be older
    exported: datetime | None = None  # nor newer (the download's export; None: now)


def impossible_time(submitted_at: str, policy: Lateness) -> str:
    """Why ``submitted_at`` cannot be a submission time (after the export or now, before the
    assignment opened), or '' (also for a missing or unreadable time: lateness says so)."""
    submitted = submitted_time(submitted_at)
    if submitted is None:
        return ""
    latest = policy.exported or datetime.now(UTC)
    if submitted > latest.timestamp():
        return (f"submitted at {submitted_at}, after the export ({latest.isoformat()}"
                f"{'' if policy.exported else ', now'}): not a time a handin can have")
    if policy.opened is not None and submitted < policy.opened.timestamp():
        return (f"submitted at {submitted_at}, before the assignment opened "
                f"({policy.opened.isoformat()}, --opened)")
    return ""


def parse_time(text: str, timezone: tzinfo | None, what: str) -> datetime:
    """An ISO 8601 time with its UTC offset, or without one where ``timezone`` says where it is;
    any other refused, naming the fix."""
    try:
        moment = datetime.fromisoformat(text.strip())
    except ValueError:
        raise SystemExit(f"{what} {text!r} is not an ISO 8601 time: write it as {DUE_EXAMPLE}"
                         ) from None
    if moment.tzinfo is None:
        if timezone is None:
            raise SystemExit(f"{what} {text} has no UTC offset, so no lateness could be counted "
                             f"from it: write it with its offset (e.g. {DUE_EXAMPLE}), or give "
                             f"the deadline's time zone once with --timezone NAME (e.g. "
                             f"--timezone America/New_York)")
        moment = moment.replace(tzinfo=timezone)
    return moment


def time_zone(name: str | None, option: str = "--timezone") -> tzinfo | None:
    """The IANA time zone ``name`` (None: None); one this machine does not know is refused."""
    if name is None:
        return None
    from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise SystemExit(f"{option} {name!r} is not a time zone this machine knows: give an "
                         f"IANA name such as America/New_York or Europe/Berlin (or install the "
                         f"tzdata package)") from None


def per_student_rows(path: Path, roster: list[dict], what: str, wanted: str,
                     has_values: Callable[[set[str]], bool]) -> Iterator[tuple[str, int, dict]]:
    """(where, roster position, row) for each row of the CSV ``path`` (``what``: "an extensions
    file"), whose ``student`` column names one roster student; a file without the columns
    (``wanted``, as the refusal words them; ``has_values`` judges the others), a row naming no
    single student, or a second row for the same student is refused, naming the line."""
    columns, rows = spreadsheet.read_csv(path)
    if "student" not in columns or not has_values(set(columns)):
        raise SystemExit(f"{path}: {what} has the columns {wanted}; it has "
                         f"{', '.join(columns) or 'none'}")
    index = roster_index(roster, ())
    seen: set[int] = set()
    for line, row in enumerate(rows, start=2):
        where = f"{path} line {line}"
        position = student_position(index, row["student"], where)
        if position in seen:
            raise SystemExit(f"{where}: a second row for {roster[position]['Student']} in "
                             f"{what}: keep one")
        seen.add(position)
        yield where, position, row


def read_extensions(path: Path, roster: list[dict], due: datetime,
                    timezone: tzinfo | None) -> dict[int, datetime]:
    """{roster position: its deadline} from an extensions CSV (``student``; ``due``, ``hours``
    after ``due``, or ``days`` after it: calendar days, as Autolab counts them, the deadline's
    wall-clock time in ``timezone``); a row that names no single roster student, or gives not
    exactly one of the three, is refused."""
    kinds = ("due", "hours", "days")
    deadlines: dict[int, datetime] = {}
    for where, position, row in per_student_rows(path, roster, "an extensions file",
                                                 "student and due, hours or days",
                                                 lambda columns: bool(set(kinds) & columns)):
        given = {kind: (row.get(kind) or "").strip() for kind in kinds
                 if (row.get(kind) or "").strip()}
        if len(given) != 1:
            raise SystemExit(f"{where}: give one of due (a new deadline), hours or days (added "
                             f"to --due), not {' and '.join(given) or 'neither'}")
        (kind, value), = given.items()
        if kind == "days" and timezone is None:
            raise SystemExit(f"{where}: days are calendar days in the course's time zone (a "
                             f"day across a change of daylight saving time is 23 or 25 hours): "
                             f"give it with --timezone NAME (e.g. America/New_York)")
        try:
            if kind == "due":
                deadline = parse_time(value, timezone, f"{where}: due")
            elif kind == "hours":
                # added in UTC: hours are elapsed hours, across a change of daylight saving too
                deadline = (due.astimezone(UTC) + timedelta(hours=float(value))
                            ).astimezone(due.tzinfo)
            else:  # the same wall-clock time, int(value) days later, in the course's zone
                deadline = due.astimezone(timezone) + timedelta(days=int(value))
        except (ValueError, OverflowError):
            raise SystemExit(f"{where}: {kind} {value!r} is not a "
                             f"{'whole ' if kind == 'days' else ''}number") from None
        deadlines[position] = deadline
    return deadlines


def read_grace_days(path: Path, roster: list[dict]) -> dict[int, int]:
    """{roster position: grace days left} from a CSV (``student``, ``grace_days``): each
    student's budget as Autolab's gradebook shows it; each started day late uses one."""
    days: dict[int, int] = {}
    for where, position, row in per_student_rows(path, roster, "a grace days file",
                                                 "student and grace_days",
                                                 lambda columns: "grace_days" in columns):
        try:
            days[position] = int(row["grace_days"])
            if days[position] < 0:
                raise ValueError
        except ValueError:
            raise SystemExit(f"{where}: grace_days {row['grace_days']!r} is not a whole number "
                             f"of days, 0 or more") from None
    return days


def late_deduction(total: float, hours: float | None, per_day: float, max_days: float,
                   grace_days: int = 0) -> float:
    """Points the late policy takes from ``total``: ``per_day`` percent per started day late
    beyond the ``grace_days`` it uses, everything after ``max_days`` days (with or without a
    daily penalty)."""
    if hours is None or hours <= 0:
        return 0.0
    days = math.ceil(hours / 24)
    if days > max_days:
        return total
    charged = days - min(days, grace_days)
    return round(min(total, total * per_day / 100 * charged), 2) if per_day > 0 else 0.0


def lateness(submitted_at: str, deadline: datetime | None, extended: bool, total: float,
             policy: Lateness, grace_days: int = 0) -> tuple[float | None, float, str]:
    """(hours after the deadline or None when unknown, the points deducted, the rule applied);
    ``grace_days``: the student's grace days left."""
    if deadline is None:
        return None, 0.0, "not checked (no --due)"
    due = f"due {deadline.isoformat()}{' (extension)' if extended else ''}"
    if not submitted_at:
        return None, 0.0, ("time unknown: the download has no submission time; imported without "
                           "a late deduction")
    submitted = submitted_time(submitted_at)
    if submitted is None:
        return None, 0.0, (f"time unknown: submitted_at {submitted_at!r} is not a time with a "
                           f"UTC offset; imported without a late deduction")
    hours = max(0.0, (submitted - deadline.timestamp()) / 3600)
    if hours == 0:
        return 0.0, 0.0, f"on time ({due})"
    if hours * 60 <= policy.grace_minutes:
        return hours, 0.0, (f"{hours:.2f} h late, within the {policy.grace_minutes:g}-minute "
                            f"grace period: on time ({due})")
    days = math.ceil(hours / 24)
    used = min(days, grace_days)
    deduction = late_deduction(total, hours, policy.per_day, policy.max_days, grace_days)
    if days > policy.max_days:
        rule = f"more than {policy.max_days:g} days late: scores 0"
    elif days == used:
        rule = "covered by grace days: no deduction"
    elif policy.per_day <= 0:
        rule = "no --late-penalty-per-day: no deduction"
    else:
        rule = f"{days - used} x {policy.per_day:g}% of the total"
    started = f"{days} started day{'s' if days > 1 else ''}" + (
        f", {used} grace day{'s' if used > 1 else ''} used of {grace_days}" if used else "")
    return hours, deduction, f"{hours:.2f} h late ({started}, {due}): {rule}"
