"""Run the worker (the only process that executes student code) isolated, bounded, killed whole.

Standard library only. The strongest mode the machine allows is chosen by :func:`choose_mode`,
which tries each in turn with a probe (start the worker's Python and import numpy):

``bwrap``
    bubblewrap: new user, PID, IPC, UTS and network namespaces, no capabilities. The sandbox sees
    read-only system folders (``/usr``, ``/lib``...), the interpreter's standard library with every
    site-packages folder hidden, numpy alone, the worker's code, the student's ``mytorch/`` and the
    test inputs, all read-only, plus a size-limited private ``/tmp``. It cannot see the grading
    folder, the hidden tests, any grader process or the platform's output. When the PID
    namespace's first process dies, the kernel kills every process left in it.
``setpriv``
    (root only) the worker runs as a uid/gid drawn afresh for each grading (:func:`grading_uid`),
    owned by no account and no process: it cannot signal the grader or another grading's worker,
    nor read their files (the judge makes them private), and ``RLIMIT_NPROC`` caps its processes. No
    network isolation. Needs the interpreter, numpy and the grading folder's parents to be
    readable and traversable by that uid (the probe finds out).
``unshare``
    unprivileged user, mount, PID, IPC and network namespaces: the grading folder is remounted
    read-only; the autograder, the extracted handin, ``/tmp`` and ``/dev/shm`` are covered by
    empty tmpfs mounts (the worker writes only to a tmpfs of its own).
``none``
    a plain child process; the judge prints a warning that student code ran unisolated.

Every mode adds resource limits (file size, address space, open files, CPU time, processes) and a
wall-clock limit; where cgroups can be created, the worker tree gets its own ``pids`` and
``memory`` cgroups under the judge's own (:class:`WorkerCgroup`), which cap the whole tree. The judge makes itself a
child subreaper (``prctl``), so processes that detach with ``setsid`` or a double fork become its
children, and :func:`kill_descendants` kills every one of them before the scores are printed.
"""
from __future__ import annotations

import ctypes
import functools
import glob
import os
import resource
import secrets
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

MODES = ("bwrap", "setpriv", "unshare", "none")  # "none": the worker's own layers (Landlock) only
SANDBOX_UID = 65534  # nobody: the worker's uid inside bwrap's user namespace
FRESH_UIDS = (2**20, 2**30)  # a root judge's setpriv worker runs as a fresh uid from this range
SANDBOX_ROOT = "/sandbox"  # where bwrap mounts the worker's folders
TMPFS_BYTES = 64 * 2**20
MAX_FILE_BYTES = 64 * 2**20
MAX_ADDRESS_SPACE = 4 * 2**30
MAX_OPEN_FILES = 256
MAX_PROCESSES = 64
MAX_TREE_MEMORY = 4 * 2**30  # the whole worker tree, where a cgroup can cap it
MAX_RESULT_BYTES = 64 * 2**20  # the worker's result stream; beyond it the rest is dropped
MAX_ARRIVALS = 4096  # when parts of the result stream came; a category has a few dozen tests
OUTPUT_HEAD_BYTES = 4_000
OUTPUT_TAIL_BYTES = 8_000
MAX_ERROR_CHARS = 2000  # an error message a child reports (the model grading's)
PR_SET_CHILD_SUBREAPER = 36
PROBE_TIMEOUT_S = 20.0
BOOTSTRAP = ("import sys; sys.path[:0] = {paths!r}; "
             "from autograder.worker import main; main()")


@dataclass
class Layout:
    """The folders a worker reads, as the judge sees them (``*_dir``) on the host."""

    runtime_dir: Path  # holds autograder/{__init__,wire,worker}.py
    pylib_dir: Path  # holds numpy only (symlinks, for the modes that see the host's files)
    student_dir: Path  # holds mytorch/ only
    input_dir: Path  # tests.json and one program folder per test
    tmp_dir: Path  # the worker's TMPDIR and HOME in the modes without a private /tmp
    hidden_dirs: tuple[Path, ...] = ()  # covered by an empty tmpfs under unshare
    readonly_dir: Path | None = None  # remounted read-only under unshare (the grading folder)


