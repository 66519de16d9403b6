"""DecoderOnlyTransformer: structure, causality, padding, score(), weight tying, layer drop, checks."""
import math
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
import yaml
from torch import nn

from tests.failure_messages import in_case
from tests.numeric_checks import check_second_call_is_fresh
from tests.testing_framework import check_built_on_input_device, rubric, run_module

RUBRIC = {"Decoder-only Transformer": 0}
# Graded only through the language model's perplexity (testing_framework.py).
THROUGH_LM = ("Decoder-only Transformer",)

REPO_ROOT = Path(__file__).resolve().parents[1]
TINY = dict(num_layers=2, d_model=16, num_heads=4, d_ff=32, dropout=0.0, max_len=12, num_classes=11)


def tiny_model(**overrides):
    from hw4lib.model import DecoderOnlyTransformer

    torch.manual_seed(0)
    return DecoderOnlyTransformer(**{**TINY, **overrides})


def random_tokens(batch, length, seed=0):
    generator = torch.Generator().manual_seed(seed)
    return torch.randint(0, TINY["num_classes"], (batch, length), generator=generator)


@rubric("Decoder-only Transformer")
def test_members_and_default_config():
    from hw4lib.model import PositionalEncoding, SelfAttentionDecoderLayer

    model = tiny_model()
    assert isinstance(model.dec_layers, nn.ModuleList) and len(model.dec_layers) == 2, (
        "dec_layers must be an nn.ModuleList of num_layers layers"
    )
    kinds = [type(layer).__name__ for layer in model.dec_layers]
    assert all(isinstance(layer, SelfAttentionDecoderLayer) for layer in model.dec_layers), (
        f"every entry of dec_layers must be a SelfAttentionDecoderLayer, got {kinds}"
    )
    assert len({id(layer) for layer in model.dec_layers}) == 2, (
        "dec_layers must hold num_layers distinct layers (build one per layer, not [layer] * n)"
    )
    embedding = getattr(model.target_embedding, "weight", None)
    assert isinstance(model.target_embedding, nn.Embedding) and tuple(embedding.shape) == (11, 16), (
        f"target_embedding must be nn.Embedding(num_classes=11, d_model=16), got {model.target_embedding}"
    )
    assert isinstance(model.positional_encoding, PositionalEncoding), (
        f"positional_encoding must be a PositionalEncoding, got {type(model.positional_encoding).__name__}"
    )
    assert isinstance(model.dropout, nn.Dropout) and isinstance(model.norm, nn.LayerNorm), (
        f"dropout must be nn.Dropout and norm nn.LayerNorm, got {model.dropout} and {model.norm}"
    )
    assert isinstance(model.final_linear, nn.Linear) and tuple(model.final_linear.weight.shape) == (11, 16), (
        f"final_linear must be nn.Linear(d_model=16, num_classes=11), got {model.final_linear}"
    )
    got = (model.max_len, model.num_classes, model.num_layers)
    assert got == (12, 11, 2), f"(max_len, num_classes, num_layers): expected (12, 11, 2), got {got}"

    config = yaml.safe_load((REPO_ROOT / "configs" / "default.yaml").read_text())
    from hw4lib.model import DecoderOnlyTransformer

    model = DecoderOnlyTransformer(**config["model"], num_classes=37)
    got = (model.num_layers, model.max_len)
    expected = (config["model"]["num_layers"], config["model"]["max_len"])
    assert got == expected, f"default config: (num_layers, max_len) expected {expected}, got {got}"


@rubric("Decoder-only Transformer")
def test_output_shapes_and_attention_keys():
    model = tiny_model(num_layers=3).eval()
    tokens, lengths = random_tokens(4, 7), torch.tensor([7, 5, 3, 1])
    with in_case("eval mode, 3 layers", padded_targets=tokens, target_lengths=lengths):
        logits, attention = model(tokens, lengths)
    assert logits.shape == (4, 7, 11), f"expected logits of shape (N, T, num_classes) = (4, 7, 11), got {tuple(logits.shape)}"
    expected_keys = ["layer1_dec_self", "layer2_dec_self", "layer3_dec_self"]
    assert list(attention) == expected_keys, f"expected attention keys {expected_keys}, got {list(attention)}"
    for key, weights in attention.items():
        assert weights.shape == (4, 7, 7), f"{key}: expected (N, T, T) = (4, 7, 7), got {tuple(weights.shape)}"


