"""SelfAttentionDecoderLayer: masked self-attention sublayer, then feed-forward sublayer."""
import torch

from tests.test_sublayer_feedforward import reference_feed_forward
from tests.numeric_checks import check_layer_device_dtype_and_second_call
from tests.test_sublayer_selfattention import reference_self_attention
from tests.failure_messages import in_case
from tests.testing_framework import rubric, run_module

RUBRIC = {"Decoder layer": 0}
# Graded only through the language model's perplexity (testing_framework.py).
THROUGH_LM = ("Decoder layer",)


@rubric("Decoder layer")
def test_members():
    from hw4lib.model import FeedForwardLayer, SelfAttentionDecoderLayer, SelfAttentionLayer

    layer = SelfAttentionDecoderLayer(d_model=16, num_heads=4, d_ff=64, dropout=0.2)
    assert isinstance(layer.self_attn, SelfAttentionLayer), (
        f"self_attn must be a SelfAttentionLayer, got {type(layer.self_attn).__name__}"
    )
    assert isinstance(layer.ffn, FeedForwardLayer), f"ffn must be a FeedForwardLayer, got {type(layer.ffn).__name__}"
    assert layer.self_attn.mha.num_heads == 4, f"self_attn must use num_heads=4 heads, got {layer.self_attn.mha.num_heads}"
    assert layer.ffn.ffn[0].out_features == 64, f"ffn must expand to d_ff=64, got {layer.ffn.ffn[0].out_features}"
    rates = {"self_attn.dropout": layer.self_attn.dropout.p, "self_attn.mha.dropout": layer.self_attn.mha.dropout,
             "ffn.dropout": layer.ffn.dropout.p, "ffn.ffn[2]": layer.ffn.ffn[2].p}
    assert all(rate == 0.2 for rate in rates.values()), (
        f"both sublayers must get the dropout rate: expected 0.2 everywhere, got {rates}"
    )


@rubric("Decoder layer")
def test_state_dict_is_the_one_the_grader_loads():
    """Names and shapes of the layer's tensors as in the grader's reference model."""
    from hw4lib.model import SelfAttentionDecoderLayer
    from hw4lib.model.state_dict_contract import check_shapes

    layer = SelfAttentionDecoderLayer(d_model=12, num_heads=3, d_ff=20)
    check_shapes({key: value.shape for key, value in layer.state_dict().items()},
                 {"d_model": 12, "d_ff": 20}, num_classes=0, prefix="dec_layers.{i}.",
                 what="SelfAttentionDecoderLayer(d_model=12, num_heads=3, d_ff=20).state_dict()")


@rubric("Decoder layer")
def test_output_and_weights_match_recomputation():
    from hw4lib.model import SelfAttentionDecoderLayer

    generator = torch.Generator().manual_seed(0)
    batch, length, d_model = 3, 6, 16
    layer = SelfAttentionDecoderLayer(d_model, num_heads=4, d_ff=48, dropout=0.0)
    with torch.no_grad():
        for parameter in layer.parameters():
            parameter.copy_(torch.randn(parameter.shape, generator=generator) * 0.3)
    x = torch.randn(batch, length, d_model, generator=generator)
    causal = torch.triu(torch.ones(length, length, dtype=torch.bool), diagonal=1)
    pad = torch.arange(length).unsqueeze(0) >= torch.tensor([6, 3, 1]).unsqueeze(1)
    for name, (key_padding_mask, attn_mask) in {"no masks": (None, None), "both masks": (pad, causal)}.items():
        with in_case(name, x=x, key_padding_mask=key_padding_mask, attn_mask=attn_mask):
            out, weights = layer(x, key_padding_mask=key_padding_mask, attn_mask=attn_mask)
        attended, expected_weights = reference_self_attention(layer.self_attn, x, key_padding_mask, attn_mask)
        expected = reference_feed_forward(layer.ffn, attended)
        assert out.shape == x.shape, f"{name}: expected output shape {tuple(x.shape)}, got {tuple(out.shape)}"
        assert weights.shape == (batch, length, length), (
            f"{name}: expected weights of shape {(batch, length, length)}, got {tuple(weights.shape)}"
        )
        assert torch.allclose(out, expected, atol=1e-4), (
            f"{name}: output differs from ffn(self_attn(x)) by {(out - expected).abs().max():.2e}"
        )
        assert torch.allclose(weights, expected_weights, atol=1e-6), (
            f"{name}: the returned weights must be those of the self-attention sublayer; they differ by "
            f"{(weights - expected_weights).abs().max():.2e}"
        )


@rubric("Decoder layer")
def test_causal_mask_blocks_the_future():
    from hw4lib.model import SelfAttentionDecoderLayer

    torch.manual_seed(1)
    length = 8
    layer = SelfAttentionDecoderLayer(16, 4, 32, dropout=0.0).eval()
    causal = torch.triu(torch.ones(length, length, dtype=torch.bool), diagonal=1)
    x = torch.randn(2, length, 16)
    changed = x.clone()
    changed[:, 5:] = torch.randn(2, length - 5, 16)
    before, _ = layer(x, attn_mask=causal)
    after, _ = layer(changed, attn_mask=causal)
    assert torch.allclose(before[:, :5], after[:, :5], atol=1e-6), "outputs before position 5 must ignore later inputs"
    assert not torch.allclose(before[:, 5:], after[:, 5:]), "outputs from position 5 on must change"



@rubric("Decoder layer")
def test_follows_the_input_device_and_dtype_and_forgets_the_last_call():
    from hw4lib.model import SelfAttentionDecoderLayer

    check_layer_device_dtype_and_second_call(SelfAttentionDecoderLayer(8, 2, 16, dropout=0.1),
                                             "SelfAttentionDecoderLayer(8, 2, 16)")


if __name__ == "__main__":
    run_module(__name__)
