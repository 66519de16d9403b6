# hw4p1: instructor-only
"""Classes of handins for the similarity's tests, and the checks on what it wrote, shared by the
classroom tests (tests/classroom/) and the platform profiles' rows 31, 32, 37 and 38
(tests/platforms/): each is defined here once, so that no test module imports another.
"""
import csv
import os
import random
import re
import shutil
import subprocess
import tarfile
from pathlib import Path

from autograder.judging.intake.mytorch_resolver import MAX_DEFINITIONS
from hw4lib.grading_numbers import MYTORCH_RUBRIC
from tools.mytorch_styles import FILES, STYLES, disguised, student_tree


# ------------------------------------------------------------------------------------------------
# similarity
# ------------------------------------------------------------------------------------------------

OPERATORS = ("+", "-", "*", "/", "%", "&", "|", "^", "<<", ">>", "//", "**", "<", ">", "==", "!=",
             "and", "or")


def unique_lines(seed: int, count: int) -> str:
    """``count`` lines of code that no other seed's share a run of 25 canonical tokens with."""
    rng = random.Random(seed)
    return "".join("x = " + " ".join(f"({rng.choice('xyz')} {rng.choice(OPERATORS)}"
                                     for _ in range(8)) + " y" + ")" * 8 + "\n"
                   for _ in range(count))


def write_handin(folder: Path, tree: dict[str, str | bytes]) -> Path:
    handin = folder / "handin"
    for path, text in tree.items():
        (handin / path).parent.mkdir(parents=True, exist_ok=True)
        if isinstance(text, bytes):
            (handin / path).write_bytes(text)
        else:
            (handin / path).write_text(text)
    with tarfile.open(folder / "handin.tar", "w") as tar:
        tar.add(handin, arcname="handin")
    return folder / "handin.tar"


def class_folder(tmp_path: Path, trees: dict[str, dict[str, str]]) -> Path:
    """A Gradescope-layout folder of one handin per student of ``trees``."""
    handins = tmp_path / "handins"
    for name, tree in trees.items():
        (handins / name).mkdir(parents=True)
        shutil.move(write_handin(tmp_path / "build" / name, tree), handins / name / "handin.tar")
    return handins


def handout_folder(tmp_path: Path) -> Path:
    handout = tmp_path / "handout"
    for path, text in student_tree(tmp_path, None).items():
        (handout / path).parent.mkdir(parents=True, exist_ok=True)
        (handout / path).write_text(text)
    return handout


GRADED_FILES = (*FILES, "mytorch/nn/multi_head_attention.py")


GRADED_IMPORT = re.compile(r"^from \.(linear|activation|scaled_dot_product_attention|"
                           r"multi_head_attention) import .*\n", re.M)


def moved(tree: dict[str, str], target: str, graded_file, renamed: dict[str, str] | None = None,
          init: str | None = None) -> dict[str, str]:
    """A copy whose graded classes all live in ``target`` (one module of another name, their
    imports of each other dropped, ``renamed`` applied to it), each graded file replaced by
    ``graded_file(path)`` (a one-line import), and ``init`` (if given) as mytorch/nn/__init__.py."""
    combined = "from __future__ import annotations\n" + "".join(
        GRADED_IMPORT.sub("", tree[path]).replace("from __future__ import annotations\n", "")
        for path in GRADED_FILES)
    if target.count("/") > 2:  # a subpackage: the given checks are one level up
        combined = combined.replace("from ._checks", "from .._checks")
        tree = {**tree, target.rsplit("/", 1)[0] + "/__init__.py": ""}
    out = {**tree, target: disguised({target: combined}, renamed or {}, reorder=True)[target],
           **{path: graded_file(path) for path in GRADED_FILES}}
    if init is not None:
        out["mytorch/nn/__init__.py"] = init
    return out


