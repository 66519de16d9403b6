# hw4p1: instructor-only
"""The similarity's canonical form (autograder/classroom/canonical_code.py), rule by rule: each
equivalent spelling read as one and, beside it, the nearest different computation kept apart;
each kind of statement without effect dropped and each statement that may change state kept
(``out=``, mutating numpy functions and methods, unknown calls, ``yield``, globals); the tokens,
the source lines each token keeps, the order of definitions and the parse bounds.

    .venv/bin/python -m pytest -q tests/classroom/test_canonical_code.py
"""
import ast
import builtins
import keyword
import time
import token

import pytest

from autograder.classroom.canonical_code import (MAX_DEPTH, MAX_TEXT, bounded_tree, canonical,
                                                 tokens_of, used_attributes)

RETURN = "return x + y"


def body(statements: str, imports: str = "import numpy as np\nimport math\n") -> str:
    """A module of ``imports`` and one function whose body is ``statements`` (one a line)."""
    return imports + "\n\ndef f(a, b, x, y, d):\n" + "".join(
        f"    {line}\n" for line in statements.splitlines())


def tokens(statements: str, imports: str = "import numpy as np\nimport math\n") -> str:
    return canonical(body(statements, imports)).tokens


SPELLINGS = {  # rule: spellings of one computation
    "matrix product": ["return a @ b", "return np.matmul(a, b)", "return numpy.matmul(a, b)",
                       "return np.dot(a, b)",
                       "return a.dot(b)", "return np.einsum('ij,jk->ik', a, b)",
                       "return np.einsum('...ij,...jk->...ik', a, b)",
                       "return np.einsum(' ij, jk -> ik ', a, b)"],
    "product with a transpose": ["return a @ b.T", "return np.einsum('bi,oi->bo', a, b)",
                                 "return np.matmul(a, np.swapaxes(b, -1, -2))",
                                 "return a.dot(b.transpose())"],
    "product of transposes": ["return a.T @ b", "return np.einsum('ji,jk->ik', a, b)"],
    "transposed product": ["return (b.T @ a.T).T", "return np.einsum('ij,jk->ki', a, b).T"],
    "transpose": ["return x.T", "return np.transpose(x)", "return x.transpose()",
                  "return np.swapaxes(x, -2, -1)", "return np.swapaxes(x, -1, -2)",
                  "return x.swapaxes(-1, -2)", "return x.swapaxes(-2, -1)"],
    "augmented assignment": ["x += y\nreturn x", "x = x + y\nreturn x",
                             "x = np.add(x, y)\nreturn x"],
    "augmented attribute": ["a.W -= d * b\nreturn a", "a.W = a.W - d * b\nreturn a"],
    "augmented item": ["x[0] *= y\nreturn x", "x[0] = x[0] * y\nreturn x"],
    "ufuncs": ["return a * b - x / y", "return np.subtract(np.multiply(a, b), np.divide(x, y))",
               "return np.subtract(a * b, np.true_divide(x, y))"],
    "floor division and power": ["return a // b + x ** y",
                                 "return np.add(np.floor_divide(a, b), np.power(x, y))"],
    "negative": ["return -x", "return np.negative(x)"],
    "square root": ["return x / math.sqrt(d)", "return x / np.sqrt(d)", "return x / d ** 0.5"],
    "identities": ["return x", "return np.asarray(x)", "return np.asanyarray(x)",
                   "return np.ascontiguousarray(x)", "return np.array(x)", "return np.copy(x)",
                   "return x.copy()", "return x.view()", "return +x"],
    "sum": ["return np.sum(x, axis=0)", "return x.sum(axis=0)", "return np.add.reduce(x, axis=0)"],
    "sum, positional axis": ["return np.sum(x, 0)", "return x.sum(0)"],
    "sum, three arguments": ["return np.sum(x, 0, float)", "return x.sum(0, float)"],
    "max": ["return np.max(x, axis=d, keepdims=True)", "return np.amax(x, keepdims=True, axis=d)",
            "return x.max(axis=d, keepdims=True)"],
    "min": ["return np.min(x)", "return np.amin(x)", "return x.min()"],
    "mean": ["return np.mean(x, axis=-1)", "return x.mean(axis=-1)"],
    "prod": ["return np.prod(x)", "return x.prod()"],
    "reshape": ["return np.reshape(x, (d, -1))", "return x.reshape((d, -1))"],
    "neutral elements": ["return x", "return x * 1", "return 1 * x", "return x / 1",
                         "return x + 0", "return 0 + x", "return x - 0"],
    "new axis": ["return x[:, np.newaxis]", "return x[:, None]"],
    "keyword order": ["return g(x, b=1, a=2)", "return g(x, a=2, b=1)"],
    "true branch": ["if True:\n    y = a\nelse:\n    y = b\nreturn x + y",
                    "if 1:\n    y = a\nreturn x + y", "y = a\nreturn x + y"],
    "false branch": ["if False:\n    y = a\nelse:\n    y = b\nreturn x + y", "y = b\nreturn x + y"],
}


