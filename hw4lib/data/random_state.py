"""The global random states a run draws from (Python, numpy, torch CPU and CUDA), captured and
restored as one.

A checkpoint holds them so that a resumed run continues exactly; :func:`preserved_rng_states`
lets code that only looks (a check that draws one batch from a shuffling loader) leave them as it
found them, so that a run gives the same numbers with or without the look.
"""
from __future__ import annotations

import random
from contextlib import contextmanager
from typing import Any, Iterator

import numpy as np
import torch


def capture_rng_states() -> dict[str, Any]:
    """Every random state a training step draws from (Python, numpy, torch CPU and CUDA)."""
    states = {"python": random.getstate(), "numpy": np.random.get_state(),
              "torch": torch.get_rng_state()}
    if torch.cuda.is_available():
        states["cuda"] = torch.cuda.get_rng_state_all()
    return states


def restore_rng_states(states: dict[str, Any]) -> None:
    """Inverse of :func:`capture_rng_states`."""
    random.setstate(states["python"])
    np.random.set_state(states["numpy"])
    torch.set_rng_state(states["torch"])
    if "cuda" in states and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(states["cuda"])


@contextmanager
def preserved_rng_states() -> Iterator[None]:
    """Run the block, then put every global random state back as it was before it (also when the
    block raises)."""
    states = capture_rng_states()
    try:
        yield
    finally:
        restore_rng_states(states)