def moved_class(tmp_path: Path) -> dict[str, dict[str, str]]:
    """Three independent students, the skeleton, and a copy of each independent one moved by
    another route (renamed, methods reordered): a star import from a module of another name; a
    module attribute of a renamed class in a subpackage; the package's __init__ re-exporting from
    another module, each graded file a star import of it."""
    trees = {name: student_tree(tmp_path, style) for name, style in STYLES.items()}
    trees["skeleton"] = student_tree(tmp_path, None)
    trees["star-copy"] = moved(trees["einsum"], "mytorch/nn/impl_x.py",
                               lambda path: "from .impl_x import *\n",
                               {"flat": "rows", "shifted": "centered", "logits": "scores"})
    classes = {name: f"_{name}Impl" for name in MYTORCH_RUBRIC}
    trees["alias-copy"] = moved(
        trees["verbose"], "mytorch/nn/parts/work.py",
        lambda path: "from .parts import work\n" + "".join(
            f"{name} = work.{impl}\n" for name, impl in classes.items()),
        {**classes, "matrix": "m", "upstream": "up"})
    init = student_tree(tmp_path, None)["mytorch/nn/__init__.py"]
    for module in ("linear", "activation", "scaled_dot_product_attention",
                   "multi_head_attention"):
        init = init.replace(f"from .{module} import", "from .blocks import")
    trees["init-copy"] = moved(trees["loops"], "mytorch/nn/blocks.py",
                               lambda path: "from mytorch.nn.blocks import *\n",
                               {"top": "peak", "scale": "factor"}, init=init)
    return trees


COPIES = {"star-copy": "einsum", "alias-copy": "verbose", "init-copy": "loops"}


def moved_copies_problems(result: subprocess.CompletedProcess, out: Path) -> list[str]:
    """What ``python -m autograder.classroom.similarity`` got wrong on :func:`moved_class` (none: the three
    moved copies are the three first pairs, each flagged, and no pair of independent students is
    flagged)."""
    if result.returncode != 0:
        return [f"exit {result.returncode}: {result.stderr[-3000:]}"]
    with open(out / "pairs.csv", newline="") as file:
        rows = list(csv.DictReader(file))
    first = {frozenset((row["student_a"], row["student_b"])) for row in rows[:3]}
    independent_flagged = [row for row in rows if row["flagged"] == "True"
                           and not {row["student_a"], row["student_b"]} & set(COPIES)]
    if first != {frozenset(pair) for pair in COPIES.items()} or independent_flagged or not all(
            row["flagged"] == "True" for row in rows[:3]):
        return [f"first pairs: {rows[:3]}, independent pairs flagged: {independent_flagged}"]
    return []


POISON = {  # never-imported files Python would refuse or that end ast.parse, each a finding
    "mytorch/nn/notes.py": b"# coding: idna\nx = '\xff'\n",
    "mytorch/nn/deep.py": b"x = " + b"1+" * 100_000 + b"1\n",
    "mytorch/nn/unary.py": b"x = " + b"-" * 100_000 + b"1\n",
}


def poisoned_class(folder: Path) -> tuple[Path, Path]:
    """(class folder, handout folder) under ``folder``: two honest students, a moved copy of one
    of them that also carries files that end the decoding or the parsing, and a student whose
    graded file cannot be decoded."""
    trees = {name: student_tree(folder, STYLES[name]) for name in ("einsum", "verbose")}
    trees["moved-copy"] = {**moved(trees["einsum"], "mytorch/nn/impl_x.py",
                                   lambda path: "from .impl_x import *\n", {"flat": "rows"}),
                           **POISON}
    trees["poisoned"] = {**student_tree(folder, STYLES["loops"]),
                         FILES[0]: POISON["mytorch/nn/notes.py"]}
    return class_folder(folder, trees), handout_folder(folder)


