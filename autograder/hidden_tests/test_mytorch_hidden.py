# hw4p1: instructor-only
"""Hidden mytorch tests: what the Autolab grader runs on a student's ``mytorch/``.

The grader runs one category per process from the student's folder, with their ``mytorch`` first
on ``sys.path``::

    python -m autograder.hidden_tests.test_mytorch_hidden --category Linear --json

Same categories and points as ``tests/test_mytorch.py``, but other shapes and seeds, and truths
built differently: PyTorch autograd on explicitly written formulas (attention by masked_fill and
softmax rather than PyTorch's fused kernel), ``torch.nn.MultiheadAttention`` and central finite
differences. Checks that a shortcut cannot pass: every gradient is compared for two different
upstream gradients, a second forward must replace what the first stored, inputs must come back
unmodified, masked keys must not influence the output, and every projection's dLdW/dLdb is checked.

Only numpy, torch, ``tests.testing_framework`` and the student's ``mytorch`` are available here
(the autograder ships nothing else), so the few helpers below are self-contained.
"""
import math

import numpy as np
import torch

from tests.testing_framework import rubric, run_module

RUBRIC = {"Linear": 5, "Softmax": 5, "ScaledDotProductAttention": 20, "MultiHeadAttention": 20}

RTOL = 1e-8  # float64 against PyTorch autograd
RTOL_FD = 1e-6  # float64 against central finite differences


def check(name: str, actual, expected, rtol: float = RTOL) -> None:
    """max|actual - expected| <= rtol * max(max|expected|, 1), shapes equal, everything finite."""
    if isinstance(expected, torch.Tensor):
        expected = expected.detach().numpy()
    assert actual is not None, f"{name}: got None (was it computed and stored?)"
    actual = np.asarray(actual)
    assert actual.shape == expected.shape, (f"{name}: expected shape {expected.shape}, "
                                            f"got {actual.shape}")
    assert np.all(np.isfinite(actual)), f"{name}: contains NaN or inf"
    error = float(np.max(np.abs(actual - expected), initial=0.0))
    scale = max(float(np.max(np.abs(expected), initial=0.0)), 1.0)
    assert error <= rtol * scale, f"{name}: max abs error {error:.3e} > {rtol:.0e} x {scale:.3g}"


def finite_difference(loss, x: np.ndarray, step: float = 1e-6) -> np.ndarray:
    """Central-difference gradient of the scalar loss() with respect to x (perturbed in place)."""
    grad = np.empty_like(x)
    for index in np.ndindex(x.shape):
        saved = x[index]
        x[index] = saved + step
        up = loss()
        x[index] = saved - step
        down = loss()
        x[index] = saved
        grad[index] = (up - down) / (2 * step)
    return grad


def leaf(x: np.ndarray) -> torch.Tensor:
    return torch.tensor(x, dtype=torch.float64, requires_grad=True)


def masks_with_a_visible_key(rng: np.random.Generator, shape: tuple, p: float) -> np.ndarray:
    """Bool mask, True = hidden, where every row along the last axis keeps one visible key."""
    mask = rng.random(shape) < p
    rows = mask.reshape(-1, shape[-1])
    rows[np.arange(rows.shape[0]), rng.integers(0, shape[-1], rows.shape[0])] = False
    return mask


