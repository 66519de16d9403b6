# hw4p1: instructor-only
"""The isolation modes' records (autograder/judging/isolation/sandbox_modes.py), fast: each mode's
flags and the uid it refuses, the command lines they build (bubblewrap's namespaces and mounts,
unshare's covered folders, setpriv's fresh uid), the fresh uid's range and what it avoids, the
folders and environment the worker gets.

    .venv/bin/python -m pytest -q tests/grader/test_sandbox_mode_records.py
"""
import dataclasses
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from autograder.judging.isolation import sandbox_modes
from autograder.judging.isolation.sandbox_modes import MODES

LAYOUT = sandbox_modes.Layout(Path("/g/runtime"), Path("/g/pylib"), Path("/g/student"),
                              Path("/g/input"), Path("/g/tmp"), hidden_dirs=(Path("/g/handin"),),
                              readonly_dir=Path("/g"))


def test_the_modes_strongest_first_with_their_flags():
    """bwrap, setpriv, unshare, none in this order; only bwrap has its own view, only setpriv a
    fresh uid, only none no isolation but the worker's own layers."""
    assert list(MODES) == ["bwrap", "setpriv", "unshare", "none"]
    flags = {name: (m.command, m.own_view, m.fresh_uid, m.own_layers_only)
             for name, m in MODES.items()}
    assert flags == {"bwrap": ("bwrap", True, False, False),
                     "setpriv": ("setpriv", False, True, False),
                     "unshare": ("unshare", False, False, False),
                     "none": (None, False, False, True)}


@pytest.mark.parametrize("euid", [0, 1000])
def test_each_mode_refuses_the_uid_it_must(monkeypatch, euid):
    """setpriv only for a root judge, unshare never for one; bwrap and none for any."""
    monkeypatch.setattr(os, "geteuid", lambda: euid)
    refused = {name for name, mode in MODES.items() if mode.refusal() is not None}
    assert refused == ({"unshare"} if euid == 0 else {"setpriv"})
    assert "root" in (MODES["unshare"] if euid == 0 else MODES["setpriv"]).refusal()


def test_modes_and_layouts_are_frozen():
    """A mode or a layout, once chosen, cannot be changed under a sandbox that holds it."""
    with pytest.raises(dataclasses.FrozenInstanceError):
        LAYOUT.tmp_dir = Path("/")
    with pytest.raises(dataclasses.FrozenInstanceError):
        MODES["bwrap"].own_view = False


def test_a_mode_without_its_command_is_unavailable(monkeypatch, tmp_path):
    """The command is looked up on PATH and resolved to its real file; missing: the reason names
    the command and its Debian package; found: the mode's refusal decides."""
    monkeypatch.setenv("PATH", str(tmp_path))
    assert MODES["bwrap"].command_path() is None
    assert MODES["bwrap"].unavailable() == "no bwrap command (Debian package bubblewrap)"
    assert MODES["none"].command_path() is None and MODES["none"].unavailable() is None
    real = tmp_path / "real-bwrap"
    real.write_text("#!/bin/sh\n")
    real.chmod(0o755)
    (tmp_path / "bwrap").symlink_to(real)
    assert MODES["bwrap"].command_path() == str(real)
    assert MODES["bwrap"].unavailable() is None
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    (tmp_path / "unshare").symlink_to(real)
    assert "root" in MODES["unshare"].unavailable()


def test_folders_and_environment_in_each_view():
    """With its own view the worker sees /sandbox/<name> and /tmp; otherwise the host's folders.
    Its environment is fixed: one math thread, its tmp as HOME and TMPDIR."""
    assert MODES["bwrap"].folders(LAYOUT) == {
        "runtime": "/sandbox/runtime", "pylib": "/sandbox/pylib", "student": "/sandbox/student",
        "input": "/sandbox/input", "tmp": "/tmp"}
    assert MODES["setpriv"].folders(LAYOUT) == {
        "runtime": "/g/runtime", "pylib": "/g/pylib", "student": "/g/student",
        "input": "/g/input", "tmp": "/g/tmp"}
    environment = MODES["none"].environment(LAYOUT)
    assert environment == {"PATH": "/usr/bin:/bin", "HOME": "/g/tmp", "TMPDIR": "/g/tmp",
                           "LANG": "C.UTF-8", "PYTHONHASHSEED": "0",
                           "PYTHONDONTWRITEBYTECODE": "1", "PYTHONIOENCODING": "utf-8",
                           "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1",
                           "MKL_NUM_THREADS": "1"}
    assert MODES["bwrap"].environment(LAYOUT)["HOME"] == "/tmp"
    assert MODES["none"].prefix("x", LAYOUT, "python") == []


