"""A judge zygote: a process that has imported the judge's third-party libraries once and forks a
fresh judge (``autograder.judging.grade``) for each grading, so that a grading does not pay an
interpreter start and ``import torch`` (docs/results.md, "Bulk regrade throughput"). Standard
library only at import; the zygote itself imports PRELOADED.

The bulk regrade starts one per job slot (:class:`Zygotes`, through
``autograder.judging.grading_run.run``); the Autolab Makefile, Gradescope and the benchmarks still
start the judge with ``make``. ``make mutants`` and ``make mutation`` fork their test runs from one
too (``tools/mutants.py``'s ``Preloaded``: its own ``preload`` list, pytest's among it, and
requests that keep standard error and run the exit handlers, as ``python -m`` does). What the zygote holds: only PRELOADED (no module of the grader or of
hw4lib, so each judge imports its own code and the reference hw4lib from its own extraction of
autograde.tar, and never the hidden material: the zygote reads no grader file), and no torch
computation has run in it (no OpenMP team, which a fork would copy without its threads: the judge
forks its model child from itself in turn, ``autograder.judging.isolation.parked_child``).

Each judge forked (:func:`become_judge`) is what ``make`` would start: a session of its own (the
regrade's Ctrl-C stops no grading; a timeout kills it whole with ``os.killpg``), the folder, the
arguments and exactly the environment it is given, SIGINT raising KeyboardInterrupt, standard
input /dev/null, standard output the
file it is given, standard error /dev/null (make's is discarded too), then ``python -m
autograder.judging.grade``'s run (runpy), ended by ``os._exit`` whatever happens. What differs
from a fresh interpreter: the modules PRELOADED already imported, and the hash seed of strings,
the zygote's. No random state is shared between judges: the judge draws from ``secrets`` and from
generators it seeds itself; Python's global generator reseeds itself in a forked child; numpy's
global one is not imported here (each judge seeds it at its own import); torch's default
generator starts from the same fixed seed in every interpreter, and no draw moved the zygote's.

The dialogue, one JSON object a line: the zygote says ``{"ready": pid}`` once imported; for each
request ``{"cwd", "module", "arguments", "env", "output"}`` (optional, both false for a judge:
``"stderr"``, standard error to the output file too; ``"atexit"``, run the exit handlers) it answers ``{"pid": pid}`` (or
``{"error": why}`` when it cannot fork), then ``{"exit": code}`` once the judge has ended (its exit
code, or minus the signal that killed it). The judge stays a zombie until the next request (or the
zygote's end), so that its pid, which the regrade may still signal, is not reused meanwhile.
"""
from __future__ import annotations

import gc
import json
import os
import select
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import NoReturn

# What the judge and its model child import from outside the standard library, at once, in this
# order (numpy comes with torch; tqdm with the hidden tests; the rest with the reference hw4lib).
# Not sympy: no judge imports it (tests/grader/test_judge_imports.py).
PRELOADED = ("numpy", "torch", "tqdm", "yaml", "tokenizers", "pydantic")
READY_TIMEOUT_S = 300.0  # import torch takes about 3 s on an idle core; a loaded machine is slower
ANSWER_TIMEOUT_S = 60.0  # a fork answers in milliseconds
CLOSE_GRACE_S = 2.0  # a zygote told to end reaps its last judge and exits in milliseconds
SCRIPT = Path(__file__).resolve()


class ZygoteUnavailable(Exception):
    """The zygote cannot fork a judge (it failed to start, died or refused); the message says
    why."""


