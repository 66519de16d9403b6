"""The trainer's host work: the default config's training pass against its raw model step.

``hw4lib.trainers.throughput.loop_against_raw_step`` on the default config (its model, optimizer,
schedule, precision and progress bar) over the first SUBSET of its training data, on the CPU:
``LMTrainer._train_epoch`` (collation, copies, loss bookkeeping, progress bar) against the same
batches' bare steps. Target: the pass at >= 90% of the raw step on the CPU (>= 50% on a GPU, which
``make gpu-check`` measures). Medians of REPEATS interleaved passes; on a machine shared with other
jobs read the CPU-seconds ratio (run with OMP_NUM_THREADS=1).

    OMP_NUM_THREADS=1 .venv/bin/python -m bench bench_loop_overhead
"""
from __future__ import annotations

import platform
import tempfile
from pathlib import Path

import torch

from hw4lib.train import build_datasets, build_loader, build_model, build_tokenizer, load_config, set_seed
from hw4lib.trainers import LMTrainer
from hw4lib.trainers.throughput import loop_against_raw_step
from hw4lib.utils import create_optimizer, create_scheduler

CONFIG = Path(__file__).resolve().parents[1] / "configs" / "default.yaml"
SUBSET, REPEATS = 0.02, 3


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="hw4p1-bench-loop-") as folder:
        config = load_config(CONFIG, {"data.subset": SUBSET, "training.expts_dir": folder,
                                      "training.device": "cpu"})
        set_seed(0)
        tokenizer = build_tokenizer(config)
        train_set = build_datasets(config, tokenizer)[0]
        loader = build_loader(config, train_set, shuffle=False)
        trainer = LMTrainer(build_model(config, tokenizer), tokenizer, config, "bench", None)
        trainer.optimizer = create_optimizer(trainer.model, config.optimizer)
        trainer.scheduler = create_scheduler(trainer.optimizer, config.scheduler, loader,
                                             config.training.gradient_accumulation_steps)
        result = loop_against_raw_step(trainer, loader, REPEATS)
    print(f"{CONFIG.name}, data.subset {SUBSET}: {len(loader)} batches, {result['tokens']:,} target "
          f"tokens per pass; {platform.processor() or platform.machine()}, {torch.get_num_threads()} "
          f"torch threads, medians of {REPEATS}")
    print(f"  raw step     {result['raw_tokens_per_s']:>9,.0f} tokens/s")
    print(f"  trainer pass {result['loop_tokens_per_s']:>9,.0f} tokens/s   "
          f"{result['loop_over_raw']:.1%} of the raw step; in CPU seconds of this process "
          f"{result['loop_over_raw_cpu']:.1%} (target >= 90% on the CPU)")


if __name__ == "__main__":
    main()
