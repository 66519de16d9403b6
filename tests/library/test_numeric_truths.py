# hw4p1: instructor-only
"""``hw4lib.numeric_truths.backward_with``, the vector-Jacobian product of the judge's PyTorch
truths: the very gradients ``output.backward(upstream)`` gives, bit for bit, in float32 and
float64, through each graph the hidden tests build, without the gradient argument whose check
imports sympy in torch 2.13 (that a judge then never imports it:
``tests/grader/test_judge_imports.py``).

    .venv/bin/python -m pytest -q tests/library/test_numeric_truths.py
"""
import math

import numpy as np
import pytest
import torch

from hw4lib.numeric_truths import backward_with, padding_and_causal_masks, torch_multihead_attention


def linear(rng, dtype):
    A, W, b = (rng.standard_normal(s).astype(dtype) for s in ((2, 3, 7), (4, 7), (4,)))
    return [A, W, b], lambda A, W, b: A @ W.T + b


def softmax(rng, dtype):
    return [(rng.standard_normal((2, 3, 5)) * 4).astype(dtype)], lambda Z: torch.softmax(Z, 1)


def attention(rng, dtype):
    Q, K, V = (rng.standard_normal((2, 3, s, 4)).astype(dtype) for s in (5, 6, 6))
    mask = torch.from_numpy(rng.random((5, 6)) < 0.4)
    mask[:, 0] = False

    def graph(Q, K, V):
        scores = (Q @ K.transpose(-1, -2) / math.sqrt(4)).masked_fill(mask, float("-inf"))
        return torch.softmax(scores, dim=-1) @ V
    return [Q, K, V], graph


def multi_head(rng, dtype):
    """torch's module (its parameters' gradients included, through their leaves)."""
    E, H, N, L, S = 6, 2, 3, 4, 5
    weights = [rng.standard_normal((E, E) if i % 2 == 0 else (E,)) for i in range(8)]
    reference = torch_multihead_attention(weights, H).to(getattr(torch, np.dtype(dtype).name))
    padding, causal = padding_and_causal_masks(rng, N, L, S)
    inputs = [rng.standard_normal((N, n, E)).astype(dtype) for n in (L, S, S)]

    def graph(q, k, v):
        return reference(q, k, v, key_padding_mask=torch.from_numpy(padding),
                         attn_mask=torch.from_numpy(causal), need_weights=False)[0]
    return inputs, graph, list(reference.parameters())


def gradients(build, dtype, seed, upstream_of, vjp):
    """(output, gradients of every leaf) of ``build``'s graph after ``vjp(output, upstream)``."""
    rng = np.random.default_rng(seed)
    made = build(rng, dtype)
    arrays, graph, parameters = (*made, []) if len(made) == 2 else made
    leaves = [torch.tensor(x, requires_grad=True) for x in arrays]
    output = graph(*leaves)
    vjp(output, upstream_of(np.random.default_rng(seed + 1), output))
    return output, [t.grad for t in leaves + parameters]


def upstream_like(rng, output):
    """An upstream gradient of output's shape and dtype, with a negative zero and a Fortran-order
    copy (torch.from_numpy keeps its strides)."""
    upstream = rng.standard_normal(tuple(output.shape)).astype(str(output.dtype).split(".")[1])
    upstream.flat[0] = -0.0
    return np.asfortranarray(upstream) if upstream.ndim == 3 else upstream


def test_backward_with_gives_backward_s_gradients_bit_for_bit():
    compared = 0
    for build in (linear, softmax, attention, multi_head):
        for dtype in (np.float32, np.float64):
            for seed in range(3):
                out, expected = gradients(build, dtype, seed, upstream_like,
                                          lambda o, u: o.backward(torch.from_numpy(u)))
                _, actual = gradients(build, dtype, seed, upstream_like, backward_with)
                assert out.dtype == getattr(torch, np.dtype(dtype).name)
                assert len(actual) == len(expected) >= 1
                for a, e in zip(actual, expected):
                    assert a.dtype == e.dtype and torch.equal(a, e), (build.__name__, dtype, seed)
                    assert a.numpy().tobytes() == e.numpy().tobytes(), "the signs of zeros too"
                    compared += 1
    assert compared == 3 * 2 * (3 + 1 + 3 + 3 + 4)  # MultiheadAttention: 4 parameter tensors


def test_backward_with_refuses_an_upstream_of_another_shape_or_dtype():
    output = torch.ones(2, 3, dtype=torch.float64, requires_grad=True) * 2
    for upstream in (np.ones(3), np.ones((1, 3)), np.ones((2, 3), np.float32)):
        with pytest.raises(ValueError, match="pass one of the output's shape and dtype"):
            backward_with(output, upstream)


