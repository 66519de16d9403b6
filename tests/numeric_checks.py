"""Numeric checks of the mytorch tests (``tests/test_mytorch.py``, ``tests/test_mytorch_lm.py``),
on the truths of ``hw4lib/numeric_truths.py``, which the autograder's hidden tests share; and the
checks the model's tests share (a second call against a fresh layer, the device and dtype).

Comparisons are relative to the truth's largest entry:
max|actual - truth| <= rtol * max(max|truth|, 1).

Fully masked query rows (every key masked) have two accepted conventions. Adding -eps to every
score of such a row leaves S equal scores, so the row attends uniformly: its output is the mean of
V over the keys and it adds d_output_row / S to every key's dV, whatever the backward does. Its
gradient into Q and K is where implementations differ: zeroing the score gradient at masked
positions gives 0 (what finite differences measure, since the masked scores are the constant -eps),
while the plain softmax backward at the uniform weights gives a nonzero dQ row and a dK
contribution. The handout's formula does not single these rows out, so ``check_sdpa_fully_masked``
and ``check_mha_fully_masked`` accept both: they compare only the parts the two conventions share,
and compare everything on a second backward whose upstream gradient is 0 on those rows. Every other
check uses masks that leave each row at least one allowed key, where the conventions agree.
"""
from __future__ import annotations

from copy import deepcopy
from contextlib import contextmanager
from typing import Callable

import numpy as np
import torch

from tests.failure_messages import in_case
from tests.testing_framework import check_built_on_input_device, tensors_in
from hw4lib.numeric_truths import (DIFFERENCES, PROJECTIONS, RTOL_FINITE_DIFF, RTOL_TORCH,
                                   as_tensor, difference_features, leaf,
                                   torch_multihead_attention, torch_parameter_grads)

# truth(Q, K, V, mask, d_output) -> (output, dQ, dK, dV) as float64 numpy arrays, for masks that
# leave every query row at least one allowed key.
AttentionTruth = Callable[..., tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]]


def assert_close(name: str, actual, expected, rtol: float = RTOL_TORCH) -> None:
    """Shapes equal, actual finite, and max|actual - expected| <= rtol * max(max|expected|, 1).
    A failure says what kind of difference it is (:func:`describe_difference`)."""
    if isinstance(expected, torch.Tensor):
        expected = expected.detach().numpy()
    expected = np.asarray(expected)
    assert actual is not None, f"{name}: got None (was it computed and stored?)"
    actual = np.asarray(actual)
    assert actual.shape == expected.shape, (f"{name}: expected shape {expected.shape}, "
                                            f"got {actual.shape}{describe_difference(actual, expected)}")
    assert np.all(np.isfinite(actual)), f"{name}: contains NaN or inf"
    error = float(np.max(np.abs(actual - expected), initial=0.0))
    scale = max(float(np.max(np.abs(expected), initial=0.0)), 1.0)
    assert error <= rtol * scale, (f"{name}: max abs error {error:.3e} exceeds {rtol:.0e} x "
                                   f"{scale:.3g} (shape {expected.shape})"
                                   f"{describe_difference(actual, expected)}")


def assert_unchanged(what: str, array: np.ndarray, given: np.ndarray) -> None:
    """``array`` (an input or upstream gradient the student's code received) still equals
    ``given``, a copy taken before the call; checked before any value computed from it."""
    assert np.array_equal(array, given), (
        f"{what} was changed in place: compute new arrays (or work on a copy) instead of writing "
        f"into what you were given")


def describe_difference(actual, expected) -> str:
    """'; <what the difference looks like>' for an assertion message, or '' when nothing
    recognisable describes it."""
    features = difference_features(actual, expected)
    return "".join(f"; {DIFFERENCES[name]}" for name in DIFFERENCES if name in features)


def numerical_gradient(loss: Callable[[], float], x: np.ndarray, step: float = 1e-6) -> np.ndarray:
    """d loss() / d x by central differences; x is perturbed in place and restored."""
    grad = np.zeros_like(x)
    for index in np.ndindex(x.shape):
        original = x[index]
        x[index] = original + step
        plus = loss()
        x[index] = original - step
        minus = loss()
        x[index] = original
        grad[index] = (plus - minus) / (2 * step)
    return grad


