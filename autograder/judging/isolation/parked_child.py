"""The model child: a child forked from the judge early (:class:`ParkedChild`), that skips the
interpreter start and the imports a command pays, then runs a function as
``processes.run_process`` runs a command (same session, limits, capture and time limit).
Standard library only.
"""
from __future__ import annotations

import ctypes
import importlib
import json
import os
import resource
import signal
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path

from autograder.judging.isolation import processes
from autograder.judging.isolation.processes import Run

MALLOPT_OPTIONS = {"MALLOC_TRIM_THRESHOLD_": -1, "MALLOC_MMAP_THRESHOLD_": -3}
WAIT_POLL_S = 0.005  # how often a forked child's exit is polled


class ForkRefused(Exception):
    """A child forked now would inherit the state of a thread it lacks; the message says which."""


class Forked:
    """The ``subprocess.Popen`` surface ``processes.supervise`` uses, for a child of ``os.fork``."""

    def __init__(self, pid: int) -> None:
        self.pid, self.returncode = pid, None

    def kill(self) -> None:
        if self.returncode is None:  # until it is reaped, its pid is its own
            os.kill(self.pid, signal.SIGKILL)

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.returncode is None:
            try:
                pid, status = os.waitpid(self.pid, os.WNOHANG if deadline is not None else 0)
            except ChildProcessError:  # reaped elsewhere: how it ended is unknown
                self.returncode = -signal.SIGKILL
                break
            if pid:
                self.returncode = os.waitstatus_to_exitcode(status)
            elif time.monotonic() >= deadline:
                raise subprocess.TimeoutExpired(str(self.pid), timeout)
            else:
                time.sleep(WAIT_POLL_S)
        return self.returncode


class ParkedChild:
    """A child forked from this process at construction, that imports ``module`` and waits; given
    its arguments by :meth:`run`, it calls ``module.function(argv)`` as ``processes.run_process``
    runs a command, and is killed whole at the time limit. It serves one run.

    The child is a session leader at once; on :meth:`run` it takes the limits, the working folder
    and exactly the environment it is given, with what a fresh interpreter reads from that
    environment at its start (stdio encoding, bytecode writing, glibc's malloc thresholds,
    temporary folder); its standard input is /dev/null, its output goes to the caller's capture
    and no other descriptor of this process stays open in it. What a fresh interpreter does
    differently: the modules and the hash seed of strings are this process's.

    Forking is safe only when no other thread's state is copied without its thread: an OpenMP
    team (torch's intra-op threads, started by the first parallel region) would leave the child
    waiting forever on threads it does not have. Libraries that stop their threads before a fork
    (OpenBLAS, through pthread_atfork) leave this process with one thread during the fork; the
    constructor checks that, right after the fork, and raises :class:`ForkRefused` otherwise.
    """

    def __init__(self, module: str, function: str) -> None:
        for stream in (sys.stdout, sys.stderr):
            stream.flush()  # or the child would print what this process buffered
        request_read, self._request = os.pipe()
        self._output, output_write = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(self._request)
            os.close(self._output)
            _parked(request_read, output_write, module, function)
        os.close(request_read)
        os.close(output_write)
        self._process = Forked(pid)
        processes.parked_pids.add(pid)
        threads = len(os.listdir("/proc/self/task"))
        if threads > 1:
            self.close()
            raise ForkRefused(f"this process had {threads} threads when it forked (an OpenMP "
                              f"team, or another thread that a fork does not stop)")

    def run(self, argv: list[str], cwd: Path, env: dict[str, str], timeout: float,
            limits: dict[int, int]) -> Run:
        """Call the function with ``argv``, as run_process runs a command with these arguments."""
        if self._request < 0:
            raise RuntimeError("a parked child serves one run")
        start = time.monotonic()
        request = json.dumps({"argv": argv, "cwd": str(cwd), "env": env,
                              "limits": [[int(limit), value] for limit, value in limits.items()]})
        stdout = os.fdopen(self._output, "rb")
        try:
            view = memoryview(request.encode())
            while view:
                view = view[os.write(self._request, view):]
        except OSError:  # the child died parked: its output says why, its status how
            pass
        finally:
            os.close(self._request)
            self._request = -1
            processes.parked_pids.discard(self._process.pid)
        return processes.supervise(self._process, stdout, start, timeout)

    def close(self) -> None:
        """End the child unused (a grading with no model to evaluate); nothing once it ran."""
        if self._request >= 0:
            os.close(self._request)
            self._request = -1
            processes.parked_pids.discard(self._process.pid)
            os.close(self._output)
            self._process.kill()  # it started nothing yet: killing it is enough
            self._process.wait()


def _parked(request_fd: int, output_fd: int, module: str, function: str) -> None:
    """The forked child's whole life; it never returns into the caller's code."""
    code = 1
    try:
        os.setsid()
        null = os.open(os.devnull, os.O_RDONLY)
        for source, target in ((null, 0), (output_fd, 1), (output_fd, 2)):
            os.dup2(source, target)
        os.closerange(3, request_fd)
        os.closerange(request_fd + 1, os.sysconf("SC_OPEN_MAX"))
        sys.dont_write_bytecode = True  # the importing below writes nothing beside the code
        target = getattr(importlib.import_module(module), function)
        with os.fdopen(request_fd, "rb") as requests:
            data = requests.read()
        if not data:  # closed unused
            code = 0
            return
        request = json.loads(data)
        for limit, value in request["limits"]:
            resource.setrlimit(limit, (value, value))
        os.chdir(request["cwd"])
        _start_from(request["env"])
        sys.argv = [sys.modules[module].__file__, *request["argv"]]
        target(request["argv"])
        code = 0
    except SystemExit as exit:  # as the interpreter ends on it
        if exit.code is None or isinstance(exit.code, int):
            code = exit.code or 0
        else:
            print(exit.code, file=sys.stderr)
    except BaseException:  # noqa: BLE001 - reported as a command's traceback would be
        traceback.print_exc()
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):
                pass
        os._exit(code)


def _start_from(env: dict[str, str]) -> None:
    """Take ``env`` as this process's environment, with what an interpreter and glibc read from
    it at their start."""
    os.environ.clear()
    os.environ.update(env)
    sys.dont_write_bytecode = bool(env.get("PYTHONDONTWRITEBYTECODE"))
    encoding, _, errors = env.get("PYTHONIOENCODING", "").partition(":")
    sys.stdout = open(1, "w", encoding=encoding or None, errors=errors or None, closefd=False)
    sys.stderr = open(2, "w", encoding=encoding or None, errors=errors or "backslashreplace",
                      closefd=False)
    libc = ctypes.CDLL(None)
    for name, option in MALLOPT_OPTIONS.items():
        if env.get(name, "").isdigit():
            libc.mallopt(option, int(env[name]))
    tempfile.tempdir = None  # found again from TMPDIR
    sys.path[:0] = [path for path in env.get("PYTHONPATH", "").split(os.pathsep) if path]
