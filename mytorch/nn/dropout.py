"""Inverted dropout: zero each entry with probability p in training, identity in evaluation."""
import numpy as np


class Dropout:
    """Like ``torch.nn.Dropout(p)``: in training each entry is kept with probability 1 - p and
    scaled by 1 / (1 - p), so the expected output equals the input; in evaluation (``training``
    False) the layer is the identity.

    The mask is drawn from ``rng`` (a ``np.random.Generator``; default ``default_rng(0)``), so a
    seed makes it reproducible. It cannot reproduce torch's own draws: compare against torch with
    p = 0 or in evaluation mode.
    """

    def __init__(self, p: float = 0.5, rng: np.random.Generator | None = None):
        if not 0.0 <= p < 1.0:
            raise ValueError(f"Dropout: p must lie in [0, 1), got {p}")
        self.p = p
        self.rng = np.random.default_rng(0) if rng is None else rng
        self.training = True
        self.mask = None  # scaled keep-mask of the last forward call; None when it was the identity

    def forward(self, A: np.ndarray) -> np.ndarray:
        """Return A with entries zeroed at random and the rest scaled by 1 / (1 - p), same shape
        and dtype; just A when not training or p == 0. Store the scaled mask in ``self.mask``."""
        A = np.asarray(A)
        if not self.training or self.p == 0.0:
            self.mask = None
            return A
        # TODO: self.mask = (uniform draws >= p) / (1 - p) in A's dtype; return A * self.mask
        # BEGIN SOLUTION
        keep = self.rng.random(A.shape) >= self.p
        self.mask = keep.astype(A.dtype) / A.dtype.type(1.0 - self.p)
        return A * self.mask
        # END SOLUTION

    def backward(self, dLdZ: np.ndarray) -> np.ndarray:
        """Return dLdA: dLdZ through the same mask (or unchanged when forward was the identity)."""
        dLdZ = np.asarray(dLdZ)
        if self.mask is None:
            return dLdZ
        # TODO: dLdA = dLdZ * self.mask
        # BEGIN SOLUTION
        return dLdZ * self.mask
        # END SOLUTION