def pairs(command: list[str], option: str) -> list[tuple[str, str]]:
    """The (source, target) after each ``option`` of ``command``."""
    return [(command[i + 1], command[i + 2]) for i, word in enumerate(command) if word == option]


def test_bubblewrap_command(monkeypatch, tmp_path):
    """bwrap: the sandbox uid and gid, every namespace, no capabilities; system folders bound
    read-only (or linked where the host links them); an interpreter outside the system bound;
    its packages hidden; numpy and the worker's folders bound under /sandbox; a private /tmp of
    64 MiB."""
    prefix = tmp_path / "python"
    packages = prefix / "lib" / "python3.11" / "site-packages"
    packages.mkdir(parents=True)
    monkeypatch.setattr(sys, "base_prefix", str(prefix))
    command = sandbox_modes.bwrap_prefix("/found/bwrap", LAYOUT, "/elsewhere/python3")
    assert command[:5] == ["/found/bwrap", "--unshare-user", "--uid", "65534", "--gid"]
    assert command[5] == "65534"
    for option in ("--unshare-pid", "--unshare-ipc", "--unshare-net", "--unshare-uts",
                   "--unshare-cgroup-try", "--die-with-parent", "--new-session"):
        assert option in command, option
    assert command[command.index("--cap-drop") + 1] == "ALL"
    binds = pairs(command, "--ro-bind")
    for top in ("/usr", "/lib", "/lib64", "/bin", "/sbin"):
        if os.path.islink(top):
            assert (os.readlink(top), top) in pairs(command, "--symlink"), top
        elif os.path.isdir(top):
            assert (top, top) in binds, top
    assert (str(prefix), str(prefix)) in binds
    assert ("/elsewhere/python3", "/elsewhere/python3") in binds
    assert command[command.index("--tmpfs") + 1] == str(packages)
    import numpy
    numpy_dir = str(Path(numpy.__file__).resolve().parent)
    assert (numpy_dir, "/sandbox/pylib/numpy") in binds
    for name in ("runtime", "student", "input"):
        assert (f"/g/{name}", f"/sandbox/{name}") in binds
    assert ("/g/pylib", "/sandbox/pylib") not in binds and ("/g/tmp", "/sandbox/tmp") not in binds
    assert command[-11:] == ["--proc", "/proc", "--dev", "/dev", "--size", "67108864",
                             "--tmpfs", "/tmp", "--chdir", "/tmp", "--"]


def test_bubblewrap_binds_no_interpreter_the_system_holds(monkeypatch):
    """An interpreter under /usr: neither its prefix nor its file is bound again."""
    monkeypatch.setattr(sys, "base_prefix", "/usr")
    command = sandbox_modes.bwrap_prefix("bwrap", LAYOUT, "/usr/bin/python3")
    sources = [source for source, _ in pairs(command, "--ro-bind")]
    assert "/usr/bin/python3" not in sources and sources.count("/usr") <= 1


def test_installed_package_folders(tmp_path):
    """site-packages and dist-packages of the prefix, resolved, each once, sorted; a file of
    that name is no folder."""
    (tmp_path / "lib" / "python3.11" / "site-packages").mkdir(parents=True)
    (tmp_path / "lib" / "python3.12" / "dist-packages").mkdir(parents=True)
    (tmp_path / "lib" / "python3.13").mkdir()
    (tmp_path / "lib" / "python3.13" / "site-packages").write_text("")
    found = [p for p in sandbox_modes.installed_package_dirs(str(tmp_path))
             if p.startswith(str(tmp_path))]
    assert found == [str(tmp_path / "lib/python3.11/site-packages"),
                     str(tmp_path / "lib/python3.12/dist-packages")]


