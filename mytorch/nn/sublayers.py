"""The two pre-norm residual sublayers of a decoder layer, x -> x + Dropout(Sublayer(LayerNorm(x))).

The numpy twins of hw4lib's SelfAttentionLayer and FeedForwardLayer, with the same member names so
the names of a torch state dict map onto them one to one. Shapes: N batch, T length, D = d_model.
"""
import numpy as np

from .dropout import Dropout
from .gelu import GELU
from .layer_norm import LayerNorm
from .linear import Linear
from .multi_head_attention import MultiHeadAttention


class SelfAttentionLayer:
    """Pre-norm multi-head self-attention with a residual connection.

    Members: ``mha`` (MultiHeadAttention), ``norm`` (LayerNorm), ``dropout`` (Dropout on the
    attention output). torch's ``nn.MultiheadAttention`` also drops attention weights in training;
    this twin does not, so with dropout > 0 it matches torch only in evaluation mode.
    """

    def __init__(self, d_model: int, num_heads: int, dropout: float = 0.0,
                 rng: np.random.Generator | None = None):
        self.mha = MultiHeadAttention(d_model, num_heads)
        self.norm = LayerNorm(d_model)
        self.dropout = Dropout(dropout, rng)

    def forward(self, x: np.ndarray, key_padding_mask: np.ndarray | None = None,
                attn_mask: np.ndarray | None = None) -> np.ndarray:
        """Return x + dropout(mha(q=k=v=norm(x), masks)), (N, T, D); masks as in
        MultiHeadAttention (True = ignore)."""
        # TODO: pre-norm, self-attention (the normalised x as query, key and value), dropout,
        #       residual add: (N, T, D) -> (N, T, D)
        # BEGIN SOLUTION
        normed = self.norm.forward(x)
        attended = self.mha.forward(normed, normed, normed, key_padding_mask=key_padding_mask,
                                    attn_mask=attn_mask)
        return x + self.dropout.forward(attended)
        # END SOLUTION

    def backward(self, dLdZ: np.ndarray) -> np.ndarray:
        """Return dLdx (N, T, D). The normalised x fed the query, the key and the value, so its
        gradient is the sum of the three; the residual adds dLdZ itself."""
        # TODO: back through dropout, mha (sum its three input gradients) and norm; add dLdZ
        # BEGIN SOLUTION
        dLdquery, dLdkey, dLdvalue = self.mha.backward(self.dropout.backward(dLdZ))
        return dLdZ + self.norm.backward(dLdquery + dLdkey + dLdvalue)
        # END SOLUTION


class FeedForwardLayer:
    """Pre-norm position-wise feed-forward network with a residual connection.

    Members: ``ffn`` = [Linear(D, d_ff), GELU(), Dropout, Linear(d_ff, D)] (a list indexed like
    torch's ``nn.Sequential``, so ``ffn[3]`` is torch's ``ffn.3``), ``norm`` (LayerNorm),
    ``dropout`` (Dropout on the ffn output).
    """

    def __init__(self, d_model: int, d_ff: int, dropout: float = 0.0,
                 rng: np.random.Generator | None = None):
        self.ffn = [Linear(d_model, d_ff), GELU(), Dropout(dropout, rng), Linear(d_ff, d_model)]
        self.norm = LayerNorm(d_model)
        self.dropout = Dropout(dropout, rng)

    def forward(self, x: np.ndarray) -> np.ndarray:
        """Return x + dropout(ffn(norm(x))), (N, T, D): the ffn layers applied in order."""
        # TODO: pre-norm, the four ffn layers in order, dropout, residual add
        # BEGIN SOLUTION
        h = self.norm.forward(x)
        for layer in self.ffn:
            h = layer.forward(h)
        return x + self.dropout.forward(h)
        # END SOLUTION

    def backward(self, dLdZ: np.ndarray) -> np.ndarray:
        """Return dLdx (N, T, D): back through dropout, the ffn layers in reverse, norm; plus dLdZ."""
        # TODO: back through dropout, the ffn layers in reverse order and norm; add dLdZ
        # BEGIN SOLUTION
        d = self.dropout.backward(dLdZ)
        for layer in reversed(self.ffn):
            d = layer.backward(d)
        return dLdZ + self.norm.backward(d)
        # END SOLUTION
