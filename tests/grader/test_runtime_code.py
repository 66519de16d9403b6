# hw4p1: instructor-only
"""Tests of what the grader refuses to run: code made at run time (the worker's audit hook) and
sources declaring another encoding than UTF-8.

    .venv/bin/python -m pytest -q tests/grader/test_runtime_code.py
"""
import base64
import zlib
from pathlib import Path

from autograder.sandboxed import refusals, wire
from autograder.judging.isolation import sandbox, worker_folders
from autograder.judging.intake.runtime_code import runtime_code
from tests.grader.autograder_helpers import copy_reference_mytorch, open_folder


UTF7_SOURCE = "# -*- coding: utf-7 -*-\nx = 1\n"
DECLARED_SOURCE = "# coding: hw4p1\n_VALUE = 1\n"  # a codec TRICKS registers itself
TRICKS = r"""
import ast, builtins, codecs, collections, copyreg, ctypes, dataclasses, gc, importlib.machinery
import importlib.util, io, marshal, os, pickle, subprocess, sys, types, zlib
import numpy.polynomial  # a numpy module numpy imports lazily: compiled from its file
import fractions, statistics  # standard-library modules that make namedtuples as they import
_Pair = collections.namedtuple("_Pair", "a b", defaults=[2])  # the one text the stdlib compiles
assert _Pair(1).b == 2 and collections.namedtuple("_One", ["a"])(1).a == 1
_SOURCE = b"_MADE = True"
_BLOB = zlib.compress(_SOURCE)
_MARSHALLED = marshal.dumps(_Pair._make.__code__)  # the audit hook lets dumps through
_OWN = open(__file__, "rb").read()
_TREE = ast.parse(_OWN, __file__)  # a tree of this very file: allowed
def _honest():
    return 0
def _flags_changed():
    ast.PyCF_ONLY_AST = 0  # ast.parse now compiles its text into code
    try:
        return ast.parse(_SOURCE, __file__)
    finally:
        ast.PyCF_ONLY_AST = 1024
def _fresh_ast():  # ast.py's own bytes run in globals of our own, with the flags changed
    scope = {"__name__": "_ast_copy"}
    exec(compile(open(ast.__file__, "rb").read(), ast.__file__, "exec"), scope)
    scope["PyCF_ONLY_AST"] = 0
    return scope["parse"](_SOURCE, __file__)
class _Sys:
    intern = staticmethod(lambda name: "a=__import__('os').getpid()" if name == "a" else name)
def _namedtuple_with(module, name):  # what builds namedtuple's text, replaced
    saved = getattr(module, name)
    setattr(module, name, _Sys if name == "_sys" else _Sys.intern)
    try:
        return collections.namedtuple("_Evil", "a")
    finally:
        setattr(module, name, saved)
def _dataclass(names):
    return dataclasses.dataclass(_type("_D", (), {"__annotations__": {n: int for n in names}}))
class _BlobLoader(importlib.machinery.SourceFileLoader):
    def get_data(self, path):
        return _SOURCE
class _StringFinder:
    @staticmethod
    def find_spec(name, path=None, target=None):
        if name == "_hw4p1_hidden":
            return importlib.util.spec_from_loader(name, _StringFinder)
    @staticmethod
    def create_module(spec):
        return None
    @staticmethod
    def exec_module(module):
        exec(_SOURCE.decode(), module.__dict__)
def _blob_loader():
    loader = _BlobLoader("_hw4p1_blob", __file__)
    module = importlib.util.module_from_spec(importlib.util.spec_from_loader("_hw4p1_blob", loader))
    loader.exec_module(module)
def _meta_path():
    sys.meta_path.insert(0, _StringFinder)
    try:
        import _hw4p1_hidden
    finally:
        sys.meta_path.remove(_StringFinder)
def _copyreg_code():  # code objects pickled as their marshal bytes
    copyreg.pickle(types.CodeType, lambda code: (marshal.loads, (marshal.dumps(code),)))
    return pickle.loads(pickle.dumps(_honest.__code__))
def _codec():  # a file's very bytes, decoded by a codec registered here into other code
    path = os.path.join(os.path.dirname(__file__), "_declared.py")
    if not os.path.exists(path):  # the judge does not grade a file declaring such a codec
        return _NOT_GRADED
    codecs.register(lambda name: codecs.CodecInfo(
        name=name, encode=codecs.utf_8_encode,
        decode=lambda data, errors="strict": ("_MADE = True\n", len(data)))
        if name == "hw4p1" else None)
    return compile(open(path, "rb").read(), path, "exec")
_NOT_GRADED = object()
class _Reduce:
    def __init__(self, call, *args):
        self.call, self.args = call, args
    def __reduce__(self):
        return self.call, self.args
_code = _honest.__code__
_open, _type = io.open, builtins.type
io.open = lambda *args, **kwargs: _open(__file__, "rb")  # the hook must not call these
builtins.type = lambda *args: bytes
_PATCHED = {
    "exec of a blob": lambda: exec(zlib.decompress(_BLOB)),
    "eval of text": lambda: eval("1 + 1"),
    "compile under this file's name": lambda: compile(zlib.decompress(_BLOB), __file__, "exec"),
    "marshal": lambda: marshal.loads(_MARSHALLED),
}
_GOT_THROUGH = []
def _try(tricks):
    for _name, _trick in tricks.items():
        try:
            if _trick() is _NOT_GRADED:
                continue
        except Exception as _error:
            if _type(_error).__name__ == "CodeAtRunTime":
                continue
        _GOT_THROUGH.append(_name)
_try(_PATCHED)
io.open, builtins.type = _open, _type
_try({
    "compile of a syntax tree": lambda: compile(_TREE, __file__, "exec"),
    "a file's bytes through a codec of our own": _codec,
    "ast.parse with PyCF_ONLY_AST set to 0": _flags_changed,
    "a fresh copy of ast.py with its flags changed": _fresh_ast,
    "namedtuple with collections._sys replaced": lambda: _namedtuple_with(collections, "_sys"),
    "namedtuple with sys.intern replaced": lambda: _namedtuple_with(sys, "intern"),
    "a dataclass": lambda: _dataclass(["a"]),
    "a dataclass whose field name is code": lambda: _dataclass(["a=__import__('os').getpid()"]),
    "code built by hand": lambda: types.CodeType(*(getattr(_code, f) for f in (
        "co_argcount", "co_posonlyargcount", "co_kwonlyargcount", "co_nlocals", "co_stacksize",
        "co_flags", "co_code", "co_consts", "co_names", "co_varnames", "co_filename",
        "co_name", "co_qualname", "co_firstlineno", "co_linetable", "co_exceptiontable"))),
    "code edited by hand": lambda: _code.replace(co_consts=(1,)),
    "a function built from a code object": lambda: types.FunctionType(_code, {})(),
    "__code__ assigned": lambda: setattr(_honest, "__code__", (lambda: 1).__code__),
    "marshal.load": lambda: marshal.load(io.BytesIO(_MARSHALLED)),
    "pickle calling eval": lambda: pickle.loads(pickle.dumps(_Reduce(eval, "1 + 1"))),
    "pickle calling marshal.loads": lambda: pickle.loads(pickle.dumps(
        _Reduce(marshal.loads, _MARSHALLED))),
    "copyreg rebuilding a code object": _copyreg_code,
    "a loader whose get_data is a blob": _blob_loader,
    "a meta_path finder executing text": _meta_path,
    "a module from a string": lambda: exec(_SOURCE.decode(), importlib.util.module_from_spec(
        importlib.util.spec_from_loader("_hw4p1_str", loader=None)).__dict__),
    "an extension module outside the standard library": lambda: importlib.machinery
        .ExtensionFileLoader("_hw4p1_native", "/tmp/_hw4p1_native.so").create_module(
            importlib.util.spec_from_file_location("_hw4p1_native", "/tmp/_hw4p1_native.so")),
    "a native library outside the system's": lambda: ctypes.CDLL("/tmp/_hw4p1_native.so"),
    "the interpreter's own C functions": lambda: ctypes.pythonapi.PyRun_SimpleString,
    "the hook's state through gc": lambda: gc.get_objects(),
    "gc.get_referrers": lambda: gc.get_referrers(_code),
    "a second Python given a blob": lambda: subprocess.run([sys.executable, "-c", "1"]),
    "os.system": lambda: os.system("true"),
    "os.posix_spawn": lambda: os.posix_spawn("/bin/true", ["true"], {}),
    "os.execv": lambda: os.execv("/bin/true", ["true"]),
})
assert _honest() == 0 and types.FunctionType is not None
if _GOT_THROUGH:
    raise SystemExit(f"got through: {_GOT_THROUGH}")
"""


