# hw4p1: instructor-only
"""The similarity on its canonical form (autograder/classroom/canonical_code.py, whose rules
tests/classroom/test_canonical_code.py tests one by one) against copies rewritten to hide (issue
60): the state a handin declares read across its files, the report pointing at the student's own
lines; and each disguise family of tests/classroom/similarity_disguises.py flagged beside its
victim, above every honest pair by the margin docs/results.md states, no honest pair flagged.

    .venv/bin/python -m pytest -q tests/classroom/test_similarity_disguises.py
"""
import re

import pytest

from autograder.classroom import similarity
from autograder.classroom.canonical_code import canonical
from tests.classroom.similarity_classes import handout_folder
from tests.classroom.similarity_disguises import (DISGUISES, MARGIN, NOOPS, behaviour,
                                                  disguised_class, margin)

pytest.importorskip("copydetect")
PART = ("mytorch/nn/linear.py", "mytorch/nn/activation.py",
        "mytorch/nn/scaled_dot_product_attention.py", "mytorch/nn/multi_head_attention.py")


def test_state_declared_in_another_file_of_the_handin_is_kept():
    """A method moved into a mixin of another module keeps the stores of the state its class
    declares there: the handin's files are read together for it."""
    sources = {"a.py": "class Layer(Half):\n    def __init__(self):\n        self.dLdW = None\n",
               "b.py": "class Half:\n    def backward(self, g, x):\n        self.dLdW = g.T @ x\n"
                       "        return g\n"}
    together = similarity.fingerprints(sources)["b.py"].kgrams.raw_code
    assert together == canonical(sources["b.py"], frozenset({"dLdW"})).tokens
    assert together != similarity.fingerprint(sources["b.py"]).kgrams.raw_code


def test_the_report_marks_the_students_own_lines(tmp_path):
    """A copy with a statement without effect after each line: the report marks exactly the
    copied lines of both files, never the inserted ones (each canonical token keeps its source
    lines)."""
    original = ("import numpy as np\n\n\ndef f(a, b, x):\n"
                "    t = np.exp(x - x.max(axis=-1, keepdims=True))\n"
                "    s = t / t.sum(axis=-1, keepdims=True)\n    return s.reshape(a.shape) @ b.T\n")
    copy = re.sub(r"(\n    [^\n]+)", r"\1\n    assert np.ndim(x) >= 0, 'fine'", original)
    path = "mytorch/nn/activation.py"
    documents = {name: similarity.code_of({path: similarity.fingerprint(text)}, [path], {})
                 for name, text in (("a", original), ("b", copy))}
    [row] = similarity.compare(documents, {}, tmp_path)
    assert row["similarity"] == 1.0
    marked = {name: [line.removeprefix("<mark>").removesuffix("</mark>") for line in
                     similarity.marked(path, documents[name].files[path],
                                       documents["a"].files[path].kgrams.hashes).splitlines()
                     if line.startswith("<mark>")] for name in documents}
    assert marked["a"] == original.splitlines()[3:]  # the function, from its def line
    assert marked["b"] == marked["a"]


@pytest.mark.slow
def test_each_disguise_runs_its_victims_code(tmp_path):
    """The truth the margin stands on: every disguised copy computes what its victim computes
    (Python's own import of both, every graded class forward and backward)."""
    trees = disguised_class(tmp_path)
    computed = behaviour(trees, tmp_path / "python")
    for name in trees:
        assert computed[name] == computed[name.split("--")[-1]], name


@pytest.mark.slow
@pytest.mark.long
def test_each_disguise_is_flagged_above_every_honest_pair(tmp_path):
    """Every disguise of every honest student (the reference, three styles) is flagged beside
    its victim; no pair of different students' work is, disguised or not; the lowest copy ranks
    above the highest such pair by at least MARGIN, 0.35 (docs/results.md measures 0.359)."""
    assert MARGIN == 0.35
    trees = disguised_class(tmp_path)
    documents = {name: similarity.code_of(similarity.fingerprints(tree),
                                          [path for path in PART if path in tree], {})
                 for name, tree in trees.items()}
    rows = similarity.compare(documents, similarity.handout_document(handout_folder(tmp_path)),
                              tmp_path / "out")
    lowest, highest, copies, apart = margin(rows)
    assert len(copies) == len(DISGUISES) * 4 and len(DISGUISES) == 5 + len(NOOPS)
    assert len(apart) == 6 * (1 + len(DISGUISES)) ** 2
    assert all(row["flagged"] for row in copies), [row for row in copies if not row["flagged"]]
    assert not any(row["flagged"] for row in apart), [row for row in apart if row["flagged"]]
    assert lowest - highest >= MARGIN, (lowest, highest)
