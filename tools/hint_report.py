"""Do the grader's hints name the bug? One judging pass over the catalogue and the negative set.

Each tree (the reference ``mytorch/``; a copy with a catalogue entry of a graded file applied; a
copy with a case of the negative set) is graded as the judge grades a handin (the hidden tests,
a sandboxed worker) :data:`GRADINGS` times: the first with the inputs of ``--seed``, the others
with fresh ones, in :data:`PROCESSES` processes sharing one queue. From those gradings:

- each tree scores the same every time (the tolerances hold for any draw); the reference scores
  full marks with no hint; each mutant loses points;
- a mutant's feedback is that of its first category that loses points (the order of the rubric,
  which the student reads first); it names the bug when one of that category's hints (of the
  first grading) is of the entry's family: :data:`AIM` of them must;
- no feedback of any grading quotes a hidden input (:func:`quoted_inputs`).

The negative set (:data:`NEGATIVES`) holds failures that are not value bugs (the untouched stubs,
a file that does not parse, an import error, a hang, exceptions no rule expects) and two value bugs
whose specific evidence must win (an in-place change of the upstream gradient, a float32-only
failure). In every grading each must be named by its kind, with its file and line (or the test
that timed out), and get no bug family but its own.

``make mutants`` runs the whole pass once, as the ``catalogue_sweep`` test
(``tests/grader/test_worker_scoring.py``), which prints this report and fails on any problem:

    python -m tools.hint_report                  # the reference, every graded entry, the negatives
    python -m tools.hint_report --only 'sdpa-*'  # the reference and those entries only
    python -m tools.hint_report --negatives      # the reference and the negative set only
"""
from __future__ import annotations

import argparse
import fnmatch
import functools
import multiprocessing
import re
import secrets
import shutil
import sys
import tempfile
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np

from autograder.judging.isolation import worker_folders
from autograder.judging.scoring import judge, rubric
from autograder.judging.isolation.sandbox import Sandbox
from autograder.judging.isolation.sandbox_modes import MODES
from autograder.judging.scoring.hidden_tests import mytorch_hidden
from autograder.judging.scoring.hidden_tests.diagnosis import describe
from tools import handout_regions, mutants as catalogue

REPO_ROOT = Path(__file__).resolve().parents[1]
AIM = 0.9  # the share of graded mutants whose hint must name their family
MODE = MODES["none"]  # the worker's own layers: runs as any user, with or without bwrap
TIMEOUT_S = 60.0
HANG_TIMEOUT_S = 15.0  # the negative case that hangs: the reference's Softmax takes well under it
GRADINGS = 3  # of each tree: the same score each time
PROCESSES = 2  # one per core of CI's machine
# the mytorch files the hidden tests grade (each category's class, and MultiHeadAttention's parts)
GRADED_MYTORCH_FILES = ("mytorch/nn/linear.py", "mytorch/nn/activation.py",
                        "mytorch/nn/scaled_dot_product_attention.py",
                        "mytorch/nn/multi_head_attention.py")


@dataclass
class Graded:
    """A mytorch tree as the grader saw it: each category graded (in the rubric's order), and the
    first one short of full marks (None: full marks everywhere)."""

    runs: dict[str, judge.CategoryRun]
    category: str | None

    @property
    def families(self) -> set[str]:
        """The bug families of the first failing category's hints."""
        if self.category is None:
            return set()
        return {result.family for result in self.runs[self.category].results if result.family}


def judge_tree(mytorch: Path, seed: int, categories: tuple[str, ...] | None = None,
               timeout: float = TIMEOUT_S) -> Graded:
    """Grade ``categories`` (default: every one, in the rubric's order) of the ``mytorch`` folder
    with one worker start, as the judge grades a handin (the sandbox's own layers, inputs drawn
    from ``seed``): the one way this report and the tests grade a tree."""
    with tempfile.TemporaryDirectory(prefix="hw4p1-hints-") as scratch:
        layout = worker_folders.worker_layout(Path(scratch), mytorch)
        runs = judge.grade_categories(list(categories or rubric.MYTORCH_RUBRIC),
                                      Sandbox.of(MODE, layout), timeout, seed=seed)
    return Graded(runs, next((name for name, run in runs.items()
                              if not all(result.passed for result in run.results)), None))


def judge_mutant(mutant: catalogue.Mutant, seed: int) -> Graded:
    """Grade every category of the reference ``mytorch/`` with ``mutant`` applied."""
    with tempfile.TemporaryDirectory(prefix="hw4p1-hint-mutant-") as scratch:
        tree = Path(scratch) / "mytorch"
        shutil.copytree(REPO_ROOT / "mytorch", tree,
                        ignore=shutil.ignore_patterns("__pycache__"))
        path = Path(scratch) / mutant.file
        path.write_text(catalogue.mutate(path.read_text(), mutant))
        return judge_tree(tree, seed)


