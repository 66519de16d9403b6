"""Training utilities: optimizer and learning-rate scheduler factories driven by the config."""
from .create_lr_scheduler import create_scheduler, plot_lr_schedule, scheduler_interval
from .create_optimizer import create_optimizer

__all__ = ["create_optimizer", "create_scheduler", "plot_lr_schedule", "scheduler_interval"]
