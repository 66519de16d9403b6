"""mytorch.nn against PyTorch autograd and finite differences, in float64.

Run ``python -m tests.test_mytorch`` for the rubric report (``--category Linear`` for one part).
Comparisons are relative to the largest entry: max|mine - truth| <= rtol * max(max|truth|, 1).
"""
import numpy as np
import pytest
import torch

from tests.testing_framework import rubric, run_module

RUBRIC = {"Linear": 5, "Softmax": 5, "ScaledDotProductAttention": 20, "MultiHeadAttention": 20}

RTOL_TORCH = 1e-8  # float64 against PyTorch autograd
RTOL_FINITE_DIFF = 1e-6  # central differences with step 1e-6 are good to about 1e-9


# ---------------------------------------------------------------------------------------------
# Helpers: comparisons and independent truths
# ---------------------------------------------------------------------------------------------

def assert_close(name: str, actual, expected, rtol: float = RTOL_TORCH) -> None:
    """Shapes equal and max|actual - expected| <= rtol * max(max|expected|, 1)."""
    if isinstance(expected, torch.Tensor):
        expected = expected.detach().numpy()
    assert actual is not None, f"{name}: got None"
    actual = np.asarray(actual)
    assert actual.shape == expected.shape, (f"{name}: expected shape {expected.shape}, "
                                            f"got {actual.shape}")
    assert np.all(np.isfinite(actual)), f"{name}: contains NaN or inf"
    error = np.max(np.abs(actual - expected), initial=0.0)
    scale = max(np.max(np.abs(expected), initial=0.0), 1.0)
    assert error <= rtol * scale, (f"{name}: max abs error {error:.3e} exceeds {rtol:.0e} x "
                                   f"{scale:.3g} (shape {expected.shape})")


def numerical_gradient(loss, x: np.ndarray, step: float = 1e-6) -> np.ndarray:
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


def tensor(x: np.ndarray) -> torch.Tensor:
    """A float64 leaf tensor that records its gradient."""
    return torch.tensor(x, dtype=torch.float64, requires_grad=True)


def random_mask(rng: np.random.Generator, shape: tuple, p_masked: float = 0.5) -> np.ndarray:
    """Bool mask (True = do not attend) with at least one attended key in every row (last axis)."""
    mask = rng.random(shape) < p_masked
    keep = rng.integers(0, shape[-1], size=(*shape[:-1], 1))
    np.put_along_axis(mask, keep, False, axis=-1)
    return mask


def torch_attention(Q, K, V, mask, d_output):
    """PyTorch's output and (dQ, dK, dV). Its boolean attn_mask is True where attending is OK."""
    tq, tk, tv = tensor(Q), tensor(K), tensor(V)
    allowed = None if mask is None else torch.from_numpy(~mask)
    out = torch.nn.functional.scaled_dot_product_attention(tq, tk, tv, attn_mask=allowed)
    out.backward(torch.from_numpy(d_output))
    return out, tq.grad, tk.grad, tv.grad


def random_mha_weights(rng: np.random.Generator, E: int) -> dict[str, np.ndarray]:
    weights = {}
    for p in "qkvo":
        weights[f"W{p}"] = rng.standard_normal((E, E)) / np.sqrt(E)
        weights[f"b{p}"] = rng.standard_normal(E) * 0.1
    return weights


def torch_mha(weights: dict, num_heads: int, query, key, value, key_padding_mask, attn_mask):
    """torch.nn.MultiheadAttention(batch_first=True) in float64 loaded with the same weights."""
    E = query.shape[-1]
    mha = torch.nn.MultiheadAttention(E, num_heads, batch_first=True, dtype=torch.float64)
    with torch.no_grad():
        for name, param in (("W", mha.in_proj_weight), ("b", mha.in_proj_bias)):
            param.copy_(torch.from_numpy(np.concatenate([weights[f"{name}{p}"] for p in "qkv"])))
        mha.out_proj.weight.copy_(torch.from_numpy(weights["Wo"]))
        mha.out_proj.bias.copy_(torch.from_numpy(weights["bo"]))
    tq, tk, tv = tensor(query), tensor(key), tensor(value)
    as_tensor = lambda m: None if m is None else torch.from_numpy(m)  # noqa: E731
    out, _ = mha(tq, tk, tv, key_padding_mask=as_tensor(key_padding_mask),
                 attn_mask=as_tensor(attn_mask), need_weights=False)
    return mha, out, (tq, tk, tv)


