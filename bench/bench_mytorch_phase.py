"""The grader's mytorch phase on the reference mytorch: one worker start for the four categories
(``judge.grade_categories``, what the grader runs) against a worker start per category
(``judge.grade_category`` in turn, what it ran before), interleaved; wall and CPU seconds (the
judge's own and its waited-for children's), in the sandbox mode that works here and in mode
``none`` (whose worker processes are all waited for, so their CPU counts).

    .venv/bin/python -m bench bench_mytorch_phase
"""
import resource
import statistics
import tempfile
import time
from pathlib import Path

from autograder import judge, rubric, sandbox
from tools.hint_report import REPO_ROOT, worker_layout

ROUNDS = 4
TIMEOUT_S = 60.0


def reference_layout(scratch: str):
    """The worker's folders holding the reference mytorch, readable to a sandbox's own uid."""
    layout = worker_layout(Path(scratch), REPO_ROOT / "mytorch")
    layout.input_dir.mkdir()
    sandbox.make_readable(Path(scratch))
    return layout


def one_worker(layout, mode) -> None:
    judge.grade_categories(list(rubric.MYTORCH_RUBRIC), layout, mode, TIMEOUT_S)


def worker_per_category(layout, mode) -> None:
    for category in rubric.MYTORCH_RUBRIC:
        judge.grade_category(category, layout, mode, TIMEOUT_S)


def measure(grade, mode: str) -> tuple[float, float, float]:
    """(wall, judge CPU, children's CPU) seconds of one mytorch phase of the reference."""
    with tempfile.TemporaryDirectory(prefix="hw4p1-bench-phase-") as scratch:
        layout = reference_layout(scratch)
        own, children = (resource.getrusage(resource.RUSAGE_SELF),
                         resource.getrusage(resource.RUSAGE_CHILDREN))
        start = time.monotonic()
        grade(layout, mode)
        wall = time.monotonic() - start
        own_after, children_after = (resource.getrusage(resource.RUSAGE_SELF),
                                     resource.getrusage(resource.RUSAGE_CHILDREN))
    return (wall, own_after.ru_utime + own_after.ru_stime - own.ru_utime - own.ru_stime,
            children_after.ru_utime + children_after.ru_stime - children.ru_utime
            - children.ru_stime)


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="hw4p1-bench-probe-") as scratch:
        strongest, _ = sandbox.choose_mode(reference_layout(scratch), judge.python_executable())
    print(f"{'mode':<8} {'worker starts':<24} {'wall s':>8} {'judge CPU s':>12} "
          f"{'children CPU s':>15}   (medians of {ROUNDS}, interleaved)")
    for mode in dict.fromkeys([strongest, "none"]):
        if mode is None:
            continue
        samples = {"one for all categories": [], "one per category": []}
        for _ in range(ROUNDS):
            samples["one per category"].append(measure(worker_per_category, mode))
            samples["one for all categories"].append(measure(one_worker, mode))
        for name, runs in samples.items():
            wall, own, children = (statistics.median(column) for column in zip(*runs))
            print(f"{mode:<8} {name:<24} {wall:>8.2f} {own:>12.2f} {children:>15.2f}")


if __name__ == "__main__":
    main()
