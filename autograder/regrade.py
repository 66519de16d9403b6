"""Grade a whole class: every handin of a bulk download, through the same judge as Autolab.

    python -m autograder.regrade HANDINS [--out regrade] [--jobs 2] [--autograder dist]
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
  submission time. A folder the metadata does not list is named by the folder.

``--versions latest`` (the default) grades the highest version of each student; ``all`` grades
every version, one row each. The choice is in the CSV (``versions_graded``), beside the version
graded and the number found.

Each handin is graded in a fresh folder by ``make`` with ``dist/autograde.tar`` and
``dist/autograde-Makefile`` (``autograder/grading_run.py``, as Gradescope's adapter does): the same
judge, sandbox and limits as Autolab. ``--jobs N`` grades N at once, each isolated from the others
by the sandbox. Whatever one handin does, or whatever goes wrong in grading it, in removing its
folder or in reading its output, it becomes that student's row (``crashed``, with the error in
``notes``); the run always finishes.

``OUT`` receives ``grades.csv`` (one row per student, rewritten atomically after each grading, so
an interrupted run leaves a valid file): status, the points of each category, the points of each
hidden test (``test:<name>``) and its seconds (``test_seconds:<name>``: from the judge's request
for it to its answer, by the judge's clock), the seconds of each category
(``seconds:<category>``), the likely causes of failed tests, and ``flags`` for the staff: the
judge's integrity notes, weights byte-identical to another student's (``shares its weights with
...``) and a mytorch that builds code at run time (``autograder/similarity.py``'s check). Also
``feedback/<student>.txt`` (the report Autolab shows), ``summary.txt`` (counts, and every timeout,
invalid, crashed and flagged student by name) and ``summary.png`` (the histogram of totals).

A rerun skips the rows whose handin and grader are unchanged (their sha256 are in the CSV), except
a timeout, which is graded once more (the host may have been the cause; ``notes`` says so).
``--force`` grades again whatever was graded; ``--only`` grades those students alone (other rows
are kept). Ctrl-C once: no new grading starts, those under way finish and are written. Ctrl-C
twice: the running gradings are stopped and their folders removed; every finished row is kept.
"""
from __future__ import annotations

import argparse
import csv
import os
import re
import sys
import tempfile
import threading
import time
import traceback
from collections import Counter
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
from pathlib import Path

from autograder import file_trees, grading_run, rubric, similarity
from autograder.handins import VERSION_CHOICES, Handin, find_handins, sha256
from hw4lib.handin_format import STATE_DICT_FILE

COLUMNS = ["student", "name", "email", "sid", "version", "versions_found", "versions_graded",
           "submitted_at", "status", *rubric.RUBRIC, "total", "perplexity_recomputed",
           "perplexity_reported", "parameters", "tokenizer", "seconds", "likely_causes", "flags",
           "notes", "integrity_flags", "runtime_code", "weights_sha256", "handin_sha256",
           "grader_sha256"]
RETRIED_NOTE = "graded again after a timeout (the host may have been the cause)"


def inspect_handin(archive: Path) -> tuple[str, list[str]]:
    """(sha256 of the handin's state dict or '', the ways its mytorch builds code at run time),
    read by the grader's own extractor (``safe_tar``), never run."""
    from autograder.safe_tar import HandinError, extract_handin

    work = Path(tempfile.mkdtemp(prefix="hw4p1-regrade-inspect-"))
    try:
        extraction = extract_handin(archive.resolve(), work / "handin")
        weights = extraction.files.get(STATE_DICT_FILE)
        return (sha256(weights) if weights is not None else "",
                similarity.runtime_code(similarity.mytorch_sources(extraction.files)))
    except HandinError:
        return "", []
    finally:
        file_trees.remove_tree(work)


