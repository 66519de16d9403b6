"""Train, evaluate and sample a decoder-only language model from one YAML config.

    python -m hw4lib.train --config configs/default.yaml [--seed N] [--run-name NAME] [--resume CKPT]

The notebook runs the very same steps by calling the functions below one by one::

    config = load_config("configs/default.yaml")
    set_seed(config["seed"])
    tokenizer = build_tokenizer(config)
    train_set, val_set, test_set = build_datasets(config, tokenizer)
    check_generation_settings(config, test_set)
    train_loader, val_loader, test_loader = build_loaders(config, (train_set, val_set, test_set))
    model = build_model(config, tokenizer, max_sequence_length(train_set, val_set, test_set))
    trainer = build_trainer(config, model, tokenizer, train_loader, run_name, config_file)
    trainer.train(train_loader, val_loader, epochs=config["training"]["epochs"])
    load_best_weights(trainer)
    test_metrics, generations = trainer.evaluate(test_loader)

The run folder ``expts/<run_name>/`` then holds config.yaml, model_arch.txt, checkpoints/,
metrics/, attn/, text/, lr_schedule.png, test_metrics.json, test_generated_results.json and
timing.json.
"""
from __future__ import annotations

import argparse
import copy
import inspect
import json
import math
import random
import sys
import time
from pathlib import Path
from typing import Any, Callable

import numpy as np
import torch
import yaml
from torch.utils.data import DataLoader, Sampler

from hw4lib.data import H4Tokenizer, LMDataset
from hw4lib.model import DecoderOnlyTransformer
from hw4lib.trainers import LMTrainer, NonFiniteLossError
from hw4lib.trainers.base_trainer import CHECKPOINT_BEST, write_json
from hw4lib.trainers.lm_trainer import generation_configs
from hw4lib.trainers.precision import PRECISIONS, requested_precision
from hw4lib.utils import create_optimizer, create_scheduler, plot_lr_schedule

TOKEN_TYPES = ("char", "1k", "5k", "10k")


class ConfigError(ValueError):
    """A config value is missing, unknown or out of range; the message names the key."""


# ---------------------------------------------------------------------------------- validation

_REQUIRED = object()


def _is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


# Each rule: key -> (default or _REQUIRED, check(value) -> bool, what the check expects).
_POSITIVE_INT = (lambda v: _is_int(v) and v > 0, "a positive integer")
_NON_NEGATIVE_INT = (lambda v: _is_int(v) and v >= 0, "an integer >= 0")
_NON_NEGATIVE = (lambda v: _is_number(v) and v >= 0, "a number >= 0")
_POSITIVE = (lambda v: _is_number(v) and v > 0, "a number > 0")
_FRACTION = (lambda v: _is_number(v) and 0 < v <= 1, "a number in (0, 1]")
_UNIT_INTERVAL = (lambda v: _is_number(v) and 0 <= v < 1, "a number in [0, 1)")
_BOOL = (lambda v: isinstance(v, bool), "true or false")
_STRING = (lambda v: isinstance(v, str) and v != "", "a non-empty string")
_OPTIONAL_STRING = (lambda v: v is None or (isinstance(v, str) and v != ""), "a string or null")
_STRING_LIST = (lambda v: isinstance(v, list) and all(isinstance(s, str) for s in v), "a list of strings")
_DICT = (lambda v: isinstance(v, dict), "a mapping")


def _one_of(*choices):
    return (lambda v: v in choices, f"one of {list(choices)}")


def _rule(default, check):
    return (default, *check)


