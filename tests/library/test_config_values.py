# hw4p1: instructor-only
"""hw4lib/config.py by its values: every default a run reads, written out by hand; each range's
bound with a value on each side; exact types; the cross-key checks on each side of their
condition; the error sentences; base chains and overrides; and the grader's limits on a
handed-in model (hw4lib.handin_format's) at and one past each bound.

    .venv/bin/python -m pytest -q tests/library/test_config_values.py
"""
import copy

import pytest

from hw4lib import config as config_module
from hw4lib.config import (ConfigError, _merge, decoding_settings, load_config, read_config,
                           validate_config, validate_untrusted)
from hw4lib.model.state_dict_contract import count_elements

MINIMAL = {"tokenization": {"token_type": "char", "token_map": {"char": "x.json"}},
           "data": {"root": "d", "batch_size": 2},
           "model": {"num_layers": 1, "d_model": 4, "num_heads": 1, "d_ff": 8, "dropout": 0.0,
                     "max_len": 16},
           "training": {"epochs": 1}, "optimizer": {"name": "adamw", "lr": 0.001},
           "scheduler": {"name": "constant"}}

# What a run reads when its config states only MINIMAL: written by hand from the design.
DEFAULTS = {
    "name": "run",
    "data": {"root": "d", "train_partition": "train", "val_partition": "val",
             "test_partition": "test", "subset": 1.0, "batch_size": 2, "NUM_WORKERS": 0},
    "model": {"num_layers": 1, "d_model": 4, "num_heads": 1, "d_ff": 8, "dropout": 0.0,
              "max_len": 16, "weight_tying": False, "layer_drop_rate": 0.0},
    "training": {"epochs": 1, "gradient_accumulation_steps": 1, "grad_clip_norm": 1.0,
                 "label_smoothing": 0.0, "precision": "auto", "samples_every": 0,
                 "bucket_by_length": True, "progress_bar": True, "use_wandb": False,
                 "wandb_project": "hw4p1", "expts_dir": "expts", "device": "auto",
                 "num_threads": 0, "resume_from": None},
    "optimizer": {"name": "adamw", "lr": 0.001, "weight_decay": 0.0, "no_decay_patterns": [],
                  "param_groups": [],
                  "layer_decay": {"enabled": False, "decay_rate": None,
                                  "layer_pattern": r"dec_layers\.(\d+)\."},
                  "sgd": {"momentum": 0.0, "dampening": 0.0, "nesterov": False},
                  "adam": {"betas": [0.9, 0.999], "eps": 1e-08, "amsgrad": False},
                  "adamw": {"betas": [0.9, 0.999], "eps": 1e-08, "amsgrad": False}},
    "scheduler": {"name": "constant", "interval": "step",
                  "warmup": {"enabled": False, "epochs": 0.0, "start_factor": 0.1,
                             "end_factor": 1.0},
                  "cosine": {"T_max": None, "eta_min": 0.0},
                  "cosine_warm": {"T_0": None, "T_mult": 1, "eta_min": 0.0},
                  "reduce_lr": {"mode": "min", "factor": 0.5, "patience": 2, "threshold": 0.0001,
                                "threshold_mode": "rel", "cooldown": 0, "min_lr": 0.0,
                                "eps": 1e-08}},
    "generation": {"num_samples": 10, "prompt_length": 10, "seed": 0, "max_length": 100},
}
STRATEGY_DEFAULTS = {"method": "greedy", "num_samples": 10, "prompt_length": 10, "seed": 0,
                     "max_length": 100, "temperature": 1.0, "repeat_penalty": 1.0,
                     "beam_width": 3, "top_k": 0, "top_p": 1.0}


def with_value(dotted: str, value, base: dict = MINIMAL) -> dict:
    """A copy of ``base`` with the key ``dotted`` (``"training.epochs"``) set to ``value``."""
    config = copy.deepcopy(base)
    *parents, leaf = dotted.split(".")
    section = config
    for key in parents:
        section = section.setdefault(key, {})
    section[leaf] = value
    return config


def test_every_default_a_run_reads():
    dumped = validate_config(MINIMAL).dump()
    for section, values in DEFAULTS.items():
        assert dumped[section] == values, section
    assert decoding_settings(None).model_dump() == STRATEGY_DEFAULTS


