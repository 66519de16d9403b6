# hw4p1: instructor-only
"""MultiHeadAttention's hidden tests (``checks.py``: how a test is written and checked;
``mytorch_hidden.py``: every category)."""
from __future__ import annotations

import math
from typing import Callable

import numpy as np
import torch
from numpy.random import Generator

from autograder.judging.scoring.hidden_tests.checks import (RTOL_FLOAT32, Check, hidden_test,
                                                            within, expect, expect_shape, close,
                                                            expect_dtype, perturbed_forwards,
                                                            fd_gradient, assert_fd_matches,
                                                            assert_unchanged,
                                                            assert_finite_of_dtype)
from autograder.sandboxed.wire import Program, Ref
from hw4lib.numeric_truths import (PROJECTIONS, RTOL_FINITE_DIFF, as_tensor, backward_with, leaf,
                                   padding_and_causal_masks, torch_multihead_attention,
                                   torch_parameter_grads)


def weights_for(rng: np.random.Generator, E: int) -> list[np.ndarray]:
    """[Wq, bq, Wk, bk, Wv, bv, Wo, bo], the order of MultiHeadAttention.init_weights."""
    return [x for _ in range(4) for x in (rng.uniform(-1, 1, (E, E)) / math.sqrt(E),
                                           rng.uniform(-0.3, 0.3, E))]


def padded_masks(rng: Generator, N: int, L: int, S: int) -> tuple[np.ndarray, np.ndarray]:
    """``padding_and_causal_masks`` with the last sequence padded from key min(L, S) - 1 on
    whenever N > 1: the first sequence is never padded, and a key the causal mask leaves visible
    (query L - 1 sees keys up to L - 1) is padded in the last, so that a padding mask applied to
    the wrong axis or the wrong sequence changes the result at every draw."""
    padding, causal = padding_and_causal_masks(rng, N, L, S)
    if N > 1:
        padding[-1, max(1, min(L, S) - 1):] = True  # key 0 stays: no query row fully masked
    return padding, causal


def new_mha(p: Program, weights: list[np.ndarray], num_heads: int) -> Ref:
    mha = p.new("MultiHeadAttention", weights[0].shape[0], num_heads)
    p.call(mha, "init_weights", *weights)
    return mha


def projection_grads(p: Program, mha: Ref) -> list[Ref]:
    """Refs of [q_proj.dLdW, q_proj.dLdb, ..., out_proj.dLdb]: torch_parameter_grads' order."""
    return [p.get(mha, f"{layer}.{param}") for layer in PROJECTIONS for param in ("dLdW", "dLdb")]


def parameter_names(layers=PROJECTIONS) -> list[str]:
    return [f"{layer}.{param}" for layer in layers for param in ("dLdW", "dLdb")]


def torch_attention(reference: torch.nn.MultiheadAttention, query: torch.Tensor,
                    key: torch.Tensor, value: torch.Tensor, key_padding_mask: np.ndarray | None,
                    attn_mask: np.ndarray | None) -> torch.Tensor:
    """``reference(query, key, value, key_padding_mask=..., attn_mask=..., need_weights=False)``'s
    output (N, L, E), bit for bit, for batch-first inputs and boolean masks (N, S) and (L, S)
    (True = hidden; None: none). A key padding mask reaches torch merged into the attention mask,
    (N * H, L, S), row n * H + h, as torch merges the two itself: torch 2.13 checks a key padding
    mask's shape with its symbolic shapes module, which imports sympy (about 0.75 CPU s)."""
    if key_padding_mask is not None:
        N, S = key_padding_mask.shape
        hidden = key_padding_mask[:, None, :] | (False if attn_mask is None else attn_mask)
        attn_mask = np.repeat(np.broadcast_to(hidden, (N, query.shape[1], S)),
                              reference.num_heads, axis=0)
    return reference(query, key, value, attn_mask=as_tensor(attn_mask), need_weights=False)[0]


def mha_torch_truth(weights, num_heads, query, key, value, padding, causal, d_output):
    """PyTorch's module: output, [dquery, dkey, dvalue], parameter gradients."""
    reference = torch_multihead_attention(weights, num_heads)
    inputs = [leaf(x) for x in (query, key, value)]
    t_out = torch_attention(reference, *inputs, padding, causal)
    backward_with(t_out, d_output)
    return (t_out.detach().numpy(), [x.grad.numpy() for x in inputs],
            torch_parameter_grads(reference))


