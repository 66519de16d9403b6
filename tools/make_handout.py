"""Generate the student handout: ``python -m tools.make_handout`` (``make handout``).

Writes ``dist/handout/`` and ``dist/handout.tar.gz`` from the git-tracked files of this repository:

* every solution region (``# TODO: ...`` / ``# BEGIN SOLUTION`` / reference / ``# END
  SOLUTION``) in a ``.py`` file or a notebook code cell becomes ``raise NotImplementedError("<file>:
  <function>: <TODO text>")`` at the region's indentation, the TODO comment kept above it;
* what only instructors get is left out (:data:`EXCLUDED_DIRS`, :data:`EXCLUDED_FILES`, files whose
  first line is :data:`INSTRUCTOR_ONLY`), the Makefile loses its instructor targets, notebooks lose
  their outputs, README.md's task-list section (the one holding :data:`TASKS_MARKER`) is filled
  with the students' task list, generated from the regions found, and its grading section (the
  one holding :data:`GRADING_MARKER`) with the points and the pass mark of
  ``hw4lib/grading_numbers.py``;
* the result is checked: no marker survives, no region's code appears anywhere else in it
  (:mod:`tools.handout_leaks`), every ``.py`` file and notebook cell compiles, and every module of
  ``mytorch`` and ``hw4lib`` imports in a fresh interpreter started in the handout.

Malformed regions (unbalanced or nested markers, no TODO comment, a region that would run at
import time) stop the build with ``file:line`` and what to fix. :func:`restore` puts the reference
code back into a handout file; the tests use it to check that the handout differs from the solution
only by its stubs.
"""
from __future__ import annotations

import argparse
import ast
import gzip
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import textwrap
from dataclasses import dataclass
from pathlib import Path

from hw4lib.grading_numbers import (FULL_MARKS_PPL, LM_CATEGORY, LM_POINTS, MYTORCH_RUBRIC,
                                    ZERO_MARKS_PPL)
from hw4lib.handin_format import HANDIN_TAR
from tools.handout_leaks import find_leaks

REPO_ROOT = Path(__file__).resolve().parents[1]

TODO_PREFIX = "# TODO:"
BEGIN_MARK = "# BEGIN SOLUTION"
END_MARK = "# END SOLUTION"
INSTRUCTOR_ONLY = "# hw4p1: instructor-only"
MAKEFILE_BEGIN = "# BEGIN INSTRUCTOR TARGETS"
MAKEFILE_END = "# END INSTRUCTOR TARGETS"
# Lines of README.md whose sections (from their "## " heading up to the next one) the handout
# replaces by generated text: the task list, from the regions (the README holds no other task
# list), and the grading, from hw4lib/grading_numbers.py (the README quotes no point or threshold).
TASKS_MARKER = "<!-- make handout: the task list -->"
GRADING_MARKER = "<!-- make handout: the grading -->"

# Top-level paths (directories end with "/") that only instructors get, or that are built locally.
EXCLUDED_DIRS = ("autograder/", "tools/", "bench/", ".ci/", "docs/", "hw4_data/hw4p1_data/",
                 "expts/", "dist/", ".venv/")
EXCLUDED_FILES = ("DEVELOPERS.md",)
# Directory names that are caches or metadata wherever they appear.
EXCLUDED_PARTS = ("__pycache__", ".pytest_cache", ".ipynb_checkpoints", ".git")
LEAK_SUFFIXES = {".py", ".ipynb", ".md", ".txt"}  # where a copy of solution code would be read
TEXT_SUFFIXES = {".py", ".md", ".txt", ".yaml", ".yml", ".ini", ".cfg", ".toml", ".ipynb", ".json",
                 ".sh", ""}

