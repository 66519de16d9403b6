"""Grade a whole class: every handin of a bulk download, through the same judge as Autolab.

    python -m autograder.classroom.regrade HANDINS [--out regrade] [--jobs 2] [--autograder dist]
                                 [--versions latest|all] [--only STUDENT ...] [--force]
                                 [--fresh] [--autolab-zone America/New_York]
    make regrade HANDINS=folder [JOBS=2] [ARGS='--versions all']

``HANDINS`` holds the handins in either platform's bulk-download layout:

- Autolab ("Download all submissions", every version): one archive per version,
  ``<email>_<version>_handin.tar`` (or .tar.gz, .tgz, .zip). A browser's re-download into the same
  folder (``..._handin (1).tar``) is the same version: identical copies count once, and of two
  different files of one version the newer is graded, with a note. An archive without a
  ``_<version>_`` part (``<student>.tar``) is that student's only version. The download's zip
  itself (every file in it an Autolab-named handin), unpacked in place, is skipped; with
  ``--autolab-zone`` (the server's IANA zone) each handin's submission time is its entry time in
  that zip (a file's local time, without a zone: approximate, noted).
- Gradescope ("Export Submissions"): one folder per submission, ``submission_<id>/`` holding
  ``handin.tar`` (or the only tar or zip in it), and ``submission_metadata.yml`` beside them; each
  row is named by the submitter's email (else SID) and carries their name, email, SID and
  submission time; a group's row carries every member's, joined by "; ", and is named by its first
  member. Of several submissions by the same members the latest submitted is graded. A folder the
  metadata does not list is named by the folder.

``--versions latest`` (the default) grades the highest version of each student; ``all`` grades
every version, one row each. The choice is in the CSV (``versions_graded``), beside the version
graded and the number found.

Each handin is graded in a fresh folder as ``make`` grades it with ``dist/autograde.tar`` and
``dist/autograde-Makefile`` (``autograder/judging/grading_run.py``, as Gradescope's adapter does):
the same judge, sandbox and limits as Autolab. Each job slot forks its judges from a zygote that
imported torch once (``autograder/judging/isolation/judge_zygote.py``) rather than have make start
one, where the grader's Makefile has the rules this code writes (else make runs); a zygote that
cannot fork one leaves that grading to make. ``--jobs N`` grades N at once, each isolated from the
others by the sandbox. Whatever one handin does, or whatever goes wrong in grading it, in removing
its folder or in reading its output, it becomes that student's row (``crashed``, with the error in
``notes``); the run always finishes.

``OUT`` receives ``grades.csv`` (one row per student, rewritten atomically after each grading, so
an interrupted run leaves a valid file): status, the points of each category, the points of each
hidden test (``test:<name>``) and its seconds (``test_seconds:<name>``: from the judge's request
for it to its answer, by the judge's clock), the seconds of each category
(``seconds:<category>``), the likely causes of failed tests, and ``flags`` for the staff: the
judge's integrity notes, weights byte-identical to another student's or within
``autograder/judging/scoring/weights_fingerprint.py``'s tolerance of what another's learned
(``shares its weights with ...``, with the distance), a mytorch that builds code at run time and
what else the judge's static inspection found (``autograder/judging/intake/static_inspection.py``,
read from its report: a file or mytorch that could not be inspected, a graded file that defines no
graded class of its own; with the judge's notes in ``integrity_flags``). Also
``feedback/<student>.txt`` (the report Autolab shows), ``summary.txt`` (counts, every timeout,
invalid, crashed and flagged student by name, and the next step for each kind of problem present,
then the gradebook's) and ``summary.png`` (the histogram of totals). The staff's own decisions are
``OUT/adjustments.csv`` (``autograder/classroom/adjustments.py``), applied on every write of
grades.csv (``adjusted_total``, ``adjustments``, the feedback's first lines); a hand edit of
grades.csv's points stops the run before anything is graded, naming the line that keeps it.

A rerun grades again only what changed, and says why for each handin: a handin not graded yet, or
whose file (``handin_sha256``) or grader (``grader_sha256``: its code and hidden set) changed, is
graded; a row whose grader is the same but whose scoring line (``scoring``: the points and the
language model's thresholds) changed is rescored from its recorded results in a moment
(``autograder/classroom/rescore.py``, which ``make rescore`` runs alone); the others are kept,
except a timeout, which is graded once more (the host may have been the cause; ``notes`` says so),
and a crashed row (the grader failed, not the student), which every run grades again, ``--only``
included.
``rescore.txt`` lists the rows a rescore changed, and how. A kept or rescored row's name, email,
SID, version, submission time and group are the current download's (``grades_csv.IDENTITY``); a row
whose handin is no longer in the download leaves the table, listed. Where most of OUT's students
are not in the download, OUT holds another (a former term): refused, naming the count, unless
``--fresh`` moves OUT's files to ``OUT/replaced-<time>/`` and starts clean. ``--force`` grades
again whatever was graded; ``--only`` grades those students alone (other rows are kept). Ctrl-C
once: no new grading starts, those under way finish and are written (every process of a grading
runs in a session of its own, so a terminal's Ctrl-C, sent to the regrade's whole process group,
reaches none of them). Ctrl-C twice: the running gradings are stopped and their folders removed;
every finished row is kept. A grading cut short (Ctrl-C twice, the regrade killed, a power cut)
leaves no row, so the next run grades it.
"""
from __future__ import annotations

