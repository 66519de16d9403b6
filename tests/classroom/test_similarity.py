# hw4p1: instructor-only
"""Tests of the similarity report (autograder/classroom/similarity.py) on a class of fixtures: three
independently written mytorch implementations (Linear, Softmax, ScaledDotProductAttention) in
different styles, planted copies of them (identifiers renamed, methods reordered, comments and
whitespace changed), and a student who handed in the untouched skeleton.

    .venv/bin/python -m pytest -q tests/classroom/test_similarity.py
"""
import csv
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from autograder.classroom import similarity
from autograder.judging.intake import mytorch_resolver, static_inspection
from autograder.judging.intake.runtime_code import runtime_code
from hw4lib.grading_numbers import MYTORCH_RUBRIC
from tools.mytorch_styles import FILES, STYLES, disguised, student_tree
from tests.classroom.similarity_classes import (COPIES, GRADED_FILES, class_folder, handout_folder,
                                                moved_class, poisoned_class,
                                                poisoned_class_problems, write_handin)
pytest.importorskip("copydetect")
REPO = Path(__file__).resolve().parents[2]


def test_planted_copies_rank_above_every_independent_pair(tmp_path):
    handins = tmp_path / "handins"
    handins.mkdir()
    trees = {name: student_tree(tmp_path, style) for name, style in STYLES.items()}
    trees["skeleton"] = student_tree(tmp_path, None)
    trees["einsum-copy"] = disguised(trees["einsum"], {"flat": "rows", "shifted": "centered",
                                                       "logits": "scores", "inner": "dot"},
                                   reorder=False)
    trees["verbose-copy"] = disguised(trees["verbose"], {"matrix": "m", "upstream": "up",
                                                         "weights": "probs", "factor": "k"},
                                    reorder=True)
    for name, tree in trees.items():
        (handins / name).mkdir()
        shutil.move(write_handin(tmp_path / "build" / name, tree), handins / name / "handin.tar")
    for name in ("einsum", "verbose-copy"):
        compile(trees[name]["mytorch/nn/scaled_dot_product_attention.py"], name, "exec")

    handout = tmp_path / "handout"
    for path, text in student_tree(tmp_path, None).items():
        (handout / path).parent.mkdir(parents=True, exist_ok=True)
        (handout / path).write_text(text)
    documents, runtime, findings = similarity.class_documents(handins)
    assert runtime == {} and findings == {}, (runtime, findings)
    rows = similarity.compare(documents, similarity.handout_document(handout), tmp_path / "out")

    pairs = {frozenset((row["student_a"], row["student_b"])): row for row in rows}
    assert len(pairs) == 6 * 5 // 2, sorted(map(sorted, pairs))
    copies = [frozenset(("einsum", "einsum-copy")), frozenset(("verbose", "verbose-copy"))]
    independent = [pair for pair in pairs if pair not in copies]
    lowest_copy = min(pairs[pair]["similarity"] for pair in copies)
    highest_other = max(pairs[pair]["similarity"] for pair in independent)
    assert lowest_copy > highest_other, (
        f"a planted copy scores {lowest_copy}, an independent pair {highest_other}: "
        + str([(sorted(p), pairs[p]["similarity"]) for p in pairs]))
    assert all(pairs[pair]["flagged"] for pair in copies), [pairs[p] for p in copies]
    assert not any(pairs[pair]["flagged"] for pair in independent), [
        (sorted(p), pairs[p]["similarity"]) for p in independent if pairs[p]["flagged"]]
    with open(tmp_path / "out/pairs.csv", newline="") as file:
        written = list(csv.DictReader(file))
    assert len(written) == len(rows) and written[0]["flagged"] == "True"
    report = (tmp_path / "out/report.html").read_text()
    assert "einsum-copy" in report and "verbose-copy" in report and "<mark>" in report
    assert str(tmp_path) not in report and "/tmp" not in report  # labelled, relative paths
    assert "# file: mytorch/nn/linear.py" in report


