"""Argument checks for the model modules, kept out of the graded files so those read as
algorithms. Each raises a ValueError (TypeError for a non-tensor) naming the bad argument and
the fix. None of them reads tensor values on an accelerator: that would sync the device on every
forward (every decoding step)."""
import torch


def check_config(num_layers, d_model, num_heads, d_ff, dropout, max_len, num_classes,
                 weight_tying, layer_drop_rate) -> None:
    """Raise naming the first bad constructor argument of DecoderOnlyTransformer."""
    sizes = dict(num_layers=num_layers, d_model=d_model, num_heads=num_heads, d_ff=d_ff,
                 max_len=max_len, num_classes=num_classes)
    for name, value in sizes.items():
        if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
            raise ValueError(f"{name} must be a positive integer, got {value!r}")
    check_heads(d_model, num_heads)
    for name, value in dict(dropout=dropout, layer_drop_rate=layer_drop_rate).items():
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 <= value < 1.0:
            raise ValueError(f"{name} must be a number in [0, 1), got {value!r}")
    if not isinstance(weight_tying, bool):
        raise ValueError(f"weight_tying must be True or False, got {weight_tying!r}")


def check_heads(d_model: int, num_heads: int) -> None:
    """d_model must split evenly into num_heads > 0 heads."""
    if num_heads <= 0 or d_model % num_heads != 0:
        raise ValueError(f"d_model={d_model} must be divisible by num_heads={num_heads} (> 0): "
                         f"each head gets d_model / num_heads features")


def check_tokens(padded_targets: torch.Tensor, max_len: int, num_classes: int) -> None:
    """padded_targets must be an (N, T) integer tensor with T <= max_len and ids < num_classes.

    The id range is checked on CPU tensors only: on an accelerator ``min()``/``max()`` would
    wait for the device at every forward, and the embedding's own index check catches it there.
    """
    if padded_targets.dim() != 2 or padded_targets.dtype.is_floating_point:
        raise ValueError(f"expected padded_targets to be an (N, T) tensor of token ids, got shape "
                         f"{tuple(padded_targets.shape)} and dtype {padded_targets.dtype}")
    if padded_targets.shape[1] > max_len:
        raise ValueError(f"sequence length T={padded_targets.shape[1]} exceeds max_len={max_len}: "
                         f"truncate the input or build the model with a larger max_len")
    if padded_targets.device.type != "cpu" or not padded_targets.numel():
        return
    low, high = padded_targets.min().item(), padded_targets.max().item()
    if low < 0 or high >= num_classes:
        raise ValueError(f"token ids must lie in [0, num_classes={num_classes}), got values in "
                         f"[{low}, {high}]: does the tokenizer's vocab_size match the model's "
                         f"num_classes?")


def check_batch(padded_input: torch.Tensor) -> None:
    """padded_input must be a tensor of shape (N, T) or (N, T, ...)."""
    if not isinstance(padded_input, torch.Tensor):
        raise TypeError(f"padded_input must be a torch.Tensor, got {type(padded_input).__name__}")
    if padded_input.dim() < 2:
        raise ValueError(f"padded_input must have shape (N, T) or (N, T, ...), "
                         f"got shape {tuple(padded_input.shape)}")


def check_lengths(padded_input: torch.Tensor, input_lengths: torch.Tensor) -> None:
    """input_lengths must be (N,), one length per sequence of padded_input."""
    if input_lengths.shape != padded_input.shape[:1]:
        raise ValueError(f"input_lengths must have shape (N,) = ({padded_input.shape[0]},), "
                         f"got {tuple(input_lengths.shape)}")


def check_embeddings(x: torch.Tensor, d_model: int, max_len: int) -> None:
    """x must be (N, T, d_model) with T <= max_len."""
    if x.dim() != 3 or x.shape[-1] != d_model:
        raise ValueError(f"expected x of shape (N, T, d_model={d_model}), got {tuple(x.shape)}")
    if x.shape[1] > max_len:
        raise ValueError(f"sequence length T={x.shape[1]} exceeds max_len={max_len} of the "
                         f"positional encoding: shorten the input or build the model with a "
                         f"larger max_len")