def torch_mha_parameter_grads(mha: torch.nn.MultiheadAttention) -> dict[str, np.ndarray]:
    """{'Wq': ..., 'bq': ..., ..., 'bo': ...} gradients in mytorch's naming."""
    grads = {}
    weights, biases = mha.in_proj_weight.grad.chunk(3), mha.in_proj_bias.grad.chunk(3)
    for p, weight, bias in zip("qkv", weights, biases):
        grads[f"W{p}"], grads[f"b{p}"] = weight.numpy(), bias.numpy()
    grads["Wo"], grads["bo"] = mha.out_proj.weight.grad.numpy(), mha.out_proj.bias.grad.numpy()
    return grads


def make_mha(weights: dict, num_heads: int):
    from mytorch.nn import MultiHeadAttention

    mha = MultiHeadAttention(weights["Wq"].shape[0], num_heads)
    mha.init_weights(*(weights[k] for k in ("Wq", "bq", "Wk", "bk", "Wv", "bv", "Wo", "bo")))
    return mha


def mha_projections(mha) -> dict:
    return {"q": mha.q_proj, "k": mha.k_proj, "v": mha.v_proj, "o": mha.out_proj}


def expect_error(error_type, call, *fragments: str) -> None:
    """call() raises error_type and the message contains every fragment (e.g. both shapes)."""
    with pytest.raises(error_type) as caught:
        call()
    message = str(caught.value)
    for fragment in fragments:
        assert fragment in message, (f"{error_type.__name__} message should mention {fragment!r}: "
                                     f"{message!r}")


# ---------------------------------------------------------------------------------------------
# Linear
# ---------------------------------------------------------------------------------------------

@rubric("Linear")
def test_linear_matches_torch_with_any_batch_dims():
    from mytorch.nn import Linear

    rng = np.random.default_rng(0)
    in_features, out_features = 5, 3
    for batch_dims in [(), (4,), (2, 3), (2, 3, 4), (2, 1, 3, 2)]:
        W, b = rng.standard_normal((out_features, in_features)), rng.standard_normal(out_features)
        A = rng.standard_normal((*batch_dims, in_features))
        dLdZ = rng.standard_normal((*batch_dims, out_features))
        layer = Linear(in_features, out_features)
        layer.init_weights(W, b)
        Z = layer.forward(A)
        dLdA = layer.backward(dLdZ)

        tA, tW, tb = tensor(A), tensor(W), tensor(b)
        tZ = torch.nn.functional.linear(tA, tW, tb)
        tZ.backward(torch.from_numpy(dLdZ))
        where = f"Linear on A {A.shape}"
        assert_close(f"{where}: Z", Z, tZ)
        assert_close(f"{where}: dLdA", dLdA, tA.grad)
        assert_close(f"{where}: dLdW", layer.dLdW, tW.grad)
        assert_close(f"{where}: dLdb", layer.dLdb, tb.grad)


@rubric("Linear")
def test_linear_gradients_match_finite_differences():
    from mytorch.nn import Linear

    rng = np.random.default_rng(1)
    layer = Linear(4, 3)
    W, b = rng.standard_normal((3, 4)), rng.standard_normal(3)
    layer.init_weights(W, b)
    A = rng.standard_normal((2, 3, 4))
    dLdZ = rng.standard_normal((2, 3, 3))
    loss = lambda: np.sum(layer.forward(A) * dLdZ)  # noqa: E731
    layer.forward(A)
    dLdA = layer.backward(dLdZ)
    assert_close("dLdA", dLdA, numerical_gradient(loss, A), RTOL_FINITE_DIFF)
    assert_close("dLdW", layer.dLdW, numerical_gradient(loss, W), RTOL_FINITE_DIFF)
    assert_close("dLdb", layer.dLdb, numerical_gradient(loss, b), RTOL_FINITE_DIFF)


