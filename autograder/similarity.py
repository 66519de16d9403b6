"""Code similarity across a class: every pair of students' handed-in ``mytorch/``, compared with
copydetect (token fingerprints with winnowing, as MOSS does; names, strings and comments are
normalised away), the handout's own code given as boilerplate so the skeleton never counts.

    python -m autograder.similarity HANDINS [--handout dist/handout] [--out similarity]
                                    [--part graded|bonus] [--past FOLDER] [--top 25]
    make similarity HANDINS=folder [ARGS='--part bonus --past past-handins']

``HANDINS`` is a bulk download in either layout ``autograder.regrade`` reads, read as it reads
them (the handin each student's row is graded from; a symlinked archive is read through its
link). Each student's handed-in mytorch files of one part become one document: ``graded`` (the
default) the files the hidden tests grade, ``bonus`` the bonus track's (compared on its own: the
bonus's given code, the same for everyone, would make every pair look alike). Files are extracted
by the grader's own ``safe_tar`` (never run) and decoded as Python decodes them (a PEP 263 coding
declaration is honoured). ``--past`` names a folder of past semesters' handins (in either layout):
each current student is compared with them too (past pairs among themselves are not).

``OUT`` receives ``pairs.csv`` (every pair, most similar first: the share of each student's own
code, the code outside the handout, found in the other's, the overlapping tokens, and ``flagged``
at or above ``--threshold``), ``runtime_code.csv`` (each student whose mytorch builds code at run
time, and how: ``exec``, ``eval``, ``compile``, ``marshal``, ``zlib`` or ``base64`` decoding, an
importlib loader, an encoded blob: such code hides from a comparison of the source) and
``report.html`` (small: the ``--top`` flagged pairs, labelled by student, each file by its path in
the handin, only the matching regions and a few lines around them). Similarity is a reason to read
two handins, never a verdict.
"""
from __future__ import annotations

import argparse
import ast
import csv
import html
import io
import re
import tempfile
import tokenize
from pathlib import Path

from autograder import file_trees, rubric
from autograder.handins import find_handins
from autograder.safe_tar import HandinError, extract_handin
from hw4lib.handin_format import is_mytorch_source

THRESHOLD = 0.5  # the share of a student's own code found in another's that flags the pair
NOISE_TOKENS = 25  # copydetect's k: matches shorter than this (in normalised characters) are noise
TOP_PAIRS = 25  # flagged pairs shown in report.html
CONTEXT_LINES = 3  # lines shown around each matching region in report.html
PARTS = ("graded", "bonus")
PAST = "past:"  # the name prefix of a past semester's student
COLUMNS = ["student_a", "student_b", "similarity", "share_of_a", "share_of_b", "tokens", "flagged"]


def in_part(path: str, part: str) -> bool:
    """Whether the mytorch file ``path`` is in ``part``: ``graded``, the modules that define the
    classes the hidden tests grade (rubric.MYTORCH_RUBRIC's); ``bonus``, every other one."""
    import mytorch.nn

    graded = {getattr(mytorch.nn, name).__module__.replace(".", "/") + ".py"
              for name in rubric.MYTORCH_RUBRIC}
    return (path in graded) == (part == "graded")


def python_text(data: bytes) -> str:
    """Source bytes decoded as Python decodes them: a BOM or a PEP 263 coding declaration, else
    UTF-8 (undecodable bytes replaced)."""
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
        return data.decode(encoding, errors="replace")
    except (SyntaxError, LookupError):
        return data.decode("utf-8", errors="replace")


def mytorch_sources(files: dict[str, Path]) -> dict[str, str]:
    """{path: decoded text} of the handed-in mytorch .py files of an extraction's ``files``."""
    return {name: python_text(files[name].read_bytes()) for name in sorted(files)
            if is_mytorch_source(name)}


def mytorch_document(sources: dict[str, str], part: str = "graded") -> str:
    """A student's mytorch files of ``part`` in one text, in path order, each under its path."""
    return "".join(f"# file: {name}\n{sources[name]}\n" for name in sorted(sources)
                   if in_part(name, part))


RUNTIME_CALLS = {"exec", "eval", "compile", "__import__", "__builtins__"}
# Modules (None: any use) or their attributes that make or run code other than mytorch's files,
# the families of the worker's audit hook (autograder/worker.py, refuse_code_made_at_run_time):
# text and trees compiled, code objects and functions built by hand, marshal and pickle, import
# machinery, native libraries and raw memory (ctypes), programs, the garbage collector's lists.
RUNTIME_MODULES = {"marshal": None, "zlib": {"decompress"}, "base64": None, "codecs": {"decode"},
                   "importlib": {"util", "machinery", "abc", "spec_from_loader",
                                 "module_from_spec"},
                   "types": {"CodeType", "FunctionType", "LambdaType"}, "builtins": None,
                   "lzma": {"decompress"}, "bz2": {"decompress"}, "pickle": {"loads", "load"},
                   "copyreg": None, "ctypes": None, "_ctypes": None, "runpy": None,
                   "zipimport": None, "_imp": None, "subprocess": None, "_posixsubprocess": None,
                   "pty": {"spawn"}, "gc": {"get_objects", "get_referrers", "get_referents"},
                   "sys": {"_getframe", "meta_path", "path_hooks", "modules", "settrace",
                           "setprofile"},
                   "os": {"system", "popen", "posix_spawn", "posix_spawnp", "execl", "execle",
                          "execlp", "execlpe", "execv", "execve", "execvp", "execvpe", "spawnl",
                          "spawnle", "spawnlp", "spawnlpe", "spawnv", "spawnve", "spawnvp",
                          "spawnvpe"}}