import argparse
import os
import re
import sys
import threading
import time
import traceback
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from datetime import tzinfo
from pathlib import Path

from autograder.judging import grading_run
from autograder.judging.isolation import judge_zygote
from autograder.judging.scoring import rubric
from autograder.classroom import rescore
from autograder.classroom.class_summary import summarize
from autograder.classroom import adjustments
from autograder.classroom.grades_csv import (RETRIED_NOTE, feedback_path, identity_of,
                                             read_rows, read_settled, row_of, write_rows)
from autograder.classroom.handins import VERSION_CHOICES, Handin, find_handins
from autograder.classroom.late_policy import time_zone
from autograder.judging.scoring.report import Status
from hw4lib.file_io import file_sha256

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


def grade_one(handin: Handin, source: Path, grader_flags: str, gradings: int,
              processes: dict[int, object], interrupted: threading.Event,
              stopping: threading.Event,
              zygotes: judge_zygote.Zygotes | None = None) -> grading_run.GradingRun:
    """One grading, whatever happens: its GradingRun (``error`` says what failed). ``gradings``:
    how many run side by side (the judge shares the CPUs out between them). InterruptedError,
    before anything starts, once the run is ``interrupted`` (a pool thread may take the next
    handin in the instant before the interrupt cancels it); ``stopping``: stop the running ones.
    ``zygotes``: fork the judge from this thread's zygote rather than run make."""
    start = time.monotonic()
    if interrupted.is_set():
        raise InterruptedError
    ident = threading.get_ident()

    def started(process) -> None:
        processes[ident] = process
        if stopping.is_set():
            grading_run.stop(process)

    try:
        zygote = zygotes.for_this_thread() if zygotes is not None else None
        graded = grading_run.run(grading_run.prepare(source, handin.path), grader_flags,
                                 gradings=gradings, started=started, zygote=zygote)
    except Exception as error:  # noqa: BLE001 - one handin never ends a class run
        last = traceback.extract_tb(error.__traceback__)[-1]
        graded = crashed(time.monotonic() - start, traceback.format_exc(),
                         f"the grading failed: {described(error)} "
                         f"({Path(last.filename).name}:{last.lineno})")
    finally:
        processes.pop(ident, None)
    if graded.status is Status.CRASHED and not graded.error:
        graded.error = f"the judge failed: {last_exception(graded.output)} (see its feedback)"
    return graded


