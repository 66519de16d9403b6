"""The canonical form of a mytorch module that the similarity (``classroom/similarity.py``)
fingerprints: what the code does rather than how it is spelled, so that a copy rewritten
statement by statement still reads as its original.

The module is parsed (never run) and rewritten:

- dropped: docstrings, comments, ``assert``, ``pass``, imports, ``del`` of names, expression
  statements without effect (no call that may change state: a call is kept unless it is a
  builtin or numpy/math function known not to mutate, or a method known not to mutate its
  receiver, and none passes ``out=``), inside a function, assignments to names the function
  never reads (their value kept as an expression statement when it may change state), and
  stores without effect of attributes the handin never reads nor sets in an ``__init__``;
- ``np.asarray(x)``, ``np.array(x)``, ``np.copy(x)``, ``x.copy()``, ``x.view()`` and ``+x`` are
  ``x`` (so ``x = np.asarray(x)`` is ``x = x``, dropped);
- one spelling for equivalent numpy: ``np.matmul``/``np.dot``/``a.dot(b)`` and ``einsum`` of a
  plain matrix product are ``@``; ``np.transpose(a)``, ``a.transpose()`` and swapping the last
  two axes are ``a.T``; the arithmetic ufuncs are their operators; ``sqrt`` is ``** 0.5``;
  ``np.sum(a, ...)`` and the other reductions are methods; ``x op= y`` is ``x = x op y``;
  ``* 1``, ``/ 1``, ``+ 0`` and ``- 0`` vanish; ``np.newaxis`` is ``None``; keyword arguments
  are sorted; a branch of an ``if`` on a constant is the only one kept;
- methods within each class, and a module's functions and classes, sorted by name (their
  order in the file is the student's choice).

Names are left as they are: copydetect's tokens read every name as one token. Each line of the
canonical form keeps the source lines of the statement it came from, so that a report points at
the student's own lines.

A module that does not parse, or whose text or tree exceeds MAX_TEXT / MAX_NODES / MAX_DEPTH,
has no canonical form (:func:`canonical` returns None): the caller fingerprints its raw text.
"""
from __future__ import annotations

import ast
import builtins
import io
import keyword
import tokenize
import zlib
from collections import Counter
from typing import NamedTuple

from hw4lib.handin_format import MAX_PY_FILE_BYTES

MAX_TEXT = MAX_PY_FILE_BYTES  # characters: the grader reads no larger mytorch file
MAX_NODES = 200_000  # an honest mytorch module has a few thousand
MAX_DEPTH = 100  # nesting of the tree: an honest module's is under 30
NUMPY, MATH = "np", "math"
PURE_BUILTINS = frozenset({
    "abs", "all", "any", "bool", "dict", "divmod", "enumerate", "float", "format", "frozenset",
    "getattr", "hasattr", "hash", "id", "int", "isinstance", "issubclass", "len", "list", "max",
    "min", "pow", "print", "range", "repr", "reversed", "round", "set", "sorted", "str", "sum",
    "tuple", "type", "zip"})
# numpy functions that write into an argument (a ufunc's ``at`` included), and numpy's random
# state, which a draw changes
MUTATING_NUMPY = frozenset({"copyto", "put", "place", "putmask", "fill_diagonal", "at", "random",
                            "put_along_axis", "seterr"})
PURE_METHODS = frozenset({
    "all", "any", "argmax", "argmin", "astype", "clip", "conj", "copy", "cumsum", "dot", "flatten",
    "item", "max", "mean", "min", "nonzero", "prod", "ravel", "reshape", "round", "squeeze",
    "std", "sum", "swapaxes", "tolist", "transpose", "var", "view"})
UFUNCS = {"add": ast.Add, "subtract": ast.Sub, "multiply": ast.Mult, "divide": ast.Div,
          "true_divide": ast.Div, "floor_divide": ast.FloorDiv, "power": ast.Pow,
          "matmul": ast.MatMult, "dot": ast.MatMult}
