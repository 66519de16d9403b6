"""Input checks for the mytorch layers, kept out of the graded files so those read as algorithms.

Each function raises ValueError (or RuntimeError for a backward before forward) with a message
that names the layer, the expected shape and the one it got.
"""
import numpy as np


def check_backward(layer: str, name: str, grad: np.ndarray, output_shape: tuple | None) -> None:
    """Raise unless forward ran (``output_shape`` is not None) and gradient ``name`` has the
    forward output's shape."""
    if output_shape is None:
        raise RuntimeError(f"{layer}.backward called before forward: call forward first")
    if grad.shape != tuple(output_shape):
        raise ValueError(f"{layer}.backward: {name} must have the forward output's shape "
                         f"{tuple(output_shape)}, got {grad.shape}")


def check_linear_weights(W: np.ndarray, b: np.ndarray, in_features: int, out_features: int) -> None:
    """W must be (out_features, in_features) and b (out_features,)."""
    if W.shape != (out_features, in_features):
        raise ValueError(f"Linear.init_weights: W must have shape (out_features, in_features) = "
                         f"{(out_features, in_features)}, got {W.shape}")
    if b.shape != (out_features,):
        raise ValueError(f"Linear.init_weights: b must have shape (out_features,) = "
                         f"{(out_features,)}, got {b.shape}")


def check_linear_input(A: np.ndarray, in_features: int) -> None:
    """A must be (*, in_features)."""
    if A.ndim == 0 or A.shape[-1] != in_features:
        raise ValueError(f"Linear.forward: expected input of shape (*, {in_features}) "
                         f"(last dim = in_features), got {A.shape}")


def check_softmax_dim(dim: int, ndim: int) -> None:
    """``dim`` must index one of the input's ``ndim`` dimensions."""
    if not -ndim <= dim < ndim:
        raise ValueError(f"Softmax(dim={dim}) needs an input with at least "
                         f"{dim + 1 if dim >= 0 else -dim} dims, got {ndim}")


def check_attention_inputs(Q: np.ndarray, K: np.ndarray, V: np.ndarray,
                           mask: np.ndarray | None) -> np.ndarray | None:
    """Q (..., L, E), K (..., S, E), V (..., S, Ev) share their leading dims; the boolean mask
    broadcasts to the scores (..., L, S). Returns the mask as an array (or None)."""
    name = "ScaledDotProductAttention"
    for label, x in (("Q", Q), ("K", K), ("V", V)):
        if x.ndim < 2:
            raise ValueError(f"{name}: {label} must have shape (N, ..., H, length, dim), "
                             f"got {x.shape}")
    if K.shape[-1] != Q.shape[-1]:
        raise ValueError(f"{name}: Q (N, ..., H, L, E) and K (N, ..., H, S, E) must share E, "
                         f"got Q {Q.shape} and K {K.shape}")
    if V.shape[-2] != K.shape[-2]:
        raise ValueError(f"{name}: K (N, ..., H, S, E) and V (N, ..., H, S, Ev) must share S, "
                         f"got K {K.shape} and V {V.shape}")
    if not Q.shape[:-2] == K.shape[:-2] == V.shape[:-2]:
        raise ValueError(f"{name}: Q, K and V must share their leading dims (N, ..., H), "
                         f"got Q {Q.shape}, K {K.shape}, V {V.shape}")
    if mask is None:
        return None
    mask = np.asarray(mask)
    if mask.dtype != np.bool_:
        raise ValueError(f"{name}: mask must be boolean (True = do not attend), "
                         f"got dtype {mask.dtype}")
    scores_shape = (*Q.shape[:-1], K.shape[-2])
    try:
        broadcastable = np.broadcast_shapes(mask.shape, scores_shape) == scores_shape
    except ValueError:
        broadcastable = False
    if not broadcastable:
        raise ValueError(f"{name}: mask must broadcast to the scores' shape (N, ..., H, L, S) = "
                         f"{scores_shape}, got {mask.shape}")
    return mask


def check_heads(embed_dim: int, num_heads: int) -> None:
    """embed_dim must split evenly into num_heads > 0 heads."""
    if num_heads <= 0 or embed_dim % num_heads != 0:
        raise ValueError(f"MultiHeadAttention: embed_dim must be divisible by num_heads, got "
                         f"embed_dim={embed_dim}, num_heads={num_heads}")


def check_mha_inputs(embed_dim: int, query: np.ndarray, key: np.ndarray, value: np.ndarray,
                     key_padding_mask: np.ndarray | None,
                     attn_mask: np.ndarray | None) -> None:
    """query (N, L, E), key and value (N, S, E); key_padding_mask (N, S), attn_mask (L, S), bool."""
    for label, x in (("query", query), ("key", key), ("value", value)):
        if x.ndim != 3 or x.shape[-1] != embed_dim:
            raise ValueError(f"MultiHeadAttention: {label} must have shape (N, length, "
                             f"embed_dim={embed_dim}), got {x.shape}")
    if not query.shape[0] == key.shape[0] == value.shape[0]:
        raise ValueError(f"MultiHeadAttention: query, key and value must share N, got "
                         f"{query.shape}, {key.shape}, {value.shape}")
    if key.shape[1] != value.shape[1]:
        raise ValueError(f"MultiHeadAttention: key (N, S, E) and value (N, S, E) must share S, "
                         f"got {key.shape} and {value.shape}")
    N, L, S = query.shape[0], query.shape[1], key.shape[1]
    for label, mask, expected in (("key_padding_mask", key_padding_mask, (N, S)),
                                  ("attn_mask", attn_mask, (L, S))):
        if mask is None:
            continue
        if mask.shape != expected:
            raise ValueError(f"MultiHeadAttention: {label} must have shape {expected}, "
                             f"got {mask.shape}")
        if mask.dtype != np.bool_:
            raise ValueError(f"MultiHeadAttention: {label} must be boolean (True = ignore), "
                             f"got dtype {mask.dtype}")
