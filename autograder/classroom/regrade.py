"""Grade a whole class: every handin of a bulk download, through the same judge as Autolab.

    python -m autograder.classroom.regrade HANDINS [--out regrade] [--jobs 2] [--autograder dist]
                                 [--versions latest|all] [--only STUDENT ...] [--force]
    make regrade HANDINS=folder [JOBS=2] [ARGS='--versions all']

``HANDINS`` holds the handins in either platform's bulk-download layout:

- Autolab ("Download all submissions", every version): one archive per version,
  ``<email>_<version>_handin.tar`` (or .tar.gz, .tgz, .zip). A browser's re-download into the same
  folder (``..._handin (1).tar``) is the same version: identical copies count once, and of two
  different files of one version the newer is graded, with a note. An archive without a
  ``_<version>_`` part (``<student>.tar``) is that student's only version.
- Gradescope ("Export Submissions"): one folder per submission, ``submission_<id>/`` holding
  ``handin.tar`` (or the only tar or zip in it), and ``submission_metadata.yml`` beside them; each
  row is named by the submitter's email (else SID) and carries their name, email, SID and
  submission time; a group's row carries every member's, joined by "; ", and is named by its first
  member. Of several submissions by the same members the latest submitted is graded. A folder the
  metadata does not list is named by the folder.

``--versions latest`` (the default) grades the highest version of each student; ``all`` grades
every version, one row each. The choice is in the CSV (``versions_graded``), beside the version
graded and the number found.

Each handin is graded in a fresh folder by ``make`` with ``dist/autograde.tar`` and
``dist/autograde-Makefile`` (``autograder/judging/grading_run.py``, as Gradescope's adapter does): the same
judge, sandbox and limits as Autolab. ``--jobs N`` grades N at once, each isolated from the others
by the sandbox. Whatever one handin does, or whatever goes wrong in grading it, in removing its
folder or in reading its output, it becomes that student's row (``crashed``, with the error in
``notes``); the run always finishes.

``OUT`` receives ``grades.csv`` (one row per student, rewritten atomically after each grading, so
an interrupted run leaves a valid file): status, the points of each category, the points of each
hidden test (``test:<name>``) and its seconds (``test_seconds:<name>``: from the judge's request
for it to its answer, by the judge's clock), the seconds of each category
(``seconds:<category>``), the likely causes of failed tests, and ``flags`` for the staff: the
judge's integrity notes, weights byte-identical to another student's or within
``autograder/judging/weights_fingerprint.py``'s tolerance of what another's learned (``shares its
weights with ...``, with the distance), a mytorch that builds code at run time and what else the
judge's static inspection found (``autograder/judging/static_inspection.py``, read from its report:
a file or mytorch that could not be inspected, a graded file that defines no graded class of its
own; with the judge's notes in ``integrity_flags``). Also
``feedback/<student>.txt`` (the report Autolab shows), ``summary.txt`` (counts, every timeout,
invalid, crashed and flagged student by name, and the next step for each kind of problem present,
then the gradebook's) and ``summary.png`` (the histogram of totals).

A rerun grades again only what changed, and says why for each handin: a handin not graded yet,
or whose file (``handin_sha256``) or grader (``grader_sha256``: its code and hidden set) changed,
is graded; a row whose grader is the same but whose scoring line (``scoring``: the points and the
language model's thresholds) changed is rescored from its recorded results in a moment
(``autograder/classroom/rescore.py``, which ``make rescore`` runs alone); the others are kept, except a
timeout, which is graded once more (the host may have been the cause; ``notes`` says so).
``rescore.txt`` lists the rows a rescore changed, and how. ``--force`` grades again whatever was
graded; ``--only`` grades those students alone (other rows are kept). Ctrl-C once: no new grading
starts, those under way finish and are written. Ctrl-C twice: the running gradings are stopped and
their folders removed; every finished row is kept.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import sys
import threading
import time
import traceback
from collections import Counter
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
from pathlib import Path

from autograder.judging import grading_run, rubric, weights_fingerprint
from autograder.classroom import rescore, spreadsheet
from autograder.classroom.handins import VERSION_CHOICES, Handin, find_handins
from autograder.judging.report import GradingReport, LanguageModelResult, Status
from hw4lib.file_io import file_sha256
from hw4lib.handin_format import STATE_DICT_FILE

COLUMNS = ["student", "name", "email", "sid", "version", "versions_found", "versions_graded",
           "submitted_at", "status", *rubric.RUBRIC, "total", "perplexity_recomputed",
           "perplexity_reported", "parameters", "tokenizer", "seconds", "likely_causes", "flags",
           "notes", "integrity_flags", "runtime_code", "weights_sha256", "handin_sha256",
           "grader_sha256", "scoring", "weights_fingerprint"]
RETRIED_NOTE = "graded again after a timeout (the host may have been the cause)"


def row_of(handin: Handin, graded: grading_run.GradingRun, handin_sha: str, grader_sha: str,
           versions: str) -> dict:
    report = graded.report or GradingReport(status=Status.CRASHED)
    lm = report.lm or LanguageModelResult(message="")
    integrity = [flag.replace("; ", ", ") for flag in report.flags]  # "; " separates CSV flags
    integrity += report.static_findings  # one line each, without "; " (handin_guard.describe)
    notes = [note for note in (handin.note, graded.error) if note]
    return {"student": handin.student, "name": handin.name, "email": handin.email,
            "sid": handin.sid, "version": handin.version, "versions_found": handin.versions_found,
            "versions_graded": versions, "submitted_at": handin.submitted_at,
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


def with_flags(rows: dict[str, dict]) -> dict[str, dict]:
    """Each row's ``flags``: the judge's integrity notes, run-time code, weights byte-identical to
    another student's, and weights another student's agree with up to scale and small changes
    (``autograder.judging.weights_fingerprint``: its distance, at most its TOLERANCE)."""
    owners: dict[str, set[str]] = {}
    for row in rows.values():
        if row.get("weights_sha256"):
            owners.setdefault(row["weights_sha256"], set()).add(row["student"])
    close = weights_fingerprint.shared_weights(
        {key: row.get("weights_fingerprint") or "" for key, row in rows.items()})
    for key, row in rows.items():
        flags = [flag for flag in row.get("integrity_flags", "").split("; ") if flag]
        if row.get("runtime_code"):
            flags.append(f"its mytorch builds code at run time ({row['runtime_code']})")
        identical = sorted(owners.get(row.get("weights_sha256") or "", set()) - {row["student"]})
        if identical:
            flags.append(f"shares its weights with {', '.join(identical)} (byte-identical "
                         f"{STATE_DICT_FILE})")
        nearest: dict[str, float] = {}
        for other, gap in close.get(key, []):
            student = rows[other]["student"]
            if student != row["student"] and student not in identical:
                nearest.setdefault(student, gap)
        if nearest:
            flags.append("shares its weights with " + ", ".join(
                f"{student} (distance {gap:.4f})" for student, gap in nearest.items())
                + f": at most {weights_fingerprint.TOLERANCE} is the same trained weights up to "
                  f"scale and small changes (honest independent trainings: docs/results.md)")
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


def write_rows(path: Path, rows: dict[str, dict]) -> None:
    """The CSV, replaced atomically: a reader (or an interrupted run) never sees half a file."""
    with_flags(rows)
    spreadsheet.write_csv(path, columns_of(rows), (rows[key] for key in sorted(rows)))


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
                     f"in {feedback}. Fix the cause, then `make regrade ... ARGS='--only "
                     f"<student>'`; `make gradebook` leaves their cell blank until then")
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


def to_grade(handins: dict[str, Handin], rows: dict[str, dict], grader: rescore.Grader,
             force: bool, only: list[str] | None
             ) -> tuple[dict[str, tuple[Handin, str, str]], set[str], dict[str, str]]:
    """({key: (handin, its sha256, note)} of the handins this run grades, the keys of the rows it
    rescores, {key: why it is graded, rescored or kept} for every handin)."""
    if only:
        unknown = sorted(set(only) - {h.student for h in handins.values()} - set(handins))
        if unknown:
            raise SystemExit(f"--only: no handin of {', '.join(unknown)} in this download "
                             f"(students: {', '.join(sorted({h.student for h in handins.values()}))})")
    todo, rescoring, reasons = {}, set(), {}
    for key, handin in handins.items():
        if only and key not in only and handin.student not in only:
            reasons[key] = "not named by --only: kept"
            continue
        digest = file_sha256(handin.path)
        row = rows.get(key, {})
        action, reasons[key] = rescore.decide(row, digest, grader, force)
        if (action != rescore.GRADE and row.get("status") == Status.TIMEOUT
                and RETRIED_NOTE not in row.get("notes", "")):
            action, reasons[key] = rescore.GRADE, RETRIED_NOTE
        if action == rescore.GRADE:
            todo[key] = (handin, digest, reasons[key] if reasons[key] == RETRIED_NOTE else "")
        elif action == rescore.RESCORE:
            rescoring.add(key)
    return todo, rescoring, reasons


def why_lines(reasons: dict[str, str], shown: int = 20) -> list[str]:
    """One line per reason: how many handins, and which (all but the unchanged, the first
    ``shown``)."""
    groups: dict[str, list[str]] = {}
    for key in sorted(reasons):
        groups.setdefault(reasons[key], []).append(key)
    lines = []
    for reason, keys in sorted(groups.items(), key=lambda item: -len(item[1])):
        names = "" if reason == rescore.UNCHANGED else ": " + ", ".join(keys[:shown]) + (
            f" and {len(keys) - shown} more" if len(keys) > shown else "")
        lines.append(f"  {len(keys)} {reason}{names}")
    return lines


def feedback_path(out: Path, key: str) -> Path:
    return out / "feedback" / f"{key.replace('#', '_v')}.txt"


def apply_rescore(rows: dict[str, dict], keys: set[str], grader: rescore.Grader, out: Path,
                  shown: int = 20) -> str:
    """Rescore ``rows[key]`` for each of ``keys`` under ``grader``'s scoring line; note it at the
    top of each changed row's feedback; write rescore.txt; return its first ``shown`` changes."""
    changed, why = [], set()
    for key in sorted(keys):
        old = json.loads(rows[key]["scoring"])
        why.add(rescore.changes(old, grader.scoring))
        before = rows[key]["total"]
        differences = rescore.apply(rows[key], old, grader.scoring)
        if not differences:
            continue
        changed.append(f"{key}: {', '.join(differences)}")
        feedback = feedback_path(out, key)
        if feedback.is_file():
            feedback.write_text(
                f"Rescored after this grading, which was not run again: the scoring line changed "
                f"({rescore.changes(old, grader.scoring)}). This handin now earns "
                f"{', '.join(differences)} (total was {before}); the points below are those "
                f"of the old line.\n\n" + feedback.read_text(encoding="utf-8", errors="replace"),
                encoding="utf-8")
    text = (f"{len(keys)} rows rescored from their recorded results, none graded again "
            f"(the scoring line changed: {' | '.join(sorted(why))}); {len(changed)} changed "
            f"points, {len(keys) - len(changed)} kept them\n" + "".join(f"  {line}\n"
                                                                      for line in changed))
    (out / "rescore.txt").write_text(text, encoding="utf-8")
    lines = text.splitlines(keepends=True)
    return "".join(lines[:shown + 1]) + (f"  ... and {len(lines) - shown - 1} more in "
                                         f"{out / 'rescore.txt'}\n" if len(lines) > shown + 1
                                         else "")


