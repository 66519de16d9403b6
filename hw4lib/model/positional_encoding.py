"""Fixed sinusoidal positional encoding (Vaswani et al., 2017, section 3.5)."""
import math

import torch
from torch import nn

from ._checks import check_embeddings


class PositionalEncoding(nn.Module):
    """Add a fixed sin/cos code of each position to a batch of embeddings.

    The table P has one row per position t < max_len and one column per feature:

        P[t, 2i]     = sin(t / 10000^(2i / d_model))
        P[t, 2i + 1] = cos(t / 10000^(2i / d_model))

    so each pair of columns is a sinusoid whose wavelength grows geometrically from 2*pi to
    10000 * 2*pi. It is stored as the buffer ``pe`` of shape (1, max_len, d_model): a buffer moves
    with ``.to(device)`` but is not a learnable parameter.

    Args:
        d_model: embedding size D (an odd D is allowed: the last column is then a sine).
        max_len: the longest sequence the module accepts.
    """

    def __init__(self, d_model: int, max_len: int):
        super().__init__()
        if d_model <= 0 or max_len <= 0:
            raise ValueError(f"d_model and max_len must be positive, got d_model={d_model}, max_len={max_len}")
        self.d_model = d_model
        self.max_len = max_len
        # Persistent (saved in state_dict): a handed-in state dict then carries the exact table the
        # model was trained with, and the autograder's strict load_state_dict sees the same keys as
        # the trainer wrote. Its max_len x d_model floats are a small price for that.
        self.register_buffer("pe", self.create_pe_table(d_model, max_len), persistent=True)

    def create_pe_table(self, d_model: int, max_len: int) -> torch.Tensor:
        """Build the sinusoidal table.

        Returns:
            (1, max_len, d_model) float32 tensor P with P[0, t, 2i] = sin(t * w_i) and
            P[0, t, 2i + 1] = cos(t * w_i), where w_i = 10000^(-2i / d_model).

        Hint: build a column of positions (max_len, 1) and a row of frequencies w_i (one per even
        column index 2i), multiply them by broadcasting, then fill the even columns with the sines
        and the odd columns with the cosines. Computing w_i as exp(-(2i) * ln(10000) / d_model)
        avoids raising 10000 to large powers.
        """
        # TODO: return the (1, max_len, d_model) table of sin (even columns) and cos (odd columns)
        # BEGIN SOLUTION
        positions = torch.arange(max_len, dtype=torch.float32).unsqueeze(1)
        even_columns = torch.arange(0, d_model, 2, dtype=torch.float32)
        frequencies = torch.exp(-even_columns * (math.log(10000.0) / d_model))
        angles = positions * frequencies  # (max_len, ceil(d_model / 2))
        table = torch.zeros(max_len, d_model)
        table[:, 0::2] = torch.sin(angles)
        table[:, 1::2] = torch.cos(angles[:, : d_model // 2])
        return table.unsqueeze(0)
        # END SOLUTION

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Add the codes of positions 0..T-1 to the embeddings.

        Args:
            x: (N, T, d_model) embeddings with T <= max_len.

        Returns:
            (N, T, d_model) tensor x + P[:, :T]; nothing else changes.
        """
        check_embeddings(x, self.d_model, self.max_len)
        # TODO: add the first T rows of self.pe to x, (N, T, D) + (1, T, D) -> (N, T, D)
        # BEGIN SOLUTION
        return x + self.pe[:, : x.shape[1]]
        # END SOLUTION
