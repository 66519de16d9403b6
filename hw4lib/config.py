"""The run config: every setting, its type, its range and its default, defined once.

``configs/*.yaml`` hold one section per class below (``tokenization``, ``data``, ``model``,
``training``, ``optimizer``, ``scheduler``, ``generation``). :func:`load_config` reads a file,
resolves its ``base:`` (a config it only states differences from), applies overrides and returns
:func:`validate_config`'s :class:`Config`, every default filled in. It stays typed: the trainer,
the notebook, the factories and the decoding runs read its attributes (``config.training.epochs``),
so each setting is checked here and nowhere else; :meth:`Config.dump` is the plain dict the run
folder's ``config.yaml`` holds. An error names the key path and what it must be:
``config key 'training.epochs' must be > 0, got 0``.

Types are exact (no ``"3"`` for 3, no ``true`` for 1). :func:`validate_untrusted` is the grader's
stricter check of a handed-in config: only what it needs to rebuild the model, within size limits
checked before anything is allocated.
"""
from __future__ import annotations

import copy
import re
import reprlib
import secrets
from pathlib import Path
from typing import Annotated, Any, Literal, Mapping

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from hw4lib.data.tokenizer import DEFAULT_TOKEN_MAP, TOKENIZER_FILES, H4Tokenizer
from hw4lib.handin_format import MAX_PARAMETERS, MODEL_LIMITS
from hw4lib.model._checks import check_config
from hw4lib.model.state_dict_contract import count_elements

TOKEN_TYPES = tuple(TOKENIZER_FILES)                     # char, 1k, 5k, 10k
OPTIMIZERS = ("sgd", "adam", "adamw")
SCHEDULERS = ("cosine", "cosine_warm", "reduce_lr", "constant")
DECODING_METHODS = ("greedy", "beam", "sample")
PRECISIONS = ("auto", "fp32", "bf16", "fp16")           # hw4lib/trainers/precision.py resolves them
DEFAULT_LAYER_PATTERN = r"dec_layers\.(\d+)\."

PositiveInt = Annotated[int, Field(gt=0)]
NonNegativeInt = Annotated[int, Field(ge=0)]
PositiveFloat = Annotated[float, Field(gt=0)]
NonNegativeFloat = Annotated[float, Field(ge=0)]
Fraction = Annotated[float, Field(gt=0, le=1)]          # (0, 1]
Name = Annotated[str, Field(min_length=1)]
# Values quoted in errors: a YAML alias bomb in a handed-in config expands to billions of items
# when printed in full; this prints a few of each level.
_SHORT = reprlib.Repr()
_SHORT.maxlevel, _SHORT.maxlist, _SHORT.maxdict, _SHORT.maxstring, _SHORT.maxother = 2, 4, 4, 40, 40
short_repr = _SHORT.repr


# A run whose config names no seed draws its own: two honest default trainings never coincide,
# and the seed recorded in config.yaml and the run card repeats the run (--seed N).
RUN_SEEDS = 2**31  # drawn from [0, RUN_SEEDS): a non-negative int32, which every RNG seeded takes


class ConfigError(ValueError):
    """A config value is missing, unknown or out of range; the message names the key."""


def draw_seed() -> int:
    """A fresh seed for a run whose config names none: ``secrets.randbelow(RUN_SEEDS)``. Called
    once per :class:`Config` built without a seed (its default factory); the run keeps that object,
    so the seed it trains under is the one it records and prints (:func:`seed_note`)."""
    return secrets.randbelow(RUN_SEEDS)


class Section(BaseModel):
    """A config section: exact types, unknown keys refused, a null value means the default."""

    model_config = ConfigDict(extra="forbid", strict=True)

    @model_validator(mode="before")
    @classmethod  # pragma: no mutate (equivalent: model_validator makes a cls-first function one)
    def _null_means_default(cls, values: Any) -> Any:
        if isinstance(values, dict):
            return {key: value for key, value in values.items()
                    if value is not None or key not in cls.model_fields}
        return values


# ---------------------------------------------------------------------------------- sections

class Tokenization(Section):
    token_type: Literal[TOKEN_TYPES]
    token_map: dict[str, str]                            # token_type -> tokenizer JSON

    @model_validator(mode="after")
    def _has_the_file(self) -> "Tokenization":
        if self.token_type not in self.token_map:
            raise ValueError(f"token_map has no entry for token_type {self.token_type!r}: "
                             f"tokenization.token_map.{self.token_type} must name its file")
        return self


