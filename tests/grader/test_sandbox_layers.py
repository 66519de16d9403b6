# hw4p1: instructor-only
"""Sandbox hardening that the sandbox review's attack table asks for
(autograder/judging/isolation/sandbox.py and the modules it runs the worker with: processes,
cgroups, sandbox_modes): process scans that survive any process name, no root worker inside a user
namespace, sandbox commands run by the absolute path they were found at, a fresh uid for every
grading, the worker's own layers, and a cgroup that caps the worker tree."""
import os
import resource
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from autograder.judging.isolation import cgroups, processes, sandbox, sandbox_modes
from tests.grader.autograder_helpers import attack_handin, honest_scores, run_grader, session_folder
from tests.grader.attack_handins import MYTORCH_ZERO

NAMES = (b"\xff\xfe", b"a) 0 0 (Z", b"\xc3(")  # invalid UTF-8; a ")" that fakes the stat fields


def named_child(name: bytes) -> subprocess.Popen:
    """A child that renames itself ``name`` (prctl PR_SET_NAME) and sleeps."""
    code = ("import ctypes, sys, time\n"
            "ctypes.CDLL(None).prctl(15, ctypes.c_char_p(bytes.fromhex(sys.argv[1])), 0, 0, 0)\n"
            "print('renamed', flush=True)\n"
            "time.sleep(60)\n")
    child = subprocess.Popen([sys.executable, "-c", code, name.hex()], stdout=subprocess.PIPE)
    assert child.stdout.readline().strip() == b"renamed"
    return child


def test_process_scans_survive_names_that_are_not_utf8():
    for name in NAMES:
        child = named_child(name)
        try:
            assert Path(f"/proc/{child.pid}/comm").read_bytes().rstrip(b"\n") == name
            assert child.pid in processes.descendants(os.getpid()), (
                f"a child named {name!r} must still be found")
            assert not processes._is_zombie(child.pid)
            assert processes.kill_descendants(os.getpid()) >= 1
            deadline = time.monotonic() + 5
            while child.poll() is None and time.monotonic() < deadline:
                time.sleep(0.01)
            assert child.poll() is not None, f"the child named {name!r} must be killed"
        finally:
            if child.poll() is None:
                child.kill()


def test_a_root_judge_never_uses_unshare():
    reason = sandbox_modes.MODES["unshare"].unavailable()
    if os.geteuid() == 0:
        assert reason and "host root" in reason, (
            f"as root, unshare --map-root-user would run the worker as host uid 0; got {reason!r}")
    elif sandbox_modes.MODES["unshare"].command_path():
        assert reason is None, reason


@pytest.mark.slow
def test_forcing_unshare_as_root_runs_no_student_code(tmp_path):
    """The attack: as host root inside the namespace, mytorch replaced /usr/bin/unshare (run as
    root for the next category) and forged the scores line. Forced now, it is refused: mytorch 0,
    the model graded, the system file untouched."""
    if os.geteuid() != 0:
        pytest.skip("the attack needs a root judge")
    target = sandbox_modes.MODES["unshare"].command_path() or "/usr/bin/unshare"
    before = Path(target).read_bytes() if Path(target).exists() else None
    init_code = (f"open({target!r}, 'wb').write(b'#!/bin/sh\\necho forged\\n')\n"
                 "print('{\"scores\": {\"LanguageModel\": 50}}')\n")
    folder = session_folder("hw4p1-unshare-root-")
    lines, scores = run_grader(folder, attack_handin(tmp_path, init_code, None), "--sandbox unshare")
    assert scores == {**MYTORCH_ZERO, "LanguageModel": honest_scores()["LanguageModel"]}, scores
    assert "student code was not run" in "\n".join(lines)
    if before is not None:
        assert Path(target).read_bytes() == before, f"{target} was modified"