def poisoned_class_problems(result: subprocess.CompletedProcess, out: Path) -> list[str]:
    """What ``python -m autograder.classroom.similarity`` got wrong on :func:`poisoned_class` (none: every
    file written, the moved copy ranked first, each poisoned file its student's finding)."""
    if result.returncode != 0:
        return [f"exit {result.returncode}: {result.stderr[-3000:]}"]
    written = sorted(path.name for path in out.iterdir())
    if written != ["findings.csv", "pairs.csv", "report.html", "runtime_code.csv"]:
        return [f"files written: {written}"]
    problems = []
    with open(out / "pairs.csv", newline="") as file:
        first = next(csv.DictReader(file))
    if {first["student_a"], first["student_b"]} != {"einsum", "moved-copy"} or (
            first["flagged"] != "True"):
        problems.append(f"first pair: {first}")
    with open(out / "findings.csv", newline="") as file:
        findings = [(row["student"], row["finding"]) for row in csv.DictReader(file)]
    why = {(student, finding.split(" ")[0]): finding for student, finding in findings}
    expected = {("moved-copy", path) for path in (*POISON, *GRADED_FILES)} | {
        ("poisoned", FILES[0])}
    if not expected <= why.keys() or {student for student, _ in findings} != {
            "moved-copy", "poisoned"}:
        problems.append(f"findings: {findings}")
    for path, error in (("notes.py", "declares the source encoding 'idna'"),
                        ("deep.py", "(RecursionError"), ("unary.py", "(MemoryError")):
        if error not in why.get(("moved-copy", f"mytorch/nn/{path}"), ""):
            problems.append(f"mytorch/nn/{path}: no finding '{error}': {findings}")
    if "moved-copy: mytorch/nn/deep.py could not be inspected" not in result.stdout:
        problems.append(f"the run's output does not list the finding: {result.stdout[-2000:]}")
    return problems


# ------------------------------------------------------------------------------------------------
# similarity_families
# ------------------------------------------------------------------------------------------------

CLASSES = dict(zip(FILES, ("Linear", "Softmax", "ScaledDotProductAttention")))


def split_at_classes(text: str) -> tuple[str, str]:
    """(the module's text before its first class, the rest)."""
    at = re.search(r"^class ", text, re.M).start()
    return text[:at], text[at:]


def indented(text: str) -> str:
    return "".join(f"    {line}" if line.strip() else line
                   for line in text.splitlines(keepends=True))


def core_attribute(victim: dict[str, str], skeleton: dict[str, str], package: bool
                   ) -> dict[str, str]:
    """The victim's graded files moved into ``_core_<name>.py`` (``package``: one
    ``mytorch/nn/impl/_core_all.py``, reached by ``import mytorch.nn.impl._core_all as c``), each
    graded file a subclass with no body of the moved class."""
    copy = dict(skeleton)
    if package:
        copy["mytorch/nn/impl/__init__.py"] = ""
        copy["mytorch/nn/impl/_core_all.py"] = "".join(
            GRADED_IMPORT.sub("", victim[path]).replace("from ._checks", "from .._checks")
            .replace("from __future__ import annotations\n", "") for path in FILES)
    for path, name in CLASSES.items():
        stem = Path(path).stem
        if package:
            head = "import mytorch.nn.impl._core_all as c\n"
            base = "c"
        else:
            copy[f"mytorch/nn/_core_{stem}.py"] = victim[path]
            head, base = f"from . import _core_{stem} as _c\n", "_c"
        copy[path] = f"{head}\n\nclass {name}({base}.{name}):\n    pass\n"
    return copy


def constants_first(victim: dict[str, str], skeleton: dict[str, str], in_module: bool
                    ) -> dict[str, str]:
    """The victim's graded classes, each body starting with more one-line constants than the
    tracing's MAX_DEFINITIONS (``in_module``: module-level constants the class body names)."""
    count = MAX_DEFINITIONS + 100
    copy = dict(skeleton)
    for path in FILES:
        if in_module:
            table = "    _table = (" + ", ".join(f"C{i}" for i in range(count)) + ")\n"
            head, body = split_at_classes(victim[path])
            copy[path] = head + "".join(f"C{i} = {i}\n" for i in range(count)) + "\n\n" + \
                re.sub(r"^(class \w+[^\n]*:\n)", lambda m: m.group(1) + table, body, flags=re.M)
        else:
            constants = "".join(f"    _k{i} = {i}\n" for i in range(count))
            copy[path] = re.sub(r"^(class \w+[^\n]*:\n)", lambda m: m.group(1) + constants,
                                victim[path], flags=re.M)
    return copy


