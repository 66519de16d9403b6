# hw4p1: instructor-only
"""The worker tree's cgroup (autograder/judging/isolation/cgroups.py) on a cgroup tree laid out
in a temporary folder: which hierarchy each controller is taken from, the limit each file gets
(read back, worked out by hand), what is left after a failure; and on this machine's cgroups,
where they can be created, the limits read back and a process tree killed and removed whole.

    .venv/bin/python -m pytest -q tests/grader/test_cgroup_files.py
"""
import os
import signal
import subprocess
import sys

import pytest

from autograder.judging.isolation import cgroups

GIB = 2**30
V1 = "9:name=systemd:/\n8:pids:/judge\n4:memory:/judge\n1:cpu,cpuacct:/judge\n0::/\n"


@pytest.fixture
def tree(tmp_path, monkeypatch):
    """A fake cgroup root (``tree / "root"``) and this process's cgroup file
    (``tree / "own"``), both read by cgroups in place of /sys/fs/cgroup and /proc/self/cgroup."""
    root = tmp_path / "root"
    root.mkdir()
    monkeypatch.setattr(cgroups, "CGROUP_ROOT", root)
    monkeypatch.setattr(cgroups, "OWN_CGROUP", tmp_path / "own")
    return tmp_path


def lay_out(tree, own: str, folders: dict[str, str]) -> None:
    """Write ``own`` as this process's cgroup file and create each folder of ``folders``
    ({path under the root: its cgroup.controllers text})."""
    (tree / "own").write_text(own)
    for folder, controllers in folders.items():
        (tree / "root" / folder).mkdir(parents=True, exist_ok=True)
        (tree / "root" / folder / "cgroup.controllers").write_text(controllers)


def written(cgroup: cgroups.WorkerCgroup) -> dict[str, dict[str, str]]:
    """{controller: {limit file: its text}} of each folder of ``cgroup``."""
    return {controller: {f.name: f.read_text() for f in path.iterdir()}
            for controller, path in cgroup.paths.items()}


def workers(folder) -> list:
    """The worker cgroups left in ``folder``."""
    return [path for path in folder.iterdir() if path.name.startswith("hw4p1-worker-")]


def test_v1_hierarchies_each_get_their_own_limit(tree):
    """cgroup v1: one folder per controller under the judge's own, each with its v1 limit file:
    64 tasks, 1 GiB as bytes, 1.5 CPUs as 150 ms of each 100 ms period. The unified hierarchy
    adds nothing v1 holds already."""
    lay_out(tree, V1, {"pids/judge": "", "memory/judge": "", "cpu/judge": "",
                       "": "pids memory cpu"})
    parents = cgroups.cgroup_parents()
    root = tree / "root"
    assert parents == [("pids", root / "pids/judge", "pids.max"),
                       ("memory", root / "memory/judge", "memory.limit_in_bytes"),
                       ("cpu", root / "cpu/judge", "cpu.cfs_quota_us"),
                       ("pids", root, "pids.max"), ("memory", root, "memory.max"),
                       ("cpu", root, "cpu.max")]
    cgroup = cgroups.WorkerCgroup.create(64, GIB, 1.5)
    assert written(cgroup) == {"pids": {"pids.max": "64"},
                               "memory": {"memory.limit_in_bytes": "1073741824"},
                               "cpu": {"cpu.cfs_quota_us": "150000"}}
    for controller, path in cgroup.paths.items():
        assert path.parent == root / controller / "judge"
    assert workers(root) == []


def test_v2_unified_folder_gets_every_limit(tree):
    """cgroup v2: one folder under the judge's own, with pids.max, memory.max and cpu.max
    ("<quota> <period>")."""
    lay_out(tree, "0::/judge\n", {"judge": "cpuset cpu io memory pids"})
    cgroup = cgroups.WorkerCgroup.create(10, 3 * GIB, 0.25)
    folder = cgroup.paths["pids"]
    assert cgroup.paths == {"pids": folder, "memory": folder, "cpu": folder}
    assert folder.parent == tree / "root" / "judge"
    limits = {name: (folder / name).read_text() for name in ("pids.max", "memory.max", "cpu.max")}
    assert limits == {"pids.max": "10", "memory.max": "3221225472", "cpu.max": "25000 100000"}


def test_v2_controllers_not_delegated_are_left_out(tree):
    """A controller missing from the judge's cgroup.controllers gets no limit."""
    lay_out(tree, "0::/judge\n", {"judge": "memory pids"})
    cgroup = cgroups.WorkerCgroup.create(10, GIB, 1.0)
    assert set(cgroup.paths) == {"pids", "memory"}
    assert not (cgroup.paths["pids"] / "cpu.max").exists()


def test_v1_and_v2_mixed_take_each_controller_once(tree):
    """v1 holds pids and memory, v2 the cpu: a controller v1 gave already is skipped, those
    after it are still taken."""
    lay_out(tree, "8:pids:/j\n4:memory:/j\n0::/j\n",
            {"pids/j": "", "memory/j": "", "j": "pids memory cpu"})
    cgroup = cgroups.WorkerCgroup.create(7, GIB, 2.0)
    assert written(cgroup) == {"pids": {"pids.max": "7"},
                               "memory": {"memory.limit_in_bytes": "1073741824"},
                               "cpu": {"cpu.max": "200000 100000"}}


