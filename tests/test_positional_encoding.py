"""PositionalEncoding: the closed-form sin/cos table, added and nothing else, with a length check."""
import math

import pytest
import torch

from tests.failure_messages import in_case
from tests.testing_framework import check_built_on_input_device, rubric, run_module

RUBRIC = {"Positional encoding": 0}
# Graded only through the language model's perplexity (testing_framework.py).
THROUGH_LM = ("Positional encoding",)


def closed_form_table(max_len: int, d_model: int) -> torch.Tensor:
    """P[t, 2i] = sin(t / 10000^(2i/d)), P[t, 2i+1] = cos(t / 10000^(2i/d)), one entry at a time."""
    rows = [[(math.sin if column % 2 == 0 else math.cos)(t / 10000 ** ((column - column % 2) / d_model))
             for column in range(d_model)] for t in range(max_len)]
    return torch.tensor(rows, dtype=torch.float64)


@rubric("Positional encoding")
def test_table_equals_closed_form():
    from hw4lib.model import PositionalEncoding

    for d_model, max_len in [(4, 6), (16, 50), (64, 128), (7, 9)]:
        with in_case(f"PositionalEncoding(d_model={d_model}, max_len={max_len})"):
            layer = PositionalEncoding(d_model, max_len)
        assert tuple(layer.pe.shape) == (1, max_len, d_model), (
            f"pe must have shape (1, max_len, d_model) = (1, {max_len}, {d_model}), got {tuple(layer.pe.shape)}"
        )
        assert layer.pe.dtype == torch.float32, (
            f"pe must be float32 like the model's embeddings, got {layer.pe.dtype}: build the table "
            "from float32 tensors (torch.zeros and torch.arange default to float32 and int64)"
        )
        expected = closed_form_table(max_len, d_model)
        wrong = ((layer.pe[0].double() - expected).abs() > 1e-5).nonzero()
        if len(wrong):
            t, column = wrong[0].tolist()
            kind = "sin" if column % 2 == 0 else "cos"
            angle = f"{t} / 10000^({column - column % 2}/{d_model})"
            raise AssertionError(
                f"d_model={d_model}, max_len={max_len}: {len(wrong)} entries differ from the closed "
                f"form; the first is pe[0, {t}, {column}]: expected {kind}({angle}) = "
                f"{expected[t, column]:.6f}, got {layer.pe[0, t, column].item():.6f}"
            )


@rubric("Positional encoding")
def test_pe_is_a_saved_buffer_not_a_parameter():
    from hw4lib.model import PositionalEncoding

    layer = PositionalEncoding(8, 10)
    assert len(list(layer.parameters())) == 0, "the table must not be a learnable parameter"
    assert any(buffer is layer.pe for buffer in layer.buffers()), "pe must be registered as a buffer"
    # The autograder loads handed-in state dicts strictly: the table has to be in them.
    assert "pe" in layer.state_dict(), "pe must be a persistent buffer (saved in state_dict)"


@rubric("Positional encoding")
def test_forward_adds_the_first_rows_and_changes_nothing_else():
    from hw4lib.model import PositionalEncoding

    torch.manual_seed(0)
    d_model, max_len = 16, 20
    layer = PositionalEncoding(d_model, max_len)
    expected_table = closed_form_table(max_len, d_model).float()
    for length in [1, 7, max_len]:
        x = torch.randn(3, length, d_model)
        x_before = x.clone()
        out = layer(x)
        assert out.shape == x.shape, f"expected output shape {tuple(x.shape)}, got {tuple(out.shape)}"
        assert out.dtype == x.dtype, f"expected a {x.dtype} output for a {x.dtype} input, got {out.dtype}"
        assert torch.equal(x, x_before), "forward must not modify its input in place"
        added = out - x
        for n in range(3):
            error = (added[n] - expected_table[:length]).abs().max().item()
            assert error < 1e-5, (
                f"T={length}: out - x must equal the rows 0..T-1 of the closed-form table (and x "
                f"must not be scaled) for every sequence; sequence {n} differs by {error:.2e}"
            )


@rubric("Positional encoding")
def test_the_gradient_reaches_the_embeddings_unchanged():
    """d(out)/dx is the identity: the embeddings below learn only through this path (a detached
    or no_grad output leaves the input embedding untrained)."""
    from hw4lib.model import PositionalEncoding

    torch.manual_seed(0)
    layer = PositionalEncoding(8, 10)
    x = torch.randn(2, 5, 8, requires_grad=True)
    upstream = torch.randn(2, 5, 8)
    out = layer(x)
    assert out.requires_grad, ("the output must stay in the autograd graph of x (no .detach(), "
                               ".data or torch.no_grad() in forward): the embeddings learn "
                               "through it")
    out.backward(upstream)
    assert x.grad is not None and torch.equal(x.grad, upstream), (
        "the gradient reaching x must equal the gradient of the output: out = x + P[:, :T]")


@rubric("Positional encoding")
def test_too_long_input_raises_a_clear_error():
    from hw4lib.model import PositionalEncoding

    layer = PositionalEncoding(8, 10)
    with pytest.raises(ValueError) as error:
        layer(torch.zeros(2, 11, 8))
    assert "11" in str(error.value) and "10" in str(error.value), (
        f"the error must name the length (11) and max_len (10), got: {error.value}"
    )



@rubric("Positional encoding")
def test_forward_follows_the_input_device_and_dtype():
    """The table is a buffer: it moves with the module (``.to(device, dtype)``), so forward needs
    no new tensor; one built there (a table rebuilt from torch.arange) lands on the CPU."""
    from hw4lib.model import PositionalEncoding

    layer = PositionalEncoding(8, 10)
    check_built_on_input_device(
        lambda device: layer.to(device, torch.float64)(
            torch.zeros(2, 5, 8, device=device, dtype=torch.float64)),
        "PositionalEncoding", "the output", dtype=torch.float64)


if __name__ == "__main__":
    run_module(__name__)