def graded_mutants(only: list[str] | None = None) -> list[catalogue.Mutant]:
    """The catalogue's entries of a graded file or with a bug family (those matching a glob of
    ``only``, when given)."""
    found = [m for m in catalogue.load_catalogue(sorted(catalogue.CATALOGUE_DIR.glob("*.yaml")))
             if m.family or m.file in GRADED_MYTORCH_FILES]
    if only:
        found = [m for m in found if any(fnmatch.fnmatch(m.id, pattern) for pattern in only)]
    return found


NUMBER = re.compile(r"-?\d+(?:\.\d+)?(?:e[+-]?\d+)?")


def significant_digits(token: str) -> int:
    return len(token.lstrip("-").split("e")[0].replace(".", "").lstrip("0"))


def hidden_values(seed: int) -> np.ndarray:
    """Every float the worker receives in the gradings of ``seed``, as judge.grade_category
    draws them."""
    programs = [program for category in rubric.MYTORCH_RUBRIC
                for program in judge.build_programs(mytorch_hidden.tests_of(category), seed)[0]
                .values()]
    arrays = [x.ravel() for program in programs for x in program.arrays.values()
              if x.dtype.kind == "f"]
    return np.concatenate(arrays).astype(np.float64)


@functools.lru_cache(maxsize=4)  # a process's first-grading seed stays between fresh ones
def consecutive_inputs(seed: int) -> frozenset[tuple[str, str, str]]:
    """Every three consecutive hidden inputs of ``seed``, each written to 3 digits."""
    quoted = [f"{v:.2e}" for v in hidden_values(seed)]
    return frozenset(zip(quoted, quoted[1:], quoted[2:]))


def quoted_inputs(feedback: str, seed: int) -> list[str]:
    """What in ``feedback`` (messages and hints) could quote the hidden inputs of ``seed``: each
    number precise enough to quote one (5 significant digits or more), and each three numbers
    in a row that are three consecutive inputs to 3 digits."""
    tokens = NUMBER.findall(feedback)
    floats = [f"{float(t):.2e}" for t in tokens]
    return ([t for t in tokens if significant_digits(t) >= 5]
            + [" ".join(run) for run in zip(floats, floats[1:], floats[2:])
               if run in consecutive_inputs(seed)])


# ---------------------------------------------------------------------------------------------
# The negative set
# ---------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Negative:
    """A change to the reference ``mytorch/`` whose feedback must name the failure's kind.

    ``change(tree)`` edits the copy ``tree`` (a ``mytorch/`` folder) and returns what a failed
    test's message must then say: the kind's words and the place (``mytorch/<file>:<line>``, the
    file and line of a parse error, or "still running" for the test that timed out). ``family``:
    the one bug family the feedback may name ('' for none).
    """

    name: str
    category: str  # the first category that must lose points
    change: Callable[[Path], list[str]]
    family: str = ""
    timeout: float = TIMEOUT_S


def line_of(path: Path, text: str, after: str = "") -> int:
    """The 1-based number of the first line of ``path`` holding ``text`` (after the first line
    holding ``after``, when given)."""
    lines = path.read_text().splitlines()
    start = next(i for i, line in enumerate(lines) if after in line) if after else 0
    return next(i for i, line in enumerate(lines[start:], start) if text in line) + 1


def edit(path: Path, find: str, replace: str) -> None:
    text = path.read_text()
    if text.count(find) != 1:
        raise ValueError(f"{path.name}: {find!r} must occur once in the reference")
    path.write_text(text.replace(find, replace))


def stubs(tree: Path) -> list[str]:
    """Every solution region replaced by the handout's stub: not written yet, at a stub's line."""
    for path in sorted(tree.rglob("*.py")):
        text = path.read_text()
        regions = handout_regions.file_regions(path.name, text)
        if regions:
            path.write_text("".join(handout_regions.stub_out(text.splitlines(keepends=True),
                                                             regions)))
    linear = tree / "nn" / "linear.py"
    first = line_of(linear, "raise NotImplementedError", after="def forward")
    return ["not written yet", f"mytorch/nn/linear.py:{first}, in forward"]


def syntax_error(tree: Path) -> list[str]:
    linear = tree / "nn" / "linear.py"
    line = line_of(linear, "def forward(self, A: np.ndarray) -> np.ndarray:")
    edit(linear, "def forward(self, A: np.ndarray) -> np.ndarray:",
         "def forward(self, A: np.ndarray) -> np.ndarray")
    return ["does not parse", f"mytorch/nn/linear.py line {line}"]