class Data(Section):
    root: Name
    train_partition: Name = "train"
    val_partition: Name = "val"
    test_partition: Name = "test"
    subset: Fraction = 1.0                               # fraction of each partition's sorted files
    batch_size: PositiveInt
    NUM_WORKERS: NonNegativeInt = 0


class Model(Section):
    """Exactly DecoderOnlyTransformer's keyword arguments but ``num_classes`` (the vocabulary)."""
    num_layers: PositiveInt
    d_model: PositiveInt
    num_heads: PositiveInt
    d_ff: PositiveInt
    dropout: Annotated[float, Field(ge=0, lt=1)]
    max_len: PositiveInt
    weight_tying: bool = False
    layer_drop_rate: Annotated[float, Field(ge=0, lt=1)] = 0.0

    @model_validator(mode="before")
    @classmethod  # pragma: no mutate (equivalent: model_validator makes a cls-first function one)
    def _vocabulary_comes_from_the_tokenizer(cls, values: Any) -> Any:
        if isinstance(values, dict) and "num_classes" in values:
            raise ValueError("model.num_classes is not a config key: it comes from the "
                             "tokenizer's vocab_size")
        return values

    @model_validator(mode="after")
    def _the_model_accepts_it(self) -> "Model":
        """Run the model's own argument checks (d_model divisible by num_heads, ...): the checks
        DecoderOnlyTransformer runs before it builds anything. Nothing is built, not even on the
        meta device: its operations import torch's compiler stack, as slow to import as torch
        itself, in every process that validates a config (the grader's model child included)."""
        check_config(**self.model_dump(),
                     num_classes=8)  # pragma: no mutate (equivalent: any positive vocabulary passes these checks)
        return self


class Training(Section):
    epochs: PositiveInt
    gradient_accumulation_steps: PositiveInt = 1          # batches per optimizer update
    grad_clip_norm: NonNegativeFloat = 1.0               # 0 disables clipping
    label_smoothing: Annotated[float, Field(ge=0, lt=1)] = 0.0
    precision: Literal[PRECISIONS] = "auto"
    samples_every: NonNegativeInt = 0                    # greedy validation samples every N epochs
    bucket_by_length: bool = True                        # batches of similar lengths
    progress_bar: bool = True
    use_wandb: bool = False
    wandb_project: Name = "hw4p1"
    expts_dir: Name = "expts"
    device: Name = "auto"                                # auto | cpu | cuda | cuda:1 ...
    num_threads: NonNegativeInt = 0                      # torch threads; 0 keeps torch's default
    resume_from: Name | None = None                      # a checkpoint to continue from


class ParamGroup(Section):
    name: Name
    patterns: list[str]                                  # re.search in parameter names
    lr: PositiveFloat | None = None                      # None: the optimizer's lr
    weight_decay: NonNegativeFloat | None = None         # None: the optimizer's weight_decay


class LayerDecay(Section):
    enabled: bool = False
    decay_rate: Fraction | None = None                   # required when enabled
    layer_pattern: Name = DEFAULT_LAYER_PATTERN          # one group capturing the layer index

    @model_validator(mode="after")
    def _rate_when_enabled(self) -> "LayerDecay":
        if self.enabled and self.decay_rate is None:
            raise ValueError("layer_decay.decay_rate is required when layer_decay.enabled is true")
        return self


class SGDOptions(Section):
    momentum: NonNegativeFloat = 0.0
    dampening: NonNegativeFloat = 0.0
    nesterov: bool = False


class AdamOptions(Section):
    betas: Annotated[tuple[float, float], Field(strict=False)] = (0.9, 0.999)  # a YAML list
    eps: PositiveFloat = 1e-8
    amsgrad: bool = False


class Optimizer(Section):
    name: Literal[OPTIMIZERS]
    lr: PositiveFloat
    weight_decay: NonNegativeFloat = 0.0
    no_decay_patterns: list[str] = Field(default_factory=list)  # these get weight_decay 0
    param_groups: list[ParamGroup] = Field(default_factory=list)
    layer_decay: LayerDecay = Field(default_factory=LayerDecay)
    sgd: SGDOptions = Field(default_factory=SGDOptions)
    adam: AdamOptions = Field(default_factory=AdamOptions)
    adamw: AdamOptions = Field(default_factory=AdamOptions)


class Warmup(Section):
    enabled: bool = False
    epochs: NonNegativeFloat = 0.0
    start_factor: PositiveFloat = 0.1
    end_factor: PositiveFloat = 1.0


class Cosine(Section):
    T_max: PositiveFloat | None = None                   # epochs; None: the rest of training
    eta_min: NonNegativeFloat = 0.0


class CosineWarm(Section):
    T_0: PositiveFloat | None = None                     # epochs of the first cycle
    T_mult: PositiveInt = 1
    eta_min: NonNegativeFloat = 0.0


