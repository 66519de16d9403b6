# hw4p1: instructor-only
"""Hostile and honest handins, their parts and the checks on their gradings, shared by the grader's
tests (tests/grader/) and the platform profiles' attack table (tests/platforms/): each is defined
here once, so that no test module imports another.
"""
import base64
import json
import math
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import zipfile
import zlib
from pathlib import Path

import numpy as np

from autograder.judging.scoring import rubric
from autograder.sandboxed import wire
from hw4lib.data.lm_dataset import load_transcript
from tests.grader.autograder_helpers import (built_autograder, copy_reference_mytorch,
                                             make_model_handin, pack_folder,
                                             regular)
from tools import platform_profiles


# ------------------------------------------------------------------------------------------------
# autograder_e2e
# ------------------------------------------------------------------------------------------------

HIDDEN_PARTITION_MEMBER = "autograde/autograder/hidden_set/test"


def read_hidden_lines(autograde_tar: Path) -> list[str]:
    """The hidden transcripts ``autograde_tar`` ships, in the order LMDataset reads them."""
    with tarfile.open(autograde_tar) as tar, tempfile.TemporaryDirectory() as scratch:
        members = [m for m in tar.getmembers() if m.name.startswith(HIDDEN_PARTITION_MEMBER + "/")]
        tar.extractall(scratch, members=members, filter="data")
        return [load_transcript(path)
                for path in sorted((Path(scratch) / HIDDEN_PARTITION_MEMBER).glob("*.npy"))]


FULL_LINE = json.dumps({"scores": {c: p for c, p in rubric.RUBRIC.items()}})


MYTORCH_ZERO = {category: 0 for category in rubric.MYTORCH_RUBRIC}


# A mytorch that does no work: every class raises when used (what the handout's stubs do).
STUB_NN = """
class _Stub:
    def __init__(self, *args, **kwargs):
        raise NotImplementedError("stub")
Linear = Softmax = ScaledDotProductAttention = MultiHeadAttention = _Stub
"""


def recorded_worker_streams(seed: int) -> dict[str, bytes]:
    """{category: what the worker sends back for the reference mytorch}, recorded in this process
    for hidden-test inputs drawn from ``seed``: what a replay attack would have saved from an
    earlier grading."""
    import mytorch.nn as reference_nn
    from autograder.sandboxed import worker
    from autograder.judging.scoring.hidden_tests.mytorch_hidden import tests_of

    streams = {}
    for category in rubric.MYTORCH_RUBRIC:
        folder = Path(tempfile.mkdtemp(prefix="hw4p1-record-"))
        tests = tests_of(category)
        stream = b""
        for test, child in zip(tests, np.random.SeedSequence(seed).spawn(len(tests))):
            program = wire.Program()
            test.build(program, np.random.default_rng(child))
            program.save(folder / test.name)
            stream += worker.run_test(reference_nn, folder / test.name, test.name)
        shutil.rmtree(folder)
        streams[category] = stream
    return streams


# Replays a recorded stream on the worker's result fd, then exits before any class is used.
REPLAY_INIT = """
import base64, importlib, os, sys
_args = sys.argv
_tests = os.listdir(_args[_args.index("--input") + 1])  # the first test's program
_data = base64.b64decode(importlib.import_module("mytorch._replay_" + CATEGORY_OF[_tests[0]]).DATA)
_fd = int(_args[_args.index("--result-fd") + 1])
while _data:
    _data = _data[os.write(_fd, _data):]
os._exit(0)
"""


REPLAY_SEED = 20240  # the recorded grading's seed (any seed: the judge draws a fresh one)


def replay_handin(folder: Path) -> Path:
    """handin.tar: the tiny model, and a mytorch whose classes all raise NotImplementedError and
    whose import writes a recorded result stream of the reference mytorch to the result fd."""
    import base64

    from autograder.judging.scoring.hidden_tests.mytorch_hidden import HIDDEN_TESTS

    category_of = {test.name: test.category for test in HIDDEN_TESTS}
    handin = folder / "handin"
    make_model_handin(handin)
    package = handin / "mytorch"
    (package / "nn").mkdir(parents=True)
    (package / "nn/__init__.py").write_text(STUB_NN)
    for category, stream in recorded_worker_streams(REPLAY_SEED).items():
        (package / f"_replay_{category}.py").write_text(
            f"DATA = {base64.b64encode(stream).decode()!r}\n")
    (package / "__init__.py").write_text(f"CATEGORY_OF = {category_of!r}\n{REPLAY_INIT}")
    return pack_folder(handin, folder / "handin.tar")


