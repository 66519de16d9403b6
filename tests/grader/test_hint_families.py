# hw4p1: instructor-only
"""The hint families the sixth held-out round missed, read without the judge's sandbox: the wrong
Softmax backward formulas (its input cached instead of its output, a sum over other axes than
dim), SDPA keeping its scores as the weights, and steps that raised, whose line's operands name
the family (a matrix where its transpose belongs, an axis dropped by a reduction, a softmax of
transposed scores, the wrong array handed to an inner backward, a size computed with /, a mask
that is not boolean). Each raising case goes through the worker's ``describe``, the wire and the
judge's :func:`raised_failure`, as a graded handin does.

    .venv/bin/python -m pytest -q -p no:randomly -n 0 tests/grader/test_hint_families.py
"""
import runpy
import textwrap

import numpy as np
import pytest

from autograder.judging.scoring.hidden_tests.checks import CheckFailed, expect_shape
from autograder.judging.scoring.hidden_tests.diagnosis import (Failure, Operand, hints,
                                                               softmax_backward_variant)
from autograder.judging.scoring.verdicts import raised_failure
from autograder.sandboxed import replay, wire
from tests.grader.raised_errors import judged as decoded


def softmax(x, axis):
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def families(category: str, signature: dict) -> set[str]:
    return {hint.family for hint in hints(category, signature).values()}


@pytest.mark.parametrize("dim", [0, 1, -1])
def test_each_wrong_softmax_backward_sum_or_cache_is_recognised(dim):
    """Hand-written wrong backwards on a 3-d input: the formula on the input Z, the sum over the
    whole array or over one other axis; the right formula and the diagonal-only one are not
    read as any of them."""
    rng = np.random.default_rng(5)
    Z, dLdA = rng.standard_normal((3, 4, 5)), rng.standard_normal((3, 4, 5))
    A = softmax(Z, dim)
    other = (dim + 1) % 3
    cases = {
        "": A * (dLdA - np.sum(dLdA * A, axis=dim, keepdims=True)),
        "input-cache": Z * (dLdA - np.sum(dLdA * Z, axis=dim, keepdims=True)),
        "reduction-axes": A * (dLdA - np.sum(dLdA * A)),
    }
    assert softmax_backward_variant(A * (dLdA - np.sum(dLdA * A, axis=other, keepdims=True)),
                                    Z, dim, dLdA) == "reduction-axes"
    assert softmax_backward_variant(dLdA * A * (1 - A), Z, dim, dLdA) == ""
    for variant, dLdZ in cases.items():
        assert softmax_backward_variant(dLdZ, Z, dim, dLdA) == variant


def test_a_softmax_variant_names_its_family_only_with_A_right():
    def gradient(variant: str, role: str = "truth") -> Failure:
        return Failure("value", "dLdZ", role, variant=variant)

    finite_differences = gradient("", "backward-vs-forward")
    assert families("Softmax", {"a": gradient("input-cache"), "b": finite_differences}) == \
        {"softmax-cache-input"}
    assert families("Softmax", {"a": gradient("reduction-axes"), "b": finite_differences}) == \
        {"softmax-backward-axis"}
    # A wrong too: the forward is the likelier cause; two formulas at once: neither.
    assert "softmax-cache-input" not in families(
        "Softmax", {"a": gradient("input-cache"), "b": Failure("value", "A")})
    assert families("Softmax", {"a": gradient("input-cache"),
                                "b": gradient("reduction-axes")}) == {"softmax-backward-jacobian"}


def test_only_dV_wrong_reads_as_the_scores_kept_as_weights():
    dV = Failure("value", "dV")
    fd = Failure("value", "dV", "backward-vs-forward")
    assert families("ScaledDotProductAttention", {"a": dV, "b": fd, "c": None}) == \
        {"sdpa-cache-scores"}
    assert "sdpa-cache-scores" not in families("ScaledDotProductAttention",
                                               {"a": dV, "b": Failure("value", "dQ")})
    assert "sdpa-cache-scores" not in families("ScaledDotProductAttention",
                                               {"a": dV, "b": Failure("value", "output")})


SOURCE = textwrap.dedent('''\
    import numpy as np

    from mytorch.nn._checks import check_attention_inputs, check_backward


    class Loud(TypeError):
        def __str__(self):
            raise AssertionError("the worker must not call a student's __str__")


    class Layer:
        def __init__(self, **attributes):
            self.__dict__.update(attributes)

        def transposed(self, dLdZ):
            return dLdZ @ self.W.T

        def unfit(self, A):
            return A @ self.W

        def dropped_axis(self, Z):
            return Z - Z.max(axis=self.dim)

        def reduced_before(self, dLdA, row):
            return dLdA - row

        mismatched_rows = reduced_before

        def weights_times_values(self, V):
            return self.attention_weights @ V

        def inner_backward(self, dLdA):
            check_backward("Softmax", "dLdA", dLdA, self.A.shape)

        def own_backward(self, dLdZ):
            check_backward("ScaledDotProductAttention", "dLdZ", dLdZ, self.shape)

        def split(self, x, N, T):
            return x.reshape(N, T, self.num_heads, self.head_dim)

        def attend(self, Q, K, V, mask):
            mask = check_attention_inputs(Q, K, V, mask)

        def own_words(self, x):
            raise TypeError("'float' object cannot be interpreted as an integer, or so I say")

        def loud(self, x):
            raise Loud("'float' object cannot be interpreted as an integer")
''')


