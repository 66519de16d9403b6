"""The worker: replays the judge's programs on the student's ``mytorch`` inside the sandbox.

numpy and the standard library only; this is the one grader module that runs next to student code,
so nothing it sends back is trusted (the judge validates every value against its own truth). The
sandbox (``autograder/sandbox.py``) starts it as::

    python -I -S -c "<bootstrap>" --input DIR --result-fd N

with ``sys.path`` set to the runtime folder (this package's ``worker``/``wire``), a folder holding
only numpy, and the student's folder holding only ``mytorch/``. For each test folder listed in
``DIR/tests.json`` it writes one record (``wire.encode_record``) to file descriptor N. A failure
is sent as a few typed fields (which step, the exception's class, the line of mytorch it came
from), never as text: the judge words the feedback itself, so nothing the student code prints or
puts in a message reaches it.

Importing an autograd library (torch, jax, tensorflow, ...) fails with a message saying that
mytorch must be written in numpy; under bubblewrap those libraries are not even in the sandbox.
Before mytorch is imported, :func:`refuse_code_made_at_run_time` installs an audit hook (which no
code can remove): only the files of mytorch, the standard library and numpy may be compiled and
run, so a mytorch that hides its code in a blob (``exec(zlib.decompress(...))``, ``marshal``, an
import from a zip or from memory) fails with a message saying so.
"""
from __future__ import annotations

import argparse
import importlib.abc
import importlib.util
import io
import json
import os
import sys
import traceback
from functools import reduce
from pathlib import Path

import numpy as np

from autograder import landlock, seccomp, wire

# Shared libraries and devices the interpreter and numpy read once student code runs.
SYSTEM_READABLE = ("/usr", "/lib", "/lib64", "/lib32", "/etc/ld.so.cache", "/dev/null",
                   "/dev/urandom", "/dev/zero")

FORBIDDEN_LIBRARIES = ("torch", "jax", "jaxlib", "tensorflow", "keras", "autograd", "mxnet",
                       "paddle", "cupy", "chainer", "theano", "flax", "mlx", "tinygrad", "numba")
NUMPY_ONLY = "mytorch must be written with numpy only"
MAX_CHAINED_ERRORS = 20  # how far a failure's causes are searched for a forbidden import
MADE_AT_RUN_TIME = ("mytorch must be plain source files: code made at run time (exec, eval or "
                    "compile of anything but a mytorch file, marshal, a code object built by hand) "
                    "is refused")
# The standard-library modules that may compile text that is not a file: ast (parse only makes a
# tree, which numpy's .npy reader reads a header with; compiling a tree into code is refused), and
# the two that write their classes' methods as source (namedtuple, dataclass).
TRUSTED_COMPILERS = ("ast.py", "collections/__init__.py", "dataclasses.py")
# Audit events that would let code reach the hook's own state (gc) or the interpreter's compiler
# by another door (marshal; a code object built or edited by hand).
REFUSED_EVENTS = frozenset({"marshal.loads", "marshal.load", "code.__new__", "gc.get_objects",
                            "gc.get_referrers", "gc.get_referents"})


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


class CodeAtRunTime(RuntimeError):
    """mytorch ran code that is not one of its files (``file``, ``line``: where in mytorch)."""

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
    parser.add_argument("--probe", action="store_true",
                        help="only say that the sandbox can run this worker and import numpy")
    parser.add_argument("--readable", nargs="*", default=[],
                        help="folders to read besides the interpreter and numpy (Landlock)")
    parser.add_argument("--single-process", action="store_true",
                        help="start no process or thread (no cgroup caps the tree: seccomp)")
    parser.add_argument("--writable", nargs="*", default=[],
                        help="folders to write (Landlock): only a size-capped private tmpfs")
    args = parser.parse_args(argv)
    layers = confine([*args.readable, *([str(args.input)] if args.input else [])],
                     args.writable, children=not args.single_process)
    if args.probe:
        send(args.result_fd, ("ok " + " ".join(f"{k}={v}" for k, v in layers.items())).encode())
        return
    sys.meta_path.insert(0, NumpyOnly())
    tests = json.loads((args.input / "tests.json").read_text())
    refuse_code_made_at_run_time()
    try:
        import mytorch.nn as nn
    except BaseException as error:  # noqa: BLE001 - whatever student code raises is reported
        failure = {**describe(error), "step": -1}
        for test in tests:
            send(args.result_fd, wire.encode_record(test, failure, {}))
        return
    for test in tests:
        send(args.result_fd, run_test(nn, args.input / test, test))