def test_sandbox_commands_run_from_the_path_they_were_found_at(tmp_path, monkeypatch):
    """bwrap installed outside /usr/bin:/bin is found on the judge's PATH; the worker's PATH is
    /usr/bin:/bin, so the command must name the file itself, for the probe and the runs alike."""
    real = shutil.which("bwrap")
    if real is None:
        pytest.skip("no bwrap here")
    elsewhere = tmp_path / "opt-bin"
    elsewhere.mkdir()
    shutil.copy2(real, elsewhere / "bwrap")
    monkeypatch.setenv("PATH", f"{elsewhere}{os.pathsep}{os.environ['PATH']}")
    layout = sandbox_modes.Layout(*(tmp_path / name
                                    for name in ("rt", "pylib", "st", "in", "tmp")))
    for name in ("rt", "pylib", "st", "in", "tmp"):
        (tmp_path / name).mkdir()
    bwrap = sandbox.Sandbox.of(sandbox_modes.MODES["bwrap"], layout, sys.executable)
    assert bwrap.command == str(elsewhere / "bwrap"), bwrap.command
    monkeypatch.setenv("PATH", "/usr/bin:/bin")  # the worker's PATH: the sandbox keeps its file
    command = bwrap.command_line(["--probe"])
    assert command[0] == bwrap.command, f"bwrap must start as {bwrap.command}, got {command[0]!r}"
    if os.geteuid() == 0:
        setpriv = sandbox.Sandbox.of(sandbox_modes.MODES["setpriv"], layout, sys.executable)
        command = setpriv.command_line(["--probe"])
        assert os.path.isabs(command[0]), command[0]


def test_each_mode_tells_the_worker_the_folders_it_sees(tmp_path):
    """A mode with its own view mounts every folder the worker is told about where it says (and
    gives a private /tmp); any other mode hands the worker the host's folders of the layout."""
    layout = sandbox_modes.Layout(*(tmp_path / name for name in ("rt", "pylib", "st", "in", "tmp")))
    for name, mode in sandbox_modes.MODES.items():
        folders = mode.folders(layout)
        command = sandbox.Sandbox.of(mode, layout, sys.executable).command_line([])
        assert [folders[key] for key in ("runtime", "pylib", "student")] == command[-3:], name
        if not mode.own_view:
            assert folders == {key: str(getattr(layout, f"{key}_dir"))
                               for key in ("runtime", "pylib", "student", "input", "tmp")}, name
            continue
        mounted = {command[i + 2] for i, arg in enumerate(command) if arg == "--ro-bind"}
        assert {folders[key] for key in ("runtime", "student", "input")} <= mounted, (name, command)
        assert f"{folders['pylib']}/numpy" in mounted, (name, command)
        assert any(command[i:i + 2] == ["--tmpfs", folders["tmp"]] for i in range(len(command))), (
            name, command)


def test_each_sandbox_describes_its_own_probe(tmp_path):
    """The feedback's lines come from the chosen sandbox alone, frozen: two sandboxes of one mode,
    probed differently, each say what their own probe found, whatever was chosen since."""
    layout = sandbox_modes.Layout(*(tmp_path / name for name in ("rt", "pylib", "st", "in", "tmp")))
    none = sandbox_modes.MODES["none"]
    confined = sandbox.Sandbox(none, layout, sys.executable, landlock=6, seccomp=1,
                               capped=frozenset({"pids", "memory", "cpu"})).describe()
    bare = sandbox.Sandbox(none, layout, sys.executable, capped=frozenset({"pids"})).describe()
    assert (confined.mode, confined.summary, confined.cap_note) == ("none", none.summary, None)
    assert confined.layers.startswith("Landlock ABI 6 (") and "a seccomp filter" in confined.layers
    assert bare.summary == sandbox_modes.UNISOLATED, bare.summary
    assert bare.layers.startswith("no Landlock on this kernel; "), bare.layers
    assert bare.cap_note and bare.cap_note.startswith("no memory cgroup could be created") and (
        "memory is bounded per process" in bare.cap_note), bare.cap_note
    with pytest.raises(AttributeError):
        sandbox.Sandbox.of(none, layout).landlock = 6


def test_each_grading_gets_a_fresh_uid_of_its_own():
    code = ("from autograder.judging.isolation import sandbox_modes; "
            "print(sandbox_modes.grading_uid())")
    environment = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    uids = {int(subprocess.run([sys.executable, "-c", code], env=environment, capture_output=True,
                               text=True, check=True).stdout) for _ in range(4)}
    assert len(uids) == 4, f"four gradings drew the uids {uids}: each needs its own"
    accounts = {int(line.split(":")[2]) for line in Path("/etc/passwd").read_text().splitlines()
                if line.count(":") >= 2 and line.split(":")[2].isdigit()}
    assert not uids & (accounts | {0, sandbox_modes.SANDBOX_UID}), uids & accounts
    low, high = sandbox_modes.FRESH_UIDS
    assert all(low <= uid < high for uid in uids), uids
    if os.geteuid() == 0:
        layout = sandbox_modes.Layout(*(Path("/nonexistent") / n for n in "abcde"))
        command = sandbox.Sandbox.of(sandbox_modes.MODES["setpriv"], layout,
                                     sys.executable).command_line([])
        uid = sandbox_modes.grading_uid()
        assert f"--reuid={uid}" in command and f"--regid={uid}" in command, command