def zeros(*shape, dtype=np.float64):
    return np.zeros(shape, dtype)


Q, K, V = zeros(2, 4, 6), zeros(2, 5, 6), zeros(2, 5, 3)  # L = 4 queries, S = 5 keys
# method: (the layer's attributes, the call's arguments, the step that raised and its inputs,
# the family, words its hint must hold; '' family: no hint at all)
CASES = {
    "transposed": (dict(W=zeros(3, 5)), (zeros(4, 3),), ("Linear", "backward", zeros(4, 3)),
                   "transpose", "self.W enters it as (5, 3)"),
    "unfit": (dict(W=zeros(5, 7)), (zeros(4, 3),), ("Linear", "backward", zeros(4, 3)),
              "shape", "in none of the ways the hints know"),
    "dropped_axis": (dict(dim=-1), (zeros(4, 3),), ("Softmax", "forward", zeros(4, 3)),
                     "keepdims", "Z is (4, 3), reduced along axis -1 it is (4,)"),
    "reduced_before": ({}, (zeros(4, 3), zeros(4)), ("Softmax", "backward", zeros(4, 3)),
                       "keepdims", "row (4,) is dLdA (4, 3) without its axis 1"),
    "mismatched_rows": ({}, (zeros(4, 3), zeros(5)), ("Softmax", "backward", zeros(4, 3)),
                        "shape", "in none of the ways the hints know"),
    "weights_times_values": (dict(attention_weights=zeros(2, 5, 4)), (V,),
                             ("ScaledDotProductAttention", "forward", Q, K, V),
                             "softmax-transposed", "self.attention_weights is (2, 5, 4)"),
    "inner_backward": (dict(A=zeros(2, 4, 5)), (zeros(2, 4, 3),),
                       ("ScaledDotProductAttention", "backward", zeros(2, 4, 3)),
                       "backward-input", "handed Softmax.backward the wrong array"),
    "split": (dict(num_heads=2, head_dim=8 / 2), (zeros(2, 3, 8), 2, 3),
              ("MultiHeadAttention", "forward", zeros(2, 3, 8)), "float-size",
              "self.head_dim is a Python float, and numpy raised TypeError: 'float' object "
              "cannot be interpreted as an integer."),
    "attend": ({}, (Q, K, V, zeros(4, 5)),
               ("MultiHeadAttention", "forward", zeros(2, 4, 8)), "mask-dtype",
               "mask holds float64 values"),
    "own_words": ({}, (zeros(2),), ("MultiHeadAttention", "forward", zeros(2, 4, 8)), "", ""),
    "loud": ({}, (zeros(2),), ("MultiHeadAttention", "forward", zeros(2, 4, 8)), "", ""),
}


@pytest.fixture(scope="module")
def layer(tmp_path_factory):
    """(the class ``Layer`` of :data:`SOURCE`, run from ``<tmp>/mytorch/cases.py``, the file's
    path)."""
    path = tmp_path_factory.mktemp("handin") / "mytorch" / "cases.py"
    path.parent.mkdir()
    path.write_text(SOURCE)
    return runpy.run_path(str(path))["Layer"], path


def judged(path, call, step: tuple) -> Failure:
    """The Failure the judge reads from ``call()``, which must raise, as the last step of a
    program that made the class ``step[0]`` and called its method ``step[1]`` on ``step[2:]``
    (the error's fields as the worker sends them and the judge decodes them: ``decoded``)."""
    program = wire.Program()
    program.call(program.new(step[0]), step[1], *step[2:])
    error = {**decoded(path, call)[0], "step": 1}
    return raised_failure(error, program.steps, wire.line_of(path.read_bytes(), error["line"]),
                          program.arrays)


@pytest.mark.parametrize("method", CASES)
def test_a_step_that_raised_is_named_by_its_operands(layer, method):
    Layer, path = layer
    attributes, arguments, step, family, words = CASES[method]
    failure = judged(path, lambda: getattr(Layer(**attributes), method)(*arguments), step)
    found = hints(step[0], {"t": failure})
    assert {hint.family for hint in found.values()} == ({family} if family else set())
    assert words in (found["t"].text if found else "")