# ------------------------------------------------------------------------------------------------
# handin_extraction
# ------------------------------------------------------------------------------------------------

def deep_mytorch_member(depth: int) -> tuple[tarfile.TarInfo, bytes]:
    """A mytorch module ``depth`` folders below mytorch/, every folder a module name."""
    return regular("handin/mytorch/" + "a/" * depth + "deep.py")


def long_name_members(count: int, length: int) -> list[tuple[tarfile.TarInfo, bytes]]:
    """``count`` members the grader does not use, each named with ``length`` characters."""
    return [regular(f"handin/{index:03d}" + "n" * length) for index in range(count)]


def zip_directory_bomb(path: Path, entries: int) -> Path:
    """A zip (whatever ``path`` is named) whose central directory really holds ``entries`` one-byte
    named entries, each pointing at one empty stored file: what ``zipfile`` parses whole."""
    local = b"PK\x03\x04" + bytes(22) + (1).to_bytes(2, "little") + bytes(2) + b"x"
    central = (b"PK\x01\x02" + bytes(24) + (1).to_bytes(2, "little") + bytes(16) + b"x")
    end = (b"PK\x05\x06" + bytes(4) + (min(entries, 0xFFFF)).to_bytes(2, "little") * 2
           + (len(central) * entries).to_bytes(4, "little") + len(local).to_bytes(4, "little")
           + bytes(2))
    with open(path, "wb") as file:
        file.write(local)
        for _ in range(entries // 100_000):
            file.write(central * 100_000)
        file.write(central * (entries % 100_000))
        file.write(end)
    return path


# ------------------------------------------------------------------------------------------------
# answer_seconds
# ------------------------------------------------------------------------------------------------

SLEEP_S = 3.0


# Appended to mytorch/nn/__init__.py: the reference Linear, whose first forward call sleeps.
SLOW_FIRST_FORWARD_NN = f'''
import time as _time

from .linear import Linear as _Linear

_slept = []


class Linear(_Linear):
    def forward(self, A):
        if not _slept:
            _slept.append(_time.sleep({SLEEP_S}))
        return super().forward(A)
'''


# ------------------------------------------------------------------------------------------------
# runtime_code
# ------------------------------------------------------------------------------------------------

UTF7_SOURCE = "# -*- coding: utf-7 -*-\nx = 1\n"


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


# ------------------------------------------------------------------------------------------------
# worker_scoring
# ------------------------------------------------------------------------------------------------

# A Linear that returns zeros of the right shapes and dtypes: a dtype-only check passes it.
ZERO_LINEAR_NN = """
import numpy as np
class Linear:
    def __init__(self, in_features, out_features):
        self.W = np.zeros((out_features, in_features))
        self.b = np.zeros(out_features)
    def init_weights(self, W, b):
        self.W, self.b = W, b
    def forward(self, A):
        self.A = A
        return np.zeros((*A.shape[:-1], self.W.shape[0]), dtype=A.dtype)
    def backward(self, dLdZ):
        self.dLdW, self.dLdb = np.zeros_like(self.W), np.zeros_like(self.b)
        return np.zeros_like(self.A)
"""


# ------------------------------------------------------------------------------------------------
# gradescope
# ------------------------------------------------------------------------------------------------

VISIBILITIES = {"hidden", "after_due_date", "after_published", "visible"}


def unpack_root(tmp_path: Path, handin: Path | None) -> Path:
    """A fake /autograder: source/ (the zip's contents), submission/ and results/."""
    root = tmp_path / "autograder"
    with zipfile.ZipFile(built_autograder() / "gradescope.zip") as archive:
        archive.extractall(root / "source")
    for name in ("setup.sh", "run_autograder"):
        (root / "source" / name).chmod(0o755)
    (root / "submission").mkdir()
    (root / "results").mkdir()
    if handin is not None:
        (root / "submission/handin.tar").write_bytes(handin.read_bytes())
    return root


def run_autograder(root: Path, *args: str, profile: str = "host") -> dict:
    """Run source/run_autograder as Gradescope does (``args`` passed on), in the emulated
    ``profile`` (``tools/platform_profiles.py``); return the parsed results.json."""
    env = {k: v for k, v in os.environ.items() if k not in ("MAKELEVEL", "MAKEFLAGS", "MFLAGS")}
    env.update(AUTOGRADER_ROOT=str(root), HW4P1_PYTHON=sys.executable)
    command = platform_profiles.launcher(profile, [str(root / "source/run_autograder"), *args])
    process = subprocess.run(command, cwd=root, env=env, capture_output=True, text=True,
                             timeout=900)
    assert process.returncode == 0, process.stdout[-2000:] + process.stderr[-2000:]
    return json.loads((root / "results/results.json").read_text())


def check_spec(results: dict) -> None:
    """results.json as Gradescope's specification asks, with per-test scores summing to score."""
    assert isinstance(results.get("score"), float) and math.isfinite(results["score"]), results
    assert isinstance(results.get("output"), str) and results["output"], "no output"
    assert results.get("visibility") in VISIBILITIES
    tests = results.get("tests")
    assert isinstance(tests, list) and tests, "no tests"
    for test in tests:
        for key, kind in (("name", str), ("score", float), ("max_score", float), ("output", str),
                          ("visibility", str), ("status", str)):
            assert isinstance(test.get(key), kind), f"test {test.get('name')}: {key} is " \
                                                    f"{test.get(key)!r}, expected {kind.__name__}"
        assert 0 <= test["score"] <= test["max_score"], test
        assert test["visibility"] in VISIBILITIES and test["status"] in ("passed", "failed"), test
    total = sum(test["score"] for test in tests)
    assert abs(total - results["score"]) < 1e-6, f"tests add up to {total}, score {results['score']}"
    maximum = sum(test["max_score"] for test in tests)
    assert maximum == sum(rubric.RUBRIC.values()), f"max scores add up to {maximum}"


def category_totals(results: dict) -> dict[str, float]:
    totals = dict.fromkeys(rubric.RUBRIC, 0.0)
    for test in results["tests"]:
        totals[test["name"].split(":")[0]] += test["score"]
    return {category: round(total, 2) for category, total in totals.items()}


# Reads every copy of the hidden material it can find; if any, prints it and breaks mytorch.
SNOOP_INIT = """
import glob
_paths = [SOURCE_TAR] + [path for pattern in ("autograde.tar",
                                               "autograde/autograder/hidden_set/*/*",
                                               "autograde/autograder/judging/scoring/hidden_tests/*.py")
                         for path in glob.glob("/tmp/hw4p1-grading-*/" + pattern)]
_found = []
for _path in _paths:
    try:
        with open(_path, "rb") as _file:
            _found.append(_file.read(1 << 20))
    except OSError:
        pass
if _found:
    print("LEAKED", _found[0][-3000:].decode("latin-1"))
    raise ImportError("LEAKED " + _found[0][-3000:].decode("latin-1"))
print("SNOOPED_NOTHING")
"""


# ------------------------------------------------------------------------------------------------
# judge_fd
# ------------------------------------------------------------------------------------------------

# Run at mytorch's import: wherever the worker's process offers a hook for the finite differences
# (its perturbed-outputs function, or the call it makes), answer them with an honest Linear
# forward, so that they agree with the honest backward while the real forward is wrong.
FD_GAMING_INIT = '''
import sys as _sys
_worker = _sys.modules.get("autograder.sandboxed.worker")


def _honest_forward(layer):
    return lambda A: A @ layer.W.T + layer.b


if _worker is not None and hasattr(_worker, "perturbed_outputs"):
    _perturbed = _worker.perturbed_outputs

    def _gamed(env, step):
        layer = env[step["obj"]]
        layer.forward = _honest_forward(layer)
        try:
            return _perturbed(env, step)
        finally:
            del layer.forward

    _worker.perturbed_outputs = _gamed
'''


# Appended to mytorch/nn/__init__.py: a Linear whose forward doubles A W^T, with the honest
# backward. It passes the second-forward test alone: 1 of Linear's 5 points is fair.
DOUBLED_LINEAR_NN = '''
from .linear import Linear as _Linear


class Linear(_Linear):
    def forward(self, A):
        return super().forward(A) + A @ self.W.T
'''


FAIR_LINEAR_POINTS = 1.0
