"""Train, evaluate and sample a decoder-only language model from one YAML config.

    python -m hw4lib.train --config configs/default.yaml [--seed N] [--run-name NAME] [--resume CKPT]

The notebook runs the very same steps by calling the functions below one by one::

    config = load_config("configs/default.yaml")
    set_seed(config.seed)
    tokenizer = build_tokenizer(config)
    train_set, val_set, test_set = build_datasets(config, tokenizer)
    check_generation_settings(config, test_set)
    train_loader, val_loader, test_loader = build_loaders(config, (train_set, val_set, test_set))
    model = build_model(config, tokenizer, max_sequence_length(train_set, val_set, test_set))
    trainer = build_trainer(config, model, tokenizer, train_loader, run_name, config_file)
    trainer.train(train_loader, val_loader, epochs=config.training.epochs)
    load_best_weights(trainer)
    test_metrics, generations = trainer.evaluate(test_loader)

The run folder ``expts/<run_name>/`` then holds config.yaml, model_arch.txt, checkpoints/,
metrics/, attn/, text/, lr_schedule.png, test_metrics.json, test_generated_results.json and
timing.json.
"""
from __future__ import annotations

import argparse
import json
import random
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch.utils.data import DataLoader

from hw4lib.config import Config, ConfigError, load_config, seed_note, validate_config
from hw4lib.data import H4Tokenizer, LMDataset, batch_loader
from hw4lib.file_io import write_json
from hw4lib.handin_format import TIMING_FILE
from hw4lib.model import DecoderOnlyTransformer
from hw4lib.trainers import LMTrainer, NonFiniteLossError, RunFolderExistsError, TrainingInterrupted
from hw4lib.trainers.base_trainer import BEST_CHECKPOINT_NAME
from hw4lib.utils import create_optimizer, create_scheduler, plot_lr_schedule

__all__ = ["ConfigError", "load_config", "validate_config", "set_seed", "build_tokenizer",
           "build_datasets", "check_generation_settings", "build_loader", "build_loaders",
           "max_sequence_length", "build_model", "build_trainer", "load_best_weights",
           "default_run_name", "run", "main"]


# ---------------------------------------------------------------------------------- the steps

def set_seed(seed: int) -> None:
    """Seed Python, numpy and torch (CPU and CUDA) so a run repeats exactly on the same machine."""
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    torch.cuda.manual_seed_all(seed)


def build_tokenizer(config: Config) -> H4Tokenizer:
    """The H4Tokenizer named by ``config.tokenization``."""
    return H4Tokenizer(config.tokenization.token_map, config.tokenization.token_type)


def build_datasets(config: Config, tokenizer) -> tuple[LMDataset, LMDataset, LMDataset]:
    """The train, validation and test LMDatasets of ``config.data``."""
    data = config.data
    partitions = (data.train_partition, data.val_partition, data.test_partition)
    return tuple(LMDataset(partition, data.model_dump(), tokenizer) for partition in partitions)


def check_generation_settings(config: Config, test_set) -> None:
    """Draw the prompts of every strategy of ``config.generation`` from ``test_set`` once.

    ``evaluate`` draws them after training; a test split too small for the configured
    ``num_samples`` and ``prompt_length`` must fail here, before any training time is spent.
    """
    for name, settings in config.generation.strategies().items():
        try:
            test_set.sample_prompts(settings.num_samples, settings.prompt_length, seed=settings.seed)
        except ValueError as error:
            raise ConfigError(f"config section 'generation.{name}' does not fit the test split "
                              f"(checked before training): {error}") from error


def build_loader(config: Config, dataset, shuffle: bool) -> DataLoader:
    """``hw4lib.data.batch_loader`` with the config's ``data.batch_size``, ``data.NUM_WORKERS`` and
    ``training.bucket_by_length``."""
    return batch_loader(dataset, config.data.batch_size, shuffle, config.training.bucket_by_length,
                        config.data.NUM_WORKERS)


def build_loaders(config: Config, datasets) -> tuple[DataLoader, DataLoader, DataLoader]:
    """DataLoaders over (train, val, test); only the training one shuffles."""
    return tuple(build_loader(config, dataset, shuffle=(index == 0)) for index, dataset in enumerate(datasets))


def max_sequence_length(*datasets) -> int:
    """Longest input sequence ([SOS] included) over ``datasets``."""
    return max(dataset.text_max_len for dataset in datasets)


def build_model(config: Config, tokenizer, longest_sequence: int | None = None) -> DecoderOnlyTransformer:
    """``DecoderOnlyTransformer(**config.model.model_dump(), num_classes=tokenizer.vocab_size)``.

    With ``longest_sequence``, check that ``model.max_len`` covers the data.
    """
    max_len = config.model.max_len
    if longest_sequence is not None and longest_sequence > max_len:
        raise ConfigError(f"config key 'model.max_len' is {max_len} but the longest sequence of "
                          f"the data has {longest_sequence} tokens; raise model.max_len")
    return DecoderOnlyTransformer(**config.model.model_dump(), num_classes=tokenizer.vocab_size)


