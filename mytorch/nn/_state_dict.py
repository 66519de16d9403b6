"""The numpy DecoderOnlyTransformer's parameters under the names of hw4lib's torch model (given).

``TorchStateDict`` creates every parameter array in the order of torch's ``state_dict()``, hands
each to the layer that uses it (``init_weights``) and remembers how to read its gradient after
``backward``, so that weights trained with PyTorch load unchanged and gradients compare one to one
with autograd's. Two torch conventions need care: a MultiHeadAttention keeps q, k and v stacked
in ``in_proj_weight`` (3E, E) and ``in_proj_bias`` (3E,), so the three projections hold views of
its rows; with ``weight_tying`` the embedding and the output projection share one
(num_classes, d_model) array, which torch saves under both names and whose gradient sums both uses.
"""
from typing import Callable

import numpy as np

GradientReader = Callable[[], np.ndarray]


class TorchStateDict:
    """Mixin of ``DecoderOnlyTransformer``: torch names for its arrays.

    The model calls ``_bind_parameters()`` once its layers exist (``dec_layers``,
    ``target_embedding``, ``positional_encoding``, ``norm``, ``final_linear``, ``weight_tying`` and
    ``dtype`` set); parameters start at zero, LayerNorm scales at one.
    """

    def _bind_parameters(self) -> None:
        """Create every parameter array in torch's state_dict order and hand it to its layer."""
        # torch parameter name -> (the array the layers use, reader of its gradient after backward)
        self._parameters: dict[str, tuple[np.ndarray, GradientReader]] = {}
        self._state_keys: list[str] = []  # every key of torch's state_dict(), in torch's order
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

    def _new(self, *shape: int, fill: float = 0.0) -> np.ndarray:
        return np.full(shape, fill, dtype=self.dtype)

    def _register(self, name: str, array: np.ndarray, gradient: GradientReader) -> None:
        self._parameters[name] = (array, gradient)
        self._state_keys.append(name)

    def _bind_weight_and_bias(self, prefix: str, layer, weight: np.ndarray,
                              bias: np.ndarray) -> None:
        """Give a Linear or LayerNorm ``weight`` and ``bias``; register both under ``prefix``."""
        layer.init_weights(weight, bias)
        self._register(prefix + "weight", weight, lambda: layer.dLdW)
        self._register(prefix + "bias", bias, lambda: layer.dLdb)

    def _bind_linear(self, prefix: str, layer) -> None:
        self._bind_weight_and_bias(prefix, layer, self._new(layer.out_features, layer.in_features),
                                   self._new(layer.out_features))

    def _bind_layer_norm(self, prefix: str, layer) -> None:
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
