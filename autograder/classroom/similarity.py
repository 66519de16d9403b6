"""Code similarity across a class: every pair of students' handed-in ``mytorch/``, compared with
copydetect (token fingerprints with winnowing, as MOSS does; names, strings and comments are
normalised away), the handout's own code given as boilerplate so the skeleton never counts.

    python -m autograder.classroom.similarity HANDINS [--handout dist/handout] [--out similarity]
                                    [--part graded|bonus] [--past FOLDER] [--top 25]
    make similarity HANDINS=folder [ARGS='--part bonus --past past-handins']

``HANDINS`` is a bulk download in either layout ``autograder.classroom.regrade`` reads, read as it
reads them (the handin each student's row is graded from; a symlinked archive is read through its
link). Each student's code of one part becomes one document: ``graded`` (the default) the classes
the hidden tests grade, ``bonus`` the bonus track's (compared on its own: the bonus's given code,
the same for everyone, would make every pair look alike). A class is taken where the handin's
package defines it, traced statically as Python binds ``mytorch.nn.<class>`` at import (``from .impl
import *``, ``from .x import A as B``, re-exports in ``__init__``, ``A = B``; never run), with every
definition of the handin it uses, so a copy moved into modules of other names, its methods reordered
and its names changed, is compared as the code it is: the judge's own static inspection
(``autograder/judging/static_inspection.py``) on an extraction by the grader's own ``safe_tar``
(never run; a PEP 263 coding declaration is honoured). ``--past`` names a folder of past semesters'
handins (in either layout): each current student is compared with them too (past pairs among
themselves are not).

Each handin is read under its own guard (``autograder/judging/handin_guard.py``): a file or handin
that cannot be read, decoded or parsed (a codec that raises, nesting deep enough to end
``ast.parse``, a file over ``MAX_PY_FILE_BYTES``) is a finding of that student, and the run goes
on.

``OUT`` receives ``pairs.csv`` (every pair, most similar first: the share of each student's own
code, the code outside the handout, found in the other's, the overlapping tokens, and ``flagged``
at or above ``--threshold``), ``runtime_code.csv`` (each student whose mytorch builds code at run
time, and how: ``exec``, ``eval``, ``compile``, ``marshal``, ``zlib`` or ``base64`` decoding, an
importlib loader, an encoded blob: such code hides from a comparison of the source),
``findings.csv`` (each student's findings: what could not be inspected, and each graded file that
defines no graded class of its own, naming where its classes are) and ``report.html`` (small: the
``--top`` flagged pairs, labelled by student, each file by its path in the handin, only the
matching regions and a few lines around them; then the findings). Similarity is a reason to read
two handins, never a verdict.
"""
from __future__ import annotations

import argparse
import html
import re
import tempfile
from pathlib import Path
from typing import NamedTuple

from autograder.classroom import spreadsheet
from autograder.classroom.handins import find_handins
from autograder.judging import file_trees
from autograder.judging.handin_guard import guarded
from autograder.judging.safe_tar import HandinError, extract_handin
from autograder.judging.static_inspection import PARTS, Inspection, inspect_mytorch

THRESHOLD = 0.5  # the share of a student's own code found in another's that flags the pair
NOISE_TOKENS = 25  # copydetect's k: matches shorter than this (in normalised characters) are noise
TOP_PAIRS = 25  # flagged pairs shown in report.html
CONTEXT_LINES = 3  # lines shown around each matching region in report.html
PAST = "past:"  # the name prefix of a past semester's student
COLUMNS = ["student_a", "student_b", "similarity", "share_of_a", "share_of_b", "tokens", "flagged"]


def handout_document(handout: Path, part: str = "graded") -> str:
    """The handout's code of ``part`` (the skeleton students start from), as one text, read as a
    handin's is."""
    package = handout / "mytorch"
    if not package.is_dir():
        raise SystemExit(f"{package} not found: run `make handout` (or give --handout the folder "
                         f"holding the students' mytorch/)")
    return inspect_mytorch({path.relative_to(handout).as_posix(): path
                            for path in package.rglob("*.py")}, part).document


