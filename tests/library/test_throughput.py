# hw4p1: instructor-only
"""hw4lib/trainers/throughput.py: the trainer's pass against its raw step, on a trainer whose
passes and steps advance a scripted clock. What is read by value: the tokens counted, the warm-up
run left out of the medians, the ratios of wall and CPU time, the raw pass's steps and their
indices, the device synchronised before and after each timed run on a GPU.

    .venv/bin/python -m pytest -q tests/library/test_throughput.py
"""
import pytest
import torch

from hw4lib.trainers import throughput


class Part(list):
    """A batch tensor's stand-in: ``to`` records the device, ``sum`` adds the values."""

    def to(self, device):
        self.device = device
        return self

    def sum(self) -> int:
        return sum(iter(self))


class Clock:
    """perf_counter and process_time that only the fake trainer's work moves."""

    def __init__(self) -> None:
        self.wall = self.cpu = 0.0

    def spend(self, wall: float, cpu: float) -> None:
        self.wall += wall
        self.cpu += cpu


class FakeTrainer:
    """``_train_epoch`` takes the next of ``loop_s`` (wall, CPU) seconds; each raw step a share of
    the next of ``raw_s``."""

    def __init__(self, clock: Clock, device: str, loop_s: list, raw_s: list, batches: int) -> None:
        self.clock, self.device, self.batches = clock, torch.device(device), batches
        self.loop_s, self.raw_s, self.steps, self.trained = list(loop_s), list(raw_s), [], 0
        self.model = self

    def train(self) -> None:
        self.trained += 1

    def _train_epoch(self, loader) -> None:
        self.clock.spend(*self.loop_s.pop(0))

    def _train_step(self, shifted, golden, lengths, index, total) -> None:
        assert shifted.device == self.device and lengths.device == self.device
        self.steps.append((index, total))
        wall, cpu = self.raw_s[0]
        self.clock.spend(wall / self.batches, cpu / self.batches)
        if index == total - 1:
            self.raw_s.pop(0)


def measured(monkeypatch, device: str, repeats: int | None, loop_s, raw_s):
    clock, synced = Clock(), []
    monkeypatch.setattr(throughput.time, "perf_counter", lambda: clock.wall)
    monkeypatch.setattr(throughput.time, "process_time", lambda: clock.cpu)
    monkeypatch.setattr(torch.cuda, "synchronize", synced.append)
    loader = [(Part([1]), Part([2]), Part([3, 4])), (Part([5]), Part([6]), Part([10]))]
    trainer = FakeTrainer(clock, device, loop_s, raw_s, len(loader))
    options = {} if repeats is None else {"repeats": repeats}
    return throughput.loop_against_raw_step(trainer, loader, **options), trainer, synced


def test_medians_of_the_runs_after_the_warm_up_give_the_rates_and_their_ratios(monkeypatch):
    # (wall, CPU) seconds: the warm-up first, then the 3 timed runs (medians 3 and 1; CPU 6 and 2)
    loop_s = [(100, 100), (2, 9), (4, 6), (3, 1)]
    raw_s = [(100, 100), (1, 2), (1, 3), (2, 1)]
    result, trainer, synced = measured(monkeypatch, "cpu", None, loop_s, raw_s)
    assert result == {"tokens": 17, "loop_tokens_per_s": 17 / 3, "raw_tokens_per_s": 17.0,
                      "loop_over_raw": pytest.approx(1 / 3), "loop_over_raw_cpu": 2 / 6}
    assert trainer.loop_s == [] and trainer.raw_s == []  # 1 warm-up + 3 timed runs of each
    assert trainer.steps == [(0, 2), (1, 2)] * 4 and trainer.trained == 4
    assert synced == []


def test_repeats_timed_runs_and_a_gpu_synchronised_around_each(monkeypatch):
    result, trainer, synced = measured(monkeypatch, "cuda", 1, [(9, 9), (2, 2)], [(9, 9), (1, 1)])
    assert result["loop_over_raw"] == 0.5 and result["loop_tokens_per_s"] == 17 / 2
    assert trainer.loop_s == [] and trainer.raw_s == []
    assert synced == [torch.device("cuda")] * 8  # before and after each of the 4 runs
