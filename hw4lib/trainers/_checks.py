"""Checks of the training loop, kept out of ``lm_trainer.py`` so it reads as the algorithm. Each
raises naming what went wrong and what to do about it."""
from __future__ import annotations

from pathlib import Path

import torch


class NonFiniteLossError(FloatingPointError):
    """Raised when a loss becomes NaN or infinite; training stops and keeps its last good checkpoint."""


def check_finite_loss(loss: torch.Tensor, where: str, completed_epochs: int, last_checkpoint: Path) -> None:
    """Stop training on a NaN/inf ``loss`` with a message saying what to do next.

    ``last_checkpoint``, when it exists, holds the state after ``completed_epochs`` epochs.
    """
    if torch.isfinite(loss).all():
        return
    kept = (f"the last good checkpoint (epoch {completed_epochs}) is {last_checkpoint}"
            if last_checkpoint.is_file() else "no checkpoint was written yet")
    raise NonFiniteLossError(
        f"loss became {loss.item()} in epoch {completed_epochs + 1}, {where}; training stopped "
        f"and {kept}. Lower optimizer.lr, enable training.grad_clip_norm or add warm-up.")


def check_ready_to_train(optimizer) -> None:
    """The caller must set ``trainer.optimizer`` before ``train()``."""
    if optimizer is None:
        raise RuntimeError("set trainer.optimizer (and trainer.scheduler) before calling train()")