def check_layer_against_torch(layer, torch_forward: Callable, A: np.ndarray, W: np.ndarray,
                              b: np.ndarray, dLdZ: np.ndarray, where: str,
                              output_name: str = "output") -> None:
    """float64 forward, dLdA and stored dLdW, dLdb of a layer loaded with W, b (Linear,
    LayerNorm) against ``torch_forward(A, W, b)`` under PyTorch autograd; each step's output is
    checked before the next step runs, and A and dLdZ must come back unchanged."""
    tA, tW, tb = leaf(A), leaf(W), leaf(b)
    torch_out = torch_forward(tA, tW, tb)
    torch_out.backward(torch.tensor(dLdZ))  # a copy: the truth shares no memory with dLdZ
    given, upstream = A.copy(), dLdZ.copy()
    out = layer.forward(A)
    assert_unchanged(f"{where}: forward's input A", A, given)
    assert_close(f"{where}: {output_name}", out, torch_out)
    dLdA = layer.backward(dLdZ)
    assert_unchanged(f"{where}: backward's upstream gradient dLdZ", dLdZ, upstream)
    assert_close(f"{where}: dLdA", dLdA, tA.grad)
    assert_close(f"{where}: dLdW", layer.dLdW, tW.grad)
    assert_close(f"{where}: dLdb", layer.dLdb, tb.grad)


# ---------------------------------------------------------------------------------------------
# MultiHeadAttention: PyTorch's module with the same weights, and the projections' gradients
# ---------------------------------------------------------------------------------------------

def mytorch_mha(weights: list[np.ndarray], num_heads: int):
    """The student's ``MultiHeadAttention`` loaded with [Wq, bq, Wk, bk, Wv, bv, Wo, bo]."""
    from mytorch.nn import MultiHeadAttention

    mha = MultiHeadAttention(weights[0].shape[0], num_heads)
    mha.init_weights(*weights)
    return mha


def random_mha_case(seed: int, draw_weights, N: int, L: int, S: int, E: int, H: int):
    """(rng, weights, mha, [query, key, value]): weights = draw_weights(rng, E), ``mytorch_mha``
    holding them with H heads, then random query (N, L, E), key and value (N, S, E)."""
    rng = np.random.default_rng(seed)
    weights = draw_weights(rng, E)
    return rng, weights, mytorch_mha(weights, H), [rng.standard_normal((N, T, E))
                                                   for T in (L, S, S)]


def assert_projection_grads_close(mha, expected: list[np.ndarray], where: str,
                                  rtol: float = RTOL_TORCH, layers=PROJECTIONS) -> None:
    """Each projection's stored dLdW, dLdb against ``expected`` (order of torch_parameter_grads);
    only the projections named in ``layers`` are checked."""
    for index, layer_name in enumerate(PROJECTIONS):
        if layer_name not in layers:
            continue
        layer = getattr(mha, layer_name)
        assert_close(f"{where}: {layer_name}.dLdW", layer.dLdW, expected[2 * index], rtol)
        assert_close(f"{where}: {layer_name}.dLdb", layer.dLdb, expected[2 * index + 1], rtol)


def check_mha_against_torch(mha, weights: list[np.ndarray], num_heads: int, query, key, value,
                            key_padding_mask, attn_mask, d_output, where: str) -> None:
    """float64 forward and backward of ``mha`` (loaded with ``weights``) against PyTorch's module:
    the output (before backward runs), the inputs' gradients and every projection's dLdW, dLdb;
    the inputs and d_output must come back unchanged."""
    reference = torch_multihead_attention(weights, num_heads)
    inputs = [leaf(x) for x in (query, key, value)]
    t_out, _ = reference(*inputs, key_padding_mask=as_tensor(key_padding_mask),
                         attn_mask=as_tensor(attn_mask), need_weights=False)
    t_out.backward(torch.tensor(d_output))  # a copy: the truth shares no memory with d_output
    given, upstream = [x.copy() for x in (query, key, value)], d_output.copy()
    out = mha.forward(query, key, value, key_padding_mask=key_padding_mask, attn_mask=attn_mask)
    for name, x, copy in zip(("query", "key", "value"), (query, key, value), given):
        assert_unchanged(f"{where}: forward's input {name}", x, copy)
    assert_close(f"{where}: output", out, t_out)
    d_inputs = mha.backward(d_output)
    assert_unchanged(f"{where}: backward's upstream gradient d_output", d_output, upstream)
    for name, mine, x in zip(("dquery", "dkey", "dvalue"), d_inputs, inputs):
        assert_close(f"{where}: {name}", mine, x.grad)
    assert_projection_grads_close(mha, torch_parameter_grads(reference), where)


