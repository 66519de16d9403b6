"""mytorch.nn against PyTorch autograd and finite differences, in float64.

Run ``python -m tests.test_mytorch`` for the rubric report (``--category Linear`` for one part).
Comparisons are relative to the largest entry: max|mine - truth| <= rtol * max(max|truth|, 1)
(``tests/numeric_checks.py`` holds the helpers shared with the autograder's tests). A query row
whose keys are all masked is checked on its own, in the two conventions described there.
"""
import numpy as np
import pytest
import torch

from hw4lib.grading_numbers import MYTORCH_RUBRIC
from hw4lib.numeric_truths import (PROJECTIONS, RTOL_TORCH, leaf, mask_with_visible_keys,
                                   padding_and_causal_masks)
from tests.numeric_checks import (assert_close, assert_unchanged, check_layer_against_torch,
                                  check_second_calls,
                                  check_layer_finite_differences, check_mha_against_torch,
                                  check_mha_finite_differences, check_mha_fully_masked,
                                  check_sdpa_finite_differences, check_sdpa_fully_masked,
                                  check_softmax_finite_differences, mytorch_mha, random_mha_case)
from tests.failure_messages import in_case
from tests.testing_framework import rubric, run_module

RUBRIC = MYTORCH_RUBRIC  # the points the autograder's hidden tests of the same classes award


def torch_attention(Q, K, V, mask, d_output):
    """PyTorch's fused attention: output, dQ, dK, dV. Its bool attn_mask is True where allowed."""
    tq, tk, tv = leaf(Q), leaf(K), leaf(V)
    allowed = None if mask is None else torch.from_numpy(~mask)
    out = torch.nn.functional.scaled_dot_product_attention(tq, tk, tv, attn_mask=allowed)
    out.backward(torch.from_numpy(d_output))
    return out.detach().numpy(), tq.grad.numpy(), tk.grad.numpy(), tv.grad.numpy()


def random_mha_weights(rng: np.random.Generator, E: int) -> list[np.ndarray]:
    """[Wq, bq, Wk, bk, Wv, bv, Wo, bo], the order of MultiHeadAttention.init_weights."""
    return [x for _ in "qkvo" for x in (rng.standard_normal((E, E)) / np.sqrt(E),
                                         rng.standard_normal(E) * 0.1)]


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
    cases = [(batch_dims, (5, 3)) for batch_dims in [(), (4,), (2, 3), (2, 3, 4), (2, 1, 3, 2)]]
    cases += [((3, 2), (4, 1)), ((2,), (1, 3)), ((1,), (4, 1))]  # one feature out, or in
    for batch_dims, (in_features, out_features) in cases:
        W, b = rng.standard_normal((out_features, in_features)), rng.standard_normal(out_features)
        A = rng.standard_normal((*batch_dims, in_features))
        dLdZ = rng.standard_normal((*batch_dims, out_features))
        layer = Linear(in_features, out_features)
        layer.init_weights(W, b)
        with in_case(f"Linear({in_features}, {out_features})", expect=f"Z of shape "
                     f"(*A.shape[:-1], out_features) = "
                     f"{(*batch_dims, out_features)}, dLdA shaped like A", A=A, dLdZ=dLdZ):
            check_layer_against_torch(layer, torch.nn.functional.linear, A, W, b, dLdZ,
                                      f"Linear({in_features}, {out_features}) on A {A.shape}",
                                      "Z")


@rubric("Linear")
def test_linear_second_calls_match_a_fresh_layer():
    from mytorch.nn import Linear

    rng = np.random.default_rng(16)
    W, b = rng.standard_normal((3, 5)), rng.standard_normal(3)

    def make():
        layer = Linear(5, 3)
        layer.init_weights(W, b)
        return layer

    check_second_calls(make, (rng.standard_normal((4, 2, 5)),), (rng.standard_normal((3, 5)),),
                       (rng.standard_normal((3, 3)), rng.standard_normal((3, 3))),
                       lambda layer: {"dLdW": layer.dLdW, "dLdb": layer.dLdb}, "Linear(5, 3)")


@rubric("Linear")
def test_linear_gradients_match_finite_differences():
    from mytorch.nn import Linear

    rng = np.random.default_rng(1)
    layer = Linear(4, 3)
    layer.init_weights(rng.standard_normal((3, 4)), rng.standard_normal(3))
    check_layer_finite_differences(layer, rng.standard_normal((2, 3, 4)),
                                   rng.standard_normal((2, 3, 3)))


