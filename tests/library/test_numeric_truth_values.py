# hw4p1: instructor-only
"""hw4lib/numeric_truths.py read by value: the tolerances the mytorch tests and the grader's hidden
tests compare with, at each side of their bound; the difference features behind the hints at each
of their thresholds; the masks' promises over many draws (a visible key in every row, one hidden
in every finite-difference row, padding a suffix, the causal mask strict), the PyTorch module
against attention written out in numpy, and the order of its gradients.
tests/library/test_numeric_truths.py checks backward_with; this file the rest, in about a second.

    .venv/bin/python -m pytest -q tests/library/test_numeric_truth_values.py
"""
import numpy as np
import pytest
import torch

from hw4lib import numeric_truths as truths
from tests.numeric_checks import assert_close


@pytest.mark.parametrize("rtol, value", [(truths.RTOL_TORCH, 1e-8),
                                         (truths.RTOL_FINITE_DIFF, 1e-6)])
def test_each_tolerance_accepts_errors_up_to_its_value_times_the_truth_s_scale(rtol, value):
    assert rtol == value
    for scale in (0.5, 4.0):  # the scale is max(max|truth|, 1)
        truth = np.array([[scale, -0.25], [0.0, 0.125]])
        bound = value * max(scale, 1.0)
        assert_close("inside", truth + [[0.9 * bound, 0.0], [0.0, 0.0]], truth, rtol)
        with pytest.raises(AssertionError, match="exceeds"):
            assert_close("outside", truth + [[0.0, 0.0], [1.1 * bound, 0.0]], truth, rtol)


TRUTH = np.random.default_rng(0).standard_normal((3, 4))


@pytest.mark.parametrize("actual, expected, features", [
    (TRUTH * (1 + 2e-3), TRUTH, {"scaled"}),
    (TRUTH * (1 + 5e-4), TRUTH, set()),  # a factor within 1e-3 of 1 is no scaling
    (TRUTH + 5e-7, TRUTH, set()),  # within the default rtol of 1e-6: the same array
    (TRUTH + 3e-6, TRUTH, {"offset"}),
    (TRUTH[:1] + 1.0, TRUTH[:1], set()),  # one row: an offset cannot be told from a difference
    (np.array(2.0), np.array(1.0), {"scaled"}),  # a scalar has no rows
    (np.array([[1.0, -1.0], [2.0, 0.5]]), np.zeros((2, 2)), set()),  # no energy: no factor
    (np.zeros((2, 2)), np.zeros((2, 2)), set()),
    (np.zeros(12), TRUTH, {"zero"}),
    (np.ones((2, 2)), np.zeros((2, 2)), {"offset"}),
    (np.stack([TRUTH, TRUTH]), TRUTH, {"unreduced"}),
    (TRUTH[None, :, :2], TRUTH[:, :2], {"unreduced", "reshaped"}),
    (TRUTH[:2], np.stack([TRUTH[:2], TRUTH[:2]]), set()),  # fewer axes than the truth: not unreduced
    (TRUTH.reshape(2, 6), TRUTH, {"reshaped"}),
    (TRUTH.reshape(2, 3, 2), TRUTH, {"reshaped"}),  # more axes, other trailing ones: not unreduced
    (np.full(4, 1e-6), np.zeros((2, 2)), {"reshaped"}),  # the same numbers to exactly the tolerance
    (np.full((2, 2), 1e-6), np.zeros((2, 2)), set()),  # exactly the tolerance apart: the same
    (TRUTH.reshape(12)[::-1].copy(), TRUTH, {"reshaped"}),
    (TRUTH.reshape(12) + 1.0, TRUTH, set()),
    (np.full((3, 4), np.inf), TRUTH, set()),
    (np.zeros((0, 4)), TRUTH, set()),
    (TRUTH, np.zeros((0, 4)), set()),
])
def test_difference_features_at_each_threshold(actual, expected, features):
    assert truths.difference_features(actual, expected) == features


