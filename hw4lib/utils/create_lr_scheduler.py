"""Build a learning-rate scheduler from the ``scheduler:`` section of a config, and plot it.

Schedules (``scheduler.name``):

* ``cosine``: ``lr(t) = eta_min + (lr0 - eta_min) * (1 + cos(pi * t / T_max)) / 2`` for
  ``t = 0 .. T_max``, where ``t`` counts from the end of the warm-up. Choose ``T_max`` so that it
  covers the rest of training: past ``T_max`` the cosine climbs back up.
* ``cosine_warm``: cosine annealing with warm restarts (SGDR); the first cycle lasts ``T_0``, each
  next one ``T_mult`` times longer.
* ``reduce_lr``: multiply the lr by ``factor`` once the validation loss has not improved for
  ``patience`` epochs. Always stepped once per epoch, with the validation metric.
* ``constant``: keep the base learning rate (after the optional warm-up).

``interval`` says what one scheduler step is: ``step`` (one optimizer update, i.e.
``gradient_accumulation_steps`` batches) or ``epoch``. Every duration in the config (``T_max``,
``T_0``, ``warmup.epochs``) is given in epochs and converted to optimizer updates when
``interval: step``, so a config reads the same either way.

The optional linear warm-up (``warmup: {enabled, epochs, start_factor, end_factor}``) scales the
lr from ``start_factor * lr0`` towards ``end_factor * lr0`` over ``warmup.epochs``, then hands over to
the schedule above. It is not available with ``reduce_lr``, whose decisions are driven by epochs of
validation rather than by a clock.
"""
from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Sized

import torch
from torch.optim.lr_scheduler import (CosineAnnealingLR, CosineAnnealingWarmRestarts, LambdaLR,
                                      LinearLR, LRScheduler, ReduceLROnPlateau, SequentialLR)

from hw4lib.config import Scheduler as SchedulerSection
from hw4lib.config import ConfigError, parse_section

Scheduler = LRScheduler | ReduceLROnPlateau


def scheduler_interval(scheduler_config: dict[str, Any] | SchedulerSection) -> str:
    """Return ``"step"`` or ``"epoch"``: how often the trainer calls ``scheduler.step()``."""
    settings = parse_section(SchedulerSection, scheduler_config, "scheduler")
    return "epoch" if settings.name == "reduce_lr" else settings.interval


def steps_per_epoch(train_loader: Sized, gradient_accumulation_steps: int) -> int:
    """Optimizer updates per epoch: the last partial accumulation window still makes an update."""
    if gradient_accumulation_steps < 1:
        raise ValueError(f"gradient_accumulation_steps must be >= 1, got {gradient_accumulation_steps}")
    return max(1, math.ceil(len(train_loader) / gradient_accumulation_steps))


def create_scheduler(optimizer: torch.optim.Optimizer,
                     scheduler_config: dict[str, Any] | SchedulerSection,
                     train_loader: Sized | None = None,
                     gradient_accumulation_steps: int = 1) -> Scheduler:
    """Create the scheduler described by ``scheduler_config`` (see the module docstring).

    Args:
        optimizer: the optimizer whose parameter groups' ``lr`` are scheduled.
        scheduler_config: the config's ``scheduler:`` section (``hw4lib.config.Scheduler`` lists
            its keys and defaults); a bad value raises ConfigError naming ``scheduler.<key>``.
        train_loader: only its ``len()`` is used, to convert epochs into optimizer updates when
            ``interval: step``; may be None when ``interval: epoch``.
        gradient_accumulation_steps: batches per optimizer update.

    Returns:
        A torch scheduler; call ``step()`` once per ``scheduler_interval(scheduler_config)``
        (``step(val_loss)`` for ``reduce_lr``).
    """
    settings = parse_section(SchedulerSection, scheduler_config, "scheduler")
    interval = scheduler_interval(settings)
    if interval == "step" and train_loader is None:
        raise ValueError("create_scheduler: scheduler.interval is 'step', so pass train_loader "
                         "(its length converts epochs into optimizer updates)")
    unit = steps_per_epoch(train_loader, gradient_accumulation_steps) if interval == "step" else 1
    warmup = settings.warmup
    warmup_steps = round(warmup.epochs * unit) if warmup.enabled else 0

    if settings.name == "reduce_lr":
        return ReduceLROnPlateau(optimizer, **settings.reduce_lr.model_dump())
    if settings.name == "cosine":
        if settings.cosine.T_max is None:
            raise ConfigError("config key 'scheduler.cosine.T_max' is missing (validate_config "
                              "sets it to the epochs after the warm-up)")
        main = CosineAnnealingLR(optimizer, T_max=max(1, round(settings.cosine.T_max * unit)),
                                 eta_min=settings.cosine.eta_min)
    elif settings.name == "cosine_warm":
        options = settings.cosine_warm
        main = CosineAnnealingWarmRestarts(optimizer, T_0=max(1, round(options.T_0 * unit)),
                                           T_mult=options.T_mult, eta_min=options.eta_min)
    else:
        main = LambdaLR(optimizer, lr_lambda=lambda _: 1.0)
    if not warmup_steps:
        return main
    ramp = LinearLR(optimizer, start_factor=warmup.start_factor, end_factor=warmup.end_factor,
                    total_iters=warmup_steps)
    return SequentialLR(optimizer, schedulers=[ramp, main], milestones=[warmup_steps])