@rubric("Decoder-only Transformer")
def test_forward_order_and_data_flow():
    model = tiny_model(num_layers=2).eval()
    calls = []

    def record(name):
        def hook(module, inputs, output):
            calls.append((name, inputs[0], output[0] if isinstance(output, tuple) else output))
        return hook

    named = [("target_embedding", model.target_embedding), ("positional_encoding", model.positional_encoding),
             ("dropout", model.dropout), ("dec_layers.0", model.dec_layers[0]),
             ("dec_layers.1", model.dec_layers[1]), ("norm", model.norm), ("final_linear", model.final_linear)]
    handles = [module.register_forward_hook(record(name)) for name, module in named]
    try:
        logits, _ = model(random_tokens(2, 5))
    finally:
        for handle in handles:
            handle.remove()
    order = [name for name, _, _ in calls]
    assert order == [name for name, _ in named], f"expected the order {[n for n, _ in named]}, got {order}"
    for (previous, _, produced), (current, consumed, _) in zip(calls, calls[1:]):
        assert torch.equal(produced, consumed), f"{current} must receive the output of {previous}"
    assert torch.equal(calls[-1][2], logits), "the logits must be the output of final_linear"


@rubric("Decoder-only Transformer")
def test_every_parameter_gets_a_gradient_from_one_backward():
    """One backward of the training loss reaches every parameter, the input embedding included
    (with and without weight tying): a detached step (``.detach()``, ``.data``,
    ``torch.no_grad()``) anywhere on the way leaves the parameters below it untrained."""
    for tying in (False, True):
        model = tiny_model(weight_tying=tying).train()
        tokens = random_tokens(3, 6)
        logits, _ = model(tokens)
        F.cross_entropy(logits.reshape(-1, TINY["num_classes"]), random_tokens(3, 6, seed=1)
                        .reshape(-1)).backward()
        untrained = [name for name, parameter in model.named_parameters()
                     if parameter.grad is None or not parameter.grad.abs().sum() > 0]
        assert not untrained, (
            f"weight_tying={tying}: one backward of the loss left these parameters without a "
            f"gradient: {untrained}; every step from the embedding to the logits must stay in "
            f"the autograd graph (no .detach(), .data or torch.no_grad())")
        used = torch.zeros(TINY["num_classes"], dtype=torch.bool)
        used[tokens.unique()] = True
        if not tying:  # the tied matrix gets the output layer's gradient in every row
            rows = model.target_embedding.weight.grad.abs().sum(dim=1) > 0
            assert torch.equal(rows, used), (
                f"the embedding's gradient must reach exactly the rows of the tokens in the "
                f"input ({used.nonzero().flatten().tolist()}), got rows "
                f"{rows.nonzero().flatten().tolist()}")


@rubric("Decoder-only Transformer")
def test_causality():
    model = tiny_model().eval()
    tokens = random_tokens(3, 9)
    lengths = torch.tensor([9, 9, 9])
    for target_lengths in (None, lengths):
        with in_case("eval mode", padded_targets=tokens, target_lengths=target_lengths):
            reference, _ = model(tokens, target_lengths)
        for t in range(9):
            changed = tokens.clone()
            changed[:, t] = (changed[:, t] + 1) % TINY["num_classes"]
            logits, _ = model(changed, target_lengths)
            assert torch.allclose(logits[:, :t], reference[:, :t], atol=1e-6), (
                f"changing the token at position {t} changed logits at earlier positions"
            )
            assert not torch.allclose(logits[:, t], reference[:, t]), f"logits at position {t} must depend on token {t}"


@rubric("Decoder-only Transformer")
def test_padding_is_masked_and_ignored():
    model = tiny_model().eval()
    lengths = torch.tensor([8, 5, 2])
    tokens = random_tokens(3, 8)
    is_pad = torch.arange(8).unsqueeze(0) >= lengths.unsqueeze(1)
    other_pads = tokens.masked_fill(is_pad, 0)
    logits, attention = model(tokens, lengths)
    logits_other, _ = model(other_pads, lengths)
    assert torch.allclose(logits[~is_pad], logits_other[~is_pad], atol=1e-6), (
        "changing pad tokens must not change the logits at real positions"
    )
    for key, weights in attention.items():
        for n, real in enumerate(lengths.tolist()):
            assert torch.all(weights[n, :, real:] == 0), f"{key}: sequence {n} attends to padded keys >= {real}"
    _, unmasked = model(tokens)
    assert unmasked["layer1_dec_self"][2, 7, 2:].sum() > 0, (
        "without target_lengths no padding mask may be applied (only the causal mask)"
    )


