"""The worker tree's own cgroup, under the judge's: it caps the tree's processes, memory and CPU.

Standard library only. Per-process rlimits cannot bound a tree (three children of 2 GiB each stay
under RLIMIT_AS, sixty spinning children each stay under RLIMIT_CPU); a ``pids``, a ``memory`` and
a ``cpu`` cgroup can: the last holds the whole tree to a CPU quota (``cpu.max`` on cgroup v2,
``cpu.cfs_quota_us`` on v1), so a tree that forks spinning processes cannot starve a grading
beside it even where the kernel does not share CPU between sessions (no autogroups). Where none
can be created (no privileges, no delegation, cgroups mounted read-only in a container),
:meth:`WorkerCgroup.create` returns None and the worker runs as one process instead (its seccomp
filter refuses new tasks).
"""
from __future__ import annotations

import os
import signal
import time
from pathlib import Path

# Each controller's limit file: (cgroup v1, cgroup v2).
LIMIT_FILES = {"pids": ("pids.max", "pids.max"), "memory": ("memory.limit_in_bytes", "memory.max"),
               "cpu": ("cpu.cfs_quota_us", "cpu.max")}
CPU_PERIOD_US = 100_000  # the scheduler's quota period (both versions' default)
# The kernel refuses a quota under 1 ms a period (EINVAL), so a smaller share is raised to it.
MIN_CPU_QUOTA_US = 1000
CGROUP_ROOT = Path("/sys/fs/cgroup")  # where the hierarchies are mounted
OWN_CGROUP = Path("/proc/self/cgroup")  # this process's cgroup in each hierarchy
# A cgroup is removed once its last task has exited: tried this often, this far apart.
REMOVE_TRIES = 100  # pragma: no mutate (equivalent: a removal succeeds within a few tries)
REMOVE_PAUSE_S = 0.05  # pragma: no mutate (equivalent: the pause only times the retries)


class WorkerCgroup:
    """The worker tree's own cgroup, nested under the judge's (one per controller on cgroup v1,
    the unified one on v2): it caps the processes (``pids``), the memory and the CPU time
    (``cpu``) of the whole tree."""

    def __init__(self, paths: dict[str, Path]) -> None:
        self.paths = paths  # {controller: cgroup folder}

    @classmethod
    def create(cls, max_processes: int, max_memory: int, max_cpus: float
               ) -> WorkerCgroup | None:
        """A new cgroup under the judge's own for every controller that allows one, capping the
        tree at ``max_processes`` tasks, ``max_memory`` bytes and ``max_cpus`` CPUs' time; None
        when none does."""
        quota = max(int(max_cpus * CPU_PERIOD_US), MIN_CPU_QUOTA_US)
        limits = {"pids": str(max_processes), "memory": str(max_memory),
                  "cpu.cfs_quota_us": str(quota), "cpu.max": f"{quota} {CPU_PERIOD_US}"}
        name = f"hw4p1-worker-{os.getpid()}-{time.monotonic_ns()}"
        paths: dict[str, Path] = {}
        for controller, parent, limit_file in cgroup_parents():
            if controller in paths:
                continue
            path = parent / name
            try:
                path.mkdir(exist_ok=True)
                (path / limit_file).write_text(limits.get(limit_file) or limits[controller])
                paths[controller] = path
            except OSError:
                if path.is_dir() and path not in paths.values():
                    _remove_cgroup(path)
        return cls(paths) if paths else None

    def join_fds(self) -> list[int]:
        return [os.open(path / "cgroup.procs", os.O_WRONLY) for path in set(self.paths.values())]

    def remove(self) -> None:
        for path in set(self.paths.values()):
            _remove_cgroup(path)


def cgroup_parents() -> list[tuple[str, Path, str]]:
    """(controller, the judge's own cgroup folder for it, its limit file) for pids, memory and
    cpu: cgroup v1 hierarchies first, then the v2 unified hierarchy for what v1 does not hold."""
    found, unified = [], None
    for line in _read(OWN_CGROUP).splitlines():
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        hierarchy, controllers, own = parts
        if hierarchy == "0" and not controllers:
            unified = own
        for controller in controllers.split(","):
            if controller in LIMIT_FILES:
                found.append((controller, CGROUP_ROOT / controller / own.lstrip("/"),
                              LIMIT_FILES[controller][0]))
    if unified is not None:
        base = CGROUP_ROOT / unified.lstrip("/")
        available = _read(base / "cgroup.controllers").split()
        for controller, (_, limit_file) in LIMIT_FILES.items():
            if controller in available:
                found.append((controller, base, limit_file))
    return found


def _remove_cgroup(path: Path) -> None:
    """Kill whatever is left in the cgroup at ``path``, then remove it."""
    for _ in range(REMOVE_TRIES):
        for pid in _read(path / "cgroup.procs").split():
            try:
                os.kill(int(pid), signal.SIGKILL)
            except (ProcessLookupError, PermissionError, ValueError):
                pass
        try:
            path.rmdir()
            return
        except OSError:
            time.sleep(REMOVE_PAUSE_S)


def _read(path) -> str:
    try:
        return Path(path).read_text(errors="replace")
    except OSError:
        return ""