@pytest.mark.parametrize("rule", SPELLINGS)
def test_each_equivalent_spelling_is_one(rule):
    """Each spelling of one computation has the same canonical tokens."""
    spellings = SPELLINGS[rule]
    assert len({tokens(spelling) for spelling in spellings}) == 1, [
        (spelling, tokens(spelling)) for spelling in spellings]


def test_numpy_and_math_under_other_names_are_read_as_numpy_and_math():
    """``import numpy as xp`` and ``import math as m`` bind the same functions."""
    assert tokens("return xp.matmul(a, b) / m.sqrt(d)", "import numpy as xp\nimport math as m\n"
                  ) == tokens("return a @ b / d ** 0.5")
    assert tokens("return m.matmul(a, b)", "import math as m\n") != tokens(
        "return m.matmul(a, b)", "import numpy as m\n")


NOT_THE_SAME = [  # (spelling, the rewrite it must not be read as): different computations
    ("return a @ b", "return a * b"), ("return a @ b", "return a @ b.T"),
    ("return a * b", "return b"), ("return x * y", "return y"),
    ("return x.T", "return np.swapaxes(x, 0, 1)"), ("return x.T", "return x.swapaxes(0, 1)"),
    ("return x.T", "return x.transpose(0, 2, 1)"), ("return x.T", "return np.transpose(x, (1, 0))"),
    ("return x.T", "return np.swapaxes(x, d, -1)"), ("return x.T", "return x.swapaxes(d, -2)"),
    ("return np.einsum('ij,jk->ik', a, b)", "return np.einsum('ij,kj->ik', a, b)"),
    ("return np.einsum('ij,ij->i', a, b)", "return a @ b"),
    ("return np.einsum('ij,jk->ii', a, b)", "return b.T @ a.T"),
    ("return np.einsum('ijj,jk->ik', a, b)", "return a @ b"),
    ("return np.einsum('...ij,...jk->ik', a, b)", "return a @ b"),
    ("return np.einsum(d, a, b)", "return a @ b"),
    ("return np.einsum('ii->i', a)", "return a"),
    ("return np.einsum('ij,ji->kl', a, b)", "return a @ b"),  # numpy refuses it: still read
    ("return np.einsum('ii,jk->jk', a, b)", "return a @ b"),  # a's trace times b
    ("return np.einsum('ij,jk,kl->il', a, b, x)", "return a @ b"),
    ("return a.dot(b, x)", "return a @ b"), ("return a.sum(b)", "return a @ b"),
    ("return a.mean(b)", "return a @ b"),
    ("return math.sqrt(a, b)", "return a ** 0.5"), ("return math.floor(x)", "return x ** 0.5"),
    ("return np.sqrt(x, y)", "return x ** 0.5"), ("return x ** 1.5", "return x ** 0.5"),
    ("return x ** -0.5", "return x ** 0.5"),
    ("return np.negative(x, y)", "return -x"), ("return np.exp(x)", "return -x"),
    ("return np.exp(x)", "return np.log(x)"), ("return np.exp(x)", "return x"),
    ("return np.add(a, b, x)", "return a + b"), ("return np.add(a, b, out=x)", "return a + b"),
    ("return np.subtract(a.W, b)", "return b - a.W"),
    ("return np.subtract(a.W, b)", "return a.W - a.W"),
    ("return np.asarray(x, np.float32)", "return x"), ("return np.array(x, dtype=d)", "return x"),
    ("return x.view(np.int8)", "return x"), ("return x.view(dtype=d)", "return x"),
    ("return x.sum()", "return x"), ("return x.reshape(d)", "return x"),
    ("return np.sum(x, axis=0, out=y)", "return x.sum(axis=0)"),
    ("return np.sum(x, 0)", "return x.sum()"), ("return np.sum(x, 0)", "return x.sum(x, 0)"),
    ("return np.sum(x, 0)", "return d.sum(x)"),
    ("return x.max(axis=0)", "return x.min(axis=0)"), ("return x.mean()", "return x.sum()"),
    ("return x.sum(axis=0)", "return x.sum(axis=1)"), ("return np.zeros(d)", "return np.ones(d)"),
    ("return x * 2", "return x"), ("return x * 0", "return x"), ("return x / 2", "return x"),
    ("return 1 / x", "return x"), ("return x + 1", "return x"), ("return x - 1", "return x"),
    ("return 0 - x", "return x"), ("return x ** 2", "return x"), ("return x * True", "return x"),
    ("return x == y", "return x != y"), ("return x <= y", "return x < y"),
    ("return 'a'", "return 1"),
    ("if c:\n    y = a\nelse:\n    y = b\nreturn x + y", "if c:\n    y = a\nreturn x + y"),
    ("if c:\n    y = a\nreturn x + y", "y = a\nreturn x + y"),
]


