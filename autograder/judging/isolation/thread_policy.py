"""How many math-library threads a grading uses: the one rule, for every platform. Standard
library only.

The judge (``autograder.judging.grade``) calls :func:`measure` once at its start, whatever runs it
(the Autolab Makefile, Gradescope's ``run_autograder``, the bulk regrade), applies the count to
itself and its model child (:func:`environment`) and records the choice and its inputs in
details.json and the feedback's header. The worker stays on one thread: its seccomp filter refuses
new threads.

The rule, from measurements (docs/results.md, "Math threads of a grading"): a thread more than the
idle cores can hold costs far more than it could gain, because torch's OpenMP threads spin while
they wait for a core that another process holds (two threads on two loaded cores graded a default
handin 1.6 to 3.4 times slower than one). So a grading takes a second thread only when the
machine leaves a whole core idle for it, never more than its share of the CPUs when ``gradings``
run side by side, never more than MAX_THREADS, and always at least one. The machine's busy cores
are measured over SAMPLE_S at the judge's start (``/proc/stat``), not read from the 1-minute load
average: that average lags, and after one grading ends it still says a core is busy for a minute
(a default handin then took 11 s with one thread where two grade it in 9: docs/results.md). The
load average stands in where ``/proc/stat`` cannot be read. Gradings that start at the same
instant each see the others' cores idle, so a platform that runs several at once on one host sets
``GRADINGS_VARIABLE``.
"""
from __future__ import annotations

import math
import os
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path

# Side-by-side gradings on this machine (the bulk regrade's --jobs): the grading_run module sets it
# for the judge; a platform that grades several handins at once on one host may set it too.
GRADINGS_VARIABLE = "HW4P1_GRADINGS"
# A positive count here overrides the rule (the benchmarks time each count with it; a host known to
# be dedicated may set it).
THREADS_VARIABLE = "HW4P1_MATH_THREADS"
# The most threads a grading was measured with (docs/results.md, "Math threads of a grading", on 2
# CPUs): that more would pay on these small matrices is not assumed.
MAX_THREADS = 2
# A load average this far above a whole number of busy cores still leaves the next core idle (the
# background of a quiet machine, about 0.01 to 0.2, costs no thread).
LOAD_SLACK = 0.25
THREAD_VARIABLES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")
CGROUP_CPU_MAX = Path("/sys/fs/cgroup/cpu.max")  # cgroup v2: "<quota> <period>" or "max <period>"
PROC_STAT = Path("/proc/stat")  # the machine's CPU time, by kind, in clock ticks since boot
# The window over which the busy cores are measured: 20 ticks a CPU at the usual 100 Hz, long
# enough to see a process that holds a core, short beside a grading's 10 s.
SAMPLE_S = 0.2


@dataclass(frozen=True)
class ThreadChoice:
    """The math threads chosen and the inputs of the rule, as details.json records them."""

    threads: int         # what the judge and its model child use
    cpus: int            # CPUs this process may run on: its affinity, capped by its cgroup's quota
    load: float          # the machine's busy cores over SAMPLE_S (else its 1-minute load average)
    gradings: int        # gradings side by side on these CPUs
    why: str             # the rule's binding term, in words

    def summary(self) -> str:
        """One line for the feedback's header."""
        return (f"{self.threads} math thread(s): {self.why} ({self.cpus} CPUs, "
                f"{self.load:.2f} busy, {self.gradings} grading(s) side by side)")


