"""The one timer of the benchmarks: interleaved repeats, medians of wall-clock and CPU time."""
from __future__ import annotations

import statistics
import time
from dataclasses import dataclass
from typing import Any, Callable


@dataclass
class Timing:
    """Medians over the repeats of one run, and what its last call returned."""

    wall: float     # median wall-clock seconds
    cpu: float      # median CPU seconds of this process (all its threads)
    result: Any     # the return value of the last call


def interleaved_medians(runs: dict[Any, Callable[[], object]], repeats: int) -> dict[Any, Timing]:
    """{key: Timing} of each ``run()``.

    Each run is called once to warm up (first-call allocations stay out of the timings), then the
    runs take turns ``repeats`` times, so a slow spell of a shared machine falls on all of them alike.
    """
    results = {key: run() for key, run in runs.items()}
    wall, cpu = {key: [] for key in runs}, {key: [] for key in runs}
    for _ in range(repeats):
        for key, run in runs.items():
            start, start_cpu = time.perf_counter(), time.process_time()
            results[key] = run()
            wall[key].append(time.perf_counter() - start)
            cpu[key].append(time.process_time() - start_cpu)
    return {key: Timing(statistics.median(wall[key]), statistics.median(cpu[key]), results[key]) for key in runs}