# The order students implement the files in, and the test modules that check each one (what the
# notebook's matching cell runs). A file with regions missing here is listed last in the README.
# The bonus track starts at BONUS_FIRST.
TASK_ORDER: dict[str, tuple[str, ...]] = {
    "mytorch/nn/linear.py": ("test_mytorch",),
    "mytorch/nn/activation.py": ("test_mytorch",),
    "mytorch/nn/scaled_dot_product_attention.py": ("test_mytorch",),
    "mytorch/nn/multi_head_attention.py": ("test_mytorch",),
    "hw4lib/data/lm_dataset.py": ("test_dataset",),
    "hw4lib/model/masks.py": ("test_mask_causal", "test_mask_padding"),
    "hw4lib/model/positional_encoding.py": ("test_positional_encoding",),
    "hw4lib/model/sublayers.py": ("test_sublayer_selfattention", "test_sublayer_feedforward",
                                  "test_model_vs_mytorch"),
    "hw4lib/model/decoder_layers.py": ("test_decoderlayer_selfattention",),
    "hw4lib/model/transformers.py": ("test_transformer_decoder_only",),
    "hw4lib/decoding/sequence_generator.py": ("test_decoding",),
    "hw4lib/trainers/lm_trainer.py": ("test_lm_trainer",),
    # The bonus track: the whole model in numpy, on top of the attention stack above.
    "mytorch/nn/embedding.py": ("test_mytorch_lm",),
    "mytorch/nn/layer_norm.py": ("test_mytorch_lm",),
    "mytorch/nn/gelu.py": ("test_mytorch_lm",),
    "mytorch/nn/dropout.py": ("test_mytorch_lm",),
    "mytorch/nn/loss.py": ("test_mytorch_lm",),
    "mytorch/nn/positional_encoding.py": ("test_mytorch_lm",),
    "mytorch/nn/sublayers.py": ("test_mytorch_lm",),
    "mytorch/nn/decoder_layers.py": ("test_mytorch_lm",),
    "mytorch/nn/transformer.py": ("test_mytorch_lm",),
    "mytorch/optim/adamw.py": ("test_mytorch_lm",),
}
BONUS_FIRST = "mytorch/nn/embedding.py"
IMPORT_PACKAGES = ("mytorch", "hw4lib", "datagen")


class HandoutError(Exception):
    """A problem in the source tree that must be fixed before a handout can be built."""


@dataclass(frozen=True)
class Region:
    """One solution region of a ``.py`` file or of a notebook code cell.

    Line numbers are 1-based and count within the file, or within the cell for notebooks.
    """

    path: str                # repo-relative POSIX path of the file
    cell: int | None         # 1-based position of the notebook cell among all cells; None for .py
    begin: int               # the "# BEGIN SOLUTION" line
    end: int                 # the "# END SOLUTION" line
    indent: str              # leading whitespace shared by the three marker lines
    todo: str                # the TODO text, without "# TODO:", continuation lines joined
    qualname: str            # enclosing function, e.g. "MultiHeadAttention.forward"; "" if none
    body: tuple[str, ...]    # the reference lines between the markers, newlines included

    @property
    def where(self) -> str:
        """``file:line`` of the BEGIN marker, for error messages."""
        cell = f" (cell {self.cell})" if self.cell is not None else ""
        return f"{self.path}{cell}:{self.begin}"

    @property
    def message(self) -> str:
        """What the stub's NotImplementedError says: where to write the code, and what."""
        location = self.path if self.cell is None else f"{self.path}, cell {self.cell}"
        function = self.qualname or "top-level code"
        return f"{location}: {function}: {self.todo}"

    @property
    def stub(self) -> str:
        literal = json.dumps(self.message, ensure_ascii=False)  # also a valid Python string
        return f"{self.indent}raise NotImplementedError({literal})\n"


# ----------------------------------------------------------------------------------------------
# Finding, removing and restoring regions


def _is_marker_like(stripped: str) -> bool:
    return "BEGIN SOLUTION" in stripped or "END SOLUTION" in stripped


DEFINITIONS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)


def _enclosing_scopes(node: ast.AST, lineno: int) -> list[ast.AST]:
    """The function and class definitions containing line ``lineno``, outermost first."""
    for child in ast.iter_child_nodes(node):
        start = getattr(child, "lineno", None)
        if start is None or not start <= lineno <= child.end_lineno:
            continue
        inner = _enclosing_scopes(child, lineno)
        return [child] + inner if isinstance(child, DEFINITIONS) else inner
    return []