def row_of(handin: Handin, graded: grading_run.GradingRun, handin_sha: str, grader_sha: str,
           versions: str) -> dict:
    lm = graded.details.get("lm") if isinstance(graded.details.get("lm"), dict) else {}
    tests = [test for test in graded.details.get("tests") or [] if isinstance(test, dict)
             and isinstance(test.get("name"), str) and isinstance(test.get("points"), (int, float))]
    seconds = graded.details.get("seconds") if isinstance(graded.details.get("seconds"), dict) else {}
    integrity = [flag.replace("; ", ", ")  # "; " separates the flags in the CSV
                 for flag in graded.details.get("flags") or [] if isinstance(flag, str)]
    notes = [note for note in (handin.note, graded.error) if note]
    return {"student": handin.student, "name": handin.name, "email": handin.email,
            "sid": handin.sid, "version": handin.version, "versions_found": handin.versions_found,
            "versions_graded": versions, "submitted_at": handin.submitted_at,
            "status": graded.status, **graded.scores,
            "total": round(sum(graded.scores.values()), 2),
            "perplexity_recomputed": lm.get("perplexity_char", ""),
            "perplexity_reported": lm.get("reported_perplexity_char") or "",
            "parameters": lm.get("num_parameters") or "", "tokenizer": lm.get("token_type") or "",
            "seconds": round(graded.seconds, 1),
            "likely_causes": " ".join(likely_causes(graded.details)),
            "notes": "; ".join(notes), "integrity_flags": "; ".join(integrity),
            **{f"test:{test['name']}": test["points"] for test in tests},
            **{f"test_seconds:{test['name']}": test["seconds"] for test in tests
               if isinstance(test.get("seconds"), (int, float))},
            **{f"seconds:{category}": value for category, value in seconds.items()
               if category in rubric.RUBRIC and isinstance(value, (int, float))},
            "handin_sha256": handin_sha, "grader_sha256": grader_sha}


def likely_causes(details: dict) -> list[str]:
    """The bug families the hints named for a handin's failed hidden tests (sorted, once each)."""
    tests = details.get("tests") if isinstance(details.get("tests"), list) else []
    return sorted({test["family"] for test in tests
                   if isinstance(test, dict) and isinstance(test.get("family"), str)
                   and re.fullmatch(r"[a-z0-9-]+", test["family"])})


def with_flags(rows: dict[str, dict]) -> dict[str, dict]:
    """Each row's ``flags``: the judge's integrity notes, run-time code, and weights
    byte-identical to another student's."""
    owners: dict[str, set[str]] = {}
    for row in rows.values():
        if row.get("weights_sha256"):
            owners.setdefault(row["weights_sha256"], set()).add(row["student"])
    for row in rows.values():
        flags = [flag for flag in row.get("integrity_flags", "").split("; ") if flag]
        if row.get("runtime_code"):
            flags.append(f"its mytorch builds code at run time ({row['runtime_code']})")
        others = sorted(owners.get(row.get("weights_sha256") or "", set()) - {row["student"]})
        if others:
            flags.append(f"shares its weights with {', '.join(others)} (byte-identical "
                         f"{STATE_DICT_FILE})")
        row["flags"] = "; ".join(flags)
    return rows


def read_rows(path: Path) -> dict[str, dict]:
    if not path.is_file():
        return {}
    with open(path, newline="", encoding="utf-8") as file:
        return {row_key(row): row for row in csv.DictReader(file) if row.get("student")}


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
    columns = columns_of(rows)
    partial = path.with_name(path.name + ".partial")
    with open(partial, "w", newline="", encoding="utf-8") as file:
        writer = csv.DictWriter(file, fieldnames=columns)
        writer.writeheader()
        for key in sorted(rows):
            writer.writerow({column: rows[key].get(column, "") for column in columns})
    partial.replace(path)


def summarize(rows: dict[str, dict], out: Path) -> str:
    """summary.txt and summary.png; returns the text."""
    counts = {status: sum(row["status"] == status for row in rows.values())
              for status in grading_run.STATUSES}
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
    for status in grading_run.STATUSES[1:]:
        named = sorted(key for key, row in rows.items() if row["status"] == status)
        if named:
            lines.append(f"{status}: {', '.join(named)}")
    flagged = sorted(key for key, row in rows.items() if row.get("flags"))
    if flagged:
        lines.append(f"flagged (see the flags column): {', '.join(flagged)}")
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


def to_grade(handins: dict[str, Handin], rows: dict[str, dict], grader_sha: str, force: bool,
             only: list[str] | None) -> dict[str, tuple[Handin, str, str]]:
    """{key: (handin, its sha256, note)} of the handins this run grades."""
    if only:
        unknown = sorted(set(only) - {h.student for h in handins.values()} - set(handins))
        if unknown:
            raise SystemExit(f"--only: no handin of {', '.join(unknown)} in this download "
                             f"(students: {', '.join(sorted({h.student for h in handins.values()}))})")
    todo = {}
    for key, handin in handins.items():
        if only and key not in only and handin.student not in only:
            continue
        digest = sha256(handin.path)
        row = rows.get(key, {})
        unchanged = (row.get("handin_sha256") == digest
                     and row.get("grader_sha256") == grader_sha)
        if unchanged and row.get("status") == "timeout" and RETRIED_NOTE not in row.get("notes", ""):
            todo[key] = (handin, digest, RETRIED_NOTE)
        elif force or not unchanged:
            todo[key] = (handin, digest, "")
    return todo


