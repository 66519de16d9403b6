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

A query row whose keys are all masked passes in either of the two conventions described in
``tests/numeric_checks.py``; every other check uses masks that leave each row an allowed key.

Only numpy, torch, ``tests.testing_framework``, ``tests.numeric_checks`` and the student's
``mytorch`` are available here (the autograder ships nothing else).
"""
import math

import numpy as np
import torch

from tests.numeric_checks import (RTOL_TORCH, as_tensor, assert_close,
                                  check_linear_finite_differences, check_mha_against_torch,
                                  check_mha_finite_differences, check_mha_fully_masked,
                                  check_sdpa_finite_differences, check_sdpa_fully_masked,
                                  check_softmax_finite_differences, leaf, mask_with_visible_keys,
                                  padding_and_causal_masks, random_mha_case,
                                  torch_multihead_attention)
from tests.testing_framework import rubric, run_module

RUBRIC = {"Linear": 5, "Softmax": 5, "ScaledDotProductAttention": 20, "MultiHeadAttention": 20}


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
            assert_close(f"{where}: Z", Z, Z_t)
            assert_close(f"{where}: dLdA", dLdA, dLdA_t)
            assert_close(f"{where}: stored dLdW", layer.dLdW, dLdW_t)
            assert_close(f"{where}: stored dLdb", layer.dLdb, dLdb_t)
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
    assert_close("dLdA after two forwards", dLdA, dLdA_t)
    assert_close("dLdW after two forwards", layer.dLdW, dLdW_t)
    assert_close("dLdb after two forwards", layer.dLdb, dLdb_t)


@rubric("Linear")
def test_linear_finite_differences():
    from mytorch.nn import Linear

    rng = np.random.default_rng(103)
    W, b = rng.standard_normal((2, 3)), rng.standard_normal(2)
    A, dLdZ = rng.standard_normal((2, 2, 2, 3)), rng.standard_normal((2, 2, 2, 2))
    layer = Linear(3, 2)
    layer.init_weights(W, b)
    check_linear_finite_differences(layer, A, dLdZ)


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
                assert_close(f"{where}: A", A, tA)
                assert_close(f"{where}: dLdZ", dLdZ, tZ.grad)
        assert np.array_equal(Z, Z_given), "Softmax.forward modified its input Z"


@rubric("Softmax")
def test_softmax_finite_differences():
    from mytorch.nn import Softmax

    rng = np.random.default_rng(202)
    Z, dLdA = rng.standard_normal((3, 2, 4)), rng.standard_normal((3, 2, 4))
    for dim in (0, -2, 2):
        check_softmax_finite_differences(Softmax(dim=dim), Z, dLdA, f"over dim {dim}: ")


@rubric("Softmax")
def test_softmax_extreme_logits():
    from mytorch.nn import Softmax

    rng = np.random.default_rng(203)
    Z = np.stack([rng.uniform(-1200, 1200, 8), rng.uniform(1000, 1005, 8),
                  rng.uniform(-1005, -1000, 8), np.full(8, 1e4)])
    for dtype, rtol in ((np.float64, RTOL_TORCH), (np.float32, 1e-5)):
        dLdA = rng.standard_normal(Z.shape)
        softmax = Softmax(dim=1)
        A = softmax.forward(Z.T.astype(dtype).T)  # a non-contiguous input too
        dLdZ = softmax.backward(dLdA.astype(dtype))
        assert A.dtype == dtype and dLdZ.dtype == dtype, (
            f"{np.dtype(dtype).name} in: got A {A.dtype}, dLdZ {dLdZ.dtype}")
        tZ = leaf(Z.astype(dtype).astype(np.float64))
        tA = torch.softmax(tZ, dim=1)
        tA.backward(torch.from_numpy(dLdA.astype(dtype).astype(np.float64)))
        assert_close(f"{np.dtype(dtype).name} softmax of huge logits", A, tA, rtol)
        assert_close(f"{np.dtype(dtype).name} gradient of huge logits", dLdZ, tZ.grad, rtol)


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
        mask = None if mask_shape is None else mask_with_visible_keys(rng, mask_shape, 0.6)
        attention = ScaledDotProductAttention()
        for attempt in range(2):
            d_output = rng.standard_normal((*batch, L, Ev)) * (attempt + 1)
            out = attention.forward(Q, K, V, mask)
            grads = attention.backward(d_output)
            truth = attention_truth(Q, K, V, mask, d_output)
            where = (f"Q {Q.shape}, K {K.shape}, V {V.shape}, mask {mask_shape}, "
                     f"upstream #{attempt + 1}")
            for name, mine, theirs in zip(("output", "dQ", "dK", "dV"), (out, *grads), truth):
                assert_close(f"{where}: {name}", mine, theirs)
        assert all(np.array_equal(x, y) for x, y in zip((Q, K, V), given)), "Q, K or V was modified"


@rubric("ScaledDotProductAttention")
def test_sdpa_second_forward_replaces_the_first():
    from mytorch.nn import ScaledDotProductAttention

    rng = np.random.default_rng(302)
    attention = ScaledDotProductAttention()
    attention.forward(*(rng.standard_normal((2, 3, 4)) for _ in range(3)),
                      mask_with_visible_keys(rng, (3, 3), 0.5))
    Q, K, V = (rng.standard_normal(shape) for shape in ((2, 2, 5), (2, 6, 5), (2, 6, 3)))
    mask = mask_with_visible_keys(rng, (2, 2, 6), 0.5)
    attention.forward(Q, K, V, mask)
    d_output = rng.standard_normal((2, 2, 3))
    grads = attention.backward(d_output)
    truth = attention_truth(Q, K, V, mask, d_output)[1:]
    for name, mine, theirs in zip(("dQ", "dK", "dV"), grads, truth):
        assert_close(f"{name} after two forwards", mine, theirs)


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
    assert_close("output with other keys and values where masked",
                 attention.forward(Q, K2, V2, mask), out)


@rubric("ScaledDotProductAttention")
def test_sdpa_finite_differences():
    from mytorch.nn import ScaledDotProductAttention

    rng = np.random.default_rng(304)
    Q, K, V = (rng.standard_normal(shape) for shape in ((2, 2, 3), (2, 3, 3), (2, 3, 2)))
    d_output = rng.standard_normal((2, 2, 2))
    mask = mask_with_visible_keys(rng, (2, 2, 3), 0.4)
    check_sdpa_finite_differences(ScaledDotProductAttention(), Q, K, V, mask, d_output)


@rubric("ScaledDotProductAttention")
def test_sdpa_fully_masked_rows_are_uniform_in_float32_and_float64():
    from mytorch.nn import ScaledDotProductAttention

    rng = np.random.default_rng(305)
    cases = []  # (Q, K, V, mask, d_output, description)
    Q, K = rng.standard_normal((3, 4, 2)) * 20, rng.standard_normal((3, 5, 2)) * 20
    mask = mask_with_visible_keys(rng, (3, 4, 5), 0.5)
    mask[2, 3] = True
    cases.append((Q, K, rng.standard_normal((3, 5, 3)), mask, rng.standard_normal((3, 4, 3)),
                  "query 3 of sequence 2"))
    Q, K = rng.standard_normal((2, 3, 2, 4)), rng.standard_normal((2, 3, 6, 4))
    mask = np.zeros((2, 1, 1, 6), dtype=bool)
    mask[1] = True  # every key of sequence 1 is padding: all its rows, in every head
    cases.append((Q, K, rng.standard_normal((2, 3, 6, 2)), mask, rng.standard_normal((2, 3, 2, 2)),
                  "sequence 1 all padding"))
    for Q, K, V, mask, d_output, description in cases:
        for dtype, rtol in ((np.float64, RTOL_TORCH), (np.float32, 1e-5)):
            check_sdpa_fully_masked(ScaledDotProductAttention(),
                                    *(x.astype(dtype) for x in (Q, K, V)), mask,
                                    d_output.astype(dtype), attention_truth, rtol,
                                    f"{description}, {np.dtype(dtype).name}")


# ---------------------------------------------------------------------------------------------
# MultiHeadAttention
# ---------------------------------------------------------------------------------------------

def weights_for(rng: np.random.Generator, E: int) -> list[np.ndarray]:
    """[Wq, bq, Wk, bk, Wv, bv, Wo, bo], the order of MultiHeadAttention.init_weights."""
    return [x for _ in range(4) for x in (rng.uniform(-1, 1, (E, E)) / math.sqrt(E),
                                           rng.uniform(-0.3, 0.3, E))]


@rubric("MultiHeadAttention")
def test_mha_cross_attention_against_torch_for_two_upstream_gradients():
    from mytorch.nn import MultiHeadAttention

    rng = np.random.default_rng(401)
    for N, L, S, E, H in [(2, 6, 4, 8, 4), (3, 3, 9, 6, 1), (1, 5, 5, 10, 5)]:
        weights = weights_for(rng, E)
        padding, causal = padding_and_causal_masks(rng, N, L, S)
        for case, (p, c) in {"no mask": (None, None), "padding": (padding, None),
                             "causal": (None, causal), "both": (padding, causal)}.items():
            mha = MultiHeadAttention(E, H)
            mha.init_weights(*weights)
            query, key, value = (rng.standard_normal((N, T, E)) for T in (L, S, S))
            given = [x.copy() for x in (query, key, value)]
            for attempt in range(2):
                d_output = rng.standard_normal((N, L, E)) * (attempt + 1)
                where = f"N={N} L={L} S={S} E={E} H={H}, {case}, upstream #{attempt + 1}"
                check_mha_against_torch(mha, weights, H, query, key, value, p, c, d_output, where)
            assert all(np.array_equal(x, y) for x, y in zip((query, key, value), given)), (
                "query, key or value was modified")


@rubric("MultiHeadAttention")
def test_mha_self_attention_with_one_array_for_query_key_value():
    from mytorch.nn import MultiHeadAttention

    rng = np.random.default_rng(402)
    N, T, E, H = 3, 5, 12, 3
    weights = weights_for(rng, E)
    x = rng.standard_normal((N, T, E))
    padding, causal = padding_and_causal_masks(rng, N, T, T)
    mha = MultiHeadAttention(E, H)
    mha.init_weights(*weights)
    d_output = rng.standard_normal((N, T, E))
    out = mha.forward(x, x, x, key_padding_mask=padding, attn_mask=causal)
    dq, dk, dv = mha.backward(d_output)
    tx = leaf(x)
    reference = torch_multihead_attention(weights, H)
    out_t, _ = reference(tx, tx, tx, key_padding_mask=as_tensor(padding),
                         attn_mask=as_tensor(causal), need_weights=False)
    out_t.backward(torch.from_numpy(d_output))
    assert_close("self-attention output", out, out_t)
    assert_close("self-attention dquery + dkey + dvalue", dq + dk + dv, tx.grad)

    mha32 = MultiHeadAttention(E, H)
    mha32.init_weights(*(w.astype(np.float32) for w in weights))
    out32 = mha32.forward(*[x.astype(np.float32)] * 3, key_padding_mask=padding, attn_mask=causal)
    grads32 = mha32.backward(d_output.astype(np.float32))
    for name, y in zip(("output", "dquery", "dkey", "dvalue"), (out32, *grads32)):
        assert y.dtype == np.float32, f"float32 self-attention: {name} is {y.dtype}"
    assert_close("float32 self-attention output", out32, out, 1e-5)


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
    padding, causal = padding_and_causal_masks(rng, 2, 3, 5)
    check_mha_against_torch(mha, weights, H, query, key, value, padding, causal,
                            rng.standard_normal((2, 3, E)), "after a forward of other shapes")


@rubric("MultiHeadAttention")
def test_mha_finite_differences():
    N, L, S, E, H = 2, 2, 3, 4, 2
    rng, _, mha, (query, key, value) = random_mha_case(404, weights_for, N, L, S, E, H)
    padding = np.array([[False, False, True], [False, True, True]])
    causal = np.array([[False, True, False], [False, False, True]])  # every query sees key 0
    check_mha_finite_differences(mha, query, key, value, padding, causal,
                                 rng.standard_normal((N, L, E)))


@rubric("MultiHeadAttention")
def test_mha_fully_masked_rows():
    N, L, S, E, H = 3, 3, 4, 6, 3
    rng, weights, mha, (query, key, value) = random_mha_case(406, weights_for, N, L, S, E, H)
    padding = np.array([[False] * 4, [False, False, True, True], [False, True, True, True]])
    causal = np.zeros((L, S), dtype=bool)
    causal[1, :2] = True  # query 1 sees no key of sequence 1 or 2
    causal[2, 0] = True  # query 2 sees no key of sequence 2
    check_mha_fully_masked(mha, weights, H, query, key, value, padding, causal,
                           rng.standard_normal((N, L, E)),
                           "query 1 of sequences 1 and 2, query 2 of sequence 2")


@rubric("MultiHeadAttention")
def test_mha_helpers():
    from mytorch.nn import MultiHeadAttention

    rng = np.random.default_rng(405)
    N, T, E, H, L, S = 3, 4, 12, 4, 2, 5
    mha = MultiHeadAttention(E, H)
    x = rng.standard_normal((N, T, E))
    heads = mha._split_heads(x)
    expected = np.stack([x[:, :, h * (E // H):(h + 1) * (E // H)] for h in range(H)], axis=1)
    assert_close("_split_heads", heads, expected, 0.0)
    assert_close("_concat_heads(_split_heads(x))", mha._concat_heads(heads), x, 0.0)
    assert_close("_concat_heads", mha._concat_heads(expected.copy()), x, 0.0)

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
