"""The judge's command line (``python -m autograder.judging.grade --help``)."""
from __future__ import annotations

import argparse
from pathlib import Path

from autograder.judging.isolation import sandbox_modes
from autograder.judging.scoring import rubric
from autograder.judging.isolation.autograder_paths import AUTOGRADE_ROOT


def parse(argv: list[str] | None) -> argparse.Namespace:
    """The judge's arguments from ``argv`` (the process's own when None); ``sandbox`` is the
    forced mode's record (``sandbox_modes.Mode``) or None."""
    parser = argparse.ArgumentParser(description="Grade a hw4p1 handin.tar; the scores line "
                                                 "comes last.")
    parser.add_argument("handin", type=Path, help="the student's handin.tar")
    parser.add_argument("--work", type=Path, default=AUTOGRADE_ROOT.parent / "work",
                        help="scratch folder, emptied first (default: beside the autograder)")
    parser.add_argument("--autograde-tar", type=Path,
                        help="the autograde.tar this autograder came in: deleted with the "
                             "hidden set before student code runs")
    parser.add_argument("--mytorch-timeout", type=float, default=rubric.MYTORCH_TIMEOUT_S,
                        help="seconds allowed to each mytorch category")
    parser.add_argument("--model-timeout", type=float, default=rubric.MODEL_TIMEOUT_S,
                        help="seconds allowed to rebuild and evaluate the model")
    parser.add_argument("--sandbox", choices=sandbox_modes.MODES,
                        help="force one isolation mode (default: the strongest that works): "
                             + "; ".join(f"{mode.name}: {mode.isolates}"
                                         for mode in sandbox_modes.MODES.values()))
    parser.add_argument("--allow-unisolated", action="store_true",
                        help="run student code even where no isolation layer works (never on a "
                             "shared grading host)")
    parser.add_argument("--results-json", type=Path,
                        help="also write every test's outcome here (for other platforms)")
    args = parser.parse_args(argv)
    args.sandbox = sandbox_modes.MODES.get(args.sandbox)  # the mode record from here on
    return args