# (key, a value inside its range, a value outside it): each bound of each kind of range
BOUNDS = [
    ("data.batch_size", 1, 0), ("training.epochs", 1, 0),                      # > 0 integers
    ("data.NUM_WORKERS", 0, -1), ("training.samples_every", 0, -1),            # >= 0 integers
    ("optimizer.lr", 0.5, 0.0), ("optimizer.weight_decay", 0.0, -0.5),        # > 0, >= 0 floats
    ("data.subset", 1.0, 0.0), ("data.subset", 0.5, 1.5),                     # (0, 1]
    ("name", "a", ""),                                                         # a name
    ("model.dropout", 0.0, -0.1), ("model.dropout", 0.99, 1.0),               # [0, 1)
    ("model.layer_drop_rate", 0.0, -0.1), ("model.layer_drop_rate", 0.99, 1.0),
    ("training.label_smoothing", 0.0, -0.1), ("training.label_smoothing", 0.99, 1.0),
    ("scheduler.reduce_lr.factor", 0.5, 0.0), ("scheduler.reduce_lr.factor", 0.99, 1.0),  # (0, 1)
    ("training.epochs", 3, "3"), ("generation.seed", 3, "3"),                  # exact types
    ("optimizer.adam.betas", [0.8, 0.9], "0.8"),                               # a YAML list
]


@pytest.mark.parametrize("key, inside, outside", BOUNDS)
def test_each_range_accepts_its_bound_and_refuses_past_it(key, inside, outside):
    validate_config(with_value(key, inside))
    with pytest.raises(ConfigError, match=f"config key '{key}'"):
        validate_config(with_value(key, outside))


def test_null_means_the_default_and_an_unknown_key_is_refused_even_null():
    assert validate_config(with_value("training.grad_clip_norm", None)).training.grad_clip_norm \
        == 1.0
    with pytest.raises(ConfigError, match="'training.bogus' is unknown"):
        validate_config(with_value("training.bogus", None))


def test_the_tokenizer_file_and_the_vocabulary_come_from_their_own_keys():
    with pytest.raises(ConfigError, match="token_map has no entry for token_type '1k'"):
        validate_config(with_value("tokenization.token_type", "1k"))
    with pytest.raises(ConfigError, match="model.num_classes is not a config key"):
        validate_config(with_value("model.num_classes", 40))


def test_layer_decay_needs_its_rate_only_when_enabled():
    validate_config(with_value("optimizer.layer_decay", {"enabled": False}))
    validate_config(with_value("optimizer.layer_decay", {"enabled": True, "decay_rate": 0.5}))
    with pytest.raises(ConfigError, match="decay_rate is required when"):
        validate_config(with_value("optimizer.layer_decay", {"enabled": True}))


def schedule(name: str, epochs: int = 4, **sections) -> dict:
    config = with_value("scheduler", {"name": name, **sections})
    return with_value("training.epochs", epochs, config)


def test_the_schedule_is_complete_for_its_kind():
    warm = {"enabled": True, "epochs": 1.0}
    validate_config(schedule("cosine", warmup=warm))
    validate_config(schedule("reduce_lr"))
    with pytest.raises(ConfigError, match="warmup.enabled must be false with scheduler.name"):
        validate_config(schedule("reduce_lr", warmup=warm))
    validate_config(schedule("constant"))
    validate_config(schedule("cosine_warm", cosine_warm={"T_0": 2.0}))
    with pytest.raises(ConfigError, match="cosine_warm.T_0 .* is required"):
        validate_config(schedule("cosine_warm"))


@pytest.mark.parametrize("warmup, accepted", [(0.0, False), (0.5, True), (3.5, True), (4.0, False)])
def test_the_warmup_lies_strictly_inside_training(warmup, accepted):
    config = schedule("cosine", warmup={"enabled": True, "epochs": warmup})
    if accepted:
        validate_config(config)
    else:
        with pytest.raises(ConfigError, match=r"warmup.epochs must be in \(0, training.epochs=4\)"):
            validate_config(config)


def test_a_cosine_without_t_max_spans_the_rest_of_training():
    assert validate_config(schedule("cosine")).scheduler.cosine.T_max == 4
    warm = {"enabled": True, "epochs": 1.0}
    assert validate_config(schedule("cosine", warmup=warm)).scheduler.cosine.T_max == 3
    assert validate_config(schedule("cosine", cosine={"T_max": 9.0})).scheduler.cosine.T_max == 9
    assert validate_config(schedule("constant")).scheduler.cosine.T_max is None