def mha_against_torch(p: Program, mha: Ref, weights, num_heads, inputs: list[Ref], arrays,
                      padding, causal, d_output, where: str) -> Check:
    """``check_mha_against_torch`` split: forward and backward on the worker, PyTorch here; the
    upstream gradient must come back unmodified."""
    out = p.call(mha, "forward", *inputs, key_padding_mask=padding, attn_mask=causal)
    upstream = p.array(d_output)
    d_inputs = p.call(mha, "backward", upstream, outputs=3)
    echo = p.echo(upstream)
    params = projection_grads(p, mha)
    t_out, t_inputs, t_params = mha_torch_truth(weights, num_heads, *arrays, padding, causal,
                                                d_output)

    def check(r):
        assert_unchanged(r, [(echo, d_output)],
                         "MultiHeadAttention.backward's upstream gradient d_output")
        close(f"{where}: output", r[out], t_out)
        for name, ref, expected in zip(("dquery", "dkey", "dvalue"), d_inputs, t_inputs):
            close(f"{where}: {name}", r[ref], expected)
        for name, ref, expected in zip(parameter_names(), params, t_params):
            close(f"{where}: {name}", r[ref], expected)
    return check


@hidden_test("MultiHeadAttention", 6)
def mha_cross_attention_against_torch_for_two_upstream_gradients(p: Program,
                                                                  rng: Generator) -> Check:
    """Output, input gradients and every projection's dLdW, dLdb against
    torch.nn.MultiheadAttention, with no mask, padding, causal and both masks, two upstream
    gradients each; query, key, value and each upstream gradient must come back unmodified."""
    checks, echoes = [], []
    for N, L, S, E, H in [(2, 6, 4, 8, 4), (3, 3, 9, 6, 1), (1, 5, 5, 10, 5), (1, 1, 1, 4, 2)]:
        weights = weights_for(rng, E)
        padding, causal = padded_masks(rng, N, L, S)
        for case, (pad, cau) in {"no mask": (None, None), "padding": (padding, None),
                                 "causal": (None, causal), "both": (padding, causal)}.items():
            mha = new_mha(p, weights, H)
            arrays = [rng.standard_normal((N, T, E)) for T in (L, S, S)]
            inputs = [p.array(x) for x in arrays]
            for attempt in range(2):
                d_output = rng.standard_normal((N, L, E)) * (attempt + 1)
                where = f"N={N} L={L} S={S} E={E} H={H}, {case}, upstream #{attempt + 1}"
                checks.append(mha_against_torch(p, mha, weights, H, inputs, arrays, pad, cau,
                                                d_output, where))
            echoes += [(p.echo(ref), x) for ref, x in zip(inputs, arrays)]

    def check(r):
        assert_unchanged(r, echoes, "query, key or value")
        for one in checks:
            one(r)
    return check


@hidden_test("MultiHeadAttention", 3)
def mha_self_attention_with_one_array_for_query_key_value(p: Program, rng: Generator) -> Check:
    """One array passed as query, key and value: the output and dquery + dkey + dvalue against
    PyTorch, and float32 weights and inputs keep float32."""
    N, T, E, H = 3, 5, 12, 3
    weights = weights_for(rng, E)
    x = rng.standard_normal((N, T, E))
    padding, causal = padded_masks(rng, N, T, T)
    mha = new_mha(p, weights, H)
    d_output = rng.standard_normal((N, T, E))
    xs = p.array(x)
    out = p.call(mha, "forward", xs, xs, xs, key_padding_mask=padding, attn_mask=causal)
    grads = p.call(mha, "backward", d_output, outputs=3)
    tx = leaf(x)
    reference = torch_multihead_attention(weights, H)
    out_t = torch_attention(reference, tx, tx, tx, padding, causal)
    backward_with(out_t, d_output)
    mha32 = new_mha(p, [w.astype(np.float32) for w in weights], H)
    x32 = p.array(x.astype(np.float32))
    out32 = p.call(mha32, "forward", x32, x32, x32, key_padding_mask=padding, attn_mask=causal)
    grads32 = p.call(mha32, "backward", d_output.astype(np.float32), outputs=3)

    def check(r):
        close("self-attention output", r[out], out_t)
        for name, ref in zip(("dquery", "dkey", "dvalue"), grads):
            expect_shape(f"self-attention {name}", r[ref], x.shape)  # before adding them up
        close("self-attention dquery + dkey + dvalue", sum(r[g] for g in grads), tx.grad)
        for name, ref in zip(("output", "dquery", "dkey", "dvalue"), (out32, *grads32)):
            expect_dtype(f"float32 self-attention: {name}", r[ref], np.float32)
        close("float32 self-attention output", r[out32], out_t, RTOL_FLOAT32)
    return check


