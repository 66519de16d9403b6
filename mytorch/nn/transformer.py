"""The whole decoder-only Transformer language model in numpy, the twin of hw4lib's.

    tokens (N, T) -> target_embedding -> positional_encoding -> dropout
                  -> dec_layers[0] ... dec_layers[num_layers-1]   (causal self-attention + FFN)
                  -> norm -> final_linear -> logits (N, T, num_classes)

``load_state_dict`` takes the ``state_dict()`` of ``hw4lib.model.DecoderOnlyTransformer`` (as numpy
arrays), so weights trained with PyTorch run here unchanged; ``gradients()`` returns the gradients
under the same names, one per torch parameter, so they compare one to one with autograd's.
"""
from typing import Callable

import numpy as np

from .decoder_layers import SelfAttentionDecoderLayer
from .dropout import Dropout
from .embedding import Embedding
from .layer_norm import LayerNorm
from .linear import Linear
from .positional_encoding import PositionalEncoding

GradientReader = Callable[[], np.ndarray]


class DecoderOnlyTransformer:
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
        # torch parameter name -> (the array the layers use, reader of its gradient after backward)
        self._parameters: dict[str, tuple[np.ndarray, GradientReader]] = {}
        self._state_keys: list[str] = []  # every key of torch's state_dict(), in torch's order
        self._bind_parameters()

    # ------------------------------------------------------------------ parameters and state

    def _new(self, *shape: int, fill: float = 0.0) -> np.ndarray:
        return np.full(shape, fill, dtype=self.dtype)

    def _register(self, name: str, array: np.ndarray, gradient: GradientReader) -> None:
        self._parameters[name] = (array, gradient)
        self._state_keys.append(name)

    def _bind_weight_and_bias(self, prefix: str, layer, weight: np.ndarray, bias: np.ndarray) -> None:
        """Give a Linear or LayerNorm ``weight`` and ``bias``; register both under ``prefix``."""
        layer.init_weights(weight, bias)
        self._register(prefix + "weight", weight, lambda: layer.dLdW)
        self._register(prefix + "bias", bias, lambda: layer.dLdb)

    def _bind_linear(self, prefix: str, layer: Linear) -> None:
        self._bind_weight_and_bias(prefix, layer, self._new(layer.out_features, layer.in_features),
                                   self._new(layer.out_features))

    def _bind_layer_norm(self, prefix: str, layer: LayerNorm) -> None:
        D = layer.normalized_shape
        self._bind_weight_and_bias(prefix, layer, self._new(D, fill=1.0), self._new(D))

    def _bind_attention(self, prefix: str, mha) -> None:
        """torch keeps q, k, v stacked in in_proj_weight (3E, E) and in_proj_bias (3E,)."""
        E = mha.embed_dim
        in_weight, in_bias = self._new(3 * E, E), self._new(3 * E)
        rows = [slice(0, E), slice(E, 2 * E), slice(2 * E, 3 * E)]
        projections = (mha.q_proj, mha.k_proj, mha.v_proj)
        for projection, part in zip(projections, rows):
            projection.init_weights(in_weight[part], in_bias[part])
        self._register(prefix + "in_proj_weight", in_weight,
                       lambda: np.concatenate([p.dLdW for p in projections]))
        self._register(prefix + "in_proj_bias", in_bias,
                       lambda: np.concatenate([p.dLdb for p in projections]))
        self._bind_linear(prefix + "out_proj.", mha.out_proj)

    def _bind_parameters(self) -> None:
        """Create every parameter array in torch's state_dict order and hand it to its layer."""
        for index, layer in enumerate(self.dec_layers):
            prefix = f"dec_layers.{index}."
            self._bind_attention(prefix + "self_attn.mha.", layer.self_attn.mha)
            self._bind_layer_norm(prefix + "self_attn.norm.", layer.self_attn.norm)
            self._bind_linear(prefix + "ffn.ffn.0.", layer.ffn.ffn[0])
            self._bind_linear(prefix + "ffn.ffn.3.", layer.ffn.ffn[3])
            self._bind_layer_norm(prefix + "ffn.norm.", layer.ffn.norm)
        embedding, output = self.target_embedding, self.final_linear
        table = self._new(embedding.num_embeddings, embedding.embedding_dim)
        embedding.init_weights(table)
        if self.weight_tying:
            self._register("target_embedding.weight", table,
                           lambda: embedding.dLdW + output.dLdW)
        else:
            self._register("target_embedding.weight", table, lambda: embedding.dLdW)
        self._state_keys.append("positional_encoding.pe")
        self._bind_layer_norm("norm.", self.norm)
        if self.weight_tying:
            output.init_weights(table, self._new(output.out_features))
            self._state_keys.append("final_linear.weight")  # torch saves the shared matrix twice
            self._register("final_linear.bias", output.b, lambda: output.dLdb)
        else:
            self._bind_linear("final_linear.", output)

    def _state_array(self, name: str) -> np.ndarray:
        if name == "positional_encoding.pe":
            return self.positional_encoding.pe
        if name == "final_linear.weight" and self.weight_tying:
            return self.final_linear.W
        return self._parameters[name][0]

    def state_dict_keys(self) -> list[str]:
        """The keys of the matching torch model's ``state_dict()``, in its order."""
        return list(self._state_keys)

    def load_state_dict(self, state: dict) -> None:
        """Copy ``state`` (torch state_dict names -> arrays) into the model's arrays.

        The keys must be exactly ``state_dict_keys()`` and each array must have the matching shape;
        otherwise a ValueError names the offending keys. Values are cast to the model's dtype.
        """
        expected = self._state_keys
        missing = [key for key in expected if key not in state]
        unexpected = [key for key in state if key not in expected]
        if missing or unexpected:
            raise ValueError(f"DecoderOnlyTransformer.load_state_dict: missing keys {missing}, "
                             f"unexpected keys {unexpected}; was the state dict saved from a model "
                             f"with the same num_layers and weight_tying={self.weight_tying}?")
        values = {key: np.asarray(state[key]) for key in expected}
        for key, value in values.items():
            target = self._state_array(key)
            if value.shape != target.shape:
                raise ValueError(f"DecoderOnlyTransformer.load_state_dict: {key} has shape "
                                 f"{value.shape}, the model expects {target.shape}")
        if self.weight_tying and not np.array_equal(values["final_linear.weight"],
                                                    values["target_embedding.weight"]):
            raise ValueError("DecoderOnlyTransformer.load_state_dict: weight_tying=True but "
                             "final_linear.weight and target_embedding.weight differ: the state "
                             "dict comes from an untied model")
        for key, value in values.items():
            np.copyto(self._state_array(key), value, casting="same_kind")

    def parameters(self) -> dict[str, np.ndarray]:
        """{torch parameter name: array}, one per torch parameter (as ``named_parameters()``);
        the arrays are the model's own, so updating them in place updates the model."""
        return {name: array for name, (array, _) in self._parameters.items()}

    def gradients(self) -> dict[str, np.ndarray]:
        """{torch parameter name: dLoss/dparameter} after ``backward``, keys as ``parameters()``."""
        if self.target_embedding.dLdW is None:
            raise RuntimeError("DecoderOnlyTransformer.gradients called before backward")
        return {name: read() for name, (_, read) in self._parameters.items()}

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
