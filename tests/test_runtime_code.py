# hw4p1: instructor-only
"""Tests of what the grader refuses to run: code made at run time (the worker's audit hook) and
sources declaring another encoding than UTF-8.

    python -m tests.test_runtime_code    (or: python -m pytest -q tests/test_runtime_code.py)
"""
import base64
import zlib
from pathlib import Path

from autograder import sandbox, worker
from tests.autograder_helpers import (copy_reference_mytorch, open_folder, remove_session_folders,
                                      worker_layout)
from tests.testing_framework import rubric as rubric_category, run_module

RUBRIC = {"Child processes": 0, "Handin extraction": 0}


UTF7_SOURCE = "# -*- coding: utf-7 -*-\nx = 1\n"
TRICKS = r"""
import ast, builtins, collections, ctypes, dataclasses, fractions, io, marshal, sys, zlib
import numpy.polynomial  # a numpy module numpy imports lazily: compiled from its file
_Pair = collections.namedtuple("_Pair", "a b")  # the standard library's own generated code
@dataclasses.dataclass
class _Data:
    a: int = 1
assert ast.literal_eval("(1, 2)") == (1, 2) and _Pair(1, 2).b == 2 and _Data().a == 1
_BLOB = zlib.compress(b"_MADE = True")
_MARSHALLED = marshal.dumps(_Data.__init__.__code__)  # the audit hook lets dumps through
_open, _type, _frame = io.open, builtins.type, sys._getframe
io.open = lambda *args, **kwargs: _open(__file__, "rb")  # the hook must not call these
builtins.type = lambda *args: bytes
_TRICKS = {
    "exec of a blob": lambda: exec(zlib.decompress(_BLOB)),
    "eval of text": lambda: eval("1 + 1"),
    "compile under this file's name": lambda: compile(zlib.decompress(_BLOB), __file__, "exec"),
    "marshal": lambda: marshal.loads(_MARSHALLED),
    "code edited by hand": lambda: (lambda: 0).__code__.replace(co_consts=(1,)),
    "the interpreter's own C functions": lambda: ctypes.pythonapi.PyRun_SimpleString,
    "the hook's state through gc": lambda: __import__("gc").get_objects(),
}
_GOT_THROUGH = []
for _name, _trick in _TRICKS.items():
    try:
        _trick()
    except Exception as _error:
        if _type(_error).__name__ == "CodeAtRunTime":
            continue
    _GOT_THROUGH.append(_name)
io.open, builtins.type = _open, _type
if _GOT_THROUGH:
    raise SystemExit(f"got through: {_GOT_THROUGH}")
"""


def blob_mytorch(folder: Path) -> Path:
    """The reference mytorch with every file an ``exec(compile(zlib blob, __file__))`` of itself:
    the same code, unreadable to anyone reading the handin."""
    package = copy_reference_mytorch(folder)
    for path in package.rglob("*.py"):
        blob = base64.b64encode(zlib.compress(path.read_bytes())).decode()
        path.write_text(f"import base64, zlib\nexec(compile(zlib.decompress(base64.b64decode("
                        f"{blob!r})), __file__, 'exec'))\n")
    return package


@rubric_category("Child processes")
def test_the_worker_runs_only_mytorch_s_files_and_honest_code_still_passes():
    """The worker's audit hook in the mode the machine gives: honest code using what the standard
    library and numpy generate or import lazily keeps its points while every trick to run code
    that is not a file is refused (the mytorch stops itself if one works); a mytorch of blobs
    gets 0 and the message names the line."""
    from autograder import judge

    folder = open_folder("hw4p1-audit-")
    tricks = copy_reference_mytorch(folder / "tricks")
    (tricks / "__init__.py").write_text(TRICKS + (tricks / "__init__.py").read_text())
    for name, package, points in [("tricks", tricks, 5.0),
                                  ("blobs", blob_mytorch(folder / "blobs"), 0.0)]:
        layout = worker_layout(folder / f"layout-{name}", package)
        mode, notes = sandbox.choose_mode(layout, judge.python_executable(),
                                          allow_unisolated=True)
        run = judge.grade_category("Linear", layout, mode, timeout=120)
        messages = [result.message for result in run.results]
        assert sum(result.points for result in run.results) == points, (name, mode, messages,
                                                                        run.output[-3000:])
    assert all(message.endswith(f"{worker.MADE_AT_RUN_TIME} (at mytorch/__init__.py:2)")
               for message in messages), messages


@rubric_category("Handin extraction")
def test_sources_in_another_encoding_than_utf8_are_not_graded(tmp_path):
    from autograder import judge

    cases = {"a.py": (UTF7_SOURCE, "utf-7"),
             "b.py": ("#!/bin/python\n# coding=latin-1\n", "latin-1"),
             "c.py": ("\n# vim: set fileencoding=utf-7 :\n", "utf-7"),
             "d.py": ("\ufeff# coding: utf-8\n", "utf-8"), "e.py": ("# coding: UTF8\n", "UTF8"),
             "f.py": ("x = 1  # coding: utf-7\n", None), "g.py": ("x = 1\n# coding: utf-7\n", None),
             "h.py": ("# -*- coding: no-such-codec -*-\n", "no-such-codec")}
    files = {}
    for name, (text, encoding) in cases.items():
        files[f"mytorch/{name}"] = tmp_path / name
        files[f"mytorch/{name}"].write_bytes(text.encode("utf-8"))
        assert judge.declared_encoding(text.encode("utf-8")) == encoding, name
    files["config.yaml"] = tmp_path / "config.yaml"
    files["config.yaml"].write_text("# coding: utf-7\n")
    notes: list[str] = []
    judge.refuse_foreign_encodings(files, notes)
    assert sorted(files) == ["config.yaml", "mytorch/d.py", "mytorch/e.py", "mytorch/f.py",
                             "mytorch/g.py"]
    assert notes[0].startswith("mytorch/a.py: declares the source encoding 'utf-7'; the grader "
                               "reads mytorch as UTF-8 only"), notes


if __name__ == "__main__":
    run_module(__name__)
