"""The gradebook's late policy (``autograder/classroom/gradebook.py``'s docstring, "Lateness"): the
deadline and its time zone, each student's extension and grace days, the grace period, the points
a late handin loses, and the submission times that cannot be right."""
from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta, tzinfo
from pathlib import Path
from typing import Callable, Iterator

from autograder.classroom import spreadsheet
from autograder.classroom.handins import submitted_time
from autograder.classroom.roster_match import roster_index, student_position

DUE_EXAMPLE = "2026-11-21T00:00:00-05:00"


@dataclass(frozen=True)
class Section:
    """A section's own deadline, and its own late policy where it differs (None: the
    course's)."""

    name: str
    due: datetime
    grace_minutes: float | None = None
    per_day: float | None = None
    max_days: float | None = None

    @property
    def label(self) -> str:
        """'section B', or the name itself where it says so ('Section B')."""
        return self.name if self.name.lower().startswith("section") else f"section {self.name}"


@dataclass
class Lateness:
    """The late policy: the deadline, each roster row's own (extensions, sections), the grace
    period and the penalty."""

    due: datetime | None = None
    extensions: dict[int, datetime] = field(default_factory=dict)  # roster position -> deadline
    grace_minutes: float = 0.0
    per_day: float = 0.0
    max_days: float = math.inf
    grace_days: dict[int, int] = field(default_factory=dict)  # roster position -> days left
    opened: datetime | None = None  # no handin can be older
    exported: datetime | None = None  # nor newer (the download's export; None: now)
    sections: dict[int, Section] = field(default_factory=dict)  # roster position -> section

    def of_student(self, position: int) -> tuple[datetime | None, str, Lateness]:
        """(the deadline of the roster row at ``position``, whose it is in words: 'extension',
        'section B deadline' or '' for the course's, the late policy that applies to it: its
        section's numbers where the section gives them)."""
        section = self.sections.get(position)
        own = self if section is None else replace(self, **{
            name: getattr(section, name) for name in ("grace_minutes", "per_day", "max_days")
            if getattr(section, name) is not None})
        if position in self.extensions:
            return self.extensions[position], "extension", own
        if section is not None:
            return section.due, f"{section.label} deadline", own
        return self.due, "", own


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
                    timezone: tzinfo | None,
                    sections: dict[int, Section] | None = None) -> dict[int, datetime]:
    """{roster position: its deadline} from an extensions CSV (``student``; ``due``, ``hours``
    after the student's deadline, or ``days`` after it: calendar days, as Autolab counts them,
    the deadline's wall-clock time in ``timezone``); the student's deadline is their section's
    (``sections``) or ``due``. A row that names no single roster student, or gives not exactly
    one of the three, is refused."""
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
        own = sections[position].due if sections and position in sections else due
        if kind == "days" and timezone is None:
            raise SystemExit(f"{where}: days are calendar days in the course's time zone (a "
                             f"day across a change of daylight saving time is 23 or 25 hours): "
                             f"give it with --timezone NAME (e.g. America/New_York)")
        try:
            if kind == "due":
                deadline = parse_time(value, timezone, f"{where}: due")
            elif kind == "hours":
                # added in UTC: hours are elapsed hours, across a change of daylight saving too
                deadline = (own.astimezone(UTC) + timedelta(hours=float(value))
                            ).astimezone(own.tzinfo)
            else:  # the same wall-clock time, int(value) days later, in the course's zone
                deadline = own.astimezone(timezone) + timedelta(days=int(value))
        except (ValueError, OverflowError):
            raise SystemExit(f"{where}: {kind} {value!r} is not a "
                             f"{'whole ' if kind == 'days' else ''}number") from None
        deadlines[position] = deadline
    return deadlines


SECTION_NUMBERS = ("grace_minutes", "late_penalty_per_day", "late_max_days")


def read_sections(path: Path, roster: list[dict], timezone: tzinfo | None
                  ) -> dict[int, Section]:
    """{roster position: its section} from a sections CSV (``section``, as the roster's
    ``Section`` column names it, case aside; ``due``; and, where the section's late policy
    differs from the course's, SECTION_NUMBERS, as the options of those names). A section given
    twice, or that no roster row is in (a typo would give its students the course's deadline),
    or a number that is not one, is refused naming the line."""
    columns, rows = spreadsheet.read_csv(path)
    if not {"section", "due"} <= set(columns):
        raise SystemExit(f"{path}: a sections file has the columns section and due (and, where "
                         f"a section's policy differs, {', '.join(SECTION_NUMBERS)}); it has "
                         f"{', '.join(columns) or 'none'}")
    members: dict[str, list[int]] = {}
    for position, student in enumerate(roster):
        members.setdefault(student.get("Section", "").strip().lower(), []).append(position)
    found: dict[int, Section] = {}
    named: set[str] = set()
    for line, row in enumerate(rows, start=2):
        where, name = f"{path} line {line}", (row["section"] or "").strip()
        if name.lower() in named:
            raise SystemExit(f"{where}: section {name!r} is given twice: keep one line")
        named.add(name.lower())
        if not members.get(name.lower()):
            known = sorted({s.get("Section", "").strip() for s in roster} - {""})
            raise SystemExit(f"{where}: no roster row is in section {name!r} (the roster's "
                             f"Section column has {', '.join(known) or 'nothing'})")
        numbers = {}
        for column, attribute in zip(SECTION_NUMBERS, ("grace_minutes", "per_day", "max_days")):
            text = (row.get(column) or "").strip()
            try:
                numbers[attribute] = float(text) if text else None
            except ValueError:
                raise SystemExit(f"{where}: {column} {text!r} is not a number") from None
        section = Section(name, parse_time(row["due"] or "", timezone, f"{where}: due"),
                          **numbers)
        found.update({position: section for position in members[name.lower()]})
    return found


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
    return round(min(total, total * max(per_day, 0.0) / 100 * charged), 2)


def lateness(submitted_at: str, deadline: datetime | None, extended: bool | str, total: float,
             policy: Lateness, grace_days: int = 0) -> tuple[float | None, float, str]:
    """(hours after the deadline or None when unknown, the points deducted, the rule applied);
    ``extended``: whose deadline it is, said after it ('extension', 'section B deadline'; True:
    'extension'; '' or False: the course's); ``grace_days``: the student's grace days left."""
    if deadline is None:
        return None, 0.0, "not checked (no --due)"
    whose = "extension" if extended is True else extended or ""
    due = f"due {deadline.isoformat()}{f' ({whose})' if whose else ''}"
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