@rubric("Linear")
def test_linear_keeps_float32():
    from mytorch.nn import Linear

    rng = np.random.default_rng(2)
    layer = Linear(6, 4)
    layer.init_weights(rng.standard_normal((4, 6), dtype=np.float32),
                       rng.standard_normal(4, dtype=np.float32))
    Z = layer.forward(rng.standard_normal((3, 5, 6), dtype=np.float32))
    assert Z.dtype == np.float32, f"Z: float32 in, expected float32 out, got {Z.dtype}"
    dLdA = layer.backward(np.ones_like(Z))
    for name, x in [("dLdA", dLdA), ("dLdW", layer.dLdW), ("dLdb", layer.dLdb)]:
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
    """A and dLdZ over every dim of 1-d to 5-d inputs against PyTorch. One instance per dim serves
    every rank that has that dim (a layer is reused on inputs of other ranks: ``dim`` must keep
    the value it was given), and each forward is followed by two backward calls with different
    upstream gradients (backward may be called again: it must leave what forward stored, and
    the A it returned, unchanged)."""
    from mytorch.nn import Softmax

    rng = np.random.default_rng(3)
    layers, first_rank = {}, {}  # dim -> the one Softmax(dim) used on every rank, its first
    for ndim in range(1, 6):
        shape = tuple(int(n) for n in rng.integers(2, 5, size=ndim))
        Z = rng.standard_normal(shape) * 3
        Z_given = Z.copy()
        for dim in range(-ndim, ndim):
            softmax = layers.setdefault(dim, Softmax(dim=dim))
            where = f"softmax of {shape} over dim {dim}"
            if first_rank.setdefault(dim, ndim) < ndim:
                where += f" (the Softmax(dim={dim}) used before on a {first_rank[dim]}-d input)"
            with in_case(f"Softmax(dim={dim})", expect=f"A shaped like Z, {shape}", Z=Z):
                A = softmax.forward(Z)
            assert_unchanged(f"{where}: Softmax.forward's input Z", Z, Z_given)
            assert_close(f"{where}: A", A, torch.softmax(torch.from_numpy(Z), dim=dim))
            A_given = A.copy()
            for call in (1, 2):
                dLdA = rng.standard_normal(shape) * call
                dLdA_given = dLdA.copy()
                tZ = leaf(Z)
                torch.softmax(tZ, dim=dim).backward(torch.tensor(dLdA))  # a copy of dLdA
                with in_case(f"Softmax(dim={dim}).backward, call #{call} after one forward",
                             expect=f"dLdZ shaped like dLdA, {shape}", Z=Z, dLdA=dLdA):
                    dLdZ = softmax.backward(dLdA)
                assert_unchanged(f"{where}: Softmax.backward's upstream gradient dLdA", dLdA,
                                 dLdA_given)
                assert_unchanged(f"{where}: the A that forward returned, after backward call "
                                 f"#{call}", A, A_given)
                assert_close(f"{where}: dLdZ of backward call #{call} after one forward", dLdZ,
                             tZ.grad)


@rubric("Softmax")
def test_softmax_gradient_matches_finite_differences():
    from mytorch.nn import Softmax

    rng = np.random.default_rng(4)
    Z = rng.standard_normal((2, 4, 3))
    dLdA = rng.standard_normal((2, 4, 3))
    for dim in (0, 1, -1):
        check_softmax_finite_differences(Softmax(dim=dim), Z, dLdA, f"over dim {dim}: ")


@rubric("Softmax")
def test_softmax_second_calls_match_a_fresh_softmax():
    from mytorch.nn import Softmax

    rng = np.random.default_rng(17)
    check_second_calls(lambda: Softmax(dim=-1), (rng.standard_normal((2, 3, 4)),),
                       (rng.standard_normal((5, 6)),),
                       (rng.standard_normal((5, 6)), rng.standard_normal((5, 6))),
                       lambda layer: {}, "Softmax(dim=-1)")


