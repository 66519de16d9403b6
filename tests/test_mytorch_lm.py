"""Bonus: the whole language model in numpy (mytorch), against PyTorch and finite differences.

Run ``python -m tests.test_mytorch_lm``. Every check runs in float64 with random weights (nonzero
biases and LayerNorm parameters) unless it says otherwise; comparisons are relative to the largest
entry of the truth, max|mine - truth| <= rtol * max(max|truth|, 1) (``tests/numeric_checks.py``).
The last two tests train small models, so they take a little longer.
"""
import itertools

import numpy as np
import pytest
import torch

from tests.numeric_checks import (RTOL_FINITE_DIFF, RTOL_TORCH, FixedDropout, assert_close,
                                  assert_matches_finite_differences, check_layer_against_torch,
                                  check_layer_finite_differences, check_second_calls,
                                  fixed_dropout, leaf, numerical_gradient)
from tests.testing_framework import rubric, run_module

RUBRIC = {"Bonus": 0}
BONUS = ("Bonus",)  # the student's own work, ungraded

D_MODEL, HEADS, D_FF, VOCAB, MAX_LEN = 16, 4, 24, 11, 12  # a small model for the exact checks


def randomize_(module: torch.nn.Module, seed: int, scale: float = 0.3) -> torch.nn.Module:
    """Overwrite every parameter of ``module`` (float64) with N(0, scale^2) draws; return it."""
    generator = torch.Generator().manual_seed(seed)
    module.double()
    with torch.no_grad():
        for parameter in module.parameters():
            parameter.copy_(torch.randn(parameter.shape, generator=generator, dtype=torch.float64)
                            * scale)
    return module


def torch_lm(weight_tying: bool, seed: int, dropout: float = 0.0):
    """hw4lib's DecoderOnlyTransformer, 2 layers, float64, random weights."""
    from hw4lib.model import DecoderOnlyTransformer

    torch.manual_seed(seed)
    model = DecoderOnlyTransformer(2, D_MODEL, HEADS, D_FF, dropout, MAX_LEN, VOCAB,
                                   weight_tying=weight_tying)
    return randomize_(model, seed)


def twin_of(model: torch.nn.Module, weight_tying: bool, dtype=np.float64):
    """mytorch's DecoderOnlyTransformer loaded with ``model``'s state dict."""
    from mytorch.nn import DecoderOnlyTransformer

    twin = DecoderOnlyTransformer(2, D_MODEL, HEADS, D_FF, MAX_LEN, VOCAB,
                                  weight_tying=weight_tying, dtype=dtype)
    twin.load_state_dict({k: v.detach().numpy().astype(dtype) for k, v in model.state_dict().items()})
    return twin


def load_attention(twin_mha, mha: torch.nn.MultiheadAttention) -> None:
    """Copy torch's fused attention weights into mytorch's MultiHeadAttention."""
    weights = [w.detach().numpy() for w in mha.in_proj_weight.chunk(3)]
    biases = [b.detach().numpy() for b in mha.in_proj_bias.chunk(3)]
    twin_mha.init_weights(weights[0], biases[0], weights[1], biases[1], weights[2], biases[2],
                          mha.out_proj.weight.detach().numpy(), mha.out_proj.bias.detach().numpy())


def load_affine(twin_layer, layer: torch.nn.Module) -> None:
    """Copy a torch Linear or LayerNorm (weight, bias) into its mytorch twin."""
    twin_layer.init_weights(layer.weight.detach().numpy().copy(), layer.bias.detach().numpy().copy())


def twin_from_torch(twin, layer: torch.nn.Module) -> None:
    """Copy a torch sublayer's or decoder layer's weights into its numpy twin."""
    if hasattr(layer, "self_attn"):
        twin_from_torch(twin.self_attn, layer.self_attn)
        twin_from_torch(twin.ffn, layer.ffn)
        return
    if hasattr(layer, "mha"):
        load_attention(twin.mha, layer.mha)
    else:
        load_affine(twin.ffn[0], layer.ffn[0])
        load_affine(twin.ffn[3], layer.ffn[3])
    load_affine(twin.norm, layer.norm)


def padded_batch(rng: np.random.Generator, N: int = 3, T: int = 7):
    """Random tokens (N, T) and lengths (N,) with row 0 unpadded and the others padded."""
    tokens = rng.integers(0, VOCAB, size=(N, T))
    lengths = np.array([T] + list(rng.integers(1, T, size=N - 1)))
    return tokens, lengths


def masks(lengths: np.ndarray, T: int):
    """key_padding_mask (N, T) and causal attn_mask (T, T), True = ignore."""
    positions = np.arange(T)
    return positions[None, :] >= lengths[:, None], positions[None, :] > positions[:, None]