def grade_one(handin: Handin, source: Path, grader_flags: str, threads: int,
              processes: dict[int, object], stopping: threading.Event
              ) -> tuple[grading_run.GradingRun, str, list[str], str]:
    """One grading, whatever happens: its GradingRun (``error`` says what failed), the state
    dict's sha256 and run-time code of the handin, and why those are missing ('' if they are
    not)."""
    start = time.monotonic()
    inspected = ""
    try:
        weights, runtime = inspect_handin(handin.path)
    except Exception as error:  # noqa: BLE001 - an unreadable handin is graded all the same
        weights, runtime = "", []
        inspected = (f"its weights and mytorch could not be inspected for flags "
                     f"({type(error).__name__})")
    if stopping.is_set():
        raise InterruptedError
    ident = threading.get_ident()

    def started(process) -> None:
        processes[ident] = process
        if stopping.is_set():
            grading_run.stop(process)

    try:
        graded = grading_run.run(grading_run.prepare(source, handin.path), grader_flags,
                                 threads=threads, started=started)
    except Exception as error:  # noqa: BLE001 - one handin never ends a class run
        last = traceback.extract_tb(error.__traceback__)[-1]
        graded = grading_run.GradingRun(
            rubric.zero_scores(), {}, traceback.format_exc(), time.monotonic() - start, False,
            error=f"the grading failed: {type(error).__name__}: {str(error)[:200]} "
                  f"({Path(last.filename).name}:{last.lineno})")
    finally:
        processes.pop(ident, None)
    if graded.status == "crashed" and not graded.error:
        graded.error = f"the judge failed: {last_exception(graded.output)} (see its feedback)"
    return graded, weights, runtime, inspected


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
    for name in (grading_run.AUTOGRADE_TAR, grading_run.MAKEFILE):
        if not (source / name).is_file():
            raise SystemExit(f"{source / name} not found: run `make autograde` first (or give "
                             f"--autograder the folder holding {grading_run.AUTOGRADE_TAR} and "
                             f"{grading_run.MAKEFILE})")
    if jobs < 1:
        raise SystemExit(f"--jobs must be at least 1, got {jobs}")
    handins = find_handins(handins_dir, versions)
    (out / "feedback").mkdir(parents=True, exist_ok=True)
    csv_path = out / "grades.csv"
    grader_sha = sha256(source / grading_run.AUTOGRADE_TAR, source / grading_run.MAKEFILE)
    rows = {key: row for key, row in read_rows(csv_path).items() if key in handins}
    todo = to_grade(handins, rows, grader_sha, force, only)
    print(f"{len(handins)} handins, {len(handins) - len(todo)} already graded by this grader, "
          f"{len(todo)} to grade with --jobs {jobs}", file=sys.stderr)
    from tqdm import tqdm

    bar = tqdm(total=len(todo), unit="handin", disable=not progress, file=sys.stderr)
    start = time.monotonic()
    threads = max(1, (os.cpu_count() or 1) // jobs)  # the CPUs shared out between the gradings
    processes: dict[int, object] = {}  # thread -> the make process it runs
    stopping = threading.Event()

    def record(future, key: str, handin: Handin, digest: str, note: str) -> None:
        try:
            graded, weights, runtime, inspected = future.result()
        except InterruptedError:
            return
        try:
            feedback = out / "feedback" / f"{key.replace('#', '_v')}.txt"
            feedback.write_text(graded.output, encoding="utf-8", errors="replace")
            row = row_of(handin, graded, digest, grader_sha, versions)
        except Exception as error:  # noqa: BLE001 - an unreadable result is a crashed row
            graded = grading_run.GradingRun(
                rubric.zero_scores(), {}, "", graded.seconds, False,
                error=f"its result could not be read: {type(error).__name__}: {str(error)[:200]}")
            row = row_of(handin, graded, digest, grader_sha, versions)
        row["weights_sha256"], row["runtime_code"] = weights, ", ".join(runtime)
        row["notes"] = "; ".join(filter(None, [note, row["notes"], inspected]))
        rows[key] = row
        write_rows(csv_path, rows)
        bar.update(1)
        bar.set_postfix(per_minute=f"{bar.n / max(time.monotonic() - start, 1e-9) * 60:.1f}")

    pool = ThreadPoolExecutor(max_workers=jobs)
    running = {pool.submit(grade_one, handin, source, grader_flags, threads, processes,
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
    parser.add_argument("handins", type=Path, help="the bulk download's folder")
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
    args = parser.parse_args(argv)
    try:
        regrade(args.handins, args.out, args.autograder, args.jobs, args.grader_flags,
                progress=os.environ.get("TQDM_DISABLE") != "1", versions=args.versions,
                only=args.only, force=args.force)
    except KeyboardInterrupt:
        sys.exit(130)


if __name__ == "__main__":
    main()