def _parse_python(source: str, where: str, notebook: bool) -> ast.AST | None:
    """Parse a .py file (errors are fatal) or a notebook cell (IPython syntax translated first)."""
    if notebook:
        try:
            from IPython.core.inputtransformer2 import TransformerManager
            source = TransformerManager().transform_cell(source)
        except ImportError:  # without IPython, cells using magics simply get no function names
            pass
    try:
        return ast.parse(source)
    except SyntaxError as error:
        if notebook:
            return None
        raise HandoutError(f"{where}:{error.lineno}: does not parse: {error.msg}") from error


def _todo_above(lines: list[str], begin: int, indent: str) -> str:
    """The text of the TODO comment ending right above line ``begin``: a line ``<indent># TODO:
    text`` followed by any continuation comment lines at the same indent, joined with spaces; ""
    when there is no such comment."""
    number = begin - 1
    while number >= 1 and lines[number - 1].startswith(indent + "#"):
        if lines[number - 1].startswith(indent + TODO_PREFIX):
            parts = [lines[number - 1].strip()[len(TODO_PREFIX):]]
            parts += [line.strip()[1:] for line in lines[number:begin - 1]]
            return " ".join(part.strip() for part in parts if part.strip())
        number -= 1
    return ""


def _marker_pairs(lines: list[str], where: str) -> list[tuple[int, int]]:
    """(BEGIN line, END line) of every region, checking the markers pair up without nesting."""
    pairs: list[tuple[int, int]] = []
    open_at: int | None = None
    for number, line in enumerate(lines, start=1):
        stripped = line.strip()
        if stripped == BEGIN_MARK:
            if open_at is not None:
                raise HandoutError(f"{where}:{number}: nested '{BEGIN_MARK}' (the region opened "
                                   f"at line {open_at} is not closed); close it first")
            open_at = number
        elif stripped == END_MARK:
            if open_at is None:
                raise HandoutError(f"{where}:{number}: '{END_MARK}' without a '{BEGIN_MARK}' above")
            pairs.append((open_at, number))
            open_at = None
        elif _is_marker_like(stripped):
            raise HandoutError(f"{where}:{number}: malformed marker {stripped!r}; write exactly "
                               f"'{BEGIN_MARK}' or '{END_MARK}' on a line of its own")
    if open_at is not None:
        raise HandoutError(f"{where}:{open_at}: '{BEGIN_MARK}' is never closed by '{END_MARK}'")
    return pairs


def _indent(line: str) -> str:
    return line[: len(line) - len(line.lstrip())]


def find_regions(lines: list[str], path: str, cell: int | None = None) -> list[Region]:
    """Return the solution regions of one file (or notebook cell), in order.

    Raises HandoutError, naming ``file:line`` and the fix, for a BEGIN without END or END without
    BEGIN, nested regions, markers at different indentations, a malformed marker line, a region
    with no ``# TODO: ...`` comment directly above it or with an empty body, and (in .py files) a
    region outside a function: it would run, and raise, at import time.
    """
    where = path if cell is None else f"{path} (cell {cell})"
    found = []
    for begin, end in _marker_pairs(lines, where):
        indent = _indent(lines[begin - 1])
        if _indent(lines[end - 1]) != indent:
            raise HandoutError(f"{where}:{end}: '{END_MARK}' is not at the indentation of its "
                               f"'{BEGIN_MARK}' (line {begin})")
        todo = _todo_above(lines, begin, indent)
        if not todo:
            raise HandoutError(f"{where}:{begin}: a region needs a '{TODO_PREFIX} <what to do, "
                               f"with shapes>' comment directly above '{BEGIN_MARK}', at its "
                               f"indentation")
        body = tuple(lines[begin:end - 1])
        if not any(line.strip() for line in body):
            raise HandoutError(f"{where}:{begin}: empty solution region")
        found.append((begin, end, indent, todo, body))
    if not found:
        return []

    tree = _parse_python("".join(lines), where, notebook=cell is not None)
    regions = []
    for begin, end, indent, todo, body in found:
        scopes = _enclosing_scopes(tree, begin) if tree is not None else []
        in_function = bool(scopes) and not isinstance(scopes[-1], ast.ClassDef)
        if cell is None and not in_function:
            place = f"class {scopes[-1].name}" if scopes else "module level"
            raise HandoutError(f"{where}:{begin}: solution region at {place}: its stub would raise "
                               f"when the module is imported; move the code into a function")
        qualname = ".".join(scope.name for scope in scopes)
        regions.append(Region(path, cell, begin, end, indent, todo, qualname, body))
    return regions


