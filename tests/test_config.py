"""Tests of hw4lib.config: the typed sections, ``base:`` resolution and the grader's strict check.

    python -m tests.test_config      (or: python -m pytest -q tests/test_config.py)
"""
import inspect
from pathlib import Path

import pytest
import yaml

from hw4lib.config import (Config, ConfigError, Generation, GenerationSettings, Model, load_config,
                           read_config, validate_config, validate_untrusted)
from hw4lib.model import DecoderOnlyTransformer
from hw4lib.model.state_dict_contract import count_elements
from tests.testing_framework import rubric, run_module

RUBRIC = {"Config files": 0, "Typed config": 0, "Grader's check": 0}

REPO = Path(__file__).resolve().parents[1]
SMALL_MODEL = {"num_layers": 2, "d_model": 16, "num_heads": 2, "d_ff": 32, "dropout": 0.0,
               "max_len": 40, "weight_tying": False, "layer_drop_rate": 0.0}
LIMITS = {"num_layers": (1, 48), "d_model": (1, 4096), "num_heads": (1, 64), "d_ff": (1, 32768),
          "max_len": (1, 65536)}
VOCAB = {"char": 34, "1k": 1000, "5k": 5000, "10k": 10000}


def _flatten(tree: dict, prefix: str = "") -> dict[str, object]:
    """{'a.b.c': leaf} of a nested mapping."""
    flat = {}
    for key, value in tree.items():
        if isinstance(value, dict) and value:
            flat.update(_flatten(value, f"{prefix}{key}."))
        else:
            flat[f"{prefix}{key}"] = value
    return flat


@rubric("Config files")
def test_tiny_is_default_with_the_keys_it_states():
    stated = _flatten(yaml.safe_load((REPO / "configs/tiny.yaml").read_text()))
    assert stated.pop("base") == "default.yaml", "tiny.yaml must build on default.yaml"
    default = _flatten(load_config(REPO / "configs/default.yaml").dump())
    tiny = _flatten(load_config(REPO / "configs/tiny.yaml").dump())
    # T_max: the rest of training after the warm-up; seed: named by neither, drawn for each run
    derived = {"scheduler.cosine.T_max", "seed"}
    for key, value in tiny.items():
        if key in stated:
            expected = stated[key]
            if isinstance(expected, list) and expected and isinstance(expected[0], dict):
                expected = [{**group, "weight_decay": group.get("weight_decay")} for group in expected]
            assert value == expected, f"{key}: tiny.yaml states {expected!r}, loaded {value!r}"
        elif key not in derived:
            assert value == default[key], f"{key}: expected default.yaml's {default[key]!r}, got {value!r}"
    assert tiny["scheduler.cosine.T_max"] == pytest.approx(2 - 0.1), "T_max = epochs - warm-up"


@rubric("Config files")
def test_base_chain_is_relative_to_the_file_and_errors_name_the_file(tmp_path):
    (tmp_path / "sub").mkdir()
    (tmp_path / "root.yaml").write_text(yaml.safe_dump(read_config(REPO / "configs/default.yaml")))
    (tmp_path / "sub/middle.yaml").write_text("base: ../root.yaml\ntraining: {epochs: 7}\n")
    (tmp_path / "sub/leaf.yaml").write_text("base: middle.yaml\nname: leaf\ndata: {batch_size: 3}\n")
    config = load_config(tmp_path / "sub/leaf.yaml")
    assert (config.name, config.training.epochs, config.data.batch_size) == ("leaf", 7, 3)
    assert config.data.root == "hw4_data/hw4p1_data", "keys the leaf does not state come from the root"
    assert "base" not in config.dump()
    (tmp_path / "bad.yaml").write_text("base: [a, b]\n")
    with pytest.raises(ConfigError, match="base"):
        load_config(tmp_path / "bad.yaml")
    (tmp_path / "orphan.yaml").write_text("base: missing.yaml\n")
    with pytest.raises(FileNotFoundError, match="missing.yaml"):
        load_config(tmp_path / "orphan.yaml")


@rubric("Config files")
def test_numbers_in_exponent_notation_are_numbers(tmp_path):
    # PyYAML follows YAML 1.1, which reads these as text: the loader must not.
    text = "lr: 3e-4\nweight_decay: 1E-2\nbig: 1e5\nsigned: -2.5e+3\nword: e5\nversion: 3e\n"
    assert yaml.safe_load(text)["lr"] == "3e-4", "the premise: plain safe_load reads text"
    (tmp_path / "numbers.yaml").write_text(text)
    assert read_config(tmp_path / "numbers.yaml") == {
        "lr": 3e-4, "weight_decay": 1e-2, "big": 1e5, "signed": -2.5e3, "word": "e5", "version": "3e"}
    (tmp_path / "run.yaml").write_text(f"base: {REPO / 'configs/tiny.yaml'}\n"
                                       "optimizer: {lr: 3e-4}\nscheduler: {cosine: {eta_min: 1e-6}}\n")
    config = load_config(tmp_path / "run.yaml")
    assert (config.optimizer.lr, config.scheduler.cosine.eta_min) == (3e-4, 1e-6)


@rubric("Config files")
def test_every_invalid_key_is_reported_at_once():
    overrides = {"training.epochs": 0, "optimizer.lr": "fast", "model.colour": 1, "data.subset": 2,
                 "generation.beam": {"beam_width": 0}}
    with pytest.raises(ConfigError) as caught:
        load_config(REPO / "configs/tiny.yaml", overrides)
    message = str(caught.value)
    assert message.startswith("5 problems in the config:"), message
    for key in ("training.epochs", "optimizer.lr", "model.colour", "data.subset",
                "generation.beam.beam_width"):
        assert f"config key '{key}'" in message, f"{key} not reported in:\n{message}"
    with pytest.raises(ConfigError, match=r"^config key 'training\.epochs': input should be greater "
                                          r"than 0, got 0$"):
        load_config(REPO / "configs/tiny.yaml", {"training.epochs": 0})


