"""Run-folder bookkeeping shared by every trainer: devices, logging, plots and checkpoints.

A trainer owns one run folder ``<training.expts_dir>/<run_name>/``::

    config.yaml        the full, validated config of the run
    model_arch.txt     the architecture printout and parameter counts
    checkpoints/       checkpoint-best-metric-model.pth, checkpoint-last-epoch-model.pth
    metrics/           epoch_<k>.json per epoch, history.json, loss.png, perplexity.png
    attn/              attention-map PNGs
    text/              generated samples (JSON)

Subclasses implement ``train``, ``evaluate`` and ``generate``; everything that only writes files,
restores state or steps the schedule lives here, so the student-facing subclass stays about the
learning itself.

The extras of an epoch (curves, attention maps, samples, wandb) go through :meth:`BaseTrainer._run_extra`:
a failure in one of them is reported in one line and training goes on. The metrics JSON and the
checkpoints are not extras: a failure to write them ends the run.
"""
from __future__ import annotations

import math
import os
import sys
from abc import ABC, abstractmethod
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import Any, Callable, Iterator

import torch
import yaml
from torch import nn

from hw4lib.config import Config, validate_config
from hw4lib.data.random_state import capture_rng_states, restore_rng_states
from hw4lib.file_io import atomic_write_bytes, write_json
from hw4lib.handin_format import CONFIG_FILE, GENERATIONS_FILE, METRICS_FILE, MODEL_ARCH_FILE
from hw4lib.model.fused_attention import attention_weights_off
from hw4lib.utils.create_lr_scheduler import scheduler_interval
from hw4lib.utils.devices import resolved_device

from ._checks import (TrainingInterrupted, check_finite_loss, check_run_folder_is_free,
                      interruption_message)
from .precision import (logits_in_float32, measure_formats, measurement_key, precision_name,
                        recorded_speeds, resolve_precision)

# *_NAME: file names inside CHECKPOINT_DIR; *_PATH: relative to the run folder (make handin).
BEST_CHECKPOINT_NAME = "checkpoint-best-metric-model.pth"
LAST_CHECKPOINT_NAME = "checkpoint-last-epoch-model.pth"
CHECKPOINT_DIR = "checkpoints"  # inside the run folder
BEST_CHECKPOINT_PATH = f"{CHECKPOINT_DIR}/{BEST_CHECKPOINT_NAME}"
# Tokens per sequence of the steps that ``precision: auto`` times where bf16 is native (about the
# length of the default data's training sequences).
PRECISION_TIMING_LENGTH = 200


def resolve_device(device: str | torch.device | None) -> torch.device:
    """``None`` or ``"auto"`` picks CUDA when available, else the CPU; ``cuda`` gets the current
    GPU's index, so the device compares equal to its tensors' (see hw4lib/utils/devices.py)."""
    if device is None or device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    return resolved_device(device)


def describe_model(model: nn.Module) -> str:
    """The module printout followed by parameter counts per top-level child and in total.

    Shared (tied) parameters are counted once, under the first module that owns them.
    """
    lines = [str(model), "", "Parameters per top-level module (tied weights counted once):"]
    seen: set[int] = set()
    total = trainable = 0
    for child_name, child in model.named_children():
        count = 0
        for param in child.parameters():
            if id(param) in seen:
                continue
            seen.add(id(param))
            count += param.numel()
            trainable += param.numel() if param.requires_grad else 0
        total += count
        lines.append(f"  {child_name:<24s} {count:>12,d}")
    lines += [f"  {'total':<24s} {total:>12,d}", f"  {'trainable':<24s} {trainable:>12,d}"]
    return "\n".join(lines) + "\n"