def confine(readable: list[str], writable: list[str], children: bool = True) -> dict[str, int]:
    """Apply the worker's own layers before any student code runs: Landlock
    (``autograder.landlock``: read only the system's libraries, the interpreter, numpy and
    ``readable``; write only ``writable``, which the judge gives only where it is a size-capped
    private tmpfs, so no worker can fill a disk another grading shares), then the seccomp filter
    (``autograder.seccomp``; with ``children=False`` it also refuses new processes). Returns
    {"landlock": ABI applied, "seccomp": 1 if installed}, 0 for a layer this kernel lacks (for
    seccomp also on an architecture it has no table for: ``seccomp.unsupported`` says so)."""
    numpy_dir = Path(np.__file__).resolve().parent
    abi = landlock.restrict(
        [*SYSTEM_READABLE, os.path.realpath(sys.base_prefix), os.path.realpath(sys.executable),
         str(numpy_dir), str(numpy_dir.parent / "numpy.libs"), *readable],
        writable)
    return {"landlock": abi, "seccomp": int(seccomp.deny_escapes(children))}


def refuse_code_made_at_run_time() -> None:
    """Install the audit hook that lets only files run: a ``compile`` must be of the very bytes of
    a file of mytorch, the standard library or numpy (what an import does), an ``exec`` must run
    code compiled from such a file, and marshal, hand-built code objects, the garbage collector's
    object lists and ctypes' view of the interpreter's own C functions are refused. Imports read
    sources, never cached bytecode (``sys.pycache_prefix`` points nowhere), so they pass the same
    check. The hook reaches every name it uses through this closure, bound now, so no later
    monkeypatching of a module or of builtins changes what it does."""
    student = importlib.util.find_spec("mytorch").submodule_search_locations[0]
    stdlib = os.path.dirname(traceback.__file__)
    numpy_dir = os.path.dirname(np.__file__)
    roots = tuple(f"{root}/" for root in {student, stdlib, numpy_dir, os.path.realpath(numpy_dir)})
    generators = tuple(f"{stdlib}/{name}" for name in TRUSTED_COMPILERS)
    sys.pycache_prefix = f"{student}/.no-bytecode"
    sys.dont_write_bytecode = True
    getframe, open_file, kind_of, refusal = sys._getframe, io.open, type, CodeAtRunTime
    text, data, file_error, refused = str, bytes, OSError, REFUSED_EVENTS

    def is_file_source(source, filename) -> bool:
        if kind_of(source) is not data or kind_of(filename) is not text:
            return False
        if not filename.startswith(roots) or "/.." in filename:
            return False
        try:
            with open_file(filename, "rb") as file:
                return file.read() == source
        except file_error:
            return False

    def hook(event: str, args: tuple) -> None:
        if event == "compile":
            allowed = getframe(1).f_code.co_filename in generators or is_file_source(*args[:2])
        elif event == "exec":
            name = args[0].co_filename
            allowed = (name.startswith(roots) or name.startswith("<frozen ")
                       or getframe(1).f_code.co_filename in generators)
        elif event == "ctypes.dlsym":
            allowed = not (kind_of(args[1]) is text and args[1].lstrip("_").startswith("Py"))
        else:
            allowed = event not in refused
        if allowed:
            return
        frame = getframe(1)  # the innermost mytorch line on the stack names the culprit
        while frame is not None and not frame.f_code.co_filename.startswith(f"{student}/"):
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
