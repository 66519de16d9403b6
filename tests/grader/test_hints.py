# hw4p1: instructor-only
"""The grader's hints: what a difference looks like, which wrong attention formula an output
comes from, the rules' reading of a signature, and, through the real judge, that a correct
mytorch gets no hint, that wrong ones the catalogue does not hold get their family's hint, and
that no feedback quotes a hidden input.

    .venv/bin/python -m pytest -q tests/grader/test_hints.py
"""

import numpy as np
import pytest

import yaml

from autograder.judging.scoring import grade_model
from autograder.judging.scoring.hidden_tests.diagnosis import (Failure, attention_variant, hints,
                                               softmax_backward_variant)
from autograder.judging.scoring.lm_diagnosis import VAL_TEST_GAP, lm_hint
from hw4lib.numeric_truths import difference_features
from tests.grader.autograder_helpers import make_model_handin
from tests.grader.test_grade_model import make_hidden_set
from tools import hint_report
from tools.mutants import Mutant

SEED = 7


def test_difference_features_on_hand_built_arrays():
    rng = np.random.default_rng(0)
    truth = rng.standard_normal((3, 4))
    assert difference_features(truth, truth) == frozenset()
    assert difference_features(0.25 * truth, truth) == {"scaled"}
    assert difference_features(truth + [1.0, -2.0, 0.5, 3.0], truth) == {"offset"}
    assert difference_features(truth.T.reshape(3, 4), truth) == {"rearranged"}
    assert difference_features(truth.reshape(12), truth) == {"reshaped"}
    assert difference_features(np.stack([truth, truth]), truth) == {"unreduced"}
    assert difference_features(np.zeros_like(truth), truth) == {"zero"}
    assert difference_features(truth + rng.standard_normal((3, 4)), truth) == frozenset()
    assert difference_features(np.full((3, 4), np.nan), truth) == frozenset()


def attention_case(rng, masked: bool = True):
    Q, K, V = (rng.standard_normal(shape) for shape in ((2, 3, 4), (2, 5, 4), (2, 5, 2)))
    mask = rng.random((2, 3, 5)) < 0.4
    mask[..., 0] = False  # every query sees a key
    return Q, K, V, (mask if masked else None)


def softmax(x, axis):
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def test_each_wrong_attention_formula_is_recognised_and_the_right_one_is_not():
    rng = np.random.default_rng(1)
    Q, K, V, mask = attention_case(rng)
    scores = Q @ K.swapaxes(-1, -2)
    right = softmax(np.where(mask, -np.inf, scores / 2), -1) @ V  # E = 4: scale 1/2
    assert attention_variant(right, Q, K, V, mask) == ""
    assert attention_variant(softmax(np.where(mask, -np.inf, scores / 7.3), -1) @ V,
                             Q, K, V, mask) == "scale"
    assert attention_variant(softmax(scores / 2, -1) @ V, Q, K, V, mask) == "mask-ignored"
    assert attention_variant(softmax(np.where(mask, 0.0, scores / 2), -1) @ V,
                             Q, K, V, mask) == "mask-zero"
    assert attention_variant(softmax(np.where(~mask, -1e30, scores / 2), -1) @ V,
                             Q, K, V, mask) == "mask-inverted"
    Q, K, V, _ = attention_case(rng, masked=False)
    assert attention_variant(softmax(Q @ K.swapaxes(-1, -2) / 2, -2) @ V,
                             Q, K, V, None) == "softmax-axis"
    assert attention_variant(right + 0.1, Q, K, V, None) == ""