def pyplot():
    """matplotlib.pyplot on the file-only Agg backend (no display needed), imported on first use."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


class BaseTrainer(ABC):
    """Owns the model, the run folder and the training state that a checkpoint restores.

    Args:
        model: the network; moved to ``device``.
        tokenizer: the run's tokenizer (``pad_id``, ``eos_id``, ``decode``...).
        config: the run's :class:`hw4lib.config.Config` (``load_config``), or a mapping that
            ``validate_config`` accepts (it is validated here, once); kept as ``self.config``.
        run_name: name of the run folder under ``config.training.expts_dir``; a folder that holds
            a run is refused (RunFolderExistsError) unless ``config.training.resume_from`` is a
            checkpoint inside it.
        config_file: path of the YAML the config came from (recorded in the run folder).
        device: ``"cpu"``, ``"cuda"``, ...; None picks CUDA when available.

    The caller sets ``self.optimizer`` and ``self.scheduler`` before training.
    """

    def __init__(self, model: nn.Module, tokenizer, config: Config | dict[str, Any], run_name: str,
                 config_file: str | Path | None, device: str | torch.device | None = None):
        self.config = validate_config(config)
        self.device = resolve_device(device if device is not None else self.config.training.device)
        self.model = model.to(self.device)
        self.tokenizer = tokenizer
        self.run_name = run_name
        self.config_file = None if config_file is None else str(config_file)
        self.optimizer: torch.optim.Optimizer | None = None
        self.scheduler = None
        # The forward's number format (see precision.py); fp16 alone needs its gradients scaled.
        self.precision, reason = resolve_precision(self.config.training.precision, self.device,
                                                   self._recorded_speeds)
        print(f"training precision: {precision_name(self.precision)} ({reason})",
              flush=True)  # pragma: no mutate (equivalent: when the line is written, not what)
        self.scaler = torch.amp.GradScaler("cuda", enabled=self.precision == torch.float16)
        logits_in_float32(self.model)

        self.current_epoch = 0      # completed epochs
        self.global_step = 0        # optimizer updates so far
        self.best_metric = math.inf
        self.history: list[dict[str, Any]] = []
        self.saved_epoch: int | None = None  # the epoch this run's last-epoch checkpoint holds

        self.expt_root = Path(self.config.training.expts_dir) / run_name
        self.checkpoint_dir = self.expt_root / CHECKPOINT_DIR
        check_run_folder_is_free(self.expt_root, self.config.training.resume_from,
                                 self.checkpoint_dir / LAST_CHECKPOINT_NAME)
        self.metrics_dir = self.expt_root / "metrics"
        self.attn_dir = self.expt_root / "attn"
        self.text_dir = self.expt_root / "text"
        for folder in (self.checkpoint_dir, self.metrics_dir, self.attn_dir, self.text_dir):
            folder.mkdir(parents=True, exist_ok=True)
        atomic_write_bytes(self.expt_root / CONFIG_FILE,
                           lambda tmp: tmp.write_text(yaml.safe_dump(self.config.dump(), sort_keys=False)))
        atomic_write_bytes(self.expt_root / MODEL_ARCH_FILE,
                           lambda tmp: tmp.write_text(describe_model(self.model)))
        self.wandb_run = self._run_extra("starting wandb (the run goes on without it)", self._init_wandb)

    def _recorded_speeds(self) -> tuple[dict[str, float], str]:
        """``precision: auto``'s training-step speeds of this model per format (``recorded_speeds``
        in the experiments folder, measured on the first run): a batch of the config's size, of
        length min(PRECISION_TIMING_LENGTH, the model's max_len)."""
        batch_size = self.config.data.batch_size
        length = min(PRECISION_TIMING_LENGTH, getattr(self.model, "max_len", PRECISION_TIMING_LENGTH))
        return recorded_speeds(Path(self.config.training.expts_dir),
                               measurement_key(self.model, batch_size, length, self.device),
                               lambda: measure_formats(self.model, batch_size, length, self.device))

    # ------------------------------------------------------------------ what subclasses provide

    @abstractmethod
    def train(self, train_loader, val_loader, epochs: int) -> None:
        """Train until ``epochs`` epochs have completed in total (a resumed run continues)."""

    @abstractmethod
    def evaluate(self, test_loader) -> tuple[dict[str, float], dict[str, Any]]:
        """Return (test metrics, generation results)."""

    @abstractmethod
    def generate(self, loader, generation_config=None) -> list[dict]:
        """Generate continuations of prompts drawn from ``loader.dataset``."""

    # ------------------------------------------------------------------ training steps

    def _autocast(self):
        """Run the forward pass in the run's precision (a no-op at float32)."""
        return torch.autocast(self.device.type, dtype=self.precision,
                              enabled=self.precision != torch.float32)

    def _attention_weights(self, needed: bool):
        """Compute attention weights only when ``needed`` (see hw4lib/model/fused_attention.py).

        Exception: bf16 training on a CPU keeps the plain path, because there the fused kernel's
        backward pass is slower per step than the plain one for the default model (the course's
        training benchmark compares the three paths).
        """
        plain_is_faster = self.device.type == "cpu" and self.precision == torch.bfloat16
        return nullcontext() if needed or plain_is_faster else attention_weights_off(self.model)

    def _scheduler_interval(self) -> str:
        """``"step"`` or ``"epoch"``: when ``self.scheduler`` steps."""
        return scheduler_interval(self.config.scheduler)

    def _epoch_scheduler_step(self, val_loss: float) -> None:
        """Step a per-epoch scheduler after validation; a plateau schedule gets ``val_loss``."""
        if self.scheduler is None or self._scheduler_interval() != "epoch":
            return
        if isinstance(self.scheduler, torch.optim.lr_scheduler.ReduceLROnPlateau):
            self.scheduler.step(val_loss)
        else:
            self.scheduler.step()

    def _check_finite(self, loss: torch.Tensor, where: str) -> None:
        """Stop training on a NaN/inf loss, naming the last good checkpoint (see _checks.py)."""
        check_finite_loss(loss, where, self.current_epoch,
                          self.checkpoint_dir / LAST_CHECKPOINT_NAME)

    @contextmanager
    def interruptible(self, what: str) -> Iterator[None]:
        """Turn Ctrl-C inside the block into TrainingInterrupted, whose message says which
        checkpoint holds the last complete epoch and how to resume from it."""
        try:
            yield
        except TrainingInterrupted:
            raise
        except KeyboardInterrupt:
            raise TrainingInterrupted(interruption_message(
                what, self.expt_root, self.checkpoint_dir / LAST_CHECKPOINT_NAME,
                self.saved_epoch)) from None

    def _forget_test_results(self) -> None:
        """Remove the run folder's test results: once training goes on they describe other
        weights, and make handin packs only a run whose results are current."""
        for name in (METRICS_FILE, GENERATIONS_FILE):
            (self.expt_root / name).unlink(missing_ok=True)

    # ------------------------------------------------------------------ logging

    def _run_extra(self, what: str, action: Callable[[], Any]) -> Any:
        """Return ``action()``; if it raises, print one line naming ``what`` failed and return None.

        For the side features of a run (plots, samples, wandb): hours of training must not be lost
        to a full disk in a PNG, an odd last batch or an unreachable wandb. ``Exception`` only, so
        Ctrl-C still stops the run.
        """
        try:
            return action()
        except Exception as error:  # noqa: BLE001 - a side feature never ends a run
            print(f"warning: {what} failed ({type(error).__name__}: {error}); training goes on",
                  file=sys.stderr,
                  flush=True)  # pragma: no mutate (equivalent: when the line is written, not what)
            return None

    def _init_wandb(self):
        """Start a wandb run when ``training.use_wandb`` is true: offline, never required."""
        if not self.config.training.use_wandb:
            return None
        import wandb  # imported lazily: most runs never need it

        os.environ.setdefault("WANDB_MODE", "offline")
        return wandb.init(project=self.config.training.wandb_project,
                          name=self.run_name, config=self.config.dump(), dir=str(self.expt_root))

    def _log_metrics(self, metrics: dict[str, dict[str, float]], epoch: int) -> None:
        """Record one epoch: ``metrics = {"train": {...}, "val": {...}, "lr": ...}``.

        Writes ``metrics/epoch_<epoch>.json``, ``metrics/history.json`` and redraws the curves.
        """
        record = {"epoch": epoch, "step": self.global_step, **metrics}
        self.history.append(record)
        write_json(self.metrics_dir / f"epoch_{epoch:03d}.json", record)
        write_json(self.metrics_dir / "history.json", self.history)
        self._run_extra(f"drawing the curves of epoch {epoch}", self._plot_curves)
        if self.wandb_run is not None:
            flat = {f"{split}/{key}": value for split, values in metrics.items()
                    if isinstance(values, dict) for key, value in values.items()}
            self._run_extra(f"logging epoch {epoch} to wandb",
                            lambda: self.wandb_run.log({**flat, "epoch": epoch}, step=self.global_step))

    def _plot_curves(self) -> None:
        """Draw loss.png and perplexity.png (train vs val, per epoch) from ``self.history``."""
        plt = pyplot()
        epochs = [record["epoch"] for record in self.history]
        for stem, key, ylabel in (("loss", "ce_loss_char", "cross-entropy per character (nats)"),
                                  ("perplexity", "perplexity_char", "perplexity per character")):
            fig, ax = plt.subplots(figsize=(6, 4))
            for split in ("train", "val"):
                values = [record.get(split, {}).get(key) for record in self.history]
                if all(value is not None for value in values):
                    ax.plot(epochs, values, marker="o", label=split)
            ax.set_xlabel("epoch")
            ax.set_ylabel(ylabel)
            ax.grid(alpha=0.3)
            ax.legend()
            fig.tight_layout()
            fig.savefig(self.metrics_dir / f"{stem}.png", dpi=100)
            plt.close(fig)

    def _save_attention_plot(self, attn: torch.Tensor, epoch: int, name: str) -> Path:
        """Save one (T, T) attention map as ``attn/<name>_epoch<epoch>.png``."""
        plt = pyplot()
        if attn.dim() != 2:
            raise ValueError(f"expected a (T, T) attention map, got shape {tuple(attn.shape)}")
        path = self.attn_dir / f"{name}_epoch{epoch:03d}.png"
        fig, ax = plt.subplots(figsize=(5, 5))
        image = ax.imshow(attn.detach().float().cpu().numpy(), cmap="viridis", aspect="auto")
        fig.colorbar(image, ax=ax)
        ax.set_xlabel("key position")
        ax.set_ylabel("query position")
        ax.set_title(f"{name}, epoch {epoch}")
        fig.tight_layout()
        fig.savefig(path, dpi=100)
        plt.close(fig)
        return path

    def _save_generated_text(self, results: Any, name: str) -> Path:
        """Save generation results as ``text/<name>.json``."""
        path = self.text_dir / f"{name}.json"
        write_json(path, results)
        return path

    # ------------------------------------------------------------------ checkpoints

    def save_checkpoint(self, filename: str) -> Path:
        """Write everything a resumed run needs to ``checkpoints/<filename>``, atomically.

        The file holds model, optimizer, scheduler and grad-scaler states, the epoch and step
        counters, the best validation metric, the metrics history, the config and the RNG states,
        so that resuming continues exactly as if training had never stopped.
        """
        path = self.checkpoint_dir / filename
        state = {
            "model_state_dict": self.model.state_dict(),
            "optimizer_state_dict": None if self.optimizer is None else self.optimizer.state_dict(),
            "scheduler_state_dict": None if self.scheduler is None else self.scheduler.state_dict(),
            "scaler_state_dict": self.scaler.state_dict(),
            "epoch": self.current_epoch,
            "step": self.global_step,
            "best_metric": self.best_metric,
            "history": self.history,
            "config": self.config.dump(),
            "rng_states": capture_rng_states(),
        }
        atomic_write_bytes(path, lambda tmp: torch.save(state, tmp))
        if filename == LAST_CHECKPOINT_NAME:
            self.saved_epoch = self.current_epoch
        return path

    def load_checkpoint(self, path: str | Path, restore_rng: bool = True) -> dict[str, Any]:
        """Restore the state written by :meth:`save_checkpoint` and return the raw checkpoint.

        Set ``self.optimizer`` and ``self.scheduler`` first so their states are restored too.
        """
        path = Path(path)
        if not path.is_file():
            raise FileNotFoundError(f"checkpoint {path} does not exist")
        checkpoint = torch.load(path, map_location=self.device, weights_only=False)
        self.model.load_state_dict(checkpoint["model_state_dict"])
        for name, target in (("optimizer", self.optimizer), ("scheduler", self.scheduler)):
            saved = checkpoint.get(f"{name}_state_dict")
            if target is not None and saved is not None:
                target.load_state_dict(saved)
            elif target is not None:
                raise ValueError(f"checkpoint {path} has no {name} state but this trainer has a {name}")
        if checkpoint.get("scaler_state_dict"):
            self.scaler.load_state_dict(checkpoint["scaler_state_dict"])
        self.current_epoch = int(checkpoint["epoch"])
        self.global_step = int(checkpoint["step"])
        self.best_metric = float(checkpoint["best_metric"])
        self.history = list(checkpoint.get("history", []))
        if restore_rng:
            restore_rng_states(checkpoint["rng_states"])
        return checkpoint

    def cleanup(self) -> None:
        """Close the wandb run, if any. Call once the trainer is no longer needed."""
        if self.wandb_run is not None:
            self._run_extra("closing the wandb run", self.wandb_run.finish)
            self.wandb_run = None
