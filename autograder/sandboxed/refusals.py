"""What the worker refuses to run beside mytorch: the autograd libraries and code made at run time.

numpy and the standard library only, like the rest of ``autograder/sandboxed/``; the judge imports
the messages below to word its feedback, so the two sides say the same thing.

Importing an autograd library (torch, jax, tensorflow, ...) fails (:class:`NumpyOnly`) with a
message saying that mytorch must be written in numpy; under bubblewrap those libraries are not even
in the sandbox. Before mytorch is imported, :func:`refuse_code_made_at_run_time` installs an audit
hook (which no code can remove): only the files of mytorch, the standard library and numpy may be
compiled, so a mytorch that hides its code in a blob (``exec(zlib.decompress(...))``, ``marshal``,
an import from a zip or from memory, ``ast`` with its flags changed, a function built from a code
object) fails with a message saying so. Its docstring is the closed list: every way CPython 3.11
makes or runs code, and what the worker decides for each.
"""
from __future__ import annotations

import importlib.abc
import importlib.util
import io
import os
import re
import sys
import traceback

import numpy as np

from autograder.sandboxed import wire

# Shared libraries and devices the interpreter and numpy read once student code runs.
SYSTEM_READABLE = ("/usr", "/lib", "/lib64", "/lib32", "/etc/ld.so.cache", "/dev/null",
                   "/dev/urandom", "/dev/zero")

FORBIDDEN_LIBRARIES = ("torch", "jax", "jaxlib", "tensorflow", "keras", "autograd", "mxnet",
                       "paddle", "cupy", "chainer", "theano", "flax", "mlx", "tinygrad", "numba")
NUMPY_ONLY = "mytorch must be written with numpy only"
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
    event. Neither changes a grade (the judge checks every value against its own truth); the judge's
    static scan (``autograder.judging.intake.runtime_code``) names every mytorch that reaches
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