def encoded(tree: dict[str, str], encoding: str) -> dict[str, bytes]:
    """The same files, each written in ``encoding`` under a PEP 263 declaration."""
    return {path: f"# coding: {encoding}\n".encode("ascii") + text.encode(encoding)
            for path, text in tree.items()}


def test_a_coding_declaration_is_never_honoured(tmp_path):
    """A copy saved as UTF-7 under its coding declaration (valid Python, but the judge does not
    grade such a file: judge.refuse_foreign_encodings) is read as the grader reads mytorch, its
    bytes as UTF-8 (UTF-7 leaves most ASCII as it is, so the copy is still found), and each of its
    files is a finding naming the encoding."""
    original = student_tree(tmp_path, STYLES["einsum"])
    copy = encoded(original, "utf-7")
    for text in copy.values():
        compile(text, "copy", "exec")
    assert static_inspection.python_text(copy[FILES[0]]) == copy[FILES[0]].decode("utf-8")
    assert static_inspection.python_text(b"\xef\xbb\xbfx = '\xff'\n") == "x = '\ufffd'\n"
    handins = class_folder(tmp_path, {"einsum": original, "verbose": student_tree(
        tmp_path, STYLES["verbose"]), "utf7-copy": copy})
    documents, _, findings = similarity.class_documents(handins)
    assert findings == {"utf7-copy": [f"{path} declares the source encoding 'utf-7' (not graded; "
                                      f"read here as UTF-8)" for path in sorted(copy)]}, findings
    rows = similarity.compare(documents, similarity.handout_document(handout_folder(tmp_path)),
                              tmp_path / "out")
    pairs = {frozenset((row["student_a"], row["student_b"])): row for row in rows}
    assert pairs[frozenset(("einsum", "utf7-copy"))]["flagged"], rows
    assert not pairs[frozenset(("einsum", "verbose"))]["flagged"], rows


def test_the_bonus_is_compared_on_its_own(tmp_path):
    """Two independent graded parts and one shared bonus: not flagged by default (only the graded
    files are compared); flagged with part='bonus'."""
    bonus = "mytorch/nn/gelu.py"
    assert static_inspection.PART_TARGETS["graded"] == {
        "mytorch.nn.Linear": FILES[0], "mytorch.nn.Softmax": FILES[1],
        "mytorch.nn.ScaledDotProductAttention": FILES[2],
        "mytorch.nn.MultiHeadAttention": "mytorch/nn/multi_head_attention.py"}
    assert static_inspection.PART_TARGETS["bonus"]["mytorch.nn.GELU"] == bonus
    shared = (REPO / bonus).read_text()
    trees = {name: {**student_tree(tmp_path, STYLES[name]), bonus: shared}
             for name in ("einsum", "loops")}
    handins = class_folder(tmp_path, trees)
    handout = handout_folder(tmp_path)
    for part, flagged in (("graded", False), ("bonus", True)):
        documents = similarity.class_documents(handins, part).documents
        rows = similarity.compare(documents, similarity.handout_document(handout),
                                  tmp_path / part)
        assert [row["flagged"] for row in rows] == [flagged], (part, rows)


def test_the_parts_written_out_for_the_judge_are_what_mytorch_exports():
    """The judge's PART_TARGETS (written out: the reference mytorch does not ship) is what the
    reference packages bind: graded, mytorch.nn.<class> of each graded class; bonus, every other
    name mytorch.nn and mytorch.optim export; each at the module defining it."""
    import mytorch.nn
    import mytorch.optim

    graded = [(mytorch.nn, name) for name in MYTORCH_RUBRIC]
    bonus = [(package, name) for package in (mytorch.nn, mytorch.optim) for name in package.__all__
             if not (package is mytorch.nn and name in MYTORCH_RUBRIC)]
    for part, names in (("graded", graded), ("bonus", bonus)):
        assert static_inspection.PART_TARGETS[part] == {
            f"{package.__name__}.{name}": getattr(package, name).__module__.replace(".", "/")
            + ".py" for package, name in names}, part
    assert set(static_inspection.PART_TARGETS) == set(static_inspection.PARTS)