@pytest.mark.parametrize("first, second", NOT_THE_SAME)
def test_different_computations_stay_apart(first, second):
    """A rewrite that changes what is computed changes the tokens."""
    assert tokens(first) != tokens(second)


NOOPS = [  # (kind, a statement that changes nothing)
    ("assert", "assert np.ndim(x) >= 0, 'checked'"), ("pass", "pass"),
    ("docstring", "'''a note'''"), ("import", "import os"), ("from-import", "from os import path"),
    ("del of a name", "del a"), ("del of names", "del a, b"),
    ("pure numpy call", "np.ndim(x)"), ("attribute", "x.shape"), ("arithmetic", "len(x) + 1"),
    ("pure method", "x.argmax()"), ("pure builtin", "print(x.shape)"),
    ("nested pure calls", "sorted(zip(range(len(x)), x.tolist()))"),
    ("dead store", "t = np.copy(x).reshape(-1).sum()"), ("dead chain", "t = x.sum()\nu = t * 2"),
    ("dead annotated store", "t: float = x.mean()"), ("bare annotation", "t: float"),
    ("dead store of a pure method", "t = x.astype(float).ravel()"),
    ("self-assignment", "x = x"), ("self-assignment of a read name", "y = y"),
    ("constant if", "if False:\n    x = None"), ("constant if 0", "if 0:\n    y = a"),
    ("unread attribute store", "b.trace = np.shape(x)"),
    ("chained unread attribute stores", "a.seen = b.seen = len(x)"),
    ("unused identity", "_ = np.shape(x)"), ("identity store", "x = np.asarray(x)"),
    ("copy store", "y = y.copy()"), ("unary plus store", "x = +x"),
    ("nested in for", "for i in range(3):\n    assert i >= 0\n    t = i * 2"),
    ("nested in while else", "while a:\n    a = a - 1\nelse:\n    pass"),
    ("nested in with", "with d:\n    t = np.ndim(x)"),
    ("nested in try", "try:\n    t = len(x)\nexcept ValueError:\n    u = len(y)"),
    ("dead store after a call", "a.run(x)\nt = len(x)"),
]


