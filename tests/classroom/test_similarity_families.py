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
  nesting past the canonical form's bound (read as raw tokens, compared), a student folder named
  with non-UTF-8 bytes: the run finishes, every file it writes is valid UTF-8, the other
  students' pairs are all there, and each poisoned handin that cannot be read is its finding.

    .venv/bin/python -m pytest -q tests/classroom/test_similarity_families.py
"""
import csv
import json
import subprocess
import sys
from pathlib import Path

import pytest

from autograder.judging.intake.mytorch_resolver import MAX_DEFINITIONS
from tools.mytorch_styles import STYLES
from tests.classroom.similarity_classes import (FAMILIES, class_folder,
                                                family_problems, family_trees, handout_folder,
                                                poison, poison_problems)

pytest.importorskip("copydetect")
REPO = Path(__file__).resolve().parents[2]


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


@pytest.mark.slow
@pytest.mark.long
def test_one_poisoned_handin_never_stops_the_class(tmp_path):
    """:func:`poison`'s handins beside three independent students and a copy: the run finishes
    (within the time limit per handin), writes valid UTF-8, produces every other pair and flags
    the copy; each poisoned handin is its own finding."""
    trees = {**family_trees(tmp_path, ["if-branches"]), **poison(tmp_path)}
    out = tmp_path / "out"
    result = run_similarity(class_folder(tmp_path, trees), handout_folder(tmp_path), out)
    assert poison_problems(result, out) == []