def both_branches(victim: dict[str, str], skeleton: dict[str, str], statement: str
                  ) -> dict[str, str]:
    """Each graded file binding its classes twice: the victim's under the branch Python runs,
    the handout's stubs under the one it does not (``statement``: ``if`` or ``try``)."""
    copy = dict(skeleton)
    for path in FILES:
        head, ours = split_at_classes(victim[path])
        stubs = split_at_classes(skeleton[path])[1]
        branches = (("if len(__name__) > 0:\n", "else:\n") if statement == "if"
                    else ("try:\n", "except ImportError:\n"))
        copy[path] = head + branches[0] + indented(ours) + branches[1] + indented(stubs)
    return copy


HELPERS = {"check_linear_input": "ensure_rows", "check_linear_weights": "ensure_params",
           "check_backward": "ensure_upstream"}


def renamed_helpers(victim: dict[str, str], skeleton: dict[str, str]) -> dict[str, str]:
    """The victim's graded files with the given checks copied into ``_guards.py`` under other
    names, local names renamed and methods reordered."""
    copy = {**skeleton, **disguised({path: victim[path] for path in FILES},
                                    {**HELPERS, "_checks": "_guards", "flat": "rows",
                                     "shifted": "centered", "logits": "scores"}, reorder=True)}
    copy["mytorch/nn/_guards.py"] = disguised({"x": skeleton["mytorch/nn/_checks.py"]},
                                              HELPERS, reorder=False)["x"]
    return copy


FAMILIES = {  # copy: (victim, builder of the copy from the victim's and the skeleton's trees)
    "core-attribute": ("einsum", lambda v, s: core_attribute(v, s, package=False)),
    "core-package-attribute": ("verbose", lambda v, s: core_attribute(v, s, package=True)),
    "constants-in-class": ("loops", lambda v, s: constants_first(v, s, in_module=False)),
    "constants-in-module": ("einsum", lambda v, s: constants_first(v, s, in_module=True)),
    "if-branches": ("verbose", lambda v, s: both_branches(v, s, "if")),
    "try-branches": ("loops", lambda v, s: both_branches(v, s, "try")),
    "renamed-helpers": ("einsum", renamed_helpers),
}


def family_trees(folder: Path, families: list[str] | None = None) -> dict[str, dict[str, str]]:
    """The three independent students and a copy of each family of ``families`` (all when
    None), each named after its family."""
    trees = {name: student_tree(folder, style) for name, style in STYLES.items()}
    skeleton = student_tree(folder, None)
    for family in families or FAMILIES:
        victim, build = FAMILIES[family]
        trees[family] = build(trees[victim], skeleton)
    return trees


def family_problems(result: subprocess.CompletedProcess, out: Path,
                    families: list[str]) -> list[str]:
    """What the similarity got wrong on :func:`family_trees` (none: each copy's pair with its
    victim flagged and above every pair of independent students, none of which is flagged)."""
    if result.returncode != 0:
        return [f"exit {result.returncode}: {result.stderr[-3000:]!r}"]
    with open(out / "pairs.csv", newline="", encoding="utf-8") as file:
        pairs = {frozenset((row["student_a"], row["student_b"])): row
                 for row in csv.DictReader(file)}
    independent = [pairs[frozenset(pair)] for pair in
                   (("einsum", "verbose"), ("einsum", "loops"), ("loops", "verbose"))]
    highest = max(float(row["similarity"]) for row in independent)
    problems = [f"independent pair flagged: {row}" for row in independent
                if row["flagged"] == "True"]
    for family in families:
        row = pairs[frozenset((family, FAMILIES[family][0]))]
        if row["flagged"] != "True" or float(row["similarity"]) <= highest:
            problems.append(f"{family}: {row} (independent pairs up to {highest})")
    return problems


NOT_UTF8 = os.fsdecode(b"student-\xff")  # a folder name a bulk download may hold


