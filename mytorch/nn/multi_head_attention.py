"""Multi-head attention with PyTorch's interface (batch_first=True) and a hand-written backward."""
import numpy as np

from ._checks import check_backward, check_heads, check_mha_inputs
from .linear import Linear
from .scaled_dot_product_attention import ScaledDotProductAttention


class MultiHeadAttention:
    """Multi-head attention of L queries over S keys, like ``torch.nn.MultiheadAttention``.

    Shapes: query (N, L, E), key (N, S, E), value (N, S, E) -> output (N, L, E), with
    E = embed_dim split into H = num_heads heads of E // H features each; head h uses features
    h * E/H ... (h + 1) * E/H of the projections, as PyTorch does. Masks are boolean with
    True = ignore: ``key_padding_mask`` (N, S) hides padded keys of each sequence and ``attn_mask``
    (L, S) hides keys from particular queries (e.g. a causal mask). Fully masked rows: see
    "Masking" in the README's mytorch section.

    Sub-layers: ``q_proj``, ``k_proj``, ``v_proj``, ``out_proj`` (Linear(E, E)) and ``attention``
    (ScaledDotProductAttention). After ``backward`` every projection holds its ``dLdW``, ``dLdb``.
    """

    def __init__(self, embed_dim: int, num_heads: int):
        check_heads(embed_dim, num_heads)
        self.embed_dim = embed_dim
        self.num_heads = num_heads
        self.head_dim = embed_dim // num_heads
        self.q_proj = Linear(embed_dim, embed_dim)
        self.k_proj = Linear(embed_dim, embed_dim)
        self.v_proj = Linear(embed_dim, embed_dim)
        self.out_proj = Linear(embed_dim, embed_dim)
        self.attention = ScaledDotProductAttention()
        self.output_shape = None  # (N, L, E) of the last forward call; None until forward runs

    def init_weights(self, Wq, bq, Wk, bk, Wv, bv, Wo, bo) -> None:
        """Load the four projections; each W is (E, E) in PyTorch's (out, in) layout, each b (E,).

        From ``torch.nn.MultiheadAttention``: Wq, Wk, Wv = in_proj_weight.chunk(3),
        bq, bk, bv = in_proj_bias.chunk(3), Wo = out_proj.weight, bo = out_proj.bias.
        """
        self.q_proj.init_weights(Wq, bq)
        self.k_proj.init_weights(Wk, bk)
        self.v_proj.init_weights(Wv, bv)
        self.out_proj.init_weights(Wo, bo)

    def forward(self, query: np.ndarray, key: np.ndarray, value: np.ndarray,
                key_padding_mask: np.ndarray | None = None,
                attn_mask: np.ndarray | None = None) -> np.ndarray:
        """Return the attention output (N, L, E).

        Steps, with shapes:
          1. project: q = q_proj(query) (N, L, E), k = k_proj(key) (N, S, E), v = v_proj(value).
          2. split heads: q (N, H, L, E/H), k and v (N, H, S, E/H) with ``_split_heads``.
          3. merge the masks with ``_merge_masks`` into one broadcastable to (N, H, L, S).
          4. attend: o = self.attention.forward(q, k, v, mask), (N, H, L, E/H).
          5. concatenate heads with ``_concat_heads``: (N, L, E); project with out_proj: (N, L, E).
        Every sub-layer keeps what its own backward needs.
        """
        query, key, value = np.asarray(query), np.asarray(key), np.asarray(value)
        key_padding_mask = None if key_padding_mask is None else np.asarray(key_padding_mask)
        attn_mask = None if attn_mask is None else np.asarray(attn_mask)
        check_mha_inputs(self.embed_dim, query, key, value, key_padding_mask, attn_mask)
        self.output_shape = query.shape
        # TODO: project, split heads, merge masks, attend, concat heads, out_proj: (N, L, E)
        # BEGIN SOLUTION
        q = self._split_heads(self.q_proj.forward(query))
        k = self._split_heads(self.k_proj.forward(key))
        v = self._split_heads(self.v_proj.forward(value))
        mask = self._merge_masks(key_padding_mask, attn_mask)
        heads = self.attention.forward(q, k, v, mask)
        return self.out_proj.forward(self._concat_heads(heads))
        # END SOLUTION

    def backward(self, dLdZ: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Return (dLdquery, dLdkey, dLdvalue), shaped like query, key, value, from dLdZ (N, L, E).

        Run forward's steps in reverse: out_proj.backward -> ``_split_heads`` -> attention.backward
        -> ``_concat_heads`` each of dLdq, dLdk, dLdv -> q_proj/k_proj/v_proj.backward.
        """
        dLdZ = np.asarray(dLdZ)
        check_backward("MultiHeadAttention", "dLdZ", dLdZ, self.output_shape)
        # TODO: back through out_proj, heads, attention and the three input projections
        # BEGIN SOLUTION
        dLdheads = self._split_heads(self.out_proj.backward(dLdZ))
        dLdq, dLdk, dLdv = self.attention.backward(dLdheads)
        dLdquery = self.q_proj.backward(self._concat_heads(dLdq))
        dLdkey = self.k_proj.backward(self._concat_heads(dLdk))
        dLdvalue = self.v_proj.backward(self._concat_heads(dLdv))
        return dLdquery, dLdkey, dLdvalue
        # END SOLUTION

    def _split_heads(self, x: np.ndarray) -> np.ndarray:
        """(N, T, E) -> (N, H, T, E/H): head h gets features h * E/H ... (h + 1) * E/H - 1.

        Hint: reshape to (N, T, H, E/H), then swap axes 1 and 2. A view is enough: ``@`` accepts
        non-contiguous batches.
        """
        # TODO: (N, T, E) -> (N, H, T, E/H)
        # BEGIN SOLUTION
        N, T, _ = x.shape
        return x.reshape(N, T, self.num_heads, self.head_dim).transpose(0, 2, 1, 3)
        # END SOLUTION

    def _concat_heads(self, x: np.ndarray) -> np.ndarray:
        """(N, H, T, E/H) -> (N, T, E), the inverse of ``_split_heads``."""
        # TODO: (N, H, T, E/H) -> (N, T, E)
        # BEGIN SOLUTION
        N, _, T, _ = x.shape
        return x.transpose(0, 2, 1, 3).reshape(N, T, self.embed_dim)
        # END SOLUTION

    def _merge_masks(self, key_padding_mask: np.ndarray | None,
                     attn_mask: np.ndarray | None) -> np.ndarray | None:
        """Combine key_padding_mask (N, S) and attn_mask (L, S) into one mask for the scores.

        Returns a boolean mask that broadcasts to (N, H, L, S), True where either mask is True:
        (N, 1, 1, S) from the padding mask alone, (L, S) from the attention mask alone, their
        logical or with shape (N, 1, L, S) when both are given, and None when both are None.
        Broadcasting over H (rather than copying the mask H times) saves memory.
        """
        # TODO: bool mask broadcastable to (N, H, L, S) (or None): key_padding_mask | attn_mask
        # BEGIN SOLUTION
        if key_padding_mask is None:
            return attn_mask
        padding = key_padding_mask[:, None, None, :]
        if attn_mask is None:
            return padding
        return padding | attn_mask
        # END SOLUTION