def import_error(tree: Path) -> list[str]:
    activation = tree / "nn" / "activation.py"
    activation.write_text("from .helpers_not_handed_in import stable_exp\n"
                          + activation.read_text())
    return ["does not import", "ModuleNotFoundError", "mytorch/nn/activation.py:1"]


def hang(tree: Path) -> list[str]:
    activation = tree / "nn" / "activation.py"
    edit(activation, "        # BEGIN SOLUTION\n        A = Z - Z.max(",
         "        # BEGIN SOLUTION\n        while True:\n            pass\n        A = Z - Z.max(")
    return ["timed out", "still running"]


def helper_raises(tree: Path) -> list[str]:
    mha = tree / "nn" / "multi_head_attention.py"
    text = "return x.reshape(N, T, self.num_heads, self.head_dim)"
    line = line_of(mha, text)
    edit(mha, text, "return x.reshape(N, T, self.num_heads, head_dim)")
    return ["MultiHeadAttention._split_heads raised NameError",
            f"mytorch/nn/multi_head_attention.py:{line}, in _split_heads"]


def fresh_softmax(tree: Path) -> list[str]:
    sdpa = tree / "nn" / "scaled_dot_product_attention.py"
    edit(sdpa, "self.attention_weights = self.softmax.forward(scores)",
         "self.attention_weights = Softmax(dim=-1).forward(scores)")
    line = line_of(tree / "nn" / "activation.py", "check_backward(", after="def backward")
    return ["ScaledDotProductAttention.backward raised RuntimeError",
            f"mytorch/nn/activation.py:{line}, in backward"]


def upstream_in_place(tree: Path) -> list[str]:
    activation = tree / "nn" / "activation.py"
    edit(activation, "        dLdZ = dLdA - row_dot\n        dLdZ *= self.A\n        return dLdZ\n",
         "        dLdA -= row_dot\n        dLdA *= self.A\n        return dLdA\n")
    return ["upstream gradient dLdA was changed in place"]


def float32_only(tree: Path) -> list[str]:
    sdpa = tree / "nn" / "scaled_dot_product_attention.py"
    edit(sdpa, "scores *= 1.0 / math.sqrt(Q.shape[-1])",
         "scores = scores / np.sqrt(np.float64(Q.shape[-1]))")
    return ["float32 in, got float64"]


NEGATIVES = [
    Negative("untouched stubs", "Linear", stubs),
    Negative("SyntaxError in linear.py", "Linear", syntax_error),
    Negative("ImportError in activation.py", "Linear", import_error),
    Negative("Softmax.forward hangs", "Softmax", hang, timeout=HANG_TIMEOUT_S),
    Negative("NameError in a helper (_split_heads)", "MultiHeadAttention", helper_raises),
    Negative("a fresh Softmax in SDPA.forward", "ScaledDotProductAttention", fresh_softmax),
    Negative("Softmax.backward changes dLdA in place", "Softmax", upstream_in_place, "in-place"),
    Negative("float32 promoted to float64 in SDPA", "ScaledDotProductAttention", float32_only,
             "dtype"),
]


# ---------------------------------------------------------------------------------------------
# The judging pass: every tree graded GRADINGS times, the checks and the report read from it
# ---------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Tree:
    """A mytorch folder the pass grades: the reference, a catalogue entry applied to it
    (``mutant``) or a case of the negative set (``negative``, whose failed message must hold each
    of ``says``). ``categories``: those graded, in the rubric's order (a negative's up to the one
    that must lose points: what comes after it only repeats its failure)."""

    name: str
    mytorch: Path
    categories: tuple[str, ...]
    timeout: float = TIMEOUT_S
    mutant: catalogue.Mutant | None = None
    negative: Negative | None = None
    says: tuple[str, ...] = ()


@dataclass(frozen=True)
class Grading:
    """What the report reads of one grading of a tree with the hidden inputs of ``seed`` (plain
    values: it comes back from a pool process). ``points``: {category: points}; ``category``: the
    first short of full marks (None: full marks); ``families``, ``messages``, ``signatures``
    (``test: failure``) and ``raised`` (the hints of steps that raised): that category's;
    ``hinted``: a hint anywhere; ``quoted``: what any feedback holds that could quote an input."""

    seed: int
    points: dict[str, float]
    category: str | None
    families: tuple[str, ...]
    messages: tuple[str, ...]
    signatures: tuple[str, ...]
    raised: tuple[str, ...]
    hinted: bool
    quoted: tuple[str, ...]