SCHEMA: dict[str, dict[str, tuple]] = {
    "tokenization": {
        "token_type": _rule(_REQUIRED, _one_of(*TOKEN_TYPES)),
        "token_map": _rule(_REQUIRED, _DICT),
    },
    "data": {
        "root": _rule(_REQUIRED, _STRING),
        "train_partition": _rule("train", _STRING),
        "val_partition": _rule("val", _STRING),
        "test_partition": _rule("test", _STRING),
        "subset": _rule(1.0, _FRACTION),
        "batch_size": _rule(_REQUIRED, _POSITIVE_INT),
        "NUM_WORKERS": _rule(0, _NON_NEGATIVE_INT),
    },
    "training": {
        "epochs": _rule(_REQUIRED, _POSITIVE_INT),
        "gradient_accumulation_steps": _rule(1, _POSITIVE_INT),
        "grad_clip_norm": _rule(1.0, _NON_NEGATIVE),
        "label_smoothing": _rule(0.0, _UNIT_INTERVAL),
        "precision": _rule(None, (lambda v: v is None or v in PRECISIONS, f"one of {list(PRECISIONS)}")),
        "use_amp": _rule(None, (lambda v: v is None or isinstance(v, bool), "true or false (old name of precision)")),
        "samples_every": _rule(0, _NON_NEGATIVE_INT),
        "bucket_by_length": _rule(True, _BOOL),
        "progress_bar": _rule(True, _BOOL),
        "use_wandb": _rule(False, _BOOL),
        "wandb_project": _rule("hw4p1", _STRING),
        "expts_dir": _rule("expts", _STRING),
        "device": _rule("auto", _STRING),
        "num_threads": _rule(0, _NON_NEGATIVE_INT),
        "resume_from": _rule(None, _OPTIONAL_STRING),
    },
    "optimizer": {
        "name": _rule(_REQUIRED, _one_of("sgd", "adam", "adamw")),
        "lr": _rule(_REQUIRED, _POSITIVE),
        "weight_decay": _rule(0.0, _NON_NEGATIVE),
        "no_decay_patterns": _rule([], _STRING_LIST),
        "param_groups": _rule([], (lambda v: isinstance(v, list), "a list of {name, patterns, lr?, weight_decay?}")),
        "layer_decay": _rule({"enabled": False}, _DICT),
        "sgd": _rule({}, _DICT),
        "adam": _rule({}, _DICT),
        "adamw": _rule({}, _DICT),
    },
    "scheduler": {
        "name": _rule(_REQUIRED, _one_of("cosine", "cosine_warm", "reduce_lr", "constant")),
        "interval": _rule("step", _one_of("step", "epoch")),
        "warmup": _rule({"enabled": False}, _DICT),
        "cosine": _rule({}, _DICT),
        "cosine_warm": _rule({}, _DICT),
        "reduce_lr": _rule({}, _DICT),
    },
    "generation": {
        "num_samples": _rule(10, _POSITIVE_INT),
        "prompt_length": _rule(10, _POSITIVE_INT),
        "seed": _rule(0, _NON_NEGATIVE_INT),
        "max_length": _rule(100, _POSITIVE_INT),
    },
}

GENERATION_STRATEGY_SCHEMA = {
    "method": _rule(None, _one_of("greedy", "beam", "sample")),
    "num_samples": SCHEMA["generation"]["num_samples"],
    "prompt_length": SCHEMA["generation"]["prompt_length"],
    "seed": SCHEMA["generation"]["seed"],
    "max_length": SCHEMA["generation"]["max_length"],
    "temperature": _rule(1.0, _POSITIVE),
    "repeat_penalty": _rule(1.0, _POSITIVE),
    "beam_width": _rule(3, _POSITIVE_INT),
    "top_k": _rule(0, _NON_NEGATIVE_INT),
    "top_p": _rule(1.0, _FRACTION),
}


def _validate_section(values: Any, rules: dict[str, tuple], where: str,
                      extra_ok: Callable[[str, Any], bool] = lambda key, value: False) -> dict:
    """Check one config section against ``rules``; return it with defaults filled in."""
    if not isinstance(values, dict):
        raise ConfigError(f"config key '{where}' must be a mapping, got {values!r}")
    unknown = [key for key in values if key not in rules and not extra_ok(key, values[key])]
    if unknown:
        raise ConfigError(f"config key '{where}.{unknown[0]}' is unknown; known keys: {sorted(rules)}")
    checked = dict(values)
    for key, (default, check, expected) in rules.items():
        if key not in values or values[key] is None and default is not None:
            if default is _REQUIRED:
                raise ConfigError(f"config key '{where}.{key}' is missing; it must be {expected}")
            checked[key] = copy.deepcopy(default)
        elif not check(values[key]):
            raise ConfigError(f"config key '{where}.{key}' must be {expected}, got {values[key]!r}")
    return checked


