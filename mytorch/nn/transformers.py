"""The whole decoder-only Transformer language model in numpy, the twin of hw4lib's.

    tokens (N, T) -> target_embedding -> positional_encoding -> dropout
                  -> dec_layers[0] ... dec_layers[num_layers-1]   (causal self-attention + FFN)
                  -> norm -> final_linear -> logits (N, T, num_classes)

``load_state_dict`` takes the ``state_dict()`` of ``hw4lib.model.DecoderOnlyTransformer`` (as numpy
arrays), so weights trained with PyTorch run here unchanged; ``gradients()`` returns the gradients
under the same names, one per torch parameter, so they compare one to one with autograd's (both
given, in ``_state_dict.py``).
"""
import numpy as np

from ._state_dict import TorchStateDict
from .decoder_layers import SelfAttentionDecoderLayer
from .dropout import Dropout
from .embedding import Embedding
from .layer_norm import LayerNorm
from .linear import Linear
from .positional_encoding import PositionalEncoding


class DecoderOnlyTransformer(TorchStateDict):
    """Causal Transformer language model over ``num_classes`` tokens, forward and backward in numpy.

    Args: as hw4lib's model (its ``dropout`` comes last here, default 0, and there is no layer
    drop), plus ``seed`` for the dropout masks and ``dtype`` of the parameters (float64 for
    gradient checks, float32 to run trained weights as fast as torch's CPU float32).

    Members (the torch names): ``dec_layers`` (list of SelfAttentionDecoderLayer),
    ``target_embedding`` (Embedding), ``positional_encoding``, ``dropout``, ``norm`` (LayerNorm),
    ``final_linear`` (Linear). With ``weight_tying`` the embedding and the output projection hold
    the very same (num_classes, d_model) array, and its gradient sums both uses.

    Parameters start at zero (LayerNorm scales at one): load trained or random weights with
    ``load_state_dict``. Each torch parameter is one array here, updated in place by an optimizer;
    a MultiHeadAttention's q/k/v projections hold views of the rows of ``in_proj_weight``.
    """

    def __init__(self, num_layers: int, d_model: int, num_heads: int, d_ff: int, max_len: int,
                 num_classes: int, weight_tying: bool = False, dropout: float = 0.0, seed: int = 0,
                 dtype=np.float64):
        rng = np.random.default_rng(seed)
        self.num_layers, self.max_len, self.num_classes = num_layers, max_len, num_classes
        self.weight_tying = weight_tying
        self.dtype = np.dtype(dtype)
        self.dec_layers = [SelfAttentionDecoderLayer(d_model, num_heads, d_ff, dropout, rng)
                           for _ in range(num_layers)]
        self.target_embedding = Embedding(num_classes, d_model)
        self.positional_encoding = PositionalEncoding(d_model, max_len)
        self.dropout = Dropout(dropout, rng)
        self.norm = LayerNorm(d_model)
        self.final_linear = Linear(d_model, num_classes)
        self.training = True
        self._bind_parameters()

    def train(self, mode: bool = True) -> "DecoderOnlyTransformer":
        """Training mode (dropout on) or, with mode False, evaluation mode (dropout off)."""
        self.training = mode
        dropouts = [self.dropout]
        for layer in self.dec_layers:
            dropouts += [layer.self_attn.dropout, layer.ffn.dropout, layer.ffn.ffn[2]]
        for dropout in dropouts:
            dropout.training = mode
        return self

    def eval(self) -> "DecoderOnlyTransformer":
        return self.train(False)

    # ------------------------------------------------------------------ forward and backward

    def _check_inputs(self, tokens: np.ndarray, lengths: np.ndarray | None) -> None:
        if tokens.ndim != 2 or not np.issubdtype(tokens.dtype, np.integer):
            raise ValueError(f"DecoderOnlyTransformer: tokens must be an (N, T) integer array, got "
                             f"shape {tokens.shape} and dtype {tokens.dtype}")
        if tokens.shape[1] > self.max_len:
            raise ValueError(f"DecoderOnlyTransformer: sequence length T={tokens.shape[1]} exceeds "
                             f"max_len={self.max_len}")
        if lengths is not None and lengths.shape != tokens.shape[:1]:
            raise ValueError(f"DecoderOnlyTransformer: lengths must have shape (N,) = "
                             f"({tokens.shape[0]},), got {lengths.shape}")

    def forward(self, tokens: np.ndarray, lengths: np.ndarray | None = None) -> np.ndarray:
        """Next-token logits (N, T, num_classes) for tokens (N, T) int, T <= max_len.

        With ``lengths`` (N,), position t of row n is padding when t >= lengths[n], and padded
        keys are masked (key_padding_mask (N, T), True at padding); the causal mask (T, T), True
        above the diagonal, is always used. Then follow the module docstring's order.
        """
        tokens = np.asarray(tokens)
        lengths = None if lengths is None else np.asarray(lengths)
        self._check_inputs(tokens, lengths)
        # TODO: the two masks; embedding -> positional encoding -> dropout -> every layer (with
        #       both masks) -> norm -> final_linear: (N, T) -> (N, T, num_classes)
        # BEGIN SOLUTION
        T = tokens.shape[1]
        positions = np.arange(T)
        padding = None if lengths is None else positions[None, :] >= lengths[:, None]
        causal = positions[None, :] > positions[:, None]
        x = self.dropout.forward(self.positional_encoding.forward(self.target_embedding.forward(tokens)))
        for layer in self.dec_layers:
            x = layer.forward(x, key_padding_mask=padding, attn_mask=causal)
        return self.final_linear.forward(self.norm.forward(x))
        # END SOLUTION

    def backward(self, dLdlogits: np.ndarray) -> None:
        """Back-propagate dLoss/dlogits (N, T, num_classes) through every layer, in reverse order.

        Afterwards every layer holds its gradients; ``gradients()`` collects them by torch name.
        """
        # TODO: back through final_linear, norm, the layers in reverse, dropout, positional
        #       encoding and the embedding (which stores dLdW)
        # BEGIN SOLUTION
        d = self.norm.backward(self.final_linear.backward(dLdlogits))
        for layer in reversed(self.dec_layers):
            d = layer.backward(d)
        self.target_embedding.backward(self.positional_encoding.backward(self.dropout.backward(d)))
        # END SOLUTION

    def score(self, tokens: np.ndarray) -> np.ndarray:
        """Logits (N, num_classes) of the token after each of the unpadded prompts (N, T)."""
        return self.forward(tokens)[:, -1, :]