@rubric("Linear")
def test_linear_keeps_float32():
    from mytorch.nn import Linear

    rng = np.random.default_rng(2)
    layer = Linear(6, 4)
    layer.init_weights(rng.standard_normal((4, 6), dtype=np.float32),
                       rng.standard_normal(4, dtype=np.float32))
    Z = layer.forward(rng.standard_normal((3, 5, 6), dtype=np.float32))
    dLdA = layer.backward(np.ones_like(Z))
    for name, x in [("Z", Z), ("dLdA", dLdA), ("dLdW", layer.dLdW), ("dLdb", layer.dLdb)]:
        assert x.dtype == np.float32, f"{name}: float32 in, expected float32 out, got {x.dtype}"


@rubric("Linear")
def test_linear_rejects_bad_shapes_and_early_backward():
    from mytorch.nn import Linear

    layer = Linear(5, 3)
    expect_error(ValueError, lambda: layer.init_weights(np.zeros((5, 3)), np.zeros(3)),
                 "(3, 5)", "(5, 3)")
    expect_error(ValueError, lambda: layer.init_weights(np.zeros((3, 5)), np.zeros((3, 1))),
                 "(3,)", "(3, 1)")
    expect_error(RuntimeError, lambda: layer.backward(np.zeros((2, 3))), "forward")
    expect_error(ValueError, lambda: layer.forward(np.zeros((2, 4))), "5", "(2, 4)")
    layer.init_weights(np.zeros((3, 5)), np.zeros(3))
    layer.forward(np.zeros((2, 5)))
    expect_error(ValueError, lambda: layer.backward(np.zeros((2, 5))), "(2, 3)", "(2, 5)")


# ---------------------------------------------------------------------------------------------
# Softmax
# ---------------------------------------------------------------------------------------------

@rubric("Softmax")
def test_softmax_matches_torch_over_every_dim():
    from mytorch.nn import Softmax

    rng = np.random.default_rng(3)
    for ndim in range(1, 6):
        shape = tuple(int(n) for n in rng.integers(1, 5, size=ndim))
        Z = rng.standard_normal(shape) * 3
        Z_given = Z.copy()
        for dim in range(-ndim, ndim):
            dLdA = rng.standard_normal(shape)
            softmax = Softmax(dim=dim)
            A = softmax.forward(Z)
            dLdZ = softmax.backward(dLdA)
            assert np.array_equal(Z, Z_given), "Softmax.forward must not modify its input Z"
            tZ = tensor(Z)
            tA = torch.softmax(tZ, dim=dim)
            tA.backward(torch.from_numpy(dLdA))
            assert_close(f"softmax of {shape} over dim {dim}: A", A, tA)
            assert_close(f"softmax of {shape} over dim {dim}: dLdZ", dLdZ, tZ.grad)


@rubric("Softmax")
def test_softmax_gradient_matches_finite_differences():
    from mytorch.nn import Softmax

    rng = np.random.default_rng(4)
    Z = rng.standard_normal((2, 4, 3))
    dLdA = rng.standard_normal((2, 4, 3))
    for dim in (0, 1, -1):
        softmax = Softmax(dim=dim)
        softmax.forward(Z)
        dLdZ = softmax.backward(dLdA)
        expected = numerical_gradient(lambda: np.sum(softmax.forward(Z) * dLdA), Z)
        assert_close(f"dLdZ over dim {dim}", dLdZ, expected, RTOL_FINITE_DIFF)


@rubric("Softmax")
def test_softmax_is_finite_for_huge_logits():
    from mytorch.nn import Softmax

    rng = np.random.default_rng(5)
    for dtype in (np.float64, np.float32):
        Z = np.concatenate([rng.uniform(-1000, 1000, (3, 6)),  # rows spanning +-1000
                            rng.uniform(990, 1000, (2, 6)),  # all near +1000
                            rng.uniform(-1000, -990, (2, 6))]).astype(dtype)  # all near -1000
        dLdA = rng.standard_normal(Z.shape).astype(dtype)
        softmax = Softmax(dim=-1)
        A = softmax.forward(Z)
        dLdZ = softmax.backward(dLdA)
        assert A.dtype == dtype and dLdZ.dtype == dtype, (f"{dtype.__name__} in, got A {A.dtype}, "
                                                          f"dLdZ {dLdZ.dtype}")
        tZ = tensor(Z.astype(np.float64))
        tA = torch.softmax(tZ, dim=-1)
        tA.backward(torch.from_numpy(dLdA.astype(np.float64)))
        rtol = RTOL_TORCH if dtype == np.float64 else 1e-5
        assert_close(f"{dtype.__name__} softmax of logits around +-1000", A, tA, rtol)
        assert_close(f"{dtype.__name__} gradient for logits around +-1000", dLdZ, tZ.grad, rtol)