@rubric("Softmax")
def test_softmax_is_finite_for_huge_logits():
    from mytorch.nn import Softmax

    rng = np.random.default_rng(5)
    for dtype in (np.float64, np.float32):
        Z = np.concatenate([rng.uniform(-1000, 1000, (3, 6)),  # rows spanning +-1000
                            rng.uniform(990, 1000, (2, 6)),  # all near +1000
                            rng.uniform(-1000, -990, (2, 6))]).astype(dtype)  # all near -1000
        dLdA = rng.standard_normal(Z.shape).astype(dtype)
        tZ = leaf(Z.astype(np.float64))
        tA = torch.softmax(tZ, dim=-1)
        tA.backward(torch.from_numpy(dLdA.astype(np.float64)))
        rtol = RTOL_TORCH if dtype == np.float64 else 1e-5
        softmax = Softmax(dim=-1)
        A = softmax.forward(Z)
        assert A.dtype == dtype, f"{dtype.__name__} in, got A {A.dtype}"
        assert_close(f"{dtype.__name__} softmax of logits around +-1000", A, tA, rtol)
        dLdZ = softmax.backward(dLdA)
        assert dLdZ.dtype == dtype, f"{dtype.__name__} in, got dLdZ {dLdZ.dtype}"
        assert_close(f"{dtype.__name__} gradient for logits around +-1000", dLdZ, tZ.grad, rtol)


@rubric("Softmax")
def test_softmax_backward_before_forward_is_an_error():
    from mytorch.nn import Softmax

    softmax = Softmax()
    expect_error(RuntimeError, lambda: softmax.backward(np.ones((2, 3))), "forward")
    softmax.forward(np.zeros((2, 3)))
    expect_error(ValueError, lambda: softmax.backward(np.ones((3, 2))), "(2, 3)", "(3, 2)")


# ---------------------------------------------------------------------------------------------
# ScaledDotProductAttention
# ---------------------------------------------------------------------------------------------

SDPA_CASES = [  # (batch dims (N, ..., H), L, S, E, Ev, mask shape or None)
    ((2, 3), 4, 6, 5, 7, None),
    ((2, 3), 5, 3, 4, 4, (5, 3)),
    ((2, 2, 3), 4, 6, 8, 3, (2, 2, 3, 4, 6)),
    ((3, 2), 6, 4, 3, 5, (3, 1, 1, 4)),
    ((4,), 3, 7, 6, 2, (4, 3, 7)),
    ((2,), 1, 1, 3, 2, (1, 1)),  # one query, a single key
    ((1, 1), 3, 1, 2, 3, None),
]


@rubric("ScaledDotProductAttention")
def test_sdpa_matches_torch_with_masks_and_batch_dims():
    from mytorch.nn import ScaledDotProductAttention

    rng = np.random.default_rng(6)
    for batch, L, S, E, Ev, mask_shape in SDPA_CASES:
        Q, K = rng.standard_normal((*batch, L, E)), rng.standard_normal((*batch, S, E))
        V, d_output = rng.standard_normal((*batch, S, Ev)), rng.standard_normal((*batch, L, Ev))
        mask = None if mask_shape is None else mask_with_visible_keys(rng, mask_shape)
        given, upstream = [x.copy() for x in (Q, K, V)], d_output.copy()
        t_out, t_dQ, t_dK, t_dV = torch_attention(Q, K, V, mask, d_output)
        where = f"Q {Q.shape}, K {K.shape}, V {V.shape}, mask {mask_shape}"
        attention = ScaledDotProductAttention()
        with in_case("ScaledDotProductAttention", expect=f"output (N, ..., H, L, Ev) = "
                     f"{(*batch, L, Ev)}; scores (N, ..., H, L, S) = {(*batch, L, S)}", Q=Q, K=K,
                     V=V, mask=mask):
            out = attention.forward(Q, K, V, mask)
        for name, x, copy in zip("QKV", (Q, K, V), given):
            assert_unchanged(f"{where}: forward's input {name}", x, copy)
        assert_close(f"{where}: output", out, t_out)
        with in_case("ScaledDotProductAttention.backward", expect="(dQ, dK, dV) shaped like "
                     "(Q, K, V); dLdS like the scores (N, ..., H, L, S) = "
                     f"{(*batch, L, S)}", Q=Q, K=K, V=V, mask=mask, d_output=d_output):
            dQ, dK, dV = attention.backward(d_output)
        assert_unchanged(f"{where}: backward's upstream gradient d_output", d_output, upstream)
        assert_close(f"{where}: dQ", dQ, t_dQ)
        assert_close(f"{where}: dK", dK, t_dK)
        assert_close(f"{where}: dV", dV, t_dV)


