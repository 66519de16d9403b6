"""The grader's mytorch phase on the reference mytorch: one worker start for the four categories
(``judge.grade_categories``, what the grader runs) against a worker start per category
(``judge.grade_category`` in turn, what it ran before), interleaved (``bench.timing``); wall
and CPU seconds (the judge's own, and its waited-for children's), in the sandbox mode that works
here and in mode ``none`` (whose worker processes are all waited for, so their CPU counts).

    .venv/bin/python -m bench bench_mytorch_phase
"""
import resource
import tempfile
from pathlib import Path
from typing import Callable

from autograder.judging.isolation import sandbox, worker_folders
from autograder.judging.scoring import judge, rubric
from autograder.judging.isolation.sandbox_modes import MODES, Mode
from bench.timing import interleaved_medians

REPO_ROOT = Path(__file__).resolve().parents[1]

ROUNDS = 4
TIMEOUT_S = 60.0


def reference_layout(scratch: str):
    """The worker's folders holding the reference mytorch, readable to a sandbox's own uid."""
    layout = worker_folders.worker_layout(Path(scratch), REPO_ROOT / "mytorch")
    sandbox.make_readable(Path(scratch))
    return layout


def one_worker(layout, mode: Mode) -> None:
    judge.grade_categories(list(rubric.MYTORCH_RUBRIC), sandbox.Sandbox.of(mode, layout), TIMEOUT_S)


def worker_per_category(layout, mode: Mode) -> None:
    for category in rubric.MYTORCH_RUBRIC:
        judge.grade_category(category, sandbox.Sandbox.of(mode, layout), TIMEOUT_S)


def phase(grade, mode: Mode) -> Callable[[], float]:
    """One mytorch phase of the reference; it returns its waited-for children's CPU seconds."""
    def run() -> float:
        with tempfile.TemporaryDirectory(prefix="hw4p1-bench-phase-") as scratch:
            layout = reference_layout(scratch)
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            grade(layout, mode)
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
        return after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime

    return run


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="hw4p1-bench-probe-") as scratch:
        strongest, _ = sandbox.choose(reference_layout(scratch), sandbox.python_executable())
    print(f"{'mode':<8} {'worker starts':<24} {'wall s':>8} {'judge CPU s':>12} "
          f"{'children CPU s':>15}   (medians of {ROUNDS} interleaved; children: the last)")
    for mode in dict.fromkeys([strongest and strongest.mode, MODES["none"]]):
        if mode is None:
            continue
        timings = interleaved_medians({"one per category": phase(worker_per_category, mode),
                                       "one for all categories": phase(one_worker, mode)},
                                      ROUNDS)
        for name, timing in timings.items():
            print(f"{mode.name:<8} {name:<24} {timing.wall:>8.2f} {timing.cpu:>12.2f} "
                  f"{timing.result:>15.2f}")


if __name__ == "__main__":
    main()
