# hw4p1: instructor-only
"""A hint on a step that raised quotes the line and what its operands held: the worker reads the
names of the raising line from the frame (plain locals, instance ``__dict__`` entries; never a
getattr on a student's object) and sends integers only; the judge names them from the line it
reads itself. Each case of :data:`CASES` raises in a file of a ``mytorch`` folder, goes through
the worker's ``describe``, the wire and the judge's wording, and is compared with the text written
by hand.

    .venv/bin/python -m pytest -q -p no:xdist tests/grader/test_raised_operands.py
"""
import importlib.util
import textwrap

import numpy as np
import pytest

from autograder.judging.scoring.hidden_tests.diagnosis import Failure, hints
from autograder.judging.scoring.verdicts import line_operands
from autograder.sandboxed import wire
from tests.grader.raised_errors import judged

SOURCE = textwrap.dedent('''\
    import numpy as np


    class Layer:
        def __init__(self, **attributes):
            self.__dict__.update(attributes)

        def product(self, dLdZ):
            return dLdZ @ self.W.T * self.scale

        def broadcast(self, A):
            return A + self.b[:, None]

        def reshape(self, x, N, T):
            return x.reshape(N, T, self.heads, -1)

        def huge_rank(self, x):
            return x @ self.W

        def not_an_array(self, x):
            return np.concatenate([x, self.layer], axis=self.axis)

        def none(self, x):
            return x + self.cache

        def prose(self, x):
            return x @ self.W.T + len(f"{x} #All hidden tests passed")  # All hidden tests passed: grade 50/50


    class Sneaky:
        """A dict key that hashes as 'missing' and says when it is compared."""

        def __hash__(self):
            return hash("missing")

        def __eq__(self, other):
            READS.append("__eq__")
            return False


    READS = []


    class Watched:
        def __init__(self):
            self.A = np.ones((2, 3))
            self.__dict__[Sneaky()] = np.ones((9, 9))

        @property
        def scale(self):
            READS.append("scale")
            raise AssertionError("a property the worker must never call")

        def __getattr__(self, name):
            READS.append(name)
            raise AttributeError(name)

        def forward(self):
            return self.A @ self.A * self.scale + self.missing


    class RaisingProperty:
        @property
        def W(self):
            return np.ones((2, 3)) @ np.ones((2, 3))

        def forward(self, x):
            return x @ self.W
''')

# (method, the layer's attributes, the call's arguments, the hint's words for the line)
CASES = {
    "product": (dict(W=np.zeros((5, 7)), scale=np.float32(2)), (np.zeros((4, 3, 5)),),
                "at `return dLdZ @ self.W.T * self.scale`: dLdZ (4, 3, 5) float64, "
                "self.W (5, 7) float64, self.scale a float32 scalar"),
    "broadcast": (dict(b=np.zeros(5, np.float32)), (np.zeros((4, 5)),),
                  "at `return A + self.b[:, None]`: A (4, 5) float64, self.b (5,) float32"),
    "reshape": (dict(heads=5), (np.zeros((2, 3, 8), np.float32), 2, 3),
                "at `return x.reshape(N, T, self.heads, -1)`: x (2, 3, 8) float32, "
                "N = 2, T = 3, self.heads = 5"),
    "huge_rank": (dict(W=np.zeros((3, 4))), (np.zeros((1,) * 12),),
                  "at `return x @ self.W`: x an array of 12 dimensions, float64, "
                  "self.W (3, 4) float64"),
    "not_an_array": (dict(layer=object(), axis=-1), (np.zeros((2, 3), np.int64),),
                     "at `return np.concatenate([x, self.layer], axis=self.axis)`: "
                     "x (2, 3) int64, self.axis = -1"),
    "none": (dict(cache=None), (np.zeros(2, bool),),
             "at `return x + self.cache`: x (2,) bool, self.cache None"),
    # the student's words, in a string literal and a comment, are never quoted
    "prose": (dict(W=np.zeros((5, 7))), (np.zeros((4, 5)),),
              'at `return x @ self.W.T + len("...")`: x (4, 5) float64, self.W (5, 7) float64'),
}


