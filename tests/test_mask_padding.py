"""PadMask: (N, T) bool, True at padding, for (N, T) and (N, T, ...) inputs."""
import torch

from tests.failure_messages import in_case
from tests.testing_framework import check_built_on_input_device, rubric, run_module

RUBRIC = {"Padding mask": 0}
# Graded only through the language model's perplexity (testing_framework.py).
THROUGH_LM = ("Padding mask",)

F, T_ = False, True


@rubric("Padding mask")
def test_pad_mask_matches_hand_written_matrices():
    from hw4lib.model import PadMask

    cases = {
        "spec example": (
            torch.tensor([[1, 2, 3, 0, 0], [1, 2, 0, 0, 0]]), torch.tensor([3, 2]),
            torch.tensor([[F, F, F, T_, T_], [F, F, T_, T_, T_]]),
        ),
        "no padding": (
            torch.ones(2, 3, dtype=torch.long), torch.tensor([3, 3]),
            torch.tensor([[F, F, F], [F, F, F]]),
        ),
        "one full, one length 1, one empty": (
            torch.zeros(3, 4, dtype=torch.long), torch.tensor([4, 1, 0]),
            torch.tensor([[F, F, F, F], [F, T_, T_, T_], [T_, T_, T_, T_]]),
        ),
        "single sequence, T=1": (torch.tensor([[5]]), torch.tensor([1]), torch.tensor([[F]])),
    }
    for name, (padded, lengths, expected) in cases.items():
        with in_case(name, padded_input=padded, input_lengths=lengths):
            mask = PadMask(padded, lengths)
        assert mask.dtype == torch.bool, f"{name}: expected dtype torch.bool, got {mask.dtype}"
        assert mask.shape == expected.shape, f"{name}: expected shape {tuple(expected.shape)}, got {tuple(mask.shape)}"
        assert torch.equal(mask, expected), f"{name}: expected\n{expected}\ngot\n{mask}"


@rubric("Padding mask")
def test_pad_mask_of_feature_inputs():
    from hw4lib.model import PadMask

    lengths = torch.tensor([3, 2])
    expected = torch.tensor([[F, F, F, T_, T_], [F, F, T_, T_, T_]])
    for shape in [(2, 5, 8), (2, 5, 3, 2)]:
        inputs = torch.randn(shape)
        with in_case(f"input {shape}", padded_input=inputs, input_lengths=lengths):
            mask = PadMask(inputs, lengths)
        assert mask.shape == (2, 5), f"input {shape}: expected shape (2, 5), got {tuple(mask.shape)}"
        assert mask.dtype == torch.bool, f"input {shape}: expected dtype torch.bool, got {mask.dtype}"
        assert torch.equal(mask, expected), f"input {shape}: expected\n{expected}\ngot\n{mask}"


@rubric("Padding mask")
def test_pad_mask_matches_definition_on_a_random_batch():
    from hw4lib.model import PadMask

    generator = torch.Generator().manual_seed(0)
    batch, length = 64, 40
    lengths = torch.randint(0, length + 1, (batch,), generator=generator)
    mask = PadMask(torch.zeros(batch, length, 4), lengths)
    for n in range(batch):
        expected_row = torch.tensor([t >= int(lengths[n]) for t in range(length)])
        assert torch.equal(mask[n], expected_row), f"row {n} (length {int(lengths[n])}) is wrong: {mask[n]}"


@rubric("Padding mask")
def test_pad_mask_is_on_the_input_device():
    from hw4lib.model import PadMask

    check_built_on_input_device(
        lambda device: PadMask(torch.zeros(2, 4, device=device), torch.tensor([4, 2], device=device)),
        "PadMask", "the mask")


if __name__ == "__main__":
    run_module(__name__)