@rubric("Decoder-only Transformer")
def test_lengths_hide_only_the_right_padding():
    """With right padding, a real position's causal window holds no padding at all, so the
    padding mask changes nothing there: every real position's logits equal those of a forward
    without lengths, and every real key gets some attention."""
    model = tiny_model().eval()
    lengths = torch.tensor([8, 5, 2, 1])
    tokens = random_tokens(4, 8)
    is_real = torch.arange(8).unsqueeze(0) < lengths.unsqueeze(1)
    with in_case("right padding", padded_targets=tokens, target_lengths=lengths):
        with_lengths, attention = model(tokens, lengths)
    without_lengths, _ = model(tokens)
    differs = ((with_lengths - without_lengths).abs().amax(-1) > 1e-5) & is_real
    if differs.any():
        n, t = differs.nonzero()[0].tolist()
        raise AssertionError(
            f"sequence {n} (length {int(lengths[n])}): the logits at real position {t} change when "
            f"target_lengths is given; positions 0..{t} are all real, so the padding mask must "
            "hide nothing from it (mask exactly the positions t >= length)")
    for key, weights in attention.items():
        for n, real in enumerate(lengths.tolist()):
            unseen = [j for j in range(real) if not weights[n, j:real, j].max() > 0]
            assert not unseen, (
                f"{key}: sequence {n} (length {real}): no query attends to its real key(s) {unseen}; "
                "the padding mask may hide only positions t >= length")


@rubric("Decoder-only Transformer")
def test_score_is_the_last_position_in_eval_mode_only():
    model = tiny_model()
    prompts = random_tokens(4, 6)
    with pytest.raises(RuntimeError):
        model.score(prompts)
    model.eval()
    logits, _ = model(prompts)
    scores = model.score(prompts)
    assert scores.shape == (4, 11), f"expected (N, num_classes) = (4, 11), got {tuple(scores.shape)}"
    assert torch.allclose(scores, logits[:, -1], atol=1e-6), "score(x) must equal forward(x) logits at the last position"
    with torch.no_grad():
        assert torch.allclose(model.score(prompts), logits[:, -1], atol=1e-5), "score must also hold under no_grad"


@rubric("Decoder-only Transformer")
def test_weight_tying_shares_one_parameter():
    untied = tiny_model(weight_tying=False)
    tied = tiny_model(weight_tying=True)
    assert untied.target_embedding.weight is not untied.final_linear.weight, "without weight_tying keep two matrices"
    assert tied.target_embedding.weight is tied.final_linear.weight, (
        "with weight_tying the embedding and the output projection must be the same Parameter"
    )
    count = lambda model: sum(p.numel() for p in model.parameters())  # noqa: E731
    saved = TINY["num_classes"] * TINY["d_model"]
    assert count(untied) - count(tied) == saved, f"tying must save num_classes * d_model = {saved} parameters"


@rubric("Decoder-only Transformer")
def test_weight_tying_starts_from_the_documented_values():
    """The docstring's initial values: each (K, D) matrix, tied or not, N(0, 0.02) (9,600 draws
    here: their mean and spread are known to about 1%), the output bias 0, and with tying the
    state dict's two keys hold the same values (the grader loads both)."""
    wide = dict(num_classes=300, d_model=32, num_heads=4, d_ff=64, num_layers=2)
    for tying in (False, True):
        model = tiny_model(**wide, weight_tying=tying)
        state = model.state_dict()
        for key in ("target_embedding.weight", "final_linear.weight"):
            values = state[key]
            std, mean = float(values.std()), float(values.mean())
            assert 0.018 < std < 0.022 and abs(mean) < 0.002, (
                f"weight_tying={tying}: {key} must start N(0, 0.02) like every embedding and "
                f"linear weight (the docstring), got mean {mean:.4f} and std {std:.4f}")
        assert torch.equal(state["final_linear.bias"], torch.zeros(300)), (
            f"weight_tying={tying}: final_linear.bias must start at 0")
        same = torch.equal(state["target_embedding.weight"], state["final_linear.weight"])
        assert same == tying, (
            f"weight_tying={tying}: the state dict's target_embedding.weight and "
            f"final_linear.weight must {'hold the same values' if tying else 'be two matrices'}")


