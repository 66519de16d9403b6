"""Grade a whole class: every handin of a bulk download, through the same judge as Autolab.

    python -m autograder.regrade HANDINS [--out regrade] [--jobs 2] [--autograder dist]
    make regrade HANDINS=folder [JOBS=2]

``HANDINS`` holds one handin per student, in either platform's bulk-download layout:

- Autolab ("Download all submissions"): one archive per student, ``<student>.tar`` (or .tar.gz,
  .tgz, .zip). Autolab names them ``<email>_<version>_handin.tar``; the student is the name before
  ``_handin``.
- Gradescope ("Export Submissions"): one folder per submission, ``<student>/handin.tar`` (or the
  only tar or zip in it; ``submission_metadata.yml`` and other files are ignored).

Each handin is graded in a fresh folder by ``make`` with ``dist/autograde.tar`` and
``dist/autograde-Makefile`` (``autograder/grading_run.py``, as Gradescope's adapter does): the same
judge, sandbox and limits as Autolab. ``--jobs N`` grades N at once, each isolated from the others
by the sandbox (a fresh uid or namespaces per grading, the worker tree's cgroup or single process).

``OUT`` receives ``grades.csv`` (one row per student, rewritten atomically after each grading, so
an interrupted run leaves a valid file), ``feedback/<student>.txt`` (the report Autolab shows),
``summary.txt`` and ``summary.png`` (counts per status, the histogram of totals). A rerun skips the
students whose handin and grader are unchanged (their sha256 are in the CSV).
"""
from __future__ import annotations

import argparse
import csv
import hashlib
import os
import re
import sys
import time
from collections import Counter
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
from pathlib import Path

from autograder import grading_run, rubric
from autograder.gradescope import find_handin

ARCHIVE_SUFFIXES = (".tar", ".tar.gz", ".tgz", ".zip")
COLUMNS = ["student", "status", *rubric.RUBRIC, "total", "perplexity_recomputed",
           "perplexity_reported", "parameters", "tokenizer", "seconds", "likely_causes", "flags",
           "handin_sha256", "grader_sha256"]


def find_handins(folder: Path) -> dict[str, Path]:
    """{student: handin archive} for both layouts (see the module docstring)."""
    if not folder.is_dir():
        raise SystemExit(f"{folder} is not a folder: give the folder of a bulk download")
    handins: dict[str, Path] = {}
    for path in sorted(folder.iterdir()):
        if path.is_dir():
            found = find_handin(path)
            if found is None:
                print(f"skipped {path.name}/: no handin.tar and not exactly one tar or zip in it",
                      file=sys.stderr)
                continue
            student = path.name
        elif path.name.endswith(ARCHIVE_SUFFIXES):
            found = path
            student = re.sub(r"(_\d+)?_handin$", "",
                             re.sub(r"(\.tar\.gz|\.tgz|\.tar|\.zip)$", "", path.name))
        else:
            continue
        student = re.sub(r"[^A-Za-z0-9@._+-]", "_", student)
        if student in handins:
            raise SystemExit(f"two handins for {student}: {handins[student]} and {found}; keep one")
        handins[student] = found
    return handins


def sha256(*paths: Path) -> str:
    digest = hashlib.sha256()
    for path in paths:
        with open(path, "rb") as file:
            for block in iter(lambda: file.read(1 << 20), b""):
                digest.update(block)
    return digest.hexdigest()


def row_of(student: str, graded: grading_run.GradingRun, handin_sha: str, grader_sha: str) -> dict:
    lm = graded.details.get("lm") if isinstance(graded.details.get("lm"), dict) else {}
    return {"student": student, "status": graded.status, **graded.scores,
            "total": round(sum(graded.scores.values()), 2),
            "perplexity_recomputed": lm.get("perplexity_char", ""),
            "perplexity_reported": lm.get("reported_perplexity_char") or "",
            "parameters": lm.get("num_parameters") or "", "tokenizer": lm.get("token_type") or "",
            "seconds": round(graded.seconds, 1),
            "likely_causes": " ".join(likely_causes(graded.details)),
            "flags": "; ".join(graded.details.get("flags") or []),
            "handin_sha256": handin_sha, "grader_sha256": grader_sha}


def likely_causes(details: dict) -> list[str]:
    """The bug families the hints named for a handin's failed hidden tests (sorted, once each)."""
    tests = details.get("tests") if isinstance(details.get("tests"), list) else []
    return sorted({test["family"] for test in tests
                   if isinstance(test, dict) and isinstance(test.get("family"), str)
                   and re.fullmatch(r"[a-z0-9-]+", test["family"])})


def read_rows(path: Path) -> dict[str, dict]:
    if not path.is_file():
        return {}
    with open(path, newline="", encoding="utf-8") as file:
        return {row["student"]: row for row in csv.DictReader(file) if row.get("student")}


def write_rows(path: Path, rows: dict[str, dict]) -> None:
    """The CSV, replaced atomically: a reader (or an interrupted run) never sees half a file."""
    partial = path.with_name(path.name + ".partial")
    with open(partial, "w", newline="", encoding="utf-8") as file:
        writer = csv.DictWriter(file, fieldnames=COLUMNS)
        writer.writeheader()
        for student in sorted(rows):
            writer.writerow({column: rows[student].get(column, "") for column in COLUMNS})
    partial.replace(path)