def choose(cpus: int, load: float, gradings: int) -> ThreadChoice:
    """The rule on given inputs: ``cpus`` (>= 1) CPUs, ``load`` cores busy with other work,
    ``gradings`` (>= 1) gradings sharing the CPUs."""
    idle = max(0, math.floor(cpus - load + LOAD_SLACK))  # whole cores the machine leaves idle
    terms = {f"the most measured to help ({MAX_THREADS})": MAX_THREADS,
             f"{cpus} CPU(s) shared by {gradings} grading(s)": max(1, cpus // gradings),
             f"{idle} whole core(s) idle at this load": idle}
    why = min(terms, key=terms.get)  # of equal terms the first, the most lasting reason
    return ThreadChoice(max(1, terms[why]), cpus, round(load, 2), gradings, why)


def measure(environ: dict[str, str] | None = None) -> ThreadChoice:
    """:func:`choose` on this process's CPUs (:func:`usable_cpus`), the machine's busy cores
    (:func:`busy_cores`; the 1-minute load average where it cannot be measured) and
    ``GRADINGS_VARIABLE`` of ``environ`` (default ``os.environ``; 1 when unset or not a positive
    integer); ``THREADS_VARIABLE``, when a positive integer, overrides the rule's count. Call it
    before this process starts any other: it sleeps SAMPLE_S while the machine is measured, unless
    the count is decided without it (overridden, or the CPUs' share is one thread: the bulk
    regrade's usual case), where the load average is recorded instead."""
    environ = os.environ if environ is None else environ
    gradings = positive(environ.get(GRADINGS_VARIABLE)) or 1
    cpus = usable_cpus()
    forced = positive(environ.get(THREADS_VARIABLE))
    load = None
    if not forced and cpus // gradings > 1:
        try:
            load = busy_cores()
        except (OSError, ValueError):
            pass
    if load is None:
        try:
            load = os.getloadavg()[0]
        except OSError:  # not obtainable: taken as every CPU busy, so one thread
            load = float(cpus)
    choice = choose(cpus, load, gradings)
    return replace(choice, threads=forced, why=f"set by {THREADS_VARIABLE}") if forced else choice


def busy_cores() -> float:
    """The machine's cores busy over the next SAMPLE_S seconds (this process sleeps through
    them), from two readings of PROC_STAT; OSError or ValueError when it cannot be read."""
    before = cpu_ticks(PROC_STAT.read_text())
    time.sleep(SAMPLE_S)
    return busy_between(before, cpu_ticks(PROC_STAT.read_text()))


def cpu_ticks(stat: str) -> tuple[int, int, int]:
    """(idle ticks, all ticks, CPUs) of a ``/proc/stat`` text: its ``cpu`` line summed over the
    machine (idle and iowait are idle; guest time is already inside user and nice), its ``cpuN``
    lines counted. ValueError when it has no ``cpu`` line."""
    lines = stat.splitlines()
    total = next((line.split()[1:] for line in lines if line.startswith("cpu ")), None)
    if total is None:
        raise ValueError("no cpu line in /proc/stat")
    ticks = [int(value) for value in total[:8]]  # user nice system idle iowait irq softirq steal
    cpus = sum(1 for line in lines if line.startswith("cpu") and line[3:4].isdigit())
    return ticks[3] + ticks[4], sum(ticks), cpus


def busy_between(before: tuple[int, int, int], after: tuple[int, int, int]) -> float:
    """Busy cores between two :func:`cpu_ticks` readings: the share of ticks not idle, times the
    CPUs; ValueError when no tick passed."""
    idle, total = after[0] - before[0], after[1] - before[1]
    if total <= 0:
        raise ValueError("no clock tick between the two readings")
    return round((1 - idle / total) * after[2], 2)


def positive(text: str | None) -> int | None:
    """``text`` as a positive integer, else None."""
    return int(text) if text and text.isdigit() and int(text) > 0 else None


def usable_cpus() -> int:
    """The CPUs of this process's affinity, at most its cgroup's CPU quota (rounded up) where
    CGROUP_CPU_MAX gives one (a container started with ``--cpus``)."""
    cpus = len(os.sched_getaffinity(0))
    try:
        quota, period = CGROUP_CPU_MAX.read_text().split()
        if quota != "max":  # the kernel takes no quota under 1 ms: at least one CPU
            cpus = min(cpus, math.ceil(int(quota) / int(period)))
    except (OSError, ValueError):
        pass
    return cpus


def environment(threads: int) -> dict[str, str]:
    """The variables that hold a child's math libraries (OpenMP, MKL, OpenBLAS) to ``threads``."""
    return dict.fromkeys(THREAD_VARIABLES, str(threads))


def report(choice: ThreadChoice) -> dict:
    """The choice as details.json's ``threads`` entry."""
    return asdict(choice)