def stub_out(lines: list[str], regions: list[Region]) -> list[str]:
    """Replace each region (its BEGIN and END lines included) by its stub; the TODO line stays."""
    out: list[str] = []
    cursor = 0
    for region in regions:
        out.extend(lines[cursor:region.begin - 1])
        out.append(region.stub)
        cursor = region.end
    out.extend(lines[cursor:])
    return out


def restore(lines: list[str], regions: list[Region]) -> list[str]:
    """Put the reference code of ``regions`` back in place of their stubs in handout ``lines``.

    Regions are matched to stubs in order and by identity (the stub text, which names the file,
    function and TODO, must match, right below the same TODO line). The result is the source file
    with the marker lines removed. Raises HandoutError when a stub is missing.
    """
    out: list[str] = []
    cursor = 0
    for region in regions:
        try:
            at = lines.index(region.stub, cursor)
        except ValueError:
            raise HandoutError(f"{region.where}: stub for {region.qualname or 'top-level code'!r} "
                               f"not found in the handout") from None
        if _todo_above(lines, at + 1, region.indent) != region.todo:
            raise HandoutError(f"{region.where}: the stub is not right below its TODO comment")
        out.extend(lines[cursor:at])
        out.extend(region.body)
        cursor = at + 1
    out.extend(lines[cursor:])
    return out


# ----------------------------------------------------------------------------------------------
# Files: .py files have one unit of code, notebooks one per code cell


def code_units(path: str, text: str) -> dict[int | None, list[str]]:
    """{cell number or None: lines} for the code a file holds (notebook code cells, or the file)."""
    if path.endswith(".ipynb"):
        notebook = json.loads(text)
        return {number: _cell_source(cell).splitlines(keepends=True)
                for number, cell in enumerate(notebook["cells"], start=1)
                if cell["cell_type"] == "code"}
    return {None: text.splitlines(keepends=True)}


def _cell_source(cell: dict) -> str:
    source = cell["source"]
    return "".join(source) if isinstance(source, list) else source


def replace_units(path: str, text: str, units: dict[int | None, list[str]],
                  clear_outputs: bool = False) -> str:
    """Write ``units`` (as returned by :func:`code_units`, edited) back into the file's text."""
    if not path.endswith(".ipynb"):
        return "".join(units[None])
    notebook = json.loads(text)
    for number, cell in enumerate(notebook["cells"], start=1):
        if number in units:
            cell["source"] = units[number]
        if clear_outputs and cell["cell_type"] == "code":
            cell["outputs"] = []
            cell["execution_count"] = None
    return json.dumps(notebook, indent=1, sort_keys=True, ensure_ascii=False) + "\n"


def file_regions(path: str, text: str) -> list[Region]:
    """Every region of a .py file or notebook, in order."""
    return [region for cell, lines in code_units(path, text).items()
            for region in find_regions(lines, path, cell)]


def restore_text(path: str, handout_text: str, regions: list[Region]) -> str:
    """The handout file ``handout_text`` with the reference code of ``regions`` put back."""
    units = code_units(path, handout_text)
    for cell in units:
        units[cell] = restore(units[cell], [r for r in regions if r.cell == cell])
    return replace_units(path, handout_text, units)


def strip_markers(path: str, text: str) -> str:
    """The source file without its BEGIN/END marker lines: what :func:`restore_text` must give."""
    units = code_units(path, text)
    for cell, lines in units.items():
        units[cell] = [line for line in lines if line.strip() not in (BEGIN_MARK, END_MARK)]
    return replace_units(path, text, units)


# ----------------------------------------------------------------------------------------------
# Selecting and transforming files


def tracked_files(repo: Path) -> list[str]:
    """Repo-relative paths of the git-tracked files present in the working tree, sorted."""
    try:
        listed = subprocess.run(["git", "-C", str(repo), "ls-files", "-z", "--cached"],
                                check=True, capture_output=True).stdout
    except (OSError, subprocess.CalledProcessError) as error:
        raise HandoutError(f"{repo} must be a git repository with git on PATH: {error}") from error
    paths = {name for name in listed.decode().split("\0") if name}
    return sorted(p for p in paths if (repo / p).is_file())