class ReduceLR(Section):
    mode: Literal["min", "max"] = "min"
    factor: Annotated[float, Field(gt=0, lt=1)] = 0.5
    patience: NonNegativeInt = 2
    threshold: NonNegativeFloat = 1e-4
    threshold_mode: Literal["rel", "abs"] = "rel"
    cooldown: NonNegativeInt = 0
    min_lr: NonNegativeFloat = 0.0
    eps: NonNegativeFloat = 1e-8


class Scheduler(Section):
    name: Literal[SCHEDULERS]
    interval: Literal["step", "epoch"] = "step"          # what one scheduler step is
    warmup: Warmup = Field(default_factory=Warmup)
    cosine: Cosine = Field(default_factory=Cosine)
    cosine_warm: CosineWarm = Field(default_factory=CosineWarm)
    reduce_lr: ReduceLR = Field(default_factory=ReduceLR)

    @model_validator(mode="after")
    def _schedule_is_complete(self) -> "Scheduler":
        if self.warmup.enabled and self.name == "reduce_lr":
            raise ValueError("scheduler.warmup.enabled must be false with scheduler.name "
                             "'reduce_lr' (a plateau schedule has no clock to warm up on)")
        if self.name == "cosine_warm" and self.cosine_warm.T_0 is None:
            raise ValueError("scheduler.cosine_warm.T_0 (epochs of the first cycle) is required")
        return self


class GenerationSettings(Section):
    """The settings of one decoding strategy; a strategy states only what it changes."""
    method: Literal[DECODING_METHODS] | None = None      # None: the strategy's name
    num_samples: PositiveInt = 10                        # prompts drawn from the dataset
    prompt_length: PositiveInt = 10                      # tokens of each prompt after [SOS]
    seed: NonNegativeInt = 0                             # picks the prompts and the samples
    max_length: PositiveInt = 100                        # total tokens, prompt included
    temperature: PositiveFloat = 1.0
    repeat_penalty: PositiveFloat = 1.0
    beam_width: PositiveInt = 3
    top_k: NonNegativeInt = 0                            # 0: no top-k filter
    top_p: Fraction = 1.0                                # 1: no nucleus filter


SHARED_GENERATION_KEYS = ("num_samples", "prompt_length", "seed", "max_length")


def decoding_settings(values: GenerationSettings | Mapping[str, Any] | None = None) -> GenerationSettings:
    """One decoding run's complete settings: ``values`` over the defaults, greedy when ``values``
    names no method. ConfigError naming ``generation.<key>`` for a bad value."""
    settings = parse_section(GenerationSettings, values if values is not None else {}, "generation")
    return settings if settings.method else settings.model_copy(update={"method": "greedy"})


def _strategy_default(key: str) -> Any:
    """The default of a key every strategy shares (defined once, in GenerationSettings)."""
    return GenerationSettings.model_fields[key].default


class Generation(Section):
    """Shared settings, then one mapping per strategy (``greedy: {}``, ``beam: {beam_width: 3}``)."""
    model_config = ConfigDict(extra="allow", strict=True)
    __pydantic_extra__: dict[str, GenerationSettings]

    num_samples: PositiveInt = _strategy_default("num_samples")
    prompt_length: PositiveInt = _strategy_default("prompt_length")
    seed: NonNegativeInt = _strategy_default("seed")
    max_length: PositiveInt = _strategy_default("max_length")

    @model_validator(mode="after")
    def _methods_are_known(self) -> "Generation":
        for name, strategy in self.model_extra.items():
            if (strategy.method or name) not in DECODING_METHODS:
                raise ValueError(f"generation.{name}.method must be one of {list(DECODING_METHODS)} "
                                 f"(or name the strategy after one of them), got {name!r}")
        return self

    def _shared_values(self) -> dict[str, Any]:
        return {key: getattr(self, key) for key in SHARED_GENERATION_KEYS}

    def shared(self) -> GenerationSettings:
        """A greedy run with the shared settings, every other key at its default."""
        return GenerationSettings(method="greedy", **self._shared_values())

    def strategies(self) -> dict[str, GenerationSettings]:
        """Each named strategy's complete settings: its own keys, then the shared ones, then the
        defaults; its ``method`` is its name unless it states one."""
        shared = self._shared_values()
        return {name: strategy.model_copy(update={
                    "method": strategy.method or name,
                    **{key: value for key, value in shared.items()
                       if key not in strategy.model_fields_set}})
                for name, strategy in self.model_extra.items()}

    def dump(self) -> dict[str, Any]:
        """Shared keys with defaults filled in; each strategy with only the keys it states."""
        return {**self._shared_values(),
                **{name: strategy.model_dump(mode="json", exclude_unset=True)
                   for name, strategy in self.model_extra.items()}}


