"""The truths the mytorch tests compare with (``tests/numeric_checks.py``,
``tests/test_mytorch.py``; the grader's hidden tests use the same): tolerances, float64 PyTorch
references, the masks the cases draw, and what a wrong array's difference from the truth looks
like. numpy and torch only; it holds no ``assert`` (``python -O`` must not change what a grader
decides).

Comparisons are relative to the truth's largest entry:
max|actual - truth| <= rtol * max(max|truth|, 1).
"""
from __future__ import annotations

import numpy as np
import torch

RTOL_TORCH = 1e-8  # float64 against PyTorch autograd
RTOL_FINITE_DIFF = 1e-6  # central differences with step 1e-6 are good to about 1e-9
PROJECTIONS = ("q_proj", "k_proj", "v_proj", "out_proj")  # MultiHeadAttention's Linear layers


# What a wrong array's difference from the truth looks like, and the words for it. A bug family
# leaves its mark here: a missing or extra factor scales the whole array, a reshape where a
# transpose was needed keeps the numbers but moves them, a forgotten bias shifts every row alike.
DIFFERENCES = {
    "reshaped": "the right values in another shape: a reshape or a missing axis?",
    "unreduced": "extra leading axes: a sum over the batch dimensions is missing?",
    "scaled": "a constant multiple of the expected array: a factor is missing or extra?",
    "rearranged": "the right numbers in the wrong places: a reshape where a transpose belongs, "
                  "or the wrong axis?",
    "offset": "every row off by the same vector: the bias?",
    "zero": "all zeros: was it computed?",
}


def difference_features(actual: np.ndarray, expected: np.ndarray,
                        rtol: float = 1e-6) -> frozenset[str]:
    """Which of :data:`DIFFERENCES` describe ``actual`` against ``expected`` (any shapes), each
    tested to ``rtol`` times the expected array's scale; empty when none does (or both agree)."""
    actual = np.asarray(actual, dtype=np.float64)
    expected = np.asarray(expected, dtype=np.float64)
    if not (np.all(np.isfinite(actual)) and actual.size and expected.size):
        return frozenset()
    tolerance = rtol * max(float(np.max(np.abs(expected))), 1.0)
    found = set()
    if not np.any(actual) and np.any(expected):
        found.add("zero")
    if actual.shape != expected.shape:
        if actual.shape[-expected.ndim:] == expected.shape:  # the shapes differ: more axes
            found.add("unreduced")
        if actual.size == expected.size and _same_numbers(actual, expected, tolerance):
            found.add("reshaped")
        return frozenset(found)
    if np.max(np.abs(actual - expected)) <= tolerance:
        return frozenset()
    a, e = actual.ravel(), expected.ravel()
    if _same_numbers(a, e, tolerance):
        found.add("rearranged")
    energy = float(e @ e)
    if energy > 0 and np.any(actual):
        factor = float(a @ e) / energy
        if abs(factor - 1) > 1e-3 and np.max(np.abs(a - factor * e)) <= tolerance:
            found.add("scaled")
    rows = (actual - expected).reshape(-1, expected.shape[-1]) if expected.ndim else None
    if rows is not None and len(rows) > 1 and np.max(np.abs(rows - rows[0])) <= tolerance:
        found.add("offset")
    return frozenset(found)


def _same_numbers(a: np.ndarray, e: np.ndarray, tolerance: float) -> bool:
    return bool(np.max(np.abs(np.sort(a, axis=None) - np.sort(e, axis=None))) <= tolerance)


def as_tensor(mask: np.ndarray | None) -> torch.Tensor | None:
    """A numpy mask as a torch tensor sharing its memory; None stays None."""
    return None if mask is None else torch.from_numpy(mask)


def leaf(x: np.ndarray) -> torch.Tensor:
    """A float64 copy of x as a torch leaf tensor that records its gradient."""
    return torch.tensor(x, dtype=torch.float64, requires_grad=True)