# ---------------------------------------------------------------------------------------------
# Finite differences of sum(output * upstream) for each layer
# ---------------------------------------------------------------------------------------------

def assert_matches_finite_differences(loss: Callable[[], float], gradients, where: str) -> None:
    """``gradients`` is [(name, mine, x), ...]: each ``mine`` against d loss() / d x."""
    for name, mine, x in gradients:
        assert_close(f"{where}{name}", mine, numerical_gradient(loss, x), RTOL_FINITE_DIFF)


def check_layer_finite_differences(layer, A: np.ndarray, dLdZ: np.ndarray,
                                   where: str = "") -> None:
    """A layer with parameters W, b (Linear, LayerNorm): its dLdA and stored dLdW, dLdb against
    finite differences in A, layer.W, layer.b; dLdZ must come back unchanged."""
    layer.forward(A)
    upstream = dLdZ.copy()
    dLdA = layer.backward(dLdZ)
    assert_unchanged(f"{where}backward's upstream gradient dLdZ", dLdZ, upstream)
    loss = lambda: float(np.sum(layer.forward(A) * dLdZ))  # noqa: E731
    assert_matches_finite_differences(loss, [("dLdA", dLdA, A), ("dLdW", layer.dLdW, layer.W),
                                             ("dLdb", layer.dLdb, layer.b)], where)


def check_softmax_finite_differences(softmax, Z: np.ndarray, dLdA: np.ndarray,
                                     where: str) -> None:
    """Softmax's dLdZ against finite differences in Z; dLdA must come back unchanged."""
    softmax.forward(Z)
    upstream = dLdA.copy()
    dLdZ = softmax.backward(dLdA)
    assert_unchanged(f"{where}Softmax.backward's upstream gradient dLdA", dLdA, upstream)
    loss = lambda: float(np.sum(softmax.forward(Z) * dLdA))  # noqa: E731
    assert_matches_finite_differences(loss, [("dLdZ", dLdZ, Z)], where)


def check_sdpa_finite_differences(attention, Q, K, V, mask, d_output) -> None:
    """ScaledDotProductAttention's (dQ, dK, dV) against finite differences in Q, K, V; d_output
    must come back unchanged."""
    attention.forward(Q, K, V, mask)
    upstream = d_output.copy()
    dQ, dK, dV = attention.backward(d_output)
    assert_unchanged("backward's upstream gradient d_output", d_output, upstream)
    loss = lambda: float(np.sum(attention.forward(Q, K, V, mask) * d_output))  # noqa: E731
    assert_matches_finite_differences(loss, [("dQ", dQ, Q), ("dK", dK, K), ("dV", dV, V)], "")


def mha_finite_differences(mha, query, key, value, masks: dict, upstream) -> list[np.ndarray]:
    """Finite differences of sum(mha.forward(query, key, value, **masks) * upstream):
    [dquery, dkey, dvalue] + every projection's [dW, db] (order of torch_parameter_grads)."""
    loss = lambda: float(np.sum(mha.forward(query, key, value, **masks) * upstream))  # noqa
    return ([numerical_gradient(loss, x) for x in (query, key, value)]
            + [numerical_gradient(loss, getattr(getattr(mha, layer), param))
               for layer in PROJECTIONS for param in ("W", "b")])


def check_mha_finite_differences(mha, query, key, value, key_padding_mask, attn_mask,
                                 d_output) -> None:
    """MultiHeadAttention's input gradients and every projection's dLdW, dLdb against finite
    differences."""
    masks = {"key_padding_mask": key_padding_mask, "attn_mask": attn_mask}
    truth = mha_finite_differences(mha, query, key, value, masks, d_output)
    mha.forward(query, key, value, **masks)
    upstream = d_output.copy()
    d_inputs = mha.backward(d_output)
    assert_unchanged("backward's upstream gradient d_output", d_output, upstream)
    for name, mine, theirs in zip(("dquery", "dkey", "dvalue"), d_inputs, truth):
        assert_close(name, mine, theirs, RTOL_FINITE_DIFF)
    assert_projection_grads_close(mha, truth[3:], "finite differences", RTOL_FINITE_DIFF)


