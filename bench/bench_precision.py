"""What ``precision: auto`` measures on this machine: training-step speed per format of each config.

The trainer's own measurement (``measure_formats``: the config's model and batch size, length
min(200, max_len), vocabulary VOCAB) for configs/tiny.yaml and configs/default.yaml on the CPU,
one thread, in a temporary experiments folder (``recorded_speeds``): prints the tokens per second
of each format, what auto keeps, the seconds it took to measure, and that a second run of the same
model reads the record instead (its choice is the first's).

    .venv/bin/python -m bench bench_precision
"""
from __future__ import annotations

import tempfile
import time
from pathlib import Path

import torch

from hw4lib.model import DecoderOnlyTransformer
from hw4lib.train import load_config
from hw4lib.trainers.base_trainer import PRECISION_TIMING_LENGTH
from hw4lib.trainers.precision import (measure_formats, measurement_key, precision_name,
                                       recorded_speeds, resolve_precision)

CONFIGS = Path(__file__).resolve().parents[1] / "configs"
VOCAB = 60


def main() -> None:
    torch.set_num_threads(1)
    cpu = torch.device("cpu")
    before = torch.get_float32_matmul_precision()
    with tempfile.TemporaryDirectory() as folder:
        for name in ("tiny", "default"):
            config = load_config(CONFIGS / f"{name}.yaml")
            model = DecoderOnlyTransformer(**config.model.model_dump(), num_classes=VOCAB)
            batch, length = config.data.batch_size, min(PRECISION_TIMING_LENGTH, config.model.max_len)
            key = measurement_key(model, batch, length, cpu)

            def speeds(key=key, model=model, batch=batch, length=length):
                return recorded_speeds(Path(folder), key,
                                       lambda: measure_formats(model, batch, length, cpu))

            for run in ("first run", "second run"):
                start = time.perf_counter()
                dtype, reason = resolve_precision("auto", cpu, speeds)
                print(f"{name}.yaml, batch {batch} x {length}, {run}: {precision_name(dtype)} "
                      f"in {time.perf_counter() - start:.1f} s ({reason})")
    torch.set_float32_matmul_precision(before)


if __name__ == "__main__":
    main()