@rubric("Config files")
def test_model_section_is_exactly_the_model_arguments():
    parameters = inspect.signature(DecoderOnlyTransformer.__init__).parameters
    arguments = [name for name in parameters if name not in ("self", "num_classes")]
    assert list(Model.model_fields) == arguments, (
        f"hw4lib.config.Model must list DecoderOnlyTransformer's arguments {arguments}, "
        f"got {list(Model.model_fields)}")
    for name in arguments:
        has_default = parameters[name].default is not inspect.Parameter.empty
        assert Model.model_fields[name].is_required() != has_default, name
        if has_default:
            assert Model.model_fields[name].default == parameters[name].default, name


@rubric("Typed config")
def test_validation_returns_the_typed_config_and_dumps_what_it_read(tmp_path):
    config = load_config(REPO / "configs/tiny.yaml")
    assert isinstance(config, Config) and validate_config(config) is config, (
        "load_config returns a Config, and validating one again returns it unchanged")
    again = validate_config(yaml.safe_load(yaml.safe_dump(config.dump())))
    assert again.dump() == config.dump(), "the run folder's config.yaml validates to the same config"
    raw = read_config(REPO / "configs/tiny.yaml")
    validate_config(raw)
    assert raw == read_config(REPO / "configs/tiny.yaml"), "validation must not change its input"


@rubric("Typed config")
def test_each_strategy_takes_its_own_keys_then_the_shared_ones_then_the_defaults():
    generation = Generation.model_validate({"num_samples": 3, "seed": 7, "greedy": {},
                                            "wide": {"method": "beam", "beam_width": 5, "seed": 1}})
    strategies = generation.strategies()
    defaults = GenerationSettings()
    assert list(strategies) == ["greedy", "wide"], f"one entry per strategy, got {list(strategies)}"
    greedy, wide = strategies["greedy"], strategies["wide"]
    assert (greedy.method, greedy.num_samples, greedy.seed, greedy.prompt_length) == (
        "greedy", 3, 7, defaults.prompt_length), f"greedy: named after its key, shared keys, got {greedy}"
    assert (wide.method, wide.beam_width, wide.seed, wide.num_samples, wide.temperature) == (
        "beam", 5, 1, 3, defaults.temperature), f"wide: its own method and seed win, got {wide}"
    shared = generation.shared()
    assert (shared.method, shared.num_samples, shared.seed, shared.top_k) == (
        "greedy", 3, 7, defaults.top_k), shared
    assert generation.dump()["wide"] == {"method": "beam", "beam_width": 5, "seed": 1}, (
        "the dump keeps only what a strategy states, so config.yaml reads like the file it came from")


@rubric("Grader's check")
def test_untrusted_config_accepts_a_handin_and_refuses_wrong_types():
    good = {"tokenization": {"token_type": "char", "token_map": {}}, "model": SMALL_MODEL,
            "training": {"anything": "the grader ignores it"}}
    checked = validate_untrusted(good, VOCAB, LIMITS, max_parameters=10**6)
    assert checked == {"tokenization": {"token_type": "char"}, "model": SMALL_MODEL}, checked
    cases = [
        ({**good, "tokenization": {"token_type": "50k"}}, "tokenization.token_type"),
        ({**good, "model": {**SMALL_MODEL, "d_model": "16"}}, "model.d_model"),
        ({**good, "model": {**SMALL_MODEL, "d_model": 16.0}}, "model.d_model"),
        ({**good, "model": {**SMALL_MODEL, "num_layers": True}}, "model.num_layers"),
        ({**good, "model": {**SMALL_MODEL, "activation": "relu"}}, "model.activation"),
        ({**good, "model": {k: v for k, v in SMALL_MODEL.items() if k != "d_ff"}}, "model.d_ff"),
        ({**good, "model": {**SMALL_MODEL, "num_heads": 3}}, "divisible"),
        ({**good, "model": None}, "model"),
        (["not", "a", "mapping"], "mapping"),
    ]
    for config, message in cases:
        with pytest.raises(ConfigError, match=message):
            validate_untrusted(config, VOCAB, LIMITS, max_parameters=10**6)


@rubric("Grader's check")
def test_untrusted_limits_are_checked_before_anything_is_built(monkeypatch):
    built = []
    original = DecoderOnlyTransformer.__init__

    def spy(self, *args, **kwargs):
        built.append(kwargs)
        original(self, *args, **kwargs)

    monkeypatch.setattr(DecoderOnlyTransformer, "__init__", spy)
    good = {"tokenization": {"token_type": "10k"}, "model": SMALL_MODEL}
    with pytest.raises(ConfigError, match=r"model\.num_layers.*outside"):
        validate_untrusted({**good, "model": {**SMALL_MODEL, "num_layers": 10**9}}, VOCAB, LIMITS,
                           max_parameters=10**6)
    assert not built, "a model over the limits must be refused before it is constructed"
    parameters, buffers = count_elements(SMALL_MODEL, VOCAB["10k"])  # the 10k vocabulary counts
    with pytest.raises(ConfigError, match="at most"):
        validate_untrusted(good, VOCAB, LIMITS, max_parameters=parameters + buffers - 1)
    validate_untrusted(good, VOCAB, LIMITS, max_parameters=parameters + buffers)


if __name__ == "__main__":
    run_module(__name__)
