"""Do the grader's hints name the bug? The catalogue's graded mutants through the hidden tests.

Each catalogue entry with a ``family`` (the graded mytorch files) is applied to a copy of the
reference ``mytorch/``, which the judge then grades as it grades a handin (the hidden tests, a
sandboxed worker, fresh inputs from ``seed``). The mutant's feedback is that of the first category
that loses points (the order of the rubric, which the student reads first); it names the bug when
one of that category's hints is of the entry's family. The reference must score full marks with
no hint. ``make mutants`` prints this report after the component tests' table:

    python -m tools.hint_report                  # every entry with a family
    python -m tools.hint_report --only 'sdpa-*'
"""
from __future__ import annotations

import argparse
import fnmatch
import shutil
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from autograder import grade, judge, rubric, sandbox
from autograder.hidden_tests.diagnosis import describe
from tools import mutants as catalogue

REPO_ROOT = Path(__file__).resolve().parents[1]
AIM = 0.9  # the share of graded mutants whose hint must name their family
MODE = "none"  # the worker's own layers: runs as any user, with or without bwrap
TIMEOUT_S = 60.0


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


def judge_tree(mytorch: Path, seed: int, every_category: bool = False) -> Graded:
    """Grade the ``mytorch`` folder category by category, as the autograder does, until one
    category loses points (or through every category)."""
    runs, first = {}, None
    for category in rubric.MYTORCH_RUBRIC:
        with tempfile.TemporaryDirectory(prefix="hw4p1-hints-") as scratch:
            root = Path(scratch)
            layout = sandbox.Layout(runtime_dir=root / "runtime", pylib_dir=root / "pylib",
                                    student_dir=root / "student", input_dir=root / "input",
                                    tmp_dir=root / "tmp")
            shutil.copytree(mytorch, layout.student_dir / "mytorch")
            (layout.runtime_dir / "autograder").mkdir(parents=True)
            for name in grade.RUNTIME_FILES:
                shutil.copyfile(REPO_ROOT / "autograder" / name,
                                layout.runtime_dir / "autograder" / name)
            grade.link_numpy(layout.pylib_dir)
            layout.tmp_dir.mkdir()
            failed = frozenset(name for name, run in runs.items()
                               if not all(result.passed for result in run.results))
            runs[category] = judge.grade_category(category, layout, MODE, TIMEOUT_S, seed=seed,
                                                  failed=failed)
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


def report(mutants: list[catalogue.Mutant], seed: int = 0, signatures: bool = False) -> int:
    """Print one line per mutant and the share named, with the failure signature of each mutant
    whose hint missed (of every mutant with ``signatures``); 1 when under :data:`AIM`, when the
    reference gets a hint or loses points, or when a mutant scores full marks."""
    reference = judge_tree(REPO_ROOT / "mytorch", seed)
    problems = []
    if reference.category is not None:
        problems.append(f"the reference loses points in {reference.category}")
    print(f"\nhints of the grader ({len(mutants)} graded mutants; the reference: "
          f"{'full marks, no hint' if not problems else problems[0]})")
    named = 0
    for mutant in mutants:
        graded = judge_mutant(mutant, seed)
        hit = mutant.family in graded.families
        named += hit
        if graded.category is None:
            problems.append(f"{mutant.id} scores full marks")
        given = ", ".join(sorted(graded.families)) or "no hint"
        print(f"  {'named ' if hit else 'MISSED'}  {mutant.id:<38s} {mutant.family:<28s} "
              f"{graded.category or '-':<26s} {given}", flush=True)
        if graded.category and (signatures or not hit):
            for test, failure in graded.runs[graded.category].failures.items():
                print(f"            {test}: {describe(failure)}")
    share = named / len(mutants) if mutants else 1.0
    print(f"hints name the bug family of {named} / {len(mutants)} graded mutants "
          f"({share:.0%}; aim {AIM:.0%})")
    if share < AIM:
        problems.append(f"hints name {share:.0%} of the families, under the aim of {AIM:.0%}")
    for problem in problems:
        print(f"HINTS  {problem}")
    return 1 if problems else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", action="append", help="entries whose id matches this glob")
    parser.add_argument("--seed", type=int, default=0, help="the hidden inputs' seed")
    parser.add_argument("--signatures", action="store_true",
                        help="print every mutant's failure signature (default: only the missed)")
    args = parser.parse_args(argv)
    mutants = graded_mutants(args.only)
    if not mutants:
        print("hint_report: no catalogue entry with a family selected"
              + (" by --only: nothing to report" if args.only else ""), file=sys.stderr)
        return 0 if args.only else 1
    return report(mutants, args.seed, args.signatures)


if __name__ == "__main__":
    sys.exit(main())