def simulate_lr_schedule(optimizer: torch.optim.Optimizer,
                         scheduler_config: dict[str, Any] | SchedulerSection,
                         train_loader: Sized | None, gradient_accumulation_steps: int,
                         epochs: int) -> list[list[float]]:
    """Learning rate of every parameter group before each scheduler step, over ``epochs`` epochs.

    Works on a shadow optimizer with the same group learning rates, so ``optimizer`` is untouched.
    ``reduce_lr`` is simulated with a validation loss that never improves (its fastest decay).

    Returns:
        ``lrs[g][k]``: group ``g``'s lr for scheduler step ``k`` (one entry per optimizer update
        when ``interval: step``, per epoch otherwise).
    """
    shadow = torch.optim.SGD(
        [{"params": [torch.nn.Parameter(torch.zeros(1))], "lr": g.get("initial_lr", g["lr"])}
         for g in optimizer.param_groups], lr=optimizer.defaults["lr"])
    scheduler = create_scheduler(shadow, scheduler_config, train_loader, gradient_accumulation_steps)
    interval = scheduler_interval(scheduler_config)
    per_epoch = steps_per_epoch(train_loader, gradient_accumulation_steps) if interval == "step" else 1
    lrs: list[list[float]] = [[] for _ in shadow.param_groups]
    for _ in range(epochs * per_epoch):
        for history, group in zip(lrs, shadow.param_groups):
            history.append(group["lr"])
        shadow.step()
        if isinstance(scheduler, ReduceLROnPlateau):
            scheduler.step(1.0)
        else:
            scheduler.step()
    return lrs


def plot_lr_schedule(optimizer: torch.optim.Optimizer,
                     scheduler_config: dict[str, Any] | SchedulerSection,
                     train_loader: Sized | None, gradient_accumulation_steps: int, epochs: int,
                     out_path: str | Path, max_groups: int = 5) -> list[list[float]]:
    """Draw the schedule of up to ``max_groups`` parameter groups into the PNG ``out_path``.

    Returns the simulated learning rates (see :func:`simulate_lr_schedule`).
    """
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    lrs = simulate_lr_schedule(optimizer, scheduler_config, train_loader,
                               gradient_accumulation_steps, epochs)
    interval = scheduler_interval(scheduler_config)
    per_epoch = steps_per_epoch(train_loader, gradient_accumulation_steps) if interval == "step" else 1
    fig, ax = plt.subplots(figsize=(7, 4))
    for index, history in enumerate(lrs[:max_groups]):
        label = optimizer.param_groups[index].get("name", f"group {index}")
        ax.plot([k / per_epoch for k in range(len(history))], history, label=label)
    ax.set_xlabel("epoch")
    ax.set_ylabel("learning rate")
    name = parse_section(SchedulerSection, scheduler_config, "scheduler").name
    ax.set_title(f"{name} schedule ({interval}-wise updates)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize="small")
    fig.tight_layout()
    Path(out_path).parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out_path, dpi=100)
    plt.close(fig)
    return lrs