@hidden_test("MultiHeadAttention", 3)
def mha_second_forward_replaces_the_first(p: Program, rng: Generator) -> Check:
    """After a masked forward of other shapes and other masks, a masked forward and backward
    match PyTorch (what the first call merged or stored must not reach the second)."""
    E, H = 6, 2
    weights = weights_for(rng, E)
    mha = new_mha(p, weights, H)
    first_padding, first_causal = padded_masks(rng, 4, 7, 7)
    p.call(mha, "forward", *(rng.standard_normal((4, 7, E)) for _ in range(3)),
           key_padding_mask=first_padding, attn_mask=first_causal)
    arrays = [rng.standard_normal((2, T, E)) for T in (3, 5, 5)]
    padding, causal = padded_masks(rng, 2, 3, 5)
    check = mha_against_torch(p, mha, weights, H, [p.array(x) for x in arrays], arrays, padding,
                              causal, rng.standard_normal((2, 3, E)),
                              "after a forward of other shapes")
    return within(second_forward=True)(check)


def mha_case(rng: np.random.Generator, N: int, L: int, S: int, E: int, H: int):
    """(weights, [query, key, value]) drawn as ``tests/numeric_checks.random_mha_case``."""
    weights = weights_for(rng, E)
    return weights, [rng.standard_normal((N, T, E)) for T in (L, S, S)]


def mha_perturbed(p: Program, weights: list[np.ndarray], num_heads: int, arrays,
                  inputs: list[Ref], masks: dict) -> list[list[Ref]]:
    """:func:`perturbed_forwards` for query, key, value and every projection's W and b, in the
    order of ``tests/numeric_checks.mha_finite_differences``: a MultiHeadAttention holding
    ``weights`` runs the moved inputs, another is loaded with each moved weight in turn."""
    mha = new_mha(p, weights, num_heads)
    moved = p.new("MultiHeadAttention", weights[0].shape[0], num_heads)
    held = [p.array(w) for w in weights]
    masks = {name: None if mask is None else p.array(mask) for name, mask in masks.items()}

    def moving_input(position: int) -> Callable[[np.ndarray], Ref]:
        return lambda x: p.call(mha, "forward",
                                *(x if i == position else ref for i, ref in enumerate(inputs)),
                                **masks)

    def moving_weight(position: int) -> Callable[[np.ndarray], Ref]:
        def forward(w: np.ndarray) -> Ref:
            p.call(moved, "init_weights",
                   *(w if i == position else ref for i, ref in enumerate(held)))
            return p.call(moved, "forward", *inputs, **masks)
        return forward

    return ([perturbed_forwards(x, moving_input(i)) for i, x in enumerate(arrays)]
            + [perturbed_forwards(w, moving_weight(i)) for i, w in enumerate(weights)])


def target_shapes(arrays, E: int) -> list[tuple]:
    return [x.shape for x in arrays] + [shape for _ in PROJECTIONS for shape in ((E, E), (E,))]


