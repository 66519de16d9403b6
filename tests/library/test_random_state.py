# hw4p1: instructor-only
"""hw4lib/data/random_state.py: every global random state captured and put back, CUDA's only where
a GPU is there to take it (a checkpoint of a GPU run resumed on a CPU, and the reverse).

    .venv/bin/python -m pytest -q tests/library/test_random_state.py
"""
import random

import numpy as np
import pytest
import torch

from hw4lib.data import random_state


def draws() -> tuple:
    return random.random(), float(np.random.rand()), float(torch.rand(1))


def test_restoring_the_captured_states_repeats_every_draw():
    states = random_state.capture_rng_states()
    assert set(states) == {"python", "numpy", "torch"} or torch.cuda.is_available()
    first = draws()
    assert draws() != first
    random_state.restore_rng_states(states)
    assert draws() == first


def test_the_states_are_put_back_after_the_block_even_when_it_raises():
    states = random_state.capture_rng_states()
    expected = draws()
    random_state.restore_rng_states(states)
    with pytest.raises(RuntimeError):
        with random_state.preserved_rng_states():
            draws()
            raise RuntimeError("a check failed half-way")
    assert draws() == expected
    random_state.restore_rng_states(states)
    with random_state.preserved_rng_states():
        draws()
    assert draws() == expected


class FakeCuda:
    """torch.cuda's random-state calls, on a machine that has (or has not) a GPU."""

    def __init__(self, available: bool) -> None:
        self.available, self.set = available, []

    def install(self, monkeypatch) -> None:
        monkeypatch.setattr(torch.cuda, "is_available", lambda: self.available)
        monkeypatch.setattr(torch.cuda, "get_rng_state_all", lambda: ["gpu state"])
        monkeypatch.setattr(torch.cuda, "set_rng_state_all", self.set.append)


@pytest.mark.parametrize("available", [True, False])
def test_cuda_s_state_is_captured_and_restored_only_where_a_gpu_is(monkeypatch, available):
    cuda = FakeCuda(available)
    cuda.install(monkeypatch)
    states = random_state.capture_rng_states()
    assert ("cuda" in states) is available
    assert states.get("cuda", ["gpu state"]) == ["gpu state"]
    random_state.restore_rng_states({**states, "cuda": ["from a checkpoint"]})
    assert cuda.set == ([["from a checkpoint"]] if available else [])
    cuda.set.clear()
    random_state.restore_rng_states({k: v for k, v in states.items() if k != "cuda"})
    assert cuda.set == []  # a CPU run's checkpoint resumed on a GPU: nothing to restore
