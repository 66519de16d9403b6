"""Code similarity across a class: every pair of students' handed-in ``mytorch/``, compared by
token fingerprints (copydetect's k-grams, every one kept, as MOSS does) of each file's canonical
form (``canonical_code.py``: what the code does rather than how it is spelled: asserts, docstrings,
comments and statements without effect dropped, local names one token, equivalent numpy spellings
one, methods in name order; a file that does not parse within its bounds is read as its raw
tokens), the handout's own files given as boilerplate so the skeleton never counts. The threshold
lies between honest pairs and copies rewritten to hide (docs/results.md, "Issue 60: similarity
margin").

    python -m autograder.classroom.similarity HANDINS [--handout dist/handout] [--out similarity]
                                    [--part graded|bonus] [--past FOLDER] [--top 25]
    make similarity HANDINS=folder [ARGS='--part bonus --past past-handins']

``HANDINS`` is a bulk download in either layout ``autograder.classroom.regrade`` reads, read as it
reads them (the handin each student's row is graded from; a symlinked archive is read through its
link), extracted by the grader's own ``safe_tar`` and never run. What is compared is everything a
student handed in, never only what a static reading of Python concludes is graded: a pair's share
for student A is the part of A's code of one part (``graded``, the default: the modules of the
classes the hidden tests grade; ``bonus``: the bonus track's) found anywhere in B's whole
``mytorch/`` (every ``.py``), and the other way round; the pair ranks by the larger. Junk,
constants or dead branches a copier adds to their own files cannot dilute it (it is the share of
the victim's code in the copier's, not the reverse), and no way of binding a class hides the copy
(wherever its files put it, it is in the whole). The part's modules are each reference file of the
part and every module the static tracing (``autograder/judging/intake/static_inspection.py``) finds
the part's classes use; what the tracing finds odd (a graded file defining no graded class of its
own, a tracing cut short) is a finding, never a gate. ``--past`` names a folder of past semesters'
handins (in either layout): each current student is compared with them too (past pairs among
themselves are not).

Each handin is read and fingerprinted in a child process of its own, bounded as the judge bounds
its inspection (``INSPECTION_S``, of CPU time here; an address space, no core; files as the grader
reads them: UTF-8, never through the codec a coding declaration names, at most
``MAX_PY_FILE_BYTES`` each): a handin that cannot be read, decoded, parsed or fingerprinted within
them is a finding of that student, and the run goes on for everyone else. Every text written is
valid UTF-8.

``OUT`` receives ``pairs.csv`` (every pair, most similar first: each student's share, the
k-grams of the larger share in common, and ``flagged`` at or above ``--threshold``),
``runtime_code.csv`` (each student whose mytorch builds code at run time, and how: ``exec``,
``eval``, ``compile``, ``marshal``, ``zlib`` or ``base64`` decoding, an importlib loader, an
encoded blob: such code hides from a comparison of the source), ``findings.csv`` (each student's
findings: what could not be inspected, files declaring an encoding the grader does not read, and
each graded file that defines no graded class of its own, naming where its classes are) and
``report.html`` (small: the ``--top`` flagged pairs, labelled by student, each file by its path in
the handin, only the matching regions and a few lines around them; then the findings).
Similarity is a reason to read two handins, never a verdict.
"""
from __future__ import annotations

import argparse
import hashlib
import html
import io
import multiprocessing
import re
import resource
import signal
import tempfile
from pathlib import Path
from typing import Callable, NamedTuple, TypeVar

import numpy as np


from autograder.classroom import spreadsheet
from autograder.classroom.canonical_code import canonical, used_attributes
from autograder.classroom.handins import find_handins
from autograder.judging.isolation import file_trees
from autograder.judging.intake.handin_guard import describe, guarded
from autograder.judging.intake.safe_tar import HandinError, extract_handin
from autograder.judging.intake.static_inspection import (INSPECTION_S, PARTS, Inspection,
                                                  inspect_mytorch, python_text)

