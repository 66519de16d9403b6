# hw4p1: instructor-only
"""The grading numbers are defined once, in ``hw4lib/grading_numbers.py``: a one-line edit of the
pass mark there, in a copy of the repository, reaches the handout README, the data card, the
grader's score and ``make autograde``'s default; no other module sets them.

    .venv/bin/python -m pytest -q tests/kit/test_grading_numbers.py
"""
import ast
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from hw4lib import grading_numbers
from tools.mutants import make_copy, tree_files

REPO_ROOT = Path(__file__).resolve().parents[2]
MODULE = "hw4lib/grading_numbers.py"
NEW_PASS_MARK = 3.25  # below the shipped one, so that SCORED_PPL scores differently
SCORED_PPL = 3.4
# What a tree states and awards for its pass mark: the handout README, the data card of a tiny
# build, the grader's score at SCORED_PPL and make autograde's default, as JSON.
STATED = """
import inspect, json
from pathlib import Path
from autograder.judging.scoring import rubric
from datagen.build_data import Provenance, Utterance, data_card
from tools import make_autograde
from tools.handout_readme import student_readme
splits = {name: [Utterance(f"1-{i}-0", "A TINY SPLIT")]
          for i, name in enumerate(("train", "val", "test"))}
print(json.dumps({
    "readme": student_readme(Path("README.md").read_text(), [], set()),
    "card": data_card(splits, Provenance("a tiny test"), {5: {"val": 4.0, "test": 4.0}}, "test"),
    "score": rubric.lm_score(%r),
    "autograde_default":
        inspect.signature(make_autograde.build).parameters["full_marks_ppl"].default,
}))
""" % SCORED_PPL


def stated(tree: Path) -> dict:
    """What ``tree`` states and awards (see STATED), computed in a fresh interpreter in it."""
    process = subprocess.run([sys.executable, "-c", STATED], cwd=tree, capture_output=True,
                             text=True, timeout=120)
    assert process.returncode == 0, process.stderr[-3000:]
    return json.loads(process.stdout.splitlines()[-1])


@pytest.mark.slow  # two fresh interpreters import torch
def test_a_one_line_edit_of_the_pass_mark_reaches_the_handout_the_data_card_and_the_grader(
        tmp_path):
    copy = tmp_path / "repo"
    make_copy(copy, tree_files(REPO_ROOT), REPO_ROOT)
    module = (copy / MODULE).read_text()
    line = f"FULL_MARKS_PPL = {grading_numbers.FULL_MARKS_PPL}\n"
    assert module.count(line) == 1, f"{MODULE} must define the pass mark on the line {line!r}"
    (copy / MODULE).write_text(module.replace(line, f"FULL_MARKS_PPL = {NEW_PASS_MARK}\n"))

    before, after = stated(REPO_ROOT), stated(copy)
    old, new = f"at most {grading_numbers.FULL_MARKS_PPL}", f"at most {NEW_PASS_MARK}"
    for text in ("readme", "card"):
        assert old in before[text] and new not in before[text], f"the {text} states {old!r}"
        assert new in after[text] and old not in after[text], (
            f"after the edit, the {text} must state {new!r}, and not {old!r}")
    assert before["score"] == grading_numbers.LM_POINTS > after["score"] > 0, (before, after)
    assert (before["autograde_default"], after["autograde_default"]) == (
        grading_numbers.FULL_MARKS_PPL, NEW_PASS_MARK)


# Names that would hold a threshold (PASS_MARK, FULL_MARKS_PPL, ...): a number equal to one of the
# module's under such a name is a copy of it.
THRESHOLD_NAME = re.compile(r"pass|mark|threshold|ppl", re.IGNORECASE)


def test_no_other_python_file_defines_a_grading_number():
    """No module but hw4lib/grading_numbers.py names a perplexity threshold of the module's value
    or writes out the mytorch categories' points (they import them)."""
    numbers = {grading_numbers.FULL_MARKS_PPL, grading_numbers.ZERO_MARKS_PPL}
    categories = set(grading_numbers.MYTORCH_RUBRIC)
    found = []
    for path in tree_files(REPO_ROOT):
        if not path.endswith(".py") or path == MODULE:
            continue
        for node in ast.walk(ast.parse((REPO_ROOT / path).read_text(encoding="utf-8"))):
            if not isinstance(node, ast.Assign):
                continue
            names = [target.id for target in node.targets if isinstance(target, ast.Name)]
            value = node.value
            if isinstance(value, ast.Constant) and value.value in numbers and \
                    any(THRESHOLD_NAME.search(name) for name in names):
                found.append(f"{path}:{node.lineno} sets {names} = {value.value}")
            if isinstance(value, ast.Dict) and categories <= {
                    key.value for key in value.keys if isinstance(key, ast.Constant)}:
                found.append(f"{path}:{node.lineno} writes out the mytorch categories' points")
    assert not found, f"import them from {MODULE} instead: {found}"
