"""A regrade's summary: ``summary.txt`` (counts, every student of each problem by name, the next
step for each kind of problem present, then the gradebook's) and ``summary.png`` (the histogram
of totals), from the rows of grades.csv (``autograder/classroom/grades_csv.py``)."""
from __future__ import annotations

from collections import Counter
from pathlib import Path

from autograder.classroom.grades_csv import RETRIED_NOTE
from autograder.judging.scoring import rubric
from autograder.judging.scoring.report import Status


def summarize(rows: dict[str, dict], out: Path) -> str:
    """summary.txt and summary.png; returns the text."""
    counts = {status: sum(row["status"] == status for row in rows.values())
              for status in Status}
    totals = [float(row["total"]) for row in rows.values()]
    maximum = sum(rubric.RUBRIC.values())
    causes = Counter(cause for row in rows.values()
                     for cause in row.get("likely_causes", "").split())
    lines = [f"{len(rows)} handins: " + ", ".join(f"{n} {s}" for s, n in counts.items())]
    if totals:
        lines.append(f"total: mean {sum(totals) / len(totals):.2f}, min {min(totals):g}, "
                     f"max {max(totals):g} (of {maximum})")
    if causes:
        lines.append("likely causes of failed hidden tests (students): "
                     + ", ".join(f"{cause} {n}" for cause, n in causes.most_common()))
    for status in (status for status in Status if status is not Status.OK):
        named = sorted(key for key, row in rows.items() if row["status"] == status)
        if named:
            lines.append(f"{status}: {', '.join(named)}")
    flagged = sorted(key for key, row in rows.items() if row.get("flags"))
    if flagged:
        lines.append(f"flagged (see the flags column): {', '.join(flagged)}")
    adjusted = sorted(key for key, row in rows.items() if row.get("adjustments"))
    if adjusted:
        lines.append(f"adjusted by the staff (adjustments.csv; the adjusted_total column): "
                     f"{', '.join(adjusted)}")
    lines += next_steps(rows, out)
    text = "\n".join(lines) + "\n"
    (out / "summary.txt").write_text(text, encoding="utf-8")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    figure, axis = plt.subplots(figsize=(6, 3.5))
    axis.hist(totals, bins=20, range=(0, maximum), color="#4c72b0", edgecolor="white")
    axis.yaxis.set_major_locator(MaxNLocator(integer=True))  # students come whole
    axis.set_xlabel(f"total score (of {maximum})")
    axis.set_ylabel("students")
    axis.set_title(", ".join(f"{n} {s}" for s, n in counts.items() if n))
    figure.tight_layout()
    figure.savefig(out / "summary.png", dpi=120)
    plt.close(figure)
    return text


def next_steps(rows: dict[str, dict], out: Path) -> list[str]:
    """The summary's last lines: what to do about each kind of problem present, then the
    gradebook."""
    def named(status: Status) -> list[str]:
        return sorted(key for key, row in rows.items() if row["status"] == status)

    feedback = f"{out / 'feedback'}/<student>.txt"
    steps = []
    if named(Status.INVALID):
        steps.append(f"invalid ({len(named(Status.INVALID))}): not a handin the grader can read; its "
                     f"{feedback} says what the archive held. Ask each student to run `make "
                     f"handin` after training and hand in the handin.tar it writes, unchanged; "
                     f"`make regrade` on a new download then grades the new handins alone")
    if named(Status.CRASHED):
        steps.append(f"crashed ({len(named(Status.CRASHED))}): the grader failed, not the student: "
                     f"the error is in the notes column of {out / 'grades.csv'}, the whole output "
                     f"in {feedback}. Fix the cause, then `make regrade ...` (every run grades a "
                     f"crashed row again; ARGS='--only <student>' grades that one alone); `make "
                     f"gradebook` leaves their cell blank until then")
    timeouts = named(Status.TIMEOUT)
    if timeouts:
        again = [key for key in timeouts if RETRIED_NOTE not in rows[key].get("notes", "")]
        steps.append(f"timeout ({len(timeouts)}): " + (
            f"{len(again)} not yet graded twice: run `make regrade` again, which grades each "
            f"timeout once more (the host may have been the cause); " if again else "")
            + f"one that times out twice is the handin's: its {feedback} names the part that "
              f"hit its time limit")
    flagged = sorted(key for key, row in rows.items() if row.get("flags"))
    if flagged:
        steps.append(f"flagged ({len(flagged)}): for the staff, not a score: read the flags "
                     f"column of {out / 'grades.csv'} (each flag states both numbers) and `make "
                     f"similarity HANDINS=...`'s pairs before the grades are final")
    steps.append(f"then: `make gradebook ROSTER=<Canvas's Gradebook export> GRADES="
                 f"{out / 'grades.csv'}`, and read gradebook/unmatched.txt (graded students no "
                 f"roster row matches, roster rows with no handin) before importing "
                 f"gradebook/canvas_import.csv")
    return ["next steps:", *(f"- {step}" for step in steps)]