# Attributes that reach the interpreter's own objects: code objects, frames, globals, every class.
INTERPRETER_ATTRIBUTES = {"__code__", "gi_code", "cr_code", "f_code", "f_globals", "f_locals",
                          "f_back", "__globals__", "__subclasses__", "__builtins__"}
BLOB = re.compile(r"[A-Za-z0-9+/=_-]{200,}|(?:\\x[0-9a-fA-F]{2}){50,}")


def runtime_code(sources: dict[str, str]) -> list[str]:
    """Where a mytorch builds or runs code other than its files, as '<what> (<path>:<line>)':
    calls of exec, eval, compile or __import__, the modules and attributes of RUNTIME_MODULES,
    the interpreter's own objects (INTERPRETER_ATTRIBUTES, by attribute or by a ``getattr`` of
    the name), writes to another module's attributes (``writes ast.PyCF_ONLY_AST``, also through
    ``setattr``/``delattr``: such a module's functions then do what the student wrote), and
    string literals that look encoded (a long base64 or escaped-byte run). A mytorch's own
    modules (relative imports, ``mytorch.*``) are not another module."""
    found = []
    for path, text in sorted(sources.items()):
        try:
            tree = ast.parse(text)
        except (SyntaxError, ValueError):
            continue
        aliases: dict[str, str] = {}  # local name -> "module" or "module.attribute"
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name.split(".")[0] != "mytorch":
                        aliases[alias.asname or alias.name.split(".")[0]] = alias.name.split(".")[0]
            elif (isinstance(node, ast.ImportFrom) and node.module and not node.level
                  and node.module.split(".")[0] != "mytorch"):
                for alias in node.names:
                    aliases[alias.asname or alias.name] = f"{node.module.split('.')[0]}.{alias.name}"
        qualified = {id(node.value) for node in ast.walk(tree)  # read as module.attribute below
                     if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
                     and node.value.id in aliases}
        for node in ast.walk(tree):
            what = None
            if (isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load)
                    and id(node) not in qualified):
                target = aliases.get(node.id, node.id if node.id in RUNTIME_CALLS else "")
                what = runtime_name(target)
            elif isinstance(node, ast.Attribute):
                what = attribute_use(node, aliases)
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.args:
                what = attribute_call(node, aliases)
            elif (isinstance(node, ast.Constant) and isinstance(node.value, (str, bytes))
                  and BLOB.search(node.value if isinstance(node.value, str)
                                  else node.value.decode("latin-1"))):
                what = "an encoded blob"
            if what:
                found.append(f"{what} ({path}:{node.lineno})")
    return sorted(set(found), key=found.index)


def attribute_use(node: ast.Attribute, aliases: dict[str, str]) -> str | None:
    """What the attribute ``node`` reaches: a write to an imported module, one of
    INTERPRETER_ATTRIBUTES, or a module attribute of RUNTIME_MODULES; else None."""
    written = module_write(node, aliases) if not isinstance(node.ctx, ast.Load) else None
    if written:
        return written
    if node.attr in INTERPRETER_ATTRIBUTES:
        return node.attr
    if isinstance(node.value, ast.Name) and node.value.id in aliases:
        return runtime_name(f"{aliases[node.value.id]}.{node.attr}")
    return None


def module_write(node: ast.Attribute, aliases: dict[str, str]) -> str | None:
    """'writes <module>.<attribute...>' when ``node`` (stored or deleted) is an attribute of an
    imported module, however deep; else None."""
    names = [node.attr]
    value = node.value
    while isinstance(value, ast.Attribute):
        names.append(value.attr)
        value = value.value
    if not isinstance(value, ast.Name) or value.id not in aliases:
        return None
    return "writes " + ".".join([aliases[value.id], *reversed(names)])


def attribute_call(node: ast.Call, aliases: dict[str, str]) -> str | None:
    """What a ``setattr``/``delattr`` on an imported module, or a ``getattr`` of one of
    INTERPRETER_ATTRIBUTES by its literal name, reaches; else None."""
    first, name = node.args[0], node.args[1] if len(node.args) > 1 else None
    literal = name.value if isinstance(name, ast.Constant) and isinstance(name.value, str) else "?"
    if (node.func.id in ("setattr", "delattr") and isinstance(first, ast.Name)
            and first.id in aliases):
        return f"writes {aliases[first.id]}.{literal}"
    if node.func.id == "getattr" and literal in INTERPRETER_ATTRIBUTES:
        return literal
    return None