def test_rules_read_the_signature_as_a_whole():
    second = Failure("value", "dLdW", context={"second_forward": True})
    assert {h.family for h in hints("Linear", {"main": None, "second": second}).values()} == \
        {"stale-cache"}
    # The same second-forward failure beside a failing main test is not a stale cache.
    main = Failure("value", "dLdW", features=frozenset({"scaled"}))
    assert hints("Linear", {"main": main, "second": second})["main"].family == \
        "linear-grad-batch-reduction"
    # A softmax backward that fails along the last axis too is not the axis bug.
    off = Failure("value", "dLdZ", context={"last_axis": False})
    on = Failure("value", "dLdZ", context={"last_axis": True})
    assert {h.family for h in hints("Softmax", {"a": off, "b": None}).values()} == \
        {"softmax-backward-axis"}
    assert {h.family for h in hints("Softmax", {"a": off, "b": on}).values()} == \
        {"softmax-backward-jacobian"}
    # Cross-attention failing while self-attention passes: the projections' inputs.
    cross = Failure("raised", "forward", step="MultiHeadAttention.forward",
                    exception="ValueError")
    assert hints("MultiHeadAttention", {"mha_cross_attention_x": cross,
                                        "mha_self_attention_y": None})["mha_cross_attention_x"] \
        .family == "mha-projection-input"
    # Nothing recognisable: no hint rather than a guess.
    assert hints("Linear", {"main": Failure("stopped")}) == {}
    # The kind comes first: a stub, an import failure, a hang or an exception no rule expects
    # gets no family, even where a value rule would take any failure of the step.
    for kind in ("not written", "import", "timeout", "stopped"):
        assert hints("Softmax", {"t": Failure(kind, "forward")}) == {}, kind
        assert hints("Softmax", {"t": Failure(kind)}, frozenset({"Linear"})) == {}, kind
    early = Failure("raised", "backward", step="ScaledDotProductAttention.backward",
                    exception="RuntimeError")
    assert hints("ScaledDotProductAttention", {"t": early}) == {}
    assert hints("ScaledDotProductAttention", {"t": Failure(
        "raised", "backward", step="ScaledDotProductAttention.backward",
        exception="ValueError")})["t"].family == "sdpa-backward-shapes"
    # A dtype failure in a test of fully masked rows is the dtype's, not the masking's.
    dtype = Failure("dtype", "dQ", context={"fully_masked": True})
    assert hints("ScaledDotProductAttention", {"t": dtype})["t"].family == "dtype"
    # A class that calls a failing one: that one is the likely cause, not this one's rules.
    output = Failure("value", "output")
    assert hints("MultiHeadAttention", {"t": output})["t"].family == "mha-forward"
    assert hints("MultiHeadAttention", {"t": output}, frozenset({"Linear"}))["t"].family == \
        "uses-a-failing-class"
    assert hints("ScaledDotProductAttention", {"t": output}, frozenset({"Linear"}))["t"] \
        .family == "sdpa-forward"  # SDPA calls no Linear


def test_a_test_that_raised_is_hinted_from_its_exception_and_line_never_a_value_family():
    def family(category: str, step: str, exception: str, code: str) -> str:
        failure = Failure("raised", step.rpartition(".")[2], step=step, exception=exception,
                          code=code)
        found = hints(category, {"t": failure})
        return found["t"].family if found else ""

    sdpa = "ScaledDotProductAttention"
    assert family(sdpa, f"{sdpa}.forward", "IndexError", "scores[mask] = -self.eps") == \
        "boolean-index"
    assert family(sdpa, f"{sdpa}.backward", "IndexError", "dLdS[self.mask == 1] = 0.0") == \
        "boolean-index"
    # An IndexError on a line with no mask, a ValueError: shape errors, whatever the step.
    assert family(sdpa, f"{sdpa}.forward", "IndexError", "scores = scores[:, 0]") == "shape"
    assert family(sdpa, f"{sdpa}.forward", "ValueError", "scores = Q @ K") == "shape"
    assert family("Softmax", "Softmax.backward", "ValueError", "x = a @ b") == "shape"
    assert family("Softmax", "Softmax.forward", "_UFuncOutputCastingError",
                  "np.exp(A, out=A)") == "dtype"
    # Where a category knows the step's shape error, its own family (still a shape family).
    assert family("Linear", "Linear.forward", "ValueError", "Z = A @ self.W") == \
        "linear-forward-product"
    assert family(sdpa, f"{sdpa}.backward", "ValueError", "dLdV = P @ dLdZ") == \
        "sdpa-backward-shapes"
    # An exception of no known kind: no family at all.
    assert family(sdpa, f"{sdpa}.forward", "KeyError", "scores[mask] = 0") == ""


