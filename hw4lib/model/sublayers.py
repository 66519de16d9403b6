"""The two pre-norm residual sublayers of a Transformer decoder layer.

Pre-norm (as in GPT-2): each sublayer normalises its input, transforms it, and adds the result
back onto the unnormalised input,

    x -> x + Dropout(Sublayer(LayerNorm(x))),

so the residual stream is a plain sum that gradients flow through unchanged.
Shapes: N batch, T sequence length, D = d_model.
"""
from typing import Optional

import torch
from torch import nn

from ._checks import check_heads


class SelfAttentionLayer(nn.Module):
    """Pre-norm multi-head self-attention with a residual connection.

    Members (the tests and the notebook use these names):
        mha:     ``nn.MultiheadAttention(d_model, num_heads, dropout=dropout, batch_first=True)``
        norm:    ``nn.LayerNorm(d_model)``
        dropout: ``nn.Dropout(dropout)``, applied to the attention output before the residual add
    """

    def __init__(self, d_model: int, num_heads: int, dropout: float = 0.0):
        super().__init__()
        check_heads(d_model, num_heads)
        # TODO: create self.mha (batch_first=True, dropout=dropout), self.norm and self.dropout
        # BEGIN SOLUTION
        self.mha = nn.MultiheadAttention(d_model, num_heads, dropout=dropout, batch_first=True)
        self.norm = nn.LayerNorm(d_model)
        self.dropout = nn.Dropout(dropout)
        # END SOLUTION

    def forward(
        self,
        x: torch.Tensor,
        key_padding_mask: Optional[torch.Tensor] = None,
        attn_mask: Optional[torch.Tensor] = None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Attend from every position to the allowed positions and add the result to x.

        Args:
            x: (N, T, D) input.
            key_padding_mask: optional (N, T) bool, True at padded keys (never attended to).
            attn_mask: optional (T, T) bool, True where query i may not attend to key j
                (the causal mask).

        Returns:
            x: (N, T, D), ``x + dropout(mha(q=k=v=norm(x)))``.
            attn_weights: (N, T, T) attention probabilities averaged over the heads; each row
                sums to 1 and is 0 at masked keys.

        Hint: pass the normalised tensor as query, key AND value (the same object: that lets
        ``nn.MultiheadAttention`` use its fused kernel at inference), and ask for the weights with
        ``need_weights=True, average_attn_weights=True``.
        """
        # TODO: pre-norm, self-attention with both masks, dropout, residual add; (N, T, D) -> (N, T, D)
        # BEGIN SOLUTION
        normed = self.norm(x)
        attended, attn_weights = self.mha(
            normed, normed, normed,
            key_padding_mask=key_padding_mask,
            attn_mask=attn_mask,
            need_weights=True,
            average_attn_weights=True,
        )
        x = x + self.dropout(attended)
        # END SOLUTION
        return x, attn_weights


class FeedForwardLayer(nn.Module):
    """Pre-norm position-wise feed-forward network with a residual connection.

    Members (the tests use these names and this exact layout):
        ffn:     ``nn.Sequential(nn.Linear(d_model, d_ff), nn.GELU(), nn.Dropout(dropout),
                 nn.Linear(d_ff, d_model))``: expand, non-linearity, regularise, project back
        norm:    ``nn.LayerNorm(d_model)``
        dropout: ``nn.Dropout(dropout)``, applied to the ffn output before the residual add
    """

    def __init__(self, d_model: int, d_ff: int, dropout: float = 0.0):
        super().__init__()
        # TODO: create self.ffn (Linear, GELU, Dropout, Linear), self.norm and self.dropout
        # BEGIN SOLUTION
        self.ffn = nn.Sequential(
            nn.Linear(d_model, d_ff),
            nn.GELU(),
            nn.Dropout(dropout),
            nn.Linear(d_ff, d_model),
        )
        self.norm = nn.LayerNorm(d_model)
        self.dropout = nn.Dropout(dropout)
        # END SOLUTION

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Transform every position independently and add the result to x.

        Args:
            x: (N, T, D) input.

        Returns:
            (N, T, D) tensor ``x + dropout(ffn(norm(x)))``.
        """
        # TODO: pre-norm, feed-forward network, dropout, residual add; (N, T, D) -> (N, T, D)
        # BEGIN SOLUTION
        return x + self.dropout(self.ffn(self.norm(x)))
        # END SOLUTION