def test_symlinked_handins_and_past_semesters(tmp_path):
    """A symlinked archive is read through its link (as the regrade grades it); a past
    semester's handin is compared with every current student, never with another past one."""
    trees = {"einsum": student_tree(tmp_path, STYLES["einsum"]),
             "loops": student_tree(tmp_path, STYLES["loops"])}
    handins = tmp_path / "handins"
    handins.mkdir()
    for name, tree in trees.items():
        (handins / f"{name}.tar").symlink_to(write_handin(tmp_path / "build" / name, tree))
    past = class_folder(tmp_path / "past", {"old-copy": disguised(trees["loops"], {}, False),
                                            "old-verbose": student_tree(tmp_path,
                                                                        STYLES["verbose"])})
    documents = similarity.class_documents(handins).documents
    assert sorted(documents) == ["einsum", "loops"]
    rows = similarity.compare(documents, similarity.handout_document(handout_folder(tmp_path)),
                              tmp_path / "out", past=similarity.class_documents(past).documents)
    pairs = {frozenset((row["student_a"], row["student_b"])): row for row in rows}
    assert frozenset(("past:old-copy", "past:old-verbose")) not in pairs, sorted(map(sorted, pairs))
    assert len(pairs) == 5, sorted(map(sorted, pairs))
    assert [sorted(p) for p in pairs if pairs[p]["flagged"]] == [["loops", "past:old-copy"]], rows


def python_binds(trees: dict[str, dict[str, str]], tmp_path: Path) -> dict[str, dict[str, str]]:
    """{name: {graded class: the path of the module Python's own import of ``mytorch.nn`` takes it
    from}} for each mytorch of ``trees``: the truth the static tracing must agree with."""
    for name, tree in trees.items():
        for path, text in tree.items():
            (tmp_path / "python" / name / path).parent.mkdir(parents=True, exist_ok=True)
            (tmp_path / "python" / name / path).write_text(text)
    script = ("import importlib, json, sys\nfound = {}\n"
              f"for name in {sorted(trees)!r}:\n"
              f"    sys.path.insert(0, {str(tmp_path / 'python')!r} + '/' + name)\n"
              "    nn = importlib.import_module('mytorch.nn')\n"
              f"    found[name] = {{cls: getattr(nn, cls).__module__.replace('.', '/') + '.py'"
              f" for cls in {list(MYTORCH_RUBRIC)!r}}}\n"
              "    sys.path.pop(0)\n"
              "    for module in [m for m in sys.modules if m.split('.')[0] == 'mytorch']:\n"
              "        del sys.modules[module]\n"
              "print(json.dumps(found))\n")
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                            cwd=tmp_path, check=True)
    return json.loads(result.stdout)


