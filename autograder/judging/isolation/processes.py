"""Processes the judge starts: run one bounded and killed whole, capture its output, find and kill
every descendant. Standard library only.

:func:`run_process` runs a command in a new session under resource limits (and, given one, in a
cgroup of :mod:`autograder.judging.isolation.cgroups`), keeps the head and the tail of its output
(:class:`BoundedCapture`) and reads its result pipe up to MAX_RESULT_BYTES; given a dialogue, it
lets the caller ask the child for one thing at a time over a request pipe and wait for each answer
(:class:`Conversation`), timed by the caller's clock (``parked_child.ParkedChild`` runs a function
instead of a command, under the same session, limits, capture and time limit). The judge makes
itself a child subreaper (:func:`become_subreaper`), so processes that detach with ``setsid`` or a
double fork become its children, and :func:`kill_descendants` kills every one of them before the
scores are printed.
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
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from autograder.judging.isolation.cgroups import WorkerCgroup

MAX_RESULT_BYTES = 64 * 2**20  # the worker's result stream; beyond it the rest is dropped
OUTPUT_HEAD_BYTES = 4_000
READ_BYTES = 65536  # pragma: no mutate (equivalent: how much one read takes; every byte is read)
OUTPUT_TAIL_BYTES = 8_000
MAX_ERROR_CHARS = 2000  # an error message a child reports (the model grading's)
PR_SET_CHILD_SUBREAPER = 36
parked_pids: set[int] = set()  # parked_child.ParkedChild processes that have not run yet


def uid_tasks(uid: int) -> int:
    """How many tasks (threads included: RLIMIT_NPROC counts each) run with real uid ``uid`` now,
    read from /proc (tasks that end while they are read are skipped)."""
    count = 0
    for status in glob.glob("/proc/[0-9]*/status"):
        try:  # bytes: a task's name may be any bytes, UTF-8 or not
            fields = dict(line.split(b":", 1) for line in Path(status).read_bytes().splitlines()
                          if b":" in line)
        except OSError:
            continue
        if int(fields[b"Uid"].split()[0]) == uid:
            count += int(fields[b"Threads"])
    return count


@dataclass
class Run:
    """How a child process ended: exit status (None at the time limit), seconds, its output
    (head and tail, control characters removed) and the bytes it wrote to its result pipe."""

    returncode: int | None
    seconds: float
    output: str
    result: bytes = b""
    result_overflow: bool = False

    @property
    def timed_out(self) -> bool:
        return self.returncode is None


def become_subreaper() -> bool:
    """Make orphaned descendants (setsid, double fork) children of this process; True if it
    worked."""
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


def kill_descendants(root: int | None = None, seconds: float = 10.0,
                     spare: frozenset[int] = frozenset()) -> int:
    """SIGKILL every descendant of ``root`` (default: this process) but ``spare`` until none is
    left, reaping them; return how many were killed. Processes that fork while being killed are
    caught by the next round."""
    root = os.getpid() if root is None else root
    killed, deadline = 0, time.monotonic() + seconds
    while time.monotonic() < deadline:
        alive = [pid for pid in descendants(root) if pid not in spare and not _is_zombie(pid)]
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
                result_pipe: tuple[int, int] | None = None,
                request_pipe: tuple[int, int] | None = None,
                dialogue: Callable[[Conversation], None] | None = None) -> Run:
    """Run ``command`` in a new session with ``limits``; kill it and all it started at the end.

    stdout and stderr are read as they come and only their head and tail are kept; the result pipe
    (if any: (read end, write end), the write end passed to the child) is read up to
    MAX_RESULT_BYTES. With ``request_pipe`` (read end passed to the child) and ``dialogue``, the
    dialogue runs in this thread once the child started, with a :class:`Conversation` on both
    pipes that ends at the time limit; the request pipe is closed when it returns (the child reads
    its end). Returns once the process and every descendant is dead.
    """
    cgroup_fds = cgroup.join_fds() if cgroup is not None else []

    def in_child() -> None:  # between fork and exec: system calls only
        for fd in cgroup_fds:
            os.write(fd, b"0")
        for limit, value in limits.items():
            resource.setrlimit(limit, (value, value))

    start = time.monotonic()
    pass_fds = tuple(pipe[index] for pipe, index in ((result_pipe, 1), (request_pipe, 0)) if pipe)
    try:
        process = subprocess.Popen(command, cwd=cwd, env=env, stdin=subprocess.DEVNULL,
                                   stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                   start_new_session=True, preexec_fn=in_child, pass_fds=pass_fds)
    finally:
        for fd in [*cgroup_fds, *pass_fds]:
            os.close(fd)
    return supervise(process, process.stdout, start, timeout, result_pipe, request_pipe, dialogue)


def supervise(process, stdout, start: float, timeout: float,
               result_pipe: tuple[int, int] | None = None,
               request_pipe: tuple[int, int] | None = None,
               dialogue: Callable[[Conversation], None] | None = None) -> Run:
    """Capture a started child's output (``stdout``) and result pipe, run the dialogue, wait until
    ``start + timeout``, then kill its session and every descendant. ``process``: a
    ``subprocess.Popen`` or a ``parked_child.Forked``, the leader of its own session."""
    output = BoundedCapture(stdout, OUTPUT_HEAD_BYTES, OUTPUT_TAIL_BYTES)
    readers = [threading.Thread(target=output.read_all, daemon=True)]
    result = None
    if result_pipe:
        result = BoundedCapture(os.fdopen(result_pipe[0], "rb"), MAX_RESULT_BYTES, 0)
        readers.append(threading.Thread(target=result.read_all, daemon=True))
    for reader in readers:
        reader.start()
    returncode = None
    deadline = start + timeout
    try:
        if request_pipe:
            try:
                if dialogue is not None and result is not None:
                    conversation = Conversation(request_pipe[1], result, start, deadline)
                    dialogue(conversation)
                    deadline = min(deadline, conversation.deadline)  # the dialogue may end it
            finally:
                os.close(request_pipe[1])
        returncode = process.wait(timeout=max(deadline - time.monotonic(), 0.0))
    except subprocess.TimeoutExpired:
        pass
    finally:  # whatever the dialogue raised, the child and all it started die here
        seconds = time.monotonic() - start
        try:
            os.killpg(process.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        process.kill()  # a forked child may not lead its session yet
        process.wait()
        kill_descendants(spare=frozenset(parked_pids))  # children still parked wait their turn
        for reader in readers:
            reader.join(timeout=5)
    return Run(returncode, seconds, output.text(), result.data() if result else b"",
               bool(result and result.omitted))


class BoundedCapture:
    """Keep the head and the tail of a byte stream; count the bytes dropped in between. A reader
    in another thread can wait for the stream to reach a size (:meth:`wait_for`)."""

    def __init__(self, stream, head_bytes: int, tail_bytes: int) -> None:
        self.stream, self.head_bytes, self.tail_bytes = stream, head_bytes, tail_bytes
        self.head, self.tail = bytearray(), bytearray()
        self.omitted = 0
        self.received = 0
        self.ended = False
        self.changed = threading.Condition()

    def read_all(self) -> None:
        with self.stream:
            while chunk := self.stream.read1(READ_BYTES):
                with self.changed:
                    self.received += len(chunk)
                    room = self.head_bytes - len(self.head)  # never negative
                    self.head += chunk[:room]
                    self.tail += chunk[room:]
                    overflow = max(len(self.tail) - self.tail_bytes, 0)
                    del self.tail[:overflow]
                    self.omitted += overflow
                    self.changed.notify_all()
        with self.changed:
            self.ended = True
            self.changed.notify_all()

    def wait_for(self, size: int, deadline: float) -> bool:
        """Whether the head holds ``size`` bytes by ``deadline`` (a ``time.monotonic()``); False
        as soon as the stream ended, or overflowed the head, short of it."""
        with self.changed:
            self.changed.wait_for(lambda: len(self.head) >= size or self.ended or self.omitted,
                                  timeout=max(deadline - time.monotonic(), 0.0))
            return len(self.head) >= size

    def head_bytes_between(self, start: int, end: int) -> bytes:
        with self.changed:
            return bytes(self.head[start:end])

    def data(self) -> bytes:
        return bytes(self.head + self.tail)

    def text(self) -> str:
        head = printable(self.head.decode("utf-8", errors="replace"))
        tail = printable(self.tail.decode("utf-8", errors="replace"))
        if not self.omitted:
            return head + tail
        return f"{head}\n[... {self.omitted:,} bytes of output omitted ...]\n{tail}"


class Conversation:
    """The caller's side of a lockstep exchange with a running child: a request written to the
    child's request pipe, then the wait for its answer on the result pipe, each timed by the
    caller's clock in seconds since the child started; nothing ends later than ``deadline``."""

    def __init__(self, request_fd: int, result: BoundedCapture, start: float,
                 deadline: float) -> None:
        self.request_fd, self.result, self.start, self.deadline = (request_fd, result, start,
                                                                   deadline)

    def ask(self, request: bytes) -> float | None:
        """Send ``request``; when it was sent, or None when the child no longer reads."""
        try:
            view = memoryview(request)
            while view:
                view = view[os.write(self.request_fd, view):]
        except OSError:
            return None
        return time.monotonic() - self.start

    def wait_for(self, size: int) -> float | None:
        """When the result stream reached ``size`` bytes, or None when it did not by the deadline
        (or ended, or overflowed MAX_RESULT_BYTES, first)."""
        if not self.result.wait_for(size, self.deadline):
            return None
        return time.monotonic() - self.start

    def received(self, start: int, end: int) -> bytes:
        """Bytes ``start`` to ``end`` of the result stream received so far."""
        return self.result.head_bytes_between(start, end)


def printable(text: str) -> str:
    """Text with line breaks normalised and other control characters (terminal escapes) removed."""
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    return "".join(c for c in text if c in "\n\t" or c.isprintable())