def test_only_python_and_numpys_own_words_are_quoted(layer):
    """A TypeError's message travels from the worker (an exact TypeError only: no method of a
    subclass runs) and the judge keeps it only when it is one it knows."""
    Layer, path = layer
    step = ("MultiHeadAttention", "forward", zeros(2, 4, 8))
    assert judged(path, lambda: Layer().own_words(1), step).message == ""
    assert judged(path, lambda: Layer().loud(1), step).message == ""
    split = judged(path, lambda: Layer(num_heads=2, head_dim=4.0).split(zeros(2, 3, 8), 2, 3),
                   step)
    assert split.message == "'float' object cannot be interpreted as an integer"
    with pytest.raises(TypeError) as raised:
        Layer().own_words(1)
    assert replay.describe(raised.value)["message"] == str(raised.value)


def test_a_backward_whose_own_check_raised_is_not_the_callers_fault(layer):
    """check_backward of the step's own class: what its forward stored is wrong, so the hint does
    not say a caller handed it the wrong array."""
    Layer, path = layer
    failure = judged(path, lambda: Layer(shape=(2, 4, 5)).own_backward(zeros(2, 4, 3)),
                     ("ScaledDotProductAttention", "backward", zeros(2, 4, 3)))
    assert families("ScaledDotProductAttention", {"t": failure}) == {"sdpa-backward-shapes"}


def test_transposed_weights_that_are_not_the_scores_are_a_transpose():
    """A softmax-transposed hint needs the operand to be (..., S, L) of the step's Q and K."""
    held = {"self.attention_weights": Operand("array", "float64", (2, 5, 4), 3),
            "V": Operand("array", "float64", (2, 5, 3), 3)}
    failure = Failure("raised", "forward", step="ScaledDotProductAttention.forward",
                      exception="ValueError", code="return self.attention_weights @ V",
                      held=held, given={"Q": (2, 4, 6), "K": (2, 7, 6)})
    assert families("ScaledDotProductAttention", {"t": failure}) == {"transpose"}
    failure.given["K"] = (2, 5, 6)  # now (S, L) = (5, 4): the scores transposed
    assert families("ScaledDotProductAttention", {"t": failure}) == {"softmax-transposed"}


def test_an_array_sized_by_the_previous_call_reads_as_a_stale_cache():
    """A second forward of one object raised on a mask sized by the first call's inputs (batch
    4, L = S = 7) where this call's are (2, 3, 5): stale-cache, with the mask's shape named. A
    mask sized by this call, a first call, or an array whose lengths are all this call's too
    read otherwise."""
    arrays = {"q1": np.zeros((4, 7, 6)), "q2": np.zeros((2, 3, 6)), "k2": np.zeros((2, 5, 6))}
    steps = [{"op": "new", "cls": "MultiHeadAttention", "out": ["m"]},
             {"op": "call", "obj": "m", "method": "forward",
              "args": [{"ref": "q1"}, {"ref": "q1"}, {"ref": "q1"}]},
             {"op": "call", "obj": "m", "method": "forward",
              "args": [{"ref": "q2"}, {"ref": "k2"}, {"ref": "k2"}]}]
    code = "mask = check_attention_inputs(Q, K, V, mask)"

    def family(step: int, mask: tuple[int, ...]) -> tuple[set[str], str]:
        error = {"type": "ValueError", "step": step, "message": ""}
        failure = raised_failure(error, steps, code, arrays)
        failure.held = {"Q": Operand("array", "float64", (2, 2, 3, 3), 4),
                        "mask": Operand("array", "bool", mask, len(mask))}
        found = hints("MultiHeadAttention", {"t": failure})
        return {hint.family for hint in found.values()}, "".join(h.text for h in found.values())

    stale, text = family(2, (4, 1, 7, 7))
    assert stale == {"stale-cache"} and "mask has shape (4, 1, 7, 7)" in text
    assert "query (4, 7, 6)" in text
    assert family(2, (2, 1, 3, 5))[0] == {"shape"}  # sized by this call
    assert family(1, (4, 1, 7, 7))[0] == {"shape"}  # no previous call
    assert family(2, (1, 1, 6, 6))[0] == {"shape"}  # 6 is the embedding of both calls


def test_a_gradient_missing_only_its_length_one_axes_reads_as_squeezed():
    """expect_shape's failure carries both shapes: dLdb () where (1,) belongs is a squeezed
    gradient; (2,) where (1, 2) belongs too; (4,) where (2, 2) belongs, or a forward output, is
    not (the same values, but no axis of length 1 dropped)."""
    def family(quantity: str, actual, shape: tuple[int, ...]) -> set[str]:
        with pytest.raises(CheckFailed) as failed:
            expect_shape(quantity, np.asarray(actual), shape)
        return families("Linear", {"t": failed.value.failure})

    assert family("dLdb", 0.5, (1,)) == {"squeezed-gradient"}
    assert family("dLdW", [0.5, 1.0], (1, 2)) == {"squeezed-gradient"}
    assert family("dLdb", [0.5, 1.0], (1, 2, 1)) == {"squeezed-gradient"}
    assert "squeezed-gradient" not in family("dLdW", [0.5, 1.0, 2.0, 3.0], (2, 2))
    assert "squeezed-gradient" not in family("Z", 0.5, (1,))
