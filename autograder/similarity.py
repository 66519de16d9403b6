"""Code similarity across a class: every pair of students' handed-in ``mytorch/``, compared with
copydetect (token fingerprints with winnowing, as MOSS does; names, strings and comments are
normalised away), the handout's own code given as boilerplate so the skeleton never counts.

    python -m autograder.similarity HANDINS [--handout dist/handout] [--out similarity]
    make similarity HANDINS=folder

``HANDINS`` is a bulk download in either layout ``autograder.regrade`` reads. Each student's
handed-in ``mytorch/*.py`` (extracted by the grader's own ``safe_tar``, never run) become one
document. ``OUT`` receives ``pairs.csv`` (every pair, most similar first: the share of each
student's own code, the code outside the handout, found in the other's, the overlapping tokens, and
``flagged`` at or above ``--threshold``) and ``report.html`` (copydetect's report: the flagged
pairs side by side, matching regions highlighted). Similarity is a reason to read two handins,
never a verdict.
"""
from __future__ import annotations

import argparse
import csv
import shutil
import tempfile
from pathlib import Path

from autograder.regrade import find_handins
from autograder.safe_tar import HandinError, extract_handin
from hw4lib.handin_format import is_mytorch_source

THRESHOLD = 0.5  # the share of a student's own code found in another's that flags the pair
NOISE_TOKENS = 25  # copydetect's k: matches shorter than this (in normalised characters) are noise
COLUMNS = ["student_a", "student_b", "similarity", "share_of_a", "share_of_b", "tokens", "flagged"]


def mytorch_document(files: dict[str, Path]) -> str:
    """A student's mytorch sources in one text, in path order."""
    return "".join(f"# file: {name}\n{files[name].read_text(encoding='utf-8', errors='replace')}\n"
                   for name in sorted(files) if is_mytorch_source(name))


def handout_document(handout: Path) -> str:
    """The handout's mytorch (the skeleton students start from), as one text."""
    package = handout / "mytorch"
    if not package.is_dir():
        raise SystemExit(f"{package} not found: run `make handout` (or give --handout the folder "
                         f"holding the students' mytorch/)")
    return mytorch_document({path.relative_to(handout).as_posix(): path
                             for path in package.rglob("*.py")})


def compare(documents: dict[str, str], boilerplate: str, out: Path,
            threshold: float = THRESHOLD) -> list[dict]:
    """Every pair of ``documents`` ({student: text}), most similar first; writes pairs.csv and
    report.html in ``out``."""
    from copydetect import CopyDetector

    out.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="hw4p1-similarity-"))
    try:
        (work / "students").mkdir()
        (work / "boilerplate").mkdir()
        for student, text in documents.items():
            (work / "students" / f"{student}.py").write_text(text, encoding="utf-8")
        (work / "boilerplate" / "handout.py").write_text(boilerplate, encoding="utf-8")
        detector = CopyDetector(test_dirs=[str(work / "students")],
                                ref_dirs=[str(work / "students")],
                                boilerplate_dirs=[str(work / "boilerplate")], extensions=["py"],
                                noise_t=NOISE_TOKENS, guarantee_t=NOISE_TOKENS,
                                display_t=threshold, silent=True, autoopen=False,
                                out_file=str(out / "report.html"))
        detector.run()
        students = [Path(name).stem for name in detector.test_files]
        rows = []
        for i, a in enumerate(students):
            for j, b in enumerate(students):
                if a < b and detector.similarity_matrix[i, j, 0] >= 0:
                    share_a, share_b = (float(x) for x in detector.similarity_matrix[i, j])
                    rows.append({"student_a": a, "student_b": b,
                                 "similarity": round(max(share_a, share_b), 4),
                                 "share_of_a": round(share_a, 4), "share_of_b": round(share_b, 4),
                                 "tokens": int(detector.token_overlap_matrix[i, j]),
                                 "flagged": max(share_a, share_b) >= threshold})
        rows.sort(key=lambda row: -row["similarity"])
        if any(row["flagged"] for row in rows):
            detector.generate_html_report()
        else:
            (out / "report.html").write_text("<p>No pair at or above the threshold "
                                             f"{threshold}.</p>\n", encoding="utf-8")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    with open(out / "pairs.csv", "w", newline="", encoding="utf-8") as file:
        writer = csv.DictWriter(file, fieldnames=COLUMNS)
        writer.writeheader()
        writer.writerows(rows)
    return rows


def class_documents(handins_dir: Path) -> dict[str, str]:
    """{student: their mytorch as one text} for a bulk download; handins that cannot be read, or
    hold no mytorch, are named and left out."""
    documents = {}
    work = Path(tempfile.mkdtemp(prefix="hw4p1-similarity-extract-"))
    try:
        for student, archive in find_handins(handins_dir).items():
            try:
                extraction = extract_handin(archive, work / student)
            except HandinError as error:
                print(f"left out {student}: {error}")
                continue
            text = mytorch_document(extraction.files)
            if text:
                documents[student] = text
            else:
                print(f"left out {student}: no mytorch/ .py files")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return documents


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Compare every pair of students' mytorch with "
                                                 "copydetect; write pairs.csv and report.html.")
    parser.add_argument("handins", type=Path, help="the bulk download's folder")
    parser.add_argument("--handout", type=Path, default=Path("dist/handout"),
                        help="the student handout (its mytorch/ is the boilerplate; default: "
                             "dist/handout, from make handout)")
    parser.add_argument("--out", type=Path, default=Path("similarity"))
    parser.add_argument("--threshold", type=float, default=THRESHOLD,
                        help="flag a pair when this share of either student's own code is in the "
                             "other's")
    args = parser.parse_args(argv)
    rows = compare(class_documents(args.handins), handout_document(args.handout), args.out,
                   args.threshold)
    flagged = [row for row in rows if row["flagged"]]
    print(f"{len(rows)} pairs, {len(flagged)} flagged (>= {args.threshold}); "
          f"{args.out / 'pairs.csv'}, {args.out / 'report.html'}")
    for row in flagged:
        print(f"  {row['similarity']:.2f}  {row['student_a']}  {row['student_b']}")


if __name__ == "__main__":
    main()