def _validate_model(values: Any) -> dict:
    """The model section must hold exactly DecoderOnlyTransformer's keyword arguments but num_classes."""
    if not isinstance(values, dict):
        raise ConfigError(f"config key 'model' must be a mapping, got {values!r}")
    parameters = inspect.signature(DecoderOnlyTransformer.__init__).parameters
    allowed = [name for name in parameters if name not in ("self", "num_classes")]
    for key in values:
        if key not in allowed:
            hint = " (it comes from the tokenizer's vocab_size)" if key == "num_classes" else ""
            raise ConfigError(f"config key 'model.{key}' is not a DecoderOnlyTransformer argument{hint}; "
                              f"allowed: {allowed}")
    missing = [name for name in allowed
               if parameters[name].default is inspect.Parameter.empty and name not in values]
    if missing:
        raise ConfigError(f"config key 'model.{missing[0]}' is missing")
    try:
        with torch.device("meta"):  # runs the model's own argument checks without allocating
            DecoderOnlyTransformer(**values, num_classes=8)
    except NotImplementedError:
        pass  # a student's handout before the model is written: nothing more to check here
    except ValueError as error:
        raise ConfigError(f"config section 'model': {error}") from error
    return dict(values)


def validate_config(config: Any) -> dict[str, Any]:
    """Check every key of a config and fill in defaults; raise ConfigError naming the bad key.

    Returns a new dict; the input is not modified.
    """
    if not isinstance(config, dict):
        raise ConfigError(f"a config must be a mapping of sections, got {type(config).__name__}")
    sections = set(SCHEMA) | {"name", "seed", "model"}
    unknown = [key for key in config if key not in sections]
    if unknown:
        raise ConfigError(f"config key '{unknown[0]}' is unknown; known keys: {sorted(sections)}")
    checked = {
        "name": _validate_section({"name": config.get("name", "run")},
                                  {"name": _rule(_REQUIRED, _STRING)}, "config")["name"],
        "seed": _validate_section({"seed": config.get("seed", 0)},
                                  {"seed": _rule(0, _NON_NEGATIVE_INT)}, "config")["seed"],
    }
    for section in ("tokenization", "data", "model", "training", "optimizer", "scheduler", "generation"):
        values = config.get(section, {} if section == "generation" else None)
        if values is None:
            raise ConfigError(f"config key '{section}' is missing")
        if section == "model":
            checked[section] = _validate_model(values)
        elif section == "generation":
            checked[section] = _validate_section(values, SCHEMA[section], section,
                                                 extra_ok=lambda key, value: isinstance(value, dict))
            for name, options in values.items():
                if isinstance(options, dict):
                    strategy = _validate_section(options, GENERATION_STRATEGY_SCHEMA, f"generation.{name}")
                    method = strategy.get("method") or name
                    if method not in ("greedy", "beam", "sample"):
                        raise ConfigError(f"config key 'generation.{name}.method' must be greedy, beam or "
                                          f"sample (or name the strategy after one of them), got {method!r}")
                    checked[section][name] = dict(options)
        else:
            checked[section] = _validate_section(values, SCHEMA[section], section)
    token_type = checked["tokenization"]["token_type"]
    if token_type not in checked["tokenization"]["token_map"]:
        raise ConfigError(f"config key 'tokenization.token_map.{token_type}' is missing: "
                          f"token_type {token_type!r} needs a tokenizer file")
    try:
        checked["training"]["precision"] = requested_precision(checked["training"])
        checked["training"].pop("use_amp")  # resolved into precision, its new name
    except ValueError as error:
        raise ConfigError(f"config key 'training.precision': {error}") from error
    _validate_schedule(checked["scheduler"], checked["training"]["epochs"])
    return checked