def check_input_gradient_by_finite_differences(forward, backward, x, upstream, where: str):
    """backward(upstream) against finite differences of sum(forward(x) * upstream) in x."""
    forward(x)
    mine = backward(upstream)
    loss = lambda: float(np.sum(forward(x) * upstream))  # noqa: E731
    assert_matches_finite_differences(loss, [("dLdx", mine, x)], f"{where}: ")


def tiny_config_on_a_small_corpus(tmp_path, batch_size: int):
    """configs/tiny.yaml, seed 0, on a small corpus that the data generator writes into tmp_path
    (in a fraction of a second, so these tests need no `make data`)."""
    from datagen.build_data import build
    from hw4lib.train import load_config

    build(tmp_path / "data", seed=0, sizes={"train": 120_000, "val": 10_000, "test": 10_000})
    return load_config("configs/tiny.yaml", {"seed": 0, "data.root": str(tmp_path / "data"),
                                             "data.subset": 1.0, "data.batch_size": batch_size})


# ---------------------------------------------------------------------------------------------
# The layers
# ---------------------------------------------------------------------------------------------

@rubric("Bonus")
def test_embedding_matches_torch_and_finite_differences():
    from mytorch.nn import Embedding

    rng = np.random.default_rng(0)
    W = rng.standard_normal((VOCAB, 5))
    ids = np.array([[1, 3, 3, 0], [3, 10, 1, 1]])  # repeated ids must accumulate
    upstream = rng.standard_normal((2, 4, 5))
    layer = Embedding(VOCAB, 5)
    layer.init_weights(W)
    out = layer.forward(ids)
    layer.backward(upstream)
    tW = leaf(W)
    torch_out = torch.nn.functional.embedding(torch.from_numpy(ids), tW)
    torch_out.backward(torch.from_numpy(upstream))
    assert_close("Embedding.forward", out, torch_out)
    assert_close("Embedding.backward: dLdW (ids used twice collect both gradients)", layer.dLdW,
                 tW.grad)
    loss = lambda: float(np.sum(layer.forward(ids) * upstream))  # noqa: E731
    assert_matches_finite_differences(loss, [("dLdW", layer.dLdW, layer.W)], "Embedding: ")


@rubric("Bonus")
def test_layer_norm_matches_torch_and_finite_differences():
    from mytorch.nn import LayerNorm

    rng = np.random.default_rng(1)
    for shape in [(6,), (3, 6), (2, 3, 6)]:
        A, upstream = rng.standard_normal(shape) * 3 + 1, rng.standard_normal(shape)
        W, b = rng.standard_normal(6), rng.standard_normal(6)
        layer = LayerNorm(6)
        layer.init_weights(W, b)
        where = f"LayerNorm on {shape}"
        check_layer_against_torch(
            layer, lambda tA, tW, tb: torch.nn.functional.layer_norm(tA, (6,), tW, tb, eps=1e-5),
            A, W, b, upstream, where, "forward")
        check_layer_finite_differences(layer, A, upstream, f"{where}: ")


@rubric("Bonus")
def test_gelu_is_the_exact_erf_form():
    from mytorch.nn import GELU, erf

    rng = np.random.default_rng(2)
    x = np.concatenate([rng.standard_normal(200) * 3, [-12.0, -6.0, 0.0, 6.0, 12.0]])
    assert_close("erf (float64) against torch.erf", erf(x), torch.erf(torch.from_numpy(x)), 1e-14)
    x32 = x.astype(np.float32)
    assert erf(x32).dtype == np.float32, f"erf: float32 in, got {erf(x32).dtype}"
    # float32: A&S 7.1.26 (off by up to 1.5e-7) plus float32 rounding, against the exact erf.
    assert_close("erf (float32) against torch.erf", erf(x32),
                 torch.erf(torch.from_numpy(x32.astype(np.float64))), 4e-7)

    upstream = rng.standard_normal(x.shape)
    layer = GELU()
    out = layer.forward(x)
    dLdx = layer.backward(upstream)
    tx = leaf(x)
    torch_out = torch.nn.functional.gelu(tx)  # the exact form, not approximate="tanh"
    torch_out.backward(torch.from_numpy(upstream))
    assert_close("GELU.forward (float64)", out, torch_out)
    assert_close("GELU.backward (float64)", dLdx, tx.grad)
    check_input_gradient_by_finite_differences(layer.forward, layer.backward, x, upstream, "GELU")

    out32 = layer.forward(x32)
    assert out32.dtype == np.float32, f"GELU: float32 in, got {out32.dtype} out"
    assert_close("GELU.forward (float32) against torch's float32 GELU", out32,
                 torch.nn.functional.gelu(torch.from_numpy(x32)), 1e-6)


