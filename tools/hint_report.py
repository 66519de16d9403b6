"""Do the grader's hints name the bug? The catalogue's graded mutants through the hidden tests.

Each catalogue entry with a ``family`` (the graded mytorch files) is applied to a copy of the
reference ``mytorch/``, which the judge then grades as it grades a handin (the hidden tests, a
sandboxed worker, fresh inputs from ``seed``). The mutant's feedback is that of the first category
that loses points (the order of the rubric, which the student reads first); it names the bug when
one of that category's hints is of the entry's family. The reference must score full marks with
no hint. The same grading (every category) checks that no feedback quotes a hidden input
(:func:`quoted_inputs`), so each mutant is judged once.

The negative set (:data:`NEGATIVES`) holds failures that are not value bugs (the untouched stubs,
a file that does not parse, an import error, a hang, exceptions no rule expects) and two value bugs
whose specific evidence must win (an in-place change of the upstream gradient, a float32-only
failure). Each must be named by its kind, with its file and line (or the test that timed out), and
get no bug family but its own. ``make mutants`` prints both reports after the component tests'
table:

    python -m tools.hint_report                  # every entry with a family, then the negatives
    python -m tools.hint_report --only 'sdpa-*'  # those entries only
    python -m tools.hint_report --negatives      # the negative set only
"""
from __future__ import annotations

import argparse
import fnmatch
import functools
import re
import shutil
import sys
import tempfile
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


def judge_tree(mytorch: Path, seed: int, every_category: bool = False,
               timeout: float = TIMEOUT_S) -> Graded:
    """Grade the ``mytorch`` folder category by category, as the autograder does, until one
    category loses points (or through every category)."""
    runs, first = {}, None
    for category in rubric.MYTORCH_RUBRIC:
        with tempfile.TemporaryDirectory(prefix="hw4p1-hints-") as scratch:
            layout = worker_folders.worker_layout(Path(scratch), mytorch)
            failed = frozenset(name for name, run in runs.items()
                               if not all(result.passed for result in run.results))
            runs[category] = judge.grade_category(category, Sandbox.of(MODE, layout), timeout,
                                                  seed=seed, failed=failed)
        if first is None and not all(result.passed for result in runs[category].results):
            first = category
            if not every_category:
                break
    return Graded(runs, first)


def judge_mutant(mutant: catalogue.Mutant, seed: int, every_category: bool = False) -> Graded:
    """Grade the reference ``mytorch/`` with ``mutant`` applied."""
    with tempfile.TemporaryDirectory(prefix="hw4p1-hint-mutant-") as scratch:
        tree = Path(scratch) / "mytorch"
        shutil.copytree(REPO_ROOT / "mytorch", tree,
                        ignore=shutil.ignore_patterns("__pycache__"))
        path = Path(scratch) / mutant.file
        path.write_text(catalogue.mutate(path.read_text(), mutant))
        return judge_tree(tree, seed, every_category)


def graded_mutants(only: list[str] | None = None) -> list[catalogue.Mutant]:
    found = [m for m in catalogue.load_catalogue(sorted(catalogue.CATALOGUE_DIR.glob("*.yaml")))
             if m.family]
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


@functools.lru_cache(maxsize=1)
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