@dataclass
class Run:
    """How a sandboxed process ended: exit status (None at the time limit), seconds, its output
    (head and tail, control characters removed) and the bytes it wrote to its result pipe."""

    returncode: int | None
    seconds: float
    output: str
    result: bytes = b""
    result_overflow: bool = False
    # (bytes of the result received so far, seconds since the start) after each read: when each
    # answer arrived, by the judge's clock.
    result_arrivals: tuple[tuple[int, float], ...] = ()

    @property
    def timed_out(self) -> bool:
        return self.returncode is None


def become_subreaper() -> bool:
    """Make orphaned descendants (setsid, double fork) children of this process; True if it worked."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def descendants(root: int) -> list[int]:
    """Every live process whose parent chain leads to ``root`` (not ``root`` itself)."""
    parents: dict[int, int] = {}
    for stat in glob.glob("/proc/[0-9]*/stat"):
        fields = _stat_fields(stat)
        if fields:
            parents[int(stat.split("/")[2])] = int(fields[1])
    found, frontier = [], {root}
    while frontier:
        frontier = {pid for pid, parent in parents.items() if parent in frontier}
        found.extend(sorted(frontier))
    return found


def kill_descendants(root: int | None = None, seconds: float = 10.0) -> int:
    """SIGKILL every descendant of ``root`` (default: this process) until none is left, reaping
    them; return how many were killed. Processes that fork while being killed are caught by the
    next round."""
    root = os.getpid() if root is None else root
    killed, deadline = 0, time.monotonic() + seconds
    while time.monotonic() < deadline:
        alive = [pid for pid in descendants(root) if not _is_zombie(pid)]
        for pid in alive:
            try:
                os.kill(pid, signal.SIGKILL)
                killed += 1
            except (ProcessLookupError, PermissionError):
                pass
        _reap()
        if not alive:
            return killed
        time.sleep(0.02)
    return killed


def _stat_fields(path: str) -> list[bytes]:
    """The fields of a /proc/<pid>/stat after the process name, read as bytes: a process may
    name itself with any bytes (``prctl(PR_SET_NAME)``), ")" and invalid UTF-8 included, so the
    name is skipped up to its last ")" and never decoded. Empty when the process is gone."""
    try:
        return Path(path).read_bytes().rsplit(b")", 1)[1].split()
    except (OSError, IndexError):
        return []


def _is_zombie(pid: int) -> bool:
    fields = _stat_fields(f"/proc/{pid}/stat")
    return not fields or fields[0] in (b"Z", b"X")


def _reap() -> None:
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def choose_mode(layout: Layout, python: str, wanted: str | None = None,
                allow_unisolated: bool = False) -> tuple[str | None, list[str]]:
    """(mode, notes): the first of MODES whose probe passes; the notes say why each stronger mode
    was passed over. A ``wanted`` mode is tried alone: (None, notes) when it fails, so that student
    code never runs less isolated than asked. 'none' (a plain child process) is used only when its
    probe shows one of the worker's own layers (Landlock, seccomp) working, or with
    ``allow_unisolated``."""
    notes = []
    for mode in ([wanted] if wanted else MODES):
        reason = unavailable(mode)
        if reason is None:
            run = run_worker(mode, layout, python, ["--probe"], timeout=PROBE_TIMEOUT_S)
            layers = probe_layers(run)
            if layers is not None and (mode != "none" or any(layers.values()) or allow_unisolated):
                PROBED_LAYERS[mode] = layers
                return mode, notes
            reason = (f"its probe failed: {run.output.strip()[-300:] or run.returncode}"
                      if layers is None else "no isolation layer works here (no Landlock, no "
                      "seccomp, no privileges): student code is not run unless the grader is "
                      "given --allow-unisolated")
        notes.append(f"{mode}: {reason}")
    return None, notes


PROBED_LAYERS: dict[str, dict[str, int]] = {}  # mode -> the worker's own layers in its probe


def probe_layers(run: Run) -> dict[str, int] | None:
    """The worker's own layers as its probe reports them (``ok landlock=7 seccomp=1``: the
    Landlock ABI applied, whether the seccomp filter is installed; 0 for a layer the kernel
    lacks), or None if the probe failed."""
    if run.returncode != 0 or not run.result.startswith(b"ok"):
        return None
    try:
        return {key: int(value) for key, value in
                (field.split("=") for field in run.result[2:].decode().split())}
    except ValueError:
        return None


def layers_summary(mode: str) -> str:
    """One line for the feedback: the worker's own layers under the mode, as the probe found them."""
    layers = PROBED_LAYERS.get(mode, {})
    abi = layers.get("landlock", 0)
    writes = f"only its private {TMPFS_BYTES >> 20} MiB /tmp" if mode == "bwrap" else "no file"
    parts = [f"Landlock ABI {abi} (reads only the interpreter, numpy and its input, writes "
             f"{writes}, no TCP{', no signal outside its domain' if abi >= 6 else ''})"
             if abi else "no Landlock on this kernel",
             "a seccomp filter (no ptrace, sockets, namespaces, mounts, keyrings, BPF)"
             if layers.get("seccomp") else "no seccomp filter here"]
    return "; ".join(parts)