@rubric("Bonus")
def test_dropout_masks_and_scales_in_training_only():
    from mytorch.nn import Dropout

    rng = np.random.default_rng(3)
    A, upstream = rng.standard_normal((200, 50)), rng.standard_normal((200, 50))
    layer = Dropout(0.25, np.random.default_rng(7))
    out = layer.forward(A)
    kept = out != 0
    assert abs(1 - kept.mean() - 0.25) < 0.02, (f"Dropout(0.25): expected about 25% zeros, got "
                                                f"{1 - kept.mean():.1%}")
    assert_close("Dropout: kept entries are scaled by 1 / (1 - p)", out[kept], A[kept] / 0.75)
    assert_close("Dropout.backward: the same mask and scale as forward", layer.backward(upstream),
                 upstream * kept / 0.75)
    again = Dropout(0.25, np.random.default_rng(7)).forward(A)
    assert np.array_equal(again, out), "Dropout: the same seed must draw the same mask"
    layer.training = False
    assert np.array_equal(layer.forward(A), A), "Dropout in evaluation mode must be the identity"
    assert np.array_equal(layer.backward(upstream), upstream), \
        "Dropout.backward in evaluation mode must pass the gradient unchanged"


@rubric("Bonus")
def test_layers_keep_nothing_from_one_call_for_the_next():
    """Each layer's second forward (other shapes) and two backwards after it, against a fresh
    layer; Dropout draws a new mask at every forward; a second backward of the loss after one
    forward gives the first's gradient again."""
    from hw4lib.model import SelfAttentionDecoderLayer
    from mytorch.nn import GELU, CrossEntropyLoss, Dropout, Embedding, LayerNorm
    from mytorch.nn import SelfAttentionDecoderLayer as TwinDecoderLayer

    rng = np.random.default_rng(9)
    W, gain, bias = rng.standard_normal((VOCAB, 5)), rng.standard_normal(6), rng.standard_normal(6)
    weights = randomize_(SelfAttentionDecoderLayer(D_MODEL, HEADS, D_FF, dropout=0.0), 9)

    def loaded(layer, *weights):
        layer.init_weights(*weights)
        return layer

    def decoder_layer():
        twin = TwinDecoderLayer(D_MODEL, HEADS, D_FF)
        twin_from_torch(twin, weights)
        return twin

    check_second_calls(  # its sublayers and their MultiHeadAttention, with other masks
        decoder_layer, (rng.standard_normal((3, 6, D_MODEL)), *masks(np.array([6, 4, 2]), 6)),
        (rng.standard_normal((2, 4, D_MODEL)), *masks(np.array([3, 4]), 4)),
        (rng.standard_normal((2, 4, D_MODEL)), rng.standard_normal((2, 4, D_MODEL))),
        lambda layer: {}, "SelfAttentionDecoderLayer (the twin)")

    cases = [  # (what, make, first input, second input, what backward stores)
        ("Embedding", lambda: loaded(Embedding(VOCAB, 5), W), np.array([[1, 3], [3, 0]]),
         np.array([4, 4, 2]), lambda layer: {"dLdW": layer.dLdW}),
        ("LayerNorm", lambda: loaded(LayerNorm(6), gain, bias), rng.standard_normal((2, 3, 6)),
         rng.standard_normal((3, 6)), lambda layer: {"dLdW": layer.dLdW, "dLdb": layer.dLdb}),
        ("GELU", GELU, rng.standard_normal((2, 3, 6)), rng.standard_normal((3, 6)),
         lambda layer: {}),
    ]
    for what, make, first, second, stored in cases:
        shape = (*second.shape, 5) if what == "Embedding" else second.shape
        check_second_calls(make, (first,), (second,),
                           (rng.standard_normal(shape), rng.standard_normal(shape)), stored, what)

    dropout, ones = Dropout(0.5, np.random.default_rng(8)), np.ones((40, 50))
    dropout.forward(ones)
    second = dropout.forward(ones)
    assert not np.array_equal(second, Dropout(0.5, np.random.default_rng(8)).forward(ones)), (
        "Dropout: a second forward must draw a new mask, not reuse the first call's")
    assert_close("Dropout.backward after two forwards: the second forward's mask",
                 dropout.backward(ones), second)

    loss_fn, logits = CrossEntropyLoss(), rng.standard_normal((3, 4, 7))
    loss_fn.forward(logits, rng.integers(0, 7, size=(3, 4)))
    first_gradient = loss_fn.backward().copy()
    assert_close("CrossEntropyLoss: a second backward after one forward (the first is the "
                 "truth)", loss_fn.backward(), first_gradient)