def _validate_schedule(scheduler: dict, epochs: int) -> None:
    """Check the keys the chosen schedule needs; a cosine without ``T_max`` spans the rest of training."""
    name = scheduler["name"]
    warmup = scheduler["warmup"]
    warmup_epochs = warmup.get("epochs", 0) if warmup.get("enabled") else 0
    if warmup.get("enabled"):
        if name == "reduce_lr":
            raise ConfigError("config key 'scheduler.warmup.enabled' must be false with scheduler.name "
                              "'reduce_lr' (a plateau schedule has no clock to warm up on)")
        if not _is_number(warmup_epochs) or not 0 < warmup_epochs < epochs:
            raise ConfigError(f"config key 'scheduler.warmup.epochs' must be in (0, training.epochs={epochs}), "
                              f"got {warmup_epochs!r}")
    if name == "cosine" and scheduler["cosine"].get("T_max") is None:
        scheduler["cosine"] = {**scheduler["cosine"], "T_max": epochs - warmup_epochs}
    needed = {"cosine": "T_max", "cosine_warm": "T_0"}.get(name)
    if needed:
        value = scheduler[name].get(needed)
        if not _is_number(value) or value <= 0:
            raise ConfigError(f"config key 'scheduler.{name}.{needed}' must be a number of epochs > 0, "
                              f"got {value!r}")