@rubric("ScaledDotProductAttention")
def test_sdpa_backward_uses_the_last_forward():
    """Two forwards of different shapes on one layer, then backward: the output and the gradients
    are the second call's (whatever forward keeps for later is computed at every call)."""
    from mytorch.nn import ScaledDotProductAttention

    rng = np.random.default_rng(11)
    attention = ScaledDotProductAttention()
    first = [rng.standard_normal((2, 3, 4)) for _ in range(3)]
    with in_case("ScaledDotProductAttention, a first forward", Q=first[0], K=first[1],
                 V=first[2]):
        attention.forward(*first, mask_with_visible_keys(rng, (3, 3)))
    Q, K, V = (rng.standard_normal(shape) for shape in ((2, 2, 5), (2, 6, 5), (2, 6, 3)))
    mask, d_output = mask_with_visible_keys(rng, (2, 2, 6)), rng.standard_normal((2, 2, 3))
    t_out, t_dQ, t_dK, t_dV = torch_attention(Q, K, V, mask, d_output)
    with in_case("ScaledDotProductAttention, a second forward of other shapes, then backward",
                 expect="output (2, 2, 3); (dQ, dK, dV) shaped like (Q, K, V)", Q=Q, K=K, V=V,
                 mask=mask, d_output=d_output):
        out = attention.forward(Q, K, V, mask)
        dQ, dK, dV = attention.backward(d_output)
    for name, mine, truth in zip(("output", "dQ", "dK", "dV"), (out, dQ, dK, dV),
                                 (t_out, t_dQ, t_dK, t_dV)):
        assert_close(f"after a first forward with E 4 and a second with E 5: {name}", mine, truth)


@rubric("ScaledDotProductAttention")
def test_sdpa_second_calls_match_a_fresh_layer():
    from mytorch.nn import ScaledDotProductAttention

    rng = np.random.default_rng(18)
    first = (*(rng.standard_normal((2, 3, 4)) for _ in range(3)),
             mask_with_visible_keys(rng, (3, 3)))
    second = (*(rng.standard_normal(shape) for shape in ((2, 2, 5), (2, 6, 5), (2, 6, 3))),
              mask_with_visible_keys(rng, (2, 2, 6)))
    check_second_calls(ScaledDotProductAttention, first, second,
                       (rng.standard_normal((2, 2, 3)), rng.standard_normal((2, 2, 3))),
                       lambda layer: {}, "ScaledDotProductAttention")


@rubric("ScaledDotProductAttention")
def test_sdpa_gradients_match_finite_differences():
    from mytorch.nn import ScaledDotProductAttention

    rng = np.random.default_rng(7)
    Q, K = rng.standard_normal((2, 3, 2)), rng.standard_normal((2, 4, 2))
    V = rng.standard_normal((2, 4, 3))
    d_output = rng.standard_normal((2, 3, 3))
    check_sdpa_finite_differences(ScaledDotProductAttention(), Q, K, V,
                                  mask_with_visible_keys(rng, (2, 3, 4)), d_output)


@rubric("ScaledDotProductAttention")
def test_sdpa_fully_masked_rows_attend_uniformly_and_stay_finite():
    from mytorch.nn import ScaledDotProductAttention

    rng = np.random.default_rng(8)
    N, H, L, S, E, Ev = 2, 2, 4, 5, 3, 2
    Q, K = rng.standard_normal((N, H, L, E)) * 30, rng.standard_normal((N, H, S, E)) * 30  # big
    V, d_output = rng.standard_normal((N, H, S, Ev)), rng.standard_normal((N, H, L, Ev))
    mask = mask_with_visible_keys(rng, (N, 1, L, S))
    mask[0, :, 1] = True  # query 1 of sequence 0 sees no key, in both heads
    for dtype, rtol in ((np.float64, RTOL_TORCH), (np.float32, 1e-5)):
        check_sdpa_fully_masked(ScaledDotProductAttention(), *(x.astype(dtype) for x in (Q, K, V)),
                                mask, d_output.astype(dtype), torch_attention, rtol,
                                f"{dtype.__name__}, mask {mask.shape}")


@rubric("ScaledDotProductAttention")
def test_sdpa_keeps_float32():
    from mytorch.nn import ScaledDotProductAttention

    rng = np.random.default_rng(9)
    Q, K, V = (rng.standard_normal((2, 3, 4, 8), dtype=np.float32) for _ in range(3))
    attention = ScaledDotProductAttention()
    out = attention.forward(Q, K, V, mask_with_visible_keys(rng, (4, 4)))
    assert out.dtype == np.float32, f"output: float32 in, expected float32 out, got {out.dtype}"
    grads = attention.backward(np.ones_like(out))
    for name, x in zip(("dQ", "dK", "dV"), grads):
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