def exclusion_reason(path: str, repo: Path) -> str | None:
    """Why ``path`` stays out of the handout, or None when students get it."""
    parts = path.split("/")
    if any(part in EXCLUDED_PARTS for part in parts[:-1]) or parts[-1].endswith((".pyc", ".pyo")):
        return "cache"
    for prefix in EXCLUDED_DIRS:
        if path.startswith(prefix):
            return f"instructor-only directory {prefix}"
    if path in EXCLUDED_FILES:
        return "instructor-only file"
    if path.endswith(".py"):
        with open(repo / path, encoding="utf-8") as file:
            if file.readline().strip() == INSTRUCTOR_ONLY:
                return "hidden test (instructor-only)"
    return None


def instructor_targets(makefile: str) -> set[str]:
    """The targets the Makefile defines between MAKEFILE_BEGIN and MAKEFILE_END."""
    names, inside = set(), False
    for line in makefile.splitlines():
        if line.strip() in (MAKEFILE_BEGIN, MAKEFILE_END):
            inside = line.strip() == MAKEFILE_BEGIN
        elif inside and (match := re.match(r"([A-Za-z0-9_-]+):", line)):
            names.add(match.group(1))
    return names


def strip_instructor_targets(makefile: str) -> str:
    """The Makefile without the lines from MAKEFILE_BEGIN to MAKEFILE_END (both included), and
    without the names of the targets defined there in its ``.PHONY`` line (which may continue
    over several lines ending in a backslash; it comes back as one line)."""
    lines = makefile.splitlines(keepends=True)
    begins = [i for i, line in enumerate(lines) if line.strip() == MAKEFILE_BEGIN]
    ends = [i for i, line in enumerate(lines) if line.strip() == MAKEFILE_END]
    if len(begins) != len(ends) or any(b > e for b, e in zip(begins, ends)) or len(begins) > 1:
        raise HandoutError(f"Makefile: expected one '{MAKEFILE_BEGIN}' ... '{MAKEFILE_END}' "
                           f"block, found begins at lines {[b + 1 for b in begins]} and ends at "
                           f"lines {[e + 1 for e in ends]}")
    if not begins:
        return makefile
    before, after = lines[:begins[0]], lines[ends[0] + 1:]
    if before and after and not before[-1].strip() and not after[0].strip():
        after = after[1:]  # one blank line where the block was, not two
    dropped = instructor_targets(makefile)
    kept, phony = [], None  # phony: the .PHONY line read so far, across "\\" continuations
    for line in before + after:
        if phony is None and not line.startswith(".PHONY:"):
            kept.append(line)
            continue
        phony = (phony or "") + line.rstrip().removesuffix("\\") + " "
        if not line.rstrip().endswith("\\"):
            names = [name for name in phony[len(".PHONY:"):].split() if name not in dropped]
            kept.append(".PHONY: " + " ".join(names) + "\n")
            phony = None
    return "".join(kept)


def task_section(regions: list[Region], handout_tests: set[str]) -> str:
    """The students' README section: every stub, grouped by file in working order, with the test
    command of each file (only test modules that exist in the handout are named)."""
    by_file: dict[str, list[Region]] = {}
    for region in regions:
        by_file.setdefault(region.path, []).append(region)
    known = [p for p in TASK_ORDER if p in by_file]
    others = sorted(p for p in by_file if p not in TASK_ORDER)
    out = [
        "## Your tasks, in order\n\n",
        "Each task below is a `raise NotImplementedError(...)` line in the handout, under a "
        "`# TODO:` comment\nthat says what goes there; the docstring above it gives the shapes, "
        "the dtypes and the hints: read\nit whole first. Work from top to bottom (later parts use "
        "earlier ones) and run the file's test\nafter each task.\n",
    ]
    for number, path in enumerate(known + others, start=1):
        if path == BONUS_FIRST:
            out.append("\n**Bonus (0 points)**: the files below rebuild the whole model in numpy, "
                       "on top of your\nattention stack and checked against your PyTorch model: "
                       "finish the tasks above first.\n")
        tests = [t for t in TASK_ORDER.get(path, ()) if t in handout_tests]
        command = (", ".join(f"`python -m tests.{t}`" for t in tests) if tests
                   else "`make test`")
        out.append(f"\n### {number}. `{path}`\n\nTest: {command}\n\n")
        for region in by_file[path]:
            where = f"cell {region.cell}, " if region.cell is not None else ""
            function = region.qualname or "top-level code"
            out.append(f"- {where}`{function}`: {region.todo}\n")
    return "".join(out)