def test_a_softmax_backward_on_the_unnormalised_exponentials_is_recognised():
    rng = np.random.default_rng(3)
    Z, dLdA = rng.standard_normal((3, 4)) * 3, rng.standard_normal((3, 4))
    for dim in (0, -1):
        A = softmax(Z, dim)
        right = A * (dLdA - np.sum(dLdA * A, axis=dim, keepdims=True))
        assert softmax_backward_variant(right, Z, dim, dLdA) == ""
        for exps in (np.exp(Z - Z.max(axis=dim, keepdims=True)), np.exp(Z)):
            wrong = exps * (dLdA - np.sum(dLdA * exps, axis=dim, keepdims=True))
            assert softmax_backward_variant(wrong, Z, dim, dLdA) == "unnormalised-cache"
        assert softmax_backward_variant(dLdA * A * (1 - A), Z, dim, dLdA) == ""  # the diagonal
    cached = Failure("value", "dLdZ", variant="unnormalised-cache")
    other = Failure("value", "dLdZ", role="backward-vs-forward")
    assert {h.family for h in hints("Softmax", {"a": cached, "b": other}).values()} == \
        {"softmax-cache"}
    # With A wrong too, the forward is the likelier cause.
    assert "softmax-cache" not in {h.family for h in hints(
        "Softmax", {"a": cached, "b": Failure("value", "A")}).values()}


def held_out(file: str, find: str, replace: str, family: str) -> Mutant:
    return Mutant(id=f"held-out-{family}", file=file, find=find, replace=replace,
                  test="tests.test_mytorch", bug="", source="tests/grader/test_hints.py",
                  family=family)


# Wrong implementations that are not in the catalogue, one per family where the catalogue's own
# entries could have been learned by heart.
HELD_OUT = [
    held_out("mytorch/nn/linear.py", "Z += self.b\n", "Z += 2 * self.b\n", "linear-bias"),
    held_out("mytorch/nn/scaled_dot_product_attention.py",
             "1.0 / math.sqrt(Q.shape[-1])  #", "1.0 / math.sqrt(K.shape[-2])  #", "sdpa-scale"),
    held_out("mytorch/nn/scaled_dot_product_attention.py", "dLdK *= scale\n", "dLdK *= 1.0\n",
             "sdpa-backward-scale"),
    held_out("mytorch/nn/activation.py", "A /= A.sum(axis=self.dim, keepdims=True)\n",
             "A /= A.sum()\n", "softmax-forward"),
    held_out("mytorch/nn/multi_head_attention.py",
             "v = self._split_heads(self.v_proj.forward(value))\n",
             "v = self._split_heads(self.v_proj.forward(key))\n", "mha-projection-input"),
    held_out("mytorch/nn/scaled_dot_product_attention.py",
             "np.copyto(dLdS, 0, where=self.mask)\n", "dLdS[self.mask == True] = 0.0\n",
             "boolean-index"),
    held_out("mytorch/nn/activation.py",
             "A /= A.sum(axis=self.dim, keepdims=True)\nself.A = A\nreturn A\n",
             "self.A = A.copy()\nA /= A.sum(axis=self.dim, keepdims=True)\nreturn A\n",
             "softmax-cache"),
    # Its backward raises (out_proj never saw an input) before any gradient is compared.
    held_out("mytorch/nn/multi_head_attention.py",
             "return self.out_proj.forward(self._concat_heads(heads))\n",
             "return self._concat_heads(heads)\n", "mha-forward"),
]


@pytest.mark.slow
@pytest.mark.parametrize("mutant", HELD_OUT, ids=lambda m: m.family)
def test_wrong_implementations_outside_the_catalogue_get_their_familys_hint(mutant):
    graded = hint_report.judge_mutant(mutant, SEED)
    assert graded.category is not None, "the wrong implementation scored full marks"
    assert mutant.family in graded.families, graded.families


def test_the_reference_scores_full_marks_with_no_hint():
    graded = hint_report.judge_tree(hint_report.REPO_ROOT / "mytorch", SEED)
    assert graded.category is None
    results = [result for run in graded.runs.values() for result in run.results]
    assert results and all(r.passed and not r.hint and not r.message for r in results)


def test_the_quote_check_finds_a_quoted_input():
    """tools/hint_report.py grades each catalogue mutant once (make mutants), every category, and
    fails on feedback that could quote a hidden input: an input to 5 digits, or three consecutive
    inputs to 3 digits; what the grader's messages say (shapes, 3-digit differences) passes."""
    inputs = hint_report.hidden_values(SEED)
    assert hint_report.quoted_inputs(f"expected {inputs[10]:.6e} at [0, 1]", SEED) == [
        f"{inputs[10]:.6e}"]
    three = " ".join(f"{x:.3g}" for x in inputs[20:23])
    assert len(hint_report.quoted_inputs(f"got [{three}]", SEED)) == 1, three
    assert hint_report.quoted_inputs(
        "dLdA differs: max |difference| 0.125 (shape (2, 3, 4)); rows 1, 2 of 3", SEED) == []


