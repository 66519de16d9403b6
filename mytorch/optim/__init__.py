"""mytorch.optim: optimizers that update numpy parameter arrays in place."""
from .adamw import AdamW, clip_grad_norm

__all__ = ["AdamW", "clip_grad_norm"]
