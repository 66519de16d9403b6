"""FeedForwardLayer: pre-norm position-wise feed-forward network with a residual connection."""
import math

import torch
import torch.nn.functional as F
from torch import nn

from tests.numeric_checks import FixedDropout, check_second_call_is_fresh, fixed_dropout
from tests.failure_messages import in_case
from tests.testing_framework import check_built_on_input_device, rubric, run_module

RUBRIC = {"Feed-forward sublayer": 0}
# Graded only through the language model's perplexity (testing_framework.py).
THROUGH_LM = ("Feed-forward sublayer",)


def reference_feed_forward(layer, x, inner_keep=None, output_keep=None):
    """Recompute x + W2 GELU(W1 LN(x) + b1) + b2 from the layer's parameters, with exact (erf) GELU.

    Args:
        layer: a FeedForwardLayer (reads layer.norm and the two Linear layers of layer.ffn).
        x: (N, T, D).
        inner_keep: (N, T, d_ff) dropout mask applied after the GELU, or None.
        output_keep: (N, T, D) dropout mask applied to the FFN's output, or None.

    Returns:
        (N, T, D).
    """
    d_model = x.shape[-1]
    first, second = layer.ffn[0], layer.ffn[3]
    normed = F.layer_norm(x, (d_model,), layer.norm.weight, layer.norm.bias, layer.norm.eps)
    hidden = normed @ first.weight.T + first.bias
    hidden = 0.5 * hidden * (1.0 + torch.erf(hidden / math.sqrt(2.0)))
    if inner_keep is not None:
        hidden = hidden * inner_keep
    out = hidden @ second.weight.T + second.bias
    if output_keep is not None:
        out = out * output_keep
    return x + out


@rubric("Feed-forward sublayer")
def test_ffn_layout():
    from hw4lib.model import FeedForwardLayer

    layer = FeedForwardLayer(d_model=8, d_ff=32, dropout=0.2)
    assert isinstance(layer.ffn, nn.Sequential) and len(layer.ffn) == 4, (
        "ffn must be nn.Sequential(Linear(d_model, d_ff), GELU(), Dropout(dropout), Linear(d_ff, d_model))"
    )
    expected_types = [nn.Linear, nn.GELU, nn.Dropout, nn.Linear]
    actual_types = [type(module) for module in layer.ffn]
    assert actual_types == expected_types, f"ffn layout must be {expected_types}, got {actual_types}"
    first = (layer.ffn[0].in_features, layer.ffn[0].out_features)
    assert first == (8, 32), f"the first Linear must map d_model -> d_ff: expected (8, 32), got {first}"
    last = (layer.ffn[3].in_features, layer.ffn[3].out_features)
    assert last == (32, 8), f"the last Linear must map d_ff -> d_model: expected (32, 8), got {last}"
    assert layer.ffn[2].p == 0.2, f"the Dropout inside ffn must use the dropout rate: expected p=0.2, got {layer.ffn[2].p}"
    assert isinstance(layer.norm, nn.LayerNorm) and layer.norm.normalized_shape == (8,), (
        f"norm must be LayerNorm(d_model=8), got {layer.norm}"
    )
    assert isinstance(layer.dropout, nn.Dropout) and layer.dropout.p == 0.2, (
        f"dropout must be nn.Dropout(0.2), got {layer.dropout}"
    )


@rubric("Feed-forward sublayer")
def test_state_dict_is_the_one_the_grader_loads():
    """Names and shapes of the layer's tensors as in the grader's reference model (a LayerNorm
    without its weight and bias, or a Linear without bias, trains but cannot be graded)."""
    from hw4lib.model import FeedForwardLayer
    from hw4lib.model.state_dict_contract import check_shapes

    layer = FeedForwardLayer(d_model=8, d_ff=24)
    check_shapes({key: value.shape for key, value in layer.state_dict().items()},
                 {"d_model": 8, "d_ff": 24}, num_classes=0, prefix="dec_layers.{i}.ffn.",
                 what="FeedForwardLayer(d_model=8, d_ff=24).state_dict()")


