"""Find solution code that a handout shows outside its regions (``make handout`` refuses it).

A solution region is given away when two of its consecutive statements appear, one after the
other, anywhere in the handout: given code, tests, the notebook, the README and its task list,
comments (a TODO line included). Statements are compared after normalisation, so renaming the
variables or re-spacing a copy does not hide it:

* a statement is a logical line of Python tokens (comments, blank lines and line continuations
  dropped); comment blocks and prose are read as code too: a line's code spans (Markdown
  backquotes) or, without any, the line after its leading label (``TODO:``) split at semicolons;
* names that are not attributes, keyword-argument names, keywords or builtins become ``_``, so
  ``scores = torch.where(finished, scores, s)`` and ``total = torch.where(done, total, t)`` match
  while ``x.max(dim=-1)`` and ``x.min(dim=-1)`` do not;
* statements of fewer than MIN_TOKENS tokens (``return x``, ``break``, ``else:``) are too common
  to tell anything and are skipped.
"""
from __future__ import annotations

import builtins
import io
import json
import keyword
import re
import textwrap
import tokenize
from dataclasses import dataclass
from typing import Iterable, Iterator

MIN_TOKENS = 6
_SKIPPED = {tokenize.COMMENT, tokenize.NL, tokenize.INDENT, tokenize.DEDENT, tokenize.ENCODING,
            tokenize.ENDMARKER}
_KEPT_NAMES = set(keyword.kwlist) | set(dir(builtins))
_LABEL = re.compile(r"^\s*#*\s*(?:[A-Za-z][\w ]{0,20}:\s)?")  # "# TODO: ", "  hint: "


@dataclass(frozen=True)
class Statement:
    tokens: tuple[str, ...]  # normalised
    line: int                # 1-based, in the text it was read from


@dataclass(frozen=True)
class Leak:
    region: str   # the region's file:line
    where: str    # file:line (and cell) of the copy
    code: str     # the region's two statements, as written there


def statements(text: str, line_numbers: list[int] | None = None) -> list[Statement]:
    """The normalised non-trivial statements of ``text``, each with its line (``line_numbers[i]``
    for the text's line i + 1, when given); a part that does not tokenize (unbalanced brackets in
    prose, a stray quote) ends the reading of that text."""
    found, tokens, start = [], [], None
    previous, depth = "", 0
    try:
        for token in tokenize.generate_tokens(io.StringIO(text).readline):
            if token.type in _SKIPPED:
                continue
            if token.type == tokenize.NEWLINE:
                if len(tokens) >= MIN_TOKENS:
                    found.append(Statement(tuple(tokens), _line(start, line_numbers)))
                tokens, start, previous, depth = [], None, "", 0
                continue
            start = token.start[0] if start is None else start
            tokens.append(_normalise(token, previous, depth))
            depth += (token.string in "([{") - (token.string in ")]}") if token.type == tokenize.OP else 0
            previous = token.string
    except (tokenize.TokenError, IndentationError, SyntaxError):
        pass
    if len(tokens) >= MIN_TOKENS:
        found.append(Statement(tuple(tokens), _line(start, line_numbers)))
    return found


def _line(number: int, line_numbers: list[int] | None) -> int:
    return number if line_numbers is None else line_numbers[min(number, len(line_numbers)) - 1]


def _normalise(token: tokenize.TokenInfo, previous: str, depth: int) -> str:
    """The token as compared: see the module docstring; ``depth`` counts the open brackets."""
    if token.type == tokenize.NAME and previous != "." and token.string not in _KEPT_NAMES:
        follows = token.line[token.end[1]:].lstrip()
        is_keyword_argument = depth > 0 and follows.startswith("=") and not follows.startswith("==")
        return token.string if is_keyword_argument else "_"
    if token.type == tokenize.STRING:
        return "'s'"
    return token.string


def pairs(found: list[Statement]) -> Iterator[tuple[tuple, Statement, Statement]]:
    """(key, first, second) of every two consecutive statements."""
    for first, second in zip(found, found[1:]):
        yield (first.tokens, second.tokens), first, second


def text_pieces(path: str, text: str) -> Iterable[tuple[str, list[int], str]]:
    """(label, original line number of each line, text) of every part of a handout file to read
    as statements: a .py file whole and each block of its comment lines, a notebook's code cells
    and the prose of every cell, a Markdown or text file's prose."""
    if path.endswith(".ipynb"):
        for number, cell in enumerate(json.loads(text)["cells"], start=1):
            source = cell["source"]
            source = "".join(source) if isinstance(source, list) else source
            label = f"{path} (cell {number})"
            if cell["cell_type"] == "code":
                yield label, list(range(1, source.count("\n") + 2)), source
            yield (label, *_prose(source.splitlines()))
        return
    lines = text.splitlines()
    if not path.endswith(".py"):
        yield (path, *_prose(lines))
        return
    yield path, list(range(1, len(lines) + 2)), text
    block: list[int] = []
    for number, line in enumerate([*lines, ""], start=1):
        if line.lstrip().startswith("#"):
            block.append(number)
        elif block:  # a block of comment lines (a TODO and its continuation lines, a hint)
            numbers, piece = _prose([lines[n - 1] for n in block])
            yield path, [block[i - 1] for i in numbers], piece
            block = []


def _prose(lines: list[str]) -> tuple[list[int], str]:
    """Prose lines as code: a line's code spans (between backquotes) when it has some, otherwise
    the line without its comment mark and a leading label (``TODO:``), split at semicolons.
    Returns the number (1-based, among ``lines``) of each line of the code, and the code."""
    numbers, code = [], []
    for number, line in enumerate(lines, start=1):
        spans = re.findall(r"`([^`]+)`", line)
        if not spans:
            spans = _LABEL.sub("", line).split(";")
        numbers += [number] * len(spans)
        code += spans
    return numbers + [len(lines)], "\n".join(code)


def find_leaks(regions, files: dict[str, str]) -> list[Leak]:
    """Every place in ``files`` ({path: handout text}) holding two consecutive statements of a
    region (``regions``: objects with ``where`` and ``body``, the reference lines)."""
    wanted: dict[tuple, tuple[str, str]] = {}
    for region in regions:
        body = textwrap.dedent("".join(region.body))
        lines = body.splitlines()
        for key, first, second in pairs(statements(body)):
            code = "\n".join(lines[first.line - 1:second.line])
            wanted.setdefault(key, (region.where, code))
    leaks = []
    for path, text in files.items():
        for label, line_numbers, piece in text_pieces(path, text):
            for key, first, _ in pairs(statements(piece, line_numbers)):
                if key in wanted:
                    region, code = wanted[key]
                    leaks.append(Leak(region, f"{label}:{first.line}", code))
    return sorted(set(leaks), key=lambda leak: (leak.where, leak.region))
