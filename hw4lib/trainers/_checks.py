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


class RunFolderExistsError(FileExistsError):
    """The run folder already holds a run that this one does not resume."""


def check_run_folder_is_free(run_folder: Path, resume_from: str | None, last_checkpoint: Path) -> None:
    """A new run gets a folder of its own: RunFolderExistsError when ``run_folder`` holds files,
    unless ``resume_from`` is a checkpoint inside it (the run continues where it stopped).
    ``last_checkpoint`` is the checkpoint the message suggests resuming from."""
    if not run_folder.is_dir() or not any(run_folder.iterdir()):
        return
    if resume_from is not None and run_folder.resolve() in Path(resume_from).resolve().parents:
        return
    raise RunFolderExistsError(
        f"run folder {run_folder} already holds a run, and a new run never writes into another "
        f"one: pick another run name (--run-name, or none for a new timestamped one), or continue "
        f"that run by resuming from its checkpoint (--resume {last_checkpoint}; in the notebook, "
        f"'training.resume_from' in OVERRIDES)")


class TrainingInterrupted(KeyboardInterrupt):
    """Ctrl-C (or the notebook's interrupt) stopped a run; the message says what was kept."""


def interruption_message(what: str, run_folder: Path, last_checkpoint: Path,
                         saved_epoch: int | None) -> str:
    """What a run stopped during ``what`` keeps, and how to continue it. ``saved_epoch`` is the
    epoch ``last_checkpoint`` holds, or None when this run has written none."""
    kept = (f"the last complete epoch ({saved_epoch}) is saved in {last_checkpoint}: continue "
            f"with --resume {last_checkpoint} (in the notebook, 'training.resume_from' in OVERRIDES)"
            if saved_epoch is not None else "no epoch completed, so there is nothing to resume")
    return (f"stopped during {what}; {kept}. The run folder {run_folder} has no test results, so "
            f"make handin skips it.")