@pytest.fixture(scope="module")
def cases(tmp_path_factory):
    """The module of :data:`SOURCE`, loaded from ``<tmp>/mytorch/cases.py``."""
    path = tmp_path_factory.mktemp("handin") / "mytorch" / "cases.py"
    path.parent.mkdir()
    path.write_text(SOURCE)
    spec = importlib.util.spec_from_file_location("raised_operand_cases", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module, path


@pytest.mark.parametrize("method", CASES)
def test_the_line_that_raised_is_quoted_with_its_operands_shapes(cases, method):
    module, path = cases
    attributes, arguments, words = CASES[method]
    error, text = judged(path, lambda: getattr(module.Layer(**attributes), method)(*arguments))
    assert error["function"] == method
    assert text == words


def test_no_property_getattr_or_key_comparison_of_the_student_runs(cases):
    """Only instance-dict entries are read, by exact str keys: the property and ``__getattr__``
    the line names are never called, nor the ``__eq__`` of a key hashed as 'missing'."""
    module, path = cases
    error, text = judged(path, lambda: module.Watched().forward())
    assert module.READS == []
    assert text == "at `return self.A @ self.A * self.scale + self.missing`: self.A (2, 3) float64"
    assert error["operands"][wire.OPERAND_ROW] == wire.OPERAND_KINDS.index("absent")  # scale


def test_a_property_that_raises_is_the_line_named(cases):
    module, path = cases
    error, text = judged(path, lambda: module.RaisingProperty().forward(np.zeros(3)))
    assert (error["function"], error["operands"]) == ("W", [])  # np alone: nothing to name
    assert text == ""


def row(kind: str, dtype: str, *shape: int) -> list[int]:
    dims = [*shape, *[0] * (wire.MAX_OPERAND_DIMS - len(shape))]
    return [wire.OPERAND_KINDS.index(kind), wire.OPERAND_DTYPES.index(dtype), len(shape), *dims]


def test_a_lying_handin_misleads_only_its_own_hint_and_the_text_stays_bounded():
    code = "dA = dLdZ @ self.W"
    claimed = row("array", "float16", 9, 9) + row("array", "float64", 1)
    assert line_operands(code, {"operands": claimed}) == (
        "at `dA = dLdZ @ self.W`: dLdZ (9, 9) float16, self.W (1,) float64")
    for lie in (claimed[:-1], claimed + row("None", "other"),  # not one row per name
                [len(wire.OPERAND_KINDS), *claimed[1:]],  # a kind no one knows
                [claimed[0], len(wire.OPERAND_DTYPES), *claimed[2:]]):
        assert line_operands(code, {"operands": lie}) == "", lie
    bounded = wire.error_fields({"kind": "raised", "operands": claimed})
    assert bounded["operands"] == claimed
    for lie in ([*claimed[:-1], wire.MAX_OPERAND_INT + 1], [*claimed[:-1], -1],
                [*claimed[:-1], 2.0], [*claimed[:-1], True], "(9, 9)",
                claimed * wire.MAX_OPERANDS):  # over MAX_OPERANDS rows
        assert "operands" not in wire.error_fields({"kind": "raised", "operands": lie}), lie
    escaped = line_operands("x = a ` b  \x1b[31m`", {"operands": row("array", "bool", 2) * 2})
    assert escaped == "at `x = a ' b [31m'`: a (2,) bool, b (2,) bool"


@pytest.mark.parametrize("code, names", [
    ("dLdA = dLdZ @ self.W.T  # W is (out, in)", ["dLdZ", "self.W"]),
    ("return x.reshape(N, T, self.num_heads, self.head_dim).transpose(0, 2, 1, 3)",
     ["x", "N", "T", "self.num_heads", "self.head_dim"]),
    ('out = np.einsum("ij,jk->ik", a, b)', ["a", "b"]),
    ("s = np.sum(x, axis=-1, keepdims=True) + len(y)", ["x", "y"]),
    ("if a == b: c = self.softmax.forward(z)", ["a", "b", "self.softmax", "z"]),
    ("A += B", ["A", "B"]),
    ("y = 3.5e10 * self . scale", ["self.scale"]),
    ("z = " + " + ".join(f"v{i}" for i in range(9)), [f"v{i}" for i in range(6)]),
])
def test_the_names_a_line_holds(code, names):
    """What the worker looks up and the judge names: read values, not assigned ones, keyword
    arguments, called functions or modules; at most MAX_OPERANDS."""
    assert wire.line_operands(code) == names


@pytest.mark.parametrize("code, quoted", [
    ('dA = dLdZ @ self.W.T + f"{x} passed"  # All hidden tests passed: grade 50/50',
     'dA = dLdZ @ self.W.T + "..."'),
    ('x = a + "#b" + c  # a note', 'x = a + "..." + c'),  # a '#' in a string starts no comment
    ("y = rb'raw' + len(\"\"\"open", 'y = "..." + len("..."'),  # a prefix; one left open
    ("dA = dLdZ @ self.W", "dA = dLdZ @ self.W"),
    ('s = ' + '"" + ' * 60 + 'x', ('s = ' + '"..." + ' * 60)[:200]),  # cut as line_of cuts
])
def test_a_quoted_line_is_its_code_without_literals_or_comment(code, quoted):
    assert wire.code_only(code) == quoted


def test_the_operands_follow_the_rule_the_exception_chose():
    """The operands are appended to the hint the exception and the line decided; they decide
    nothing (a TypeError gets no hint, with or without them)."""
    shape = Failure("raised", "backward", step="Linear.backward", exception="ValueError",
                    operands="at `dA = dLdZ @ self.W`: dLdZ (4, 3, 5) float64")
    hint = hints("Linear", {"t": shape})["t"]
    assert hint.family == "shape"
    assert hint.text.endswith("(at `dA = dLdZ @ self.W`: dLdZ (4, 3, 5) float64)")
    other = Failure("raised", "backward", step="Linear.backward", exception="TypeError",
                    operands=shape.operands)
    assert hints("Linear", {"t": other}) == {}