@rubric("MultiHeadAttention")
def test_mha_matches_torch_cross_attention_with_masks():
    rng = np.random.default_rng(10)
    shapes = [(3, 5, 7, 12, 3), (1, 1, 1, 4, 2), (2, 3, 1, 6, 1), (1, 4, 3, 4, 4)]
    for N, L, S, E, H in shapes:  # then one query, a single key, one head, as many heads as E
        for case, (padding, causal) in mha_mask_cases(*padding_and_causal_masks(rng, N, L, S)):
            weights = random_mha_weights(rng, E)
            query, key, value = (rng.standard_normal((N, T, E)) for T in (L, S, S))
            with in_case(f"MultiHeadAttention({E}, {H}), {case}", expect=f"output (N, L, E) = "
                         f"{(N, L, E)}; heads (N, H, T, E / H); dquery, dkey, dvalue shaped like "
                         f"query, key, value", query=query, key=key, value=value,
                         key_padding_mask=padding, attn_mask=causal):
                check_mha_against_torch(mytorch_mha(weights, H), weights, H, query, key, value,
                                        padding, causal, rng.standard_normal((N, L, E)), case)


def mha_mask_cases(key_padding_mask, attn_mask) -> list[tuple[str, tuple]]:
    """[(case name, (key_padding_mask or None, attn_mask or None))]: none, each, both."""
    return [("no masks", (None, None)), ("padding mask", (key_padding_mask, None)),
            ("causal mask", (None, attn_mask)), ("both masks", (key_padding_mask, attn_mask))]


@rubric("MultiHeadAttention")
def test_mha_second_calls_match_a_fresh_layer():
    """Masked forwards of other shapes and masks on one instance: what the first merged or
    stored must not reach the second."""
    rng = np.random.default_rng(19)
    E, H = 6, 2
    weights = random_mha_weights(rng, E)
    calls = []
    for N, L, S in ((3, 4, 6), (2, 3, 5)):
        padding, causal = padding_and_causal_masks(rng, N, L, S)
        padding[-1, 1:] = True  # another padding in each call; key 0 stays visible
        calls.append((*(rng.standard_normal((N, T, E)) for T in (L, S, S)), padding, causal))
    check_second_calls(lambda: mytorch_mha(weights, H), *calls,
                       (rng.standard_normal((2, 3, E)), rng.standard_normal((2, 3, E))),
                       lambda mha: {f"{name}.{grad}": getattr(getattr(mha, name), grad)
                                    for name in PROJECTIONS for grad in ("dLdW", "dLdb")},
                       f"MultiHeadAttention({E}, {H})")


@rubric("MultiHeadAttention")
def test_mha_fully_masked_query_rows_attend_uniformly_and_stay_finite():
    N, L, S, E, H = 2, 4, 5, 8, 2
    rng, weights, mha, (query, key, value) = random_mha_case(11, random_mha_weights, N, L, S, E, H)
    key_padding_mask = np.zeros((N, S), dtype=bool)
    key_padding_mask[1, 2:] = True  # sequence 1 has 2 real keys
    attn_mask = np.zeros((L, S), dtype=bool)
    attn_mask[3, :2] = True  # query 3 may not see keys 0, 1: fully masked in sequence 1
    check_mha_fully_masked(mha, weights, H, query, key, value, key_padding_mask, attn_mask,
                           rng.standard_normal((N, L, E)), "query 3 of sequence 1")


@rubric("MultiHeadAttention")
def test_mha_gradients_match_finite_differences():
    N, L, S, E, H = 2, 3, 4, 4, 2
    rng, _, mha, (query, key, value) = random_mha_case(12, random_mha_weights, N, L, S, E, H)
    d_output = rng.standard_normal((N, L, E))
    key_padding_mask, attn_mask = padding_and_causal_masks(rng, N, L, S)
    check_mha_finite_differences(mha, query, key, value, key_padding_mask, attn_mask, d_output)


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
    weights = [w.astype(np.float32) for w in random_mha_weights(rng, 8)]
    mha = mytorch_mha(weights, 2)
    query = rng.standard_normal((2, 3, 8), dtype=np.float32)
    key = rng.standard_normal((2, 5, 8), dtype=np.float32)
    out = mha.forward(query, key, key, attn_mask=np.triu(np.ones((3, 5), dtype=bool), k=1))
    assert out.dtype == np.float32, f"output: float32 in, expected float32 out, got {out.dtype}"
    grads = mha.backward(np.ones_like(out))
    for name, x in zip(("dquery", "dkey", "dvalue"), grads):
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
    mha.init_weights(*good, np.zeros((8, 8)), np.zeros(8))
    mha.forward(query, key, key)
    expect_error(ValueError, lambda: mha.backward(np.zeros((2, 5, 8))), "(2, 3, 8)", "(2, 5, 8)")


if __name__ == "__main__":
    run_module(__name__)