def blob_door(blob: str) -> str:
    return f"import base64, zlib\nexec(compile(zlib.decompress(base64.b64decode({blob!r})), __file__, 'exec'))\n"


def ast_flags_door(blob: str) -> str:
    """The file's code compiled by ast.parse with PyCF_ONLY_AST set to 0 and run as a function
    (no exec event), under this file's name."""
    return (f"import ast, base64, types, zlib\nast.PyCF_ONLY_AST = 0\n"
            f"_code = ast.parse(zlib.decompress(base64.b64decode({blob!r})), __file__)\n"
            f"ast.PyCF_ONLY_AST = 1024\ntypes.FunctionType(_code, globals())()\n")


def loader_door(blob: str) -> str:
    """The file's module run again by a SourceFileLoader whose get_data is the blob."""
    return (f"import base64, importlib.machinery, sys, zlib\n"
            f"class _Loader(importlib.machinery.SourceFileLoader):\n"
            f"    def get_data(self, path):\n"
            f"        return zlib.decompress(base64.b64decode({blob!r}))\n"
            f"_Loader(__name__, __file__).exec_module(sys.modules[__name__])\n")


def pickle_door(blob: str) -> str:
    """The file's code as a pickle whose __reduce__ calls marshal.loads, exec'd in its module."""
    return (f"import base64, marshal, pickle, zlib\n"
            f"class _Code:\n"
            f"    def __reduce__(self):\n"
            f"        return marshal.loads, (marshal.dumps(compile(zlib.decompress("
            f"base64.b64decode({blob!r})), __file__, 'exec')),)\n"
            f"exec(pickle.loads(pickle.dumps(_Code())), globals())\n")