def poison(folder: Path) -> dict[str, dict[str, str | bytes]]:
    """{student: mytorch tree} of one handin per failure kind (each also the skeleton, so that
    it has mytorch code): ``huge`` holds a file over the grader's size limit (the extraction
    skips it, as the grader does) and a file of 6,500 constants beside it; ``slow``, nesting whose
    raw fingerprinting once outlasted the CPU limit (deeper than the canonical form's bound, it is
    read as raw tokens within it; test_similarity_disguises.py stops a reading that never ends)."""
    skeleton = student_tree(folder, None)
    letters = b"".join(bytes([97 + (i * 7) % 26]) for i in range(983_000))
    parens = b"x = " + b"(" * 99 + b"1" + b")" * 99 + b"\n"
    return {
        "punycode": {**skeleton, **{f"mytorch/nn/notes_{i}.py": b"# coding: punycode\n" + letters
                                    for i in range(3)}},
        "surrogate": {**skeleton, FILES[0]: b"# coding: raw_unicode_escape\nx = '\\ud800'\n"},
        "nested": {**skeleton, "mytorch/nn/deep.py": b"x = " + b"1+" * 100_000 + b"1\n"},
        "huge": {**skeleton, "mytorch/nn/big.py": b"x = 1\n" * 200_000,  # over the limit
                 "mytorch/nn/table.py": b"".join(b"C%d = %d\n" % (i, i) for i in range(6_500))},
        "slow": {**skeleton, **{f"mytorch/nn/slow_{i}.py": parens * (990_000 // len(parens))
                                for i in range(3)}},
        NOT_UTF8: student_tree(folder, STYLES["verbose"]),
    }


POISON_FINDINGS = {  # student: what their finding says
    "punycode": "mytorch/nn/notes_0.py declares the source encoding 'punycode'",
    "surrogate": f"{FILES[0]} declares the source encoding 'raw_unicode_escape'",
    "nested": "mytorch/nn/deep.py could not be inspected (RecursionError",
}


def poison_problems(result: subprocess.CompletedProcess, out: Path) -> list[str]:
    """What the similarity got wrong on a class of the three independent students, a copy of one
    and :func:`poison`'s handins (none: it finishes, every file is valid UTF-8, every pair of the
    others is there, the copy is flagged, each poisoned handin is its finding)."""
    if result.returncode != 0:
        return [f"exit {result.returncode}: {result.stderr[-3000:]!r}"]
    problems = []
    for path in sorted(out.iterdir()):
        try:
            path.read_bytes().decode("utf-8")
        except UnicodeDecodeError as error:
            problems.append(f"{path.name} is not UTF-8: {error}")
    try:
        if isinstance(result.stdout, bytes):
            result.stdout.decode("utf-8")
        else:
            result.stdout.encode("utf-8")
    except UnicodeError as error:
        problems.append(f"the output is not UTF-8: {error}")
    with open(out / "pairs.csv", newline="", encoding="utf-8") as file:
        pairs = {frozenset((row["student_a"], row["student_b"])): row
                 for row in csv.DictReader(file)}
    named = [name for pair in pairs for name in pair if name.startswith("student-")]
    honest = ["einsum", "loops", "verbose", "if-branches", "punycode", "surrogate", "nested",
              "huge", "slow", *named[:1]]
    if not named:
        problems.append(f"no pair of the student named with non-UTF-8 bytes: {sorted(pairs)}")
    missing = [(a, b) for i, a in enumerate(honest) for b in honest[i + 1:]
               if frozenset((a, b)) not in pairs]
    if missing:
        problems.append(f"pairs missing: {missing}")
    copy = pairs.get(frozenset(("if-branches", "verbose")), {})
    if copy.get("flagged") != "True":
        problems.append(f"the copy is not flagged: {copy}")
    with open(out / "findings.csv", newline="", encoding="utf-8") as file:
        findings = [(row["student"], row["finding"]) for row in csv.DictReader(file)]
    for student, finding in POISON_FINDINGS.items():
        if not any(who == student and found.startswith(finding) for who, found in findings):
            problems.append(f"{student}: no finding '{finding}' in {findings}")
    return problems