@rubric("Bonus")
def test_cross_entropy_matches_torch_with_ignore_index():
    from mytorch.nn import CrossEntropyLoss

    rng = np.random.default_rng(4)
    logits = rng.standard_normal((3, 5, 7)) * 4
    targets = rng.integers(0, 7, size=(3, 5))
    targets[1, 3:] = targets[2, 4] = 0  # 0 plays the pad id
    for reduction in ("mean", "sum"):
        loss_fn = CrossEntropyLoss(ignore_index=0, reduction=reduction)
        loss = loss_fn.forward(logits, targets)
        grad = loss_fn.backward()
        tl = leaf(logits)
        torch_loss = torch.nn.functional.cross_entropy(tl.reshape(-1, 7),
                                                       torch.from_numpy(targets).reshape(-1),
                                                       ignore_index=0, reduction=reduction)
        torch_loss.backward()
        assert_close(f"CrossEntropyLoss({reduction}): loss", np.array(loss), torch_loss)
        assert_close(f"CrossEntropyLoss({reduction}): dlogits (0 on ignored targets)", grad, tl.grad)
        loss_of = lambda: loss_fn.forward(logits, targets)  # noqa: E731
        assert_close(f"CrossEntropyLoss({reduction}): dlogits against finite differences", grad,
                     numerical_gradient(loss_of, logits), RTOL_FINITE_DIFF)
    huge = np.array([[1000.0, -1000.0, 0.0]])
    loss = CrossEntropyLoss().forward(huge, np.array([1]))
    assert np.isclose(loss, 2000.0), f"CrossEntropyLoss on logits +-1000: expected 2000, got {loss}"
    # A batch of padding only (every target ignored): the mean over no position is 0, with a zero
    # gradient, and nothing divides by zero.
    with np.errstate(all="raise"):
        for reduction in ("mean", "sum"):
            loss_fn = CrossEntropyLoss(ignore_index=0, reduction=reduction)
            loss = loss_fn.forward(logits, np.zeros_like(targets))
            grad = loss_fn.backward()
            assert loss == 0.0, f"CrossEntropyLoss({reduction}) with every target ignored: expected 0, got {loss}"
            assert grad.shape == logits.shape and not grad.any(), (
                f"CrossEntropyLoss({reduction}).backward with every target ignored: expected zeros "
                f"of shape {logits.shape}, got {grad.shape} with max |value| {np.abs(grad).max()}")


@rubric("Bonus")
def test_positional_encoding_matches_hw4lib():
    from hw4lib.model import PositionalEncoding as TorchPositionalEncoding
    from mytorch.nn import PositionalEncoding

    for d_model in (16, 7):
        mine = PositionalEncoding(d_model, 40)
        theirs = TorchPositionalEncoding(d_model, 40).pe  # built in float32
        assert_close(f"PositionalEncoding(d_model={d_model}).pe", mine.pe, theirs.double(), 1e-6)
        x = np.random.default_rng(5).standard_normal((2, 9, d_model))
        assert_close("PositionalEncoding.forward: x + pe[:, :T]", mine.forward(x),
                     x + mine.pe[:, :9])
        assert np.array_equal(mine.backward(x), x), "PositionalEncoding.backward is the identity"


@rubric("Bonus")
def test_sublayers_and_decoder_layer_match_torch_and_finite_differences():
    from hw4lib.model import FeedForwardLayer, SelfAttentionDecoderLayer, SelfAttentionLayer
    from mytorch import nn as twin_nn

    rng = np.random.default_rng(6)
    x, upstream = rng.standard_normal((3, 7, D_MODEL)), rng.standard_normal((3, 7, D_MODEL))
    lengths = np.array([7, 4, 2])
    padding, causal = masks(lengths, 7)

    cases = [  # name, torch layer, twin, loader, whether the layer takes masks
        ("SelfAttentionLayer", SelfAttentionLayer(D_MODEL, HEADS),
         twin_nn.SelfAttentionLayer(D_MODEL, HEADS), twin_from_torch, True),
        ("FeedForwardLayer", FeedForwardLayer(D_MODEL, D_FF), twin_nn.FeedForwardLayer(D_MODEL, D_FF),
         twin_from_torch, False),
        ("SelfAttentionDecoderLayer", SelfAttentionDecoderLayer(D_MODEL, HEADS, D_FF, dropout=0.0),
         twin_nn.SelfAttentionDecoderLayer(D_MODEL, HEADS, D_FF), twin_from_torch, True),
    ]
    for seed, (name, layer, twin, load, takes_masks) in enumerate(cases):
        randomize_(layer, seed).eval()
        load(twin, layer)
        mask_args = (padding, causal) if takes_masks else ()
        tx = leaf(x)
        torch_out = layer(tx, *(torch.from_numpy(m) for m in mask_args))
        torch_out = torch_out[0] if isinstance(torch_out, tuple) else torch_out
        torch_out.backward(torch.from_numpy(upstream))
        assert_close(f"{name}.forward", twin.forward(x, *mask_args), torch_out)
        assert_close(f"{name}.backward: dLdx", twin.backward(upstream), tx.grad)
        check_input_gradient_by_finite_differences(lambda v: twin.forward(v, *mask_args),
                                                   twin.backward, x, upstream, name)


