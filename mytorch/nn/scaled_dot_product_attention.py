"""Scaled dot-product attention, softmax(Q K^T / sqrt(E)) V, with a boolean mask."""
import math

import numpy as np

from ._checks import check_attention_inputs, check_backward
from .activation import Softmax


class ScaledDotProductAttention:
    """Attention of L queries over S keys, batched over any leading dimensions.

    Shapes: Q (N, ..., H, L, E), K (N, ..., H, S, E), V (N, ..., H, S, Ev), output
    (N, ..., H, L, Ev). Q, K and V share their leading dimensions (N, ..., H); any number of them
    works, none included. The optional boolean ``mask`` broadcasts against the scores
    (N, ..., H, L, S), e.g. (L, S), (N, 1, 1, S) or (N, H, L, S); True means "do not attend".
    Masked scores get ``-self.eps``, so their softmax weight is exactly 0. Rows whose keys are
    all masked: see "Masking" in the README's mytorch section.
    """

    def __init__(self):
        self.eps = 1e30  # added as -eps to masked scores: exp(-1e30 - max) is exactly 0
        self.softmax = Softmax(dim=-1)
        # Inputs and softmax output of the last forward call, kept for backward.
        self.Q = None
        self.K = None
        self.V = None
        self.mask = None
        self.attention_weights = None
        self.output_shape = None  # None until forward runs

    def forward(self, Q: np.ndarray, K: np.ndarray, V: np.ndarray,
                mask: np.ndarray | None = None) -> np.ndarray:
        """Return softmax(Q K^T / sqrt(E) - eps * mask) V, shape (N, ..., H, L, Ev).

        Steps, with shapes:
          1. scores = Q K^T / sqrt(E): (N, ..., H, L, S). ``np.swapaxes(K, -1, -2)`` transposes
             the last two dims and ``@`` multiplies the matrices of every batch position at once.
          2. where mask is True, add -self.eps to the scores.
          3. attention_weights = self.softmax.forward(scores) along S; store them in
             ``self.attention_weights`` (``backward`` needs them).
          4. output = attention_weights V: (N, ..., H, L, Ev).
        The inputs are already stored in ``self.Q``, ``self.K``, ``self.V``, ``self.mask``.

        Keep the inputs' dtype: float32 in, float32 out. Python floats (``self.eps``,
        ``math.sqrt(E)``) do not promote a float32 array; numpy float64 scalars (``np.sqrt(E)``)
        and float64 arrays (``self.eps * mask``) do. ``np.where(mask, scores - self.eps, scores)``
        is one dtype-safe way to mask.
        """
        Q, K, V = np.asarray(Q), np.asarray(K), np.asarray(V)
        mask = check_attention_inputs(Q, K, V, mask)
        self.Q, self.K, self.V, self.mask = Q, K, V, mask
        self.output_shape = (*Q.shape[:-1], V.shape[-1])
        # TODO: softmax(Q K^T / sqrt(E) - eps * mask) V: (N, ..., H, L, Ev); keep attention_weights
        # BEGIN SOLUTION
        scores = Q @ np.swapaxes(K, -1, -2)
        scores *= 1.0 / math.sqrt(Q.shape[-1])  # a Python float keeps float32 float32
        if mask is not None:
            np.subtract(scores, self.eps, out=scores, where=mask)
        self.attention_weights = self.softmax.forward(scores)
        return self.attention_weights @ V
        # END SOLUTION

    def backward(self, dLdZ: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Return (dLdQ, dLdK, dLdV), shaped like Q, K, V, from dLdZ (N, ..., H, L, Ev).

        With P the stored attention weights, S the scores and scale = 1 / sqrt(E):
          dLdV = P^T dLdZ                          (N, ..., H, S, Ev)
          dLdP = dLdZ V^T                          (N, ..., H, L, S)
          dLdS = self.softmax.backward(dLdP), then 0 where the mask is True (masked scores are
                 the constant -eps, so Q and K cannot move them)
          dLdQ = scale * dLdS K                    (N, ..., H, L, E)
          dLdK = scale * dLdS^T Q                  (N, ..., H, S, E)
        """
        dLdZ = np.asarray(dLdZ)
        check_backward("ScaledDotProductAttention", "dLdZ", dLdZ, self.output_shape)
        # TODO: (dLdQ, dLdK, dLdV) shaped like (Q, K, V); dLdS via self.softmax, 0 where masked
        # BEGIN SOLUTION
        scale = 1.0 / math.sqrt(self.Q.shape[-1])
        dLdV = np.swapaxes(self.attention_weights, -1, -2) @ dLdZ
        dLdS = self.softmax.backward(dLdZ @ np.swapaxes(self.V, -1, -2))
        if self.mask is not None:
            np.copyto(dLdS, 0, where=self.mask)
        dLdQ = dLdS @ self.K
        dLdQ *= scale
        dLdK = np.swapaxes(dLdS, -1, -2) @ self.Q
        dLdK *= scale
        return dLdQ, dLdK, dLdV
        # END SOLUTION