def command_path(mode: str) -> str | None:
    """The absolute path of the command ``mode`` starts the worker with, found once on the
    judge's PATH; the probe and every run use this very file whatever PATH they get."""
    name = {"bwrap": "bwrap", "setpriv": "setpriv", "unshare": "unshare"}.get(mode)
    if name not in _COMMAND_PATHS:
        found = shutil.which(name) if name else None
        _COMMAND_PATHS[name] = os.path.realpath(found) if found else None
    return _COMMAND_PATHS[name]


_COMMAND_PATHS: dict[str | None, str | None] = {}


def unavailable(mode: str) -> str | None:
    """Why ``mode`` cannot be tried on this machine, or None."""
    if mode in ("bwrap", "setpriv", "unshare") and command_path(mode) is None:
        return f"no {mode} command (Debian package {'bubblewrap' if mode == 'bwrap' else 'util-linux'})"
    if mode == "setpriv" and os.geteuid() != 0:
        return "the grader does not run as root"
    if mode == "unshare" and os.geteuid() == 0:
        return ("the grader runs as root, and the worker would be host root inside the namespace "
                "(--map-root-user maps it to the grader's uid); setpriv gives it a uid of its own")
    if mode not in MODES:
        return f"unknown mode (one of {', '.join(MODES)})"
    return None


def worker_command(mode: str, layout: Layout, python: str, args: list[str]) -> list[str]:
    """The command line that starts the worker in ``mode``."""
    if mode == "bwrap":
        paths = [f"{SANDBOX_ROOT}/{name}" for name in ("runtime", "pylib", "student")]
    else:
        paths = [str(layout.runtime_dir), str(layout.pylib_dir), str(layout.student_dir)]
    worker = [python, "-I", "-S", "-c", BOOTSTRAP.format(paths=paths), *args, "--readable", *paths]
    if mode == "bwrap":
        return bwrap_prefix(layout, python) + worker
    if mode == "setpriv":
        uid = grading_uid()
        return [command_path("setpriv"), f"--reuid={uid}", f"--regid={uid}", "--clear-groups",
                "--no-new-privs", "--", *worker]
    if mode == "unshare":
        return unshare_prefix(layout) + worker
    return worker