@hidden_test("MultiHeadAttention", 3)
def mha_finite_differences(p: Program, rng: Generator) -> Check:
    """Input gradients and every projection's dLdW, dLdb against finite differences of the
    forward, with padding and causal masks."""
    N, L, S, E, H = 2, 2, 3, 4, 2
    weights, arrays = mha_case(rng, N, L, S, E, H)
    padding = np.array([[False, False, True], [False, True, True]])
    causal = np.array([[False, True, False], [False, False, True]])  # every query sees key 0
    d_output = rng.standard_normal((N, L, E))
    mha = new_mha(p, weights, H)
    inputs = [p.array(x) for x in arrays]
    masks = {"key_padding_mask": padding, "attn_mask": causal}
    out = p.call(mha, "forward", *inputs, **masks)
    mine = list(p.call(mha, "backward", d_output, outputs=3)) + projection_grads(p, mha)
    perturbed = mha_perturbed(p, weights, H, arrays, inputs, masks)
    t_out, t_inputs, t_params = mha_torch_truth(weights, H, *arrays, padding, causal, d_output)
    names = ["dquery", "dkey", "dvalue"] + parameter_names()

    def check(r):
        close("output", r[out], t_out)
        for name, ref, outputs, shape, truth in zip(names, mine, perturbed,
                                                    target_shapes(arrays, E), t_inputs + t_params):
            assert_fd_matches(name, r[ref], fd_gradient(r, outputs, d_output, shape, name), truth)
    return check


def explicit_mha_truth(weights, num_heads, query, key, value, padding, causal, d_output):
    """MultiHeadAttention written out in torch, fully masked rows attending uniformly with
    constant scores (what finite differences of such a forward measure): output, [dquery, dkey,
    dvalue], parameter gradients in torch_parameter_grads' order."""
    params = [leaf(w) for w in weights]
    Wq, bq, Wk, bk, Wv, bv, Wo, bo = params
    inputs = [leaf(x) for x in (query, key, value)]
    N, L, E = query.shape
    S, d = key.shape[1], E // num_heads

    def heads(x, W, b):
        return (x @ W.T + b).reshape(N, -1, num_heads, d).transpose(1, 2)

    q, k, v = heads(inputs[0], Wq, bq), heads(inputs[1], Wk, bk), heads(inputs[2], Wv, bv)
    mask = torch.from_numpy(np.broadcast_to(padding[:, None, None, :] | causal[None, None],
                                            (N, num_heads, L, S)).copy())
    scores = (q @ k.transpose(-1, -2) / math.sqrt(d)).masked_fill(mask, float("-inf"))
    scores = scores.masked_fill(mask.all(-1, keepdim=True), 0.0)
    attended = (torch.softmax(scores, dim=-1) @ v).transpose(1, 2).reshape(N, L, E)
    out = attended @ Wo.T + bo
    backward_with(out, d_output)
    return (out.detach().numpy(), [x.grad.numpy() for x in inputs],
            [w.grad.numpy() for w in params])


@hidden_test("MultiHeadAttention", 3)
def mha_fully_masked_rows(p: Program, rng: Generator) -> Check:
    """Query rows whose keys are all masked: the output is out_proj(mean of v_proj(value)),
    gradients agree with finite differences in either accepted convention, all finite."""
    N, L, S, E, H = 3, 3, 4, 6, 3
    weights, arrays = mha_case(rng, N, L, S, E, H)
    padding = np.array([[False] * 4, [False, False, True, True], [False, True, True, True]])
    causal = np.zeros((L, S), dtype=bool)
    causal[1, :2] = True  # query 1 sees no key of sequence 1 or 2
    causal[2, 0] = True  # query 2 sees no key of sequence 2
    d_output = rng.standard_normal((N, L, E))
    where = "query 1 of sequences 1 and 2, query 2 of sequence 2"
    full = (padding[:, None, :] | causal[None]).all(axis=-1)  # (N, L)
    mha = new_mha(p, weights, H)
    inputs = [p.array(x) for x in arrays]
    masks = {"key_padding_mask": padding, "attn_mask": causal}
    perturbed = mha_perturbed(p, weights, H, arrays, inputs, masks)
    rounds = []
    for label, upstream in (("d_output", d_output),
                            ("d_output 0 on the fully masked rows", d_output * ~full[..., None])):
        out = p.call(mha, "forward", *inputs, **masks)
        mine = list(p.call(mha, "backward", upstream, outputs=3)) + projection_grads(p, mha)
        rounds.append((label, upstream, out, mine,
                       explicit_mha_truth(weights, H, *arrays, padding, causal, upstream)))
    names = ["dquery", "dkey", "dvalue"] + parameter_names()
    shared = {"dvalue"} | set(parameter_names(("v_proj", "out_proj")))

    @within(fully_masked=True)
    def check(r):
        for number, (label, upstream, out, mine, (t_out, t_inputs, t_params)) in enumerate(rounds):
            assert_finite_of_dtype(r, np.float64, {"output": out})
            close(f"{where}, {label}: output (fully masked rows: out_proj(mean of "
                  f"v_proj(value)))", r[out], t_out)
            assert_finite_of_dtype(r, np.float64, dict(zip(names[:3], mine[:3])))
            for name, ref, pert, shape, truth in zip(names, mine, perturbed,
                                                     target_shapes(arrays, E),
                                                     t_inputs + t_params):
                fd = fd_gradient(r, pert, upstream, shape, name)
                close(f"finite differences of your forward in {name} (against PyTorch)",
                      fd, truth, RTOL_FINITE_DIFF, role="forward")
                if number == 1 or name in shared:
                    close(f"{where}, {label}: {name}", r[ref], fd, RTOL_FINITE_DIFF,
                          role="backward-vs-forward")
                elif name == "dquery":
                    expect_shape(f"{where}, {label}: dquery", r[ref], fd.shape,
                                 role="backward-vs-forward")
                    close(f"{where}, {label}: dquery of the rows with an allowed key",
                          r[ref][~full], fd[~full], RTOL_FINITE_DIFF, role="backward-vs-forward")
    return check


