"""The worker: replays the judge's programs on the student's ``mytorch`` inside the sandbox.

numpy and the standard library only; it and the modules beside it are the grader's only code that
runs next to student code, so nothing it sends back is trusted (the judge validates every value
against its own truth). The sandbox (``autograder/judging/isolation/sandbox.py``) starts it as::

    python -I -S -c "<bootstrap>" --input DIR --result-fd N --request-fd M --output-bytes H T

with ``sys.path`` set to the runtime folder (the modules of ``autograder/sandboxed/``), a folder
holding only numpy, and the student's folder holding only ``mytorch/``. It confines itself and
imports numpy once, then serves every category (:func:`serve`): each in a process forked for it,
which imports mytorch and answers the judge in lockstep: for each line read (a test's name, whose
program the judge has just written to ``DIR/<name>``) it writes that test's record
(``wire.encode_record``), which the worker relays to file descriptor N in frames (``wire.frame``)
with the process's end; the judge writes the next program only once that record has come, so no test
can start early or hand its time to another. A failure is sent as a few typed fields (which step,
the exception's class, the line of mytorch it came from), never as text: the judge words the
feedback itself, so nothing the student code prints or puts in a message reaches it.

Before mytorch is imported, each category's process installs what refuses an autograd library
and code made at run time (``autograder/sandboxed/refusals.py``, whose docstrings say how).
"""
from __future__ import annotations

import argparse
import atexit
import os
import select
import signal
import sys
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import NoReturn

import numpy as np

from autograder.sandboxed import landlock, seccomp, wire
from autograder.sandboxed.refusals import SYSTEM_READABLE, NumpyOnly, refuse_code_made_at_run_time
from autograder.sandboxed.replay import describe, run_test


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Replay the judge's programs on mytorch.")
    parser.add_argument("--input", type=Path)
    parser.add_argument("--result-fd", type=int, required=True)
    parser.add_argument("--request-fd", type=int,
                        help="the judge's requests, a line each: a test's name (answered before "
                             "the next is read), '' (the category ends) or '!' (stop it now)")
    parser.add_argument("--probe", action="store_true",
                        help="only say that the sandbox can run this worker and import numpy")
    parser.add_argument("--readable", nargs="*", default=[],
                        help="folders to read besides the interpreter and numpy (Landlock)")
    parser.add_argument("--single-process", action="store_true",
                        help="each category's process starts no process or thread (no cgroup "
                             "caps the tree: seccomp)")
    parser.add_argument("--writable", nargs="*", default=[],
                        help="folders to write (Landlock): only a size-capped private tmpfs")
    parser.add_argument("--output-bytes", type=int, nargs=2, metavar=("HEAD", "TAIL"),
                        help="of what each category's process prints, the bytes kept (the "
                             "judge's processes.OUTPUT_HEAD_BYTES and OUTPUT_TAIL_BYTES)")
    args = parser.parse_args(argv)
    readable = [*args.readable, *([str(args.input)] if args.input else [])]
    if args.probe:
        layers = confine(readable, args.writable, children=not args.single_process)
        send(args.result_fd, ("ok " + " ".join(f"{k}={v}" for k, v in layers.items())).encode())
        return
    if args.request_fd is None or args.output_bytes is None:
        parser.error("serving the judge needs --request-fd and --output-bytes")
    confine(readable, args.writable)  # each category's process adds the rest of its layers
    serve(args)


@dataclass
class Category:
    """The zygote's view of the process running one category: its pid, the pipes it reads the
    judge's requests from and writes its records and output to (the zygote's ends), and the head
    and tail of what it printed."""

    pid: int
    requests: int | None
    results: int | None
    output: int | None
    head: bytearray = field(default_factory=bytearray)
    tail: bytearray = field(default_factory=bytearray)
    omitted: int = 0


def serve(args: argparse.Namespace) -> None:
    """The zygote: answer the judge's requests with one process per category, forked from this
    one (confined, numpy imported, no student code run), so a category's process starts in
    milliseconds and whatever it does (exit, crash, hang, memory, state left in mytorch) is over
    with it. A test's name goes to the running category's process (one is forked for the first);
    an empty line closes its requests (it ends as the worker did once the judge had all it asked
    for); '!' kills it. Each process's records and output come back framed
    (``wire.frame``); its end, with its exit status, once it is dead."""
    child: Category | None = None
    pending = b""
    while True:
        streams = [fd for fd in (child.results, child.output) if fd is not None] if child else []
        # With a category running, its death is looked for every POLL_S: a process it left
        # behind may hold its pipes open.
        ready = select.select([args.request_fd, *streams], [], [],
                              POLL_S if child is not None else None)[0]
        for fd in streams:
            if fd in ready:
                relay(args, child, fd)
        if child is not None:
            child = end_category(args, child, wait=False)
        if args.request_fd not in ready:
            continue
        data = os.read(args.request_fd, 65536)
        if not data:  # the judge is done
            if child is not None:
                end_category(args, child, wait=True, kill=True)
            return
        *lines, pending = (pending + data).split(b"\n")
        for line in lines:
            if child is not None and line == b"!":
                child = end_category(args, child, wait=True, kill=True)
            elif child is not None and not line:
                child.requests = close(child.requests)
            elif line and line != b"!":
                child = child or start_category(args)
                if child.requests is not None:
                    try:
                        send(child.requests, line + b"\n")
                    except OSError:  # it no longer reads: its end is what the judge hears
                        child.requests = close(child.requests)


POLL_S = 0.05
MAX_DRAIN_READS = 64  # of a dead category's pipes, before its end is sent


