"""The gradebook's late policy (``autograder/classroom/gradebook.py``'s docstring, "Lateness"): the
deadline and its time zone, each student's extension, the grace period, and the points a late
handin loses."""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta, tzinfo
from pathlib import Path

from autograder.classroom import spreadsheet
from autograder.classroom.handins import submitted_time
from autograder.classroom.roster_match import roster_index

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


def time_zone(name: str | None) -> tzinfo | None:
    if name is None:
        return None
    from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise SystemExit(f"--timezone {name!r} is not a time zone this machine knows: give an "
                         f"IANA name such as America/New_York or Europe/Berlin (or install the "
                         f"tzdata package)") from None


def read_extensions(path: Path, roster: list[dict], due: datetime,
                    timezone: tzinfo | None) -> dict[int, datetime]:
    """{roster position: its deadline} from an extensions CSV (``student``; ``due`` or ``hours``
    after ``due``); a row that names no single roster student, or gives neither or both, is
    refused."""
    columns, rows = spreadsheet.read_csv(path)
    if "student" not in columns or not {"due", "hours"} & set(columns):
        raise SystemExit(f"{path}: an extensions file has the columns student and due or hours "
                         f"(it has {', '.join(columns) or 'none'})")
    index = roster_index(roster, ())
    deadlines: dict[int, datetime] = {}
    for line, row in enumerate(rows, start=2):
        student = row["student"].strip().lower()
        hits = {p for kind in ("sid", "email", "login") for p in index.get(f"{kind}:{student}", [])}
        where = f"{path} line {line}"
        if len(hits) != 1:
            raise SystemExit(f"{where}: {row['student']!r} is {'on several' if hits else 'on no'} "
                             f"roster rows: give their SIS User ID, SIS Login ID or email as the "
                             f"roster has it")
        new_due, hours = (row.get("due") or "").strip(), (row.get("hours") or "").strip()
        if bool(new_due) == bool(hours):
            raise SystemExit(f"{where}: give either due (a new deadline) or hours (added to "
                             f"--due), not {'both' if new_due else 'neither'}")
        try:
            # added in UTC: hours are elapsed hours, across a change of daylight saving time too
            deadline = (parse_time(new_due, timezone, f"{where}: due") if new_due
                        else (due.astimezone(UTC) + timedelta(hours=float(hours))
                              ).astimezone(due.tzinfo))
        except (ValueError, OverflowError):
            raise SystemExit(f"{where}: hours {hours!r} is not a number") from None
        position = hits.pop()
        if position in deadlines:
            raise SystemExit(f"{where}: a second extension for {roster[position]['Student']}")
        deadlines[position] = deadline
    return deadlines


def late_deduction(total: float, hours: float | None, per_day: float, max_days: float) -> float:
    """Points the late policy takes from ``total``: ``per_day`` percent per started day late,
    everything after ``max_days`` days (with or without a daily penalty)."""
    if hours is None or hours <= 0:
        return 0.0
    days = math.ceil(hours / 24)
    if days > max_days:
        return total
    return round(min(total, total * per_day / 100 * days), 2) if per_day > 0 else 0.0


def lateness(submitted_at: str, deadline: datetime | None, extended: bool, total: float,
             policy: Lateness) -> tuple[float | None, float, str]:
    """(hours after the deadline or None when unknown, the points deducted, the rule applied)."""
    if deadline is None:
        return None, 0.0, "not checked (no --due)"
    due = f"due {deadline.isoformat()}{' (extension)' if extended else ''}"
    if not submitted_at:
        return None, 0.0, ("time unknown: the download has no submission time (an Autolab one "
                           "carries none); imported without a late deduction")
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
    deduction = late_deduction(total, hours, policy.per_day, policy.max_days)
    if days > policy.max_days:
        rule = f"more than {policy.max_days:g} days late: scores 0"
    elif policy.per_day <= 0:
        rule = "no --late-penalty-per-day: no deduction"
    else:
        rule = f"{days} x {policy.per_day:g}% of the total"
    started = f"{days} started day{'s' if days > 1 else ''}"
    return hours, deduction, f"{hours:.2f} h late ({started}, {due}): {rule}"
