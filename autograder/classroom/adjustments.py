"""The TA's own column: ``adjustments.csv``, beside grades.csv (the regrade's ``OUT``), holds the
staff's decisions (a regrade request granted, a penalty for a broken rule), apart from the
autograder's points, as Gradescope and Autolab keep manual adjustments apart from the autograder's
score.

Columns (one adjustment a line; the TA writes them, no tool does):

- ``student``: the row as grades.csv names it (its ``student``, or ``student#version`` with
  ``--versions all``; a student's name without ``#`` reaches each of their versions);
- ``applies_to``: a rubric category (``Linear`` ... ``LanguageModel``) or ``total``;
- ``delta`` (points added: ``5``, ``-2.5``) or ``set_to`` (the points it gets), one of the two;
- ``reason`` and ``by``: why, and who decided (both required: a decision without them cannot be
  checked later).

Applied in the file's order on top of the autograder's points, never into them: first each
category's, then ``total`` (the adjusted categories added up, then its own adjustments). The
autograder's points stay in grades.csv's categories and ``total``; ``adjusted_total`` and
``adjustments`` (each line said in words) sit beside them, rewritten by every regrade and rescore
(``grades_csv.write_rows``), and the gradebook reads the file again on every export
(``autograder/classroom/gradebook.py``): the adjusted total is scored there, its categories go to
Autolab's import, and each student's feedback (``feedback/<student>.txt``) starts with their
adjustments. A hand edit of grades.csv is never taken for the autograder's, nor silently replaced:
``autograder/classroom/rescore.py``'s :func:`hand_edits` finds it and names the line that keeps it.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

from autograder.classroom import spreadsheet
from autograder.judging.scoring import rubric

FILE_NAME = "adjustments.csv"
COLUMNS = ("student", "applies_to", "delta", "set_to", "reason", "by")
TOTAL = "total"
# grades.csv's record of the points as the tools last wrote them, by which a hand edit is found
AS_WRITTEN = "points_as_written"
# The first line of the block an adjustment puts at the top of a student's feedback.
FEEDBACK_HEADING = "Adjusted by the course staff after grading:"
OLD_NOTE = re.compile(re.escape(FEEDBACK_HEADING) + r"\n.*?\n\n", re.DOTALL)  # no blank line in it


@dataclass(frozen=True)
class Adjustment:
    where: str  # "adjustments.csv line 3", for every message about it
    student: str
    applies_to: str  # a rubric category or TOTAL
    delta: float | None  # exactly one of delta and set_to is a number
    set_to: float | None
    reason: str
    by: str

    def describe(self) -> str:
        """In words, as grades.csv, gradebook.csv and the feedback say it: 'total +5 (a
        regrade request granted, by Kim)'."""
        change = f"{self.delta:+g}" if self.delta is not None else f"set to {self.set_to:g}"
        return f"{self.applies_to} {change} ({self.reason}, by {self.by})"

    def applied(self, points: float) -> float:
        return round(points + self.delta, 2) if self.delta is not None else self.set_to


def beside(grades_csv: Path) -> Path:
    """The adjustments file of a grades.csv: in the same folder."""
    return grades_csv.parent / FILE_NAME


def read(path: Path) -> list[Adjustment]:
    """The adjustments in ``path`` ([] without the file); a file without the columns, or a line
    that names no column, gives both or neither of delta and set_to, a number that is not one, or
    no reason or author, is refused naming the line and the fix."""
    if not path.is_file():
        return []
    columns, rows = spreadsheet.read_csv(path)
    missing = [column for column in COLUMNS if column not in columns]
    if missing:
        raise SystemExit(f"{path}: an adjustments file has the columns {', '.join(COLUMNS)}; it "
                         f"lacks {', '.join(missing)}")
    found = []
    for line, row in enumerate(rows, start=2):
        cells = {column: (row.get(column) or "").strip() for column in COLUMNS}
        if not any(cells.values()):
            continue
        where = f"{path} line {line}"
        found.append(Adjustment(where, required(cells, "student", where),
                                applies_to(cells["applies_to"], where),
                                *change(cells["delta"], cells["set_to"], where),
                                required(cells, "reason", where), required(cells, "by", where)))
    return found