class ForkedJudge:
    """A judge the zygote forked: the ``subprocess.Popen`` surface the grading's callers use
    (``pid``, ``returncode``, ``wait``). ``lost``: why its exit status is unknown (the zygote died
    while it ran; ``returncode`` is then -SIGKILL), else ''."""

    def __init__(self, zygote: JudgeZygote, pid: int) -> None:
        self.pid, self.returncode, self.lost = pid, None, ""
        self._zygote = zygote
        self._reading = threading.Lock()  # the grading's thread and a stopping one may both wait

    def wait(self, timeout: float | None = None) -> int:
        """Its exit code (minus the signal that killed it); ``subprocess.TimeoutExpired`` after
        ``timeout`` seconds."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.returncode is None:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            if not self._reading.acquire(timeout=-1 if left is None else left):
                raise subprocess.TimeoutExpired(f"judge {self.pid}", timeout)
            try:
                if self.returncode is None:
                    answer = self._zygote.answer(left)  # TimeoutExpired: the judge still runs
                    if not isinstance(answer.get("exit"), int):
                        raise ZygoteUnavailable(f"the zygote answered {answer!r}, not an exit code")
                    self.returncode = answer["exit"]
            except ZygoteUnavailable as lost:
                self.lost, self.returncode = str(lost), -signal.SIGKILL
            finally:
                self._reading.release()
        return self.returncode


class JudgeZygote:
    """One zygote process, started at construction with ``python`` and the environment ``env``
    (what every judge it forks runs under); one grading at a time."""

    def __init__(self, python: str, env: dict[str, str],
                 preload: tuple[str, ...] = PRELOADED) -> None:
        self._errors = tempfile.TemporaryFile()  # its own failures: the reason given when it dies
        self._process = subprocess.Popen([python, str(SCRIPT), *preload], stdin=subprocess.PIPE,
                                         stdout=subprocess.PIPE, stderr=self._errors, env=env,
                                         start_new_session=True)
        self._buffer = b""
        self._ready = False

    def alive(self) -> bool:
        return self._process.poll() is None

    def fork_judge(self, cwd: Path, module: str, arguments: list[str], env: dict[str, str],
                   output: Path, stderr: bool = False, atexit: bool = False) -> ForkedJudge:
        """A judge running ``python -m module *arguments`` in ``cwd`` under ``env``, its standard
        output (and with ``stderr``, its standard error) appended to ``output`` (an existing
        file), its exit handlers run with ``atexit``; ZygoteUnavailable when none started."""
        if not self.alive():
            raise ZygoteUnavailable(f"the zygote has ended{self._last_words()}")
        if not self._ready:
            answer = self._prompt_answer(READY_TIMEOUT_S)
            if "ready" not in answer:
                raise ZygoteUnavailable(f"the zygote's first answer was {answer!r}")
            self._ready = True
        request = {"cwd": str(cwd), "module": module, "arguments": arguments, "env": env,
                   "output": str(output), "stderr": stderr, "atexit": atexit}
        try:
            self._process.stdin.write(json.dumps(request).encode() + b"\n")
            self._process.stdin.flush()
        except OSError as error:
            raise ZygoteUnavailable(
                f"the zygote took no request ({error}){self._last_words()}") from None
        answer = self._prompt_answer(ANSWER_TIMEOUT_S)
        if not isinstance(answer.get("pid"), int):
            raise ZygoteUnavailable(f"the zygote forked no judge: {answer.get('error', answer)}")
        return ForkedJudge(self, answer["pid"])

    def _prompt_answer(self, timeout: float) -> dict:
        """The zygote's next answer, due within ``timeout`` seconds; ZygoteUnavailable when it
        ends first, or is silent that long (then it is ended: its dialogue cannot be trusted)."""
        try:
            return self.answer(timeout)
        except subprocess.TimeoutExpired:
            self.close()
            raise ZygoteUnavailable(f"the zygote answered nothing in {timeout:.0f} s") from None

    def answer(self, timeout: float | None) -> dict:
        """The zygote's next answer; ZygoteUnavailable when it ends first (or answers nonsense),
        ``subprocess.TimeoutExpired`` when it answers nothing in ``timeout`` seconds."""
        deadline = None if timeout is None else time.monotonic() + timeout
        out = self._process.stdout.fileno()
        while b"\n" not in self._buffer:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            if not select.select([out], [], [], left)[0]:
                raise subprocess.TimeoutExpired("the judge zygote", timeout)
            chunk = os.read(out, 65536)
            if not chunk:
                why = f"the zygote ended{self._last_words()}"
                self.close()
                raise ZygoteUnavailable(why)
            self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\n", 1)
        try:
            answer = json.loads(line)
        except ValueError:
            answer = None
        if not isinstance(answer, dict):
            self.close()
            raise ZygoteUnavailable(f"the zygote answered {line[:200]!r}")
        return answer

    def _last_words(self) -> str:
        """The end of what the zygote wrote to its standard error, as ': ...', or ''."""
        if self._errors.closed:
            return ""
        self._errors.seek(0)
        words = self._errors.read().decode(errors="replace").strip()[-500:]
        return f": {words}" if words else ""

    def close(self) -> None:
        """End the zygote: its standard input closed, it reaps its last judge (whose CPU time
        then counts in this process's children's) and exits; killed after CLOSE_GRACE_S (while
        a judge still runs: the judges run in sessions of their own, and are not killed here)."""
        for stream in (self._process.stdin, self._process.stdout):
            try:
                stream.close()
            except OSError:  # a request the dead zygote never read
                pass
        try:
            self._process.wait(CLOSE_GRACE_S)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()
        self._errors.close()


class Zygotes:
    """One :class:`JudgeZygote` per thread that asks (the regrade's pool threads), each started
    on the thread's first grading, and again after one died; :meth:`close` kills them all."""

    def __init__(self, python: str, env: dict[str, str]) -> None:
        self.python, self.env = python, env
        self._zygotes: dict[int, JudgeZygote] = {}
        self._lock = threading.Lock()

    def for_this_thread(self) -> JudgeZygote:
        with self._lock:
            zygote = self._zygotes.get(threading.get_ident())
            if zygote is None or not zygote.alive():
                if zygote is not None:
                    zygote.close()
                zygote = self._zygotes[threading.get_ident()] = JudgeZygote(self.python,
                                                                            self.env)
            return zygote

    def close(self) -> None:
        with self._lock:
            for zygote in self._zygotes.values():
                zygote.close()
            self._zygotes.clear()

    def __enter__(self) -> Zygotes:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def serve(preload: tuple[str, ...]) -> None:
    """The zygote's life: import ``preload``, say so, then fork a judge for each request on
    standard input and report it, until standard input ends."""
    if not sys.flags.safe_path:
        del sys.path[0]  # this file's folder: nothing of the grader is importable from here
    for name in preload:
        __import__(name)
    # The imported objects out of the collector's reach: a judge's collections would otherwise
    # write into every one of them, copying the zygote's memory page by page into each judge.
    gc.freeze()
    requests, answers = sys.stdin.buffer, sys.stdout.fileno()

    def say(message: dict) -> None:
        os.write(answers, json.dumps(message).encode() + b"\n")

    say({"ready": os.getpid()})
    previous = None
    for line in requests:
        if previous is not None:
            os.waitpid(previous, 0)  # the last judge's zombie, reported already
            previous = None
        request = json.loads(line)
        try:
            pid = os.fork()
        except OSError as error:
            say({"error": f"fork failed: {error}"})
            continue
        if pid == 0:
            become_judge(request)
        say({"pid": pid})
        ended = os.waitid(os.P_PID, pid, os.WEXITED | os.WNOWAIT)
        say({"exit": ended.si_status if ended.si_code == os.CLD_EXITED else -ended.si_status})
        previous = pid
    if previous is not None:
        os.waitpid(previous, 0)


def become_judge(request: dict) -> NoReturn:
    """In the forked child: become the judge ``request`` describes (see the module docstring) and
    end with its exit code, as the interpreter would; a judge that raises still ends (1)."""
    try:
        null = os.open(os.devnull, os.O_RDWR)
        output = os.open(request["output"], os.O_WRONLY | os.O_APPEND)
        errors = output if request.get("stderr") else null
        for target, source in ((0, null), (1, output), (2, errors)):
            os.dup2(source, target)  # the zygote's dialogue pipes and error file are 0, 1 and 2
        os.close(null)
        os.close(output)
    except BaseException:  # noqa: BLE001 - no output to say it in: the exit code says it
        os._exit(1)
    code = 1
    try:
        # A Ctrl-C (grading_run.stop's SIGINT) ends the judge as it ends `python -m`, even when
        # the regrade was started with SIGINT ignored (a shell's background job), which Python
        # would otherwise keep ignored in the zygote and so in every judge it forks.
        signal.signal(signal.SIGINT, signal.default_int_handler)
        os.setsid()
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        if not sys.flags.safe_path:
            sys.path.insert(0, os.getcwd())  # what `python -m` puts first
        sys.argv = [request["module"], *request["arguments"]]  # runpy sets argv[0] to the file
        import runpy

        runpy.run_module(request["module"], run_name="__main__", alter_sys=True)
        code = 0
    except SystemExit as ended:
        code = ended.code if isinstance(ended.code, int) else 0 if ended.code is None else 1
        if not isinstance(ended.code, int | None):
            print(ended.code, file=sys.stderr)  # as the interpreter would
    except BaseException:  # noqa: BLE001 - as the interpreter would: its traceback, then exit 1
        import traceback

        traceback.print_exc()  # to standard error, which make's caller discards too
    finally:
        if request.get("atexit"):
            import atexit

            try:
                atexit._run_exitfuncs()  # prints a failing handler's traceback, as Python does
            except BaseException:  # noqa: BLE001 - it ends whatever a handler did
                pass
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except BaseException:  # noqa: BLE001 - it ends whatever happened to its output
                pass
        os._exit(code)


if __name__ == "__main__":
    serve(tuple(sys.argv[1:]))
