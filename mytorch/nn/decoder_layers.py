"""One layer of the decoder-only Transformer, the numpy twin of hw4lib's SelfAttentionDecoderLayer."""
import numpy as np

from .sublayers import FeedForwardLayer, SelfAttentionLayer


class SelfAttentionDecoderLayer:
    """One decoder layer: ``self_attn`` (SelfAttentionLayer) then ``ffn`` (FeedForwardLayer)."""

    def __init__(self, d_model: int, num_heads: int, d_ff: int, dropout: float = 0.0,
                 rng: np.random.Generator | None = None):
        self.self_attn = SelfAttentionLayer(d_model, num_heads, dropout, rng)
        self.ffn = FeedForwardLayer(d_model, d_ff, dropout, rng)

    def forward(self, x: np.ndarray, key_padding_mask: np.ndarray | None = None,
                attn_mask: np.ndarray | None = None) -> np.ndarray:
        """Return ffn(self_attn(x, masks)), (N, T, D)."""
        # TODO: x -> self_attn (with both masks) -> ffn
        # BEGIN SOLUTION
        return self.ffn.forward(self.self_attn.forward(x, key_padding_mask, attn_mask))
        # END SOLUTION

    def backward(self, dLdZ: np.ndarray) -> np.ndarray:
        """Return dLdx (N, T, D): back through ffn, then self_attn."""
        # TODO: back through ffn, then self_attn
        # BEGIN SOLUTION
        return self.self_attn.backward(self.ffn.backward(dLdZ))
        # END SOLUTION