def test_the_features_tolerance_is_relative_to_the_truth_s_largest_entry_or_one():
    big = TRUTH * 100  # scale 100 * max|TRUTH|: an offset of 3e-6 is within 1e-6 of it
    assert truths.difference_features(big + 3e-6, big) == frozenset()
    assert truths.difference_features(big + 3e-6, big, rtol=1e-9) == {"offset"}
    small = TRUTH / 100  # scale 1
    assert truths.difference_features(small + 3e-6, small) == {"offset"}
    assert truths.difference_features(small + 1.5e-6, small) == {"offset"}
    assert truths.difference_features(small + 5e-7, small) == frozenset()


def test_an_offset_is_each_row_within_the_tolerance_of_the_first_row_s_difference():
    tolerance = 1e-6 * max(float(np.abs(TRUTH).max()), 1.0)
    spread = np.array([0.0, 0.9, -0.9])[:, None] * tolerance  # within it of row 0, not of the others
    assert truths.difference_features(TRUTH + 1.0 + spread, TRUTH) == {"offset"}
    assert truths.difference_features(TRUTH + 1.0 + spread[::-1], TRUTH) == frozenset()


def test_an_offset_is_a_vector_of_the_last_axis_and_exactly_the_tolerance_is_within_it():
    cube = np.random.default_rng(5).standard_normal((2, 3, 4))
    assert truths.difference_features(cube + [1.0, -2.0, 0.5, 3.0], cube) == {"offset"}
    assert truths.difference_features(cube + [[1.0], [-2.0], [0.5]], cube) == frozenset()
    tolerance = 2.0**-20  # a power of two: every difference below is exact
    rows = np.array([[1.0, 1.0], [1.0 + tolerance, 1.0]])
    assert truths.difference_features(rows, np.zeros((2, 2)), rtol=tolerance) == {"offset"}
    rows[1, 0] += tolerance
    assert truths.difference_features(rows, np.zeros((2, 2)), rtol=tolerance) == frozenset()


def test_a_permutation_of_the_right_numbers_is_rearranged_not_scaled():
    rearranged = TRUTH.T.reshape(3, 4)
    assert truths.difference_features(rearranged, TRUTH) == {"rearranged"}
    assert truths.difference_features(rearranged * 3, TRUTH) == frozenset()


def hidden_keys(mask: np.ndarray) -> np.ndarray:
    return mask.sum(axis=-1)


def test_a_visible_key_mask_hides_about_its_share_and_keeps_one_key_uniformly():
    rng = np.random.default_rng(1)
    mask = truths.mask_with_visible_keys(rng, (4000, 5))
    assert mask.dtype == bool and mask.shape == (4000, 5)
    assert hidden_keys(mask).max() == 4  # a visible key in every row
    assert 0.35 < mask.mean() < 0.45  # half of the four keys a row may hide: 2/5
    everything = truths.mask_with_visible_keys(rng, (2, 2500, 5), p_masked=1.0)
    assert (hidden_keys(everything) == 4).all()  # exactly one key kept, the one drawn
    kept = np.argmin(everything.reshape(-1, 5), axis=-1)
    assert (abs(np.bincount(kept, minlength=5) - 1000) < 150).all()  # each key 1000 of 5000 times
    assert not truths.mask_with_visible_keys(rng, (3, 6), p_masked=0.0).any()


def test_a_finite_difference_mask_hides_and_keeps_a_key_in_every_row():
    rng = np.random.default_rng(2)
    masks = [truths.finite_difference_mask(rng, (3, 4, 6)) for _ in range(200)]
    stacked = np.stack(masks)
    assert stacked.shape == (200, 3, 4, 6) and stacked.dtype == bool
    assert hidden_keys(stacked).min() >= 1 and hidden_keys(stacked).max() <= 5
    assert (hidden_keys(stacked[..., 0, :]) == 1).all()  # the first row: exactly one hidden
    later = stacked[..., 1:, :]
    # one hidden key by choice, each of the 4 others (not the kept one) hidden at 0.4: 2.6 of 6
    assert 0.40 < later.mean() < 0.47
    first_hidden = np.argmax(stacked[..., 0, :], axis=-1)
    assert (np.bincount(first_hidden.ravel(), minlength=6) > 60).all()  # 100 each of 600