def grade(tree: Tree, seed: int) -> Grading:
    """Grade ``tree``'s categories (:func:`judge_tree`) and read the grading."""
    graded = judge_tree(tree.mytorch, seed, tree.categories, tree.timeout)
    runs = graded.runs
    first = runs[graded.category] if graded.category else None
    results = first.results if first else []
    feedback = "\n".join(f"{r.message}\n{r.hint}" for run in runs.values() for r in run.results)
    return Grading(
        seed, {name: sum(result.points for result in run.results) for name, run in runs.items()},
        graded.category, tuple(sorted(graded.families)),
        tuple(result.message for result in results if not result.passed),
        tuple(f"{test}: {describe(failure)}" for test, failure in first.failures.items())
        if first else (),
        tuple(r.hint for r in results if r.hint and first.failures[r.name].kind == "raised"),
        any(result.hint for run in runs.values() for result in run.results),
        tuple(quoted_inputs(feedback, seed)))


def trees_of(folder: Path, mutants: list[catalogue.Mutant],
             negatives: list[Negative]) -> list[Tree]:
    """The reference, each of ``mutants`` and each of ``negatives`` as a copy of the reference
    ``mytorch/`` in ``folder``; the negatives first (one hangs to its time limit)."""
    every = tuple(rubric.MYTORCH_RUBRIC)
    trees = []

    def copy() -> Path:
        tree = folder / f"{len(trees):03d}" / "mytorch"
        shutil.copytree(REPO_ROOT / "mytorch", tree, ignore=shutil.ignore_patterns("__pycache__"))
        return tree

    for negative in negatives:
        tree = copy()
        says = tuple(negative.change(tree))
        trees.append(Tree(negative.name, tree, every[:every.index(negative.category) + 1],
                          negative.timeout, negative=negative, says=says))
    trees.append(Tree("reference", copy(), every))
    for mutant in mutants:
        tree = copy()
        path = tree.parent / mutant.file
        path.write_text(catalogue.mutate(path.read_text(), mutant))
        trees.append(Tree(mutant.id, tree, every, mutant=mutant))
    return trees


def judging_pass(trees: list[Tree], seed: int = 0, gradings: int = GRADINGS,
                 processes: int = PROCESSES) -> dict[str, list[Grading]]:
    """Grade each of ``trees`` ``gradings`` times, the first with the inputs of ``seed`` (the
    hints' table is reproducible), the others with fresh ones as the judge draws them, in
    ``processes`` processes sharing one queue in the order of ``trees``. Returns {tree's name:
    its gradings, in order}."""
    seeds = {tree.name: [seed] + [secrets.randbits(judge.SEED_BITS) for _ in range(gradings - 1)]
             for tree in trees}
    jobs = [(tree, tree_seed) for tree in trees for tree_seed in seeds[tree.name]]
    with ProcessPoolExecutor(processes, mp_context=multiprocessing.get_context("fork")) as pool:
        done = list(pool.map(grade, *zip(*jobs)))
    found: dict[str, list[Grading]] = {tree.name: [] for tree in trees}
    for (tree, _), grading in zip(jobs, done):
        found[tree.name].append(grading)
    return found


def score_problems(tree: Tree, gradings: list[Grading]) -> list[str]:
    """Each grading of ``tree`` scores the same; the reference full marks with no hint, a mutant
    short of full marks; no feedback quotes a hidden input."""
    problems = []
    if any(grading.points != gradings[0].points for grading in gradings):
        problems.append(f"{tree.name} scored differently: "
                        + "; ".join(f"seed {g.seed}: {g.points}" for g in gradings))
    first = gradings[0]
    if tree.name == "reference" and (first.category or any(g.hinted for g in gradings)):
        problems.append(f"the reference loses points in {first.category} or gets a hint")
    if tree.mutant and first.category is None:
        problems.append(f"{tree.name} scores full marks")
    for grading in gradings:
        if grading.quoted:
            problems.append(f"{tree.name}'s feedback quotes hidden inputs (seed {grading.seed}): "
                            f"{list(grading.quoted[:5])}")
    return problems


def negative_named(tree: Tree, grading: Grading) -> bool:
    """The negative case's first failing category is the expected one, a failed message there
    names its kind and place, and no hint names a family but its own."""
    return (grading.category == tree.negative.category
            and any(all(words in message for words in tree.says) for message in grading.messages)
            and set(grading.families) <= {tree.negative.family})