# ---------------------------------------------------------------------------------------------
# Fully masked query rows: both conventions accepted (see the module docstring)
# ---------------------------------------------------------------------------------------------

def assert_outputs_finite(dtype, **arrays: np.ndarray) -> None:
    """Every array has ``dtype`` and holds no NaN or inf."""
    for name, x in arrays.items():
        assert x.dtype == dtype, f"{name}: {np.dtype(dtype).name} in, got {x.dtype}"
        assert np.all(np.isfinite(x)), f"{name} has NaN or inf with a fully masked query row"


def check_sdpa_fully_masked(attention, Q, K, V, mask, d_output, truth: AttentionTruth,
                            rtol: float, where: str) -> None:
    """ScaledDotProductAttention on a mask with fully masked query rows, in either convention.

    Q, K, V, d_output share one dtype (float32 or float64), which every result must keep. The truth
    runs in float64 with the fully masked rows unmasked and their upstream gradient set to 0, so
    it gives everything the other rows determine.
    Backward 1 (d_output): the output (the mean of V on the fully masked rows), dQ of the other
    rows, and dV in full. Backward 2 (d_output 0 on the fully masked rows): dQ, dK and dV in full.
    """
    scores_shape = (*Q.shape[:-1], K.shape[-2])
    full = np.broadcast_to(mask, scores_shape).all(axis=-1)  # (N, ..., H, L)
    assert full.any(), "the case must have a fully masked query row"
    truth_mask = np.broadcast_to(mask, scores_shape).copy()
    truth_mask[full] = False  # any allowed key will do: these rows get no upstream gradient
    d_zeroed = d_output * ~full[..., None]
    t_out, t_dQ, t_dK, t_dV = truth(*(x.astype(np.float64) for x in (Q, K, V)), truth_mask,
                                    d_zeroed.astype(np.float64))
    t_out = np.where(full[..., None], V.astype(np.float64).mean(axis=-2, keepdims=True), t_out)
    # Each fully masked row adds d_output_row / S to the gradient of every key's value.
    uniform_share = np.sum(d_output * full[..., None], axis=-2, keepdims=True) / K.shape[-2]

    out = attention.forward(Q, K, V, mask)
    assert_outputs_finite(Q.dtype, output=out)
    assert_close(f"{where}: output (fully masked rows: mean of V over the keys)", out, t_out, rtol)
    dQ, dK, dV = attention.backward(d_output)
    assert_outputs_finite(Q.dtype, dQ=dQ, dK=dK, dV=dV)
    assert_close(f"{where}: dQ of the rows with an allowed key", dQ[~full], t_dQ[~full], rtol)
    assert_close(f"{where}: dV (a fully masked row adds d_output_row / S to every key)", dV,
                 t_dV + uniform_share, rtol)

    attention.forward(Q, K, V, mask)
    dQ, dK, dV = attention.backward(d_zeroed)
    assert_outputs_finite(Q.dtype, dQ=dQ, dK=dK, dV=dV)
    for name, mine, theirs in (("dQ", dQ, t_dQ), ("dK", dK, t_dK), ("dV", dV, t_dV)):
        assert_close(f"{where}, d_output 0 on the fully masked rows: {name}", mine, theirs, rtol)