@rubric("Decoder-only Transformer")
def test_state_dict_is_the_one_the_grader_loads():
    """The grader loads your weights strictly into its own reference model, so every tensor must
    have the reference's name and shape (hw4lib/model/state_dict_manifest.json lists them)."""
    from hw4lib.model.state_dict_contract import check_shapes

    for overrides in ({}, {"num_layers": 1, "weight_tying": True},
                      {"num_layers": 3, "d_model": 8, "num_heads": 2, "d_ff": 24, "max_len": 5,
                       "num_classes": 7}):
        config = {**TINY, **overrides}
        model = tiny_model(**overrides)
        check_shapes({key: value.shape for key, value in model.state_dict().items()}, config,
                     config["num_classes"], what=f"DecoderOnlyTransformer(**{config}).state_dict()")


class RecordingLayer(nn.Module):
    """Stands in for a decoder layer: returns its input unchanged and weights filled with its
    1-based place, and records that it ran."""

    def __init__(self, index, ran):
        super().__init__()
        self.index, self.ran = index, ran

    def forward(self, x, key_padding_mask=None, attn_mask=None):
        self.ran.append(self.index)
        return x, x.new_full((x.shape[0], x.shape[1], x.shape[1]), float(self.index + 1))


def layer_drop_patterns(model, trials, seed):
    """Which layers ran in each of ``trials`` training forwards after ``torch.manual_seed(seed)``."""
    ran = []
    model.dec_layers = nn.ModuleList(RecordingLayer(i, ran) for i in range(len(model.dec_layers)))
    tokens = random_tokens(1, 2)
    torch.manual_seed(seed)
    patterns = []
    for _ in range(trials):
        ran.clear()
        model(tokens)
        patterns.append(tuple(ran))
    return patterns


@rubric("Decoder-only Transformer")
def test_attention_keys_name_the_layers_that_ran_under_layer_drop():
    """In training with layer drop, the dictionary holds 'layer{i}_dec_self' (i from 1, the
    layer's place in dec_layers) for exactly the layers that ran, each with that layer's weights."""
    layers = 5
    model = tiny_model(num_layers=layers, layer_drop_rate=0.5).train()
    ran = []
    model.dec_layers = nn.ModuleList(RecordingLayer(i, ran) for i in range(layers))
    tokens = random_tokens(2, 3)
    torch.manual_seed(11)
    seen_partial = 0
    for _ in range(40):
        ran.clear()
        _, attention = model(tokens)
        expected = [f"layer{i + 1}_dec_self" for i in ran]
        assert sorted(attention) == sorted(expected), (
            f"layers {[i + 1 for i in ran]} of {layers} ran: expected the keys {expected}, got "
            f"{sorted(attention)} (number keys by the layer's place in dec_layers, from 1)")
        for i in ran:
            weights = attention[f"layer{i + 1}_dec_self"]
            assert torch.equal(weights, torch.full_like(weights, float(i + 1))), (
                f"layer{i + 1}_dec_self must hold the weights layer {i + 1} returned")
        seen_partial += 0 < len(ran) < layers
    assert seen_partial, (
        f"layer_drop_rate=0.5: none of 40 training forwards ran some of the {layers} layers but not "
        f"all (expected about 39): is a dropped layer still run, or one draw used for the stack?")


