"""Wall-clock time of each component's test module as a student runs it (``python -m tests.test_x``),
beside the time of the course's own module for that component, which is the aim.

Each module runs in a fresh interpreter (its torch import and pytest start-up included), medians
of 3 interleaved runs after one warm-up. ``BENCH_TESTS_BASELINE=/path/to/another/tree`` also times
that tree's modules in the same interleaved runs (e.g. an export of ``main`` with this tree's
``.venv`` and ``hw4_data/hw4p1_data`` linked in), so a before/after comparison shares the machine's
load.

    .venv/bin/python -m bench bench_tests      # or: make bench BENCH=bench_tests
"""
import os
import subprocess
import sys
from pathlib import Path

from bench.timing import interleaved_medians

REPO_ROOT = Path(__file__).resolve().parents[1]
REPEATS = 3
# The course's module for each component, timed the same way on 2 cores (issue 34).
AIMS = {
    "tests.test_mytorch": 2.2,
    "tests.test_mask_causal": 2.1,
    "tests.test_positional_encoding": 1.4,
    "tests.test_sublayer_selfattention": 3.3,
    "tests.test_transformer_decoder_only": 5.5,
    "tests.test_dataset": 3.5,
}


def module_run(tree: Path, module: str):
    """A callable that runs ``python -m module`` in ``tree`` and fails loudly if the module fails."""

    def run() -> None:
        done = subprocess.run([sys.executable, "-m", module], cwd=tree, capture_output=True, text=True)
        if done.returncode:
            raise RuntimeError(f"{module} failed in {tree}:\n{done.stdout[-2000:]}{done.stderr[-2000:]}")

    return run


def main() -> None:
    trees = {"now": REPO_ROOT}
    baseline = os.environ.get("BENCH_TESTS_BASELINE")
    if baseline:
        trees = {"baseline": Path(baseline).resolve(), **trees}
    runs = {(name, module): module_run(tree, module) for module in AIMS for name, tree in trees.items()}
    timings = interleaved_medians(runs, REPEATS)
    print(f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}; wall-clock seconds, median of {REPEATS}")
    print(f"{'module':<36s}{'aim':>6s}" + "".join(f"{name:>10s}" for name in trees) + "  within aim")
    for module, aim in AIMS.items():
        walls = [timings[(name, module)].wall for name in trees]
        verdict = "yes" if walls[-1] <= aim else "no"
        print(f"{module:<36s}{aim:>6.1f}" + "".join(f"{wall:>10.2f}" for wall in walls) + f"  {verdict}")


if __name__ == "__main__":
    main()
