# hw4p1: instructor-only
"""Tests of what the grader refuses to run: code made at run time (the worker's audit hook) and
sources declaring another encoding than UTF-8.

    .venv/bin/python -m pytest -q tests/grader/test_runtime_code.py
"""

from autograder.sandboxed import refusals, wire
from autograder.judging.isolation import sandbox, worker_folders
from autograder.judging.intake.runtime_code import runtime_code
from tests.grader.autograder_helpers import copy_reference_mytorch, open_folder
from tests.grader.attack_handins import DOORS, TRICKS, UTF7_SOURCE, door_mytorch


DECLARED_SOURCE = "# coding: hw4p1\n_VALUE = 1\n"  # a codec TRICKS registers itself


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