class Config(Section):
    name: Name = "run"                                   # run folder: expts/<name>-<timestamp>
    seed: NonNegativeInt = Field(default_factory=draw_seed)  # unset: drawn for this run
    tokenization: Tokenization
    data: Data
    model: Model
    training: Training
    optimizer: Optimizer
    scheduler: Scheduler
    generation: Generation = Field(default_factory=Generation)

    @model_validator(mode="after")
    def _schedule_fits_training(self) -> "Config":
        """Warm-up shorter than training; a cosine without T_max spans the rest of training."""
        epochs, scheduler = self.training.epochs, self.scheduler
        warmup = scheduler.warmup.epochs if scheduler.warmup.enabled else 0.0
        if scheduler.warmup.enabled and not 0 < warmup < epochs:
            raise ValueError(f"scheduler.warmup.epochs must be in (0, training.epochs={epochs}), "
                             f"got {warmup}")
        if scheduler.name == "cosine" and scheduler.cosine.T_max is None:
            scheduler.cosine.T_max = epochs - warmup
        return self

    def dump(self) -> dict[str, Any]:
        return {**self.model_dump(mode="json", exclude={"generation": True}),
                "generation": self.generation.dump()}


# ---------------------------------------------------------------------------------- reading

def _known_keys(section: type[BaseModel], loc: tuple) -> list[str]:
    """The keys of the section that holds the key at ``loc``."""
    for part in loc[:-1]:
        field = section.model_fields.get(part)
        if field is None or not isinstance(field.annotation, type) \
                or not issubclass(field.annotation, BaseModel):
            return []
        section = field.annotation
    return list(section.model_fields)


def _problem(problem: dict, section: type[BaseModel], prefix: str) -> str:
    """One problem of a ValidationError as a sentence naming the key path."""
    path = ".".join(str(part) for part in (prefix, *problem["loc"]) if part != "")
    where = f"config key '{path}'" if path else "the config"
    if problem["type"] == "missing":
        return f"{where} is missing"
    if problem["type"] == "extra_forbidden":
        return f"{where} is unknown; known keys: {_known_keys(section, problem['loc'])}"
    message = problem["msg"].removeprefix("Value error, ")
    if problem["type"] == "value_error":
        return f"{where}: {message}"
    got = short_repr(problem["input"])
    return f"{where}: {message[0].lower()}{message[1:]}, got {got}"


def _key_error(error: ValidationError, section: type[BaseModel], prefix: str) -> ConfigError:
    """Every problem of ``error`` in one ConfigError, one line each, so that one run reports them
    all. (A section's cross-key checks run once its keys are valid, so they come in a second run.)"""
    problems = [_problem(problem, section, prefix) for problem in error.errors()]
    if len(problems) == 1:
        return ConfigError(problems[0])
    return ConfigError(f"{len(problems)} problems in the config:\n"
                       + "\n".join(f"  - {problem}" for problem in problems))


def parse_section(section: type[Section], values: Any, where: str) -> Section:
    """``values`` (a mapping, or the section itself) validated as ``section``; ConfigError naming
    the key path ``where.<key>`` otherwise. The factories call this with their config section."""
    if isinstance(values, section):
        return values
    try:
        return section.model_validate(values)
    except ValidationError as error:
        raise _key_error(error, section, where) from None


def validate_config(config: Config | Mapping[str, Any]) -> Config:
    """Check every key of a config and fill in defaults; raise ConfigError naming the bad key.

    Returns a new :class:`Config` (the input is not modified), or ``config`` itself when it is one.
    """
    if isinstance(config, Config):
        return config
    if not isinstance(config, Mapping):
        raise ConfigError(f"a config must be a mapping of sections, got {type(config).__name__}")
    return parse_section(Config, copy.deepcopy(dict(config)), "")


def _merge(base: dict[str, Any], changes: dict[str, Any]) -> dict[str, Any]:
    """``base`` with ``changes`` applied: mappings merge key by key, anything else replaces."""
    merged = dict(base)
    for key, value in changes.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = _merge(merged[key], value)
        else:
            merged[key] = value
    return merged


class _ConfigLoader(yaml.SafeLoader):
    """PyYAML's safe loader, except that a number in exponent notation without a dot (``3e-4``,
    ``1e5``) is a float, as in YAML 1.2; YAML 1.1, which PyYAML follows, reads it as text."""