def attention_truth(Q, K, V, mask, d_output):
    """softmax(Q K^T / sqrt(E)) V written out in torch, -inf at masked scores: out, dQ, dK, dV."""
    tq, tk, tv = leaf(Q), leaf(K), leaf(V)
    scores = tq @ tk.transpose(-1, -2) / math.sqrt(Q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(torch.from_numpy(np.broadcast_to(mask, scores.shape).copy()),
                                    float("-inf"))
    out = torch.softmax(scores, dim=-1) @ tv
    out.backward(torch.from_numpy(d_output))
    return out.detach().numpy(), tq.grad.numpy(), tk.grad.numpy(), tv.grad.numpy()


# ---------------------------------------------------------------------------------------------
# Linear
# ---------------------------------------------------------------------------------------------

def linear_truth(W, b, A, dLdZ):
    tA, tW, tb = leaf(A), leaf(W), leaf(b)
    Z = tA @ tW.T + tb
    Z.backward(torch.from_numpy(dLdZ))
    return Z.detach().numpy(), tA.grad.numpy(), tW.grad.numpy(), tb.grad.numpy()


@rubric("Linear")
def test_linear_against_torch_for_two_upstream_gradients():
    from mytorch.nn import Linear

    rng = np.random.default_rng(101)
    in_features, out_features = 7, 4
    for batch_dims in [(3,), (1,), (2, 5), (3, 2, 2), (2, 2, 1, 3)]:
        W, b = rng.standard_normal((out_features, in_features)), rng.standard_normal(out_features)
        A = rng.standard_normal((*batch_dims, in_features))
        A_given = A.copy()
        layer = Linear(in_features, out_features)
        layer.init_weights(W, b)
        for attempt in range(2):
            dLdZ = rng.standard_normal((*batch_dims, out_features)) * (attempt + 1)
            Z = layer.forward(A)
            dLdA = layer.backward(dLdZ)
            Z_t, dLdA_t, dLdW_t, dLdb_t = linear_truth(W, b, A, dLdZ)
            where = f"A {A.shape}, upstream gradient #{attempt + 1}"
            check(f"{where}: Z", Z, Z_t)
            check(f"{where}: dLdA", dLdA, dLdA_t)
            check(f"{where}: stored dLdW", layer.dLdW, dLdW_t)
            check(f"{where}: stored dLdb", layer.dLdb, dLdb_t)
        assert np.array_equal(A, A_given), "Linear modified its input A"


@rubric("Linear")
def test_linear_second_forward_replaces_the_first():
    from mytorch.nn import Linear

    rng = np.random.default_rng(102)
    W, b = rng.standard_normal((3, 6)), rng.standard_normal(3)
    layer = Linear(6, 3)
    layer.init_weights(W, b)
    layer.forward(rng.standard_normal((4, 2, 6)))
    A = rng.standard_normal((5, 6))  # a different batch shape as well
    layer.forward(A)
    dLdZ = rng.standard_normal((5, 3))
    dLdA = layer.backward(dLdZ)
    _, dLdA_t, dLdW_t, dLdb_t = linear_truth(W, b, A, dLdZ)
    check("dLdA after two forwards", dLdA, dLdA_t)
    check("dLdW after two forwards", layer.dLdW, dLdW_t)
    check("dLdb after two forwards", layer.dLdb, dLdb_t)


@rubric("Linear")
def test_linear_finite_differences():
    from mytorch.nn import Linear

    rng = np.random.default_rng(103)
    W, b = rng.standard_normal((2, 3)), rng.standard_normal(2)
    A, dLdZ = rng.standard_normal((2, 2, 2, 3)), rng.standard_normal((2, 2, 2, 2))
    layer = Linear(3, 2)
    layer.init_weights(W, b)
    layer.forward(A)
    dLdA = layer.backward(dLdZ)
    loss = lambda: float(np.sum(layer.forward(A) * dLdZ))  # noqa: E731
    check("dLdA", dLdA, finite_difference(loss, A), RTOL_FD)
    check("dLdW", layer.dLdW, finite_difference(loss, W), RTOL_FD)
    check("dLdb", layer.dLdb, finite_difference(loss, b), RTOL_FD)


@rubric("Linear")
def test_linear_float32_stays_float32():
    from mytorch.nn import Linear

    rng = np.random.default_rng(104)
    layer = Linear(5, 2)
    layer.init_weights(rng.standard_normal((2, 5)).astype(np.float32),
                       rng.standard_normal(2).astype(np.float32))
    Z = layer.forward(rng.standard_normal((2, 3, 5)).astype(np.float32))
    dLdA = layer.backward(rng.standard_normal(Z.shape).astype(np.float32))
    for name, x in (("Z", Z), ("dLdA", dLdA), ("dLdW", layer.dLdW), ("dLdb", layer.dLdb)):
        assert x.dtype == np.float32, f"{name}: float32 in, got {x.dtype}"


# ---------------------------------------------------------------------------------------------
# Softmax
# ---------------------------------------------------------------------------------------------

@rubric("Softmax")
def test_softmax_every_dim_against_torch_for_two_upstream_gradients():
    from mytorch.nn import Softmax

    rng = np.random.default_rng(201)
    for shape in [(6,), (3, 1), (2, 5, 3), (1, 3, 2, 4), (2, 3, 1, 2, 3)]:
        Z = rng.standard_normal(shape) * 4
        Z_given = Z.copy()
        for dim in range(-len(shape), len(shape)):
            softmax = Softmax(dim=dim)
            for attempt in range(2):
                dLdA = rng.standard_normal(shape) * (attempt + 1)
                A = softmax.forward(Z)
                dLdZ = softmax.backward(dLdA)
                tZ = leaf(Z)
                tA = torch.softmax(tZ, dim=dim)
                tA.backward(torch.from_numpy(dLdA))
                where = f"Z {shape}, dim {dim}, upstream gradient #{attempt + 1}"
                check(f"{where}: A", A, tA)
                check(f"{where}: dLdZ", dLdZ, tZ.grad)
        assert np.array_equal(Z, Z_given), "Softmax.forward modified its input Z"


@rubric("Softmax")
def test_softmax_finite_differences():
    from mytorch.nn import Softmax

    rng = np.random.default_rng(202)
    Z, dLdA = rng.standard_normal((3, 2, 4)), rng.standard_normal((3, 2, 4))
    for dim in (0, -2, 2):
        softmax = Softmax(dim=dim)
        softmax.forward(Z)
        dLdZ = softmax.backward(dLdA)
        loss = lambda: float(np.sum(softmax.forward(Z) * dLdA))  # noqa: E731
        check(f"dLdZ over dim {dim}", dLdZ, finite_difference(loss, Z), RTOL_FD)


@rubric("Softmax")
def test_softmax_extreme_logits():
    from mytorch.nn import Softmax

    rng = np.random.default_rng(203)
    Z = np.stack([rng.uniform(-1200, 1200, 8), rng.uniform(1000, 1005, 8),
                  rng.uniform(-1005, -1000, 8), np.full(8, 1e4)])
    for dtype, rtol in ((np.float64, RTOL), (np.float32, 1e-5)):
        dLdA = rng.standard_normal(Z.shape)
        softmax = Softmax(dim=1)
        A = softmax.forward(Z.T.astype(dtype).T)  # a non-contiguous input too
        dLdZ = softmax.backward(dLdA.astype(dtype))
        assert A.dtype == dtype and dLdZ.dtype == dtype, (
            f"{np.dtype(dtype).name} in: got A {A.dtype}, dLdZ {dLdZ.dtype}")
        tZ = leaf(Z.astype(dtype).astype(np.float64))
        tA = torch.softmax(tZ, dim=1)
        tA.backward(torch.from_numpy(dLdA.astype(dtype).astype(np.float64)))
        check(f"{np.dtype(dtype).name} softmax of huge logits", A, tA, rtol)
        check(f"{np.dtype(dtype).name} gradient of huge logits", dLdZ, tZ.grad, rtol)


# ---------------------------------------------------------------------------------------------
# ScaledDotProductAttention
# ---------------------------------------------------------------------------------------------

@rubric("ScaledDotProductAttention")
def test_sdpa_against_explicit_torch_formula():
    from mytorch.nn import ScaledDotProductAttention

    rng = np.random.default_rng(301)
    cases = [  # (N, ..., H), L, S, E, Ev, mask shape
        ((3, 2), 5, 4, 6, 3, None),
        ((2, 4), 3, 8, 4, 5, (3, 8)),
        ((2, 3, 2), 4, 5, 3, 6, (2, 1, 2, 4, 5)),
        ((2, 2), 7, 3, 5, 2, (2, 2, 7, 3)),
        ((3,), 2, 6, 4, 4, (3, 1, 6)),
        ((1, 1, 1, 2), 3, 4, 2, 3, (4,)),
    ]
    for batch, L, S, E, Ev, mask_shape in cases:
        Q, K, V = (rng.standard_normal((*batch, n, d)) for n, d in ((L, E), (S, E), (S, Ev)))
        given = [x.copy() for x in (Q, K, V)]
        mask = None if mask_shape is None else masks_with_a_visible_key(rng, mask_shape, 0.6)
        attention = ScaledDotProductAttention()
        for attempt in range(2):
            d_output = rng.standard_normal((*batch, L, Ev)) * (attempt + 1)
            out = attention.forward(Q, K, V, mask)
            grads = attention.backward(d_output)
            truth = attention_truth(Q, K, V, mask, d_output)
            where = (f"Q {Q.shape}, K {K.shape}, V {V.shape}, mask {mask_shape}, "
                     f"upstream #{attempt + 1}")
            for name, mine, theirs in zip(("output", "dQ", "dK", "dV"), (out, *grads), truth):
                check(f"{where}: {name}", mine, theirs)
        assert all(np.array_equal(x, y) for x, y in zip((Q, K, V), given)), "Q, K or V was modified"


@rubric("ScaledDotProductAttention")
def test_sdpa_second_forward_replaces_the_first():
    from mytorch.nn import ScaledDotProductAttention

    rng = np.random.default_rng(302)
    attention = ScaledDotProductAttention()
    attention.forward(*(rng.standard_normal((2, 3, 4)) for _ in range(3)),
                      masks_with_a_visible_key(rng, (3, 3), 0.5))
    Q, K, V = (rng.standard_normal(shape) for shape in ((2, 2, 5), (2, 6, 5), (2, 6, 3)))
    mask = masks_with_a_visible_key(rng, (2, 2, 6), 0.5)
    attention.forward(Q, K, V, mask)
    d_output = rng.standard_normal((2, 2, 3))
    grads = attention.backward(d_output)
    truth = attention_truth(Q, K, V, mask, d_output)[1:]
    for name, mine, theirs in zip(("dQ", "dK", "dV"), grads, truth):
        check(f"{name} after two forwards", mine, theirs)


@rubric("ScaledDotProductAttention")
def test_sdpa_masked_keys_have_no_influence():
    from mytorch.nn import ScaledDotProductAttention

    rng = np.random.default_rng(303)
    Q, K, V = (rng.standard_normal(shape) for shape in ((2, 3, 4, 5), (2, 3, 6, 5), (2, 3, 6, 2)))
    hidden_keys = [[4, 5], [0, 1, 2]]  # per sequence n, the keys nobody may attend to
    mask = np.zeros((2, 1, 1, 6), dtype=bool)
    for n, keys in enumerate(hidden_keys):
        mask[n, ..., keys] = True
    attention = ScaledDotProductAttention()
    out = attention.forward(Q, K, V, mask)
    K2, V2 = K.copy(), V.copy()
    for n, keys in enumerate(hidden_keys):
        K2[n, :, keys] = rng.standard_normal(K2[n, :, keys].shape) * 100
        V2[n, :, keys] = 1e3
    check("output with other keys and values where masked", attention.forward(Q, K2, V2, mask), out)


@rubric("ScaledDotProductAttention")
def test_sdpa_finite_differences_with_a_fully_masked_row():
    from mytorch.nn import ScaledDotProductAttention

    rng = np.random.default_rng(304)
    Q, K, V = (rng.standard_normal(shape) for shape in ((2, 2, 3), (2, 3, 3), (2, 3, 2)))
    d_output = rng.standard_normal((2, 2, 2))
    mask = masks_with_a_visible_key(rng, (2, 2, 3), 0.4)
    mask[0, 0] = True
    attention = ScaledDotProductAttention()
    attention.forward(Q, K, V, mask)
    grads = attention.backward(d_output)
    loss = lambda: float(np.sum(attention.forward(Q, K, V, mask) * d_output))  # noqa: E731
    for name, mine, x in zip(("dQ", "dK", "dV"), grads, (Q, K, V)):
        check(name, mine, finite_difference(loss, x), RTOL_FD)


@rubric("ScaledDotProductAttention")
def test_sdpa_fully_masked_rows_are_uniform_in_float32_and_float64():
    from mytorch.nn import ScaledDotProductAttention

    rng = np.random.default_rng(305)
    Q, K = rng.standard_normal((3, 4, 2)) * 20, rng.standard_normal((3, 5, 2)) * 20
    V, d_output = rng.standard_normal((3, 5, 3)), rng.standard_normal((3, 4, 3))
    mask = masks_with_a_visible_key(rng, (3, 4, 5), 0.5)
    mask[2, 3] = True
    for dtype, rtol in ((np.float64, RTOL), (np.float32, 1e-5)):
        attention = ScaledDotProductAttention()
        out = attention.forward(*(x.astype(dtype) for x in (Q, K, V)), mask)
        dQ, dK, dV = attention.backward(d_output.astype(dtype))
        name = np.dtype(dtype).name
        for label, x in (("output", out), ("dQ", dQ), ("dK", dK), ("dV", dV)):
            assert x.dtype == dtype, f"{label}: {name} in, got {x.dtype}"
            assert np.all(np.isfinite(x)), f"{label} ({name}) not finite with a fully masked row"
        check(f"{name}: fully masked row = mean of V", out[2, 3], V[2].mean(axis=0), rtol)
        check(f"{name}: fully masked row's dQ", dQ[2, 3], np.zeros(2), rtol)
        keep = [0, 1, 2]
        _, dQ_t, dK_t, dV_t = attention_truth(Q[2, keep], K[2], V[2], mask[2, keep],
                                              d_output[2, keep])
        check(f"{name}: dK of the sequence with the fully masked row", dK[2], dK_t, rtol)
        check(f"{name}: dV of the sequence with the fully masked row", dV[2],
              dV_t + d_output[2, 3] / K.shape[1], rtol)


# ---------------------------------------------------------------------------------------------
# MultiHeadAttention
# ---------------------------------------------------------------------------------------------

def weights_for(rng: np.random.Generator, E: int) -> list[np.ndarray]:
    """[Wq, bq, Wk, bk, Wv, bv, Wo, bo], the order of MultiHeadAttention.init_weights."""
    return [x for _ in range(4) for x in (rng.uniform(-1, 1, (E, E)) / math.sqrt(E),
                                           rng.uniform(-0.3, 0.3, E))]


PROJECTIONS = ("q_proj", "k_proj", "v_proj", "out_proj")


def torch_reference(weights: list[np.ndarray], num_heads: int) -> torch.nn.MultiheadAttention:
    Wq, bq, Wk, bk, Wv, bv, Wo, bo = (torch.from_numpy(w) for w in weights)
    reference = torch.nn.MultiheadAttention(Wq.shape[0], num_heads, batch_first=True,
                                            dtype=torch.float64)
    with torch.no_grad():
        reference.in_proj_weight.copy_(torch.cat([Wq, Wk, Wv]))
        reference.in_proj_bias.copy_(torch.cat([bq, bk, bv]))
        reference.out_proj.weight.copy_(Wo)
        reference.out_proj.bias.copy_(bo)
    return reference


def compare_mha_with_torch(mha, weights, num_heads, query, key, value, padding, causal, d_output,
                           where: str) -> None:
    """Forward and backward of mha against torch, inputs, and every projection's dLdW, dLdb."""
    reference = torch_reference(weights, num_heads)
    inputs = [leaf(x) for x in (query, key, value)]
    as_tensor = lambda m: None if m is None else torch.from_numpy(m)  # noqa: E731
    out_t, _ = reference(*inputs, key_padding_mask=as_tensor(padding), attn_mask=as_tensor(causal),
                         need_weights=False)
    out_t.backward(torch.from_numpy(d_output))
    out = mha.forward(query, key, value, key_padding_mask=padding, attn_mask=causal)
    grads = mha.backward(d_output)
    check(f"{where}: output", out, out_t)
    for name, mine, x in zip(("dquery", "dkey", "dvalue"), grads, inputs):
        check(f"{where}: {name}", mine, x.grad)
    W_grads = list(reference.in_proj_weight.grad.chunk(3)) + [reference.out_proj.weight.grad]
    b_grads = list(reference.in_proj_bias.grad.chunk(3)) + [reference.out_proj.bias.grad]
    for layer_name, W_grad, b_grad in zip(PROJECTIONS, W_grads, b_grads):
        layer = getattr(mha, layer_name)
        check(f"{where}: {layer_name}.dLdW", layer.dLdW, W_grad)
        check(f"{where}: {layer_name}.dLdb", layer.dLdb, b_grad)


def length_and_causal_masks(rng, N: int, L: int, S: int):
    """Padding masks from lengths >= 1 and a causal (L, S) mask: no row is fully masked."""
    lengths = rng.integers(1, S + 1, size=N)
    lengths[0] = S  # one sequence without padding
    padding = np.arange(S)[None, :] >= lengths[:, None]
    causal = np.arange(S)[None, :] > np.arange(L)[:, None]
    return padding, causal


@rubric("MultiHeadAttention")
def test_mha_cross_attention_against_torch_for_two_upstream_gradients():
    from mytorch.nn import MultiHeadAttention

    rng = np.random.default_rng(401)
    for N, L, S, E, H in [(2, 6, 4, 8, 4), (3, 3, 9, 6, 1), (1, 5, 5, 10, 5)]:
        weights = weights_for(rng, E)
        padding, causal = length_and_causal_masks(rng, N, L, S)
        for case, (p, c) in {"no mask": (None, None), "padding": (padding, None),
                             "causal": (None, causal), "both": (padding, causal)}.items():
            mha = MultiHeadAttention(E, H)
            mha.init_weights(*weights)
            query, key, value = (rng.standard_normal((N, T, E)) for T in (L, S, S))
            given = [x.copy() for x in (query, key, value)]
            for attempt in range(2):
                d_output = rng.standard_normal((N, L, E)) * (attempt + 1)
                where = f"N={N} L={L} S={S} E={E} H={H}, {case}, upstream #{attempt + 1}"
                compare_mha_with_torch(mha, weights, H, query, key, value, p, c, d_output, where)
            assert all(np.array_equal(x, y) for x, y in zip((query, key, value), given)), (
                "query, key or value was modified")


@rubric("MultiHeadAttention")
def test_mha_self_attention_with_one_array_for_query_key_value():
    from mytorch.nn import MultiHeadAttention

    rng = np.random.default_rng(402)
    N, T, E, H = 3, 5, 12, 3
    weights = weights_for(rng, E)
    x = rng.standard_normal((N, T, E))
    padding, causal = length_and_causal_masks(rng, N, T, T)
    mha = MultiHeadAttention(E, H)
    mha.init_weights(*weights)
    d_output = rng.standard_normal((N, T, E))
    out = mha.forward(x, x, x, key_padding_mask=padding, attn_mask=causal)
    dq, dk, dv = mha.backward(d_output)
    tx = leaf(x)
    out_t, _ = torch_reference(weights, H)(tx, tx, tx, key_padding_mask=torch.from_numpy(padding),
                                           attn_mask=torch.from_numpy(causal), need_weights=False)
    out_t.backward(torch.from_numpy(d_output))
    check("self-attention output", out, out_t)
    check("self-attention dquery + dkey + dvalue", dq + dk + dv, tx.grad)

    mha32 = MultiHeadAttention(E, H)
    mha32.init_weights(*(w.astype(np.float32) for w in weights))
    out32 = mha32.forward(*[x.astype(np.float32)] * 3, key_padding_mask=padding, attn_mask=causal)
    grads32 = mha32.backward(d_output.astype(np.float32))
    for name, y in zip(("output", "dquery", "dkey", "dvalue"), (out32, *grads32)):
        assert y.dtype == np.float32, f"float32 self-attention: {name} is {y.dtype}"
    check("float32 self-attention output", out32, out, 1e-5)


@rubric("MultiHeadAttention")
def test_mha_second_forward_replaces_the_first():
    from mytorch.nn import MultiHeadAttention

    rng = np.random.default_rng(403)
    E, H = 6, 2
    weights = weights_for(rng, E)
    mha = MultiHeadAttention(E, H)
    mha.init_weights(*weights)
    mha.forward(*(rng.standard_normal((4, 7, E)) for _ in range(3)))
    query, key, value = (rng.standard_normal((2, T, E)) for T in (3, 5, 5))
    padding, causal = length_and_causal_masks(rng, 2, 3, 5)
    compare_mha_with_torch(mha, weights, H, query, key, value, padding, causal,
                           rng.standard_normal((2, 3, E)), "after a forward of other shapes")


@rubric("MultiHeadAttention")
def test_mha_finite_differences_with_a_fully_masked_row():
    from mytorch.nn import MultiHeadAttention

    rng = np.random.default_rng(404)
    N, L, S, E, H = 2, 2, 3, 4, 2
    weights = weights_for(rng, E)
    mha = MultiHeadAttention(E, H)
    mha.init_weights(*weights)
    query, key, value = (rng.standard_normal((N, T, E)) for T in (L, S, S))
    d_output = rng.standard_normal((N, L, E))
    padding = np.array([[False, False, True], [False, True, True]])
    causal = np.array([[True, False, False], [False, False, True]])  # sequence 1, query 0: no key
    loss = lambda: float(np.sum(mha.forward(query, key, value, padding, causal) * d_output))  # noqa
    loss()
    grads = mha.backward(d_output)
    for name, mine, x in zip(("dquery", "dkey", "dvalue"), grads, (query, key, value)):
        check(name, mine, finite_difference(loss, x), RTOL_FD)
    for layer_name in PROJECTIONS:
        layer = getattr(mha, layer_name)
        check(f"{layer_name}.dLdW", layer.dLdW, finite_difference(loss, layer.W), RTOL_FD)
        check(f"{layer_name}.dLdb", layer.dLdb, finite_difference(loss, layer.b), RTOL_FD)


@rubric("MultiHeadAttention")
def test_mha_helpers():
    from mytorch.nn import MultiHeadAttention

    rng = np.random.default_rng(405)
    N, T, E, H, L, S = 3, 4, 12, 4, 2, 5
    mha = MultiHeadAttention(E, H)
    x = rng.standard_normal((N, T, E))
    heads = mha._split_heads(x)
    expected = np.stack([x[:, :, h * (E // H):(h + 1) * (E // H)] for h in range(H)], axis=1)
    check("_split_heads", heads, expected, 0.0)
    check("_concat_heads(_split_heads(x))", mha._concat_heads(heads), x, 0.0)
    check("_concat_heads", mha._concat_heads(expected.copy()), x, 0.0)

    padding, causal = rng.random((N, S)) < 0.4, rng.random((L, S)) < 0.4
    full = (N, H, L, S)
    by_key = np.broadcast_to(padding[:, None, None, :], full)
    by_query = np.broadcast_to(causal, full)
    for args, truth in (((padding, causal), by_key | by_query), ((padding, None), by_key),
                        ((None, causal), by_query)):
        label = "_merge_masks(" + ", ".join("None" if a is None else "mask" for a in args) + ")"
        merged = mha._merge_masks(*args)
        assert merged is not None and np.array_equal(np.broadcast_to(merged, full), truth), label
    merged = mha._merge_masks(None, None)
    assert merged is None or not np.any(merged), "_merge_masks(None, None) must mask nothing"


if __name__ == "__main__":
    run_module(__name__)
