"""The numpy twin and the PyTorch model agree: mytorch's MultiHeadAttention, loaded with the weights
of a SelfAttentionLayer's nn.MultiheadAttention, reproduces its output and its input gradient."""
import numpy as np
import torch

from tests.testing_framework import rubric, run_module

RUBRIC = {"mytorch matches the PyTorch sublayer": 0}
# Graded only through the language model's perplexity (testing_framework.py).
THROUGH_LM = ("mytorch matches the PyTorch sublayer",)


def _layer_and_twin(d_model=16, num_heads=4, seed=0):
    """A SelfAttentionLayer with random weights and a mytorch MultiHeadAttention holding the same."""
    from hw4lib.model import SelfAttentionLayer
    from mytorch.nn import MultiHeadAttention

    generator = torch.Generator().manual_seed(seed)
    layer = SelfAttentionLayer(d_model, num_heads, dropout=0.0)
    with torch.no_grad():
        for parameter in layer.parameters():
            parameter.copy_(torch.randn(parameter.shape, generator=generator) * 0.3)
    mha = layer.mha
    twin = MultiHeadAttention(d_model, num_heads)
    w_q, w_k, w_v = (w.detach().double().numpy() for w in mha.in_proj_weight.chunk(3))
    b_q, b_k, b_v = (b.detach().double().numpy() for b in mha.in_proj_bias.chunk(3))
    twin.init_weights(w_q, b_q, w_k, b_k, w_v, b_v,
                      mha.out_proj.weight.detach().double().numpy(), mha.out_proj.bias.detach().double().numpy())
    return layer, twin, generator


def _masks(lengths, length):
    pad = torch.arange(length).unsqueeze(0) >= torch.tensor(lengths).unsqueeze(1)
    causal = torch.triu(torch.ones(length, length, dtype=torch.bool), diagonal=1)
    return pad, causal


@rubric("mytorch matches the PyTorch sublayer")
def test_mytorch_attention_reproduces_the_sublayer_forward():
    layer, twin, generator = _layer_and_twin()
    length = 6
    x = torch.randn(3, length, 16, generator=generator)
    pad, causal = _masks([6, 4, 2], length)
    for name, (key_padding_mask, attn_mask) in {"no masks": (None, None), "causal": (None, causal),
                                                "causal and padding": (pad, causal)}.items():
        normed = layer.norm(x)
        expected, _ = layer.mha(normed, normed, normed, key_padding_mask=key_padding_mask, attn_mask=attn_mask)
        normed_np = normed.detach().double().numpy()
        actual = twin.forward(normed_np, normed_np, normed_np,
                              key_padding_mask=None if key_padding_mask is None else key_padding_mask.numpy(),
                              attn_mask=None if attn_mask is None else attn_mask.numpy())
        error = np.abs(actual - expected.detach().double().numpy()).max()
        assert error < 1e-5, f"{name}: mytorch MultiHeadAttention differs from nn.MultiheadAttention by {error:.2e}"
        sublayer_out, _ = layer(x, key_padding_mask=key_padding_mask, attn_mask=attn_mask)
        error = np.abs(x.double().numpy() + actual - sublayer_out.detach().double().numpy()).max()
        assert error < 1e-5, f"{name}: x + mytorch attention(norm(x)) differs from the sublayer by {error:.2e}"


@rubric("mytorch matches the PyTorch sublayer")
def test_mytorch_attention_backward_matches_autograd():
    layer, twin, generator = _layer_and_twin(seed=1)
    length = 5
    pad, causal = _masks([5, 3], length)
    normed = torch.randn(2, length, 16, generator=generator, dtype=torch.float64, requires_grad=True)
    upstream = torch.randn(2, length, 16, generator=generator, dtype=torch.float64)
    layer.double()
    out, _ = layer.mha(normed, normed, normed, key_padding_mask=pad, attn_mask=causal)
    (out * upstream).sum().backward()
    normed_np = normed.detach().numpy()
    twin.forward(normed_np, normed_np, normed_np, key_padding_mask=pad.numpy(), attn_mask=causal.numpy())
    d_query, d_key, d_value = twin.backward(upstream.numpy())
    # query, key and value are one tensor, so its gradient is the sum of the three.
    error = np.abs(d_query + d_key + d_value - normed.grad.numpy()).max()
    assert error < 1e-8, f"mytorch's input gradient differs from autograd's by {error:.2e}"
    expected_dwo = layer.mha.out_proj.weight.grad.numpy()
    error = np.abs(twin.out_proj.dLdW - expected_dwo).max()
    assert error < 1e-8, f"mytorch's out_proj dLdW differs from autograd's by {error:.2e}"


if __name__ == "__main__":
    run_module(__name__)