@pytest.mark.parametrize("kind, noop", NOOPS)
def test_each_statement_without_effect_is_dropped(kind, noop):
    """A statement that changes nothing, before the return, leaves the tokens as they were
    (inside a compound statement, as the compound statement without it)."""
    emptied = {"nested in for": "for i in range(3):\n    pass",
               "nested in while else": "while a:\n    a = a - 1",
               "nested in with": "with d:\n    pass",
               "nested in try": "try:\n    pass\nexcept ValueError:\n    pass",
               "dead store after a call": "a.run(x)"}
    assert tokens(f"{noop}\n{RETURN}") == tokens(f"{emptied.get(kind, '')}\n{RETURN}"), kind


EFFECTS = [  # (kind, a statement that may change what the function returns or leaves behind)
    ("fill", "x.fill(0)"), ("sort", "a.sort()"), ("update", "d.update(x)"),
    ("append", "a.append(x)"), ("copyto", "np.copyto(x, y)"), ("put", "np.put(x, 0, 1)"),
    ("place", "np.place(x, y, 0)"), ("putmask", "np.putmask(x, y, 0)"),
    ("fill_diagonal", "np.fill_diagonal(x, 0)"), ("ufunc at", "np.add.at(x, 0, 1)"),
    ("random state", "np.random.shuffle(x)"), ("random draw", "np.random.rand(3)"),
    ("put_along_axis", "np.put_along_axis(x, y, 0, 1)"), ("seterr", "np.seterr(all='ignore')"),
    ("out=", "np.add(a, b, out=x)"), ("out= of a reduction", "np.sum(a, axis=0, out=x)"),
    ("out= of a pure method", "a.sum(axis=0, out=x)"), ("**options", "np.exp(a, **d)"),
    ("method of an object", "self_layer.forward(x)"),
    ("stored call of an object", "t = self_layer.forward(x)"),
    ("unknown function", "helper(x)"), ("stored unknown function", "y = helper(x)"),
    ("nested unknown call", "helper(x) + 1"), ("stored nested call", "t = 2 * helper(x)"),
    ("impure builtin", "setattr(a, 'n', 1)"), ("next", "next(a)"),
    ("call of a subscript", "a[0](x)"), ("item store", "x[0] = 1"), ("del of an item", "del x[0]"),
    ("del of an attribute", "del a.seen"), ("read attribute store", "b.count = b.count + 1"),
    ("attribute store of a call", "b.trace = helper(x)"), ("walrus", "print(x := 3)"),
    ("yield", "yield x"), ("store read later", "x = y * 2"), ("if on a name", "if d:\n    x = y"),
]
# (kind, a store that may change what the function returns, its compound statement without it)
NESTED_EFFECTS = [
    ("store to a global", "global g\ng = x", "global g"),
    ("store in a loop read later", "for i in range(3):\n    x = x * 2",
     "for i in range(3):\n    pass"),
    ("store in a handler read later", "try:\n    a.run()\nexcept ValueError:\n    x = y",
     "try:\n    a.run()\nexcept ValueError:\n    pass"),
]


@pytest.mark.parametrize("kind, effect", EFFECTS)
def test_each_statement_that_may_change_state_is_kept(kind, effect):
    """A statement that may change what the function returns or leaves behind is kept."""
    assert tokens(f"{effect}\n{RETURN}") != tokens(RETURN), kind


@pytest.mark.parametrize("kind, effect, without", NESTED_EFFECTS)
def test_each_store_read_elsewhere_is_kept_inside_its_statement(kind, effect, without):
    """A store the function (or, for a global, the module) may read is kept where it is."""
    assert tokens(f"{effect}\n{RETURN}") != tokens(f"{without}\n{RETURN}"), kind


def test_an_unused_store_of_a_call_that_changes_state_is_its_call():
    """``_ = f(x)`` reads as ``f(x)``: the name bound is never read, the call's effect stays."""
    assert tokens("_ = layer.forward(x)\n" + RETURN) == tokens("layer.forward(x)\n" + RETURN)
    assert tokens("t: float = layer.forward(x)\n" + RETURN) == tokens(
        "layer.forward(x)\n" + RETURN)