def build_trainer(config: Config, model, tokenizer, train_loader, run_name: str,
                  config_file: str | Path | None = None, device=None) -> LMTrainer:
    """An LMTrainer with its optimizer and scheduler, and a plot of the schedule in the run folder."""
    trainer = LMTrainer(model, tokenizer, config, run_name, config_file, device)
    accumulation = config.training.gradient_accumulation_steps
    trainer.optimizer = create_optimizer(trainer.model, config.optimizer)
    trainer.scheduler = create_scheduler(trainer.optimizer, config.scheduler, train_loader, accumulation)
    plot_lr_schedule(trainer.optimizer, config.scheduler, train_loader, accumulation,
                     config.training.epochs, trainer.expt_root / "lr_schedule.png")
    return trainer


def load_best_weights(trainer: LMTrainer) -> Path | None:
    """Load the model weights of the best-validation checkpoint (the RNG and counters stay)."""
    path = trainer.checkpoint_dir / BEST_CHECKPOINT_NAME
    if not path.is_file():
        return None
    checkpoint = torch.load(path, map_location=trainer.device, weights_only=False)
    trainer.model.load_state_dict(checkpoint["model_state_dict"])
    return path


def default_run_name(config: Config) -> str:
    """``<config.name>-<date>-<time>``, with ``-2``, ``-3``... when a run folder of that name
    exists (two runs started in the same second)."""
    stem = f"{config.name}-{time.strftime('%Y%m%d-%H%M%S')}"
    expts, name, count = Path(config.training.expts_dir), stem, 1
    while (expts / name).exists():
        count += 1
        name = f"{stem}-{count}"
    return name


def run(config_file: str | Path, seed: int | None = None, run_name: str | None = None,
        resume: str | None = None, overrides: dict[str, Any] | None = None) -> Path:
    """Every step of a run, in order; returns the run folder."""
    overrides = dict(overrides or {})
    if seed is not None:
        overrides["seed"] = seed
    if resume is not None:
        overrides["training.resume_from"] = resume
    config = load_config(config_file, overrides)
    if config.training.num_threads:
        torch.set_num_threads(config.training.num_threads)
    run_name = run_name or default_run_name(config)
    timing: dict[str, float] = {}
    start = time.perf_counter()

    set_seed(config.seed)
    tokenizer = build_tokenizer(config)
    datasets = build_datasets(config, tokenizer)
    check_generation_settings(config, datasets[2])
    train_loader, val_loader, test_loader = build_loaders(config, datasets)
    model = build_model(config, tokenizer, max_sequence_length(*datasets))
    trainer = build_trainer(config, model, tokenizer, train_loader, run_name, config_file)
    print(f"run folder: {trainer.expt_root}\n"
          f"tokenizer {config.tokenization.token_type} (vocab {tokenizer.vocab_size}); "
          f"train {len(datasets[0])} transcripts, {datasets[0].total_tokens} tokens, "
          f"{datasets[0].total_chars} chars; model {sum(p.numel() for p in model.parameters()):,} "
          f"parameters on {trainer.device}; {seed_note(config)}", flush=True)
    if config.training.resume_from:
        trainer.load_checkpoint(config.training.resume_from)
        print(f"resumed from {config.training.resume_from} after epoch {trainer.current_epoch}")
    timing["setup_seconds"] = time.perf_counter() - start

    try:
        trainer.train(train_loader, val_loader, epochs=config.training.epochs)
        timing["train_seconds"] = time.perf_counter() - start - timing["setup_seconds"]
        load_best_weights(trainer)
        evaluate_start = time.perf_counter()
        with trainer.interruptible("the evaluation"):
            test_metrics, generations = trainer.evaluate(test_loader)
        timing["evaluate_seconds"] = time.perf_counter() - evaluate_start
    finally:
        trainer.cleanup()
    timing["total_seconds"] = time.perf_counter() - start
    write_json(trainer.expt_root / TIMING_FILE, timing)

    print("test metrics: " + json.dumps({k: round(v, 4) for k, v in test_metrics.items()}))
    for strategy, samples in generations.items():
        print(f"{strategy}: [{samples[0]['prompt']}] -> {samples[0]['generated']}")
    print(f"done in {timing['total_seconds']:.0f}s; run folder {trainer.expt_root}", flush=True)
    return trainer.expt_root


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", default="configs/default.yaml", help="YAML config file")
    parser.add_argument("--seed", type=int, default=None,
                        help="the run's seed (default: the config's, else one drawn for this run)")
    parser.add_argument("--run-name", default=None, help="run folder name (default <name>-<timestamp>)")
    parser.add_argument("--resume", default=None, help="checkpoint to resume training from")
    args = parser.parse_args(argv)
    try:
        run(args.config, seed=args.seed, run_name=args.run_name, resume=args.resume)
    except (ConfigError, NonFiniteLossError, FileNotFoundError, RunFolderExistsError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    except TrainingInterrupted as stop:
        print(f"\ninterrupted: {stop}", file=sys.stderr)
        return 130
    except KeyboardInterrupt:
        print("\ninterrupted; the run did not finish", file=sys.stderr)
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