# the share of a student's own code found in another's that flags the pair: between the honest
# pairs and the disguised copies (docs/results.md, "Issue 60: similarity margin")
THRESHOLD = 0.75
NOISE_TOKENS = 25  # copydetect's k: matches shorter than this (in normalised characters) are noise
TOP_PAIRS = 25  # flagged pairs shown in report.html
CONTEXT_LINES = 3  # lines shown around each matching region in report.html
PAST = "past:"  # the name prefix of a past semester's student
COLUMNS = ["student_a", "student_b", "similarity", "share_of_a", "share_of_b", "kgrams",
           "flagged"]
# The address space one handin's child may add to this process's: an honest mytorch's reading
# and fingerprints take tens of MB; the grader's limits (hw4lib.handin_format) allow 4 MB of code.
CHILD_ADDRESS_SPACE = 2 * 2**30
WALL_FACTOR = 4  # a child's wall-clock limit, in its CPU limits: it waits for a loaded machine
T = TypeVar("T")


def utf8(text: str) -> str:
    """``text`` as valid UTF-8 (a lone surrogate, from a file name read by the OS, replaced)."""
    return text.encode("utf-8", "replace").decode("utf-8")


def handout_document(handout: Path) -> dict[str, str]:
    """{path: text} of the handout's whole mytorch (every .py, the skeleton students start from),
    read as a handin's is: the boilerplate of every comparison."""
    package = handout / "mytorch"
    if not package.is_dir():
        raise SystemExit(f"{package} not found: run `make handout` (or give --handout the folder "
                         f"holding the students' mytorch/)")
    return {path.relative_to(handout).as_posix(): python_text(path.read_bytes())
            for path in sorted(package.rglob("*.py"))}


def isolated(function: Callable[..., T], *args) -> tuple[T | None, str]:
    """``(function(*args), "")`` computed in a forked child, or ``(None, why not)``: the child has
    at most INSPECTION_S seconds of CPU time (the judge's limit for one handin's inspection; CPU
    time, so that a loaded machine costs no honest handin its comparison) within WALL_FACTOR times
    that of wall-clock time, CHILD_ADDRESS_SPACE more address space than this process and no core
    file, so whatever a handin makes the reading do (a slow codec or parse, a recursion that ends
    the interpreter's stack, a memory blow-up) costs only this call."""
    context = multiprocessing.get_context("fork")
    receive, send = context.Pipe(duplex=False)  # pragma: no mutate (equivalent: used one way)
    child = context.Process(target=run_bounded, args=(send, function, args),
                            daemon=True)  # pragma: no mutate (equivalent: always killed below)
    child.start()
    send.close()
    try:
        if not receive.poll(WALL_FACTOR * INSPECTION_S):
            return None, f"could not be inspected within {WALL_FACTOR * INSPECTION_S:g} s"
        try:
            value, finding = receive.recv()
        except (EOFError, OSError):
            child.join(1)
            if child.exitcode == -signal.SIGXCPU:
                return None, f"could not be inspected within {INSPECTION_S:g} s of CPU time"
            return None, f"could not be inspected (its reading ended with exit status " \
                         f"{child.exitcode})"
        return value, finding
    finally:
        receive.close()
        if child.is_alive():
            child.kill()
        child.join()


def run_bounded(send, function: Callable, args: tuple) -> None:
    """The child of :func:`isolated`: its limits, then ``function(*args)`` under the guard, sent
    back as ``(value, "")`` or ``(None, why)``."""
    with open("/proc/self/statm") as statm:
        used = int(statm.read().split()[0]) * resource.getpagesize()
    _, hard = resource.getrlimit(resource.RLIMIT_AS)
    limit = used + CHILD_ADDRESS_SPACE
    resource.setrlimit(resource.RLIMIT_AS, (limit if hard == resource.RLIM_INFINITY
                                            else min(limit, hard), hard))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    seconds = int(INSPECTION_S)
    resource.setrlimit(resource.RLIMIT_CPU, (seconds, seconds + 1))  # SIGXCPU ends it
    value, finding = guarded("", function, *args)
    try:
        send.send((value, finding.removeprefix(" ")))
    except Exception as error:  # noqa: BLE001 - too large to send back is this handin's finding
        send.send((None, f"could not be inspected ({describe(error)})"))
    send.close()


class Code(NamedTuple):
    """One student's mytorch, fingerprinted module by module: ``files``, {path: the file's
    Fingerprint, no boilerplate removed}; ``part``, the paths of the part compared; ``hashes``,
    every k-gram of every file."""

    files: dict[str, Fingerprint]
    part: tuple[str, ...]
    hashes: frozenset