def load_config(path: str | Path, overrides: dict[str, Any] | None = None) -> dict[str, Any]:
    """Read a YAML config, apply ``overrides`` (``{"seed": 1, "training.epochs": 2}``), validate it."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"config file {path} does not exist")
    config = yaml.safe_load(path.read_text())
    for dotted, value in (overrides or {}).items():
        *parents, leaf = dotted.split(".")
        section = config
        for key in parents:
            section = section.setdefault(key, {})
        section[leaf] = value
    return validate_config(config)


# ---------------------------------------------------------------------------------- the steps

def set_seed(seed: int) -> None:
    """Seed Python, numpy and torch (CPU and CUDA) so a run repeats exactly on the same machine."""
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    torch.cuda.manual_seed_all(seed)


def build_tokenizer(config: dict[str, Any]) -> H4Tokenizer:
    """The H4Tokenizer named by ``config["tokenization"]``."""
    tokenization = config["tokenization"]
    return H4Tokenizer(tokenization["token_map"], tokenization["token_type"])


def build_datasets(config: dict[str, Any], tokenizer) -> tuple[LMDataset, LMDataset, LMDataset]:
    """The train, validation and test LMDatasets of ``config["data"]``."""
    data = config["data"]
    return tuple(LMDataset(data[f"{split}_partition"], data, tokenizer)
                 for split in ("train", "val", "test"))


def check_generation_settings(config: dict[str, Any], test_set) -> None:
    """Draw the prompts of every strategy in ``config["generation"]`` from ``test_set`` once.

    ``evaluate`` draws them after training; a test split too small for the configured
    ``num_samples`` and ``prompt_length`` must fail here, before any training time is spent.
    """
    for name, settings in generation_configs(config).items():
        try:
            test_set.sample_prompts(settings["num_samples"], settings["prompt_length"], seed=settings["seed"])
        except ValueError as error:
            raise ConfigError(f"config section 'generation.{name}' does not fit the test split "
                              f"(checked before training): {error}") from error


class LengthBucketBatchSampler(Sampler[list[int]]):
    """Batches of transcripts of similar length, in a random order every epoch.

    Random batches pad every sequence to the longest of the batch; with transcripts of 10 to 500
    characters that wastes more than half of the compute. Each epoch this sampler shuffles the
    dataset, cuts it into pools of ``batch_size * pool_batches`` transcripts, sorts each pool by
    length, cuts the pools into batches and shuffles the batches. Every draw comes from torch's
    global RNG, which checkpoints save, so a resumed run replays the same batches.

    Args:
        lengths: the length of each transcript (any monotone proxy works).
        batch_size: transcripts per batch (the last batch of a pool may be smaller).
        shuffle: False gives fixed batches sorted by length (for evaluation).
        pool_batches: how many batches' worth of transcripts are sorted together.
    """

    def __init__(self, lengths: list[int], batch_size: int, shuffle: bool = True, pool_batches: int = 50):
        self.lengths = torch.as_tensor(lengths)
        self.batch_size, self.shuffle, self.pool_batches = batch_size, shuffle, pool_batches

    def __len__(self) -> int:
        pool = self.batch_size * self.pool_batches
        full_pools, rest = divmod(len(self.lengths), pool)
        return full_pools * self.pool_batches + math.ceil(rest / self.batch_size)

    def __iter__(self):
        count = len(self.lengths)
        order = torch.randperm(count) if self.shuffle else torch.arange(count)
        pool_size = self.batch_size * self.pool_batches if self.shuffle else count
        batches = []
        for start in range(0, count, pool_size):
            pool = order[start:start + pool_size]
            pool = pool[torch.argsort(self.lengths[pool], stable=True)]
            batches += [pool[k:k + self.batch_size].tolist() for k in range(0, len(pool), self.batch_size)]
        if self.shuffle:
            batches = [batches[i] for i in torch.randperm(len(batches)).tolist()]
        return iter(batches)


def build_loader(config: dict[str, Any], dataset, shuffle: bool) -> DataLoader:
    """One DataLoader over ``dataset`` with the config's batch size.

    With ``training.bucket_by_length`` the batches group transcripts of similar length (see
    LengthBucketBatchSampler); the metrics do not depend on how batches are formed. The shuffle
    order is drawn from torch's global RNG, which checkpoints save and restore, so a resumed run
    sees the same batches as an uninterrupted one.
    """
    data = config["data"]
    common = dict(collate_fn=dataset.collate_fn, num_workers=data["NUM_WORKERS"])
    if config["training"]["bucket_by_length"]:
        lengths = [len(golden) for golden in dataset.transcripts_golden]
        sampler = LengthBucketBatchSampler(lengths, data["batch_size"], shuffle=shuffle)
        return DataLoader(dataset, batch_sampler=sampler, **common)
    return DataLoader(dataset, batch_size=data["batch_size"], shuffle=shuffle, **common)


def build_loaders(config: dict[str, Any], datasets) -> tuple[DataLoader, DataLoader, DataLoader]:
    """DataLoaders over (train, val, test); only the training one shuffles."""
    return tuple(build_loader(config, dataset, shuffle=(index == 0)) for index, dataset in enumerate(datasets))


def max_sequence_length(*datasets) -> int:
    """Longest input sequence ([SOS] included) over ``datasets``."""
    return max(dataset.text_max_len for dataset in datasets)


def build_model(config: dict[str, Any], tokenizer, longest_sequence: int | None = None) -> DecoderOnlyTransformer:
    """``DecoderOnlyTransformer(**config["model"], num_classes=tokenizer.vocab_size)``.

    With ``longest_sequence``, check that ``model.max_len`` covers the data.
    """
    model_config = config["model"]
    if longest_sequence is not None and longest_sequence > model_config["max_len"]:
        raise ConfigError(f"config key 'model.max_len' is {model_config['max_len']} but the longest "
                          f"sequence of the data has {longest_sequence} tokens; raise model.max_len")
    return DecoderOnlyTransformer(**model_config, num_classes=tokenizer.vocab_size)


def build_trainer(config: dict[str, Any], model, tokenizer, train_loader, run_name: str,
                  config_file: str | Path | None = None, device=None) -> LMTrainer:
    """An LMTrainer with its optimizer and scheduler, and a plot of the schedule in the run folder."""
    trainer = LMTrainer(model, tokenizer, config, run_name, config_file, device)
    accumulation = config["training"]["gradient_accumulation_steps"]
    trainer.optimizer = create_optimizer(trainer.model, config["optimizer"])
    trainer.scheduler = create_scheduler(trainer.optimizer, config["scheduler"], train_loader, accumulation)
    plot_lr_schedule(trainer.optimizer, config["scheduler"], train_loader, accumulation,
                     config["training"]["epochs"], trainer.expt_root / "lr_schedule.png")
    return trainer


def load_best_weights(trainer: LMTrainer) -> Path | None:
    """Load the model weights of the best-validation checkpoint (the RNG and counters stay)."""
    path = trainer.checkpoint_dir / CHECKPOINT_BEST
    if not path.is_file():
        return None
    checkpoint = torch.load(path, map_location=trainer.device, weights_only=False)
    trainer.model.load_state_dict(checkpoint["model_state_dict"])
    return path


def default_run_name(config: dict[str, Any]) -> str:
    return f"{config['name']}-{time.strftime('%Y%m%d-%H%M%S')}"


def run(config_file: str | Path, seed: int | None = None, run_name: str | None = None,
        resume: str | None = None, overrides: dict[str, Any] | None = None) -> Path:
    """Every step of a run, in order; returns the run folder."""
    overrides = dict(overrides or {})
    if seed is not None:
        overrides["seed"] = seed
    if resume is not None:
        overrides["training.resume_from"] = resume
    config = load_config(config_file, overrides)
    if config["training"]["num_threads"]:
        torch.set_num_threads(config["training"]["num_threads"])
    run_name = run_name or default_run_name(config)
    timing: dict[str, float] = {}
    start = time.perf_counter()

    set_seed(config["seed"])
    tokenizer = build_tokenizer(config)
    datasets = build_datasets(config, tokenizer)
    check_generation_settings(config, datasets[2])
    train_loader, val_loader, test_loader = build_loaders(config, datasets)
    model = build_model(config, tokenizer, max_sequence_length(*datasets))
    trainer = build_trainer(config, model, tokenizer, train_loader, run_name, config_file)
    print(f"run folder: {trainer.expt_root}\n"
          f"tokenizer {config['tokenization']['token_type']} (vocab {tokenizer.vocab_size}); "
          f"train {len(datasets[0])} transcripts, {datasets[0].total_tokens} tokens, "
          f"{datasets[0].total_chars} chars; model {sum(p.numel() for p in model.parameters()):,} "
          f"parameters on {trainer.device}", flush=True)
    if config["training"]["resume_from"]:
        trainer.load_checkpoint(config["training"]["resume_from"])
        print(f"resumed from {config['training']['resume_from']} after epoch {trainer.current_epoch}")
    timing["setup_seconds"] = time.perf_counter() - start

    try:
        trainer.train(train_loader, val_loader, epochs=config["training"]["epochs"])
        timing["train_seconds"] = time.perf_counter() - start - timing["setup_seconds"]
        load_best_weights(trainer)
        evaluate_start = time.perf_counter()
        test_metrics, generations = trainer.evaluate(test_loader)
        timing["evaluate_seconds"] = time.perf_counter() - evaluate_start
    finally:
        trainer.cleanup()
    timing["total_seconds"] = time.perf_counter() - start
    write_json(trainer.expt_root / "timing.json", timing)

    print("test metrics: " + json.dumps({k: round(v, 4) for k, v in test_metrics.items()}))
    for strategy, samples in generations.items():
        print(f"{strategy}: [{samples[0]['prompt']}] -> {samples[0]['generated']}")
    print(f"done in {timing['total_seconds']:.0f}s; run folder {trainer.expt_root}", flush=True)
    return trainer.expt_root


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", default="configs/default.yaml", help="YAML config file")
    parser.add_argument("--seed", type=int, default=None, help="override the config's seed")
    parser.add_argument("--run-name", default=None, help="run folder name (default <name>-<timestamp>)")
    parser.add_argument("--resume", default=None, help="checkpoint to resume training from")
    args = parser.parse_args(argv)
    try:
        run(args.config, seed=args.seed, run_name=args.run_name, resume=args.resume)
    except (ConfigError, NonFiniteLossError, FileNotFoundError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