@rubric("Feed-forward sublayer")
def test_output_matches_recomputation():
    from hw4lib.model import FeedForwardLayer

    generator = torch.Generator().manual_seed(0)
    layer = FeedForwardLayer(d_model=12, d_ff=40, dropout=0.0)
    with torch.no_grad():
        for parameter in layer.parameters():  # LayerNorm affine included, so no term can hide
            parameter.copy_(torch.randn(parameter.shape, generator=generator) * 0.5)
    x = torch.randn(3, 5, 12, generator=generator)
    for mode in ("train", "eval"):
        layer.train(mode == "train")
        with in_case(f"{mode} mode", x=x):
            out = layer(x)
        expected = reference_feed_forward(layer, x)
        assert out.shape == x.shape, f"expected output shape {tuple(x.shape)}, got {tuple(out.shape)}"
        assert torch.allclose(out, expected, atol=1e-5), (
            f"({mode}) output differs from x + FFN(LayerNorm(x)) by {(out - expected).abs().max():.2e}"
        )


@rubric("Feed-forward sublayer")
def test_positions_are_transformed_independently():
    from hw4lib.model import FeedForwardLayer

    torch.manual_seed(1)
    layer = FeedForwardLayer(8, 16).eval()
    x = torch.randn(2, 6, 8)
    changed = x.clone()
    changed[:, 3] += 1.0
    difference = (layer(changed) - layer(x)).abs().amax(dim=(0, 2))
    assert torch.all(difference[[0, 1, 2, 4, 5]] == 0), "changing position 3 must not change other positions"
    assert difference[3] > 0, "changing position 3 must change its output"


@rubric("Feed-forward sublayer")
def test_dropout_acts_only_in_training():
    from hw4lib.model import FeedForwardLayer

    torch.manual_seed(2)
    layer = FeedForwardLayer(8, 32, dropout=0.5)
    x = torch.randn(2, 5, 8)
    layer.eval()
    first, second = layer(x), layer(x)
    assert torch.equal(first, second), "in eval mode the layer must be deterministic (dropout off)"
    layer.train()
    assert not torch.allclose(layer(x), first), "with dropout=0.5 in training mode the output must change"


@rubric("Feed-forward sublayer")
def test_each_dropout_sits_where_it_belongs():
    from hw4lib.model import FeedForwardLayer

    batch, length, d_model, d_ff, p = 2, 5, 8, 24, 0.3
    generator = torch.Generator().manual_seed(4)
    layer = FeedForwardLayer(d_model, d_ff, dropout=p)
    with torch.no_grad():
        for parameter in layer.parameters():
            parameter.copy_(torch.randn(parameter.shape, generator=generator) * 0.5)
    x = torch.randn(batch, length, d_model, generator=generator)
    layer.train()
    with fixed_dropout() as dropout:
        out = layer(x)
    inner_shape, output_shape = (batch, length, d_ff), (batch, length, d_model)
    dropout.assert_acted(inner_shape, f"in training with dropout={p}, the hidden activations "
                         f"{inner_shape} must be dropped by the Dropout inside ffn")
    dropout.assert_acted(output_shape, f"in training with dropout={p}, the ffn output {output_shape} "
                         "must go through self.dropout before the residual add")
    expected = reference_feed_forward(layer, x, FixedDropout.keep_mask(inner_shape, p),
                                      FixedDropout.keep_mask(output_shape, p))
    assert torch.allclose(out, expected, atol=1e-5), (
        f"with fixed dropout masks, the output differs from x + Dropout(FFN(LayerNorm(x))) by "
        f"{(out - expected).abs().max():.2e}: dropout goes on the FFN output only, not on the "
        "residual stream x"
    )



@rubric("Feed-forward sublayer")
def test_follows_the_input_device_and_dtype():
    from hw4lib.model import FeedForwardLayer

    layer = FeedForwardLayer(8, 16, dropout=0.1)
    check_built_on_input_device(
        lambda device: layer.to(device, torch.float64)(
            torch.zeros(2, 5, 8, device=device, dtype=torch.float64)),
        "FeedForwardLayer", "the output", dtype=torch.float64)


@rubric("Feed-forward sublayer")
def test_a_second_call_of_another_shape_matches_a_fresh_layer():
    from hw4lib.model import FeedForwardLayer

    torch.manual_seed(4)
    check_second_call_is_fresh(FeedForwardLayer(8, 16), {"x": torch.randn(3, 6, 8)},
                               {"x": torch.randn(1, 1, 8)}, "FeedForwardLayer(8, 16)")


if __name__ == "__main__":
    run_module(__name__)