def runtime_name(target: str) -> str | None:
    """``target`` (a builtin, "module" or "module.attribute") when it builds code, else None."""
    if target in RUNTIME_CALLS:
        return target
    module, _, attribute = target.partition(".")
    if module not in RUNTIME_MODULES:
        return None
    names = RUNTIME_MODULES[module]
    if names is None or (attribute and attribute in names):
        return target
    return None


def handout_document(handout: Path, part: str = "graded") -> str:
    """The handout's mytorch files of ``part`` (the skeleton students start from), as one text."""
    package = handout / "mytorch"
    if not package.is_dir():
        raise SystemExit(f"{package} not found: run `make handout` (or give --handout the folder "
                         f"holding the students' mytorch/)")
    return mytorch_document({path.relative_to(handout).as_posix(): path.read_text(encoding="utf-8")
                             for path in package.rglob("*.py")}, part)


def compare(documents: dict[str, str], boilerplate: str, out: Path,
            threshold: float = THRESHOLD, past: dict[str, str] | None = None,
            top: int = TOP_PAIRS) -> list[dict]:
    """Every pair of ``documents`` ({student: text}), and each student with each of ``past``
    (past semesters' documents, named ``past:<student>``), most similar first; writes pairs.csv
    and report.html (the ``top`` flagged pairs) in ``out``."""
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
                      for row in shown])
    finally:
        file_trees.remove_tree(work)
    with open(out / "pairs.csv", "w", newline="", encoding="utf-8") as file:
        writer = csv.DictWriter(file, fieldnames=COLUMNS)
        writer.writeheader()
        writer.writerows(rows)
    return rows


def matching_regions(detector, file_a: str, file_b: str) -> tuple[str, str]:
    """Both documents of a pair as HTML: the matching regions highlighted, a few lines of context
    around them, the rest left out."""
    from copydetect.utils import highlight_overlap

    if (file_a, file_b) in detector.slice_matrix:
        slices_a, slices_b = detector.slice_matrix[file_a, file_b]
    else:
        slices_b, slices_a = detector.slice_matrix[file_b, file_a]
    return tuple(highlight_overlap(detector.file_data[name].raw_code, slices, "<mark>", "</mark>",
                                   truncate=CONTEXT_LINES, escape_html=True)[0]
                 for name, slices in ((file_a, slices_a), (file_b, slices_b)))


def write_report(path: Path, rows: list[dict], pairs: int, threshold: float,
                 regions: list[tuple[str, str]]) -> None:
    """report.html: each of ``rows`` (the pairs shown) with its students, scores and matching
    regions (``# file:`` lines give each region's path in the handin)."""
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
    path.write_text("\n".join(parts) + "\n", encoding="utf-8")


def class_documents(handins_dir: Path, part: str = "graded") -> tuple[dict[str, str],
                                                                       dict[str, list[str]]]:
    """({student: their mytorch files of ``part`` as one text}, {student: where their mytorch
    builds code at run time}) for a bulk download, each student's handin as the regrade picks it;
    handins that cannot be read, or hold no such file, are named and left out."""
    documents, runtime = {}, {}
    work = Path(tempfile.mkdtemp(prefix="hw4p1-similarity-extract-"))
    try:
        for index, (student, handin) in enumerate(sorted(find_handins(handins_dir).items())):
            try:
                extraction = extract_handin(handin.path.resolve(), work / str(index))
            except HandinError as error:
                print(f"left out {student}: {error}")
                continue
            except Exception as error:  # noqa: BLE001 - one handin never ends a class's report
                print(f"left out {student}: it could not be read ({type(error).__name__})")
                continue
            sources = mytorch_sources(extraction.files)
            if runtime_code(sources):
                runtime[student] = runtime_code(sources)
            text = mytorch_document(sources, part)
            if text:
                documents[student] = text
            else:
                print(f"left out {student}: no {part} mytorch/ .py files")
    finally:
        file_trees.remove_tree(work)
    return documents, runtime


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
    documents, runtime = class_documents(args.handins, args.part)
    past = class_documents(args.past, args.part)[0] if args.past else None
    rows = compare(documents, handout_document(args.handout, args.part), args.out,
                   args.threshold, past, args.top)
    with open(args.out / "runtime_code.csv", "w", newline="", encoding="utf-8") as file:
        writer = csv.writer(file)
        writer.writerow(["student", "builds_code_at_run_time"])
        writer.writerows((student, "; ".join(found)) for student, found in sorted(runtime.items()))
    flagged = [row for row in rows if row["flagged"]]
    print(f"{len(rows)} pairs, {len(flagged)} flagged (>= {args.threshold}); "
          f"{args.out / 'pairs.csv'}, {args.out / 'report.html'}")
    for row in flagged:
        print(f"  {row['similarity']:.2f}  {row['student_a']}  {row['student_b']}")
    for student, found in sorted(runtime.items()):
        print(f"  {student}: its mytorch builds code at run time ({'; '.join(found)})")


if __name__ == "__main__":
    main()