def compare(documents: dict[str, str], boilerplate: str, out: Path,
            threshold: float = THRESHOLD, past: dict[str, str] | None = None,
            top: int = TOP_PAIRS, findings: dict[str, list[str]] | None = None) -> list[dict]:
    """Every pair of ``documents`` ({student: text}), and each student with each of ``past``
    (past semesters' documents, named ``past:<student>``), most similar first; writes pairs.csv
    and report.html (the ``top`` flagged pairs, then ``findings``: {student: what the inspection
    of their handin found}) in ``out``."""
    from copydetect import CopyDetector

    out.mkdir(parents=True, exist_ok=True)
    named = {**documents, **{f"{PAST}{student}": text for student, text in (past or {}).items()}}
    work = Path(tempfile.mkdtemp(prefix="hw4p1-similarity-"))
    try:
        (work / "students").mkdir()
        (work / "boilerplate").mkdir()
        files = {}
        for index, (student, text) in enumerate(sorted(named.items())):
            files[f"{index}.py"] = student
            (work / "students" / f"{index}.py").write_text(text, encoding="utf-8")
        (work / "boilerplate" / "handout.py").write_text(boilerplate, encoding="utf-8")
        detector = CopyDetector(test_dirs=[str(work / "students")],
                                ref_dirs=[str(work / "students")],
                                boilerplate_dirs=[str(work / "boilerplate")], extensions=["py"],
                                noise_t=NOISE_TOKENS, guarantee_t=NOISE_TOKENS,
                                display_t=threshold, silent=True, autoopen=False)
        detector.run()
        students = [files[Path(name).name] for name in detector.test_files]
        rows, regions = [], {}
        for i, a in enumerate(students):
            for j, b in enumerate(students):
                if (a < b and detector.similarity_matrix[i, j, 0] >= 0
                        and not (a.startswith(PAST) and b.startswith(PAST))):
                    share_a, share_b = (float(x) for x in detector.similarity_matrix[i, j])
                    rows.append({"student_a": a, "student_b": b,
                                 "similarity": round(max(share_a, share_b), 4),
                                 "share_of_a": round(share_a, 4), "share_of_b": round(share_b, 4),
                                 "tokens": int(detector.token_overlap_matrix[i, j]),
                                 "flagged": max(share_a, share_b) >= threshold})
                    regions[a, b] = (detector.test_files[i], detector.test_files[j])
        rows.sort(key=lambda row: -row["similarity"])
        shown = [row for row in rows if row["flagged"]][:top]
        write_report(out / "report.html", shown, len(rows), threshold,
                     [matching_regions(detector, *regions[row["student_a"], row["student_b"]])
                      for row in shown], findings or {})
    finally:
        file_trees.remove_tree(work)
    spreadsheet.write_csv(out / "pairs.csv", COLUMNS, rows)
    return rows


def matching_regions(detector, file_a: str, file_b: str) -> tuple[str, str]:
    """Both documents of a pair as HTML: the matching regions highlighted, a few lines of context
    around them and the ``# file:`` line each region is under, the rest left out."""
    from copydetect.utils import highlight_overlap

    if (file_a, file_b) in detector.slice_matrix:
        slices_a, slices_b = detector.slice_matrix[file_a, file_b]
    else:
        slices_b, slices_a = detector.slice_matrix[file_b, file_a]
    return tuple(around_marks(highlight_overlap(detector.file_data[name].raw_code, slices,
                                                "<mark>", "</mark>", escape_html=True)[0])
                 for name, slices in ((file_a, slices_a), (file_b, slices_b)))


def around_marks(marked: str) -> str:
    """The lines of ``marked`` (HTML, regions in <mark>) within CONTEXT_LINES of a highlighted
    line, "..." where lines are left out, each run of lines under the ``# file:`` line it is in."""
    lines = marked.split("\n")
    highlighted, inside = [], False
    for line in lines:
        highlighted.append(inside or "<mark>" in line)
        inside = line.rfind("<mark>") > line.rfind("</mark>") or (inside and "</mark>" not in line)
    near = [any(highlighted[max(0, index - CONTEXT_LINES):index + CONTEXT_LINES + 1])
            for index in range(len(lines))]
    kept, header, shown = [], None, None
    for index, line in enumerate(lines):
        if re.sub("</?mark>", "", line).startswith("# file: "):
            header = index
        if not near[index]:
            continue
        if kept and not near[index - 1]:
            kept.append("...")
            shown = None
        if header is not None and header not in (shown, index):
            kept.append(lines[header])
        shown = header
        kept.append(line)
    return "\n".join(kept)


def write_report(path: Path, rows: list[dict], pairs: int, threshold: float,
                 regions: list[tuple[str, str]], findings: dict[str, list[str]]) -> None:
    """report.html: each of ``rows`` (the pairs shown) with its students, scores and matching
    regions (``# file:`` lines give each region's path in the handin), then each student's
    ``findings``."""
    parts = [f"<!doctype html><meta charset='utf-8'><title>mytorch similarity</title>"
             f"<style>pre{{background:#f6f6f6;padding:6px;overflow-x:auto;font-size:12px}}"
             f"mark{{background:#ffd27a}}td{{vertical-align:top;width:50%}}</style>"
             f"<h1>mytorch similarity</h1><p>{len(rows)} of {pairs} pairs shown: the most "
             f"similar at or above {threshold} (every pair is in pairs.csv). A share is the part "
             f"of a student's own code (outside the handout) found in the other's: a reason to "
             f"read both handins, never a verdict.</p>"]
    if not rows:
        parts.append(f"<p>No pair at or above the threshold {threshold}.</p>")
    for row, (code_a, code_b) in zip(rows, regions):
        a, b = html.escape(row["student_a"]), html.escape(row["student_b"])
        parts.append(f"<h2>{a} &amp; {b}: {row['similarity']:.2f}</h2><p>{a}: "
                     f"{row['share_of_a']:.2f} of their code in {b}'s; {b}: "
                     f"{row['share_of_b']:.2f} in {a}'s; {row['tokens']} tokens in common.</p>"
                     f"<table><tr><th>{a}</th><th>{b}</th></tr><tr><td><pre>{code_a}</pre></td>"
                     f"<td><pre>{code_b}</pre></td></tr></table>")
    if findings:
        parts.append("<h2>Findings</h2><p>Handins (or files of them) that could not be inspected, "
                     "and graded files that define no graded class of their own (their classes, "
                     "wherever they live, are what was compared).</p><ul>")
        parts += [f"<li>{html.escape(student)}: {html.escape(finding)}</li>"
                  for student, found in sorted(findings.items()) for finding in found]
        parts.append("</ul>")
    path.write_text("\n".join(parts) + "\n", encoding="utf-8")