def crashed(seconds: float, output: str, error: str) -> grading_run.GradingRun:
    """A grading that could not be run or its result read, after ``seconds``: zero points, no
    report, not timed out, ``output`` for its feedback, ``error`` saying why (its status:
    crashed)."""
    return grading_run.GradingRun(rubric.zero_scores(), None, output, seconds, False, error=error)


def described(error: BaseException) -> str:
    """``'<its type>: <its message>'``, the message cut at 200 characters."""
    return f"{type(error).__name__}: {str(error)[:200]}"


def last_exception(output: str) -> str:
    """The last 'SomeError: message' line of a traceback in ``output`` (shortened), or '?'."""
    lines = [line for line in output.splitlines()
             if re.match(r"[A-Za-z_][\w.]*(Error|Exception|Interrupt|Exit)\b", line)]
    return lines[-1][:200] if lines else "no traceback in its output"


# The longest the main thread waits without looking for a signal: the kernel may hand a Ctrl-C to
# a pool thread, and Python acts on it only when the main thread runs again.
WAKE_S = 0.2


def regrade(handins_dir: Path, out: Path, source: Path, jobs: int = 1,
            grader_flags: str = "", progress: bool = True, versions: str = "latest",
            only: list[str] | None = None, force: bool = False,
            zygotes: bool = True, fresh: bool = False,
            autolab_zone: tzinfo | None = None) -> dict[str, dict]:
    """Grade the handins under ``handins_dir`` this grader has not graded (see the module
    docstring); return every row. ``zygotes``: fork each judge from a zygote of its job slot
    (``autograder/judging/isolation/judge_zygote.py``) where the grader's Makefile allows; else
    make. The steps: :func:`plan`, :func:`grade_in_pool` with a :class:`Recorder`,
    :func:`interrupt`."""
    grader = rescore.grader_in(source)
    if jobs < 1:
        raise SystemExit(f"--jobs must be at least 1, got {jobs}")
    rows, todo = plan(find_handins(handins_dir, versions, autolab_zone), out, grader, jobs,
                      versions, only, force, fresh)
    record = Recorder(out, rows, grader, versions, len(todo), progress)
    try:
        grade_in_pool(todo, source, grader_flags, jobs, zygotes, record)
    finally:
        record.close()
        write_rows(out / "grades.csv", rows, record.staff)
    print(summarize(rows, out), end="", file=sys.stderr)
    return rows


def plan(handins: dict[str, Handin], out: Path, grader: rescore.Grader, jobs: int,
         versions: str, only: list[str] | None, force: bool, fresh: bool
         ) -> tuple[dict[str, dict], dict[str, tuple[Handin, str, str]]]:
    """(every row of OUT's grades.csv this run keeps, rescored already; {key: (handin, its
    sha256, note)} of the ``handins`` to grade): says why each is graded, rescored or kept, and
    rescores those whose scoring line alone changed."""
    csv_path = out / "grades.csv"
    # --fresh sets the old rows aside whatever was typed into them
    rows = kept_rows(read_rows(csv_path) if fresh else read_settled(csv_path)[0], handins,
                     versions, out, fresh)
    (out / "feedback").mkdir(parents=True, exist_ok=True)
    todo, rescoring, reasons = to_grade(handins, rows, grader, force, only)
    print(f"{len(handins)} handins, {len(handins) - len(todo)} already graded by this grader, "
          f"{len(todo)} to grade with --jobs {jobs}:", file=sys.stderr)
    print("\n".join(rescore.why_lines(reasons)), file=sys.stderr)
    if rescoring:
        print(rescore.apply_rescore(rows, rescoring, grader, out), end="", file=sys.stderr)
        write_rows(csv_path, rows)
    return rows, todo