def test_each_strategy_is_named_after_its_method_or_states_one():
    generation = {"seed": 5, "greedy": {}, "fast": {"method": "beam", "max_length": 20}}
    config = validate_config(with_value("generation", generation))
    strategies = config.generation.strategies()
    assert strategies["greedy"].method == "greedy" and strategies["fast"].method == "beam"
    assert (strategies["fast"].seed, strategies["fast"].max_length) == (5, 20)
    assert config.dump()["generation"] == {"num_samples": 10, "prompt_length": 10, "seed": 5,
                                           "max_length": 100, "greedy": {},
                                           "fast": {"method": "beam", "max_length": 20}}
    with pytest.raises(ConfigError, match="generation.fast.method must be one of"):
        validate_config(with_value("generation", {"fast": {}}))
    assert decoding_settings({"method": "beam"}).method == "beam"


def test_an_error_names_the_key_path_and_what_it_must_be():
    cases = {
        "training.epochs": (0, "config key 'training.epochs': input should be greater than 0, "
                               "got 0"),
        "optimizer.adam.bogus": (1, "config key 'optimizer.adam.bogus' is unknown; known keys: "
                                    "['betas', 'eps', 'amsgrad']"),
        "bogus": (1, "config key 'bogus' is unknown; known keys: ['name', 'seed', "
                     "'tokenization', 'data', 'model', 'training', 'optimizer', 'scheduler', "
                     "'generation']"),
        "optimizer.param_groups": ([{"name": "a", "patterns": [], "bogus": 1}],
                                   "config key 'optimizer.param_groups.0.bogus' is unknown; "
                                   "known keys: []"),
    }
    for key, (value, sentence) in cases.items():
        with pytest.raises(ConfigError) as raised:
            validate_config(with_value(key, value))
        assert str(raised.value) == sentence, key
    with pytest.raises(ConfigError) as raised:
        validate_config({key: value for key, value in MINIMAL.items() if key != "training"})
    assert str(raised.value) == "config key 'training' is missing"
    with pytest.raises(ConfigError) as raised:
        validate_config(with_value("training.epochs", 0, with_value("data.batch_size", 0)))
    assert str(raised.value) == (
        "2 problems in the config:\n"
        "  - config key 'data.batch_size': input should be greater than 0, got 0\n"
        "  - config key 'training.epochs': input should be greater than 0, got 0")
    with pytest.raises(ConfigError, match="must be a mapping of sections, got list"):
        validate_config([])


def test_the_known_keys_are_those_of_the_section_holding_the_key():
    from hw4lib.config import Config, _known_keys

    assert _known_keys(Config, ("optimizer", "adam", "bogus")) == ["betas", "eps", "amsgrad"]
    assert _known_keys(Config, ("training", "epochs", "bogus")) == []     # under a plain int
    assert _known_keys(Config, ("generation", "fast", "bogus")) == []     # a strategy's own name
    with pytest.raises(ConfigError, match=r"'generation.fast.bogus' is unknown; known keys: \[\]"):
        validate_config(with_value("generation", {"fast": {"method": "beam", "bogus": 1}}))


def test_a_long_value_is_quoted_short():
    with pytest.raises(ConfigError) as raised:
        validate_config(with_value("training.epochs", "x" * 100))
    assert str(raised.value).endswith("got '" + "x" * 17 + "..." + "x" * 18 + "'"), raised.value  # 40
    assert config_module.short_repr([[[[1]]], 2, 3, 4, 5]) == "[[[...]], 2, 3, 4, ...]"
    assert config_module.short_repr({1: 1, 2: 2, 3: 3, 4: 4, 5: 5}) == "{1: 1, 2: 2, 3: 3, 4: 4, ...}"
    assert config_module.short_repr(3 ** 100)[:10] == str(3 ** 100)[:10]
    assert len(config_module.short_repr(3 ** 100)) == 40
    assert config_module.short_repr(b"y" * 100) == "b'" + "y" * 16 + "..." + "y" * 18 + "'"  # 40


def test_a_base_chain_merges_section_by_section(tmp_path):
    assert _merge({"a": {"x": 1, "y": 2}, "b": 1}, {"a": {"y": 3}, "c": 4}) == {
        "a": {"x": 1, "y": 3}, "b": 1, "c": 4}
    assert _merge({"a": 1}, {"a": {"x": 1}}) == {"a": {"x": 1}}
    assert _merge({"a": {"x": 1}}, {"a": 5}) == {"a": 5}
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub/base.yaml").write_text("training: {epochs: 3, num_threads: 2}\nname: b\n")
    (tmp_path / "run.yaml").write_text("base: sub/base.yaml\ntraining: {epochs: 5}\nlr: 3e-4\n")
    assert read_config(tmp_path / "run.yaml") == {"training": {"epochs": 5, "num_threads": 2},
                                                  "name": "b", "lr": 3e-4}
    (tmp_path / "bad.yaml").write_text("base: 3\n")
    with pytest.raises(ConfigError, match="'base' in .* must be a file name, got 3"):
        read_config(tmp_path / "bad.yaml")
    (tmp_path / "list.yaml").write_text("- 1\n")
    with pytest.raises(ConfigError, match="must hold a mapping of config sections"):
        read_config(tmp_path / "list.yaml")
    with pytest.raises(FileNotFoundError, match="does not exist"):
        read_config(tmp_path / "none.yaml")