# ---------------------------------------------------------------------------------------------
# The whole model
# ---------------------------------------------------------------------------------------------

class FixedDraws:
    """Stands in for the twin's ``np.random.Generator``: the uniform draws FixedDropout makes for
    each shape, so the twin's dropout masks are the very ones torch's layers use under
    ``fixed_dropout()``."""

    @staticmethod
    def random(shape):
        return FixedDropout.draws(shape).double().numpy()


def twin_dropouts(twin):
    """Every Dropout of a twin sublayer, decoder layer or model."""
    from mytorch.nn import Dropout

    found, stack = [], [twin]
    while stack:
        item = stack.pop()
        if isinstance(item, Dropout):
            found.append(item)
        elif isinstance(item, list):
            stack.extend(item)
        elif hasattr(item, "__dict__") and not isinstance(item, np.ndarray):
            stack.extend(vars(item).values())
    return found


@rubric("Bonus")
def test_dropout_sits_where_torch_puts_it_with_fixed_masks():
    """In training with p > 0, with the same known masks on both sides (torch's attention-weight
    dropout off, which the twin does not have), each twin drops exactly what torch drops: forward
    and dLdx agree, so a dropout moved, missing or applied to the gradient wrongly shows."""
    from hw4lib.model import FeedForwardLayer, SelfAttentionDecoderLayer, SelfAttentionLayer
    from mytorch import nn as twin_nn

    p = 0.5  # a keep scale of exactly 2 in float32 and float64 alike
    rng = np.random.default_rng(16)
    x, upstream = rng.standard_normal((2, 5, D_MODEL)), rng.standard_normal((2, 5, D_MODEL))
    cases = [
        ("SelfAttentionLayer", SelfAttentionLayer(D_MODEL, HEADS, dropout=p),
         twin_nn.SelfAttentionLayer(D_MODEL, HEADS, dropout=p)),
        ("FeedForwardLayer", FeedForwardLayer(D_MODEL, D_FF, dropout=p),
         twin_nn.FeedForwardLayer(D_MODEL, D_FF, dropout=p)),
        ("SelfAttentionDecoderLayer", SelfAttentionDecoderLayer(D_MODEL, HEADS, D_FF, dropout=p),
         twin_nn.SelfAttentionDecoderLayer(D_MODEL, HEADS, D_FF, dropout=p)),
    ]
    for seed, (name, layer, twin) in enumerate(cases):
        randomize_(layer, seed).train()
        for module in layer.modules():
            if isinstance(module, torch.nn.MultiheadAttention):
                module.dropout = 0.0
        twin_from_torch(twin, layer)
        dropouts = twin_dropouts(twin)
        assert dropouts and all(d.p == p for d in dropouts), f"{name}: every Dropout gets p={p}"
        for dropout in dropouts:
            dropout.rng, dropout.training = FixedDraws(), True
        tx = leaf(x)
        with fixed_dropout() as fixed:
            out = layer(tx)
            out = out[0] if isinstance(out, tuple) else out
        out.backward(torch.from_numpy(upstream))
        assert fixed.calls, f"{name}: torch's dropouts did not act"
        assert_close(f"{name}.forward in training, dropout {p} with fixed masks", twin.forward(x), out)
        assert_close(f"{name}.backward in training: dLdx through the same masks",
                     twin.backward(upstream), tx.grad)

    model = torch_lm(weight_tying=False, seed=5, dropout=p).train()  # embedding dropout too
    for module in model.modules():
        if isinstance(module, torch.nn.MultiheadAttention):
            module.dropout = 0.0
    twin = twin_of(model, weight_tying=False)
    twin.train()
    for dropout in twin_dropouts(twin):
        dropout.p, dropout.rng = p, FixedDraws()
    tokens, lengths = padded_batch(rng)
    with fixed_dropout():
        logits, _ = model(torch.from_numpy(tokens), torch.from_numpy(lengths))
    upstream = rng.standard_normal(logits.shape)
    logits.backward(torch.from_numpy(upstream))
    assert_close(f"DecoderOnlyTransformer.forward in training, dropout {p} with fixed masks",
                 twin.forward(tokens, lengths), logits)
    twin.backward(upstream)
    gradients = twin.gradients()
    for name, parameter in model.named_parameters():
        assert_close(f"DecoderOnlyTransformer in training, dropout {p}: gradient of {name}",
                     gradients[name], parameter.grad)


