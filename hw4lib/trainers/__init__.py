"""Trainers: the run-folder bookkeeping (BaseTrainer), the language-model trainer (LMTrainer) and
the metric they report (evaluate_language_model, in metrics.py)."""
from ._checks import NonFiniteLossError, RunFolderExistsError, TrainingInterrupted
from .base_trainer import BaseTrainer
from .lm_trainer import LMTrainer
from .metrics import evaluate_language_model

__all__ = ["BaseTrainer", "LMTrainer", "NonFiniteLossError", "RunFolderExistsError",
           "TrainingInterrupted", "evaluate_language_model"]