def test_a_dead_store_nested_in_compound_statements_goes_and_a_read_one_stays():
    """Stores never read go at any depth of the function's own statements (loops, branches,
    handlers, finally), their reads given back: what they read alone goes with them."""
    nested = ("t = x * 2\nfor i in range(3):\n    if a:\n        u = t + i\n"
              "try:\n    a.run()\nexcept ValueError:\n    v = len(y)\nfinally:\n    w = t\n")
    empty = ("for i in range(3):\n    if a:\n        pass\n"
             "try:\n    a.run()\nexcept ValueError:\n    pass\nfinally:\n    pass\n")
    assert tokens(nested + RETURN) == tokens(empty + RETURN)
    assert tokens(nested + "return x + t") != tokens(empty + "return x + t")


def test_a_long_chain_of_dead_stores_goes_in_linear_time():
    """3,000 stores, each read only by the next, none by what the function returns: all go, in
    well under 10 s of CPU time (a removal repeated until none is left takes minutes)."""
    chain = "t0 = x\n" + "".join(f"t{i + 1} = t{i} + 1\n" for i in range(3000))
    started = time.process_time()
    assert tokens(chain + RETURN) == tokens(RETURN)
    assert time.process_time() - started < 10


def test_state_a_class_declares_is_kept_and_other_write_only_state_dropped():
    """An attribute set in ``__init__`` (as the skeleton declares the gradients the tests read)
    keeps its stores, never read in the module or not; one set nowhere else and never read goes;
    the attributes given (the whole handin's) replace the module's own."""
    layer = ("class Layer:\n    def __init__(self):\n        self.dLdW = None\n"
             "    def backward(self, g, x):\n{}        self.dLdW = g.T @ x\n        return g\n")
    traced = layer.format("        self.trace = np.shape(g)\n")
    assert canonical(traced).tokens == canonical(layer.format("")).tokens
    assert canonical(layer.format("")).tokens != canonical(layer.replace(
        "        self.dLdW = g.T @ x\n", "").format("")).tokens
    assert canonical(traced, frozenset({"trace", "dLdW"})).tokens != canonical(traced).tokens
    assert canonical(traced, frozenset({"dLdW"})).tokens == canonical(traced).tokens


def test_used_attributes_are_those_read_or_declared_in_an_init():
    """Every attribute read anywhere (``+=`` reads its target), every one stored in an
    ``__init__`` (of any class), none stored elsewhere only; a file that does not parse adds none and stops nothing."""
    sources = ["class A:\n    def __init__(self):\n        self.w = None\n        self.b.c = 1\n"
               "    def run(self, x):\n        self.seen = x.shape\n        return self.w\n",
               "def g(y):\n    y.total = y.count\n    y.steps += 1\n",
               "def broken(:\n    z.read\n"]
    assert used_attributes(sources) == {"w", "b", "c", "shape", "count", "steps"}
    assert used_attributes([]) == frozenset()


def test_names_are_one_token_attributes_keywords_builtins_and_strings_their_own():
    """Renaming a local changes nothing; another attribute, numpy function, builtin, keyword or
    receiver does; every string literal is one token."""
    assert tokens("t = x * 2\nreturn t") == tokens("renamed = x * 2\nreturn renamed")
    assert tokens("return x.reshape(-1)") != tokens("return x.ravel(-1)")
    assert tokens("return np.exp(x)") != tokens("return np.log(x)")
    assert tokens("return len(x)") != tokens("return abs(x)")
    assert tokens("return self.W") != tokens("return other.W")
    assert tokens("return x if a else y") != tokens("return x or a and y")
    assert tokens("return 'a'") == tokens("return 'another text'") == tokens('return f"{x}"')


def test_the_raw_tokens_are_one_character_each_without_comments_or_layout():
    """Python's tokens, one character each (hand-read): a local name V, a string S, a statement's
    end ``;``, each one-character operator itself; comments, blank lines and indentation left
    out; an attribute named V or S is never the local name's or the string's token, and a
    semicolon never a line's end."""
    text, lines = tokens_of("x = y + 1  # note\n\nif x:\n    z = 'a'\n", [(1, 1)] * 4)
    assert text == "V=V+1;" + text[6] + "V:;V=S;" and len(lines) == len(text) == 14
    assert text[6] not in "VS;:="
    attribute = tokens_of("a.V\na.S\na = 1; b = 2\n", [(1, 1)] * 3)[0]
    assert attribute[:2] == "V." and attribute[2] not in "VS;" and attribute[6] not in "VS;"
    assert attribute[8:].startswith("V=1") and attribute[11] not in "V=;"
    operators = ["==", "!=", "<=", ">=", "**", "//", "->", "+=", "<<", ">>", "and", "or", "not",
                 "def", "return", "self", "len"]
    assert len({tokens_of(f"{operator}\n", [(1, 1)])[0] for operator in operators}) == len(
        operators)