@rubric("Bonus")
def test_float32_stays_float32_through_every_backward():
    """float32 in, float32 out, gradients included: a float64 constant (a mask built as float64,
    np.sqrt(2 * np.pi), np.float64 scalars) silently promotes a backward pass."""
    from mytorch import nn as twin_nn

    rng = np.random.default_rng(17)
    f32 = lambda *shape: rng.standard_normal(shape).astype(np.float32)  # noqa: E731

    def check(name, value):
        assert value.dtype == np.float32, f"{name}: float32 in, expected float32, got {value.dtype}"

    layer_norm = twin_nn.LayerNorm(6)
    layer_norm.init_weights(f32(6), f32(6))
    dropout = twin_nn.Dropout(0.3, np.random.default_rng(0))
    for name, layer in (("LayerNorm", layer_norm), ("GELU", twin_nn.GELU()), ("Dropout(0.3)", dropout),
                        ("PositionalEncoding", twin_nn.PositionalEncoding(6, 10))):
        x = f32(2, 5, 6)
        check(f"{name}.forward", layer.forward(x))
        check(f"{name}.backward: dLdA", layer.backward(f32(2, 5, 6)))
    check("LayerNorm.backward: dLdW", layer_norm.dLdW)
    check("LayerNorm.backward: dLdb", layer_norm.dLdb)
    embedding = twin_nn.Embedding(9, 6)
    embedding.init_weights(f32(9, 6))
    check("Embedding.forward", embedding.forward(rng.integers(0, 9, (2, 5))))
    embedding.backward(f32(2, 5, 6))
    check("Embedding.backward: dLdW", embedding.dLdW)
    loss = twin_nn.CrossEntropyLoss(ignore_index=0)
    loss.forward(f32(2, 5, 9), rng.integers(0, 9, (2, 5)))
    check("CrossEntropyLoss.backward: dlogits", loss.backward())

    from hw4lib.model.state_dict_contract import expected_entries

    config = {"num_layers": 2, "d_model": D_MODEL, "d_ff": D_FF, "max_len": MAX_LEN}
    model = twin_nn.DecoderOnlyTransformer(2, D_MODEL, HEADS, D_FF, MAX_LEN, VOCAB, dropout=0.2,
                                           dtype=np.float32)
    model.load_state_dict({key: f32(*entry.shape) * 0.3
                           for key, entry in expected_entries(config, VOCAB).items()})
    model.train()
    tokens = rng.integers(0, VOCAB, (2, 7))
    logits = model.forward(tokens, lengths=np.array([7, 4]))
    check("DecoderOnlyTransformer.forward (training, dropout 0.2): logits", logits)
    model.backward(f32(*logits.shape))
    for key, gradient in model.gradients().items():
        check(f"DecoderOnlyTransformer.backward: gradient of {key}", gradient)


@rubric("Bonus")
def test_transformer_logits_and_every_gradient_match_autograd():
    rng = np.random.default_rng(7)
    tokens, lengths = padded_batch(rng)
    for weight_tying in (False, True):
        model = torch_lm(weight_tying, seed=int(weight_tying))
        twin = twin_of(model, weight_tying)
        where = f"DecoderOnlyTransformer(weight_tying={weight_tying}), lengths {lengths.tolist()}"
        logits, _ = model(torch.from_numpy(tokens), torch.from_numpy(lengths))
        upstream = rng.standard_normal(logits.shape)
        logits.backward(torch.from_numpy(upstream))
        assert_close(f"{where}: forward logits", twin.forward(tokens, lengths), logits, RTOL_TORCH)
        twin.backward(upstream)
        gradients = twin.gradients()
        expected = dict(model.named_parameters())
        assert sorted(gradients) == sorted(expected), (
            f"{where}: gradients() keys should be the torch parameter names {sorted(expected)}, "
            f"got {sorted(gradients)}")
        for name, parameter in expected.items():
            assert_close(f"{where}: gradient of {name}", gradients[name], parameter.grad, RTOL_TORCH)