def test_the_workers_process_limit_leaves_room_above_its_uids_own_tasks():
    """RLIMIT_NPROC counts every task of the worker's uid: a mode that runs the worker as the
    judge's own uid allows the tasks that uid runs already on top of Limits.processes; a fresh
    uid (setpriv) starts from none."""
    limits = sandbox.Limits()
    assert limits.rlimits(30.0)[resource.RLIMIT_NPROC] == limits.processes
    assert limits.rlimits(30.0, 100)[resource.RLIMIT_NPROC] == limits.processes + 100
    layout = sandbox_modes.Layout(*(Path("/nonexistent") / n for n in "abcde"))
    fresh = {name for name, mode in sandbox_modes.MODES.items() if mode.fresh_uid}
    assert fresh == {"setpriv"}, fresh
    own = processes.uid_tasks(os.getuid())
    for name, mode in sandbox_modes.MODES.items():
        beside = sandbox.Sandbox.of(mode, layout, sys.executable).tasks_beside()
        if name in fresh:
            assert beside == 0, name
        else:  # this test's own process and its threads at least, give or take tasks that end
            assert beside >= threading.active_count() and abs(beside - own) < 50, (name, beside)

LANDLOCK_ATTACK = """
import os, signal, socket
try:
    open({secret!r}).read()
    raise SystemExit("read a world-readable file outside the sandbox")
except (PermissionError, FileNotFoundError):  # Landlock, or not even mounted (bubblewrap)
    pass
try:
    socket.create_connection(("127.0.0.1", 9), timeout=1)
    raise SystemExit("opened a TCP connection")
except PermissionError:
    pass
except OSError:
    raise SystemExit("a TCP connection was attempted, not refused by the sandbox")
import ctypes
libc = ctypes.CDLL(None, use_errno=True)
if libc.unshare(0x10000000) == 0:  # CLONE_NEWUSER: root of a new namespace
    raise SystemExit("created a user namespace")
if libc.ptrace(16, os.getppid(), None, None) == 0:  # PTRACE_ATTACH to the parent
    raise SystemExit("attached to another process with ptrace")
"""


@pytest.mark.slow
def test_the_workers_own_layers_confine_it_in_every_mode(tmp_path):
    """The worker's own layers, Landlock and seccomp: no world-readable file outside its folders,
    no TCP connection, no new namespace, no ptrace, in the default mode and in setpriv (which alone
    prevents none of these). The attack gives up its points if anything gets through; confined, it
    scores full marks."""
    from autograder.sandboxed import landlock

    if landlock.abi_version() == 0:
        pytest.skip("no Landlock on this kernel")
    folder = session_folder("hw4p1-landlock-")
    folder.chmod(0o755)  # setpriv's uid must reach the grading folders, and the secret
    secret = folder / "world-readable" / "secret.txt"
    secret.parent.mkdir()
    secret.write_text("hidden\n")
    secret.parent.chmod(0o755)
    secret.chmod(0o644)
    modes = [""] + (["--sandbox setpriv"] if os.geteuid() == 0 else [])
    for flags in modes:
        grading = folder / (flags.replace(" ", "").replace("-", "") or "default")
        grading.mkdir()
        grading.chmod(0o755)
        handin = attack_handin(tmp_path / (grading.name + "-handin"),
                               LANDLOCK_ATTACK.format(secret=str(secret)), None)
        lines, scores = run_grader(grading, handin, flags)
        assert scores == honest_scores(), f"{flags or 'default'}: {scores}\n" + "\n".join(lines[-40:])
        assert any("layers: Landlock ABI" in line and "a seccomp filter" in line
                   for line in lines), lines[-40:]


SECCOMP_PROBE = """
import ctypes, os, socket, subprocess, sys, threading
sys.path.insert(0, sys.argv[1])
from autograder.sandboxed import seccomp
import numpy
assert seccomp.deny_escapes(children=sys.argv[2] == "children")
libc = ctypes.CDLL(None, use_errno=True)
refused = {"ptrace": libc.ptrace(0, 0, None, None) == -1 and ctypes.get_errno() == 1,
           "unshare": libc.unshare(0x10000000) == -1 and ctypes.get_errno() == 1}
try:
    socket.socket()
    refused["socket"] = False
except PermissionError:
    refused["socket"] = True
try:
    pid = os.fork()
    if pid == 0:
        os._exit(3)
    refused["a child process"] = os.waitpid(pid, 0)[1] >> 8 != 3
except PermissionError:
    refused["a child process"] = True
try:
    refused["a subprocess"] = subprocess.run(["/bin/true"]).returncode != 0
except PermissionError:
    refused["a subprocess"] = True
ran = []
try:
    thread = threading.Thread(target=ran.append, args=[1])
    thread.start()
    thread.join()
except RuntimeError:
    pass
refused["a thread"] = ran != [1]
refused["numpy"] = float(numpy.linalg.inv(numpy.eye(2)).sum()) != 2.0
print(refused)
"""