def test_overrides_set_dotted_keys_creating_sections(tmp_path):
    import yaml

    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump({key: value for key, value in MINIMAL.items()
                                    if key != "scheduler"}))
    config = load_config(path, {"seed": 3, "training.epochs": 2, "scheduler.name": "constant",
                                "optimizer.adam.eps": 1e-6})
    assert (config.seed, config.training.epochs, config.scheduler.name,
            config.optimizer.adam.eps) == (3, 2, "constant", 1e-6)
    assert load_config(path, {"scheduler.name": "constant"}).training.epochs == 1


# ---------------------------------------------------------------- the grader's check

SMALL = {"num_layers": 1, "d_model": 64, "num_heads": 1, "d_ff": 1, "dropout": 0.0, "max_len": 1}
# key: (smallest, largest) the grader builds, written out
GRADER_LIMITS = {"num_layers": (1, 48), "d_model": (1, 4096), "num_heads": (1, 64),
                 "d_ff": (1, 32768), "max_len": (1, 65536)}


def untrusted(model: dict, **options) -> dict:
    return validate_untrusted({"tokenization": {"token_type": "char"}, "model": model},
                              vocab_sizes={"char": 40}, **options)


@pytest.mark.parametrize("key", GRADER_LIMITS)
def test_each_model_size_is_built_within_its_limits_only(key):
    low, high = GRADER_LIMITS[key]
    for value in (low, high):
        model = {**SMALL, key: value, **({"d_model": 64} if key == "num_heads" else {})}
        if key == "d_model":
            model["num_heads"] = 1
        assert untrusted(model, max_parameters=10 ** 12)["model"][key] == value
    for value in (low - 1, high + 1):
        with pytest.raises(ConfigError, match=rf"'model.{key}' is {value}, outside the grader's "
                                              rf"limits \[{low}, {high}\]"):
            untrusted({**SMALL, key: value}, max_parameters=10 ** 12)


def test_a_size_that_is_not_an_int_is_refused_by_its_type():
    with pytest.raises(ConfigError, match="model.d_ff'?: input should be a valid integer"):
        untrusted({**SMALL, "d_ff": "70000"})


def test_thirty_million_elements_are_built_and_one_more_is_not():
    """A model of exactly 30,000,000 parameters and buffer elements (the vocabulary and max_len
    chosen to reach it), then one element more."""
    model = {**SMALL, "d_model": 1, "max_len": 2}
    base = sum(count_elements(model, 1))
    per_token = sum(count_elements(model, 2)) - base
    vocab, rest = divmod(30_000_000 - base, per_token)
    model["max_len"] += rest  # each position adds d_model = 1 buffer element
    assert sum(count_elements(model, 1 + vocab)) == 30_000_000
    config = {"tokenization": {"token_type": "char"}, "model": model}
    validate_untrusted(config, vocab_sizes={"char": 1 + vocab})
    with pytest.raises(ConfigError, match="the grader builds at most 30,000,000"):
        validate_untrusted({**config, "model": {**model, "max_len": model["max_len"] + 1}},
                           vocab_sizes={"char": 1 + vocab})


def test_the_grader_reads_only_the_tokenizer_and_the_model():
    assert untrusted(SMALL) == {"tokenization": {"token_type": "char"},
                                "model": {**SMALL, "weight_tying": False, "layer_drop_rate": 0.0}}
    assert validate_untrusted({"tokenization": {"token_type": "char"}, "model": SMALL})[
        "model"]["d_model"] == 64
    for config, words in (([], "must be a mapping of sections, got list"),
                          ({"tokenization": {"token_type": 5}, "model": SMALL},
                           "'tokenization.token_type' must be one of .*, got 5"),
                          ({"tokenization": {"token_type": "2k"}, "model": SMALL}, "got '2k'"),
                          ({"tokenization": {"token_type": "char"}, "model": [1]},
                           "config key 'model' must be a mapping")):
        with pytest.raises(ConfigError, match=words):
            validate_untrusted(config)