def grading_section() -> str:
    """The students' README section on what the autograder awards, from
    ``hw4lib/grading_numbers.py``."""
    rows = "".join(f"| `{category}` (mytorch) | {points} |\n"
                   for category, points in MYTORCH_RUBRIC.items())
    total = sum(MYTORCH_RUBRIC.values()) + LM_POINTS
    return (
        "## Grading\n\n"
        f"The autograder grades `{HANDIN_TAR}` out of {total} points:\n\n"
        f"| part | points |\n| --- | ---: |\n{rows}| `{LM_CATEGORY}` | {LM_POINTS} |\n\n"
        "Hidden tests like those of `tests/test_mytorch.py`, with other shapes, grade each mytorch "
        "class; each\nhidden test carries a share of its class's points. The language model "
        f"earns all {LM_POINTS} points at a\nper-character perplexity on hidden text of at most "
        f"{FULL_MARKS_PPL} (the pass mark), none at {ZERO_MARKS_PPL} or more, and a\nstraight line "
        "in between. The bonus earns no points. These numbers are in\n"
        "`hw4lib/grading_numbers.py`.\n"
    )


def replace_section(readme: str, marker: str, section: str) -> str:
    """``readme`` with the section that holds the line ``marker`` (from its ``## `` heading up to
    the next ``## `` heading, or the end) replaced by ``section``."""
    lines = readme.splitlines(keepends=True)
    marks = [i for i, line in enumerate(lines) if line.strip() == marker]
    if len(marks) != 1:
        raise HandoutError(f"README.md must hold the line {marker!r} exactly once, under the "
                           f"heading of the section it stands for; found it {len(marks)} times")
    headings = [i for i, line in enumerate(lines) if line.startswith("## ")]
    start = max((i for i in headings if i < marks[0]), default=None)
    if start is None:
        raise HandoutError(f"README.md:{marks[0] + 1}: {marker!r} must sit under a '## ' "
                           "heading: that section is what the generated text replaces")
    end = min((i for i in headings if i > marks[0]), default=len(lines))
    after = "".join(lines[end:])
    return "".join(lines[:start]) + section + ("\n" + after if after else "")


def student_readme(readme: str, regions: list[Region], handout_tests: set[str]) -> str:
    """The handout README: the repo's README with the sections that hold :data:`TASKS_MARKER`
    and :data:`GRADING_MARKER` replaced by :func:`task_section` and :func:`grading_section`. What
    those sections say in the repo is for instructors only."""
    with_tasks = replace_section(readme, TASKS_MARKER, task_section(regions, handout_tests))
    return replace_section(with_tasks, GRADING_MARKER, grading_section())


# ----------------------------------------------------------------------------------------------
# Building and checking the handout


@dataclass
class Handout:
    """What :func:`build` wrote."""

    out: Path
    files: list[str]             # repo-relative paths written, sorted
    regions: list[Region]        # every region replaced, in file order
    excluded: dict[str, str]     # tracked path -> why it was left out
    instructor_targets: frozenset[str] = frozenset()  # Makefile targets students do not get


