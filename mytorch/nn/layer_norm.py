"""Layer normalisation over the last dimension, with a learned scale and shift."""
import numpy as np

from ._checks import check_backward


class LayerNorm:
    """Z = (A - mean) / sqrt(var + eps) * W + b, statistics over the last dimension of A.

    Like ``torch.nn.LayerNorm(normalized_shape)`` for an int ``normalized_shape`` = D: the variance
    is the biased one (divided by D), ``eps`` = 1e-5, ``W`` (torch's ``weight``) starts at ones and
    ``b`` (torch's ``bias``) at zeros, both of shape (D,). A is (*, D) with any number of batch
    dimensions. After ``backward`` the layer holds ``dLdW`` and ``dLdb`` (D,), summed over the batch.
    """

    def __init__(self, normalized_shape: int, eps: float = 1e-5):
        self.normalized_shape = normalized_shape
        self.eps = eps
        self.W = np.ones(normalized_shape)
        self.b = np.zeros(normalized_shape)
        self.dLdW = None
        self.dLdb = None
        # Kept by forward for backward: the normalised input and 1 / sqrt(var + eps).
        self.A_hat = None
        self.inv_std = None

    def init_weights(self, W: np.ndarray, b: np.ndarray) -> None:
        """Load the scale W (D,) and the shift b (D,)."""
        W, b = np.asarray(W), np.asarray(b)
        for name, x in (("W", W), ("b", b)):
            if x.shape != (self.normalized_shape,):
                raise ValueError(f"LayerNorm.init_weights: {name} must have shape "
                                 f"({self.normalized_shape},), got {x.shape}")
        self.W, self.b = W, b

    def forward(self, A: np.ndarray) -> np.ndarray:
        """Normalise A (*, D) over its last dimension, then scale and shift: (*, D).

        Store ``self.A_hat`` = (A - mean) * inv_std and ``self.inv_std`` = 1 / sqrt(var + eps)
        (shape (*, 1)) for ``backward``. var is the mean of (A - mean)^2 (no Bessel correction).
        """
        A = np.asarray(A)
        if A.ndim == 0 or A.shape[-1] != self.normalized_shape:
            raise ValueError(f"LayerNorm.forward: expected input of shape (*, "
                             f"{self.normalized_shape}), got {A.shape}")
        # TODO: A_hat = (A - mean) / sqrt(var + eps) over the last dim; return A_hat * W + b
        # BEGIN SOLUTION
        centered = A - A.mean(axis=-1, keepdims=True)
        variance = np.mean(centered * centered, axis=-1, keepdims=True)
        self.inv_std = 1.0 / np.sqrt(variance + self.eps)
        self.A_hat = centered * self.inv_std
        return self.A_hat * self.W + self.b
        # END SOLUTION

    def backward(self, dLdZ: np.ndarray) -> np.ndarray:
        """Return dLdA (*, D) from dLdZ (*, D); store dLdW and dLdb (D,).

        With g = dLdZ * W (the gradient reaching A_hat), each row's mean and variance depend on
        every entry of the row, which gives
            dLdA = inv_std * (g - mean(g) - A_hat * mean(g * A_hat)),  means over the last dim,
            dLdW = sum over the batch of dLdZ * A_hat,    dLdb = sum over the batch of dLdZ.
        """
        dLdZ = np.asarray(dLdZ)
        check_backward("LayerNorm", "dLdZ", dLdZ, None if self.A_hat is None else self.A_hat.shape)
        # TODO: store dLdW, dLdb (D,) summed over the batch; return dLdA (*, D)
        # BEGIN SOLUTION
        rows = dLdZ.reshape(-1, self.normalized_shape)
        self.dLdW = np.vecdot(rows, self.A_hat.reshape(rows.shape), axis=0)
        self.dLdb = rows.sum(axis=0)
        g = dLdZ * self.W
        g_mean = g.mean(axis=-1, keepdims=True)
        g_dot_hat = np.mean(g * self.A_hat, axis=-1, keepdims=True)
        return self.inv_std * (g - g_mean - self.A_hat * g_dot_hat)
        # END SOLUTION