@rubric("Bonus")
def test_transformer_gradients_match_finite_differences():
    rng = np.random.default_rng(8)
    tokens, lengths = padded_batch(rng, N=2, T=5)
    for weight_tying in (False, True):
        twin = twin_of(torch_lm(weight_tying, seed=3), weight_tying)
        upstream = rng.standard_normal((2, 5, VOCAB))
        twin.forward(tokens, lengths)
        twin.backward(upstream)
        gradients, parameters = twin.gradients(), twin.parameters()
        loss = lambda: float(np.sum(twin.forward(tokens, lengths) * upstream))  # noqa: E731
        checked = ["target_embedding.weight", "dec_layers.0.self_attn.norm.weight",
                   "dec_layers.1.ffn.ffn.0.bias", "norm.bias", "final_linear.bias"]
        assert_matches_finite_differences(
            loss, [(name, gradients[name], parameters[name]) for name in checked],
            f"DecoderOnlyTransformer(weight_tying={weight_tying}): gradient of ")


@rubric("Bonus")
def test_transformer_load_state_dict_names_bad_keys():
    from mytorch.nn import DecoderOnlyTransformer

    state = {k: v.detach().numpy() for k, v in torch_lm(False, seed=0).state_dict().items()}
    twin = DecoderOnlyTransformer(2, D_MODEL, HEADS, D_FF, MAX_LEN, VOCAB)
    assert twin.state_dict_keys() == list(state), (
        f"state_dict_keys() should list torch's keys in order {list(state)}, "
        f"got {twin.state_dict_keys()}")
    bad_cases = {
        "norm.bias": {k: v for k, v in state.items() if k != "norm.bias"},
        "extra.weight": {**state, "extra.weight": np.zeros(3)},
        "final_linear.bias": {**state, "final_linear.bias": np.zeros(VOCAB + 1)},
    }
    for key, bad_state in bad_cases.items():
        with pytest.raises(ValueError) as caught:
            twin.load_state_dict(bad_state)
        assert key in str(caught.value), (f"load_state_dict: the ValueError should name {key!r}, "
                                          f"got {caught.value}")
    # An untied model's state has every key a tied one has, but two different output matrices.
    tied = DecoderOnlyTransformer(2, D_MODEL, HEADS, D_FF, MAX_LEN, VOCAB, weight_tying=True)
    with pytest.raises(ValueError) as caught:
        tied.load_state_dict(state)
    assert "final_linear.weight" in str(caught.value) and "untied" in str(caught.value), (
        f"load_state_dict of an untied state into a tied model: the ValueError should name "
        f"final_linear.weight and say the state is untied, got {caught.value}")


# ---------------------------------------------------------------------------------------------
# The optimizer and training
# ---------------------------------------------------------------------------------------------

@rubric("Bonus")
def test_adamw_and_clipping_match_torch_over_20_steps():
    from mytorch.optim import AdamW, clip_grad_norm

    rng = np.random.default_rng(9)
    shapes = {"a": (4, 3), "b": (3,), "c": (5,)}
    params = {name: rng.standard_normal(shape) for name, shape in shapes.items()}
    tensors = {name: torch.nn.Parameter(torch.tensor(p)) for name, p in params.items()}
    groups = [({"a", "b"}, 0.01, 0.1), ({"c"}, 0.03, 0.0)]  # names, lr, weight decay
    mine = AdamW([{"params": {n: params[n] for n in names}, "lr": lr, "weight_decay": wd}
                  for names, lr, wd in groups], betas=(0.9, 0.98), eps=1e-8)
    theirs = torch.optim.AdamW([{"params": [tensors[n] for n in sorted(names)], "lr": lr,
                                 "weight_decay": wd} for names, lr, wd in groups],
                               betas=(0.9, 0.98), eps=1e-8)
    for step in range(20):
        gradients = {name: rng.standard_normal(shape) * (5 if step % 3 == 0 else 0.2)
                     for name, shape in shapes.items()}
        for name, g in gradients.items():
            tensors[name].grad = torch.tensor(g)
        norm = clip_grad_norm(gradients, 1.0)
        torch_norm = torch.nn.utils.clip_grad_norm_(list(tensors.values()), 1.0)
        assert_close(f"clip_grad_norm at step {step}: the total norm", np.array(norm), torch_norm)
        for name in shapes:
            assert_close(f"clip_grad_norm at step {step}: clipped gradient of {name}",
                         gradients[name], tensors[name].grad)
        mine.step(gradients)
        theirs.step()
        for name in shapes:
            assert_close(f"AdamW after step {step + 1}: {name}", params[name], tensors[name])