# Ways to run a mytorch whose files hold their code hidden: each refused, so the mytorch scores 0;
# one that got through would score full marks.
DOORS = {"blob": blob_door, "ast flags": ast_flags_door, "loader": loader_door,
         "pickle": pickle_door}


def door_mytorch(folder: Path, door=blob_door) -> Path:
    """The reference mytorch with every file replaced by ``door`` of a zlib blob of itself: the
    same code, unreadable to anyone reading the handin."""
    package = copy_reference_mytorch(folder)
    for path in package.rglob("*.py"):
        path.write_text(door(base64.b64encode(zlib.compress(path.read_bytes())).decode()))
    return package


def test_the_worker_runs_only_mytorch_s_files_and_honest_code_still_passes():
    """The worker's audit hook in the mode the machine gives: honest code using what the standard
    library and numpy generate or import lazily keeps its points while every trick to run code
    that is not a file is refused (the mytorch stops itself if one works); a mytorch whose files
    hide their code behind each door of DOORS gets 0 and the message names the line."""
    from autograder.judging.scoring import judge

    folder = open_folder("hw4p1-audit-")
    tricks = copy_reference_mytorch(folder / "tricks")
    (tricks / "__init__.py").write_text(TRICKS + (tricks / "__init__.py").read_text())
    (tricks / "_declared.py").write_text(DECLARED_SOURCE)
    packages = [("tricks", tricks, 5.0)] + [
        (door, door_mytorch(folder / door.replace(" ", "-"), DOORS[door]), 0.0) for door in DOORS]
    for name, package, points in packages:
        layout = worker_folders.worker_layout(folder / f"layout-{name.replace(' ', '-')}", package)
        chosen, notes = sandbox.choose(layout, sandbox.python_executable(), allow_unisolated=True)
        run = judge.grade_category("Linear", chosen, timeout=120)
        messages = [result.message for result in run.results]
        assert sum(result.points for result in run.results) == points, (
            name, chosen.mode.name, messages, run.output[-3000:])
        assert points or all(f"{refusals.MADE_AT_RUN_TIME} (at mytorch/__init__.py:" in message
                             for message in messages), (name, messages)


def standard_library_codec(source: bytes) -> str | None:
    """The codec Python's own detection reads ``source`` with (``tokenize.detect_encoding``, a
    BOM aside), by its registry name; None for a name no codec has."""
    import io
    import tokenize

    try:
        found = tokenize.detect_encoding(io.BytesIO(source).readline)[0]
    except SyntaxError:
        return None
    return codec_name(found.removesuffix("-sig"))


def codec_name(declared: str | None) -> str | None:
    """The registry's name of a declared encoding (UTF-8 when none is declared); None if unknown."""
    import codecs

    try:
        return codecs.lookup(declared or "utf-8").name
    except LookupError:
        return None