@rubric("Softmax")
def test_softmax_backward_before_forward_is_an_error():
    from mytorch.nn import Softmax

    expect_error(RuntimeError, lambda: Softmax().backward(np.ones((2, 3))), "forward")


# ---------------------------------------------------------------------------------------------
# ScaledDotProductAttention
# ---------------------------------------------------------------------------------------------

SDPA_CASES = [  # (batch dims (N, ..., H), L, S, E, Ev, mask shape or None)
    ((2, 3), 4, 6, 5, 7, None),
    ((2, 3), 5, 3, 4, 4, (5, 3)),
    ((2, 2, 3), 4, 6, 8, 3, (2, 2, 3, 4, 6)),
    ((3, 2), 6, 4, 3, 5, (3, 1, 1, 4)),
    ((4,), 3, 7, 6, 2, (4, 3, 7)),
]


@rubric("ScaledDotProductAttention")
def test_sdpa_matches_torch_with_masks_and_batch_dims():
    from mytorch.nn import ScaledDotProductAttention

    rng = np.random.default_rng(6)
    for batch, L, S, E, Ev, mask_shape in SDPA_CASES:
        Q, K = rng.standard_normal((*batch, L, E)), rng.standard_normal((*batch, S, E))
        V, d_output = rng.standard_normal((*batch, S, Ev)), rng.standard_normal((*batch, L, Ev))
        mask = None if mask_shape is None else random_mask(rng, mask_shape)
        given = [x.copy() for x in (Q, K, V)]
        attention = ScaledDotProductAttention()
        out = attention.forward(Q, K, V, mask)
        dQ, dK, dV = attention.backward(d_output)
        assert all(np.array_equal(x, y) for x, y in zip((Q, K, V), given)), "Q, K, V were modified"

        t_out, t_dQ, t_dK, t_dV = torch_attention(Q, K, V, mask, d_output)
        where = f"Q {Q.shape}, K {K.shape}, V {V.shape}, mask {mask_shape}"
        assert_close(f"{where}: output", out, t_out)
        assert_close(f"{where}: dQ", dQ, t_dQ)
        assert_close(f"{where}: dK", dK, t_dK)
        assert_close(f"{where}: dV", dV, t_dV)


@rubric("ScaledDotProductAttention")
def test_sdpa_gradients_match_finite_differences():
    from mytorch.nn import ScaledDotProductAttention

    rng = np.random.default_rng(7)
    Q, K = rng.standard_normal((2, 3, 2)), rng.standard_normal((2, 4, 2))
    V = rng.standard_normal((2, 4, 3))
    d_output = rng.standard_normal((2, 3, 3))
    mask = random_mask(rng, (2, 3, 4))
    mask[1, 2] = True  # one fully masked row: its gradient must be consistent with the forward too
    attention = ScaledDotProductAttention()
    attention.forward(Q, K, V, mask)
    grads = attention.backward(d_output)
    loss = lambda: np.sum(attention.forward(Q, K, V, mask) * d_output)  # noqa: E731
    for name, grad, x in zip(("dQ", "dK", "dV"), grads, (Q, K, V)):
        assert_close(name, grad, numerical_gradient(loss, x), RTOL_FINITE_DIFF)