def relay(args: argparse.Namespace, child: Category, fd: int) -> None:
    """Read what is ready on one of ``child``'s pipes: records go to the judge as they come,
    output is kept (head and tail); the pipe is closed at its end."""
    data = os.read(fd, 65536)
    if fd == child.results and data:
        send(args.result_fd, wire.frame(wire.RESULT, data))
    elif fd == child.results:
        child.results = close(fd)
    else:
        keep_output(child, data, *args.output_bytes)
        if not data:
            child.output = close(fd)


def close(fd: int | None) -> None:
    if fd is not None:
        os.close(fd)


def keep_output(child: Category, data: bytes, head_bytes: int, tail_bytes: int) -> None:
    """Keep the head and the tail of what ``child`` prints (as ``processes.BoundedCapture``)."""
    room = head_bytes - len(child.head)
    if room > 0:
        child.head += data[:room]
        data = data[room:]
    child.tail += data
    overflow = len(child.tail) - tail_bytes
    if overflow > 0:
        del child.tail[:overflow]
        child.omitted += overflow


def end_category(args: argparse.Namespace, child: Category, wait: bool,
                 kill: bool = False) -> Category | None:
    """Send ``child``'s output and end (wire.ENDED) once it is dead: killed first with ``kill``;
    reaped at once with ``wait``, else only if it already ended (then None is returned, else
    ``child``). What its pipes still hold is relayed first; a pipe still open after that is held
    by a process it left behind, which the end says (the judge then starts a worker again)."""
    if kill:
        os.kill(child.pid, signal.SIGKILL)
    pid, status = os.waitpid(child.pid, 0 if wait else os.WNOHANG)
    if pid == 0:
        return child
    for _ in range(MAX_DRAIN_READS):
        streams = [fd for fd in (child.results, child.output) if fd is not None]
        ready = select.select(streams, [], [], 0)[0] if streams else []
        if not ready:
            break
        for fd in ready:
            relay(args, child, fd)
    left_behind = child.results is not None or child.output is not None
    for fd in (child.requests, child.results, child.output):
        close(fd)
    send(args.result_fd, wire.frame(wire.OUTPUT_HEAD, bytes(child.head))
         + wire.frame(wire.OUTPUT_TAIL, bytes(child.tail))
         + wire.frame(wire.ENDED, wire.ENDED_PAYLOAD.pack(
             os.waitstatus_to_exitcode(status), child.omitted, left_behind)))
    return None


def start_category(args: argparse.Namespace) -> Category:
    """Fork the process of the next category; it never returns to the zygote's loop."""
    requests, results, output = os.pipe(), os.pipe(), os.pipe()
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid:
        for fd in (requests[0], results[1], output[1]):
            os.close(fd)
        return Category(pid, requests[1], results[0], output[0])
    for fd in (args.request_fd, args.result_fd, requests[1], results[0], output[0]):
        os.close(fd)
    os.dup2(output[1], 1)
    os.dup2(output[1], 2)
    os.close(output[1])
    run_category(args, requests[0], results[1])


def run_category(args: argparse.Namespace, request_fd: int, result_fd: int) -> NoReturn:
    """A category's process: its last layers (with ``--single-process``, no new task), the
    audit hook, then mytorch imported and each test the judge asks for answered, as the worker
    did when each category had a worker of its own; it exits as an interpreter would (exit
    handlers run, output flushed)."""
    status = 0
    try:
        if args.single_process:
            seccomp.deny_escapes(children=False)
        sys.meta_path.insert(0, NumpyOnly())
        refuse_code_made_at_run_time()
        answer(args.input, request_fd, result_fd)
    except SystemExit as end:
        status = end.code if isinstance(end.code, int) else int(end.code is not None)
    except BaseException:  # noqa: BLE001 - as the interpreter reports what escapes its program
        traceback.print_exc()
        status = 1
    finally:
        try:
            atexit._run_exitfuncs()
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(status & 0xFF)


def answer(folder: Path, request_fd: int, result_fd: int) -> None:
    """Import mytorch, then answer each test named on ``request_fd`` until it closes."""
    requests = open(request_fd, "rb")  # read until the judge ends the category
    try:
        import mytorch.nn as nn
    except BaseException as error:  # noqa: BLE001 - whatever student code raises is reported
        failure = {**describe(error), "step": -1}
        for line in requests:
            send(result_fd, wire.encode_record(line.decode().strip(), failure, {}))
        return
    for line in requests:
        test = line.decode().strip()
        send(result_fd, run_test(nn, folder / test, test))


def confine(readable: list[str], writable: list[str], children: bool = True) -> dict[str, int]:
    """Apply the worker's own layers before any student code runs: Landlock
    (``autograder.sandboxed.landlock``: read only the system's libraries, the interpreter, numpy and
    ``readable``; write only ``writable``, which the judge gives only where it is a size-capped
    private tmpfs, so no worker can fill a disk another grading shares), then the seccomp filter
    (``autograder.sandboxed.seccomp``; with ``children=False`` it also refuses new processes).
    Returns {"landlock": ABI applied, "seccomp": 1 if installed}, 0 for a layer this kernel lacks
    (for seccomp also on an architecture it has no table for: ``seccomp.unsupported`` says so)."""
    numpy_dir = Path(np.__file__).resolve().parent
    abi = landlock.restrict(
        [*SYSTEM_READABLE, os.path.realpath(sys.base_prefix), os.path.realpath(sys.executable),
         str(numpy_dir), str(numpy_dir.parent / "numpy.libs"), *readable],
        writable)
    return {"landlock": abi, "seccomp": int(seccomp.deny_escapes(children))}


def send(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


if __name__ == "__main__":
    main()
