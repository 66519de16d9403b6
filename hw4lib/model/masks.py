"""Boolean attention masks for a batch of padded sequences.

Both masks follow the convention of ``torch.nn.MultiheadAttention`` for boolean masks:
**True marks a position that must NOT be attended to**. They are built on the device of the
input, so they can be passed straight to attention layers running there.
"""
import torch

from ._checks import check_batch, check_lengths


def PadMask(padded_input: torch.Tensor, input_lengths: torch.Tensor) -> torch.Tensor:
    """Mark the padding positions of a padded batch.

    Args:
        padded_input: (N, T) or (N, T, ...) tensor; only its first two sizes and its device matter.
        input_lengths: (N,) integer tensor, the number of real (non-pad) positions of each sequence.

    Returns:
        (N, T) bool tensor on ``padded_input.device``: ``mask[n, t]`` is True when ``t >=
        input_lengths[n]``, i.e. position t of sequence n is padding.

    Example: lengths [3, 2] with T = 5 give
        [[False, False, False, True, True],
         [False, False, True,  True, True]]

    Hint: compare a row of positions ``0..T-1`` (shape (1, T)) with a column of lengths (shape
    (N, 1)); broadcasting builds the whole mask in one comparison, with no loop over the batch.
    """
    check_batch(padded_input)
    input_lengths = torch.as_tensor(input_lengths, device=padded_input.device)
    check_lengths(padded_input, input_lengths)
    # TODO: return the (N, T) bool mask, True where position t >= input_lengths[n]
    # BEGIN SOLUTION
    positions = torch.arange(padded_input.shape[1], device=padded_input.device)
    return positions.unsqueeze(0) >= input_lengths.unsqueeze(1)
    # END SOLUTION


def CausalMask(padded_input: torch.Tensor) -> torch.Tensor:
    """Forbid every position from attending to later positions.

    Args:
        padded_input: (N, T) or (N, T, ...) tensor; only its length T and its device matter.

    Returns:
        (T, T) bool tensor on ``padded_input.device``: ``mask[i, j]`` is True when ``j > i``
        (query i may not look at the future key j), i.e. True strictly above the diagonal.

    Hint: ``torch.triu`` with ``diagonal=1`` of a (T, T) tensor of ones keeps exactly the entries
    above the diagonal.
    """
    check_batch(padded_input)
    # TODO: return the (T, T) bool mask, True strictly above the diagonal
    # BEGIN SOLUTION
    length = padded_input.shape[1]
    ones = torch.ones(length, length, dtype=torch.bool, device=padded_input.device)
    return torch.triu(ones, diagonal=1)
    # END SOLUTION