def test_every_longer_token_is_one_cjk_ideograph():
    """Every keyword, builtin and operator of more than one character is one character of
    U+4E00..U+9C1F (20,000 ideographs): clear of the one-character tokens, and a valid one."""
    longer = {name for name in [*keyword.kwlist, *dir(builtins), *token.EXACT_TOKEN_TYPES]
              if len(name) > 1}
    for name in sorted(longer):
        text, _ = tokens_of(f"{name}\n", [(1, 1)])
        assert len(text) == 2 and 0x4E00 <= ord(text[0]) < 0x9C20, (name, text)


def test_each_token_keeps_the_source_lines_of_its_statement():
    """A canonical token keeps the (first, last) source lines of the statement it came from; a
    compound statement's header its first line."""
    source = ("import numpy as np\n\n\ndef f(a,\n      b):\n    assert a\n    c = np.matmul(\n"
              "        a, b)\n    return c\n")
    form = canonical(source)
    assert form.tokens == canonical("def f(a, b):\n    c = a @ b\n    return c\n").tokens
    header, store, returned = form.tokens.split(";")[:3]
    assert form.lines == ((4, 4),) * (len(header) + 1) + ((7, 8),) * (len(store) + 1) + (
        (9, 9),) * (len(returned) + 1)


def test_raw_tokens_keep_their_own_lines():
    """A module without a canonical form: each raw token keeps its own line, the last one's
    without a line end too, after a first blank line too."""
    form = canonical("x = 1\ny = 2\ndef f(:\n  z")
    assert not form.parsed and form.tokens[:8] == "V=1;V=2;"
    assert form.lines == ((1, 1),) * 4 + ((2, 2),) * 4 + ((3, 3),) * 4 + ((4, 4),)
    assert canonical("\nx = (\n  z").lines == ((2, 2),) * 3 + ((3, 3),)


def test_methods_and_classes_in_any_order_are_one():
    """A module's classes, and each class's methods, in another order have the same tokens;
    moving a method to another class keeps every statement's (no class header is read)."""
    methods = ["    def forward(self, x):\n        return x @ self.W\n",
               "    def backward(self, g):\n        return g @ self.W.T\n"]
    first = "class A:\n" + "".join(methods) + "class B:\n    def run(self):\n        return 1\n"
    second = "class B:\n    def run(self):\n        return 1\n" + "class A:\n" + "".join(
        reversed(methods))
    split = "class A(Half):\n" + methods[0] + "class B:\n    def run(self):\n        return 1\n" \
        + "class Half:\n" + methods[1]
    assert canonical(first).tokens == canonical(second).tokens
    assert sorted(canonical(first).tokens.split(";")) == sorted(
        canonical(split).tokens.split(";"))
    assert canonical("x = 1\n" + first).tokens.startswith("V=1;")
    assert canonical(first + "x = 1\n").tokens.startswith("V=1;")


COMPOUND = [  # (a compound statement, the same without one of its parts)
    ("def g(self, x):\n    pass", ""),
    ("for i in a:\n    b.run(i)\nelse:\n    b.done()", "for i in a:\n    b.run(i)"),
    ("while a:\n    b.run()\nelse:\n    b.done()", "while a:\n    b.run()"),
    ("with a as b:\n    b.run()", "b.run()"),
    ("try:\n    a.run()\nexcept ValueError as error:\n    b.log(error)",
     "try:\n    a.run()\nexcept ValueError:\n    b.log(error)"),
    ("try:\n    a.run()\nexcept ValueError:\n    b.log()\nfinally:\n    a.close()",
     "try:\n    a.run()\nexcept ValueError:\n    b.log()"),
    ("try:\n    a.run()\nexcept ValueError:\n    b.log()\nelse:\n    a.close()",
     "try:\n    a.run()\nexcept ValueError:\n    b.log()"),
    ("@staticmethod\ndef g(x):\n    return x", "def g(x):\n    return x"),
]


