"""Solution regions of the handout (``tools/make_handout.py``): finding them in a ``.py`` file or a
notebook code cell, replacing each by its stub, and putting the reference code back.

A region is ``# TODO: ...`` / ``# BEGIN SOLUTION`` / reference / ``# END SOLUTION``; its stub is
``raise NotImplementedError("<file>: <function>: <TODO text>")`` at the region's indentation, the
TODO comment kept above it. A ``.py`` file is one unit of code, a notebook one unit per code cell
(:func:`code_units`, :func:`replace_units`). Malformed regions raise :class:`HandoutError` with
``file:line`` and what to fix.
"""
from __future__ import annotations

import ast
import json
from dataclasses import dataclass

TODO_PREFIX = "# TODO:"
BEGIN_MARK = "# BEGIN SOLUTION"
END_MARK = "# END SOLUTION"


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


def is_marker_like(stripped: str) -> bool:
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
        elif is_marker_like(stripped):
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
