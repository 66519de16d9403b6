"""Argument checks for the decoders, kept out of ``sequence_generator.py`` so it reads as the
searches. Each raises naming the argument, what it must be and what it got."""
import torch


def _is_number(value) -> bool:
    return not isinstance(value, bool) and isinstance(value, (int, float))


def _is_int(value) -> bool:
    return not isinstance(value, bool) and isinstance(value, int)


def check_generator(score_fn, max_length) -> None:
    """score_fn must be callable and max_length a positive int."""
    if not callable(score_fn):
        raise TypeError(f"score_fn must be callable (e.g. model.score), got {type(score_fn).__name__}")
    if not _is_int(max_length) or max_length < 1:
        raise ValueError(f"max_length must be a positive int, got {max_length!r}")


def check_prompts(x, max_length: int) -> None:
    """x must be a non-empty (N, T) integer tensor with T <= max_length."""
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"x must be a torch.Tensor of token ids with shape (N, T), "
                        f"got {type(x).__name__}")
    if x.dim() != 2:
        raise ValueError(f"x must have shape (N, T) (a batch of prompts), got shape "
                         f"{tuple(x.shape)}; use x.unsqueeze(0) for a single prompt")
    if x.dtype.is_floating_point or x.dtype.is_complex or x.dtype == torch.bool:
        raise TypeError(f"x must hold integer token ids, got dtype {x.dtype}")
    if x.size(0) == 0 or x.size(1) == 0:
        raise ValueError(f"x must hold at least one prompt of at least one token (e.g. SOS), "
                         f"got shape {tuple(x.shape)}")
    if x.size(1) > max_length:
        raise ValueError(f"x: prompts have {x.size(1)} tokens but max_length is {max_length}; "
                         f"shorten the prompts or raise max_length")


def check_positive(**values) -> None:
    """Every keyword value must be a number > 0, e.g. check_positive(temperature=t)."""
    for name, value in values.items():
        if not _is_number(value) or not value > 0:
            raise ValueError(f"{name} must be a number > 0, got {value!r}")


def check_sampling(temperature, top_k, top_p) -> None:
    """temperature > 0, top_k an int >= 0 (0 = off), top_p in (0, 1] (1 = off)."""
    check_positive(temperature=temperature)
    if not _is_int(top_k) or top_k < 0:
        raise ValueError(f"top_k must be an int >= 0 (0 disables it), got {top_k!r}")
    if not _is_number(top_p) or not 0 < top_p <= 1:
        raise ValueError(f"top_p must lie in (0, 1] (1 disables it), got {top_p!r}")


def check_beam_width(beam_width) -> None:
    """beam_width must be an int >= 1."""
    if not _is_int(beam_width) or beam_width < 1:
        raise ValueError(f"beam_width must be an int >= 1, got {beam_width!r}")


def check_sequences(seq) -> None:
    """seq must be a tensor of shape (T,), (N, T) or (N, B, T)."""
    if not isinstance(seq, torch.Tensor):
        raise TypeError(f"seq must be a torch.Tensor, got {type(seq).__name__}")
    if seq.dim() == 0 or seq.dim() > 3:
        raise ValueError(f"seq must have shape (T,), (N, T) or (N, B, T), got shape "
                         f"{tuple(seq.shape)}")