# numpy functions that, on an array, return it or a copy of it: the argument itself
IDENTITIES = frozenset({"asarray", "asanyarray", "ascontiguousarray", "array", "copy"})
REDUCTIONS = {"sum": "sum", "max": "max", "amax": "max", "min": "min", "amin": "min",
              "mean": "mean", "reshape": "reshape", "prod": "prod"}
ALIASES = {"np": NUMPY, "numpy": NUMPY, "math": MATH}
KNOWN_NAMES = frozenset({*dir(builtins), "self", *ALIASES})
FSTRING = {getattr(tokenize, name) for name in ("FSTRING_START", "FSTRING_MIDDLE", "FSTRING_END")
           if hasattr(tokenize, name)}
NEUTRAL = {ast.Mult: 1, ast.Div: 1, ast.Add: 0, ast.Sub: 0}  # x op this == x
# the code points a token of more than one character is drawn from: CJK ideographs, clear of the
# one-character (ASCII) tokens
SYMBOLS_FROM, SYMBOLS = 0x4E00, 20_000  # pragma: no mutate (equivalent: any range clear of ASCII)


class Canonical(NamedTuple):
    """A module's canonical form as tokens: ``tokens``, one character per token (see
    :func:`tokens_of`); ``lines``, for each token, the (first, last) source lines (1-based) it came
    from; ``parsed``, whether the module had a canonical form (else the tokens are its raw
    text's)."""

    tokens: str
    lines: tuple[tuple[int, int], ...]
    parsed: bool


def canonical(source: str, attributes: frozenset[str] | None = None) -> Canonical:
    """The Canonical form of the module ``source``; when it does not parse or exceeds MAX_TEXT
    characters, MAX_NODES nodes or MAX_DEPTH levels of nesting, the tokens of its raw text (the
    first MAX_TEXT characters, as far as Python's tokenizer reads them). ``attributes``: the
    :func:`used_attributes` of the whole handin (None: of this module alone); stores without
    effect of any other attribute are dropped."""
    tree = bounded_tree(source)
    if tree is None:
        spans = [(line, line) for line in range(1, source.count("\n", 0, MAX_TEXT) + 2)]
        tokens, lines = tokens_of(source[:MAX_TEXT], spans)
        return Canonical(tokens, lines, False)
    tree = Spelling(module_aliases(tree)).visit(tree)
    emitted: list[tuple[str, tuple[int, int]]] = []
    if attributes is None:
        attributes = used_attributes([source])
    unread = frozenset(node.attr for node in ast.walk(tree) if isinstance(node, ast.Attribute)
                       and isinstance(node.ctx, ast.Store)) - attributes
    emit(ordered(pruned(tree.body, unread)), "", emitted)
    tokens, lines = tokens_of("".join(f"{line}\n" for line, _ in emitted),
                              [span for _, span in emitted])
    return Canonical(tokens, lines, True)


def tokens_of(text: str, spans: list[tuple[int, int]]) -> tuple[str, tuple[tuple[int, int], ...]]:
    """(one character per token of the Python ``text``, the span of ``spans`` of each token's
    line): a name is ``V`` unless it follows a dot (an attribute or method) or is a keyword,
    a builtin, ``self`` or a module of ALIASES, each of which (and each operator and number) is
    a character of its own; a string is ``S``; a statement's end ``;``; comments, blank lines and
    indentation are left out. Reading stops where the tokenizer fails."""
    out, lines, previous = [], [], ""
    try:
        for token in tokenize.generate_tokens(io.StringIO(text).readline):
            if token.type in (tokenize.COMMENT, tokenize.NL, tokenize.INDENT, tokenize.DEDENT,
                              tokenize.ENDMARKER) or token.string == "":
                continue
            if token.type == tokenize.NAME and previous != "." and not (
                    keyword.iskeyword(token.string) or token.string in KNOWN_NAMES):
                character = "V"
            elif token.type == tokenize.STRING or token.type in FSTRING:
                character = "S"
            elif token.type == tokenize.NEWLINE:
                character = ";"
            else:
                character = symbol(token.string)
            out.append(character)
            lines.append(spans[min(token.start[0], len(spans)) - 1])
            previous = token.string
    except (tokenize.TokenError, IndentationError, SyntaxError):
        pass
    return "".join(out), tuple(lines)


