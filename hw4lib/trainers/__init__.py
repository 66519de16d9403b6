"""Trainers: the run-folder bookkeeping (BaseTrainer) and the language-model trainer (LMTrainer)."""
from .base_trainer import BaseTrainer
from .lm_trainer import LMTrainer, NonFiniteLossError, evaluate_language_model

__all__ = ["BaseTrainer", "LMTrainer", "NonFiniteLossError", "evaluate_language_model"]
