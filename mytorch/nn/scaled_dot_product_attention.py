"""Scaled dot-product attention, softmax(Q K^T / sqrt(E)) V, with a boolean mask."""
import math

import numpy as np

from .activation import Softmax


class ScaledDotProductAttention:
    """Attention of L queries over S keys, batched over any leading dimensions.

    Shapes: Q (N, ..., H, L, E), K (N, ..., H, S, E), V (N, ..., H, S, Ev), output
    (N, ..., H, L, Ev). Q, K and V share their leading dimensions (N, ..., H); any number of them
    works, none included. The optional boolean ``mask`` broadcasts against the scores
    (N, ..., H, L, S), e.g. (L, S), (N, 1, 1, S) or (N, H, L, S); True means "do not attend".

    Masking: ``-self.eps`` (eps = 1e30) is added to the scores where the mask is True. Against
    scores of any realistic size (below ~1e13 in float64, ~1e22 in float32) the sum rounds to
    exactly -eps, so a masked score is a constant and its softmax weight is exactly 0 as long as
    the row attends to at least one key. A row whose keys are all masked therefore has S equal
    scores: it attends uniformly to all S keys (its output is the mean of V over the keys) and
    everything stays finite. PyTorch returns NaN for such rows.

    Fully masked rows in backward: two conventions pass the tests. Zeroing the score gradient
    wherever the mask is True matches finite differences (the masked scores are the constant
    -eps, so Q and K cannot move them): such a row's gradient reaches V only. Applying the softmax backward as it stands, without the zeroing, gives those rows a
    nonzero dQ and a dK contribution instead. The spec does not single these rows out and the
    two agree everywhere else (elsewhere the weight, hence the gradient, at a masked position is
    already 0), so the tests check these rows' outputs, dV and finiteness, and leave their dQ and
    dK contributions free.
    """

    def __init__(self):
        self.eps = 1e30  # added as -eps to masked scores; see the class docstring
        self.softmax = Softmax(dim=-1)
        # Inputs and softmax output of the last forward call, kept for backward.
        self.Q = None
        self.K = None
        self.V = None
        self.mask = None
        self.attention_weights = None

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
        mask = self._check_inputs(Q, K, V, mask)
        self.Q, self.K, self.V, self.mask = Q, K, V, mask
        # TODO: softmax(Q K^T / sqrt(E) - eps * mask) V: (N, ..., H, L, Ev); keep attention_weights
        # BEGIN SOLUTION
        scores = Q @ np.swapaxes(K, -1, -2)
        scores *= 1.0 / math.sqrt(Q.shape[-1])  # a Python float keeps float32 float32
        if mask is not None:
            np.subtract(scores, self.eps, out=scores, where=mask)
        self.attention_weights = self.softmax.forward(scores)
        return self.attention_weights @ V
        # END SOLUTION

    def backward(self, d_output: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Return (dQ, dK, dV), shaped like Q, K, V, from d_output (N, ..., H, L, Ev).

        With P the stored attention weights and scale = 1 / sqrt(E):
          dV = P^T d_output                        (N, ..., H, S, Ev)
          dP = d_output V^T                        (N, ..., H, L, S)
          dscores = self.softmax.backward(dP), then 0 where the mask is True (masked scores are
                    the constant -eps; this only changes fully masked rows, since P is already 0
                    at masked positions of any other row, and the tests accept it either way)
          dQ = scale * dscores K                   (N, ..., H, L, E)
          dK = scale * dscores^T Q                 (N, ..., H, S, E)
        """
        if self.Q is None:
            raise RuntimeError("ScaledDotProductAttention.backward called before forward: "
                               "call forward first")
        d_output = np.asarray(d_output)
        expected = (*self.Q.shape[:-1], self.V.shape[-1])
        if d_output.shape != expected:
            raise ValueError(f"ScaledDotProductAttention.backward: d_output must have the "
                             f"output's shape (N, ..., H, L, Ev) = {expected}, "
                             f"got {d_output.shape}")
        # TODO: (dQ, dK, dV) shaped like (Q, K, V); d_scores via self.softmax, 0 where masked
        # BEGIN SOLUTION
        scale = 1.0 / math.sqrt(self.Q.shape[-1])
        dV = np.swapaxes(self.attention_weights, -1, -2) @ d_output
        d_scores = self.softmax.backward(d_output @ np.swapaxes(self.V, -1, -2))
        if self.mask is not None:
            np.copyto(d_scores, 0, where=self.mask)
        dQ = d_scores @ self.K
        dQ *= scale
        dK = np.swapaxes(d_scores, -1, -2) @ self.Q
        dK *= scale
        return dQ, dK, dV
        # END SOLUTION

    @staticmethod
    def _check_inputs(Q: np.ndarray, K: np.ndarray, V: np.ndarray,
                      mask: np.ndarray | None) -> np.ndarray | None:
        """Raise ValueError naming expected and actual shapes; return the mask as an array."""
        for name, x in (("Q", Q), ("K", K), ("V", V)):
            if x.ndim < 2:
                raise ValueError(f"ScaledDotProductAttention: {name} must have shape "
                                 f"(N, ..., H, length, dim), got {x.shape}")
        if K.shape[-1] != Q.shape[-1]:
            raise ValueError(f"ScaledDotProductAttention: Q (N, ..., H, L, E) and "
                             f"K (N, ..., H, S, E) must share E, got Q {Q.shape} and K {K.shape}")
        if V.shape[-2] != K.shape[-2]:
            raise ValueError(f"ScaledDotProductAttention: K (N, ..., H, S, E) and "
                             f"V (N, ..., H, S, Ev) must share S, got K {K.shape} and V {V.shape}")
        if not Q.shape[:-2] == K.shape[:-2] == V.shape[:-2]:
            raise ValueError(f"ScaledDotProductAttention: Q, K and V must share their leading dims "
                             f"(N, ..., H), got Q {Q.shape}, K {K.shape}, V {V.shape}")
        if mask is None:
            return None
        mask = np.asarray(mask)
        if mask.dtype != np.bool_:
            raise ValueError(f"ScaledDotProductAttention: mask must be boolean (True = do not "
                             f"attend), got dtype {mask.dtype}")
        scores_shape = (*Q.shape[:-1], K.shape[-2])
        try:
            broadcastable = np.broadcast_shapes(mask.shape, scores_shape) == scores_shape
        except ValueError:
            broadcastable = False
        if not broadcastable:
            raise ValueError(f"ScaledDotProductAttention: mask must broadcast to the scores' shape "
                             f"(N, ..., H, L, S) = {scores_shape}, got {mask.shape}")
        return mask