def check_mha_fully_masked(mha, weights: list[np.ndarray], num_heads: int, query, key, value,
                           key_padding_mask, attn_mask, d_output, where: str) -> None:
    """float64 MultiHeadAttention, loaded with ``weights``, whose masks hide every key from some
    query rows, in either convention.

    Outputs: PyTorch's on the other rows (it gives NaN on these), and out_proj(mean over the keys
    of v_proj(value)) on the fully masked rows. Gradients against finite differences of the same
    forward: for d_output, the parts both conventions share (dquery of the other rows, dvalue,
    v_proj's and out_proj's); for d_output set to 0 on the fully masked rows, all of them.
    """
    N, L, S = query.shape[0], query.shape[1], key.shape[1]
    padding = np.zeros((N, S), bool) if key_padding_mask is None else key_padding_mask
    causal = np.zeros((L, S), bool) if attn_mask is None else attn_mask
    full = (padding[:, None, :] | causal[None]).all(axis=-1)  # (N, L)
    assert full.any(), "the case must have a fully masked query row"

    reference = torch_multihead_attention(weights, num_heads)
    t_out, _ = reference(*(torch.from_numpy(x) for x in (query, key, value)),
                         key_padding_mask=as_tensor(key_padding_mask),
                         attn_mask=as_tensor(attn_mask), need_weights=False)
    _, _, _, _, Wv, bv, Wo, bo = weights
    mean_of_values = (value.mean(axis=1) @ Wv.T + bv) @ Wo.T + bo  # (N, E)
    t_out = np.where(full[..., None], mean_of_values[:, None, :], t_out.detach().numpy())
    masks = {"key_padding_mask": key_padding_mask, "attn_mask": attn_mask}

    def backward_and_truth(upstream: np.ndarray, label: str):
        """mha's (dquery, dkey, dvalue) for ``upstream``, and the finite differences of
        sum(output * upstream) for query, key, value and every projection's W and b."""
        truth = mha_finite_differences(mha, query, key, value, masks, upstream)
        out = mha.forward(query, key, value, **masks)
        assert_outputs_finite(np.float64, output=out)
        assert_close(f"{where}, {label}: output (fully masked rows: out_proj(mean of "
                     f"v_proj(value)))", out, t_out)
        d_inputs = mha.backward(upstream)
        assert_outputs_finite(np.float64, dquery=d_inputs[0], dkey=d_inputs[1],
                              dvalue=d_inputs[2])
        return d_inputs, truth

    label = "d_output"  # the fully masked rows' dq, so dkey, q_proj and k_proj, may differ
    (dquery, _, dvalue), truth = backward_and_truth(d_output, label)
    assert_close(f"{where}, {label}: dquery of the rows with an allowed key", dquery[~full],
                 truth[0][~full], RTOL_FINITE_DIFF)
    assert_close(f"{where}, {label}: dvalue", dvalue, truth[2], RTOL_FINITE_DIFF)
    assert_projection_grads_close(mha, truth[3:], f"{where}, {label}", RTOL_FINITE_DIFF,
                                  layers=("v_proj", "out_proj"))

    label = "d_output 0 on the fully masked rows"
    d_inputs, truth = backward_and_truth(d_output * ~full[..., None], label)
    for name, mine, theirs in zip(("dquery", "dkey", "dvalue"), d_inputs, truth):
        assert_close(f"{where}, {label}: {name}", mine, theirs, RTOL_FINITE_DIFF)
    assert_projection_grads_close(mha, truth[3:], f"{where}, {label}", RTOL_FINITE_DIFF)


class FixedDropout:
    """Stands in for ``torch.nn.functional.dropout`` with known keep masks instead of random ones.

    In training, an input of a given shape is multiplied by ``keep_mask(shape, p)`` (0 or
    1 / (1 - p), the same every time for that shape), so a test can recompute a layer's output with
    the very same masks. ``calls`` lists the (shape, p) of every dropout that acted.
    ``nn.Dropout`` and ``nn.MultiheadAttention``'s attention dropout both go through it.
    """

    def __init__(self):
        self.calls: list[tuple[tuple[int, ...], float]] = []

    @staticmethod
    def draws(shape) -> torch.Tensor:
        """The uniform draws behind the masks of ``shape`` (float32, the same at every call)."""
        seed = int(np.prod(shape)) * 131 + len(shape)
        return torch.rand(tuple(shape), generator=torch.Generator().manual_seed(seed))

    @staticmethod
    def keep_mask(shape, p: float) -> torch.Tensor:
        return (FixedDropout.draws(shape) >= p).float() / (1.0 - p)

    def assert_acted(self, shape, what: str) -> None:
        """Fail unless a dropout acted on a tensor of ``shape``; ``what`` says which one should have."""
        acted = [recorded for recorded, _ in self.calls]
        assert tuple(shape) in acted, f"{what} (the dropouts that acted had shapes {acted})"

    def __call__(self, input, p=0.5, training=True, inplace=False):
        if not training or p == 0.0:
            return input
        self.calls.append((tuple(input.shape), p))
        return input * self.keep_mask(input.shape, p).to(input.dtype)


@contextmanager
def fixed_dropout():
    """Within the block, every dropout in training uses :class:`FixedDropout`'s known masks."""
    replacement = FixedDropout()
    original = torch.nn.functional.dropout
    torch.nn.functional.dropout = replacement
    try:
        yield replacement
    finally:
        torch.nn.functional.dropout = original


