"""A decoder-only (GPT-style) Transformer language model.

    tokens (N, T) -> target_embedding -> positional_encoding -> dropout
                  -> dec_layers[0] ... dec_layers[num_layers-1]   (causal self-attention + FFN)
                  -> norm -> final_linear -> logits (N, T, num_classes)

Logits at position t depend only on tokens 0..t (the causal mask), so one forward pass over a
sequence gives the next-token distribution at every position; training compares them with the
sequence shifted by one.
"""
import math
from typing import Optional

import torch
from torch import nn

from ._checks import check_config, check_tokens
from .decoder_layers import SelfAttentionDecoderLayer
from .masks import CausalMask, PadMask
from .positional_encoding import PositionalEncoding

INIT_STD = 0.02  # GPT-2's initial weight scale, used for every embedding and linear weight


class DecoderOnlyTransformer(nn.Module):
    """Causal Transformer language model over a vocabulary of ``num_classes`` tokens.

    Args:
        num_layers: number of decoder layers.
        d_model: width D of the residual stream; must be divisible by num_heads.
        num_heads: attention heads per layer.
        d_ff: hidden width of each feed-forward network (typically 4 * d_model).
        dropout: dropout rate of the embeddings, attention weights and both residual branches.
        max_len: longest input sequence (size of the positional encoding table).
        num_classes: vocabulary size K.
        weight_tying: share one (K, D) matrix between the token embedding and the output
            projection (Press & Wolf, 2017): fewer parameters, and usually a lower perplexity.
            The shared Parameter is ``final_linear.weight``; ``target_embedding.weight`` is made
            that same object (the embedding's own matrix is dropped), so row k is token k's
            embedding and its output weights at once. It starts N(0, 0.02) (``_init_weights``, as
            the two untied matrices would), and ``final_linear`` keeps its own bias, at 0.
            The state dict still holds both keys, with equal values; ``named_parameters()``
            lists it once, as ``target_embedding.weight`` (the first module holding it), so an
            optimizer rule for ``target_embedding`` (its learning rate, no weight decay) applies
            to the output projection too.
        layer_drop_rate: during training, skip each decoder layer as a whole with this probability
            (LayerDrop, Fan et al., 2019); never in eval mode.

    Members (the tests, the trainer and the notebook use these names):
        dec_layers:          ``nn.ModuleList`` of num_layers ``SelfAttentionDecoderLayer``
        target_embedding:    ``nn.Embedding(num_classes, d_model)``
        positional_encoding: ``PositionalEncoding(d_model, max_len)``
        dropout:             ``nn.Dropout(dropout)``, applied after the positional encoding
        norm:                ``nn.LayerNorm(d_model)``, the final norm the pre-norm layers need
        final_linear:        ``nn.Linear(d_model, num_classes)``
        max_len, num_classes, num_layers, layer_drop_rate: the constructor arguments

    Initialisation (after the members are built; see ``_init_weights``): as GPT-2 and nanoGPT,
    every embedding and linear weight ~ N(0, 0.02), biases 0, LayerNorm at identity; the two
    projections that write into the residual stream (attention output and second FFN linear) use
    std 0.02 / sqrt(2 * num_layers), so the stream's variance does not grow with depth. With
    these scales the initial logits are close to 0 and the initial loss close to ln(num_classes).
    """

    def __init__(self, num_layers: int, d_model: int, num_heads: int, d_ff: int, dropout: float,
                 max_len: int, num_classes: int, weight_tying: bool = False,
                 layer_drop_rate: float = 0.0):
        super().__init__()
        check_config(num_layers, d_model, num_heads, d_ff, dropout, max_len, num_classes,
                     weight_tying, layer_drop_rate)
        self.max_len = max_len
        self.num_classes = num_classes
        self.num_layers = num_layers
        self.layer_drop_rate = layer_drop_rate

        # TODO: create dec_layers, target_embedding, positional_encoding, dropout, norm and
        # final_linear as listed above; with weight_tying, make target_embedding.weight the very
        # same Parameter as final_linear.weight (both are (num_classes, d_model))
        # BEGIN SOLUTION
        self.dec_layers = nn.ModuleList(
            [SelfAttentionDecoderLayer(d_model, num_heads, d_ff, dropout) for _ in range(num_layers)]
        )
        self.target_embedding = nn.Embedding(num_classes, d_model)
        self.positional_encoding = PositionalEncoding(d_model, max_len)
        self.dropout = nn.Dropout(dropout)
        self.norm = nn.LayerNorm(d_model)
        self.final_linear = nn.Linear(d_model, num_classes)
        if weight_tying:
            self.target_embedding.weight = self.final_linear.weight
        # END SOLUTION
        self._init_weights()

    def _init_weights(self) -> None:
        """GPT-2 initialisation (see the class docstring)."""
        for module in self.modules():
            if isinstance(module, (nn.Linear, nn.Embedding)):
                nn.init.normal_(module.weight, mean=0.0, std=INIT_STD)
            if isinstance(module, nn.Linear) and module.bias is not None:
                nn.init.zeros_(module.bias)
            if isinstance(module, nn.MultiheadAttention):
                # Its fused q/k/v projection is a bare Parameter, not an nn.Linear.
                nn.init.normal_(module.in_proj_weight, mean=0.0, std=INIT_STD)
                nn.init.zeros_(module.in_proj_bias)
        residual_std = INIT_STD / math.sqrt(2 * self.num_layers)
        for layer in self.dec_layers:
            nn.init.normal_(layer.self_attn.mha.out_proj.weight, mean=0.0, std=residual_std)
            nn.init.normal_(layer.ffn.ffn[-1].weight, mean=0.0, std=residual_std)

    def forward(self, padded_targets: torch.Tensor,
                target_lengths: Optional[torch.Tensor] = None) -> tuple[torch.Tensor, dict]:
        """Next-token logits at every position.

        Args:
            padded_targets: (N, T) long tensor of token ids (the [SOS]-shifted inputs), T <= max_len.
            target_lengths: optional (N,) lengths of the unpadded sequences; when given, padded keys
                are masked out; when None, no padding mask is used. The causal mask is always used.

        Returns:
            logits: (N, T, num_classes), unnormalised; logits[:, t] depends only on tokens 0..t.
            attention_weights: {'layer1_dec_self': (N, T, T), 'layer2_dec_self': ...}, the
                head-averaged weights of each layer that ran (a layer skipped by layer drop in
                training has no entry).

        Hint: build the masks with PadMask and CausalMask, then follow the order in the module
        docstring. For layer drop, draw one uniform number per layer with ``torch.rand`` (so a
        seed makes it reproducible) and skip the layer when it is below layer_drop_rate, only
        when ``self.training``.
        """
        check_tokens(padded_targets, self.max_len, self.num_classes)
        # TODO: masks; embedding -> positional encoding -> dropout -> layers (with layer drop in
        # training) -> norm -> final_linear; collect each layer's weights under 'layer{i}_dec_self'
        # BEGIN SOLUTION
        pad_mask = None if target_lengths is None else PadMask(padded_targets, target_lengths)
        causal_mask = CausalMask(padded_targets)

        x = self.target_embedding(padded_targets)
        x = self.positional_encoding(x)
        x = self.dropout(x)

        attention_weights = {}
        for index, layer in enumerate(self.dec_layers, start=1):
            if self.training and self.layer_drop_rate > 0 and torch.rand(()) < self.layer_drop_rate:
                continue
            x, weights = layer(x, key_padding_mask=pad_mask, attn_mask=causal_mask)
            attention_weights[f"layer{index}_dec_self"] = weights

        logits = self.final_linear(self.norm(x))
        # END SOLUTION
        return logits, attention_weights

    def score(self, batch_prompts: torch.Tensor) -> torch.Tensor:
        """Next-token logits after each prompt, for decoding.

        Args:
            batch_prompts: (N, T) long tensor of unpadded prompts of equal length T <= max_len.

        Returns:
            (N, num_classes) logits of the token that follows each prompt (the last position).
        """
        if self.training:
            raise RuntimeError(
                "score() is for inference and needs eval mode (dropout and layer drop off): "
                "call model.eval() first"
            )
        # TODO: run forward without lengths and return the logits of the last position, (N, K)
        # BEGIN SOLUTION
        logits, _ = self.forward(batch_prompts)
        return logits[:, -1, :]
        # END SOLUTION