def test_only_hierarchy_zero_without_controllers_is_the_unified_one(tree):
    """A line of another hierarchy with no controller (or a malformed line) does not move the
    unified folder; a ':' in a folder's name is part of it."""
    lay_out(tree, "not a cgroup line\n0::/judge:a\n5::/stray\n",
            {"judge:a": "pids", "stray": "pids memory cpu"})
    assert cgroups.cgroup_parents() == [("pids", tree / "root" / "judge:a", "pids.max")]


@pytest.mark.parametrize("cpus, quota", [(0.005, 1000), (0.01, 1000), (0.0123, 1230),
                                         (0.02, 2000), (1.0, 100000)])
def test_cpu_quota_is_raised_to_the_kernels_least(tree, cpus, quota):
    """The quota is the CPUs' share of a 100 ms period, truncated to microseconds, never under
    the kernel's least (1 ms): worked out by hand on each side of it."""
    lay_out(tree, "0::/judge\n", {"judge": "cpu"})
    cgroup = cgroups.WorkerCgroup.create(10, GIB, cpus)
    assert (cgroup.paths["cpu"] / "cpu.max").read_text() == f"{quota} 100000"


def test_no_cgroup_where_none_can_be_created(tree, monkeypatch):
    """Unreadable own cgroup, no controller, or a parent folder that is not there: None, without
    waiting for a folder that was never made."""
    monkeypatch.setattr(cgroups.time, "sleep", lambda s: pytest.fail("waited on a cgroup"))
    assert cgroups.WorkerCgroup.create(10, GIB, 1.0) is None  # no own cgroup file
    lay_out(tree, "0::/judge\n", {"judge": ""})
    assert cgroups.WorkerCgroup.create(10, GIB, 1.0) is None
    (tree / "own").write_text("8:pids:/gone\n")
    assert cgroups.WorkerCgroup.create(10, GIB, 1.0) is None


def test_a_controller_whose_limit_cannot_be_written_is_removed(tree, monkeypatch):
    """v1: the memory limit cannot be written: its new folder is removed, the other controllers
    keep theirs."""
    monkeypatch.setitem(cgroups.LIMIT_FILES, "memory", ("absent/limit", "memory.max"))
    lay_out(tree, V1, {"pids/judge": "", "memory/judge": "", "cpu/judge": "", "": ""})
    cgroup = cgroups.WorkerCgroup.create(64, GIB, 1.0)
    assert set(cgroup.paths) == {"pids", "cpu"}
    assert workers(tree / "root" / "memory" / "judge") == []


def test_v2_folder_kept_for_the_controllers_it_holds(tree, monkeypatch):
    """v2: the memory limit cannot be written into the folder pids already uses: the folder is
    kept (pids and cpu still cap the tree there)."""
    monkeypatch.setattr(cgroups.time, "sleep", lambda s: pytest.fail("removed a cgroup in use"))
    monkeypatch.setitem(cgroups.LIMIT_FILES, "memory", ("memory.limit_in_bytes", "absent/max"))
    lay_out(tree, "0::/judge\n", {"judge": "pids memory cpu"})
    cgroup = cgroups.WorkerCgroup.create(64, GIB, 1.0)
    assert set(cgroup.paths) == {"pids", "cpu"}
    assert sorted(f.name for f in cgroup.paths["pids"].iterdir()) == ["cpu.max", "pids.max"]


CHILD = """
import time
print(open("/proc/self/cgroup").read().replace("\\n", " "), flush=True)
time.sleep(60)
"""


def test_this_machines_cgroup_holds_the_limits_and_is_removed_whole(tmp_path):
    """On this machine's cgroups: the limit files read back as written (1 GiB, 64 tasks, a
    quarter of a CPU); a child joins every folder; removal kills it and removes every folder."""
    cgroup = cgroups.WorkerCgroup.create(64, GIB, 0.25)
    if cgroup is None:
        pytest.skip("no cgroup can be created here (not root, or not delegated)")
    try:
        read_back = {c: {(path / name).read_text().strip()
                         for name in cgroups.LIMIT_FILES[c] if (path / name).exists()}
                     for c, path in cgroup.paths.items()}
        expected = {"pids": {"64"}, "memory": {str(GIB)}, "cpu": {"25000", "25000 100000"}}
        assert all(read_back[c] <= expected[c] and read_back[c] for c in read_back), read_back
        fds = cgroup.join_fds()
        child = subprocess.Popen([sys.executable, "-c", CHILD], stdout=subprocess.PIPE,
                                 preexec_fn=lambda: [os.write(fd, b"0") for fd in fds])
        for fd in fds:
            os.close(fd)
        own = child.stdout.readline().decode()
        for path in cgroup.paths.values():
            assert path.name in own, own
            assert str(child.pid) in (path / "cgroup.procs").read_text().split()
    finally:
        cgroup.remove()
    assert child.wait(timeout=10) == -signal.SIGKILL
    assert not any(path.exists() for path in cgroup.paths.values())
