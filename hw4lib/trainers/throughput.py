"""The trainer's host work, measured: its training pass against its raw model step.

``LMTrainer._train_epoch`` does more than the arithmetic of a step: the DataLoader collates each
batch, the batch is copied to the device, the loss is added up and shown in the progress bar.
On a GPU the device waits whenever the host reads a value back or falls behind, so that work can
cost more than the step itself. :func:`loop_against_raw_step` times the pass and the bare steps on
the same batches; the loop-overhead benchmark and ``hw4lib/gpu_check.py`` print it.
"""
from __future__ import annotations

import statistics
import time

import torch


def _synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def loop_against_raw_step(trainer, loader, repeats: int = 3) -> dict[str, float]:
    """Target tokens per second of ``trainer``'s training pass over ``loader`` and of its raw step.

    The pass is ``trainer._train_epoch(loader)``. The raw step is the pass's own
    ``trainer._train_step`` on the same batches, collated and on the device beforehand, with
    nothing read back.
    Medians of ``repeats`` interleaved runs of each after one warm-up run of each. Both train
    ``trainer.model``: use a trainer whose weights may change.

    Returns:
        {"tokens": target tokens of one pass, "loop_tokens_per_s", "raw_tokens_per_s",
         "loop_over_raw": their ratio, and "loop_over_raw_cpu": the ratio of this process's CPU
         seconds (on a machine shared with other jobs the one to read: the waits for a core
         that make wall-clock times drift do not count)}.
    """
    device = trainer.device
    batches = [tuple(part.to(device) for part in batch) for batch in loader]
    tokens = sum(int(lengths.sum()) for _, _, lengths in batches)

    def raw_pass() -> None:
        trainer.model.train()
        for index, (shifted, golden, lengths) in enumerate(batches):
            trainer._train_step(shifted, golden, lengths, index, len(batches))

    runs = {"loop": lambda: trainer._train_epoch(loader), "raw": raw_pass}
    wall: dict[str, list[float]] = {name: [] for name in runs}
    cpu: dict[str, list[float]] = {name: [] for name in runs}
    for repeat in range(repeats + 1):
        for name, run in runs.items():
            _synchronize(device)
            start, start_cpu = time.perf_counter(), time.process_time()
            run()
            _synchronize(device)
            if repeat:  # the first run of each warms up (allocator, kernels, caches)
                wall[name].append(time.perf_counter() - start)
                cpu[name].append(time.process_time() - start_cpu)
    loop, raw = (tokens / statistics.median(wall[name]) for name in runs)
    return {"tokens": tokens, "loop_tokens_per_s": loop, "raw_tokens_per_s": raw,
            "loop_over_raw": loop / raw,
            "loop_over_raw_cpu": statistics.median(cpu["raw"]) / statistics.median(cpu["loop"])}