def applies_to(text: str, where: str) -> str:
    """A rubric category or TOTAL, as written (case ignored)."""
    names = {name.lower(): name for name in (*rubric.RUBRIC, TOTAL)}
    if text.lower() not in names:
        raise SystemExit(f"{where}: applies_to {text!r} is none of {', '.join(names.values())}")
    return names[text.lower()]


def change(delta: str, set_to: str, where: str) -> tuple[float | None, float | None]:
    """(delta, set_to), exactly one a number."""
    if bool(delta) == bool(set_to):
        raise SystemExit(f"{where}: give one of delta (points added, e.g. 5 or -2.5) and set_to "
                         f"(the points it gets), not {'both' if delta else 'neither'}")
    try:
        return (float(delta), None) if delta else (None, float(set_to))
    except ValueError:
        raise SystemExit(f"{where}: {'delta' if delta else 'set_to'} "
                         f"{delta or set_to!r} is not a number of points") from None


def required(cells: dict[str, str], column: str, where: str) -> str:
    if not cells[column]:
        raise SystemExit(f"{where}: no {column} (who the adjustment is for, why and who decided "
                         f"are all required)")
    return cells[column]


def of_row(adjustments: list[Adjustment], key: str, student: str) -> list[Adjustment]:
    """The adjustments naming a row (its key, or its student: every version)."""
    return [adjustment for adjustment in adjustments if adjustment.student in (key, student)]


def adjusted_points(row: dict, mine: list[Adjustment]) -> dict[str, float]:
    """{category: points, TOTAL: points} of ``row`` (its autograder points) after ``mine``: the
    categories' adjustments, then the total's, each in the file's order."""
    points = {category: float(row.get(category) or 0) for category in rubric.RUBRIC}
    for adjustment in mine:
        if adjustment.applies_to != TOTAL:
            points[adjustment.applies_to] = adjustment.applied(points[adjustment.applies_to])
    total = rubric.added(points.values())
    for adjustment in mine:
        if adjustment.applies_to == TOTAL:
            total = adjustment.applied(total)
    return {**points, TOTAL: total}


def cells(row: dict, mine: list[Adjustment]) -> dict[str, object]:
    """grades.csv's ``adjusted_total`` and ``adjustments`` of ``row`` (both '' without any)."""
    if not mine:
        return {"adjusted_total": "", "adjustments": ""}
    return {"adjusted_total": adjusted_points(row, mine)[TOTAL],
            "adjustments": "; ".join(adjustment.describe() for adjustment in mine)}


def unknown(adjustments: list[Adjustment], rows: dict[str, dict]) -> list[str]:
    """A line for each adjustment naming no row of ``rows`` ({key: row})."""
    names = set(rows) | {row["student"] for row in rows.values()}
    return [f"{adjustment.where}: no row of {adjustment.student!r} in grades.csv: not applied "
            f"(name the row as grades.csv's student column does)"
            for adjustment in adjustments if adjustment.student not in names]


def with_feedback_note(text: str, mine: list[Adjustment], total: float) -> str:
    """A feedback file's ``text`` starting with the block that says ``mine`` and the adjusted
    ``total`` (none without adjustments), in place of the block it held."""
    text = OLD_NOTE.sub("", text)  # wherever it is: a rescore's note may be above it
    if not mine:
        return text
    return "\n".join([FEEDBACK_HEADING, *(f"  {adjustment.describe()}" for adjustment in mine),
                      f"Your total after them: {total:g}. The report below is the "
                      f"autograder's, before them.", "", text])