@rubric("ScaledDotProductAttention")
def test_sdpa_fully_masked_row_attends_uniformly_and_stays_finite():
    from mytorch.nn import ScaledDotProductAttention

    rng = np.random.default_rng(8)
    N, L, S, E, Ev = 2, 4, 5, 3, 2
    for dtype, rtol in ((np.float64, RTOL_TORCH), (np.float32, 1e-5)):
        Q, K = rng.standard_normal((N, L, E)) * 30, rng.standard_normal((N, S, E)) * 30  # big
        V, d_output = rng.standard_normal((N, S, Ev)), rng.standard_normal((N, L, Ev))
        mask = random_mask(rng, (N, L, S))
        mask[0, 1] = True
        attention = ScaledDotProductAttention()
        out = attention.forward(*(x.astype(dtype) for x in (Q, K, V)), mask)
        dQ, dK, dV = attention.backward(d_output.astype(dtype))
        for name, x in (("output", out), ("dQ", dQ), ("dK", dK), ("dV", dV)):
            assert x.dtype == dtype, f"{name}: {dtype.__name__} in, got {x.dtype}"
            assert np.all(np.isfinite(x)), f"{name} not finite, fully masked row, {dtype.__name__}"
        assert_close("fully masked row's output = mean of V over all keys", out[0, 1],
                     V[0].mean(axis=0), rtol)
        assert_close("fully masked row's dQ", dQ[0, 1], np.zeros(E), rtol)

        # Rows are independent: torch on every other row of sequence 0 gives the rest of the truth.
        rows = [0, 2, 3]
        t_out, t_dQ, t_dK, t_dV = (x.detach().numpy() for x in torch_attention(
            Q[0, rows], K[0], V[0], mask[0, rows], d_output[0, rows]))
        assert_close("output of the other rows", out[0, rows], t_out, rtol)
        assert_close("dQ of the other rows", dQ[0, rows], t_dQ, rtol)
        assert_close("dK (the fully masked row adds nothing)", dK[0], t_dK, rtol)
        uniform_share = np.broadcast_to(d_output[0, 1] / S, (S, Ev))  # d(mean of V) / dV
        assert_close("dV (the fully masked row adds d_output / S to every key)", dV[0],
                     t_dV + uniform_share, rtol)


@rubric("ScaledDotProductAttention")
def test_sdpa_keeps_float32():
    from mytorch.nn import ScaledDotProductAttention

    rng = np.random.default_rng(9)
    Q, K, V = (rng.standard_normal((2, 3, 4, 8), dtype=np.float32) for _ in range(3))
    attention = ScaledDotProductAttention()
    out = attention.forward(Q, K, V, random_mask(rng, (4, 4)))
    grads = attention.backward(np.ones_like(out))
    for name, x in zip(("output", "dQ", "dK", "dV"), (out, *grads)):
        assert x.dtype == np.float32, f"{name}: float32 in, expected float32 out, got {x.dtype}"


@rubric("ScaledDotProductAttention")
def test_sdpa_rejects_bad_shapes_and_early_backward():
    from mytorch.nn import ScaledDotProductAttention

    attention = ScaledDotProductAttention()
    Q, K, V = np.zeros((2, 3, 4, 5)), np.zeros((2, 3, 6, 5)), np.zeros((2, 3, 6, 7))
    expect_error(RuntimeError, lambda: attention.backward(np.zeros((2, 3, 4, 7))), "forward")
    expect_error(ValueError, lambda: attention.forward(Q, np.zeros((2, 3, 6, 4)), V),
                 "(2, 3, 4, 5)", "(2, 3, 6, 4)")
    expect_error(ValueError, lambda: attention.forward(Q, K, np.zeros((2, 3, 5, 7))),
                 "(2, 3, 6, 5)", "(2, 3, 5, 7)")
    expect_error(ValueError, lambda: attention.forward(Q, K, np.zeros((2, 2, 6, 7))),
                 "(2, 2, 6, 7)")
    expect_error(ValueError, lambda: attention.forward(Q, K, V, np.zeros((4, 5), dtype=bool)),
                 "(2, 3, 4, 6)", "(4, 5)")
    expect_error(ValueError, lambda: attention.forward(Q, K, V, np.zeros((4, 6))), "bool")
    attention.forward(Q, K, V)
    expect_error(ValueError, lambda: attention.backward(np.zeros((2, 3, 4, 5))),
                 "(2, 3, 4, 7)", "(2, 3, 4, 5)")


# ---------------------------------------------------------------------------------------------
# MultiHeadAttention
# ---------------------------------------------------------------------------------------------

def padding_and_causal_masks(rng: np.random.Generator, N: int, L: int, S: int):
    """key_padding_mask (N, S) from random lengths >= 1, attn_mask (L, S) hiding future keys.

    Key 0 is never hidden, so no query row is fully masked (PyTorch would return NaN there).
    """
    lengths = rng.integers(1, S + 1, size=N)
    key_padding_mask = np.arange(S)[None, :] >= lengths[:, None]
    attn_mask = np.triu(np.ones((L, S), dtype=bool), k=1)
    return key_padding_mask, attn_mask


