"""Processes the judge starts: run one bounded and killed whole, capture its output, find and kill
every descendant. Standard library only.

:func:`run_process` runs a command in a new session under resource limits (and, given one, in a
cgroup of :mod:`autograder.cgroups`), keeps the head and the tail of its output
(:class:`BoundedCapture`) and reads its result pipe up to MAX_RESULT_BYTES, noting when each part
arrived. The judge makes itself a child subreaper (:func:`become_subreaper`), so processes that
detach with ``setsid`` or a double fork become its children, and :func:`kill_descendants` kills
every one of them before the scores are printed.
"""
from __future__ import annotations

import ctypes
import glob
import os
import resource
import signal
import subprocess
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from autograder.cgroups import WorkerCgroup

MAX_RESULT_BYTES = 64 * 2**20  # the worker's result stream; beyond it the rest is dropped
MAX_ARRIVALS = 4096  # when parts of the result stream came; a category has a few dozen tests
OUTPUT_HEAD_BYTES = 4_000
OUTPUT_TAIL_BYTES = 8_000
MAX_ERROR_CHARS = 2000  # an error message a child reports (the model grading's)
PR_SET_CHILD_SUBREAPER = 36


@dataclass
class Run:
    """How a child process ended: exit status (None at the time limit), seconds, its output
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