def rescore_class(out: Path, source: Path) -> dict[str, dict]:
    """``make rescore``: rescore the rows of ``out/grades.csv`` under the scoring line of the
    grader in ``source``, without the handins; list the rows only a regrade can update."""
    grader = grader_in(source)
    csv_path = out / "grades.csv"
    rows = read_rows(csv_path)
    if not rows:
        raise SystemExit(f"{csv_path} holds no graded row: run `make regrade` first")
    decided = {key: rescore.decide(row, None, grader) for key, row in rows.items()}
    print(f"{len(rows)} rows in {csv_path}:", file=sys.stderr)
    print("\n".join(why_lines({key: why for key, (_, why) in decided.items()})), file=sys.stderr)
    keys = {key for key, (action, _) in decided.items() if action == rescore.RESCORE}
    if keys:
        print(apply_rescore(rows, keys, grader, out), end="", file=sys.stderr)
        write_rows(csv_path, rows)
    stale = sum(action == rescore.GRADE for action, _ in decided.values())
    if stale:
        print(f"{stale} rows can only be updated by grading them again: `make regrade "
              f"HANDINS=<the download> OUT={out}` grades those alone", file=sys.stderr)
    print(summarize(rows, out), end="", file=sys.stderr)
    return rows


def grader_in(source: Path) -> rescore.Grader:
    """The grader of ``source``'s autograde.tar and autograde-Makefile (SystemExit naming the fix
    when either is missing)."""
    for name in (grading_run.AUTOGRADE_TAR, grading_run.MAKEFILE):
        if not (source / name).is_file():
            raise SystemExit(f"{source / name} not found: run `make autograde` first (or give "
                             f"--autograder the folder holding {grading_run.AUTOGRADE_TAR} and "
                             f"{grading_run.MAKEFILE})")
    return rescore.grader_of(source / grading_run.AUTOGRADE_TAR, source / grading_run.MAKEFILE)


