"""The worker: replays the judge's programs on the student's ``mytorch`` inside the sandbox.

numpy and the standard library only; this is the one grader module that runs next to student code,
so nothing it sends back is trusted (the judge validates every value against its own truth). The
sandbox (``autograder/judging/sandbox.py``) starts it as::

    python -I -S -c "<bootstrap>" --input DIR --result-fd N --request-fd M --output-bytes H T

with ``sys.path`` set to the runtime folder (this package's ``worker``/``wire``), a folder holding
only numpy, and the student's folder holding only ``mytorch/``. It confines itself and imports
numpy once, then serves every category (:func:`serve`): each in a process forked for it, which
imports mytorch and answers the judge in lockstep: for each line read (a test's name, whose
program the judge has just written to ``DIR/<name>``) it writes that test's record
(``wire.encode_record``), which the worker relays to file descriptor N in frames (``wire.frame``)
with the process's end; the judge writes the next program only once that record has come, so no
test can start early or hand its time to another. A failure
is sent as a few typed fields (which step, the exception's class, the line of mytorch it came
from), never as text: the judge words the feedback itself, so nothing the student code prints or
puts in a message reaches it.

Importing an autograd library (torch, jax, tensorflow, ...) fails with a message saying that
mytorch must be written in numpy; under bubblewrap those libraries are not even in the sandbox.
Before mytorch is imported, :func:`refuse_code_made_at_run_time` installs an audit hook (which no
code can remove): only the files of mytorch, the standard library and numpy may be compiled, so a
mytorch that hides its code in a blob (``exec(zlib.decompress(...))``, ``marshal``, an import from
a zip or from memory, ``ast`` with its flags changed, a function built from a code object) fails
with a message saying so. Its docstring is the closed list: every way CPython 3.11 makes or runs
code, and what the worker decides for each.
"""
from __future__ import annotations

import argparse
import atexit
import importlib.abc
import importlib.util
import io
import os
import re
import select
import signal
import sys
import traceback
from dataclasses import dataclass, field
from functools import reduce
from pathlib import Path
from typing import NoReturn

import numpy as np

from autograder.sandboxed import landlock, seccomp, wire

# Shared libraries and devices the interpreter and numpy read once student code runs.
SYSTEM_READABLE = ("/usr", "/lib", "/lib64", "/lib32", "/etc/ld.so.cache", "/dev/null",
                   "/dev/urandom", "/dev/zero")

FORBIDDEN_LIBRARIES = ("torch", "jax", "jaxlib", "tensorflow", "keras", "autograd", "mxnet",
                       "paddle", "cupy", "chainer", "theano", "flax", "mlx", "tinygrad", "numba")
NUMPY_ONLY = "mytorch must be written with numpy only"
MAX_CHAINED_ERRORS = 20  # how far a failure's causes are searched for a forbidden import
MADE_AT_RUN_TIME = ("mytorch must be plain source files: code made at run time (exec, eval or "
                    "compile of anything but a mytorch file, marshal, a code object or function "
                    "built by hand, a program started) is refused")
# The one text the standard library compiles at run time on a path honest code takes:
# collections.namedtuple's __new__, whose every field is an identifier (checked here, on the text
# itself: the generator's module globals, which build that text, are the student's to change).
NAMEDTUPLE_NEW = rb"lambda _cls, ([^:]*): _tuple_new\(_cls, \(\1\)\)"
# Audit events refused whatever their arguments (see refuse_code_made_at_run_time's table).
REFUSED_EVENTS = frozenset({"code.__new__", "function.__new__", "marshal.loads", "marshal.load",
                            "gc.get_objects", "gc.get_referrers", "gc.get_referents",
                            "subprocess.Popen", "os.exec", "os.posix_spawn", "os.spawn",
                            "os.system"})


class ForbiddenImport(ImportError):
    """mytorch imported an autograd or GPU array library (``module``: its FORBIDDEN_LIBRARIES
    name)."""

    def __init__(self, module: str) -> None:
        super().__init__(f"{NUMPY_ONLY}: it imports {module}")
        self.module = module


class NumpyOnly(importlib.abc.MetaPathFinder):
    """Refuses to import the autograd and GPU array libraries, naming the rule broken."""

    def find_spec(self, fullname, path=None, target=None):
        if fullname.partition(".")[0] in FORBIDDEN_LIBRARIES:
            raise ForbiddenImport(fullname.partition(".")[0])
        return None


