# hw4p1: instructor-only
"""ScaledDotProductAttention's hidden tests (``checks.py``: how a test is written and checked;
``mytorch_hidden.py``: every category)."""
from __future__ import annotations

import math
from typing import Callable

import numpy as np
import torch
from numpy.random import Generator

from autograder.judging.scoring.hidden_tests.diagnosis import attention_variant
from autograder.judging.scoring.hidden_tests.checks import (RTOL_FLOAT32, RTOL_FLOAT32_BIG_SCORES,
                                                            Check, hidden_test, within,
                                                            expect_shape, close, perturbed_forwards,
                                                            fd_gradient, assert_fd_matches,
                                                            assert_all_close, assert_unchanged,
                                                            assert_finite_of_dtype)
from autograder.sandboxed.wire import Program, Ref
from hw4lib.numeric_truths import (RTOL_TORCH, backward_with, finite_difference_mask, leaf,
                                   mask_with_visible_keys)


def attention_truth(Q, K, V, mask, d_output):
    """softmax(Q K^T / sqrt(E)) V written out in torch, -inf at masked scores: out, dQ, dK, dV."""
    tq, tk, tv = leaf(Q), leaf(K), leaf(V)
    scores = tq @ tk.transpose(-1, -2) / math.sqrt(Q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(torch.from_numpy(np.broadcast_to(mask, scores.shape).copy()),
                                    float("-inf"))
    out = torch.softmax(scores, dim=-1) @ tv
    backward_with(out, d_output)
    return out.detach().numpy(), tq.grad.numpy(), tk.grad.numpy(), tv.grad.numpy()


def check_attention(r, where: str, refs, truth, names=("output", "dQ", "dK", "dV"),
                    inputs: tuple | None = None) -> None:
    """The attention's values against ``truth``; with its ``inputs`` (Q, K, V, mask), a wrong
    output is matched against the common wrong formulas."""
    if inputs is not None and names[0] == "output":
        close(f"{where}: output", r[refs[0]], truth[0],
              explain=lambda actual: attention_variant(actual, *inputs))
    assert_all_close(r, where, names, refs, truth)


@hidden_test("ScaledDotProductAttention", 8)
def sdpa_against_explicit_torch_formula(p: Program, rng: Generator) -> Check:
    """Output, dQ, dK and dV for batches of 1 to 4 dimensions, broadcast masks and two upstream
    gradients, against softmax(QK^T/sqrt(E))V in PyTorch; Q, K, V and each upstream gradient must
    come back unmodified."""
    cases = [  # (N, ..., H), L, S, E, Ev, mask shape
        ((3, 2), 5, 4, 6, 3, None),
        ((2, 4), 3, 8, 4, 5, (3, 8)),
        ((2, 3, 2), 4, 5, 3, 6, (2, 1, 2, 4, 5)),
        ((2, 2), 7, 3, 5, 2, (2, 2, 7, 3)),
        ((3,), 2, 6, 4, 4, (3, 1, 6)),
        ((1, 1, 1, 2), 3, 4, 2, 3, (4,)),
        ((2,), 1, 1, 3, 2, (1, 1)),  # one query, a single key
    ]
    pending, echoes, upstreams = [], [], []
    for batch, L, S, E, Ev, mask_shape in cases:
        Q, K, V = (rng.standard_normal((*batch, n, d)) for n, d in ((L, E), (S, E), (S, Ev)))
        qkv = [p.array(x) for x in (Q, K, V)]
        mask = None if mask_shape is None else mask_with_visible_keys(rng, mask_shape, 0.6)
        attention = p.new("ScaledDotProductAttention")
        for attempt in range(2):
            d_output = rng.standard_normal((*batch, L, Ev)) * (attempt + 1)
            upstream = p.array(d_output)
            out = p.call(attention, "forward", *qkv, mask)
            grads = p.call(attention, "backward", upstream, outputs=3)
            upstreams.append((p.echo(upstream), d_output))
            where = (f"Q {Q.shape}, K {K.shape}, V {V.shape}, mask {mask_shape}, "
                     f"upstream #{attempt + 1}")
            pending.append((where, (out, *grads), attention_truth(Q, K, V, mask, d_output),
                            (Q, K, V, mask)))
        echoes += [(p.echo(ref), x) for ref, x in zip(qkv, (Q, K, V))]

    def check(r):
        assert_unchanged(r, echoes, "Q, K or V")
        assert_unchanged(r, upstreams, "ScaledDotProductAttention.backward's upstream gradient")
        for where, refs, truth, inputs in pending:
            with within(masked=inputs[3] is not None):
                check_attention(r, where, refs, truth, inputs=inputs)
    return check


@hidden_test("ScaledDotProductAttention", 3)
def sdpa_second_forward_replaces_the_first(p: Program, rng: Generator) -> Check:
    """After two forwards of different shapes, backward uses the second."""
    attention = p.new("ScaledDotProductAttention")
    p.call(attention, "forward", *(rng.standard_normal((2, 3, 4)) for _ in range(3)),
           mask_with_visible_keys(rng, (3, 3), 0.5))
    Q, K, V = (rng.standard_normal(shape) for shape in ((2, 2, 5), (2, 6, 5), (2, 6, 3)))
    mask = mask_with_visible_keys(rng, (2, 2, 6), 0.5)
    p.call(attention, "forward", Q, K, V, mask)
    d_output = rng.standard_normal((2, 2, 3))
    grads = p.call(attention, "backward", d_output, outputs=3)
    truth = attention_truth(Q, K, V, mask, d_output)[1:]

    def check(r):
        with within(second_forward=True):
            check_attention(r, "after two forwards", grads, truth, names=("dQ", "dK", "dV"))
    return check


@hidden_test("ScaledDotProductAttention", 3)
def sdpa_masked_keys_have_no_influence(p: Program, rng: Generator) -> Check:
    """Changing the keys and values at masked positions leaves the output unchanged (and equal to
    PyTorch's)."""
    Q, K, V = (rng.standard_normal(shape) for shape in ((2, 3, 4, 5), (2, 3, 6, 5), (2, 3, 6, 2)))
    hidden_keys = [[4, 5], [0, 1, 2]]  # per sequence n, the keys nobody may attend to
    mask = np.zeros((2, 1, 1, 6), dtype=bool)
    for n, keys in enumerate(hidden_keys):
        mask[n, ..., keys] = True
    attention = p.new("ScaledDotProductAttention")
    out = p.call(attention, "forward", Q, K, V, mask)
    K2, V2 = K.copy(), V.copy()
    for n, keys in enumerate(hidden_keys):
        K2[n, :, keys] = rng.standard_normal(K2[n, :, keys].shape) * 100
        V2[n, :, keys] = 1e3
    out2 = p.call(attention, "forward", Q, K2, V2, mask)
    truth = attention_truth(Q, K, V, mask, np.zeros((2, 3, 4, 2)))[0]

    def check(r):
        with within(masked=True):
            close("output", r[out], truth,
                  explain=lambda actual: attention_variant(actual, Q, K, V, mask))
            close("output with other keys and values where masked", r[out2], truth)
    return check


@hidden_test("ScaledDotProductAttention", 3)
def sdpa_finite_differences(p: Program, rng: Generator) -> Check:
    """dQ, dK and dV against finite differences of the forward, with a mask."""
    Q, K, V = (rng.standard_normal(shape) for shape in ((2, 2, 3), (2, 3, 3), (2, 3, 2)))
    d_output = rng.standard_normal((2, 2, 2))
    mask = finite_difference_mask(rng, (2, 2, 3))
    attention = p.new("ScaledDotProductAttention")
    qkv, held_mask = [p.array(x) for x in (Q, K, V)], p.array(mask)
    out = p.call(attention, "forward", *qkv, held_mask)
    mine = p.call(attention, "backward", d_output, outputs=3)

    def moving(position: int) -> Callable[[np.ndarray], Ref]:
        return lambda x: p.call(attention, "forward",
                                *(x if i == position else ref for i, ref in enumerate(qkv)),
                                held_mask)

    perturbed = [perturbed_forwards(x, moving(i)) for i, x in enumerate((Q, K, V))]
    truth = attention_truth(Q, K, V, mask, d_output)

    def check(r):
        with within(masked=True):
            check_attention(r, "unperturbed", (out,), truth, names=("output",),
                            inputs=(Q, K, V, mask))
        for name, ref, outputs, x, expected in zip(("dQ", "dK", "dV"), mine, perturbed,
                                                   (Q, K, V), truth[1:]):
            assert_fd_matches(name, r[ref], fd_gradient(r, outputs, d_output, x.shape, name),
                              expected)
    return check


def sdpa_fully_masked_case(p: Program, Q, K, V, mask, d_output, rtol: float,
                           where: str) -> Check:
    """``tests/numeric_checks.check_sdpa_fully_masked`` split into calls and truths: either
    convention for the fully masked rows, every dtype kept, everything else exact."""
    scores_shape = (*Q.shape[:-1], K.shape[-2])
    full = np.broadcast_to(mask, scores_shape).all(axis=-1)
    truth_mask = np.broadcast_to(mask, scores_shape).copy()
    truth_mask[full] = False  # any allowed key will do: these rows get no upstream gradient
    d_zeroed = d_output * ~full[..., None]
    t_out, t_dQ, t_dK, t_dV = attention_truth(*(x.astype(np.float64) for x in (Q, K, V)),
                                              truth_mask, d_zeroed.astype(np.float64))
    t_out = np.where(full[..., None], V.astype(np.float64).mean(axis=-2, keepdims=True), t_out)
    uniform_share = np.sum(d_output * full[..., None], axis=-2, keepdims=True) / K.shape[-2]
    attention = p.new("ScaledDotProductAttention")
    out = p.call(attention, "forward", Q, K, V, mask)
    first = p.call(attention, "backward", d_output, outputs=3)
    p.call(attention, "forward", Q, K, V, mask)
    second = p.call(attention, "backward", d_zeroed, outputs=3)

    @within(fully_masked=True)
    def check(r):
        assert_finite_of_dtype(r, Q.dtype, {"output": out})
        close(f"{where}: output (fully masked rows: mean of V over the keys)", r[out],
              t_out, rtol)
        assert_finite_of_dtype(r, Q.dtype, dict(zip(("dQ", "dK", "dV"), first)))
        dQ = r[first[0]]
        expect_shape(f"{where}: dQ", dQ, t_dQ.shape)
        close(f"{where}: dQ of the rows with an allowed key", dQ[~full], t_dQ[~full], rtol)
        close(f"{where}: dV (a fully masked row adds d_output_row / S to every key)",
              r[first[2]], t_dV + uniform_share, rtol)
        assert_finite_of_dtype(r, Q.dtype, dict(zip(("dQ", "dK", "dV"), second)))
        for name, ref, expected in zip(("dQ", "dK", "dV"), second, (t_dQ, t_dK, t_dV)):
            close(f"{where}, d_output 0 on the fully masked rows: {name}", r[ref],
                  expected, rtol)
    return check


@hidden_test("ScaledDotProductAttention", 3)
def sdpa_fully_masked_rows_in_float32_and_float64(p: Program, rng: Generator) -> Check:
    """Query rows whose keys are all masked: the output is the mean of V, gradients agree with
    either accepted convention, finite, in float32 and float64, with scores in the hundreds and at
    unit scale."""
    cases = []  # (Q, K, V, mask, d_output, where, float32 tolerance)
    Q, K = rng.standard_normal((3, 4, 2)) * 20, rng.standard_normal((3, 5, 2)) * 20
    mask = mask_with_visible_keys(rng, (3, 4, 5), 0.5)
    mask[2, 3] = True
    cases.append((Q, K, rng.standard_normal((3, 5, 3)), mask, rng.standard_normal((3, 4, 3)),
                  "scores in the hundreds, query 3 of sequence 2", RTOL_FLOAT32_BIG_SCORES))
    # At unit scale a masked key would weigh as much as an allowed one if its score were not
    # removed: with scores in the hundreds, that can go unnoticed for some draws.
    Q, K = rng.standard_normal((2, 3, 4)), rng.standard_normal((2, 5, 4))
    mask = mask_with_visible_keys(rng, (2, 3, 5), 0.5)
    mask[0, 0] = [True, True, False, False, False]  # partly masked whatever the draw
    mask[1, 2] = True
    cases.append((Q, K, rng.standard_normal((2, 5, 3)), mask, rng.standard_normal((2, 3, 3)),
                  "unit scale, query 2 of sequence 1", RTOL_FLOAT32))
    Q, K = rng.standard_normal((2, 3, 2, 4)), rng.standard_normal((2, 3, 6, 4))
    mask = np.zeros((2, 1, 1, 6), dtype=bool)
    mask[1] = True  # every key of sequence 1 is padding: all its rows, in every head
    cases.append((Q, K, rng.standard_normal((2, 3, 6, 2)), mask, rng.standard_normal((2, 3, 2, 2)),
                  "sequence 1 all padding", RTOL_FLOAT32))
    checks = [sdpa_fully_masked_case(p, *(x.astype(dtype) for x in (Q, K, V)), mask,
                                     d_output.astype(dtype), rtol,
                                     f"{description}, {np.dtype(dtype).name}")
              for Q, K, V, mask, d_output, description, rtol_float32 in cases
              for dtype, rtol in ((np.float64, RTOL_TORCH), (np.float32, rtol_float32))]

    def check(r):
        for one in checks:
            one(r)
    return check