# (embed_dim, num_heads) that do not split: E // H would floor, and features would belong to no
# head (10 // 4 = 2 leaves 2 of 10), or heads would be cut in the middle of one (6, 4).
UNEVEN_HEADS = ((10, 4), (6, 4), (7, 2))


@hidden_test("MultiHeadAttention", 2)
def mha_helpers(p: Program, rng: Generator) -> Check:
    """_split_heads, _concat_heads and _merge_masks on their own, and MultiHeadAttention(E, H)
    with E not divisible by H refused with ValueError when built (the given check_heads: with the
    helpers, so that no point is earned by given code alone)."""
    N, T, E, H, L, S = 3, 4, 12, 4, 2, 5
    mha = p.new("MultiHeadAttention", E, H)
    refused = [(E, H, p.new_refused("MultiHeadAttention", E, H)) for E, H in UNEVEN_HEADS]
    x = rng.standard_normal((N, T, E))
    heads = p.call(mha, "_split_heads", x)
    expected = np.stack([x[:, :, h * (E // H):(h + 1) * (E // H)] for h in range(H)], axis=1)
    round_trip = p.call(mha, "_concat_heads", heads)
    concat = p.call(mha, "_concat_heads", expected.copy())
    padding, causal = rng.random((N, S)) < 0.4, rng.random((L, S)) < 0.4
    full = (N, H, L, S)
    by_key = np.broadcast_to(padding[:, None, None, :], full)
    by_query = np.broadcast_to(causal, full)
    merges = []
    for masks, args, truth in (("both", (padding, causal), by_key | by_query),
                               ("padding", (padding, None), by_key),
                               ("attention", (None, causal), by_query)):
        label = "_merge_masks(" + ", ".join("None" if a is None else "mask" for a in args) + ")"
        merges.append((label, masks, p.call(mha, "_merge_masks", *args), truth))
    nothing = p.call(mha, "_merge_masks", None, None)

    def check(r):
        close("_split_heads", r[heads], expected, 0.0)
        close("_concat_heads(_split_heads(x))", r[round_trip], x, 0.0)
        close("_concat_heads", r[concat], x, 0.0)
        for label, masks, ref, truth in merges:
            with within(masks=masks):
                merged = r[ref]
                expect(merged is not None, f"{label} returned None", "missing")
                try:
                    same = np.array_equal(np.broadcast_to(merged, full), truth)
                except ValueError:
                    same = False
                expect(same, f"{label}: expected a mask broadcastable to {full} equal to the "
                             f"union", "mask")
        expect(r[nothing] is None or not np.any(r[nothing]),
               "_merge_masks(None, None) must mask nothing")
        for E, H, ref in refused:
            expect(bool(r[ref]), f"MultiHeadAttention({E}, {H}) was built: embed_dim {E} does "
                   f"not split into {H} heads, so it must raise ValueError", "refusal")
    return check