class Fingerprint(NamedTuple):
    """A mytorch file fingerprinted: ``kgrams``, copydetect's CodeFingerprint (k = NOISE_TOKENS,
    every k-gram kept) of the tokens of its canonical form (``canonical_code.canonical``, one
    character a token); ``source``, the file's text; ``lines``, the source lines (first, last)
    each token came from; ``parsed``, whether the file had a canonical form (else its raw text's
    tokens are fingerprinted: it does not parse within the bounds)."""

    kgrams: object
    source: str
    lines: tuple[tuple[int, int], ...]
    parsed: bool


def fingerprint(text: str, attributes: frozenset[str] | None = None) -> Fingerprint:
    """The Fingerprint of the file ``text``; ``attributes``, those its handin reads or declares
    (``canonical_code.used_attributes``; None: those of this file alone)."""
    from copydetect import CodeFingerprint

    form = canonical(text, attributes)
    return Fingerprint(CodeFingerprint("mytorch.py", NOISE_TOKENS, 1, filter=False,
                                       fp=io.StringIO(form.tokens)), text, form.lines, form.parsed)


def fingerprints(sources: dict[str, str], known: set[str] = frozenset()
                 ) -> dict[str, Fingerprint | str]:
    """{path: the Fingerprint of each of a handin's files ``sources`` ({path: text}), read with
    the attributes the whole handin uses, or its digest when in ``known``}."""
    attributes = used_attributes(sources.values())
    return {path: digest(text) if digest(text) in known else fingerprint(text, attributes)
            for path, text in sources.items()}


def digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def code_of(files: dict[str, object], part: list[str], known: dict[str, object]) -> Code:
    """The Code of a handin's mytorch ``files`` ({path: its CodeFingerprint, or the digest of a
    text fingerprinted before, in ``known``}) whose part is ``part``; ``known`` gets the new
    ones."""
    for found in files.values():
        if not isinstance(found, str):
            known.setdefault(digest(found.source), found)
    files = {path: known[found] if isinstance(found, str) else found
             for path, found in files.items()}
    return Code(files, tuple(part), frozenset().union(
        *(found.kgrams.hashes for found in files.values())))


def own_kgrams(found: Fingerprint, boilerplate: set) -> dict:
    """{hash: positions} of a file's Fingerprint ``found``, those of ``boilerplate`` left out."""
    return {value: at for value, at in found.kgrams.hash_idx.items() if value not in boilerplate}


def shares(a: Code, b: Code, boilerplate: set) -> tuple[float, int]:
    """(the share of ``a``'s part, its code outside ``boilerplate``, found anywhere in ``b``, the
    k-grams in common): the share of the part's tokens that k-grams also in b cover, as copydetect
    measures a file's share."""
    from copydetect.utils import get_token_coverage

    covered, total, kgrams = 0.0, 0.0, 0
    for path in a.part:
        found = a.files[path]
        own = own_kgrams(found, boilerplate)
        common = {value: at for value, at in own.items() if value in b.hashes}
        size = len(found.kgrams.filtered_code)
        total += get_token_coverage(own, NOISE_TOKENS, size)
        covered += get_token_coverage(common, NOISE_TOKENS, size)
        kgrams += len(common)
    return (float(covered / total), kgrams) if total else (0.0, 0)