class ClassInspection(NamedTuple):
    """A bulk download read for a comparison: {student: their document of the part}, {student:
    where their mytorch builds code at run time}, {student: their findings}."""

    documents: dict[str, str]
    runtime: dict[str, list[str]]
    findings: dict[str, list[str]]


def class_documents(handins_dir: Path, part: str = "graded") -> ClassInspection:
    """The ClassInspection of a bulk download, each student's handin as the regrade picks it, each
    under its own guard: a handin that cannot be inspected is its finding and left out, as are
    those that cannot be read as archives or hold no code of ``part`` (both named)."""
    documents, runtime, findings = {}, {}, {}
    work = Path(tempfile.mkdtemp(prefix="hw4p1-similarity-extract-"))
    try:
        for index, (student, handin) in enumerate(sorted(find_handins(handins_dir).items())):
            inspection, finding = guarded("its handin", inspect_archive, handin.path,
                                          work / str(index), part)
            if finding:
                findings[student] = [finding]
                print(f"left out {student}: {finding}")
                continue
            if isinstance(inspection, str):
                print(f"left out {student}: {inspection}")
                continue
            if inspection.runtime:
                runtime[student] = inspection.runtime
            if inspection.findings:
                findings[student] = inspection.findings
            if inspection.document:
                documents[student] = inspection.document
            else:
                print(f"left out {student}: no {part} mytorch code")
    finally:
        file_trees.remove_tree(work)
    return ClassInspection(documents, runtime, findings)


def inspect_archive(archive: Path, work: Path, part: str) -> Inspection | str:
    """The Inspection of a handin archive, extracted into ``work`` by the grader's own checks, or
    why the archive cannot be read (the grader refuses it too)."""
    try:
        extraction = extract_handin(archive.resolve(), work)
    except HandinError as error:
        return str(error)
    return inspect_mytorch(extraction.files, part)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Compare every pair of students' mytorch with "
                                                 "copydetect; write pairs.csv, runtime_code.csv "
                                                 "and report.html.")
    parser.add_argument("handins", type=Path, help="the bulk download's folder")
    parser.add_argument("--handout", type=Path, default=Path("dist/handout"),
                        help="the student handout (its mytorch/ is the boilerplate; default: "
                             "dist/handout, from make handout)")
    parser.add_argument("--out", type=Path, default=Path("similarity"))
    parser.add_argument("--threshold", type=float, default=THRESHOLD,
                        help="flag a pair when this share of either student's own code is in the "
                             "other's")
    parser.add_argument("--part", choices=PARTS, default="graded",
                        help="the mytorch files compared: those the hidden tests grade (default) "
                             "or the bonus track's")
    parser.add_argument("--past", type=Path,
                        help="a folder of past semesters' handins (either layout) to compare "
                             "each student with")
    parser.add_argument("--top", type=int, default=TOP_PAIRS,
                        help="flagged pairs shown in report.html (pairs.csv holds every pair)")
    args = parser.parse_args(argv)
    documents, runtime, findings = class_documents(args.handins, args.part)
    past = class_documents(args.past, args.part).documents if args.past else None
    rows = compare(documents, handout_document(args.handout, args.part), args.out,
                   args.threshold, past, args.top, findings)
    spreadsheet.write_csv(args.out / "runtime_code.csv", ["student", "builds_code_at_run_time"],
                          ((student, "; ".join(found)) for student, found in sorted(runtime.items())))
    spreadsheet.write_csv(args.out / "findings.csv", ["student", "finding"],
                          ((student, finding) for student, found in sorted(findings.items())
                           for finding in found))
    flagged = [row for row in rows if row["flagged"]]
    print(f"{len(rows)} pairs, {len(flagged)} flagged (>= {args.threshold}); "
          f"{args.out / 'pairs.csv'}, {args.out / 'report.html'}")
    for row in flagged:
        print(f"  {row['similarity']:.2f}  {row['student_a']}  {row['student_b']}")
    for student, found in sorted(runtime.items()):
        print(f"  {student}: its mytorch builds code at run time ({'; '.join(found)})")
    for student, found in sorted(findings.items()):
        for finding in found:
            print(f"  {student}: {finding}")


if __name__ == "__main__":
    main()
