"""The optimizer and learning-rate scheduler factories, built from the config's sections, and
the comparison of devices by meaning (``same_device``).

They sit below the trainers (they import none); the entry points that use trainers (``train.py``,
``handin.py``, ``numpy_twin.py``) sit beside ``hw4lib/train.py``."""
from .create_lr_scheduler import create_scheduler, plot_lr_schedule, scheduler_interval
from .create_optimizer import create_optimizer
from .devices import resolved_device, same_device

__all__ = ["create_optimizer", "create_scheduler", "plot_lr_schedule", "resolved_device",
           "same_device", "scheduler_interval"]