@pytest.mark.parametrize("children", ["children", "single-process"])
def test_the_seccomp_filter_refuses_escapes_and_allows_numpy(children):
    """Escapes are refused; numpy works. Without children (no cgroup caps the tree), every new
    process and thread is refused too, so RLIMIT_AS bounds the tree's memory."""
    from autograder.sandboxed import seccomp

    if seccomp.unsupported():
        pytest.skip(seccomp.unsupported())
    run = subprocess.run([sys.executable, "-c", SECCOMP_PROBE, str(Path(__file__).parents[2]),
                          children], capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr[-2000:]
    single = children == "single-process"
    assert run.stdout.strip() == str({"ptrace": True, "unshare": True, "socket": True,
                                      "a child process": single, "a subprocess": single,
                                      "a thread": single, "numpy": False}), run.stdout
    arch = seccomp.architecture()
    assert seccomp.worker_filter(arch, True) != seccomp.worker_filter(arch, False)


# Each child holds its block 2 s, so the three overlap even when the tree's CPU quota or a busy
# machine runs them one after another (a child that freed its block at once could pass the cap).
TREE = """
import os, sys, time
children = []
for _ in range(3):
    pid = os.fork()
    if pid == 0:
        block = bytearray(150 * 2**20)  # zero-filled: every page is touched
        time.sleep(2)
        os._exit(0)
    children.append(pid)
finished = sum(os.waitpid(pid, 0)[1] == 0 for pid in children)
print(f"finished={finished}", flush=True)
"""


def test_the_worker_trees_memory_is_capped_by_a_cgroup_under_the_judges(tmp_path):
    """Three children of 150 MiB under a 256 MiB cap for the tree: each is under any per-process
    limit, together they are not. The cgroups sit under the judge's own."""
    parents = {controller: parent for controller, parent, _ in cgroups.cgroup_parents()}
    cgroup = cgroups.WorkerCgroup.create(sandbox.Limits().processes, 256 * 2**20,
                                         sandbox.Limits().tree_cpus)
    if cgroup is None or "memory" not in cgroup.paths:
        pytest.skip("no memory cgroup can be created here (not root, or not delegated)")
    try:
        for controller, path in cgroup.paths.items():
            assert path.parent == parents[controller], (
                f"the {controller} cgroup must be nested under the judge's own "
                f"{parents[controller]}, got {path}")
        run = processes.run_process([sys.executable, "-c", TREE], cwd=tmp_path,
                                    env=dict(os.environ), timeout=60, limits={}, cgroup=cgroup)
    finally:
        cgroup.remove()
    assert "finished=3" not in run.output, (
        f"all three 150 MiB children finished under a 256 MiB cap for the tree: {run.output!r}")
    uncapped = processes.run_process([sys.executable, "-c", TREE], cwd=tmp_path,
                                     env=dict(os.environ), timeout=60, limits={})
    assert "finished=3" in uncapped.output, f"without the cap all three finish: {uncapped.output!r}"


def test_making_the_sandbox_readable_leaves_linked_folders_alone(tmp_path):
    """The sandbox's pylib links to the installed numpy: chmod through the link would change the
    system's files as root, and fail (mytorch 0 for every handin) as Autolab's non-root user."""
    installed = tmp_path / "site-packages" / "numpy.libs"
    installed.mkdir(parents=True)
    installed.chmod(0o700)
    (installed / "lib.so").write_bytes(b"")
    (installed / "lib.so").chmod(0o600)
    sandbox_folder = tmp_path / "sandbox"
    (sandbox_folder / "pylib").mkdir(parents=True)
    (sandbox_folder / "pylib" / "numpy.libs").symlink_to(installed)
    (sandbox_folder / "pylib" / "own.py").write_text("")
    sandbox.make_readable(sandbox_folder)
    assert installed.stat().st_mode & 0o777 == 0o700
    assert (installed / "lib.so").stat().st_mode & 0o777 == 0o600
    assert (sandbox_folder / "pylib" / "own.py").stat().st_mode & 0o777 == 0o644
    assert (sandbox_folder / "pylib").stat().st_mode & 0o777 == 0o755
