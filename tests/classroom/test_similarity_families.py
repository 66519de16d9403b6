# hw4p1: instructor-only
"""The similarity (autograder/classroom/similarity.py) against the families of ways to hide a copied
mytorch that a static reading of Python misses, and against handins that would stop a class run,
through its real entry point (``python -m autograder.classroom.similarity``, make similarity's).

- Hiding families, each a copy of one honest student's graded code, several variants each: the
  classes copied into ``_core_*.py`` and each graded class written ``class Linear(_c.Linear):
  pass`` (attribute chains); hundreds of one-line constants first (definition caps); the graded
  class bound under both branches of an ``if`` or a ``try`` (branch bindings); the given helpers
  copied under other names. Each copy runs as its victim's code does (checked by Python's own
  import); each pair is flagged and ranks above every independent pair, none of which is flagged.
- Poison, one handin of a small class each: a slow codec declared (punycode), a lone surrogate
  through raw_unicode_escape, nesting that ends the parser, files over the grader's size limit,
  code whose fingerprinting outlasts the time limit, a student folder named with non-UTF-8 bytes:
  the run finishes, every file it writes is valid UTF-8, the other students' pairs are all there,
  and each poisoned handin is its own finding.

    .venv/bin/python -m pytest -q tests/classroom/test_similarity_families.py
"""
import csv
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from autograder.judging.intake.mytorch_resolver import MAX_DEFINITIONS
from tests.classroom.test_similarity import GRADED_IMPORT, class_folder, handout_folder
from tools.mytorch_styles import FILES, STYLES, disguised, student_tree

pytest.importorskip("copydetect")
REPO = Path(__file__).resolve().parents[2]
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


OUTPUTS = """
import hashlib, importlib, json, sys
import numpy as np
found = {}
for name in NAMES:
    sys.path.insert(0, ROOT + '/' + name)
    nn = importlib.import_module('mytorch.nn')
    rng = np.random.default_rng(0)
    layer = nn.Linear(4, 3)
    layer.init_weights(rng.standard_normal((3, 4)), rng.standard_normal(3))
    q, k, v = (rng.standard_normal((2, 5, 4)) for _ in range(3))
    values = [layer.forward(rng.standard_normal((2, 4))), nn.Softmax().forward(q),
              nn.ScaledDotProductAttention().forward(q, k, v)]
    found[name] = hashlib.sha256(b''.join(np.asarray(x).tobytes() for x in values)).hexdigest()
    sys.path.pop(0)
    for module in [m for m in sys.modules if m.split('.')[0] == 'mytorch']:
        del sys.modules[module]
print(json.dumps(found))
"""


def outputs(trees: dict[str, dict[str, str]], folder: Path) -> dict[str, str]:
    """{name: digest of what its mytorch's Linear, Softmax and ScaledDotProductAttention return
    on fixed inputs}, from Python's own import of each tree: the truth that a copy runs its
    victim's code."""
    for name, tree in trees.items():
        for path, text in tree.items():
            (folder / name / path).parent.mkdir(parents=True, exist_ok=True)
            (folder / name / path).write_text(text)
    script = f"NAMES = {sorted(trees)!r}\nROOT = {str(folder)!r}\n" + OUTPUTS
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                            cwd=folder, check=True)
    return json.loads(result.stdout)


def run_similarity(handins: Path, handout: Path, out: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "autograder.classroom.similarity", str(handins),
                           "--handout", str(handout), "--out", str(out)],
                          capture_output=True, cwd=REPO, timeout=900)


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


def test_the_families_of_hidden_copies_run_their_victims_code(tmp_path):
    """The truth the similarity's test stands on: each copy is valid Python whose graded classes,
    as Python's import binds them, compute exactly what its victim's do."""
    trees = family_trees(tmp_path)
    computed = outputs(trees, tmp_path / "python")
    for family, (victim, _) in FAMILIES.items():
        assert computed[family] == computed[victim], family


@pytest.mark.slow
def test_each_family_of_hidden_copies_is_flagged_and_ranks_first(tmp_path):
    """Every family's copy is flagged beside its victim and ranks above every independent pair;
    no independent pair is flagged."""
    trees = family_trees(tmp_path)
    out = tmp_path / "out"
    result = run_similarity(class_folder(tmp_path, trees), handout_folder(tmp_path), out)
    assert family_problems(result, out, list(FAMILIES)) == []
    with open(out / "findings.csv", newline="", encoding="utf-8") as file:
        findings = {(row["student"], row["finding"]) for row in csv.DictReader(file)}
    assert not {student for student, _ in findings} & set(STYLES), findings
    assert ("constants-in-module", f"its graded classes use more than {MAX_DEFINITIONS} "
            f"definitions: traced no further (every file is compared whole all the same)") in \
        findings, findings


NOT_UTF8 = os.fsdecode(b"student-\xff")  # a folder name a bulk download may hold


def poison(folder: Path) -> dict[str, dict[str, str | bytes]]:
    """{student: mytorch tree} of one handin per failure kind (each also the skeleton, so that
    it has mytorch code): ``huge`` holds a file over the grader's size limit (the extraction
    skips it, as the grader does) and a file of 6,500 constants beside it."""
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
    "slow": "its handin could not be inspected within 20 s of CPU time",
}


def poisoned_class_problems(result: subprocess.CompletedProcess, out: Path) -> list[str]:
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
              "huge", *named[:1]]
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


@pytest.mark.slow
def test_one_poisoned_handin_never_stops_the_class(tmp_path):
    """:func:`poison`'s handins beside three independent students and a copy: the run finishes
    (within the time limit per handin), writes valid UTF-8, produces every other pair and flags
    the copy; each poisoned handin is its own finding."""
    trees = {**family_trees(tmp_path, ["if-branches"]), **poison(tmp_path)}
    out = tmp_path / "out"
    result = run_similarity(class_folder(tmp_path, trees), handout_folder(tmp_path), out)
    assert poisoned_class_problems(result, out) == []