def update_feedback(feedback: Path, mine: list[Adjustment], row: dict) -> None:
    """Rewrite ``feedback``'s adjustments block for ``mine`` (none: removed) when it differs."""
    if not feedback.is_file():
        return
    text = feedback.read_text(encoding="utf-8", errors="replace")
    new = with_feedback_note(text, mine, adjusted_points(row, mine)[TOTAL])
    if new != text:
        feedback.write_text(new, encoding="utf-8")


def as_written(row: dict) -> str:
    """The AS_WRITTEN cell of ``row``: its categories, total and adjusted total, as JSON."""
    return json.dumps({column: float(row[column]) if row.get(column) not in ("", None) else ""
                       for column in (*rubric.RUBRIC, TOTAL, "adjusted_total")},
                      separators=(",", ":"))


def hand_edits(row: dict, mine: list[Adjustment]) -> list[tuple[str, object, float]]:
    """(column, as the tools wrote it, as it reads now) of each points cell of ``row`` edited by
    hand since. A row written before AS_WRITTEN was recorded: its total against its categories
    added up (where it has them all)."""
    try:
        written = json.loads(row.get(AS_WRITTEN) or "")
    except ValueError:
        written = None
    if not isinstance(written, dict):
        if any(row.get(category) in ("", None) for category in rubric.RUBRIC):
            return []
        try:
            written = {TOTAL: rubric.added(float(row[category]) for category in rubric.RUBRIC)}
        except ValueError:
            return []
    edits = []
    for column, before in written.items():
        now = row.get(column, "")
        try:
            now = float(now) if now not in ("", None) else ""
        except ValueError:
            pass
        if now != before:
            edits.append((column, before, now))
    return edits


def settle_hand_edits(rows: dict[str, dict], staff: list[Adjustment], csv_path: Path
                      ) -> list[str]:
    """Find every hand edit of grades.csv's ``rows`` ({key: row}). One an adjustment of
    ``staff`` keeps (the adjusted points equal the edited ones) is undone in place, the
    autograder's points restored; a line says so. Any other: SystemExit naming each edit and the
    line of adjustments.csv that keeps it."""
    kept, refused = [], []
    for key in sorted(rows):
        row = rows[key]
        mine = of_row(staff, key, row["student"])
        edits = hand_edits(row, mine)
        if not edits:
            continue
        written = {column: before for column, before, _ in edits}
        restored = {**row, **written}
        adjusted = {**adjusted_points(restored, mine),
                    "adjusted_total": cells(restored, mine)["adjusted_total"]}
        for column, before, now in edits:
            if adjusted.get(column) == now:
                kept.append(f"{csv_path}: {column} of {key} edited by hand ({before} -> {now}): "
                            f"kept by {beside(csv_path)}; the column shows the autograder's "
                            f"points again")
            else:
                refused.append(refusal(key, column, before, now, beside(csv_path)))
        if not refused:
            row.update(written)
    if refused:
        raise SystemExit("\n".join(refused) + "\nthe autograder's points are never changed by "
                         "hand: a decision of the staff is a line of the adjustments file "
                         "(autograder/README.md, \"Regrade requests and adjustments\"); or undo "
                         "the edit")
    return kept


def refusal(key: str, column: str, before, now, path: Path) -> str:
    """The message naming one hand edit and the adjustments line that keeps it."""
    if column == "adjusted_total" or not isinstance(now, float) or not isinstance(before, float):
        return (f"grades.csv's {column} for {key} was edited by hand ({before} -> {now}): it is "
                f"written from {path}; put the decision there")
    applies = TOTAL if column == TOTAL else column
    return (f"grades.csv's {column} for {key} was edited by hand ({before:g} -> {now:g}); record "
            f"it in {path} ({','.join(COLUMNS)}): {key},{applies},{round(now - before, 2):+g},,"
            f"<why>,<who> (or set_to {now:g} in place of the delta), then run the command again")