_ConfigLoader.add_implicit_resolver(
    "tag:yaml.org,2002:float", re.compile(r"^[-+]?[0-9][0-9_]*(?:\.[0-9_]*)?[eE][-+]?[0-9]+$"),
    list("-+0123456789"))


def read_config(path: str | Path) -> dict[str, Any]:
    """The YAML mapping of ``path`` with its ``base:`` chain resolved (paths relative to the file).

    Numbers such as ``lr: 3e-4`` are floats (see :class:`_ConfigLoader`)."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"config file {path} does not exist")
    config = yaml.load(path.read_text(), Loader=_ConfigLoader)
    if not isinstance(config, dict):
        raise ConfigError(f"{path} must hold a mapping of config sections")
    base = config.pop("base", None)
    if base is None:
        return config
    if not isinstance(base, str):
        raise ConfigError(f"config key 'base' in {path} must be a file name, got {base!r}")
    return _merge(read_config(path.parent / base), config)


def load_config(path: str | Path, overrides: dict[str, Any] | None = None) -> Config:
    """Read a YAML config (resolving ``base:``), apply ``overrides`` (``{"seed": 1,
    "training.epochs": 2}``) and validate it."""
    config = read_config(path)
    for dotted, value in (overrides or {}).items():
        *parents, leaf = dotted.split(".")
        section = config
        for key in parents:
            section = section.setdefault(key, {})
        section[leaf] = value
    return validate_config(config)


def seed_note(config: Config) -> str:
    """The run's seed as the run prints it at the start: ``"seed 123 (drawn for this run; --seed
    123 repeats it)"`` when the config named none, else ``"seed 123 (--seed 123 repeats this
    run)"``."""
    if "seed" in config.model_fields_set:
        return f"seed {config.seed} (--seed {config.seed} repeats this run)"
    return f"seed {config.seed} (drawn for this run; --seed {config.seed} repeats it)"


# ---------------------------------------------------------------------------------- the grader

def vocab_size_of(token_type: str) -> int:
    """The vocabulary size of the shipped tokenizer ``token_type``: the model's num_classes."""
    return H4Tokenizer(DEFAULT_TOKEN_MAP, token_type, validate=False).vocab_size


def validate_untrusted(config: Any, vocab_sizes: Mapping[str, int] | None = None,
                       limits: Mapping[str, tuple[int, int]] = MODEL_LIMITS,
                       max_parameters: int = MAX_PARAMETERS) -> dict[str, Any]:
    """The grader's check of a student's config: ``{"tokenization": {"token_type"}, "model":
    {...}}``, or ConfigError naming the key. ``make handin`` runs it too, with the same limits.

    Exact types (``"16"``, ``16.0`` and ``true`` are not 16), no unknown model keys, each integer
    within ``limits`` ({key: (smallest, largest)}) and at most ``max_parameters`` parameters plus
    buffer elements with the vocabulary of ``vocab_sizes[token_type]`` (default: the shipped
    tokenizer's); all checked before anything is allocated (the count comes from the state-dict
    manifest, ``hw4lib.model.state_dict_contract``).
    The same model checks as :func:`validate_config` then apply (d_model divisible by num_heads...).
    """
    if not isinstance(config, Mapping):
        raise ConfigError(f"a config must be a mapping of sections, got {type(config).__name__}")
    tokenization = config.get("tokenization")
    token_type = tokenization.get("token_type") if isinstance(tokenization, Mapping) else None
    if not isinstance(token_type, str) or token_type not in TOKEN_TYPES:
        raise ConfigError(f"config key 'tokenization.token_type' must be one of "
                          f"{list(TOKEN_TYPES)}, got {short_repr(token_type)}")
    raw_model = config.get("model")
    if not isinstance(raw_model, Mapping):
        raise ConfigError("config key 'model' must be a mapping of DecoderOnlyTransformer's "
                          "arguments")
    for key, (low, high) in limits.items():  # before the model is built, even on meta
        value = raw_model.get(key)
        if type(value) is int and not low <= value <= high:
            raise ConfigError(f"config key 'model.{key}' is {value}, outside the grader's "
                              f"limits [{low}, {high}]")
    model = parse_section(Model, dict(raw_model), "model").model_dump()
    vocab_size = vocab_sizes[token_type] if vocab_sizes is not None else vocab_size_of(token_type)
    parameters, buffers = count_elements(model, vocab_size)
    if parameters + buffers > max_parameters:
        raise ConfigError(f"config section 'model' describes {parameters:,} parameters and "
                          f"{buffers:,} buffer elements; the grader builds at most "
                          f"{max_parameters:,}")
    return {"tokenization": {"token_type": token_type}, "model": model}