def report(mutants: list[catalogue.Mutant], seed: int = 0, signatures: bool = False) -> int:
    """Print one line per mutant and the share named, with the failure signature of each mutant
    whose hint missed (of every mutant with ``signatures``); 1 when under :data:`AIM`, when the
    reference gets a hint or loses points, when a mutant scores full marks, or when a mutant's
    feedback in any category quotes a hidden input."""
    reference = judge_tree(REPO_ROOT / "mytorch", seed)
    problems = []
    if reference.category is not None:
        problems.append(f"the reference loses points in {reference.category}")
    print(f"\nhints of the grader ({len(mutants)} graded mutants; the reference: "
          f"{'full marks, no hint' if not problems else problems[0]})")
    named = 0
    for mutant in mutants:
        graded = judge_mutant(mutant, seed, every_category=True)
        hit = mutant.family in graded.families
        named += hit
        if graded.category is None:
            problems.append(f"{mutant.id} scores full marks")
        quoted = quoted_inputs("\n".join(f"{r.message}\n{r.hint}" for run in graded.runs.values()
                                         for r in run.results), seed)
        if quoted:
            problems.append(f"{mutant.id}'s feedback quotes hidden inputs: {quoted[:5]}")
        given = ", ".join(sorted(graded.families)) or "no hint"
        print(f"  {'named ' if hit else 'MISSED'}  {mutant.id:<38s} {mutant.family:<28s} "
              f"{graded.category or '-':<26s} {given}", flush=True)
        if graded.category and (signatures or not hit):
            for test, failure in graded.runs[graded.category].failures.items():
                print(f"            {test}: {describe(failure)}")
        raised = [r.hint for r in graded.runs[graded.category].results if r.hint
                  and graded.runs[graded.category].failures[r.name].kind == "raised"
                  ] if graded.category else []
        if raised:  # a step that raised: the hint quotes its line and the operands' shapes
            print(f"            hint: {raised[0]}")
    share = named / len(mutants) if mutants else 1.0
    print(f"hints name the bug family of {named} / {len(mutants)} graded mutants "
          f"({share:.0%}; aim {AIM:.0%})")
    if share < AIM:
        problems.append(f"hints name {share:.0%} of the families, under the aim of {AIM:.0%}")
    for problem in problems:
        print(f"HINTS  {problem}")
    return 1 if problems else 0


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


def negative_report(seed: int = 0) -> int:
    """Grade each of :data:`NEGATIVES` and print whether its feedback names the failure's kind and
    place with no family but its own; 1 when one does not."""
    print(f"\nthe negative set ({len(NEGATIVES)} failures that no value rule may misname)")
    right = false = 0
    for negative in NEGATIVES:
        with tempfile.TemporaryDirectory(prefix="hw4p1-hint-negative-") as scratch:
            tree = Path(scratch) / "mytorch"
            shutil.copytree(REPO_ROOT / "mytorch", tree,
                            ignore=shutil.ignore_patterns("__pycache__"))
            says = negative.change(tree)
            graded = judge_tree(tree, seed, timeout=negative.timeout)
        results = graded.runs[graded.category].results if graded.category else []
        named = any(all(words in result.message for words in says)
                    for result in results if not result.passed)
        families = graded.families
        wrong_families = families - {negative.family}
        ok = graded.category == negative.category and named and not wrong_families
        right += ok
        false += bool(wrong_families)
        first = next((r.message for r in results if not r.passed), "full marks")
        print(f"  {'right ' if ok else 'WRONG '}  {negative.name:<40s} "
              f"{graded.category or '-':<26s} {', '.join(sorted(families)) or 'no family'}")
        print(f"            {first[:160]}")
    print(f"the negative set: {right} / {len(NEGATIVES)} named by their kind and place, "
          f"{false} false families")
    return 0 if right == len(NEGATIVES) else 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", action="append", help="entries whose id matches this glob")
    parser.add_argument("--seed", type=int, default=0, help="the hidden inputs' seed")
    parser.add_argument("--signatures", action="store_true",
                        help="print every mutant's failure signature (default: only the missed)")
    parser.add_argument("--negatives", action="store_true", help="only the negative set")
    args = parser.parse_args(argv)
    if args.negatives:
        return negative_report(args.seed)
    mutants = graded_mutants(args.only)
    if not mutants:
        print("hint_report: no catalogue entry with a family selected"
              + (" by --only: nothing to report" if args.only else ""), file=sys.stderr)
        return 0 if args.only else 1
    status = report(mutants, args.seed, args.signatures)
    return status if args.only else max(status, negative_report(args.seed))


if __name__ == "__main__":
    sys.exit(main())