def check_second_calls(make: Callable, first: tuple, second: tuple, upstreams: tuple,
                       stored: Callable, what: str) -> None:
    """A stateful numpy layer keeps nothing from one call for the next.

    ``make()`` returns a fresh, loaded instance. One instance runs ``forward(*first)``, then
    ``forward(*second)`` (other shapes, other masks: the masks go in the positional arguments),
    then ``backward(upstreams[0])`` and ``backward(upstreams[1])``. Its second forward's output,
    and each backward's returned gradients and stored ones (``stored(instance)``: {name: array},
    e.g. dLdW), must equal what a fresh instance gives for ``forward(*second)`` followed by that
    backward alone.
    """
    def gradients(layer, upstream) -> dict:
        returned = layer.backward(upstream)  # None from a layer whose input has no gradient
        returned = returned if isinstance(returned, tuple) else (returned,) * (returned is not None)
        return {**{f"returned gradient #{i + 1}": g for i, g in enumerate(returned)},
                **stored(layer)}

    layer = make()
    with in_case(f"{what}: a first forward", inputs=first[0]):
        layer.forward(*first)
    with in_case(f"{what}: a second forward of other shapes and masks", inputs=second[0]):
        out = layer.forward(*second)
    with in_case(f"{what}: two backwards after the second forward", d_output=upstreams[0]):
        mine = [gradients(layer, upstream) for upstream in upstreams]
    fresh = make()
    assert_close(f"{what}: the second forward's output (a fresh instance's is the truth)", out,
                 fresh.forward(*second))
    for index, upstream in enumerate(upstreams):
        if index:
            fresh = make()
            fresh.forward(*second)
        truth = gradients(fresh, upstream)
        for name, expected in truth.items():
            assert_close(f"{what}: backward #{index + 1} after the second forward, {name} (a "
                         f"fresh instance's is the truth)", mine[index][name], expected)


def check_second_call_is_fresh(layer: torch.nn.Module, first: dict, second: dict,
                               what: str) -> None:
    """In eval mode, ``layer(**first)`` then ``layer(**second)`` (other shapes, other masks) gives
    the tensors a copy of ``layer`` made before the first call gives for ``second`` alone:
    nothing of the first call (a mask, a length, a table) reaches the second."""
    fresh = deepcopy(layer).eval()
    layer.eval()
    with torch.no_grad():
        with in_case(f"{what}: a first call", **first):
            layer(**first)
        with in_case(f"{what}: a second call of other shapes and masks", **second):
            got = tensors_in(layer(**second))
        expected = tensors_in(fresh(**second))
    for index, (mine, truth) in enumerate(zip(got, expected)):
        assert mine.shape == truth.shape and torch.allclose(mine, truth, atol=1e-6), (
            f"{what}: output #{index + 1} of a second call (shape {tuple(mine.shape)}) differs "
            f"from a fresh layer's (shape {tuple(truth.shape)}) for the same input: keep nothing "
            f"from one call for the next (a mask, a length)")


def masks_on(device, lengths: list[int], length: int) -> dict:
    """{"key_padding_mask": (N, T) bool, True at padding, "attn_mask": (T, T) bool, True above
    the diagonal}, both on ``device``, for N = len(lengths) sequences of T = length positions."""
    positions = torch.arange(length, device=device)
    return {"key_padding_mask": positions[None] >= torch.tensor(lengths, device=device)[:, None],
            "attn_mask": positions[None] > positions[:, None]}


def check_layer_device_dtype_and_second_call(layer, what: str) -> None:
    """``layer(x, key_padding_mask, attn_mask)`` (d_model 8): on the input's device and dtype
    (meta, float64), and a second masked call of other shapes and masks equal to a fresh
    layer's."""
    def masked_call(device):
        x = torch.zeros(2, 5, 8, device=device, dtype=torch.float64)
        return layer.to(device, torch.float64)(x, **masks_on(device, [5, 3], 5))

    torch.manual_seed(5)
    check_second_call_is_fresh(layer, {"x": torch.randn(3, 6, 8), **masks_on("cpu", [6, 4, 2], 6)},
                               {"x": torch.randn(2, 4, 8), **masks_on("cpu", [3, 4], 4)}, what)
    check_built_on_input_device(masked_call, what, "the output and the weights",
                                dtype=torch.float64)