@pytest.mark.slow
def test_graded_classes_moved_into_other_modules_are_traced_and_rank_first(tmp_path):
    """Each moved copy is traced to where Python's own import finds its classes, ranks above every
    independent pair (and is flagged), and its four graded files are findings; honest students
    have none, and no independent pair is flagged."""
    trees = moved_class(tmp_path)
    truth = python_binds({name: trees[name] for name in (*COPIES, "einsum")}, tmp_path)
    assert truth["star-copy"]["Linear"] == "mytorch/nn/impl_x.py", truth
    assert truth["alias-copy"]["Softmax"] == "mytorch/nn/parts/work.py", truth
    assert truth["init-copy"]["MultiHeadAttention"] == "mytorch/nn/blocks.py", truth
    for name, classes in truth.items():
        resolver = mytorch_resolver.Resolver(trees[name])
        traced = {cls: mytorch_resolver.resolve_qualified(resolver, f"mytorch.nn.{cls}")
                  for cls in classes}
        assert {cls: found.path for cls, found in traced.items()} == classes, (name, traced)

    documents, runtime, findings = similarity.class_documents(class_folder(tmp_path, trees))
    assert runtime == {}, runtime
    assert sorted(findings) == sorted(COPIES), findings
    for name in COPIES:
        assert [finding.split(" (")[0] for finding in findings[name]] == [
            f"{path} defines no graded class of its own" for path in GRADED_FILES], findings[name]
    assert "Linear is defined in mytorch/nn/impl_x.py" in findings["star-copy"][0]
    rows = similarity.compare(documents, similarity.handout_document(handout_folder(tmp_path)),
                              tmp_path / "out", findings=findings)
    pairs = {frozenset((row["student_a"], row["student_b"])): row["similarity"] for row in rows}
    copies = [frozenset(pair) for pair in COPIES.items()]
    # A copy and the other copies are not independent work; every other pair is.
    independent = [pair for pair in pairs if not pair & set(COPIES)]
    assert min(pairs[pair] for pair in copies) > max(pairs[pair] for pair in independent), pairs
    assert {frozenset((row["student_a"], row["student_b"])) for row in rows[:3]} == set(copies)
    assert all(row["flagged"] for row in rows[:3]), rows[:3]
    assert not any(row["flagged"] for row in rows
                   if frozenset((row["student_a"], row["student_b"])) in independent), rows
    report = (tmp_path / "out/report.html").read_text()
    assert "# file: mytorch/nn/impl_x.py" in report and "defines no graded class" in report


def test_a_moved_bonus_class_is_compared_where_it_lives(tmp_path):
    """--part bonus traces the bonus's classes too: GELU written once and moved, by its copier,
    into a module of another name (gelu.py a star import of it) is flagged; the graded part of the
    same two students (independent) is not."""
    bonus = "mytorch/nn/gelu.py"
    own = (REPO / bonus).read_text()
    trees = {"einsum": {**student_tree(tmp_path, STYLES["einsum"]), bonus: own},
             "loops": {**student_tree(tmp_path, STYLES["loops"]),
                       "mytorch/nn/act_helpers.py": disguised({bonus: own}, {}, True)[bonus],
                       bonus: "from .act_helpers import *\n"}}
    handins = class_folder(tmp_path, trees)
    handout = handout_folder(tmp_path)
    for part, flagged in (("graded", False), ("bonus", True)):
        documents = similarity.class_documents(handins, part).documents
        if part == "bonus":
            assert "mytorch/nn/act_helpers.py" in documents["loops"].part
        rows = similarity.compare(documents, similarity.handout_document(handout),
                                  tmp_path / part)
        assert [row["flagged"] for row in rows] == [flagged], (part, rows)


@pytest.mark.slow
def test_a_poisoned_class_finishes_through_the_real_entry_point(tmp_path):
    """``python -m autograder.classroom.similarity`` on :func:`poisoned_class`: every file is written, the
    moved copy ranks first, each poisoned file is its student's finding."""
    handins, handout = poisoned_class(tmp_path)
    out = tmp_path / "out"
    result = subprocess.run([sys.executable, "-m", "autograder.classroom.similarity", str(handins),
                             "--handout", str(handout), "--out", str(out)],
                            capture_output=True, text=True, cwd=REPO)
    assert poisoned_class_problems(result, out) == []


def test_each_region_of_the_report_is_under_its_file():
    """A hand-made marked document (two files, CONTEXT_LINES of 3): the lines near a match,
    "...", where lines are left out, and each run of lines under its file's line."""
    assert similarity.CONTEXT_LINES == 3
    marked = "\n".join(["# file: a.py", "a1", "a2", "a3", "a4", "<mark>x", "y</mark>", "a5", "a6",
                        "a7", "a8", "<mark># file: b.py</mark>", *(f"b{i}" for i in range(1, 9)),
                        "<mark>z</mark>"])
    assert similarity.around_marks(marked).split("\n") == [
        "# file: a.py", "a2", "a3", "a4", "<mark>x", "y</mark>", "a5", "a6", "a7", "a8",
        "<mark># file: b.py</mark>", "b1", "b2", "b3", "...",
        "<mark># file: b.py</mark>", "b6", "b7", "b8", "<mark>z</mark>"]