@rubric("MultiHeadAttention")
def test_mha_matches_torch_cross_attention_with_masks():
    rng = np.random.default_rng(10)
    N, L, S, E, H = 3, 5, 7, 12, 3
    key_padding_mask, attn_mask = padding_and_causal_masks(rng, N, L, S)
    mask_cases = {"no masks": (None, None), "padding mask": (key_padding_mask, None),
                  "causal mask": (None, attn_mask), "both masks": (key_padding_mask, attn_mask)}
    for case, (padding, causal) in mask_cases.items():
        weights = random_mha_weights(rng, E)
        query, key, value = (rng.standard_normal((N, T, E)) for T in (L, S, S))
        d_output = rng.standard_normal((N, L, E))
        mha = make_mha(weights, H)
        out = mha.forward(query, key, value, key_padding_mask=padding, attn_mask=causal)
        d_inputs = mha.backward(d_output)

        reference, t_out, t_inputs = torch_mha(weights, H, query, key, value, padding, causal)
        t_out.backward(torch.from_numpy(d_output))
        assert_close(f"{case}: output", out, t_out)
        for name, mine, theirs in zip(("dquery", "dkey", "dvalue"), d_inputs, t_inputs):
            assert_close(f"{case}: {name}", mine, theirs.grad)
        t_grads = torch_mha_parameter_grads(reference)
        for p, layer in mha_projections(mha).items():
            assert_close(f"{case}: {p}_proj dLdW", layer.dLdW, t_grads[f"W{p}"])
            assert_close(f"{case}: {p}_proj dLdb", layer.dLdb, t_grads[f"b{p}"])


@rubric("MultiHeadAttention")
def test_mha_fully_masked_query_rows_are_finite_elsewhere_match_torch():
    rng = np.random.default_rng(11)
    N, L, S, E, H = 2, 4, 5, 8, 2
    weights = random_mha_weights(rng, E)
    query, key, value = (rng.standard_normal((N, T, E)) for T in (L, S, S))
    key_padding_mask = np.zeros((N, S), dtype=bool)
    key_padding_mask[1, 2:] = True  # sequence 1 has 2 real keys
    attn_mask = np.zeros((L, S), dtype=bool)
    attn_mask[3, :2] = True  # query 3 may not see keys 0, 1: fully masked in sequence 1
    mha = make_mha(weights, H)
    out = mha.forward(query, key, value, key_padding_mask, attn_mask)
    grads = mha.backward(rng.standard_normal((N, L, E)))
    assert all(np.all(np.isfinite(x)) for x in (out, *grads)), "output or gradients not finite"
    _, t_out, _ = torch_mha(weights, H, query, key, value, key_padding_mask, attn_mask)
    well_defined = np.ones((N, L), dtype=bool)
    well_defined[1, 3] = False
    assert_close("output where torch's is well defined", out[well_defined],
                 t_out.detach().numpy()[well_defined])


@rubric("MultiHeadAttention")
def test_mha_gradients_match_finite_differences():
    rng = np.random.default_rng(12)
    N, L, S, E, H = 2, 3, 4, 4, 2
    weights = random_mha_weights(rng, E)
    query, key, value = (rng.standard_normal((N, T, E)) for T in (L, S, S))
    d_output = rng.standard_normal((N, L, E))
    key_padding_mask, attn_mask = padding_and_causal_masks(rng, N, L, S)
    key_padding_mask[1, 1:] = True
    attn_mask[2, 0] = True  # query 2 of sequence 1 sees no key: its gradient must match the forward
    mha = make_mha(weights, H)
    masks = {"key_padding_mask": key_padding_mask, "attn_mask": attn_mask}
    loss = lambda: np.sum(mha.forward(query, key, value, **masks) * d_output)  # noqa: E731
    mha.forward(query, key, value, **masks)
    d_inputs = mha.backward(d_output)
    for name, grad, x in zip(("dquery", "dkey", "dvalue"), d_inputs, (query, key, value)):
        assert_close(name, grad, numerical_gradient(loss, x), RTOL_FINITE_DIFF)
    for p, layer in mha_projections(mha).items():
        for param in ("W", "b"):
            assert_close(f"{p}_proj dLd{param}", getattr(layer, f"dLd{param}"),
                         numerical_gradient(loss, getattr(layer, param)), RTOL_FINITE_DIFF)