def print_hints(trees: list[Tree], found: dict[str, list[Grading]],
                signatures: bool) -> list[str]:
    """Print the mutants' table (from each first grading): a line per mutant, whether its hint
    names its family, the failure signature of each that missed (of each with ``signatures``)
    and the hint of a step that raised; the problem when under :data:`AIM`."""
    mutants = [tree for tree in trees if tree.mutant]
    reference = found["reference"][0]
    print(f"\nhints of the grader ({len(mutants)} graded mutants; the reference: "
          f"{'full marks, no hint' if reference.category is None else reference.category})")
    named = 0
    for tree in mutants:
        first, family = found[tree.name][0], tree.mutant.family
        hit = family in first.families
        named += hit
        print(f"  {'named ' if hit else 'MISSED'}  {tree.name:<38s} {family:<28s} "
              f"{first.category or '-':<26s} {', '.join(first.families) or 'no hint'}",
              flush=True)
        for line in first.signatures if signatures or not hit else ():
            print(f"            {line}")
        if first.raised:  # a step that raised: the hint quotes its line and the operands' shapes
            print(f"            hint: {first.raised[0]}")
    share = named / len(mutants) if mutants else 1.0
    if mutants:
        print(f"hints name the bug family of {named} / {len(mutants)} graded mutants "
              f"({share:.0%}; aim {AIM:.0%})")
    return ([f"hints name {share:.0%} of the families, under the aim of {AIM:.0%}"]
            if share < AIM else [])


def print_negatives(trees: list[Tree], found: dict[str, list[Grading]]) -> list[str]:
    """Print the negative set's table (from each first grading); a problem for each case that a
    grading does not name by its kind and place, or names with a family not its own."""
    negatives = [tree for tree in trees if tree.negative]
    if not negatives:
        return []
    print(f"\nthe negative set ({len(negatives)} failures that no value rule may misname)")
    problems, false = [], 0
    for tree in negatives:
        first = found[tree.name][0]
        wrong = [grading.seed for grading in found[tree.name] if not negative_named(tree, grading)]
        false += bool(set(first.families) - {tree.negative.family})
        if wrong:
            problems.append(f"the negative case {tree.name!r} is not named by its kind and place "
                            f"(seeds {wrong})")
        print(f"  {'WRONG ' if wrong else 'right '}  {tree.name:<40s} "
              f"{first.category or '-':<26s} {', '.join(first.families) or 'no family'}")
        print(f"            {(first.messages or ('full marks',))[0][:160]}")
    print(f"the negative set: {len(negatives) - len(problems)} / {len(negatives)} named by their "
          f"kind and place, {false} false families")
    return problems


def report(trees: list[Tree], found: dict[str, list[Grading]],
           signatures: bool = False) -> list[str]:
    """Print the hints' table, the negative set's and the scores' line; return every problem
    (none: the pass holds)."""
    problems = print_hints(trees, found, signatures) + print_negatives(trees, found)
    for tree in trees:
        problems += score_problems(tree, found[tree.name])
    gradings = {len(found[tree.name]) for tree in trees}
    print(f"\n{len(trees)} trees graded {', '.join(map(str, sorted(gradings)))} times each "
          f"(the first with the --seed, then fresh inputs): {len(problems)} problems")
    for problem in problems:
        print(f"HINTS  {problem}")
    return problems


def run(mutants: list[catalogue.Mutant], negatives: list[Negative], seed: int = 0,
        gradings: int = GRADINGS, signatures: bool = False) -> list[str]:
    """The judging pass over the reference, ``mutants`` and ``negatives``, and its report;
    every problem found."""
    with tempfile.TemporaryDirectory(prefix="hw4p1-hint-pass-") as folder:
        trees = trees_of(Path(folder), mutants, negatives)
        found = judging_pass(trees, seed, gradings)
    return report(trees, found, signatures)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", action="append", help="entries whose id matches this glob")
    parser.add_argument("--seed", type=int, default=0, help="the first grading's hidden inputs")
    parser.add_argument("--gradings", type=int, default=GRADINGS, help="gradings of each tree")
    parser.add_argument("--signatures", action="store_true",
                        help="print every mutant's failure signature (default: only the missed)")
    parser.add_argument("--negatives", action="store_true", help="only the negative set")
    args = parser.parse_args(argv)
    mutants = [] if args.negatives else graded_mutants(args.only)
    if args.only and not mutants:
        print("hint_report: no graded catalogue entry selected by --only: nothing to report",
              file=sys.stderr)
        return 0
    negatives = [] if args.only else NEGATIVES
    return 1 if run(mutants, negatives, args.seed, args.gradings, args.signatures) else 0


if __name__ == "__main__":
    sys.exit(main())