class CodeAtRunTime(PermissionError):
    """mytorch ran code that is not one of its files (``file``, ``line``: where in mytorch). An
    OSError ("operation not permitted"), as the kernel's refusals of the sandbox are."""

    def __init__(self, event: str, file: str, line: int) -> None:
        super().__init__(f"{MADE_AT_RUN_TIME} ({event})")
        self.file, self.line = file, line


class StepError(Exception):
    """A step of a program failed; ``fields`` say how (``wire.encode_record``'s error)."""

    def __init__(self, **fields) -> None:
        super().__init__(fields.get("kind", "failed"))
        self.fields = fields


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
    (``autograder.sandboxed.seccomp``; with ``children=False`` it also refuses new processes). Returns
    {"landlock": ABI applied, "seccomp": 1 if installed}, 0 for a layer this kernel lacks (for
    seccomp also on an architecture it has no table for: ``seccomp.unsupported`` says so)."""
    numpy_dir = Path(np.__file__).resolve().parent
    abi = landlock.restrict(
        [*SYSTEM_READABLE, os.path.realpath(sys.base_prefix), os.path.realpath(sys.executable),
         str(numpy_dir), str(numpy_dir.parent / "numpy.libs"), *readable],
        writable)
    return {"landlock": abi, "seccomp": int(seccomp.deny_escapes(children))}


def refuse_code_made_at_run_time() -> None:
    """Install the audit hook that lets only files run (which no code can remove). Imports read
    sources, never cached bytecode (``sys.pycache_prefix`` points nowhere), so they pass the same
    check. The hook reaches every name it uses through this closure, bound now, and calls no
    method a student's object could override (exact ``str``/``bytes`` only), so no later
    monkeypatching of a module, of builtins or of a class changes what it does.

    Every way CPython 3.11 makes or runs code, by the audit event it raises, and the decision:

    ====================================  =====================================================
    ``compile`` (source, filename):       allowed only for the very bytes of the file named, under
    ``compile()``, ``exec``/``eval`` of   mytorch, the standard library or numpy (what an import
    text, import's ``source_to_code``,    compiles), read by Python as UTF-8 itself (no coding
    custom loaders and ``get_data``,      line, or 'utf-8': another name goes through the codec
    ``runpy``, ``zipimport``, ``ast``     registry, which ``codecs.register`` changes), or the
    whatever its flags                    text of :data:`NAMEDTUPLE_NEW` with identifier fields.
                                          Refused: any other text (a blob,
                                          ``compile(blob, __file__)``), a syntax tree (a tree is
                                          any code), and every other caller's text whoever calls:
                                          ``ast.parse`` with its ``PyCF_*`` module globals
                                          changed, ``dataclasses`` (its field names enter the
                                          generated text unchecked), a namedtuple whose
                                          ``collections._sys.intern`` was replaced
    ``exec`` (code object): ``exec``,     allowed: every code object was vetted where it was made
    ``eval`` of code, module execution    (this table); the worker reads its own inputs without
                                          ``ast`` (``wire.load_program``)
    ``code.__new__``: ``types.CodeType``, refused
    ``code.replace``
    ``function.__new__``:                 refused: nothing honest builds a function from a code
    ``types.FunctionType(code, globals)`` object
    ``object.__setattr__`` of             refused (``__defaults__`` and the rest stay allowed:
    ``__code__``                          namedtuple sets them, and they are not code)
    ``marshal.loads``, ``marshal.load``   refused (``dumps`` makes no code). Cached bytecode,
                                          ``SourcelessFileLoader``, zipimport's ``.pyc`` land here
    ``import`` with a file (an extension  allowed only under the standard library or numpy: a
    module; ``ExtensionFileLoader``)      native library elsewhere (the private ``/tmp``) is code
                                          nobody can read
    ``ctypes.dlopen``                     allowed for the program itself, a library the system's
                                          loader finds by name, or a path under the system's
                                          folders; refused elsewhere (a library the worker wrote)
    ``ctypes.dlsym``, ``ctypes.dlsym/     refused for the interpreter's own ``Py*``/``_Py*`` C
    handle``                              API (``PyRun_SimpleString``, ``PyCode_New``...)
    ``gc.get_objects/get_referrers/       refused: the hook's own state and every code object
    get_referents``                       would be in reach
    ``subprocess.Popen``, ``os.exec``,    refused: a new program (a second Python given a blob)
    ``os.posix_spawn``, ``os.spawn``,     runs without this hook; ``os.fork`` stays allowed (the
    ``os.system``                         child keeps the hook)
    pickle, copyreg, import hooks         no event of their own: unpickling and every
    (``sys.meta_path``, ``path_hooks``),  ``find_spec``/``exec_module`` make code only through the
    ``importlib.util`` from a string,     events above (a ``__reduce__`` to ``eval``, ``marshal``
    ``sys._getframe``/``f_globals``       or ``CodeType``, a loader's ``exec(text)``), and are
                                          decided there
    ====================================  =====================================================

    What no audit hook can close: ctypes' pointers (``ctypes.cast(id(x), ...)``, indexing a
    pointer) read and write the interpreter's memory without raising any event, and numpy and the
    worker's own layers have loaded ctypes before mytorch, so its classes stay in reach
    (``object.__subclasses__()``); ``_posixsubprocess.fork_exec`` starts a program without an
    event. Neither changes a grade (the judge checks every value against its own truth); the class
    tools' static scan (``autograder.classroom.similarity.runtime_code``) names every mytorch that reaches
    for them, so the staff see the attempt.
    """
    student = importlib.util.find_spec("mytorch").submodule_search_locations[0]
    stdlib = os.path.dirname(traceback.__file__)
    numpy_dir = os.path.dirname(np.__file__)
    trees = {stdlib, numpy_dir, os.path.realpath(numpy_dir), os.path.realpath(numpy_dir) + ".libs"}
    roots = tuple(f"{root}/" for root in {student} | trees)
    native = tuple(f"{root}/" for root in trees)
    system = tuple(f"{root}/" for root in SYSTEM_READABLE)
    sys.pycache_prefix = f"{student}/.no-bytecode"
    sys.dont_write_bytecode = True
    getframe, open_file, kind_of, refusal = sys._getframe, io.open, type, CodeAtRunTime
    text, data, file_error, refused = str, bytes, OSError, REFUSED_EVENTS
    namedtuple_new, is_identifier = re.compile(NAMEDTUPLE_NEW, re.DOTALL).fullmatch, str.isidentifier
    decode, split, strip_comma, starts = bytes.decode, str.split, str.removesuffix, str.startswith
    declared, native_utf8 = wire.declared_encoding_reader(), wire.is_native_utf8

    def is_file_source(source, filename) -> bool:
        if kind_of(source) is not data or kind_of(filename) is not text:
            return False
        if not starts(filename, roots) or "/.." in filename:
            return False
        try:
            with open_file(filename, "rb") as file:
                if file.read() != source:
                    return False
        except file_error:
            return False
        encoding = declared(source)  # the very bytes, but read through a codec? then refused
        return encoding is None or native_utf8(encoding)

    def is_namedtuple_new(source) -> bool:
        match = namedtuple_new(source) if kind_of(source) is data else None
        if match is None:
            return False
        try:
            fields = split(strip_comma(decode(match.group(1)), ","), ", ")
        except UnicodeDecodeError:
            return False
        return all(is_identifier(field) for field in fields)

    def is_allowed(event: str, args: tuple) -> bool:
        if event == "compile":
            return is_file_source(*args[:2]) or is_namedtuple_new(args[0])
        if event == "import":
            return args[1] is None or (kind_of(args[1]) is text and starts(args[1], native)
                                       and "/.." not in args[1])
        if event == "ctypes.dlopen":
            name = args[0]
            return name is None or (kind_of(name) is text and "/.." not in name
                                    and ("/" not in name or starts(name, system)))
        if event in ("ctypes.dlsym", "ctypes.dlsym/handle"):
            return not (kind_of(args[1]) is text and starts(args[1].lstrip("_"), "Py"))
        if event == "object.__setattr__":
            return not (kind_of(args[1]) is text and args[1] == "__code__")
        return event not in refused

    def hook(event: str, args: tuple) -> None:
        if is_allowed(event, args):
            return
        frame = getframe(1)  # the innermost mytorch line on the stack names the culprit
        while frame is not None and not starts(frame.f_code.co_filename, f"{student}/"):
            frame = frame.f_back
        if frame is None:
            raise refusal(event, "", 0)
        raise refusal(event, frame.f_code.co_filename[len(student) + 1:], frame.f_lineno or 0)

    sys.addaudithook(hook)


def run_test(nn, folder: Path, test: str) -> bytes:
    """Replay one program; its record (with the failure's fields when a step failed)."""
    arrays, steps, returned = wire.load_program(folder)
    env: dict[str, object] = dict(arrays)
    values: dict[str, np.ndarray | None] = {}
    refused: list[str] = []
    for index, step in enumerate(steps):
        try:
            run_step(nn, step, env, values, refused)
        except StepError as error:
            return wire.encode_record(test, {**error.fields, "step": index}, values, refused)
    missing = [name for name in returned if name not in values and name not in refused]
    return wire.encode_record(test, {"kind": "lost"} if missing else None, values, refused)


def run_step(nn, step: dict, env: dict, values: dict, refused: list) -> None:
    """Run one step, storing what it produces in ``env`` and what is sent back in ``values``.

    A result that is not a numeric array (``init_weights`` returning ``self``, say) is kept in
    ``env`` and only listed in ``refused``: it fails a test only if the test reads it.
    """
    op, out = step["op"], step["out"]
    try:
        if op == "new":
            env[out[0]] = getattr(nn, step["cls"])(*resolve(step["args"], env),
                                                   **resolve_kwargs(step["kwargs"], env))
            return
        if op == "call":
            result = call(env, step)
            results = [result] if len(out) == 1 else unpack(result, len(out))
        elif op == "get":
            results = [reduce(getattr, step["path"].split("."), env[step["obj"]])]
        elif op == "echo":
            results = [env[step["src"]]]
        else:
            raise StepError(kind="unknown step")
    except StepError:
        raise
    except BaseException as error:  # noqa: BLE001 - SystemExit and friends included
        raise StepError(**describe(error)) from None
    for name, result in zip(out, results):
        env[name] = result
        try:
            values[name] = env[name] = as_plain_array(result)
        except StepError:
            refused.append(name)


def call(env: dict, step: dict):
    method = getattr(env[step["obj"]], step["method"])
    return method(*resolve(step["args"], env), **resolve_kwargs(step["kwargs"], env))


def unpack(result, count: int) -> list:
    if not isinstance(result, (tuple, list)) or len(result) != count:
        raise StepError(kind="not a tuple", count=count)
    return list(result)


def as_plain_array(value):
    """A copy of ``value`` as a numeric or bool numpy array; None stays None."""
    if value is None:
        return None
    try:
        array = np.array(value, copy=True)
    except Exception:  # noqa: BLE001 - arbitrary objects
        raise StepError(kind="not an array") from None
    if array.dtype.kind not in wire.NUMERIC_KINDS:
        raise StepError(kind="not an array")
    return array


def resolve(args: list[dict], env: dict) -> list:
    return [env[a["ref"]] if "ref" in a else a["lit"] for a in args]


def resolve_kwargs(kwargs: dict, env: dict) -> dict:
    return dict(zip(kwargs, resolve(list(kwargs.values()), env)))


def describe(error: BaseException) -> dict:
    """The fields of a failure of student code: the exception's class and the innermost line of
    mytorch it passed through, or the forbidden library it tried to import."""
    cause = error
    for _ in range(MAX_CHAINED_ERRORS):  # student code can chain exceptions in a cycle
        if cause is None:
            break
        if isinstance(cause, ForbiddenImport):
            return {"kind": "numpy only", "module": cause.module}
        if isinstance(cause, CodeAtRunTime):
            return {"kind": "code at run time", "file": cause.file, "line": cause.line}
        cause = cause.__cause__ or cause.__context__
    fields = {"kind": "raised", "type": type(error).__name__}
    frames = [f for f in traceback.extract_tb(error.__traceback__) if "mytorch" in f.filename]
    # The given checks (mytorch/nn/_checks.py) raise on the student's behalf: name their caller.
    frames = [f for f in frames if not is_given_helper(f.filename)] or frames
    if frames:
        fields.update(file=mytorch_path(frames[-1].filename), line=frames[-1].lineno or 0,
                      function=frames[-1].name)
    # A file that does not parse is named by the error itself: the traceback's last mytorch frame
    # is the import statement of the file that imported it.
    if (isinstance(error, SyntaxError) and isinstance(error.filename, str)
            and "mytorch" in error.filename):
        fields.update(file=mytorch_path(error.filename), line=error.lineno or 0)
        fields.pop("function", None)
    return fields


def is_given_helper(filename: str) -> bool:
    """A private module of the package (``_checks.py``, ``_state_dict.py``): given code."""
    name = os.path.basename(filename)
    return name.startswith("_") and not name.startswith("__")


def mytorch_path(filename: str) -> str:
    """``filename`` relative to the handin's ``mytorch/`` folder."""
    return filename.rpartition("mytorch")[2].lstrip("/")


def send(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


if __name__ == "__main__":
    main()
