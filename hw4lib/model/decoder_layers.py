"""One layer of a decoder-only (GPT-style) Transformer."""
from typing import Optional

import torch
from torch import nn

from .sublayers import FeedForwardLayer, SelfAttentionLayer


class SelfAttentionDecoderLayer(nn.Module):
    """Masked self-attention sublayer followed by a feed-forward sublayer, both pre-norm residual.

    Members (the tests use these names):
        self_attn: ``SelfAttentionLayer(d_model, num_heads, dropout)``
        ffn:       ``FeedForwardLayer(d_model, d_ff, dropout)``
    """

    def __init__(self, d_model: int, num_heads: int, d_ff: int, dropout: float = 0.1):
        super().__init__()
        # TODO: create self.self_attn and self.ffn, passing dropout to both
        # BEGIN SOLUTION
        self.self_attn = SelfAttentionLayer(d_model, num_heads, dropout)
        self.ffn = FeedForwardLayer(d_model, d_ff, dropout)
        # END SOLUTION

    def forward(
        self,
        x: torch.Tensor,
        key_padding_mask: Optional[torch.Tensor] = None,
        attn_mask: Optional[torch.Tensor] = None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Run the two sublayers in order.

        Args:
            x: (N, T, D) input.
            key_padding_mask: optional (N, T) bool, True at padding.
            attn_mask: optional (T, T) bool, True where attention is forbidden (causal mask).

        Returns:
            x: (N, T, D) output of the feed-forward sublayer.
            attn_weights: (N, T, T) head-averaged weights of the self-attention sublayer.
        """
        # TODO: x -> self_attn (with both masks) -> ffn; return (x, attn_weights)
        # BEGIN SOLUTION
        x, attn_weights = self.self_attn(x, key_padding_mask=key_padding_mask, attn_mask=attn_mask)
        x = self.ffn(x)
        # END SOLUTION
        return x, attn_weights