def grade_one(handin: Handin, source: Path, grader_flags: str, gradings: int,
              processes: dict[int, object], stopping: threading.Event) -> grading_run.GradingRun:
    """One grading, whatever happens: its GradingRun (``error`` says what failed). ``gradings``:
    how many run side by side (the judge shares the CPUs out between them)."""
    start = time.monotonic()
    if stopping.is_set():
        raise InterruptedError
    ident = threading.get_ident()

    def started(process) -> None:
        processes[ident] = process
        if stopping.is_set():
            grading_run.stop(process)

    try:
        graded = grading_run.run(grading_run.prepare(source, handin.path), grader_flags,
                                 gradings=gradings, started=started)
    except Exception as error:  # noqa: BLE001 - one handin never ends a class run
        last = traceback.extract_tb(error.__traceback__)[-1]
        graded = grading_run.GradingRun(
            rubric.zero_scores(), None, traceback.format_exc(), time.monotonic() - start, False,
            error=f"the grading failed: {type(error).__name__}: {str(error)[:200]} "
                  f"({Path(last.filename).name}:{last.lineno})")
    finally:
        processes.pop(ident, None)
    if graded.status is Status.CRASHED and not graded.error:
        graded.error = f"the judge failed: {last_exception(graded.output)} (see its feedback)"
    return graded