@rubric("Decoder-only Transformer")
def test_layer_drop_only_in_training_one_draw_per_layer():
    layers, rate, trials = 6, 0.3, 300
    model = tiny_model(num_layers=layers, layer_drop_rate=rate).eval()
    for _ in range(5):
        _, attention = model(random_tokens(1, 2))
        assert len(attention) == layers, f"in eval mode no layer may be dropped: expected {layers} attention entries, got {len(attention)}"

    model.train()
    patterns = layer_drop_patterns(model, trials, seed=123)
    dropped = 1 - sum(len(p) for p in patterns) / (trials * layers)
    # 1800 Bernoulli(0.3) draws: the standard deviation of the dropped fraction is about 0.011.
    assert abs(dropped - rate) < 0.05, (
        f"layer_drop_rate={rate}: expected about {rate:.0%} of the layers dropped in training, got {dropped:.1%}"
    )
    partial = sum(0 < len(p) < layers for p in patterns) / trials
    # With one independent draw per layer, 1 - 0.7**6 - 0.3**6 = 88% of forwards drop some layers but not all.
    assert partial > 0.75, (
        f"expected each layer to be dropped independently (one torch.rand draw per layer): about 88% of "
        f"forwards should run some layers but not all, got {partial:.0%} (one draw for the whole stack?)"
    )
    # 20 forwards draw 120 numbers: enough to tell the same stream from another one.
    again = layer_drop_patterns(model, 20, seed=123)
    assert again == patterns[:20], (
        "torch.manual_seed(123) must reproduce which layers are dropped: draw with torch.rand, not "
        "Python's random or numpy"
    )
    assert layer_drop_patterns(model, 20, seed=7) != patterns[:20], (
        "a different torch seed must give different dropped layers: draw from torch's global RNG"
    )


@rubric("Decoder-only Transformer")
def test_initial_loss_is_near_uniform():
    model = tiny_model(num_classes=50, d_model=32, num_heads=4, d_ff=64, num_layers=2, weight_tying=True).eval()
    generator = torch.Generator().manual_seed(0)
    tokens = torch.randint(0, 50, (8, 12), generator=generator)
    logits, _ = model(tokens)
    loss = F.cross_entropy(logits.reshape(-1, 50), tokens.reshape(-1)).item()
    assert abs(loss - math.log(50)) < 0.25, f"initial loss {loss:.3f} should be close to ln(50) = {math.log(50):.3f}"


@rubric("Decoder-only Transformer")
def test_bad_configs_and_inputs_raise_clear_errors():
    from hw4lib.model import DecoderOnlyTransformer

    bad_configs = {
        "d_model": dict(d_model=30, num_heads=4),
        "num_layers": dict(num_layers=0),
        "d_ff": dict(d_ff=-8),
        "max_len": dict(max_len=0),
        "num_classes": dict(num_classes=0),
        "dropout": dict(dropout=1.0),
        "layer_drop_rate": dict(layer_drop_rate=-0.1),
    }
    for name, overrides in bad_configs.items():
        with pytest.raises(ValueError) as error:
            DecoderOnlyTransformer(**{**TINY, **overrides})
        assert name in str(error.value), f"the error for a bad {name} must name it, got: {error.value}"

    model = tiny_model().eval()
    with pytest.raises(ValueError) as error:
        model(random_tokens(1, 13))
    assert "13" in str(error.value) and "12" in str(error.value), f"must name T=13 and max_len=12: {error.value}"
    with pytest.raises(ValueError):
        model(torch.full((1, 3), TINY["num_classes"]))
    with pytest.raises(ValueError):
        model(torch.zeros(1, 3))



@rubric("Decoder-only Transformer")
def test_follows_the_input_device_and_dtype():
    """Every tensor forward builds (the masks, the positions) on the tokens' device, every float
    in the model's dtype: here meta (a CPU-built mask is off it, as on a GPU) and float64."""
    model = tiny_model(dropout=0.1)

    def forward(device):
        tokens = torch.zeros(2, 5, dtype=torch.long, device=device)
        return model.to(device, torch.float64)(tokens, torch.tensor([5, 3], device=device))

    check_built_on_input_device(forward, "DecoderOnlyTransformer", "the logits and the weights",
                                dtype=torch.float64)


@rubric("Decoder-only Transformer")
def test_a_second_forward_of_other_lengths_matches_a_fresh_model():
    check_second_call_is_fresh(
        tiny_model(),
        {"padded_targets": random_tokens(3, 6), "target_lengths": torch.tensor([6, 4, 2])},
        {"padded_targets": random_tokens(2, 4, seed=1), "target_lengths": torch.tensor([3, 4])},
        "DecoderOnlyTransformer")


if __name__ == "__main__":
    run_module(__name__)
