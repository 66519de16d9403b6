"""What ``precision: auto`` measures on this CPU: fp32 against bf16 training steps of each config.

``hw4lib.trainers.precision.resolve_precision("auto", cpu, step_seconds)`` with the trainer's own
timing (``train_step_seconds``: the config's model and batch size, length min(200, max_len),
vocabulary VOCAB), for configs/tiny.yaml and configs/default.yaml, one thread. Prints what auto
keeps, its sentence with both timings, and the seconds it took to decide.

    .venv/bin/python -m bench bench_precision
"""
from __future__ import annotations

import time
from pathlib import Path

import torch

from hw4lib.model import DecoderOnlyTransformer
from hw4lib.train import load_config
from hw4lib.trainers.precision import resolve_precision, train_step_seconds

CONFIGS = Path(__file__).resolve().parents[1] / "configs"
VOCAB = 60
MAX_LENGTH = 200


def main() -> None:
    torch.set_num_threads(1)
    cpu = torch.device("cpu")
    for name in ("tiny", "default"):
        config = load_config(CONFIGS / f"{name}.yaml")
        model = DecoderOnlyTransformer(**config.model.model_dump(), num_classes=VOCAB)
        length = min(MAX_LENGTH, config.model.max_len)
        start = time.perf_counter()
        chosen = resolve_precision("auto", cpu, lambda dtype: train_step_seconds(
            model, config.data.batch_size, length, cpu, dtype))
        print(f"{name}.yaml: {chosen} ({time.perf_counter() - start:.1f} s to decide)")


if __name__ == "__main__":
    main()