def last_exception(output: str) -> str:
    """The last 'SomeError: message' line of a traceback in ``output`` (shortened), or '?'."""
    lines = [line for line in output.splitlines()
             if re.match(r"[A-Za-z_][\w.]*(Error|Exception|Interrupt|Exit)\b", line)]
    return lines[-1][:200] if lines else "no traceback in its output"


def regrade(handins_dir: Path, out: Path, source: Path, jobs: int = 1,
            grader_flags: str = "", progress: bool = True, versions: str = "latest",
            only: list[str] | None = None, force: bool = False) -> dict[str, dict]:
    """Grade the handins under ``handins_dir`` this grader has not graded (see the module
    docstring); return every row."""
    grader = grader_in(source)
    if jobs < 1:
        raise SystemExit(f"--jobs must be at least 1, got {jobs}")
    handins = find_handins(handins_dir, versions)
    (out / "feedback").mkdir(parents=True, exist_ok=True)
    csv_path = out / "grades.csv"
    rows = {key: row for key, row in read_rows(csv_path).items() if key in handins}
    todo, rescoring, reasons = to_grade(handins, rows, grader, force, only)
    print(f"{len(handins)} handins, {len(handins) - len(todo)} already graded by this grader, "
          f"{len(todo)} to grade with --jobs {jobs}:", file=sys.stderr)
    print("\n".join(why_lines(reasons)), file=sys.stderr)
    if rescoring:
        print(apply_rescore(rows, rescoring, grader, out), end="", file=sys.stderr)
        write_rows(csv_path, rows)
    from tqdm import tqdm

    bar = tqdm(total=len(todo), unit="handin", disable=not progress, file=sys.stderr)
    start = time.monotonic()
    processes: dict[int, object] = {}  # thread -> the make process it runs
    stopping = threading.Event()

    def record(future, key: str, handin: Handin, digest: str, note: str) -> None:
        try:
            graded = future.result()
        except InterruptedError:
            return
        try:
            feedback_path(out, key).write_text(graded.output, encoding="utf-8", errors="replace")
            row = row_of(handin, graded, digest, grader.identity, versions)
        except Exception as error:  # noqa: BLE001 - an unreadable result is a crashed row
            graded = grading_run.GradingRun(
                rubric.zero_scores(), None, "", graded.seconds, False,
                error=f"its result could not be read: {type(error).__name__}: {str(error)[:200]}")
            row = row_of(handin, graded, digest, grader.identity, versions)
        row["scoring"] = grader.scoring_text
        row["notes"] = "; ".join(filter(None, [note, row["notes"]]))
        rows[key] = row
        write_rows(csv_path, rows)
        bar.update(1)
        bar.set_postfix(per_minute=f"{bar.n / max(time.monotonic() - start, 1e-9) * 60:.1f}")

    pool = ThreadPoolExecutor(max_workers=jobs)
    running = {pool.submit(grade_one, handin, source, grader_flags, jobs, processes,
                           stopping): (key, handin, digest, note)
               for key, (handin, digest, note) in todo.items()}

    def drain() -> None:
        while running:
            done, _ = wait(running, return_when=FIRST_COMPLETED)
            for future in done:
                record(future, *running.pop(future))

    try:
        try:
            drain()
        except KeyboardInterrupt:
            cancelled = [future for future in running if future.cancel()]
            for future in cancelled:
                del running[future]
            pending = len(cancelled)
            print(f"\ninterrupted: {pending} not started; waiting for the {len(running)} running "
                  f"(Ctrl-C again to stop them); {csv_path} holds every finished row",
                  file=sys.stderr)
            try:
                drain()
            except KeyboardInterrupt:
                stopping.set()
                print(f"\nstopping the {len(running)} running gradings and removing their "
                      f"folders; every finished row is kept", file=sys.stderr)
                for process in list(processes.values()):
                    grading_run.stop(process)
                wait(running)
            raise KeyboardInterrupt from None
    finally:
        bar.close()
        pool.shutdown(wait=True, cancel_futures=True)
        write_rows(csv_path, rows)
    print(summarize(rows, out), end="", file=sys.stderr)
    return rows


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Grade every handin of a bulk download with the "
                                                 "hw4p1 judge; write grades.csv, feedback and a "
                                                 "summary.")
    parser.add_argument("handins", type=Path, nargs="?",
                        help="the bulk download's folder (not with --rescore-only)")
    parser.add_argument("--out", type=Path, default=Path("regrade"),
                        help="where grades.csv, feedback/ and the summary go (default: regrade/)")
    parser.add_argument("--autograder", type=Path, default=Path("dist"),
                        help="the folder holding autograde.tar and autograde-Makefile "
                             "(default: dist/, from make autograde)")
    parser.add_argument("--jobs", type=int, default=1,
                        help="handins graded at once (see `make bench BENCH=bench_regrade` for "
                             "the memory each needs)")
    parser.add_argument("--versions", choices=VERSION_CHOICES, default="latest",
                        help="grade each student's highest version (default) or every version")
    parser.add_argument("--only", nargs="+", metavar="STUDENT",
                        help="grade only these students (as named in grades.csv); other rows "
                             "are kept")
    parser.add_argument("--force", action="store_true",
                        help="grade again handins already graded by this grader")
    parser.add_argument("--grader-flags", default="", help="GRADER_FLAGS for every grading")
    parser.add_argument("--rescore-only", action="store_true",
                        help="rescore OUT's grades.csv under the grader's scoring line without "
                             "the handins (make rescore); nothing is graded")
    args = parser.parse_args(argv)
    if args.rescore_only:
        if args.handins is not None:
            parser.error("--rescore-only grades nothing: leave out the handins' folder")
        rescore_class(args.out, args.autograder)
        return
    if args.handins is None:
        parser.error("give the bulk download's folder (make regrade HANDINS=<folder>)")
    try:
        regrade(args.handins, args.out, args.autograder, args.jobs, args.grader_flags,
                progress=os.environ.get("TQDM_DISABLE") != "1", versions=args.versions,
                only=args.only, force=args.force)
    except KeyboardInterrupt:
        sys.exit(130)


if __name__ == "__main__":
    main()
