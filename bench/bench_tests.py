"""Wall-clock time of each component's test module as a student runs it (``python -m tests.test_x``),
beside the time of the course's own module for that component, which is the aim.

Each module runs in a fresh interpreter (its torch import and pytest start-up included), medians
of 3 interleaved runs after one warm-up. ``BENCH_TESTS_BASELINE=/path/to/another/tree`` also times
that tree's modules in the same interleaved runs (e.g. an export of ``main`` with this tree's
``.venv`` and ``hw4_data/hw4p1_data`` linked in), so a before/after comparison shares the machine's
load. The last row, a bare ``import torch``, is the start-up every module pays; a second table gives
each module's CPU seconds above it (its tests and the pytest session).

    .venv/bin/python -m bench bench_tests      # or: make bench BENCH=bench_tests
"""
import os
import resource
import statistics
import subprocess
import sys
from pathlib import Path

from bench.timing import interleaved_medians

REPO_ROOT = Path(__file__).resolve().parents[1]
REPEATS = 3
# The course's module for each component, timed the same way on 2 cores.
AIMS = {
    "tests.test_mytorch": 2.2,
    "tests.test_mask_causal": 2.1,
    "tests.test_positional_encoding": 1.4,
    "tests.test_sublayer_selfattention": 3.3,
    "tests.test_transformer_decoder_only": 5.5,
    "tests.test_dataset": 3.5,
}
FLOOR = "python -c 'import torch' (the floor)"


def child_cpu() -> float:
    """CPU seconds (user + system) of this process's finished children so far."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def command_run(tree: Path, command: list[str], cpu: list[float]):
    """A callable that runs ``python COMMAND`` in ``tree``, appends its CPU seconds to ``cpu`` and
    fails loudly if the command fails."""

    def run() -> None:
        start = child_cpu()
        done = subprocess.run([sys.executable, *command], cwd=tree, capture_output=True, text=True)
        cpu.append(child_cpu() - start)
        if done.returncode:
            raise RuntimeError(f"{command} failed in {tree}:\n{done.stdout[-2000:]}{done.stderr[-2000:]}")

    return run


def main() -> None:
    trees = {"now": REPO_ROOT}
    baseline = os.environ.get("BENCH_TESTS_BASELINE")
    if baseline:
        trees = {"baseline": Path(baseline).resolve(), **trees}
    commands = {module: ["-m", module] for module in AIMS}
    commands[FLOOR] = ["-c", "import torch"]
    cpu = {(name, row): [] for row in commands for name in trees}
    runs = {(name, row): command_run(tree, command, cpu[(name, row)])
            for row, command in commands.items() for name, tree in trees.items()}
    timings = interleaved_medians(runs, REPEATS)
    print(f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}; seconds, median of "
          f"{REPEATS}: wall-clock (and CPU, user + system, which a busy machine disturbs less)")
    print(f"{'module':<36s}{'aim':>6s}" + "".join(f"{name:>16s}" for name in trees) + "  within aim")
    for row in commands:
        cells = [f"{timings[(name, row)].wall:6.2f} ({statistics.median(cpu[(name, row)][1:]):5.2f})"
                 for name in trees]
        aim = AIMS.get(row)
        verdict = "" if aim is None else "yes" if timings[("now", row)].wall <= aim else "no"
        aim_text = "" if aim is None else f"{aim:.1f}"
        print(f"{row:<36s}{aim_text:>6s}" + "".join(f"{cell:>16s}" for cell in cells) + f"  {verdict}")
    # What a module costs beyond the interpreter and torch (its tests and the pytest session):
    # the part this repository controls, and the one a loaded machine disturbs least.
    print("CPU seconds above the floor (module's median CPU - the floor's)")
    for row in AIMS:
        print(f"{row:<36s}      " + "".join(
            f"{statistics.median(cpu[(name, row)][1:]) - statistics.median(cpu[(name, FLOOR)][1:]):16.2f}"
            for name in trees))


if __name__ == "__main__":
    main()