@pytest.mark.parametrize("whole, part", COMPOUND)
def test_every_part_of_a_compound_statement_is_read(whole, part):
    """A function whose body is all dropped keeps its header; each block, handler name,
    ``else``, ``finally`` and decorator is in the tokens."""
    assert tokens(f"{whole}\n{RETURN}") != tokens(f"{part}\n{RETURN}")


@pytest.mark.parametrize("source", [
    "x = " + "[" * MAX_DEPTH + "]" * MAX_DEPTH + "\n",  # parses, one level too deep
    "x = " + "1+" * 100_000 + "1\n",  # ends the parser: RecursionError
    "x = " + "-" * 100_000 + "1\n",  # ends the parser: MemoryError
    "def f(:\n    return x + y\n",  # a syntax error
])
def test_a_module_without_a_bounded_parse_is_measured_by_its_raw_tokens(source):
    """Too deep a tree, a parse the parser cannot finish, a syntax error: no canonical form, and
    the measure is the raw text's tokens (with the raw lines), so a copy of it is still found."""
    form = canonical(source)
    raw = tokens_of(source, [(line, line) for line in range(1, source.count("\n") + 2)])
    assert not form.parsed and (form.tokens, form.lines) == raw and form.tokens


def test_raw_tokens_leave_comments_blank_lines_and_indentation_out():
    """A module that does not parse, with and without comments, blank lines and indentation,
    has the same raw tokens."""
    assert canonical("def f(:\n    # why\n\n    return x\n").tokens == canonical(
        "def f(:\n return x\n").tokens


def test_the_depth_bound_is_one_level_past_what_is_read():
    """MAX_DEPTH levels (the module, the assignment and the innermost list's context three of
    them) read; one more does not."""
    assert MAX_DEPTH == 100
    assert canonical("x = " + "[" * 97 + "]" * 97 + "\n").parsed
    assert not canonical("x = " + "[" * 98 + "]" * 98 + "\n").parsed


def test_the_node_bound_is_two_hundred_thousand_nodes():
    """A module of exactly 200,000 nodes (counted by ``ast.walk``, contexts included) is read;
    one more node is not (its raw tokens are fingerprinted: the canonical form of either takes
    seconds, so the bound is read where it is decided)."""
    def module(elements: int) -> str:
        return "x = (" + "1," * elements + ")\n"

    at_bound = module(200_000 - 6)
    assert sum(1 for _ in ast.walk(ast.parse(at_bound))) == 200_000
    assert bounded_tree(at_bound) is not None
    assert bounded_tree(module(200_000 - 5)) is None


def test_the_text_bound_is_the_graders_file_limit():
    """A module of exactly MAX_TEXT (1,000,000) characters is parsed; one character more is
    not."""
    assert MAX_TEXT == 1_000_000
    line = "x = 1\n"
    padded = line + "#" * (MAX_TEXT - len(line) - 1) + "\n"
    assert len(padded) == MAX_TEXT and canonical(padded).parsed
    assert not canonical(padded + " ").parsed


def test_a_huge_module_is_never_parsed(monkeypatch):
    """A 50 MB text is not parsed (nothing in a handin sizes the grader's work): its tokens are
    those of its first MAX_TEXT characters."""
    parse = ast.parse

    def refuse(source, *args, **kwargs):
        assert len(source) <= MAX_TEXT, "a text over MAX_TEXT parsed"
        return parse(source, *args, **kwargs)

    monkeypatch.setattr(ast, "parse", refuse)
    line = "x = y + 1\n"
    form = canonical(line * (50 * 2**20 // len(line)))
    assert not form.parsed
    assert form.tokens == "V=V+1;" * (MAX_TEXT // len(line))