def build(repo: Path, out: Path) -> Handout:
    """Write the handout tree of ``repo`` into the empty or missing directory ``out``."""
    if out.exists() and any(out.iterdir()):
        raise HandoutError(f"{out} is not empty; remove it or pick another --out")
    files, excluded, regions = [], {}, []
    tracked = tracked_files(repo)
    kept = []
    for path in tracked:
        reason = exclusion_reason(path, repo)
        if reason:
            excluded[path] = reason
        else:
            kept.append(path)
    handout_tests = {Path(p).stem for p in kept if re.fullmatch(r"tests/test_\w+\.py", p)}
    for path in kept:
        source = repo / path
        target = out / path
        target.parent.mkdir(parents=True, exist_ok=True)
        if path.endswith((".py", ".ipynb")):
            text = source.read_text(encoding="utf-8")
            found = file_regions(path, text)
            units = code_units(path, text)
            for cell in units:
                units[cell] = stub_out(units[cell], [r for r in found if r.cell == cell])
            target.write_text(replace_units(path, text, units, clear_outputs=True),
                              encoding="utf-8")
            shutil.copymode(source, target)
            regions.extend(found)
        elif path == "Makefile":
            target.write_text(strip_instructor_targets(source.read_text(encoding="utf-8")),
                              encoding="utf-8")
        elif path == "README.md":
            continue  # written last, once every region is known
        else:
            shutil.copy2(source, target)
        files.append(path)
    if "README.md" in kept:
        readme = student_readme((repo / "README.md").read_text(encoding="utf-8"), regions,
                                handout_tests)
        (out / "README.md").write_text(readme, encoding="utf-8")
        files.append("README.md")
    makefile = repo / "Makefile"
    targets = instructor_targets(makefile.read_text(encoding="utf-8")) if makefile.is_file() else []
    return Handout(out, sorted(files), regions, excluded, frozenset(targets))


def check_tree(handout: Handout) -> None:
    """Raise HandoutError when a marker or a hidden-test line survived, some code does not
    compile, a solution leaks, or a file mentions a file or an instructor-only make target that
    students do not get (the handout stands alone)."""
    problems = []
    left_out = sorted({next((d for d in EXCLUDED_DIRS if p.startswith(d)), p)
                       for p, reason in handout.excluded.items() if reason != "cache"}
                      - {"hw4_data/hw4p1_data/", "expts/", "dist/", ".venv/"})
    left_out += [f"make {target}" for target in sorted(handout.instructor_targets)]
    for path in handout.files:
        full = handout.out / path
        if Path(path).suffix not in TEXT_SUFFIXES:
            continue
        text = full.read_text(encoding="utf-8", errors="replace")
        for number, line in enumerate(text.splitlines(), start=1):
            if _is_marker_like(line) or line.strip() in (MAKEFILE_BEGIN, MAKEFILE_END):
                problems.append(f"{path}:{number}: marker survived: {line.strip()!r}")
        for name in left_out:
            whole = r"(?![\w-])" if name.startswith("make ") else ""  # make test != make test-x
            if re.search(re.escape(name) + whole, text) and path != ".gitignore":
                problems.append(f"{path} mentions {name}, which students do not get: reword it, "
                                f"or keep it to instructor-only files")
        if path.endswith(".py"):
            try:
                compile(text, path, "exec")
            except SyntaxError as error:
                problems.append(f"{path}:{error.lineno}: does not compile: {error.msg}")
        elif path.endswith(".ipynb"):
            problems.extend(_check_notebook_cells(path, text))
    texts = {path: (handout.out / path).read_text(encoding="utf-8", errors="replace")
             for path in handout.files if Path(path).suffix in LEAK_SUFFIXES}
    problems += [f"{leak.where}: gives away the solution of {leak.region}:\n"
                 + textwrap.indent(leak.code, "      ") for leak in find_leaks(handout.regions, texts)]
    if problems:
        raise HandoutError("the generated handout is broken:\n  " + "\n  ".join(problems))


def _check_notebook_cells(path: str, text: str) -> list[str]:
    try:
        from IPython.core.inputtransformer2 import TransformerManager
    except ImportError:
        return []
    problems = []
    for cell, lines in code_units(path, text).items():
        try:
            compile(TransformerManager().transform_cell("".join(lines)), f"{path}:{cell}", "exec")
        except SyntaxError as error:
            problems.append(f"{path} (cell {cell}):{error.lineno}: does not compile: {error.msg}")
    return problems


IMPORT_CHECK = """
import importlib, pkgutil, sys
failed = []
for package in sys.argv[1:]:
    importlib.import_module(package)
    for module in pkgutil.walk_packages(importlib.import_module(package).__path__, package + "."):
        try:
            importlib.import_module(module.name)
        except Exception as error:
            failed.append(f"{module.name}: {type(error).__name__}: {error}")
print("\\n".join(failed))
sys.exit(1 if failed else 0)
"""