def test_unshare_command_covers_the_graders_folders():
    """unshare: every namespace, the grading folder remounted read-only, the hidden folders, the
    tmp folder, /tmp and /dev/shm covered by 64 MiB tmpfs; /tmp left when the grading folder lies
    in it; a quote in a path escaped."""
    command = sandbox_modes.unshare_prefix("/found/unshare", LAYOUT, "python")
    assert command[:11] == ["/found/unshare", "--user", "--map-root-user", "--mount", "--pid",
                            "--fork", "--kill-child", "--mount-proc", "--net", "--ipc", "--"]
    assert command[11:13] == ["sh", "-c"] and command[-1] == "sandbox"
    assert command[13].split("; ") == [
        "set -e", "mount --bind '/g' '/g'", "mount -o remount,bind,ro '/g'",
        "mount -t tmpfs -o size=67108864 tmpfs '/g/handin'",
        "mount -t tmpfs -o size=67108864 tmpfs '/g/tmp'",
        "mount -t tmpfs -o size=67108864 tmpfs '/tmp'",
        "mount -t tmpfs -o size=67108864 tmpfs '/dev/shm'", 'exec "$@"']
    in_tmp = sandbox_modes.Layout(*(Path("/t"),) * 5, readonly_dir=Path("/tmp/it's"))
    script = sandbox_modes.unshare_prefix("u", in_tmp, "python")[13]
    assert "'/tmp/it'\\''s'" in script and "tmpfs '/tmp'" not in script
    assert "tmpfs '/dev/shm'" in script
    bare = sandbox_modes.Layout(*(Path("/t"),) * 5)
    script = sandbox_modes.unshare_prefix("u", bare, "python")[13]
    assert "mount --bind" not in script and "tmpfs '/tmp'" in script


def test_setpriv_command_runs_as_this_gradings_uid():
    """setpriv: this grading's uid as uid and gid, no groups, no new privileges."""
    uid = sandbox_modes.grading_uid()
    assert sandbox_modes.setpriv_prefix("/found/setpriv", LAYOUT, "python") == [
        "/found/setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups",
        "--no-new-privs", "--"]


def test_the_fresh_uid_range_and_draw(monkeypatch):
    """Drawn from [2**20, 2**30): the lowest and the highest draw worked out by hand; cached for
    the grading."""
    assert sandbox_modes.FRESH_UIDS == (1048576, 1073741824)
    draws = []

    def draw(bound):
        draws.append(bound)
        return [0, bound - 1][len(draws) - 1]

    monkeypatch.setattr(sandbox_modes.secrets, "randbelow", draw)
    sandbox_modes.grading_uid.cache_clear()
    try:
        assert sandbox_modes.grading_uid() == 2**20
        assert sandbox_modes.grading_uid() == 2**20 and len(draws) == 1  # cached
        sandbox_modes.grading_uid.cache_clear()
        assert sandbox_modes.grading_uid() == 2**30 - 1
        assert draws == [2**30 - 2**20] * 2
    finally:
        sandbox_modes.grading_uid.cache_clear()


def test_a_uid_an_account_holds_is_never_drawn(monkeypatch, tmp_path):
    """Accounts of uid 2**20 and 2**20 + 7 (its third field; a line of three fields is enough),
    and lines that are no account: draws of those uids are refused, the next draw taken."""
    accounts = tmp_path / "passwd"
    accounts.write_text(f"fresh:x:{2**20}:{2**20 + 1}::/:/bin/sh\nshort:x:{2**20 + 7}\n"
                        "broken:x\nodd:x:uid:0::/:\n")
    monkeypatch.setattr(sandbox_modes, "ACCOUNTS", accounts)
    offsets = iter([0, 7, 9])
    monkeypatch.setattr(sandbox_modes.secrets, "randbelow", lambda bound: next(offsets))
    sandbox_modes.grading_uid.cache_clear()
    try:
        assert sandbox_modes.grading_uid() == 2**20 + 9
        offsets = iter([0])
        monkeypatch.setattr(sandbox_modes, "ACCOUNTS", tmp_path / "no-passwd")
        sandbox_modes.grading_uid.cache_clear()
        assert sandbox_modes.grading_uid() == 2**20
    finally:
        sandbox_modes.grading_uid.cache_clear()


@pytest.mark.skipif(os.geteuid() != 0, reason="needs a root judge (to start tasks as another uid)")
def test_a_uid_a_process_runs_as_is_never_drawn(monkeypatch):
    """A process of uid 2**20 runs: a draw of that uid is refused, the next draw taken."""
    taken = 2**20
    child = subprocess.Popen(["sleep", "30"], user=taken)
    try:
        deadline = time.monotonic() + 10
        while os.stat(f"/proc/{child.pid}").st_uid != taken and time.monotonic() < deadline:
            time.sleep(0.01)
        offsets = iter([0, 7])
        monkeypatch.setattr(sandbox_modes.secrets, "randbelow", lambda bound: next(offsets))
        sandbox_modes.grading_uid.cache_clear()
        assert sandbox_modes.grading_uid() == taken + 7
    finally:
        child.kill()
        child.wait()
        sandbox_modes.grading_uid.cache_clear()