def kept_rows(old: dict[str, dict], handins: dict[str, Handin], versions: str, out: Path,
              fresh: bool) -> dict[str, dict]:
    """The rows of OUT's grades.csv (``old``) this download keeps, each with the IDENTITY its
    handin has now (its grading is reused or not by :func:`to_grade`). A row whose handin is no
    longer in the download leaves the table, listed. Where most of OUT's students are not in it,
    OUT holds another download (a former term, another assignment): refused, unless ``fresh``,
    which moves OUT's files aside and starts clean."""
    graded = {row["student"] for row in old.values()}
    gone = graded - {handin.student for handin in handins.values()}
    moved = out / f"replaced-{time.strftime('%Y%m%dT%H%M%S')}"
    if len(gone) * 2 > len(graded) and not fresh:
        raise SystemExit(f"{len(gone)} of the {len(graded)} students graded in "
                         f"{out / 'grades.csv'} are not in this download: it holds another "
                         f"download's grading (a former term, another assignment). Give another "
                         f"--out (make regrade ... OUT=<folder>), or --fresh to start clean here "
                         f"(OUT's files move to {moved.name}/)")
    if fresh and old:
        moved.mkdir()
        for name in ("grades.csv", "feedback", "summary.txt", "summary.png", "rescore.txt",
                     adjustments.FILE_NAME):
            if (out / name).exists():
                (out / name).rename(moved / name)
        print(f"--fresh: {out}'s files moved to {moved}; every handin is graded",
              file=sys.stderr)
        return {}
    removed = sorted(key for key in old if key not in handins)
    if removed:
        print(f"{len(removed)} rows left grades.csv, their handins are not in this download "
              f"(a student no longer in it, or --versions changed): {', '.join(removed)}",
              file=sys.stderr)
    return {key: {**row, **identity_of(handins[key], versions)} for key, row in old.items()
            if key in handins}


class Recorder:
    """Writes each finished grading as its student's row: feedback, then grades.csv rewritten
    atomically (an interrupted run leaves a valid file), and the progress bar."""

    def __init__(self, out: Path, rows: dict[str, dict], grader: rescore.Grader, versions: str,
                 count: int, progress: bool) -> None:
        from tqdm import tqdm

        self.out, self.rows, self.grader, self.versions = out, rows, grader, versions
        # read once: a file the TA breaks during the run cannot stop it
        self.staff = adjustments.read(adjustments.beside(out / "grades.csv"))
        self.bar = tqdm(total=count, unit="handin", disable=not progress, file=sys.stderr)
        self.start = time.monotonic()

    def __call__(self, future: Future, key: str, handin: Handin, digest: str, note: str) -> None:
        """Record ``future``'s grading of ``handin``; one never started (a Ctrl-C) records
        nothing. A result that cannot be read is a crashed row."""
        try:
            graded = future.result()
        except InterruptedError:
            return
        try:
            feedback_path(self.out, key).write_text(graded.output, encoding="utf-8",
                                                    errors="replace")
            row = row_of(handin, graded, digest, self.grader.identity, self.versions)
        except Exception as error:  # noqa: BLE001 - an unreadable result is a crashed row
            graded = crashed(graded.seconds, "",
                             f"its result could not be read: {described(error)}")
            row = row_of(handin, graded, digest, self.grader.identity, self.versions)
        row["scoring"] = self.grader.scoring_text
        row["notes"] = "; ".join(filter(None, [note, row["notes"]]))
        self.rows[key] = row
        write_rows(self.out / "grades.csv", self.rows, self.staff)
        self.bar.update(1)
        self.bar.set_postfix(
            per_minute=f"{self.bar.n / max(time.monotonic() - self.start, 1e-9) * 60:.1f}")

    def close(self) -> None:
        self.bar.close()


@dataclass
class Stages:
    """What the pool's threads share with the main thread: each thread's judge process (make, or
    forked), and the two stages of a Ctrl-C (no new grading starts; the running ones stop)."""

    processes: dict[int, object] = field(default_factory=dict)
    interrupted: threading.Event = field(default_factory=threading.Event)
    stopping: threading.Event = field(default_factory=threading.Event)


Running = dict[Future, tuple[str, Handin, str, str]]  # future -> (key, handin, digest, note)


