# hw4p1: instructor-only
"""The static scan of code made at run time (``autograder.judging.intake.runtime_code``) on small
sources, each finding read whole (what, file and line): every way a module is imported or
aliased, a mytorch module of its own left out, the builtins read by name and a parameter that
shadows one, writes to another module, ``setattr``/``delattr``/``getattr`` by their arguments, and
an encoded blob at its length bound.

    .venv/bin/python -m pytest -q tests/grader/test_runtime_code_units.py

Truths written by hand from what each source does when Python runs it.
"""
import pytest

from autograder.judging.intake.runtime_code import runtime_code

PATH = "mytorch/nn/x.py"
BASE64_ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"

# source: the findings' (what, line), in the order the scan reports them.
CASES = {
    # Imports and their aliases.
    "import marshal\nmarshal.loads(b)\n": [("marshal.loads", 2)],
    "import marshal as m\nm.loads(b)\n": [("marshal.loads", 2)],
    "import marshal\nloader = marshal\n": [("marshal", 2)],
    "import os.path\nos.system('ls')\n": [("os.system", 2)],
    "from os import system\nsystem('ls')\n": [("os.system", 2)],
    "from marshal import loads as undo\nundo(b)\n": [("marshal.loads", 2)],
    "from importlib.util import module_from_spec\nmodule_from_spec(s)\n":
        [("importlib.module_from_spec", 2)],
    "import zlib\nzlib.decompress(b)\nzlib.compress(b)\nz = zlib\n": [("zlib.decompress", 2)],
    # A mytorch module of its own is not another module.
    "from . import linear\nlinear.EPS = 1\n": [],
    "import mytorch.nn\nmytorch.nn.Y = 3\n": [],
    "from mytorch.nn import functional\nfunctional.Y = 1\n": [],
    "from .nn import marshal\nmarshal.loads(b)\n": [],
    # Builtins read by name; a parameter of that name is the caller's value.
    "exec(text)\n": [("exec", 1)],
    "m = __import__('os')\n": [("__import__", 1)],
    "code = compile(text, 'x', 'exec')\n": [("compile", 1)],
    "__builtins__['eval']\n": [("__builtins__", 1)],
    "f.__builtins__\n": [("__builtins__", 1)],
    "def forward(self, x, eval=False):\n    return eval(x)\n": [],
    "def forward(self, x, *, compile=None):\n    if compile:\n        return compile\n": [],
    "global eval\ndef forward(self, x, eval=False):\n    return eval(x)\n": [("eval", 3)],
    "def f(x, g=eval):\n    return g(x)\n": [("eval", 1)],
    # Writes to another module, however deep, and reads of the interpreter's objects.
    "import ast\nast.PyCF_ONLY_AST = 0\n": [("writes ast.PyCF_ONLY_AST", 2)],
    "import collections as c\nc._sys.intern = str\n": [("writes collections._sys.intern", 2)],
    "import builtins\ndel builtins.type\n": [("writes builtins.type", 2)],
    "import os\nos.sep\n": [],
    "self.W = 1\nself.rng.seed = 0\nx = self.W\n": [],
    "f.__code__ = g\n": [("__code__", 1)],
    # setattr, delattr and getattr read by their arguments.
    "import sys\nsetattr(sys, 'intern', str)\n": [("writes sys.intern", 2)],
    "import sys\ndelattr(sys, 'intern')\n": [("writes sys.intern", 2)],
    "import sys\nsetattr(sys, name, str)\n": [("writes sys.?", 2)],
    "import sys\nsetattr(sys, 3, str)\n": [("writes sys.?", 2)],
    "setattr(self, 'intern', str)\n": [],
    "import numpy as np\nhasattr(np, 'zeros')\nprint(np)\n": [],
    "getattr(f, '__code__')\n": [("__code__", 1)],
    "getattr(f, '__doc__')\nhasattr(f, '__code__')\ngetattr(f, 1)\n": [],
}


@pytest.mark.parametrize("source", CASES)
def test_each_source_s_findings_name_what_and_where(source):
    assert runtime_code({PATH: source}) == [f"{what} ({PATH}:{line})"
                                            for what, line in CASES[source]]


