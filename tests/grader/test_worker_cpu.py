# hw4p1: instructor-only
"""The worker tree's CPU cap (``autograder.judging.isolation.cgroups``,
``sandbox.Limits.tree_cpus``): where a cpu cgroup can be created under the judge's own, its quota is
set, and a tree that forks spinning processes gets no more CPU time than the quota, with the
kernel's session autogroups off (the setting that otherwise shares CPU between sessions; restored
afterwards). Where none can be created, the sandbox's note says so.

    .venv/bin/python -m pytest -q tests/grader/test_worker_cpu.py      (as root, for the cgroup)
"""
import os
import sys
from pathlib import Path

import pytest

from autograder.judging.isolation import cgroups, processes, sandbox, sandbox_modes

AUTOGROUP = Path("/proc/sys/kernel/sched_autogroup_enabled")
HOG = """
import os, time
children = []
for _ in range(6):
    pid = os.fork()
    if pid == 0:
        end = time.monotonic() + 3.0
        while time.monotonic() < end:
            pass
        os._exit(0)
    children.append(pid)
start = time.monotonic()
for pid in children:
    os.waitpid(pid, 0)
times = os.times()
print(f"{times.children_user + times.children_system:.3f} {time.monotonic() - start:.3f}")
"""


def cpu_cgroup(cpus: float) -> cgroups.WorkerCgroup:
    if os.geteuid() != 0 or "cpu" not in {c for c, _, _ in cgroups.cgroup_parents()}:
        pytest.skip("no cpu cgroup hierarchy this process may create in")
    cgroup = cgroups.WorkerCgroup.create(sandbox.Limits().processes, 2**30, cpus)
    if cgroup is None or "cpu" not in cgroup.paths:
        pytest.skip("no cpu cgroup can be created here")
    return cgroup


def test_the_worker_trees_cpu_quota_is_set_under_the_judges_cgroup():
    """The quota written is Limits.tree_cpus (1 CPU: 100 ms each 100 ms period), in the version's
    own file, and the cgroup sits under the judge's own."""
    assert sandbox.Limits().tree_cpus == 1.0 and cgroups.CPU_PERIOD_US == 100_000
    cgroup = cpu_cgroup(sandbox.Limits().tree_cpus)
    try:
        path = cgroup.paths["cpu"]
        parents = {controller: parent for controller, parent, _ in cgroups.cgroup_parents()}
        assert path.parent == parents["cpu"], (path, parents)
        if (path / "cpu.max").exists():
            assert (path / "cpu.max").read_text().split() == ["100000", "100000"]
        else:
            assert (path / "cpu.cfs_quota_us").read_text().strip() == "100000"
            assert (path / "cpu.cfs_period_us").read_text().strip() == "100000"
    finally:
        cgroup.remove()


@pytest.mark.slow
def test_a_forking_cpu_hog_gets_no_more_than_its_quota_with_autogroups_off(tmp_path):
    """Six children spinning for 3 s in a tree capped at 0.25 CPU use at most 0.25 CPU-seconds per
    second of the tree's life (a quarter of a core, whatever else runs), with session autogroups
    off; uncapped, the same tree uses more than the quota allows (the measure can fail)."""
    if not os.access(AUTOGROUP, os.W_OK):
        pytest.skip("session autogroups cannot be switched here")
    before = AUTOGROUP.read_text()
    try:
        AUTOGROUP.write_text("0")
        used = {}
        for capped in (True, False):
            cgroup = cpu_cgroup(0.25) if capped else None
            try:
                run = processes.run_process([sys.executable, "-c", HOG], cwd=tmp_path,
                                            env=dict(os.environ), timeout=60, limits={},
                                            cgroup=cgroup)
            finally:
                if cgroup is not None:
                    cgroup.remove()
            assert run.returncode == 0, run.output
            cpu, wall = map(float, run.output.split()[-2:])
            used[capped] = cpu / wall
        assert used[True] <= 0.25 * 1.2, used
        assert used[False] > 0.25 * 1.5, used
    finally:
        AUTOGROUP.write_text(before)


def test_the_sandbox_says_when_no_cpu_cgroup_caps_the_tree(tmp_path):
    """Without a cpu cgroup the note names it and what shares the CPU then; with all three caps
    there is no note."""
    layout = sandbox_modes.Layout(*(tmp_path / name for name in ("rt", "pylib", "st", "in", "tmp")))
    none = sandbox_modes.MODES["none"]
    capped = sandbox.Sandbox(none, layout, sys.executable, seccomp=1,
                             capped=frozenset({"pids", "memory", "cpu"})).describe()
    no_cpu = sandbox.Sandbox(none, layout, sys.executable, seccomp=1,
                             capped=frozenset({"pids", "memory"})).describe()
    assert capped.cap_note is None
    assert no_cpu.cap_note == ("no cpu cgroup could be created under the grader's own, so only "
                               "the kernel's scheduler shares the CPU between the worker tree and "
                               "gradings beside it"), no_cpu.cap_note