def grade_in_pool(todo: dict[str, tuple[Handin, str, str]], source: Path, grader_flags: str,
                  jobs: int, zygotes: bool, record: Recorder) -> None:
    """Grade ``todo`` ``jobs`` at a time, each judge forked from its slot's zygote where the
    grader allows; ``record`` each as it finishes. A Ctrl-C goes to :func:`interrupt`."""
    stages = Stages()
    forks = (judge_zygote.Zygotes(sys.executable, grading_run.judge_environment(jobs))
             if zygotes and todo and grading_run.zygote_can_grade(source) else None)
    pool = ThreadPoolExecutor(max_workers=jobs)
    try:
        running: Running = {
            pool.submit(grade_one, handin, source, grader_flags, jobs, stages.processes,
                        stages.interrupted, stages.stopping, forks): (key, handin, digest, note)
            for key, (handin, digest, note) in todo.items()}
        try:
            drain(running, record)
        except KeyboardInterrupt:
            interrupt(running, record, stages, record.out / "grades.csv")
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
        if forks is not None:
            forks.close()


def drain(running: Running, record: Recorder) -> None:
    """Record each grading of ``running`` as it finishes, waking every WAKE_S for a Ctrl-C."""
    while running:
        done, _ = wait(running, timeout=WAKE_S, return_when=FIRST_COMPLETED)
        for future in done:
            # Forgotten once recorded: a Ctrl-C while it is written leaves it to be recorded again.
            record(future, *running[future])
            del running[future]


def interrupt(running: Running, record: Recorder, stages: Stages, csv_path: Path) -> None:
    """After a first Ctrl-C: cancel the gradings not started and record the running ones as they
    finish; a second Ctrl-C stops those (their folders removed). Raises KeyboardInterrupt."""
    stages.interrupted.set()
    cancelled = [future for future in running if future.cancel()]
    for future in cancelled:
        del running[future]
    print(f"\ninterrupted: {len(cancelled)} not started; waiting for the {len(running)} running "
          f"(Ctrl-C again to stop them); {csv_path} holds every finished row", file=sys.stderr)
    try:
        drain(running, record)
    except KeyboardInterrupt:
        stages.stopping.set()
        print(f"\nstopping the {len(running)} running gradings and removing their "
              f"folders; every finished row is kept", file=sys.stderr)
        for process in list(stages.processes.values()):
            grading_run.stop(process)
        wait(running)
    raise KeyboardInterrupt from None


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
    parser.add_argument("--fresh", action="store_true",
                        help="start clean: OUT's files move to OUT/replaced-<time>/ (for a "
                             "new term in the same OUT)")
    parser.add_argument("--autolab-zone", metavar="NAME",
                        help="the Autolab server's time zone (IANA, e.g. America/New_York): read "
                             "each handin's approximate submission time from the download zip's "
                             "entry times (the zip beside its unpacked handins)")
    parser.add_argument("--grader-flags", default="", help="GRADER_FLAGS for every grading")
    parser.add_argument("--rescore-only", action="store_true",
                        help="rescore OUT's grades.csv under the grader's scoring line without "
                             "the handins (make rescore); nothing is graded")
    args = parser.parse_args(argv)
    if args.rescore_only:
        if args.handins is not None:
            parser.error("--rescore-only grades nothing: leave out the handins' folder")
        rescore.rescore_class(args.out, args.autograder)
        return
    if args.handins is None:
        parser.error("give the bulk download's folder (make regrade HANDINS=<folder>)")
    try:
        regrade(args.handins, args.out, args.autograder, args.jobs, args.grader_flags,
                progress=os.environ.get("TQDM_DISABLE") != "1", versions=args.versions,
                only=args.only, force=args.force, fresh=args.fresh,
                autolab_zone=time_zone(args.autolab_zone, "--autolab-zone"))
    except KeyboardInterrupt:
        sys.exit(130)


if __name__ == "__main__":
    main()