def summarize(rows: dict[str, dict], out: Path) -> str:
    """summary.txt and summary.png; returns the text."""
    counts = {status: sum(row["status"] == status for row in rows.values()) for status in grading_run.STATUSES}
    totals = [float(row["total"]) for row in rows.values()]
    maximum = sum(rubric.RUBRIC.values())
    causes = Counter(cause for row in rows.values()
                     for cause in row.get("likely_causes", "").split())
    text = (f"{len(rows)} handins: " + ", ".join(f"{n} {s}" for s, n in counts.items()) + "\n"
            + (f"total: mean {sum(totals) / len(totals):.2f}, min {min(totals):g}, "
               f"max {max(totals):g} (of {maximum})\n" if totals else "")
            + ("likely causes of failed hidden tests (students): "
               + ", ".join(f"{cause} {n}" for cause, n in causes.most_common()) + "\n"
               if causes else ""))
    (out / "summary.txt").write_text(text, encoding="utf-8")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axis = plt.subplots(figsize=(6, 3.5))
    axis.hist(totals, bins=20, range=(0, maximum), color="#4c72b0", edgecolor="white")
    axis.set_xlabel(f"total score (of {maximum})")
    axis.set_ylabel("students")
    axis.set_title(", ".join(f"{n} {s}" for s, n in counts.items() if n))
    figure.tight_layout()
    figure.savefig(out / "summary.png", dpi=120)
    plt.close(figure)
    return text


def regrade(handins_dir: Path, out: Path, source: Path, jobs: int = 1,
            grader_flags: str = "", progress: bool = True) -> dict[str, dict]:
    """Grade every handin under ``handins_dir`` not already graded by this grader; return the rows."""
    for name in (grading_run.AUTOGRADE_TAR, grading_run.MAKEFILE):
        if not (source / name).is_file():
            raise SystemExit(f"{source / name} not found: run `make autograde` first (or give "
                             f"--autograder the folder holding {grading_run.AUTOGRADE_TAR} and "
                             f"{grading_run.MAKEFILE})")
    if jobs < 1:
        raise SystemExit(f"--jobs must be at least 1, got {jobs}")
    handins = find_handins(handins_dir)
    (out / "feedback").mkdir(parents=True, exist_ok=True)
    csv_path = out / "grades.csv"
    grader_sha = sha256(source / grading_run.AUTOGRADE_TAR, source / grading_run.MAKEFILE)
    rows = {student: row for student, row in read_rows(csv_path).items() if student in handins}
    todo = {student: (path, sha256(path)) for student, path in handins.items()}
    todo = {student: (path, digest) for student, (path, digest) in todo.items()
            if not (student in rows and rows[student].get("handin_sha256") == digest
                    and rows[student].get("grader_sha256") == grader_sha)}
    print(f"{len(handins)} handins, {len(handins) - len(todo)} already graded by this grader, "
          f"{len(todo)} to grade with --jobs {jobs}", file=sys.stderr)
    from tqdm import tqdm

    bar = tqdm(total=len(todo), unit="handin", disable=not progress, file=sys.stderr)
    start = time.monotonic()

    threads = max(1, (os.cpu_count() or 1) // jobs)  # the CPUs shared out between the gradings

    def grade_one(student: str, handin: Path) -> grading_run.GradingRun:
        return grading_run.run(grading_run.prepare(source, handin), grader_flags, threads=threads)

    pool = ThreadPoolExecutor(max_workers=jobs)
    running = {pool.submit(grade_one, student, path): (student, digest)
               for student, (path, digest) in todo.items()}
    try:
        while running:
            done, _ = wait(running, return_when=FIRST_COMPLETED)
            for future in done:
                student, digest = running.pop(future)
                graded = future.result()
                (out / "feedback" / f"{student}.txt").write_text(graded.output, encoding="utf-8")
                rows[student] = row_of(student, graded, digest, grader_sha)
                write_rows(csv_path, rows)
                bar.update(1)
                bar.set_postfix(per_minute=f"{bar.n / max(time.monotonic() - start, 1e-9) * 60:.1f}")
    except KeyboardInterrupt:
        pending = sum(future.cancel() for future in running)
        print(f"\ninterrupted: {pending} not started; waiting for the {len(running) - pending} "
              f"running (Ctrl-C again to leave them); {csv_path} holds every finished row",
              file=sys.stderr)
        pool.shutdown(wait=True, cancel_futures=True)
        raise
    finally:
        bar.close()
        write_rows(csv_path, rows)
    pool.shutdown()
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
                        help="handins graded at once (see `make bench BENCH=regrade` for the "
                             "memory each needs)")
    parser.add_argument("--grader-flags", default="", help="GRADER_FLAGS for every grading")
    args = parser.parse_args(argv)
    try:
        regrade(args.handins, args.out, args.autograder, args.jobs, args.grader_flags,
                progress=os.environ.get("TQDM_DISABLE") != "1")
    except KeyboardInterrupt:
        sys.exit(130)


if __name__ == "__main__":
    main()