@rubric("Bonus")
@pytest.mark.slow
def test_numpy_training_tracks_torch_on_the_tiny_config(tmp_path):
    """20 updates of configs/tiny.yaml (batches of 8) in float64: the same loss at every step."""
    from hw4lib.train import build_datasets, build_loaders, build_model, build_tokenizer, set_seed
    from hw4lib.utils import create_optimizer, create_scheduler
    from hw4lib.numpy_twin import numpy_model_from_state, train_numpy

    config = tiny_config_on_a_small_corpus(tmp_path, batch_size=8)
    assert config.model.dropout == 0.0, "configs/tiny.yaml should have dropout 0"
    set_seed(config.seed)
    tokenizer = build_tokenizer(config)
    train_loader = build_loaders(config, build_datasets(config, tokenizer))[0]
    model = build_model(config, tokenizer).double()
    twin = numpy_model_from_state(config.model, model.state_dict(), np.float64)
    batches = list(itertools.islice(train_loader, 20))

    # numpy first: its twin starts from the torch model's initial weights.
    numpy_losses = train_numpy(twin, model, config, batches, train_loader, tokenizer.pad_id)

    optimizer = create_optimizer(model, config.optimizer)
    scheduler = create_scheduler(optimizer, config.scheduler, train_loader, 1)
    criterion = torch.nn.CrossEntropyLoss(ignore_index=tokenizer.pad_id)
    model.train()
    torch_losses = []
    for shifted, golden, lengths in batches:  # LMTrainer's step, one batch per update
        logits, _ = model(shifted, lengths)
        loss = criterion(logits.reshape(-1, logits.size(-1)), golden.reshape(-1))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), config.training.grad_clip_norm)
        optimizer.step()
        optimizer.zero_grad()
        scheduler.step()
        torch_losses.append(loss.item())

    differences = np.abs(np.array(numpy_losses) - np.array(torch_losses))
    assert differences.max() <= 1e-6, (
        f"numpy training loss differs from torch's by up to {differences.max():.2e} (step "
        f"{differences.argmax()}); torch {np.round(torch_losses, 6).tolist()}, numpy "
        f"{np.round(numpy_losses, 6).tolist()}")
    assert torch_losses[-1] < torch_losses[0], "the 20 updates should lower the loss"


@rubric("Bonus")
@pytest.mark.slow
def test_trained_float32_weights_give_torchs_perplexity_and_greedy_tokens(tmp_path):
    """A tiny model trained briefly with torch: numpy's per-character perplexity equals torch's
    to 4 decimals and greedy decoding through SequenceGenerator yields the same tokens."""
    from hw4lib.decoding import SequenceGenerator
    from hw4lib.train import build_datasets, build_loaders, build_model, build_tokenizer, set_seed
    from hw4lib.trainers.metrics import evaluate_language_model
    from hw4lib.utils import create_optimizer
    from hw4lib.numpy_twin import evaluate_numpy_model, numpy_model_from_state, numpy_score_fn

    config = tiny_config_on_a_small_corpus(tmp_path, batch_size=16)
    set_seed(config.seed)
    tokenizer = build_tokenizer(config)
    datasets = build_datasets(config, tokenizer)
    train_loader, _, test_loader = build_loaders(config, datasets)
    model = build_model(config, tokenizer)
    optimizer = create_optimizer(model, config.optimizer)
    criterion = torch.nn.CrossEntropyLoss(ignore_index=tokenizer.pad_id)
    for shifted, golden, lengths in train_loader:  # one epoch, about 35 updates
        logits, _ = model(shifted, lengths)
        criterion(logits.reshape(-1, logits.size(-1)), golden.reshape(-1)).backward()
        optimizer.step()
        optimizer.zero_grad()
    model.eval()
    twin = numpy_model_from_state(config.model, model.state_dict(), np.float32)

    torch_metrics = evaluate_language_model(model, test_loader, "cpu")
    numpy_metrics = evaluate_numpy_model(twin, test_loader)
    for key in ("perplexity_char", "perplexity_token"):
        assert abs(numpy_metrics[key] - torch_metrics[key]) < 5e-5, (
            f"{key}: numpy {numpy_metrics[key]:.6f}, torch {torch_metrics[key]:.6f}")

    prompts, _ = datasets[2].sample_prompts(4, 8, seed=0)
    with torch.no_grad():
        expected, _ = SequenceGenerator(model.score, tokenizer, 30, "cpu").generate_greedy(prompts)
    got, _ = SequenceGenerator(numpy_score_fn(twin), tokenizer, 30, "cpu").generate_greedy(prompts)
    assert torch.equal(got, expected), (f"greedy tokens differ: torch {expected.tolist()}, "
                                        f"numpy {got.tolist()}")


if __name__ == "__main__":
    run_module(__name__)
