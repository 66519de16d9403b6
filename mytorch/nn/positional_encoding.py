"""Fixed sinusoidal positional encoding, the numpy twin of hw4lib's PositionalEncoding."""
import math

import numpy as np


class PositionalEncoding:
    """Adds the sin/cos code of each position to a batch of embeddings (N, T, d_model).

    ``pe`` (1, max_len, d_model) holds P[t, 2i] = sin(t w_i) and P[t, 2i + 1] = cos(t w_i) with
    w_i = 10000^(-2i / d_model), in float64; a model loading a trained state dict overwrites it with
    the saved table (torch builds it in float32). It has no parameters, so backward passes the
    gradient through unchanged.
    """

    def __init__(self, d_model: int, max_len: int):
        if d_model <= 0 or max_len <= 0:
            raise ValueError(f"PositionalEncoding: d_model and max_len must be positive, got "
                             f"d_model={d_model}, max_len={max_len}")
        self.d_model = d_model
        self.max_len = max_len
        self.pe = self.create_pe_table(d_model, max_len)

    @staticmethod
    def create_pe_table(d_model: int, max_len: int) -> np.ndarray:
        """Return the (1, max_len, d_model) float64 table described in the class docstring.

        Hint: positions (max_len, 1) times frequencies (ceil(d_model / 2),) by broadcasting gives
        every angle; an odd d_model has one more sine column than cosine columns.
        """
        # TODO: (1, max_len, d_model): sines in the even columns, cosines in the odd columns
        # BEGIN SOLUTION
        positions = np.arange(max_len, dtype=np.float64)[:, None]
        frequencies = np.exp(np.arange(0, d_model, 2) * (-math.log(10000.0) / d_model))
        angles = positions * frequencies
        table = np.zeros((max_len, d_model))
        table[:, 0::2] = np.sin(angles)
        table[:, 1::2] = np.cos(angles[:, : d_model // 2])
        return table[None]
        # END SOLUTION

    def forward(self, x: np.ndarray) -> np.ndarray:
        """Return x + P[:, :T] for x (N, T, d_model), T <= max_len, in x's dtype."""
        x = np.asarray(x)
        if x.ndim != 3 or x.shape[-1] != self.d_model:
            raise ValueError(f"PositionalEncoding: expected x of shape (N, T, d_model="
                             f"{self.d_model}), got {x.shape}")
        if x.shape[1] > self.max_len:
            raise ValueError(f"PositionalEncoding: sequence length T={x.shape[1]} exceeds "
                             f"max_len={self.max_len}")
        return x + self.pe[:, : x.shape[1]].astype(x.dtype, copy=False)

    def backward(self, dLdZ: np.ndarray) -> np.ndarray:
        """The table is a constant: dLdx = dLdZ."""
        return np.asarray(dLdZ)