def bwrap_prefix(layout: Layout, python: str) -> list[str]:
    """bubblewrap arguments: namespaces, read-only system and interpreter, numpy alone."""
    import numpy  # the judge's numpy: the worker gets the very same files

    command = [command_path("bwrap"), "--unshare-user", "--uid", str(SANDBOX_UID),
               "--gid", str(SANDBOX_UID),
               "--unshare-pid", "--unshare-ipc", "--unshare-net", "--unshare-uts",
               "--unshare-cgroup-try", "--die-with-parent", "--new-session", "--cap-drop", "ALL"]
    for top in ("/usr", "/lib", "/lib64", "/lib32", "/bin", "/sbin"):
        if os.path.islink(top):
            command += ["--symlink", os.readlink(top), top]
        elif os.path.isdir(top):
            command += ["--ro-bind", top, top]
    if os.path.exists("/etc/ld.so.cache"):
        command += ["--ro-bind", "/etc/ld.so.cache", "/etc/ld.so.cache"]
    prefix = os.path.realpath(sys.base_prefix)
    if not any(prefix == top or prefix.startswith(top + "/") for top in ("/usr", "/lib")):
        command += ["--ro-bind", prefix, prefix]
    if not os.path.realpath(python).startswith(prefix + "/"):
        command += ["--ro-bind", os.path.realpath(python), os.path.realpath(python)]
    for packages in installed_package_dirs(prefix):  # torch and friends live there: hide them
        command += ["--tmpfs", packages]
    numpy_dir = Path(numpy.__file__).resolve().parent
    command += ["--ro-bind", str(numpy_dir), f"{SANDBOX_ROOT}/pylib/numpy"]
    if (numpy_dir.parent / "numpy.libs").is_dir():
        command += ["--ro-bind", str(numpy_dir.parent / "numpy.libs"),
                    f"{SANDBOX_ROOT}/pylib/numpy.libs"]
    for name in ("runtime", "student", "input"):
        command += ["--ro-bind", str(getattr(layout, f"{name}_dir")), f"{SANDBOX_ROOT}/{name}"]
    return command + ["--proc", "/proc", "--dev", "/dev", "--size", str(TMPFS_BYTES),
                      "--tmpfs", "/tmp", "--chdir", "/tmp", "--"]


def installed_package_dirs(prefix: str) -> list[str]:
    """site-packages and dist-packages folders of the interpreter and the system."""
    patterns = [f"{prefix}/lib/python3*/site-packages", f"{prefix}/lib/python3*/dist-packages",
                "/usr/lib/python3*/site-packages", "/usr/lib/python3*/dist-packages",
                "/usr/local/lib/python3*/site-packages", "/usr/local/lib/python3*/dist-packages"]
    return sorted({os.path.realpath(p) for pattern in patterns for p in glob.glob(pattern)
                   if os.path.isdir(p)})


def unshare_prefix(layout: Layout) -> list[str]:
    """unshare arguments, and a shell that hides the grader's folders before starting the worker."""
    script = ["set -e"]
    if layout.readonly_dir is not None:
        folder = _quote(layout.readonly_dir)
        script += [f"mount --bind {folder} {folder}", f"mount -o remount,bind,ro {folder}"]
    covered = [*layout.hidden_dirs, layout.tmp_dir]
    for shared in (Path("/tmp"), Path("/dev/shm")):  # unless the grading folder lies there
        if layout.readonly_dir is None or not layout.readonly_dir.is_relative_to(shared):
            covered.append(shared)
    script += [f"mount -t tmpfs -o size={TMPFS_BYTES} tmpfs {_quote(path)}" for path in covered]
    script.append('exec "$@"')
    return [command_path("unshare"), "--user", "--map-root-user", "--mount", "--pid", "--fork",
            "--kill-child", "--mount-proc", "--net", "--ipc", "--", "sh", "-c", "; ".join(script),
            "sandbox"]


def _quote(path: Path) -> str:
    return "'" + str(path).replace("'", "'\\''") + "'"


@functools.lru_cache(maxsize=1)
def grading_uid() -> int:
    """The uid (and gid) a root judge runs this grading's worker as (setpriv): drawn afresh for
    every grading, owned by no account and no running process, so a worker cannot signal, trace
    or read another grading's worker, as one shared uid (65534) would let it."""
    taken = {int(line.split(":")[2]) for line in _read("/etc/passwd").splitlines()
             if line.count(":") >= 2 and line.split(":")[2].isdigit()}
    for path in glob.glob("/proc/[0-9]*"):
        try:
            taken.add(os.stat(path).st_uid)
        except OSError:  # the process ended meanwhile
            pass
    while True:
        uid = FRESH_UIDS[0] + secrets.randbelow(FRESH_UIDS[1] - FRESH_UIDS[0])
        if uid not in taken:
            return uid