def compare(documents: dict[str, Code], boilerplate: dict[str, str], out: Path,
            threshold: float = THRESHOLD, past: dict[str, Code] | None = None,
            top: int = TOP_PAIRS, findings: dict[str, list[str]] | None = None) -> list[dict]:
    """Every pair of ``documents`` ({student: Code}), and each student with each of ``past``
    (past semesters' documents, named ``past:<student>``), most similar first, the k-grams of
    ``boilerplate`` ({path: text}, the handout's files) left out; writes pairs.csv
    and report.html (the ``top`` flagged pairs, then ``findings``: {student: what the inspection
    of their handin found}) in ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    named = {**documents, **{f"{PAST}{student}": code for student, code in (past or {}).items()}}
    common = set().union(*(fingerprint(text).kgrams.hashes for text in boilerplate.values()))
    students = sorted(named)
    rows = []
    for i, a in enumerate(students):
        for b in students[i + 1:]:
            if a.startswith(PAST) and b.startswith(PAST):
                continue
            (share_a, kgrams_a), (share_b, kgrams_b) = (shares(named[a], named[b], common),
                                                        shares(named[b], named[a], common))
            rows.append({"student_a": utf8(a), "student_b": utf8(b),
                         "similarity": round(max(share_a, share_b), 4),
                         "share_of_a": round(share_a, 4), "share_of_b": round(share_b, 4),
                         "kgrams": kgrams_a if share_a >= share_b else kgrams_b,
                         "flagged": max(share_a, share_b) >= threshold, "pair": (a, b)})
    rows.sort(key=lambda row: -row["similarity"])
    shown = [row for row in rows if row["flagged"]][:top]
    write_report(out / "report.html", shown, len(rows), threshold,
                 [matching_regions(named, *row["pair"], common) for row in shown],
                 findings or {})
    for row in rows:
        del row["pair"]
    spreadsheet.write_csv(out / "pairs.csv", COLUMNS, rows)
    return rows


def matching_regions(named: dict[str, Code], a: str, b: str, boilerplate: set
                     ) -> tuple[str, str]:
    """Both sides of a pair as HTML, in the direction of its larger share (one student's part, the
    other's whole): each file with a match under its ``# file:`` line, the matching regions
    highlighted with a few lines of context around them, the rest left out."""
    source, target = (a, b) if shares(named[a], named[b], boilerplate)[0] >= shares(
        named[b], named[a], boilerplate)[0] else (b, a)
    common = set().union(*(own_kgrams(named[source].files[path], boilerplate).keys()
                           for path in named[source].part)) & named[target].hashes
    shown = {name: "".join(marked(path, named[name].files[path], common)
                           for path in (named[name].part if name == source else named[name].files))
             for name in (source, target)}
    return around_marks(shown[a]), around_marks(shown[b])


def marked(path: str, found: Fingerprint, common: set) -> str:
    """The text of the file ``path`` (its Fingerprint ``found``) under its ``# file:`` line, as
    HTML, the source lines its k-grams of ``common`` came from in <mark>; '' when it has none."""
    from copydetect.utils import get_copied_slices

    kgrams = found.kgrams
    hits = [at for value in common & kgrams.hashes for at in kgrams.hash_idx[value]]
    if not hits:
        return ""
    shown = {number for start, end in get_copied_slices(np.array(hits), NOISE_TOKENS).T
             for first, last in found.lines[start:end] for number in range(first, last + 1)}
    text = "\n".join(f"<mark>{html.escape(line)}</mark>" if number in shown
                     else html.escape(line)
                     for number, line in enumerate(found.source.split("\n"), start=1))
    return f"# file: {html.escape(path)}\n{text}\n"


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
             f"of a student's own code of the part compared (outside the handout) found anywhere "
             f"in the other's mytorch: a reason to read both handins, never a verdict.</p>"]
    if not rows:
        parts.append(f"<p>No pair at or above the threshold {threshold}.</p>")
    for row, (code_a, code_b) in zip(rows, regions):
        a, b = html.escape(row["student_a"]), html.escape(row["student_b"])
        parts.append(f"<h2>{a} &amp; {b}: {row['similarity']:.2f}</h2><p>{a}: "
                     f"{row['share_of_a']:.2f} of their code in {b}'s; {b}: "
                     f"{row['share_of_b']:.2f} in {a}'s; {row['kgrams']} k-grams in common "
                     f"(the larger share's; shown: its part, the other's files that match).</p>"
                     f"<table><tr><th>{a}</th><th>{b}</th></tr><tr><td><pre>{code_a}</pre></td>"
                     f"<td><pre>{code_b}</pre></td></tr></table>")
    if findings:
        parts.append("<h2>Findings</h2><p>Handins (or files of them) that could not be inspected, "
                     "files declaring an encoding the grader does not read, and graded files that "
                     "define no graded class of their own (every file was compared all the "
                     "same).</p><ul>")
        parts += [f"<li>{html.escape(student)}: {html.escape(finding)}</li>"
                  for student, found in sorted(findings.items()) for finding in found]
        parts.append("</ul>")
    path.write_text("\n".join(parts) + "\n", encoding="utf-8")


class ClassInspection(NamedTuple):
    """A bulk download read for a comparison: {student: their Code}, {student: where their mytorch
    builds code at run time}, {student: their findings}."""

    documents: dict[str, Code]
    runtime: dict[str, list[str]]
    findings: dict[str, list[str]]


def class_documents(handins_dir: Path, part: str = "graded") -> ClassInspection:
    """The ClassInspection of a bulk download, each student's handin as the regrade picks it, each
    read in a bounded child of its own (:func:`isolated`): a handin that cannot be inspected is its
    finding and left out, as are those that cannot be read as archives (the grader refuses them
    too, and says so on their row) or hold no mytorch code (both named)."""
    documents, runtime, findings, known = {}, {}, {}, {}
    fingerprint("pass\n")  # copydetect and its lexer loaded once, before the children fork
    work = Path(tempfile.mkdtemp(prefix="hw4p1-similarity-extract-"))
    try:
        for index, (student, handin) in enumerate(sorted(find_handins(handins_dir).items())):
            read, finding = isolated(read_archive, handin.path, work / str(index), part, set(known))
            if finding:
                findings[student] = [utf8(f"its handin {finding}")]
                print(utf8(f"left out {student}: its handin {finding}"))
                continue
            if isinstance(read, str):
                print(utf8(f"left out {student}: {read}"))
                continue
            inspection, files = read
            if inspection.runtime:
                runtime[student] = [utf8(found) for found in inspection.runtime]
            if inspection.findings:
                findings[student] = [utf8(found) for found in inspection.findings]
            if files:
                documents[student] = code_of(files, inspection.part, known)
            else:
                print(utf8(f"left out {student}: no mytorch code"))
    finally:
        file_trees.remove_tree(work)
    return ClassInspection(documents, runtime, findings)


def read_archive(archive: Path, work: Path, part: str, known: set[str]
                 ) -> tuple[Inspection, dict[str, object]] | str:
    """(the Inspection of a handin archive, extracted into ``work`` by the grader's own checks,
    without its texts; {path: Fingerprint of each mytorch file, or its digest when in
    ``known``, digests of texts fingerprinted before}), or why the archive cannot be read (the
    grader refuses it too). Run in :func:`isolated`'s child: everything a handin's files size
    happens here."""
    try:
        extraction = extract_handin(archive.resolve(), work)
    except HandinError as error:
        return str(error)
    inspection = inspect_mytorch(extraction.files, part)
    files = fingerprints(inspection.sources, known)
    return Inspection(part=inspection.part, runtime=inspection.runtime,
                      findings=inspection.findings), files


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Compare every pair of students' mytorch by "
                                                 "token fingerprints; write pairs.csv, "
                                                 "runtime_code.csv, findings.csv and report.html.")
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
    boilerplate = handout_document(args.handout)
    documents, runtime, findings = class_documents(args.handins, args.part)
    past = class_documents(args.past, args.part).documents if args.past else None
    rows = compare(documents, boilerplate, args.out, args.threshold, past, args.top, findings)
    spreadsheet.write_csv(args.out / "runtime_code.csv", ["student", "builds_code_at_run_time"],
                          ((utf8(student), "; ".join(found))
                           for student, found in sorted(runtime.items())))
    spreadsheet.write_csv(args.out / "findings.csv", ["student", "finding"],
                          ((utf8(student), finding) for student, found in sorted(findings.items())
                           for finding in found))
    flagged = [row for row in rows if row["flagged"]]
    print(f"{len(rows)} pairs, {len(flagged)} flagged (>= {args.threshold}); "
          f"{args.out / 'pairs.csv'}, {args.out / 'report.html'}")
    for row in flagged:
        print(f"  {row['similarity']:.2f}  {row['student_a']}  {row['student_b']}")
    for student, found in sorted(runtime.items()):
        print(utf8(f"  {student}: its mytorch builds code at run time ({'; '.join(found)})"))
    for student, found in sorted(findings.items()):
        for finding in found:
            print(utf8(f"  {student}: {finding}"))


if __name__ == "__main__":
    main()