def test_padding_is_a_suffix_of_at_least_one_key_and_the_causal_mask_hides_the_future():
    rng = np.random.default_rng(3)
    padding, causal = truths.padding_and_causal_masks(rng, 400, 3, 4)
    assert padding.shape == (400, 4) and causal.shape == (3, 4)
    assert not padding[:, 0].any()
    lengths = 4 - padding.sum(axis=1)
    assert (padding == (np.arange(4) >= lengths[:, None])).all()  # a suffix
    assert (abs(np.bincount(lengths, minlength=5)[1:] - 100) < 40).all()  # 1 to 4: 100 each
    firsts = [truths.padding_and_causal_masks(rng, 3, 2, 4)[0][0] for _ in range(40)]
    assert not np.any(firsts)  # sequence 0 is never padded
    assert (causal == np.array([[0, 1, 1, 1], [0, 0, 1, 1], [0, 0, 0, 1]], bool)).all()


def test_the_pytorch_module_is_attention_written_out_and_its_gradients_come_in_weight_order():
    rng = np.random.default_rng(4)
    E, H, N, L, S = 4, 2, 2, 3, 5
    weights = [rng.standard_normal((E, E) if i % 2 == 0 else (E,)) for i in range(8)]
    Wq, bq, Wk, bk, Wv, bv, Wo, bo = weights
    q, k, v = (rng.standard_normal((N, n, E)) for n in (L, S, S))
    module = truths.torch_multihead_attention(weights, H)
    out = module(*map(torch.from_numpy, (q, k, v)), need_weights=False)[0].detach().numpy()

    def heads(x):  # (N, T, E) -> (N, H, T, E / H)
        return x.reshape(x.shape[0], x.shape[1], H, E // H).transpose(0, 2, 1, 3)

    Q, K, V = heads(q @ Wq.T + bq), heads(k @ Wk.T + bk), heads(v @ Wv.T + bv)
    scores = Q @ K.transpose(0, 1, 3, 2) / np.sqrt(E // H)
    attention = np.exp(scores - scores.max(-1, keepdims=True))
    attention /= attention.sum(-1, keepdims=True)
    mixed = (attention @ V).transpose(0, 2, 1, 3).reshape(N, L, E)
    assert np.allclose(out, mixed @ Wo.T + bo, rtol=0, atol=1e-12)
    marks = [np.full(w.shape, float(i)) for i, w in enumerate(weights)]
    module.in_proj_weight.grad = torch.from_numpy(np.concatenate(marks[0:6:2]))
    module.in_proj_bias.grad = torch.from_numpy(np.concatenate(marks[1:6:2]))
    module.out_proj.weight.grad = torch.from_numpy(marks[6])
    module.out_proj.bias.grad = torch.from_numpy(marks[7])
    grads = truths.torch_parameter_grads(module)
    assert [float(g.flat[0]) for g in grads] == list(range(8))
    assert [g.shape for g in grads] == [w.shape for w in weights]


def test_a_mask_becomes_a_tensor_sharing_its_memory_and_a_leaf_a_float64_copy():
    mask = np.array([True, False])
    tensor = truths.as_tensor(mask)
    mask[1] = True
    assert tensor.tolist() == [True, True] and truths.as_tensor(None) is None
    x = np.array([1.0, 2.0], dtype=np.float32)
    leaf = truths.leaf(x)
    x[0] = 5.0
    assert leaf.dtype == torch.float64 and leaf.requires_grad and leaf.is_leaf
    assert leaf.tolist() == [1.0, 2.0]