def worker_environment(mode: str, layout: Layout) -> dict[str, str]:
    """A small, fixed environment: nothing of the grader's leaks into the worker."""
    tmp = "/tmp" if mode == "bwrap" else str(layout.tmp_dir)
    return {"PATH": "/usr/bin:/bin", "HOME": tmp, "TMPDIR": tmp, "LANG": "C.UTF-8",
            "PYTHONHASHSEED": "0", "PYTHONDONTWRITEBYTECODE": "1", "PYTHONIOENCODING": "utf-8",
            "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}


def run_worker(mode: str, layout: Layout, python: str, args: list[str], timeout: float) -> Run:
    """Run the worker in ``mode`` with ``args``; its result pipe is passed as ``--result-fd``."""
    cgroup = WorkerCgroup.create()
    read_end, write_end = os.pipe()
    input_dir = f"{SANDBOX_ROOT}/input" if mode == "bwrap" else str(layout.input_dir)
    args = [a.replace("{input}", input_dir) for a in args] + ["--result-fd", str(write_end)]
    if cgroup is None or set(cgroup.paths) != {"pids", "memory"}:
        args.append("--single-process")  # no cap on the tree: one task, under RLIMIT_AS
    if mode == "bwrap":  # bubblewrap's /tmp is a private tmpfs of TMPFS_BYTES; elsewhere no writes
        args += ["--writable", "/tmp"]
    command = worker_command(mode, layout, python, args)
    try:
        return run_process(command, cwd=layout.tmp_dir, env=worker_environment(mode, layout),
                           timeout=timeout, limits=worker_limits(timeout), cgroup=cgroup,
                           result_pipe=(read_end, write_end))
    finally:
        if cgroup is not None:
            cgroup.remove()


def worker_limits(timeout: float) -> dict[int, int]:
    return {resource.RLIMIT_CORE: 0, resource.RLIMIT_FSIZE: MAX_FILE_BYTES,
            resource.RLIMIT_AS: MAX_ADDRESS_SPACE, resource.RLIMIT_NOFILE: MAX_OPEN_FILES,
            resource.RLIMIT_NPROC: MAX_PROCESSES, resource.RLIMIT_CPU: int(timeout) + 5}


class WorkerCgroup:
    """The worker tree's own cgroup, nested under the judge's (one per controller on cgroup v1,
    the unified one on v2): it caps the processes (``pids``) and the memory of the whole tree,
    which per-process rlimits cannot (three children of 2 GiB each stay under RLIMIT_AS)."""

    def __init__(self, paths: dict[str, Path]) -> None:
        self.paths = paths  # {controller: cgroup folder}

    @classmethod
    def create(cls) -> WorkerCgroup | None:
        """A new cgroup under the judge's own for every controller that allows one; None when none
        does (no privileges, no delegation)."""
        name = f"hw4p1-worker-{os.getpid()}-{time.monotonic_ns()}"
        paths: dict[str, Path] = {}
        for controller, parent, limit_file, limit in _cgroup_parents():
            if controller in paths:
                continue
            path = parent / name
            try:
                path.mkdir(exist_ok=True)
                (path / limit_file).write_text(str(limit))
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


def _cgroup_parents() -> list[tuple[str, Path, str, int]]:
    """(controller, the judge's own cgroup folder for it, limit file, limit) for pids and memory:
    cgroup v1 hierarchies first, then the v2 unified hierarchy for what v1 does not hold."""
    limits = {"pids": (("pids.max", MAX_PROCESSES), ("pids.max", MAX_PROCESSES)),
              "memory": (("memory.limit_in_bytes", MAX_TREE_MEMORY), ("memory.max", MAX_TREE_MEMORY))}
    found, unified = [], None
    for line in _read("/proc/self/cgroup").splitlines():
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        hierarchy, controllers, own = parts
        if hierarchy == "0" and not controllers:
            unified = own
        for controller in controllers.split(","):
            if controller in limits:
                found.append((controller, Path("/sys/fs/cgroup", controller, own.lstrip("/")),
                              *limits[controller][0]))
    if unified is not None:
        base = Path("/sys/fs/cgroup", unified.lstrip("/"))
        available = _read(base / "cgroup.controllers").split()
        for controller in limits:
            if controller in available:
                found.append((controller, base, *limits[controller][1]))
    return found


def _remove_cgroup(path: Path) -> None:
    """Kill whatever is left in the cgroup at ``path``, then remove it."""
    for _ in range(100):
        for pid in _read(path / "cgroup.procs").split():
            try:
                os.kill(int(pid), signal.SIGKILL)
            except (ProcessLookupError, PermissionError, ValueError):
                pass
        try:
            path.rmdir()
            return
        except OSError:
            time.sleep(0.05)


def _read(path) -> str:
    try:
        return Path(path).read_text(errors="replace")
    except OSError:
        return ""


def run_process(command: list[str], cwd: Path, env: dict[str, str], timeout: float,
                limits: dict[int, int], cgroup: WorkerCgroup | None = None,
                result_pipe: tuple[int, int] | None = None) -> Run:
    """Run ``command`` in a new session with ``limits``; kill it and all it started at the end.

    stdout and stderr are read as they come and only their head and tail are kept; the result pipe
    (if any) is read up to MAX_RESULT_BYTES. Returns once the process and every descendant is dead.
    """
    cgroup_fds = cgroup.join_fds() if cgroup is not None else []

    def in_child() -> None:  # between fork and exec: system calls only
        for fd in cgroup_fds:
            os.write(fd, b"0")
        for limit, value in limits.items():
            resource.setrlimit(limit, (value, value))

    start = time.monotonic()
    pass_fds = (result_pipe[1],) if result_pipe else ()
    try:
        process = subprocess.Popen(command, cwd=cwd, env=env, stdin=subprocess.DEVNULL,
                                   stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                   start_new_session=True, preexec_fn=in_child, pass_fds=pass_fds)
    finally:
        for fd in cgroup_fds:
            os.close(fd)
        if result_pipe:
            os.close(result_pipe[1])
    output = BoundedCapture(process.stdout, OUTPUT_HEAD_BYTES, OUTPUT_TAIL_BYTES)
    readers = [threading.Thread(target=output.read_all, daemon=True)]
    result = None
    if result_pipe:
        result = BoundedCapture(os.fdopen(result_pipe[0], "rb"), MAX_RESULT_BYTES, 0,
                                clock_start=start)
        readers.append(threading.Thread(target=result.read_all, daemon=True))
    for reader in readers:
        reader.start()
    try:
        returncode = process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        returncode = None
    seconds = time.monotonic() - start
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    process.wait()
    kill_descendants()
    for reader in readers:
        reader.join(timeout=5)
    return Run(returncode, seconds, output.text(), result.data() if result else b"",
               bool(result and result.omitted), tuple(result.arrivals) if result else ())


class BoundedCapture:
    """Keep the head and the tail of a byte stream; count the bytes dropped in between. With
    ``clock_start`` (a ``time.monotonic()``), also note when the bytes came: ``arrivals``, at most
    MAX_ARRIVALS of them, so that a writer of one-byte chunks sizes nothing."""

    def __init__(self, stream, head_bytes: int, tail_bytes: int,
                 clock_start: float | None = None) -> None:
        self.stream, self.head_bytes, self.tail_bytes = stream, head_bytes, tail_bytes
        self.head, self.tail = bytearray(), bytearray()
        self.omitted = 0
        self.clock_start = clock_start
        self.received = 0
        self.arrivals: list[tuple[int, float]] = []

    def read_all(self) -> None:
        with self.stream:
            while chunk := self.stream.read1(65536):
                self.received += len(chunk)
                if self.clock_start is not None and len(self.arrivals) < MAX_ARRIVALS:
                    self.arrivals.append((self.received, time.monotonic() - self.clock_start))
                room = self.head_bytes - len(self.head)
                if room > 0:
                    self.head += chunk[:room]
                    chunk = chunk[room:]
                self.tail += chunk
                overflow = len(self.tail) - self.tail_bytes
                if overflow > 0:
                    del self.tail[:overflow]
                    self.omitted += overflow

    def data(self) -> bytes:
        return bytes(self.head + self.tail)

    def text(self) -> str:
        head = printable(self.head.decode("utf-8", errors="replace"))
        tail = printable(self.tail.decode("utf-8", errors="replace"))
        if not self.omitted:
            return head + tail
        return f"{head}\n[... {self.omitted:,} bytes of output omitted ...]\n{tail}"


def printable(text: str) -> str:
    """Text with line breaks normalised and other control characters (terminal escapes) removed."""
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    return "".join(c for c in text if c in "\n\t" or (c.isprintable() and c != "\x7f"))


def mode_summary(mode: str) -> str:
    """One line for the feedback: how student code was isolated."""
    return {
        "bwrap": "student code ran in a bubblewrap sandbox (no network, no view of the grader)",
        "setpriv": "student code ran as a fresh unprivileged uid of its own (no bubblewrap here)",
        "unshare": "student code ran in unprivileged namespaces (no bubblewrap here)",
        "none": ("student code ran as a plain child process with the grader's uid, confined by "
                 "its Landlock layer only (no bubblewrap, setpriv as root, or unshare here)"
                 if PROBED_LAYERS.get("none", {}).get("landlock") else
                 "WARNING: student code ran UNISOLATED with the grader's permissions: no sandbox "
                 "layer (bubblewrap, setpriv as root, unshare, Landlock) works on this machine; "
                 "see autograder/README.md"),
    }[mode]


def process_cap_note(mode: str) -> str | None:
    """A note for the feedback when no cgroup caps the worker tree's processes and memory here:
    then its seccomp filter lets the worker start no process or thread, so RLIMIT_AS bounds its
    memory (without seccomp either, RLIMIT_NPROC per uid and RLIMIT_AS per process are left)."""
    cgroup = WorkerCgroup.create()
    capped = set(cgroup.paths) if cgroup is not None else set()
    if cgroup is not None:
        cgroup.remove()
    missing = [c for c in ("pids", "memory") if c not in capped]
    if not missing:
        return None
    if PROBED_LAYERS.get(mode, {}).get("seccomp"):
        return (f"no {' or '.join(missing)} cgroup could be created under the grader's own, so the "
                f"worker may start no process or thread (its seccomp filter) and RLIMIT_AS bounds "
                f"its memory")
    return (f"no {' or '.join(missing)} cgroup could be created under the grader's own, so the "
            f"worker tree's {' and '.join('processes' if c == 'pids' else 'memory' for c in missing)}"
            f" {'is' if len(missing) == 1 else 'are'} bounded per process (rlimits) and by the "
            f"time limit only")


def make_readable(folder: Path) -> None:
    """Let the sandbox uid read ``folder`` (for setpriv): directories 755, files 644. Symbolic
    links (numpy's, into the installed packages) are left alone: chmod would follow them."""
    os.chmod(folder, 0o755)
    for entry in tree_entries(folder):
        if not entry.is_symlink():
            os.chmod(entry.path, 0o755 if entry.is_dir(follow_symlinks=False) else 0o644)


def tree_entries(folder: Path) -> Iterator[os.DirEntry]:
    """Every entry under ``folder``, each folder before what it holds, never following a symbolic
    link. A loop over a stack, not recursion: no tree is too deep for it."""
    stack = [os.fspath(folder)]
    while stack:
        with os.scandir(stack.pop()) as entries:
            for entry in entries:
                yield entry
                if entry.is_dir(follow_symlinks=False):
                    stack.append(entry.path)


def remove_tree(path: Path) -> None:
    """Delete ``path`` and everything under it (nothing when it does not exist), whatever its
    depth (:func:`tree_entries`); a symbolic link is removed, never followed."""
    if not os.path.lexists(path):
        return
    if os.path.islink(path) or not os.path.isdir(path):
        os.unlink(path)
        return
    folders = [os.fspath(path)]
    for entry in tree_entries(path):
        if entry.is_dir(follow_symlinks=False):
            folders.append(entry.path)
        else:
            os.unlink(entry.path)
    for folder in reversed(folders):  # each folder after everything it held
        os.rmdir(folder)
