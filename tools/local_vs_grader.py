"""The local mytorch report against the grader's, for every graded catalogue entry: what
``python -m tests.test_mytorch --json`` shows (a category's points when all its tests pass, none
when one fails) and the points the grader's hidden tests give (``tools/hint_report.judge_mutant``,
every category, seed 0). Prints a markdown table for ``docs/results.md``; exit status 1 when the
local report shows points for a category that the grader does not give in full (a local promise
the grade breaks).

    python -m tools.local_vs_grader                   # every entry with a family
    python -m tools.local_vs_grader --only 'softmax-*'
"""
from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from autograder.judging.scoring import rubric
from tools import mutants as catalogue
from tools.hint_report import graded_mutants, judge_mutant

REPO_ROOT = Path(__file__).resolve().parents[1]


def local_scores(mutant: catalogue.Mutant) -> dict[str, float | None]:
    """{category: points or None} of ``python -m tests.test_mytorch --json`` on a copy of the
    reference's mytorch/ and tests/ with ``mutant`` applied."""
    with tempfile.TemporaryDirectory(prefix="hw4p1-local-vs-grader-") as scratch:
        root = Path(scratch)
        for folder in ("mytorch", "tests", "hw4lib"):
            shutil.copytree(REPO_ROOT / folder, root / folder,
                            ignore=shutil.ignore_patterns("__pycache__", "kit", "grader",
                                                          "platforms", "classroom", "library"))
        path = root / mutant.file
        path.write_text(catalogue.mutate(path.read_text(), mutant))
        run = subprocess.run([sys.executable, "-m", "tests.test_mytorch", "--json"], cwd=root,
                             capture_output=True, text=True, timeout=900)
        return json.loads(run.stdout.strip().splitlines()[-1])["scores"]


def shown(scores: dict[str, float | None]) -> str:
    failing = [category for category, points in scores.items() if points is None]
    if not failing:
        return f"{sum(scores.values()):g}"
    earned = sum(points for points in scores.values() if points is not None)
    return f"none ({earned:g} from passing; {', '.join(failing)} fail)"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", action="append", help="entry ids matching this glob")
    args = parser.parse_args(argv)
    broken = []
    print("| entry | local total | grader total (seed 0) | local points the grader does not give |")
    print("| --- | --- | ---: | --- |")
    for mutant in graded_mutants(args.only):
        local = local_scores(mutant)
        graded = judge_mutant(mutant, seed=0)
        grader = {category: round(sum(result.points for result in run.results), 2)
                  for category, run in graded.runs.items()}
        promised = [category for category, points in local.items()
                    if points is not None and grader.get(category) != rubric.RUBRIC[category]]
        broken += promised
        print(f"| `{mutant.id}` | {shown(local)} | {sum(grader.values()):g} | "
              f"{', '.join(promised) or '-'} |", flush=True)
    return 1 if broken else 0


if __name__ == "__main__":
    sys.exit(main())
