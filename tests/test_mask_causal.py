"""CausalMask: (T, T) bool, True strictly above the diagonal, for (N, T) and (N, T, ...) inputs."""
import torch

from tests.failure_messages import in_case
from tests.testing_framework import check_built_on_input_device, rubric, run_module

RUBRIC = {"Causal mask": 0}
# Graded only through the language model's perplexity (testing_framework.py).
THROUGH_LM = ("Causal mask",)

F, T_ = False, True
EXPECTED_5 = torch.tensor([
    [F, T_, T_, T_, T_],
    [F, F, T_, T_, T_],
    [F, F, F, T_, T_],
    [F, F, F, F, T_],
    [F, F, F, F, F],
])


@rubric("Causal mask")
def test_causal_mask_matches_hand_written_matrices():
    from hw4lib.model import CausalMask

    padded = torch.tensor([[1, 2, 3, 0, 0], [1, 2, 0, 0, 0]])
    cases = {
        "(N=2, T=5) token ids": (padded, EXPECTED_5),
        "(N=1, T=1)": (torch.tensor([[7]]), torch.tensor([[F]])),
        "(N=3, T=2)": (torch.zeros(3, 2, dtype=torch.long), torch.tensor([[F, T_], [F, F]])),
        "(N=1, T=3)": (torch.ones(1, 3), torch.tensor([[F, T_, T_], [F, F, T_], [F, F, F]])),
    }
    for name, (inputs, expected) in cases.items():
        with in_case(name, padded_input=inputs):
            mask = CausalMask(inputs)
        assert mask.dtype == torch.bool, f"{name}: expected dtype torch.bool, got {mask.dtype}"
        assert mask.shape == expected.shape, f"{name}: expected shape {tuple(expected.shape)}, got {tuple(mask.shape)}"
        assert torch.equal(mask, expected), f"{name}: expected\n{expected}\ngot\n{mask}"


@rubric("Causal mask")
def test_causal_mask_of_feature_inputs_depends_only_on_length():
    from hw4lib.model import CausalMask

    for shape in [(2, 5, 16), (4, 5, 3, 2), (1, 5, 1)]:
        inputs = torch.randn(shape)
        with in_case(f"input {shape}", padded_input=inputs):
            mask = CausalMask(inputs)
        assert mask.shape == (5, 5), f"input {shape}: expected shape (5, 5), got {tuple(mask.shape)}"
        assert mask.dtype == torch.bool, f"input {shape}: expected dtype torch.bool, got {mask.dtype}"
        assert torch.equal(mask, EXPECTED_5), f"input {shape}: expected\n{EXPECTED_5}\ngot\n{mask}"


@rubric("Causal mask")
def test_causal_mask_is_on_the_input_device():
    from hw4lib.model import CausalMask

    check_built_on_input_device(lambda device: CausalMask(torch.zeros(2, 4, device=device)),
                                "CausalMask", "the mask")


@rubric("Causal mask")
def test_causal_mask_large_length_matches_definition():
    from hw4lib.model import CausalMask

    length = 300
    mask = CausalMask(torch.zeros(2, length, dtype=torch.long))
    rows = torch.arange(length).unsqueeze(1)
    cols = torch.arange(length).unsqueeze(0)
    assert torch.equal(mask, cols > rows), "mask[i, j] must be True exactly when j > i"


if __name__ == "__main__":
    run_module(__name__)