def test_a_file_that_does_not_parse_leaves_the_next_file_scanned():
    assert runtime_code({"mytorch/a.py": "def (", "mytorch/b.py": "x = 1\nexec(t)\n",
                         "mytorch/c.py": "eval(t)\n"}) == [
        "exec (mytorch/b.py:2)", "eval (mytorch/c.py:1)"]


def test_one_finding_a_line_and_file_in_the_order_met():
    assert runtime_code({PATH: "exec(a)\nexec(b); exec(c)\n"}) == [
        f"exec ({PATH}:1)", f"exec ({PATH}:2)"]


@pytest.mark.parametrize("length, found", [(199, False), (200, True)])
def test_a_base64_run_is_a_blob_from_200_characters(length, found):
    blob = (BASE64_ALPHABET * 4)[:length]
    for literal in (f"'{blob}'", f"b'{blob}'", f"'.{blob}.'"):
        assert runtime_code({PATH: f"x = {literal}\n"}) == (
            [f"an encoded blob ({PATH}:1)"] if found else []), literal


@pytest.mark.parametrize("count, found", [(49, False), (50, True)])
def test_a_run_of_escaped_bytes_is_a_blob_from_50_escapes(count, found):
    literal = "r'" + "\\x4f" * count + "'"
    assert runtime_code({PATH: f"x = {literal}\n"}) == (
        [f"an encoded blob ({PATH}:1)"] if found else [])


# Each family the worker's audit hook refuses (autograder/sandboxed/refusals.py), by one use.
FAMILIES = [
    "marshal.loads", "zlib.decompress", "base64.b64decode", "codecs.decode", "importlib.util",
    "importlib.machinery", "importlib.abc", "importlib.spec_from_loader",
    "importlib.module_from_spec", "types.CodeType", "types.FunctionType", "types.LambdaType",
    "builtins.exec", "lzma.decompress", "bz2.decompress", "pickle.loads", "pickle.load",
    "copyreg.pickle", "ctypes.memmove", "_ctypes.call_function", "runpy.run_path",
    "zipimport.zipimporter", "_imp.create_dynamic", "subprocess.Popen",
    "_posixsubprocess.fork_exec", "pty.spawn", "gc.get_objects", "gc.get_referrers",
    "gc.get_referents", "sys._getframe", "sys.meta_path", "sys.path_hooks", "sys.modules",
    "sys.settrace", "sys.setprofile", "os.system", "os.popen", "os.posix_spawn", "os.posix_spawnp",
    "os.execl", "os.execle", "os.execlp", "os.execlpe", "os.execv", "os.execve", "os.execvp",
    "os.execvpe", "os.spawnl", "os.spawnle", "os.spawnlp", "os.spawnlpe", "os.spawnv",
    "os.spawnve", "os.spawnvp", "os.spawnvpe"]
# Their harmless neighbours.
NEIGHBOURS = ["zlib.compress", "codecs.encode", "importlib.import_module", "types.SimpleNamespace",
              "lzma.compress", "bz2.compress", "pickle.dumps", "pty.openpty", "gc.collect",
              "sys.version", "os.path", "os.getcwd"]
INTERPRETER = ["__code__", "gi_code", "cr_code", "f_code", "f_globals", "f_locals", "f_back",
               "__globals__", "__subclasses__", "__builtins__"]


@pytest.mark.parametrize("used", FAMILIES + NEIGHBOURS)
def test_each_family_of_the_audit_hook_is_named_and_its_neighbours_are_not(used):
    module, attribute = used.split(".")
    found = runtime_code({PATH: f"import {module}\nx = {module}.{attribute}\n"})
    assert found == ([f"{used} ({PATH}:2)"] if used in FAMILIES else []), found


@pytest.mark.parametrize("attribute", INTERPRETER)
def test_each_interpreter_object_is_named_by_attribute_and_by_getattr(attribute):
    found = runtime_code({PATH: f"x = f.{attribute}\ny = getattr(f, '{attribute}')\n"})
    assert found == [f"{attribute} ({PATH}:1)", f"{attribute} ({PATH}:2)"]