def check_imports(root: Path, packages: tuple[str, ...] = IMPORT_PACKAGES) -> None:
    """Import every module of ``packages`` in a fresh interpreter with ``root`` as working
    directory; raise HandoutError listing the modules that fail."""
    present = tuple(p for p in packages if (root / p / "__init__.py").is_file())
    env = dict(os.environ, WANDB_MODE="disabled", PYTHONDONTWRITEBYTECODE="1",
               PYTHONPATH=str(root))
    result = subprocess.run([sys.executable, "-c", IMPORT_CHECK, *present], cwd=root, env=env,
                            capture_output=True, text=True, timeout=600)
    if result.returncode != 0:
        raise HandoutError(f"the handout does not import cleanly:\n{result.stdout}{result.stderr}")


def check_manifest(repo: Path) -> None:
    """HandoutError unless the state-dict manifest students get is the reference model's (a
    repository without the manifest's tool has none to check)."""
    if not (repo / "tools" / "state_dict_manifest.py").is_file():
        return
    check = subprocess.run([sys.executable, "-m", "tools.state_dict_manifest", "--check"],
                           cwd=repo, capture_output=True, text=True)
    if check.returncode != 0:
        raise HandoutError(f"the state-dict manifest is stale or could not be derived:\n"
                           f"{check.stdout}{check.stderr}")


def write_tarball(handout: Handout, tarball: Path, top: str = "hw4p1") -> None:
    """Pack the handout's files (and only them) under ``top/``, byte-for-byte reproducibly."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for path in handout.files:
            data = (handout.out / path).read_bytes()
            info = tarfile.TarInfo(f"{top}/{path}")
            info.size = len(data)
            info.mode = 0o755 if (handout.out / path).stat().st_mode & 0o111 else 0o644
            info.mtime = 0
            tar.addfile(info, io.BytesIO(data))
    tarball.parent.mkdir(parents=True, exist_ok=True)
    with open(tarball, "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", mtime=0,
                                                    filename="") as zipped:
        zipped.write(buffer.getvalue())


def _size(n_bytes: int) -> str:
    return f"{n_bytes / 1e6:.2f} MB" if n_bytes >= 1e6 else f"{n_bytes / 1e3:.1f} kB"


def main(argv: list[str] | None = None) -> Handout:
    parser = argparse.ArgumentParser(description="Write the student handout of this repository.")
    parser.add_argument("--repo", type=Path, default=REPO_ROOT, help="source repository")
    parser.add_argument("--out", type=Path, default=None,
                        help="handout directory (default <repo>/dist/handout; replaced if it is "
                             "the default, otherwise it must be empty or missing)")
    parser.add_argument("--no-tar", action="store_true", help="skip <out>.tar.gz")
    parser.add_argument("--no-import-check", action="store_true",
                        help="skip importing every module of the handout (saves a few seconds)")
    args = parser.parse_args(argv)
    repo = args.repo.resolve()
    out = (args.out or repo / "dist" / "handout").resolve()
    if args.out is None and out.exists():
        shutil.rmtree(out)
    try:
        check_manifest(repo)
        handout = build(repo, out)
        check_tree(handout)
        if not args.no_import_check:
            check_imports(out)
    except HandoutError as error:
        sys.exit(f"make_handout: {error}")

    by_file: dict[str, int] = {}
    for region in handout.regions:
        by_file[region.path] = by_file.get(region.path, 0) + 1
    print(f"{len(handout.regions)} solution regions stubbed in {len(by_file)} files:")
    for path, count in by_file.items():
        print(f"  {count:3d}  {path}")
    reasons: dict[str, int] = {}
    for reason in handout.excluded.values():
        reasons[reason] = reasons.get(reason, 0) + 1
    print(f"{len(handout.excluded)} tracked files left out: "
          + ", ".join(f"{n} {reason}" for reason, n in sorted(reasons.items())))
    tree_bytes = sum((out / p).stat().st_size for p in handout.files)
    print(f"wrote {out} ({len(handout.files)} files, {_size(tree_bytes)})")
    if not args.no_tar:
        tarball = out.with_name(out.name + ".tar.gz")
        write_tarball(handout, tarball)
        print(f"wrote {tarball} ({_size(tarball.stat().st_size)})")
    return handout


if __name__ == "__main__":
    main()
