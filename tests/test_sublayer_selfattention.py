"""SelfAttentionLayer: pre-norm masked multi-head self-attention with a residual connection.

The truth is a direct re-computation from the layer's own weights with the attention formula
softmax(Q K^T / sqrt(d_head)) V per head, written here with plain tensor operations.
"""
import math

import torch
import torch.nn.functional as F
from torch import nn

from tests.numeric_checks import (FixedDropout, check_layer_device_dtype_and_second_call,
                                  fixed_dropout)
from tests.failure_messages import in_case
from tests.testing_framework import rubric, run_module

RUBRIC = {"Self-attention sublayer": 0}
# Graded only through the language model's perplexity (testing_framework.py).
THROUGH_LM = ("Self-attention sublayer",)


def reference_self_attention(layer, x, key_padding_mask=None, attn_mask=None, weight_keep=None,
                             output_keep=None):
    """Recompute x + Dropout(MHA(LN(x))) and the head-averaged weights from the layer's parameters.

    Args:
        layer: a SelfAttentionLayer (reads layer.norm and layer.mha's weights only).
        x: (N, T, D); key_padding_mask: (N, T) bool or None; attn_mask: (T, T) bool or None.
        weight_keep: (N, H, T, T) dropout mask applied to the attention weights, or None.
        output_keep: (N, T, D) dropout mask applied to the attention output, or None.

    Returns:
        (output (N, T, D), weights (N, T, T)).
    """
    mha = layer.mha
    batch, length, d_model = x.shape
    heads = mha.num_heads
    head_dim = d_model // heads
    normed = F.layer_norm(x, (d_model,), layer.norm.weight, layer.norm.bias, layer.norm.eps)
    w_q, w_k, w_v = mha.in_proj_weight.chunk(3)
    b_q, b_k, b_v = mha.in_proj_bias.chunk(3)

    def split(t):  # (N, T, D) -> (N, H, T, D/H)
        return t.view(batch, length, heads, head_dim).transpose(1, 2)

    q, k, v = split(normed @ w_q.T + b_q), split(normed @ w_k.T + b_k), split(normed @ w_v.T + b_v)
    scores = q @ k.transpose(-2, -1) / math.sqrt(head_dim)  # (N, H, T, T)
    hidden = torch.zeros(batch, 1, length, length, dtype=torch.bool)
    if attn_mask is not None:
        hidden = hidden | attn_mask.view(1, 1, length, length)
    if key_padding_mask is not None:
        hidden = hidden | key_padding_mask.view(batch, 1, 1, length)
    scores = scores.masked_fill(hidden, float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    if weight_keep is not None:
        weights = weights * weight_keep
    heads_out = (weights @ v).transpose(1, 2).reshape(batch, length, d_model)
    attended = heads_out @ mha.out_proj.weight.T + mha.out_proj.bias
    if output_keep is not None:
        attended = attended * output_keep
    return x + attended, weights.mean(dim=1)


def _causal(length):
    return torch.triu(torch.ones(length, length, dtype=torch.bool), diagonal=1)


def _randomise(layer, generator):
    """Give every parameter (LayerNorm included) random values so no term can hide."""
    with torch.no_grad():
        for parameter in layer.parameters():
            parameter.copy_(torch.randn(parameter.shape, generator=generator) * 0.3)


@rubric("Self-attention sublayer")
def test_members():
    from hw4lib.model import SelfAttentionLayer

    layer = SelfAttentionLayer(d_model=16, num_heads=4, dropout=0.1)
    assert isinstance(layer.mha, nn.MultiheadAttention), "mha must be a torch.nn.MultiheadAttention"
    assert layer.mha.batch_first, "mha must be built with batch_first=True"
    assert layer.mha.embed_dim == 16 and layer.mha.num_heads == 4, "mha must have embed_dim=d_model, num_heads"
    assert isinstance(layer.norm, nn.LayerNorm) and layer.norm.normalized_shape == (16,), "norm must be LayerNorm(d_model)"
    assert isinstance(layer.dropout, nn.Dropout) and layer.dropout.p == 0.1, "dropout must be nn.Dropout(dropout)"


@rubric("Self-attention sublayer")
def test_state_dict_is_the_one_the_grader_loads():
    """Names and shapes of the layer's tensors as in the grader's reference model."""
    from hw4lib.model import SelfAttentionLayer
    from hw4lib.model.state_dict_contract import check_shapes

    layer = SelfAttentionLayer(d_model=12, num_heads=3)
    check_shapes({key: value.shape for key, value in layer.state_dict().items()},
                 {"d_model": 12}, num_classes=0, prefix="dec_layers.{i}.self_attn.",
                 what="SelfAttentionLayer(d_model=12, num_heads=3).state_dict()")


@rubric("Self-attention sublayer")
def test_output_and_weights_match_recomputation():
    from hw4lib.model import SelfAttentionLayer

    generator = torch.Generator().manual_seed(0)
    batch, length, d_model, heads = 3, 6, 16, 4
    layer = SelfAttentionLayer(d_model, heads, dropout=0.0)
    _randomise(layer, generator)
    x = torch.randn(batch, length, d_model, generator=generator)
    pad = torch.arange(length).unsqueeze(0) >= torch.tensor([6, 4, 2]).unsqueeze(1)
    cases = {
        "no masks": (None, None),
        "causal mask": (None, _causal(length)),
        "padding mask": (pad, None),
        "causal and padding masks": (pad, _causal(length)),
    }
    for name, (key_padding_mask, attn_mask) in cases.items():
        for mode in ("train", "eval"):
            layer.train(mode == "train")
            with in_case(f"{name} ({mode})", x=x, key_padding_mask=key_padding_mask,
                         attn_mask=attn_mask):
                out, weights = layer(x, key_padding_mask=key_padding_mask, attn_mask=attn_mask)
            expected_out, expected_weights = reference_self_attention(layer, x, key_padding_mask, attn_mask)
            assert out.shape == x.shape, f"{name}: expected output shape {tuple(x.shape)}, got {tuple(out.shape)}"
            assert weights.shape == (batch, length, length), (
                f"{name}: expected head-averaged weights of shape (N, T, T) = {(batch, length, length)}, "
                f"got {tuple(weights.shape)}"
            )
            assert torch.allclose(out, expected_out, atol=1e-5), (
                f"{name} ({mode}): output differs from x + MHA(LayerNorm(x)) by "
                f"{(out - expected_out).abs().max():.2e}"
            )
            assert torch.allclose(weights, expected_weights, atol=1e-6), (
                f"{name} ({mode}): attention weights differ by {(weights - expected_weights).abs().max():.2e}"
            )


@rubric("Self-attention sublayer")
def test_weights_are_distributions_that_respect_the_masks():
    from hw4lib.model import SelfAttentionLayer

    torch.manual_seed(1)
    length = 7
    layer = SelfAttentionLayer(8, 2).eval()
    lengths = torch.tensor([7, 5, 3])
    pad = torch.arange(length).unsqueeze(0) >= lengths.unsqueeze(1)
    _, weights = layer(torch.randn(3, length, 8), key_padding_mask=pad, attn_mask=_causal(length))
    assert torch.allclose(weights.sum(-1), torch.ones(3, length), atol=1e-6), "each row of weights must sum to 1"
    above_diagonal = _causal(length).expand(3, length, length)
    assert torch.all(weights[above_diagonal] == 0), "weights above the diagonal must be 0 under the causal mask"
    for n, real in enumerate(lengths.tolist()):
        assert torch.all(weights[n, :, real:] == 0), f"sequence {n}: weights on padded keys (>= {real}) must be 0"


@rubric("Self-attention sublayer")
def test_dropout_acts_only_in_training():
    from hw4lib.model import SelfAttentionLayer

    torch.manual_seed(2)
    layer = SelfAttentionLayer(16, 4, dropout=0.5)
    x = torch.randn(2, 5, 16)
    layer.eval()
    first, _ = layer(x)
    second, _ = layer(x)
    assert torch.equal(first, second), "in eval mode the layer must be deterministic (dropout off)"
    layer.train()
    trained, _ = layer(x)
    assert not torch.allclose(trained, first), "with dropout=0.5 in training mode the output must change"


@rubric("Self-attention sublayer")
def test_each_dropout_sits_where_it_belongs():
    from hw4lib.model import SelfAttentionLayer

    batch, length, d_model, heads, p = 2, 5, 16, 4, 0.3
    generator = torch.Generator().manual_seed(3)
    layer = SelfAttentionLayer(d_model, heads, dropout=p)
    _randomise(layer, generator)
    x = torch.randn(batch, length, d_model, generator=generator)
    mask = _causal(length)
    layer.train()
    with fixed_dropout() as dropout:
        out, weights = layer(x, attn_mask=mask)
    weight_shape, output_shape = (batch * heads, length, length), (batch, length, d_model)
    dropout.assert_acted(weight_shape, f"in training with dropout={p}, the attention weights "
                         f"{weight_shape} must be dropped: build nn.MultiheadAttention with dropout=dropout")
    dropout.assert_acted(output_shape, f"in training with dropout={p}, the attention output "
                         f"{output_shape} must go through self.dropout before the residual add")
    weight_keep = FixedDropout.keep_mask(weight_shape, p).view(batch, heads, length, length)
    expected_out, expected_weights = reference_self_attention(
        layer, x, attn_mask=mask, weight_keep=weight_keep,
        output_keep=FixedDropout.keep_mask(output_shape, p))
    assert torch.allclose(out, expected_out, atol=1e-5), (
        f"with fixed dropout masks, the output differs from x + Dropout(MHA(LayerNorm(x))) by "
        f"{(out - expected_out).abs().max():.2e}: dropout goes on the attention output only, "
        "not on the residual stream x"
    )
    assert torch.allclose(weights, expected_weights, atol=1e-6), (
        f"with fixed dropout masks, the returned weights differ by {(weights - expected_weights).abs().max():.2e}"
    )



@rubric("Self-attention sublayer")
def test_follows_the_input_device_and_dtype_and_forgets_the_last_call():
    from hw4lib.model import SelfAttentionLayer

    check_layer_device_dtype_and_second_call(SelfAttentionLayer(8, 2, dropout=0.1),
                                             "SelfAttentionLayer(8, 2)")


if __name__ == "__main__":
    run_module(__name__)