def backward_with(output: torch.Tensor, upstream: np.ndarray) -> None:
    """``output.backward(upstream)``, bit for bit: each leaf ``output`` depends on gains the
    vector-Jacobian product of ``upstream`` (same shape and dtype as ``output``) in its ``.grad``.

    Written as the backward of ``sum(output * upstream)``: the sum's backward is a tensor of ones
    and the product's multiplies it by ``upstream``, exactly (1.0 * x == x), so the graph receives
    ``upstream`` itself. Passed as ``gradient``, torch 2.13 checks its shape with its symbolic
    shapes module, which imports sympy (about 0.75 CPU s) in every judge that calls this.
    """
    gradient = torch.from_numpy(upstream)
    if gradient.shape != output.shape or gradient.dtype != output.dtype:
        raise ValueError(f"an upstream gradient {gradient.dtype} {tuple(gradient.shape)} for an "
                         f"output {output.dtype} {tuple(output.shape)}: pass one of the output's "
                         "shape and dtype")
    (output * gradient).sum().backward()


def mask_with_visible_keys(rng: np.random.Generator, shape: tuple,
                           p_masked: float = 0.5) -> np.ndarray:
    """Bool mask (True = do not attend) leaving an allowed key in every row (last axis)."""
    mask = rng.random(shape) < p_masked
    keep = rng.integers(0, shape[-1], size=(*shape[:-1], 1))
    np.put_along_axis(mask, keep, False, axis=-1)
    return mask


def finite_difference_mask(rng: np.random.Generator, shape: tuple) -> np.ndarray:
    """Bool mask (..., L, S), S >= 3, for a small finite-difference test: every row hides one key
    at least and keeps one, so that no draw leaves a wrong masking unseen; the first row of each
    batch hides exactly one (with S = 3 it keeps two), so that no draw makes every softmax one-hot
    (then dQ and dK are 0 whatever scale the backward uses)."""
    S = shape[-1]
    keep = rng.integers(0, S, size=(*shape[:-1], 1))
    hide = (keep + rng.integers(1, S, size=keep.shape)) % S
    mask = rng.random(shape) < 0.4
    np.put_along_axis(mask, hide, True, axis=-1)
    np.put_along_axis(mask, keep, False, axis=-1)
    mask[..., 0, :] = np.arange(S) == hide[..., 0, :]
    return mask


def padding_and_causal_masks(rng: np.random.Generator, N: int, L: int, S: int):
    """key_padding_mask (N, S) from random lengths >= 1 (sequence 0 unpadded), causal attn_mask
    (L, S) hiding future keys. Key 0 is never hidden, so no query row is fully masked."""
    lengths = rng.integers(1, S + 1, size=N)
    lengths[0] = S
    key_padding_mask = np.arange(S)[None, :] >= lengths[:, None]
    attn_mask = np.arange(S)[None, :] > np.arange(L)[:, None]
    return key_padding_mask, attn_mask


def torch_multihead_attention(weights: list[np.ndarray],
                              num_heads: int) -> torch.nn.MultiheadAttention:
    """float64 ``torch.nn.MultiheadAttention(batch_first=True)`` holding ``weights``, given in the
    order of ``MultiHeadAttention.init_weights``: [Wq, bq, Wk, bk, Wv, bv, Wo, bo]."""
    Wq, bq, Wk, bk, Wv, bv, Wo, bo = (torch.from_numpy(np.asarray(w, np.float64)) for w in weights)
    embed_dim = Wq.shape[0]  # pragma: no mutate (equivalent: Wq is square, (E, E))
    reference = torch.nn.MultiheadAttention(embed_dim, num_heads, batch_first=True,
                                            dtype=torch.float64)
    with torch.no_grad():
        reference.in_proj_weight.copy_(torch.cat([Wq, Wk, Wv]))
        reference.in_proj_bias.copy_(torch.cat([bq, bk, bv]))
        reference.out_proj.weight.copy_(Wo)
        reference.out_proj.bias.copy_(bo)
    return reference


def torch_parameter_grads(reference: torch.nn.MultiheadAttention) -> list[np.ndarray]:
    """The module's parameter gradients as [dWq, dbq, dWk, dbk, dWv, dbv, dWo, dbo]."""
    weights = list(reference.in_proj_weight.grad.chunk(3)) + [reference.out_proj.weight.grad]
    biases = list(reference.in_proj_bias.grad.chunk(3)) + [reference.out_proj.bias.grad]
    return [g.numpy() for pair in zip(weights, biases) for g in pair]