def test_sources_in_another_encoding_than_utf8_are_not_graded(tmp_path):
    from autograder.judging.scoring import judge

    cases = {"a.py": (UTF7_SOURCE, "utf-7"),
             "b.py": ("#!/bin/python\n# coding=latin-1\n", "latin-1"),
             "c.py": ("\n# vim: set fileencoding=utf-7 :\n", "utf-7"),
             "d.py": ("\ufeff# coding: utf-8\n", "utf-8"), "e.py": ("# coding: UTF_8\n", "UTF_8"),
             "i.py": ("# coding: u8\n", "u8"),
             "f.py": ("x = 1  # coding: utf-7\n", None), "g.py": ("x = 1\n# coding: utf-7\n", None),
             "h.py": ("# -*- coding: no-such-codec -*-\n", "no-such-codec"),
             "j.py": ("  \f\t\n\f# coding: latin-1\n", "latin-1"),
             "k.py": ("\ufeff\r\n# coding: utf-8\n", "utf-8")}
    files = {}
    for name, (text, encoding) in cases.items():
        files[f"mytorch/{name}"] = tmp_path / name
        files[f"mytorch/{name}"].write_bytes(text.encode("utf-8"))
        assert wire.declared_encoding(text.encode("utf-8")) == encoding, name
        assert standard_library_codec(text.encode("utf-8")) == codec_name(encoding), name
    files["config.yaml"] = tmp_path / "config.yaml"
    files["config.yaml"].write_text("# coding: utf-7\n")
    notes: list[str] = []
    judge.refuse_foreign_encodings(files, notes)
    assert sorted(files) == ["config.yaml", "mytorch/d.py", "mytorch/e.py", "mytorch/f.py",
                             "mytorch/g.py", "mytorch/k.py"]
    assert notes[0].startswith("mytorch/a.py: declares the source encoding 'utf-7'; the grader "
                               "reads mytorch as UTF-8 only"), notes


# source: what the judge's static scan must name (hand-written truth), one family a line.
SCANNED_FAMILIES = {
    "import ast\nast.PyCF_ONLY_AST = 0\n": {"writes ast.PyCF_ONLY_AST"},
    "import collections as c\nc._sys.intern = str\n": {"writes collections._sys.intern"},
    "import sys\nsetattr(sys, 'intern', str)\n": {"writes sys.intern"},
    "import builtins\ndel builtins.type\n": {"writes builtins.type"},
    "from types import FunctionType as F\nF(g.__code__, {})\n": {"types.FunctionType", "__code__"},
    "f.__code__ = (lambda: 1).__code__\n": {"__code__"},
    "getattr(f, '__code__')\n": {"__code__"},
    "object.__subclasses__()\n": {"__subclasses__"},
    "import marshal\nmarshal.load(f)\n": {"marshal.load"},
    "import copyreg\ncopyreg.pickle(int, f)\n": {"copyreg.pickle"},
    "import sys\nsys.meta_path.insert(0, Finder())\n": {"sys.meta_path"},
    "import ctypes\nctypes.cast(id(x), ctypes.c_void_p)\n": {"ctypes.cast", "ctypes.c_void_p"},
    "import subprocess\nsubprocess.run(['python', '-c', blob])\n": {"subprocess.run"},
    "from os import execv\nexecv('/bin/sh', [])\n": {"os.execv"},
    "import gc\ngc.get_referrers(x)\n": {"gc.get_referrers"},
    # Honest: numpy read, a mytorch module of its own written, self's attributes.
    "import numpy as np\nfrom . import linear\nfrom .nn import activation\nimport mytorch.nn\n"
    "linear.EPS = 1\nactivation.X = 2\nmytorch.nn.Y = 3\nself.W = np.zeros(3)\n"
    "self.rng = np.random.default_rng(0)\n": set(),
}


def test_the_static_scan_names_each_family_the_worker_refuses():
    """runtime_code names each family of the worker's closed list with its line, and the tricks
    the worker refuses (TRICKS) are named too, so the staff see an attempt the worker stopped."""
    for source, expected in SCANNED_FAMILIES.items():
        found = runtime_code({"mytorch/nn/x.py": source})
        assert {entry.split(" (")[0] for entry in found} == expected, (source, found)
        assert all(entry.endswith(")") and "mytorch/nn/x.py:" in entry for entry in found)
    found = {entry.split(" (")[0] for entry in runtime_code({"mytorch/__init__.py":
                                                                         TRICKS})}
    assert {"writes ast.PyCF_ONLY_AST", "types.FunctionType", "types.CodeType", "__code__",
            "marshal.loads", "copyreg.pickle", "sys.meta_path", "ctypes.pythonapi",
            "subprocess.run", "os.execv", "gc.get_objects"} <= found, found


def test_honest_handins_get_no_run_time_code_flag(tmp_path):
    """The reference mytorch and the class fixture's honest trees (an independent implementation,
    its disguised copy, the handout's stubs) and the similarity tests' styles: nothing named."""
    from tools.class_fixture import other_style, reference_mytorch, stubs
    from tools.mytorch_styles import STYLES, student_tree

    trees = {"reference": reference_mytorch(), "stubs": stubs(),
             **dict(zip(("independent", "copy"), other_style())),
             **{name: student_tree(tmp_path / name, style) for name, style in STYLES.items()}}
    for name, tree in trees.items():
        sources = {path: text.decode() if isinstance(text, bytes) else text
                   for path, text in tree.items() if path.endswith(".py")}
        assert sources and runtime_code(sources) == [], (name,
                                                                    runtime_code(sources))