def symbol(text: str) -> str:
    """One character standing for the token ``text``, the same in every process."""
    if len(text) == 1 and text not in "VS;":
        return text
    return chr(SYMBOLS_FROM + zlib.crc32(text.encode("utf-8")) % SYMBOLS)


def bounded_tree(source: str) -> ast.Module | None:
    """``source`` parsed, or None when it does not parse or is over the bounds; the size is
    checked before parsing, the tree's nodes and depth without recursion."""
    if len(source) > MAX_TEXT:
        return None
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    stack, count = [(tree, 1)], 0
    while stack:
        node, depth = stack.pop()
        count += 1
        if depth > MAX_DEPTH or count > MAX_NODES:
            return None
        stack.extend((child, depth + 1) for child in ast.iter_child_nodes(node))
    return tree


def module_aliases(tree: ast.Module) -> dict[str, str]:
    """{name bound in the module: NUMPY or MATH} for ``np``, ``numpy``, ``math`` and every name
    an ``import numpy as ...`` / ``import math as ...`` binds."""
    aliases = dict(ALIASES)
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name in ("numpy", "math"):
                    aliases[alias.asname or alias.name] = NUMPY if alias.name == "numpy" else MATH
    return aliases


def dotted(node: ast.expr, aliases: dict[str, str]) -> str | None:
    """``np.linalg.norm`` for an attribute chain rooted at a numpy (or math) alias, else None."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name) and node.id in aliases:
        return ".".join([aliases[node.id], *reversed(parts)])
    return None


def is_constant(node: ast.expr, value) -> bool:
    return isinstance(node, ast.Constant) and type(node.value) in (int, float) and \
        node.value == value


def axis(node: ast.expr) -> object:
    """The value of a literal axis argument (``-1``), else None."""
    try:
        return ast.literal_eval(node)
    except ValueError:
        return None


def last_two_axes(first: ast.expr, second: ast.expr) -> bool:
    """Whether two axis arguments are -1 and -2, in either order."""
    return [axis(first), axis(second)] in ([-1, -2], [-2, -1])


class Spelling(ast.NodeTransformer):
    """Rewrites equivalent numpy spellings to one (bottom-up); ``aliases`` as
    :func:`module_aliases` gives."""

    def __init__(self, aliases: dict[str, str]):
        self.aliases = aliases

    def visit_Name(self, node: ast.Name) -> ast.Name:
        """A numpy or math alias under its usual name, which :func:`pure` knows."""
        if node.id in self.aliases:
            return ast.copy_location(ast.Name(self.aliases[node.id], node.ctx), node)
        return node

    def visit_AugAssign(self, node: ast.AugAssign) -> ast.Assign:
        node = self.generic_visit(node)
        load = ast.fix_missing_locations(type(node.target)(**{
            **{field: getattr(node.target, field) for field in node.target._fields},
            "ctx": ast.Load()}))
        value = self.visit(ast.copy_location(ast.BinOp(load, node.op, node.value), node))
        return ast.copy_location(ast.Assign([node.target], value), node)

    def visit_Attribute(self, node: ast.Attribute) -> ast.expr:
        node = self.generic_visit(node)
        if dotted(node, self.aliases) == f"{NUMPY}.newaxis":
            return ast.copy_location(ast.Constant(None), node)
        return node

    def visit_UnaryOp(self, node: ast.UnaryOp) -> ast.expr:
        node = self.generic_visit(node)
        return node.operand if isinstance(node.op, ast.UAdd) else node

    def visit_BinOp(self, node: ast.BinOp) -> ast.expr:
        node = self.generic_visit(node)
        neutral = NEUTRAL.get(type(node.op))
        if neutral is not None and is_constant(node.right, neutral):
            return node.left
        if isinstance(node.op, (ast.Mult, ast.Add)) and is_constant(node.left, neutral):
            return node.right
        return node

    def visit_Call(self, node: ast.Call) -> ast.expr:
        node = self.generic_visit(node)
        node.keywords.sort(key=lambda keyword: keyword.arg or "")
        name = dotted(node.func, self.aliases)
        args, plain = node.args, not node.keywords
        method = node.func.attr if isinstance(node.func, ast.Attribute) and name is None else None
        rewritten = None
        if name is not None and name.startswith(f"{NUMPY}."):
            rewritten = self.numpy_call(name.removeprefix(f"{NUMPY}."), node)
        elif name in (f"{MATH}.sqrt",) and len(args) == 1 and plain:
            rewritten = ast.BinOp(args[0], ast.Pow(), ast.Constant(0.5))
        elif method in ("copy", "view") and not args and plain:
            rewritten = node.func.value
        elif method == "dot" and len(args) == 1 and plain:
            rewritten = ast.BinOp(node.func.value, ast.MatMult(), args[0])
        elif method in ("transpose", "swapaxes") and plain and (
                (method == "transpose" and not args)
                or (method == "swapaxes" and len(args) == 2 and last_two_axes(*args))):
            rewritten = transposed(node.func.value)
        return node if rewritten is None else ast.copy_location(rewritten, node)

    def numpy_call(self, function: str, node: ast.Call) -> ast.expr | None:
        """The one spelling of ``np.<function>(...)``, or None when it has none other."""
        args, plain = node.args, not node.keywords
        if function in IDENTITIES and len(args) == 1 and plain:
            return args[0]
        if function in UFUNCS and len(args) == 2 and plain:
            return ast.BinOp(args[0], UFUNCS[function](), args[1])
        if function == "negative" and len(args) == 1 and plain:
            return ast.UnaryOp(ast.USub(), args[0])
        if function == "sqrt" and len(args) == 1 and plain:
            return ast.BinOp(args[0], ast.Pow(), ast.Constant(0.5))
        if plain and ((function == "transpose" and len(args) == 1) or (
                function == "swapaxes" and len(args) == 3 and last_two_axes(*args[1:]))):
            return transposed(args[0])
        if function == "einsum" and len(args) == 3 and plain:
            return einsum_product(args)
        if (function in REDUCTIONS or function == "add.reduce") and args and not any(
                keyword.arg == "out" for keyword in node.keywords):
            method = REDUCTIONS.get(function, "sum")
            return ast.Call(ast.Attribute(args[0], method, ast.Load()), args[1:], node.keywords)
        return None


def transposed(node: ast.expr) -> ast.expr:
    return ast.Attribute(node, "T", ast.Load())


def einsum_product(args: list[ast.expr]) -> ast.expr | None:
    """``np.einsum(spec, a, b)`` as ``@`` of ``a``, ``b`` (or their ``.T``) when ``spec`` is a
    plain matrix product over the last two axes (a leading ``...`` on every term allowed), else
    None."""
    spec, a, b = args
    if not (isinstance(spec, ast.Constant) and isinstance(spec.value, str)):
        return None
    text = spec.value.replace(" ", "")
    batched = text.startswith("...")
    terms = text.replace("...", "").replace("->", ",").split(",")
    if len(terms) != 3 or any(len(term) != 2 for term in terms) or (
            batched and text.count("...") != 3) or len(set(terms[0] + terms[1])) != 3:
        return None
    (first, second, out), shared = terms, set(terms[0]) & set(terms[1])
    if len(shared) != 1 or shared & set(out):
        return None
    [inner] = shared
    left = a if first[1] == inner else transposed(a)
    right = b if second[0] == inner else transposed(b)
    free = first.replace(inner, "") + second.replace(inner, "")
    if out == free:
        return ast.BinOp(left, ast.MatMult(), right)
    if out == free[::-1]:
        return ast.BinOp(transposed(right), ast.MatMult(), transposed(left))
    return None


def pure(node: ast.AST) -> bool:
    """Whether evaluating the expression ``node`` changes no state: every call in it is to a
    builtin of PURE_BUILTINS, a numpy/math function outside MUTATING_NUMPY or a method of
    PURE_METHODS, none with ``out=``; no assignment expression, lambda, yield or await."""
    for inner in ast.walk(node):
        if isinstance(inner, (ast.NamedExpr, ast.Lambda, ast.Yield, ast.YieldFrom, ast.Await)):
            return False
        if not isinstance(inner, ast.Call):
            continue
        if any(keyword.arg in ("out", None) for keyword in inner.keywords):
            return False
        name = dotted(inner.func, ALIASES)
        if name is not None:
            if set(name.split(".")) & MUTATING_NUMPY:
                return False
        elif isinstance(inner.func, ast.Name):
            if inner.func.id not in PURE_BUILTINS:
                return False
        elif not (isinstance(inner.func, ast.Attribute) and inner.func.attr in PURE_METHODS):
            return False
    return True


def used_attributes(sources) -> frozenset[str]:
    """The attribute names the modules ``sources`` (texts: a handin's files) read anywhere (an
    augmented assignment's target included) or set in an ``__init__`` (the state a class declares, such as the gradients the tests read); a
    module without a bounded parse adds none."""
    used = set()
    for tree in map(bounded_tree, sources):
        for node in ast.walk(tree or ast.Module([], [])):
            if isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Load):
                used.add(node.attr)
            if isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Attribute):
                used.add(node.target.attr)  # ``x.a += 1`` reads x.a
            if isinstance(node, ast.FunctionDef) and node.name == "__init__":
                used |= {inner.attr for inner in ast.walk(node)
                         if isinstance(inner, ast.Attribute) and isinstance(inner.ctx, ast.Store)}
    return frozenset(used)


def pruned(body: list[ast.stmt], unread: frozenset[str]) -> list[ast.stmt]:
    """``body`` without the statements that do nothing (see the module's docstring), recursively
    into every nested body; each function's dead stores removed too, and every store without
    effect of an attribute of ``unread``."""
    kept = []
    for node in body:  # a docstring is an expression statement without effect
        if isinstance(node, (ast.Assert, ast.Pass, ast.Import, ast.ImportFrom)) or (
                isinstance(node, ast.Assign) and pure(node.value) and all(
                    isinstance(target, ast.Attribute) and target.attr in unread
                    for target in node.targets)) or (
                isinstance(node, ast.Expr) and pure(node.value)) or (
                isinstance(node, ast.Delete) and all(isinstance(target, ast.Name)
                                                     for target in node.targets)) or (
                isinstance(node, ast.Assign)
                and [ast.unparse(target) for target in node.targets] == [ast.unparse(node.value)]):
            continue
        if isinstance(node, ast.If) and isinstance(node.test, ast.Constant):
            kept += pruned(node.body if node.test.value else node.orelse, unread)
            continue
        for field in ("body", "orelse", "finalbody"):
            if isinstance(getattr(node, field, None), list):
                setattr(node, field, pruned(getattr(node, field), unread))
        for handler in getattr(node, "handlers", []):
            handler.body = pruned(handler.body, unread)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            node.body = without_dead_stores(node)
        kept.append(node)
    return kept


def without_dead_stores(function: ast.FunctionDef | ast.AsyncFunctionDef) -> list[ast.stmt]:
    """The body of ``function`` without the assignments, at any depth of its own statements, to
    names it never reads; an assignment whose value may change state becomes that value's
    expression statement. One pass, last statement first, counting the reads left: a chain of
    stores each read only by the next one goes at once (its cost stays linear in the body)."""
    reads = Counter(node.id for node in ast.walk(function)
                    if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Store))
    for node in ast.walk(function):
        if isinstance(node, (ast.Global, ast.Nonlocal)):
            reads.update(node.names)  # read outside the function
    return stores_removed(function.body, reads)


def stores_removed(body: list[ast.stmt], reads: Counter) -> list[ast.stmt]:
    """``body`` without its assignments to names ``reads`` counts no read of, last statement
    first, into nested compound statements but not nested functions or classes; the reads in a
    removed assignment's value are taken off ``reads``."""
    kept = []
    for node in reversed(body):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(
            node, ast.AnnAssign) else None
        if targets is not None and all(isinstance(target, ast.Name) and reads[target.id] <= 0
                                       for target in targets):
            if node.value is not None and not pure(node.value):
                kept.append(ast.copy_location(ast.Expr(node.value), node))
            elif node.value is not None:
                reads.subtract(inner.id for inner in ast.walk(node.value)
                               if isinstance(inner, ast.Name))
            continue
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            for field in ("body", "orelse", "finalbody"):
                if isinstance(getattr(node, field, None), list):
                    setattr(node, field, stores_removed(getattr(node, field), reads))
            for handler in getattr(node, "handlers", []):
                handler.body = stores_removed(handler.body, reads)
        kept.append(node)
    return kept[::-1]


def ordered(body: list[ast.stmt]) -> list[ast.stmt]:
    """``body`` with its functions and classes after its other statements, sorted by name, and
    each class's body ordered the same way."""
    definitions = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
    for node in body:
        if isinstance(node, ast.ClassDef):
            node.body = ordered(node.body)
    return [node for node in body if not isinstance(node, definitions)] + sorted(
        (node for node in body if isinstance(node, definitions)), key=lambda node: node.name)


def emit(body: list[ast.stmt], indent: str, lines: list[tuple[str, tuple[int, int]]]) -> None:
    """Appends to ``lines`` (text, (first, last) source line) the canonical lines of ``body``:
    a compound statement's header on its own line, its blocks indented under it."""
    for node in body:
        blocks = compound(node)
        if blocks is None:
            for line in ast.unparse(node).splitlines():
                lines.append((indent + line, (node.lineno, node.end_lineno)))
            continue
        for index, (header, block) in enumerate(blocks):
            if index and not block:
                continue
            if header:
                lines.append((indent + header, (node.lineno, node.lineno)))
            emit(block, indent + "    ", lines)


def compound(node: ast.stmt) -> list[tuple[str, list[ast.stmt]]] | None:
    """[(header line, its block)] of a compound statement, or None for a simple one (and for
    the rare compound ones, written whole)."""
    text = ast.unparse
    if isinstance(node, ast.FunctionDef):
        decorators = "".join(f"@{text(decorator)} " for decorator in node.decorator_list)
        return [(f"{decorators}def {node.name}({text(node.args)}):", node.body)]
    if isinstance(node, ast.ClassDef):  # no header: where a method is defined is the student's
        return [("", node.body)]
    if isinstance(node, ast.If):
        return [(f"if {text(node.test)}:", node.body), ("else:", node.orelse)]
    if isinstance(node, ast.For):
        return [(f"for {text(node.target)} in {text(node.iter)}:", node.body),
                ("else:", node.orelse)]
    if isinstance(node, ast.While):
        return [(f"while {text(node.test)}:", node.body), ("else:", node.orelse)]
    if isinstance(node, ast.With):
        return [(f"with {', '.join(text(item) for item in node.items)}:", node.body)]
    if isinstance(node, ast.Try):
        return [("try:", node.body), *[(
            f"except {text(handler.type) if handler.type else ''}"
            f"{' as ' + handler.name if handler.name else ''}:", handler.body)
            for handler in node.handlers], ("else:", node.orelse), ("finally:", node.finalbody)]
    return None