def test_language_model_hints_name_the_one_cause_the_numbers_show():
    tolerance, mark = 0.02, 3.5
    # Good and consistent: nothing to say. Weak but consistent, nothing known: nothing either.
    assert lm_hint(3.0, mark, 3.01, 3.0, 2.95, tolerance) == ""
    assert lm_hint(4.0, mark, 4.0, 4.0, 3.9, tolerance) == ""
    assert lm_hint(4.0, mark, None, None, None, tolerance) == ""
    # The run's own evaluation is worse than the weights in eval mode: dropout left on (only a
    # model with dropout; tests/grader/test_lm_integrity.py has the other cases).
    assert "model.eval()" in lm_hint(3.0, mark, 3.6, 3.0, 2.95, tolerance, dropout_active=True)
    # Weights far worse than their checkpoint's best validation: not the best epoch's weights.
    not_best = lm_hint(4.0, mark, 4.0, 4.0, 4.0 / (1 + 2 * VAL_TEST_GAP), tolerance)
    assert "best epoch" in not_best
    assert lm_hint(4.0, mark, 4.0, 4.0, 4.0 / (1 + VAL_TEST_GAP / 2), tolerance) == ""
    # The metrics are better than the packed weights give: other weights were evaluated.
    assert "not the ones that were evaluated" in lm_hint(3.6, mark, 3.0, 3.6, 3.5, tolerance)


def test_weights_of_another_tokenizer_are_named_in_the_refusal(tmp_path):
    make_model_handin(tmp_path / "handin", "char")
    config = yaml.safe_load((tmp_path / "handin" / "config.yaml").read_text())
    config["tokenization"]["token_type"] = "1k"
    (tmp_path / "handin" / "config.yaml").write_text(yaml.safe_dump(config))
    with pytest.raises(grade_model.GradingError, match="the weights fit the char tokenizer, but "
                       "config.yaml's tokenization.token_type is 1k"):
        grade_model.evaluate_handin(tmp_path / "handin", make_hidden_set(tmp_path / "hidden"))


def test_a_hint_on_a_step_that_raised_names_its_inputs_and_the_shapes_it_must_return():
    """The judge's own inputs of the step that raised, shape and dtype (never a value), and for a
    backward the shape of each gradient: that of the input of the object's last forward."""
    from autograder.judging.scoring.verdicts import step_operands
    from autograder.sandboxed.wire import Program

    p = Program()
    softmax = p.new("Softmax", dim=-1)
    p.call(softmax, "forward", np.zeros((5, 3)))
    p.call(softmax, "forward", np.zeros((4, 3)))
    p.call(softmax, "backward", np.zeros((2, 3), dtype=np.float32))
    assert step_operands(p.steps, 3, p.arrays) == (
        "Softmax.backward was given dLdA (2, 3) float32; dLdZ must be shaped like Z, (4, 3)")
    attention = p.new("ScaledDotProductAttention")
    p.call(attention, "forward", np.zeros((2, 5, 4)), np.zeros((2, 6, 4)), np.zeros((2, 6, 3)),
           np.zeros((5, 6), dtype=bool))
    assert step_operands(p.steps, 5, p.arrays) == (
        "ScaledDotProductAttention.forward was given Q (2, 5, 4) float64, K (2, 6, 4) float64, "
        "V (2, 6, 3) float64, mask (5, 6) bool")
    assert step_operands(p.steps, 0, p.arrays) == ""  # a constructor: nothing to name
    raised = Failure("raised", "backward", step="Softmax.backward", exception="ValueError",
                     operands="Softmax.backward was given dLdA (2, 3) float32")
    text = hints("Softmax", {"t": raised})["t"].text
    assert text.endswith("(Softmax.backward was given dLdA (2, 3) float32)"), text
    valued = hints("Softmax", {"t": Failure("value", "dLdZ", operands="x")}).get("t")
    assert valued is None or "(x)" not in valued.text, "only a step that raised names its inputs"