@rubric("MultiHeadAttention")
def test_mha_helpers_split_concat_and_merge():
    from mytorch.nn import MultiHeadAttention

    N, T, E, H, L, S = 2, 3, 6, 3, 4, 5
    mha = MultiHeadAttention(E, H)
    x = np.arange(N * T * E, dtype=np.float64).reshape(N, T, E)
    heads = mha._split_heads(x)
    d = E // H
    assert heads.shape == (N, H, T, d), f"_split_heads: expected {(N, H, T, d)}, got {heads.shape}"
    for h in range(H):  # head h holds features h*d ... (h+1)*d - 1, as in PyTorch
        assert np.array_equal(heads[:, h], x[:, :, h * d:(h + 1) * d]), (
            f"_split_heads: wrong features in head {h}")
    assert np.array_equal(mha._concat_heads(heads), x), "_concat_heads must undo _split_heads"

    rng = np.random.default_rng(13)
    padding, causal = rng.random((N, S)) < 0.5, rng.random((L, S)) < 0.5
    assert mha._merge_masks(None, None) is None, "_merge_masks(None, None) should be None (no mask)"
    expected = {
        "padding only": (padding, None, np.broadcast_to(padding[:, None, None, :], (N, H, L, S))),
        "attn_mask only": (None, causal, np.broadcast_to(causal, (N, H, L, S))),
        "both": (padding, causal, padding[:, None, None, :] | causal),
    }
    for case, (kpm, am, truth) in expected.items():
        merged = mha._merge_masks(kpm, am)
        assert merged.dtype == np.bool_, f"_merge_masks {case}: expected bool, got {merged.dtype}"
        merged = np.broadcast_to(merged, (N, H, L, S))  # raises when it does not broadcast
        assert np.array_equal(merged, np.broadcast_to(truth, (N, H, L, S))), (
            f"_merge_masks {case}: wrong mask")


@rubric("MultiHeadAttention")
def test_mha_keeps_float32():
    rng = np.random.default_rng(14)
    weights = {k: w.astype(np.float32) for k, w in random_mha_weights(rng, 8).items()}
    mha = make_mha(weights, 2)
    query = rng.standard_normal((2, 3, 8), dtype=np.float32)
    key = rng.standard_normal((2, 5, 8), dtype=np.float32)
    out = mha.forward(query, key, key, attn_mask=np.triu(np.ones((3, 5), dtype=bool), k=1))
    grads = mha.backward(np.ones_like(out))
    for name, x in zip(("output", "dquery", "dkey", "dvalue"), (out, *grads)):
        assert x.dtype == np.float32, f"{name}: float32 in, expected float32 out, got {x.dtype}"


@rubric("MultiHeadAttention")
def test_mha_rejects_bad_shapes_and_early_backward():
    from mytorch.nn import MultiHeadAttention

    expect_error(ValueError, lambda: MultiHeadAttention(10, 3), "10", "3")
    mha = MultiHeadAttention(8, 2)
    query, key = np.zeros((2, 3, 8)), np.zeros((2, 5, 8))
    expect_error(RuntimeError, lambda: mha.backward(np.zeros((2, 3, 8))), "forward")
    expect_error(ValueError, lambda: mha.forward(np.zeros((2, 3, 6)), key, key), "8", "(2, 3, 6)")
    expect_error(ValueError, lambda: mha.forward(query, key, np.zeros((2, 4, 8))),
                 "(2, 5, 8)", "(2, 4, 8)")
    bad_padding, bad_causal = np.zeros((2, 3), dtype=bool), np.zeros((5, 3), dtype=bool)
    expect_error(ValueError, lambda: mha.forward(query, key, key, key_padding_mask=bad_padding),
                 "(2, 5)", "(2, 3)")
    expect_error(ValueError, lambda: mha.forward(query, key, key, attn_mask=bad_causal),
                 "(3, 5)", "(5, 3)")
    good = [np.zeros((8, 8)), np.zeros(8)] * 3
    expect_error(ValueError, lambda: mha.init_weights(*good, np.zeros((8, 4)), np.zeros(8)),
                 "(8, 8)", "(8, 4)")


if __name__ == "__main__":
    run_module(__name__)