def test_the_tracing_of_a_hostile_package_is_bounded():
    """Two modules star-importing each other thousands of times, an alias chain deeper than
    MAX_IMPORT_DEPTH: each is traced within the bounds and is a finding (an alias chain within
    the depth is traced to its class, as Python binds it)."""
    reference = {path.relative_to(REPO).as_posix(): path.read_text()
                 for path in (REPO / "mytorch").rglob("*.py") if "__pycache__" not in path.parts}
    depth = mytorch_resolver.MAX_IMPORT_DEPTH
    chain = "class L0:\n    pass\n" + "".join(f"L{i + 1} = L{i}\n" for i in range(depth + 10))
    cases = {  # linear.py's text: where Linear is traced (None: it cannot be)
        "from .a import *\n" * 3000: None,
        chain + f"Linear = L{depth + 10}\n": None,
        chain + "Linear = L9\n": 1,
    }
    for text, line in cases.items():
        sources = {**reference, FILES[0]: text, "mytorch/nn/a.py": "from .linear import *\n" * 3000}
        resolver = mytorch_resolver.Resolver(sources)
        found = mytorch_resolver.resolve_qualified(resolver, "mytorch.nn.Linear")
        assert (found and found.node.lineno) == line, (text[:40], found)
        assert resolver.steps <= mytorch_resolver.MAX_STEPS + 1, resolver.steps
        moved = static_inspection.moved_classes(resolver)
        assert (moved == []) == (line is not None), moved
        assert line or moved[0] == f"{FILES[0]} defines no graded class of its own (Linear " \
                                   f"cannot be traced)", moved


RUNTIME_CASES = {  # source: what runtime_code must name (hand-written truth)
    "exec(open('x').read())\n": ["exec"],
    "f = eval\n": ["eval"],
    "code = compile('1', 'x', 'eval')\n": ["compile"],
    "import marshal as m\nm.loads(b'')\n": ["marshal.loads"],
    "from zlib import decompress\ndecompress(b'')\n": ["zlib.decompress"],
    "import base64\nbase64.b64decode('')\n": ["base64.b64decode"],
    "import importlib.util\nimportlib.util.spec_from_loader('m', None)\n": ["importlib.util"],
    "import types\ntypes.FunctionType(None, {})\n": ["types.FunctionType"],
    f"BLOB = '{'QUJD' * 60}'\n": ["an encoded blob"],
    "import numpy as np\nimport importlib\nnp.exp(1)\nimportlib.import_module('math')\n"
    "self.eval()\n": [],
    "def broken(:\n": [],
    # an honest parameter named like a builtin is the caller's value, not the builtin
    "def forward(self, A, eval=False):\n    return A if eval else -A\n": [],
    "f = lambda compile: compile + 1\n": [],
    # ... but a default or an argument that reads the builtin, and a global, are flagged
    "def f(eval=eval):\n    return eval('1')\n": ["eval"],
    "g(exec=exec)\n": ["exec"],
    "def f(exec=0):\n    def g():\n        global exec\n        return exec('1')\n": ["exec"],
}


def test_code_built_at_run_time_is_named_with_its_line(tmp_path):
    for source, expected in RUNTIME_CASES.items():
        found = runtime_code({"mytorch/nn/x.py": source})
        assert [entry.split(" (")[0] for entry in found] == expected, (source, found)
        assert all(entry.endswith(")") and "mytorch/nn/x.py:" in entry for entry in found)
    reference = {path.relative_to(REPO).as_posix(): path.read_text()
                 for path in (REPO / "mytorch").rglob("*.py")}
    assert runtime_code(reference) == []
