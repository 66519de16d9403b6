# hw4p1: instructor-only
"""A seed of each checkout's own: a config that names no seed trains under the seed drawn once
into the checkout's ``.hw4_seed`` (``hw4lib.config.checkout_seed``), so two students' default
trainings never coincide, while ``--seed N`` (or ``seed: N``) repeats a run byte for byte.

Run: ``.venv/bin/python -m pytest -q tests/library/test_checkout_seed.py``. Each checkout is a
temporary seed file (``CHECKOUT_SEED_FILE`` pointed at it); the trainings are ``hw4lib.train``'s
whole run on a one-layer model and a few transcripts.
"""
import io
import json
import tarfile
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest
import torch
import yaml

from hw4lib import config as config_module
from hw4lib.config import CHECKOUT_SEEDS, ConfigError, checkout_seed, load_config
from tests.library.small_trainer import TRAIN_TEXTS, write_split
from tests.tiny_config import TINY, tiny_yaml

REPO = TINY.parents[1]


def test_a_checkout_draws_its_seed_once_and_keeps_it(tmp_path, monkeypatch):
    first, other = tmp_path / "a" / ".hw4_seed", tmp_path / "b" / ".hw4_seed"
    first.parent.mkdir(), other.parent.mkdir()
    monkeypatch.setattr(config_module, "CHECKOUT_SEED_FILE", first)
    seed = load_config(TINY).seed
    assert first.read_text() == f"{seed}\n", "the seed drawn is the one written"
    assert load_config(TINY).seed == checkout_seed(first) == seed, "drawn once, then read"
    assert list(first.parent.iterdir()) == [first], "no draft is left beside it"
    assert 0 <= seed < CHECKOUT_SEEDS
    assert checkout_seed(other) != seed, "another checkout draws its own"
    monkeypatch.setattr(config_module, "CHECKOUT_SEED_FILE", tmp_path / "c" / ".hw4_seed")
    assert load_config(TINY, {"seed": 7}).seed == 7, "a seed given wins"
    assert not (tmp_path / "c").exists(), "a config with a seed never draws one"
    (tmp_path / "c").mkdir()
    (tmp_path / "c" / ".hw4_seed").write_text("5\n")  # another process drew first
    assert load_config(TINY, {"seed": None}).seed == 5, "null means the checkout's"


def test_runs_that_start_at_once_all_train_under_the_seed_written_first(tmp_path):
    """Eight first uses at once, twenty times: each reads the one seed the file ends up with."""
    for trial in range(20):
        path = tmp_path / str(trial) / ".hw4_seed"
        path.parent.mkdir()
        start = threading.Barrier(8)

        def first_use(_):
            start.wait()
            return checkout_seed(path)

        with ThreadPoolExecutor(8) as pool:
            seeds = set(pool.map(first_use, range(8)))
        assert seeds == {int(path.read_text())}, (trial, seeds)
        assert list(path.parent.iterdir()) == [path], "no draft is left beside it"


def test_a_file_system_without_hard_links_still_keeps_one_seed(tmp_path, monkeypatch):
    """Where os.link fails (a Google Drive mount), the seed drawn is renamed into place."""
    def no_links(source, target):
        raise PermissionError(1, "Operation not permitted", str(target))

    monkeypatch.setattr(config_module.os, "link", no_links)
    path = tmp_path / ".hw4_seed"
    seed = checkout_seed(path)
    assert path.read_text() == f"{seed}\n" and checkout_seed(path) == seed
    assert list(tmp_path.iterdir()) == [path], "no draft is left beside it"


@pytest.mark.parametrize("text", ["", "abc", "-3", "12 34", "1.5", "\u0661\u0662",
                                  str(CHECKOUT_SEEDS), "9" * 400])
def test_a_seed_file_that_is_not_a_seed_is_refused_naming_the_fix(tmp_path, text):
    path = tmp_path / ".hw4_seed"
    path.write_text(text)
    with pytest.raises(ConfigError) as refused:
        checkout_seed(path)
    message = str(refused.value)
    assert str(path) in message and "delete it" in message and "--seed N" in message, message
    assert len(message) < 400, "the file is quoted short"


@pytest.mark.parametrize("text, seed", [("0", 0), (f"{CHECKOUT_SEEDS - 1}\n", CHECKOUT_SEEDS - 1),
                                        (" 42 \n", 42)])
def test_every_seed_below_the_bound_is_read(tmp_path, text, seed):
    path = tmp_path / ".hw4_seed"
    path.write_text(text)
    assert checkout_seed(path) == seed


def small_run_config(tmp_path) -> dict:
    """tiny.yaml without a seed, on TRAIN_TEXTS with a one-layer char model: a whole run in
    seconds, its weights fp32 on the CPU."""
    root = tmp_path / "data"
    for split in ("train", "val", "test"):
        write_split(root / split, TRAIN_TEXTS)
    config = {key: value for key, value in tiny_yaml().items() if key != "seed"}
    config["tokenization"]["token_type"] = "char"
    config["data"].update(root=str(root), subset=1.0, batch_size=4)
    config["model"].update(num_layers=1, d_model=16, num_heads=2, d_ff=32, max_len=64)
    config["training"].update(epochs=1, expts_dir=str(tmp_path / "expts"), precision="fp32",
                              progress_bar=False, samples_every=0, device="cpu")
    config["generation"].update(num_samples=2, prompt_length=3, max_length=12)
    return config


def packed(tmp_path, folder) -> tuple[bytes, dict, dict]:
    """(model_state_dict.pt, run_card.json, config.yaml) of the handin ``make handin`` packs from
    the run ``folder``."""
    from hw4lib.handin import pack

    out = tmp_path / f"{folder.name}.tar"
    pack(REPO, str(folder), out)
    with tarfile.open(out) as tar:
        read = {name: tar.extractfile(f"handin/{name}").read()
                for name in ("model_state_dict.pt", "run_card.json", "config.yaml")}
    return (read["model_state_dict.pt"], json.loads(read["run_card.json"]),
            yaml.safe_load(read["config.yaml"]))


@pytest.mark.slow
def test_two_checkouts_train_apart_and_a_seed_given_repeats_a_run_byte_for_byte(tmp_path,
                                                                               monkeypatch):
    """Two checkouts' default runs: their own seeds, in config.yaml and the run card, and other
    weights. ``--seed 7`` in each: the same weights, byte for byte, whatever the checkout."""
    from hw4lib.train import main

    path = tmp_path / "small.yaml"
    path.write_text(yaml.safe_dump(small_run_config(tmp_path)))
    handins = {}
    for checkout in ("a", "b"):
        seed_file = tmp_path / checkout / ".hw4_seed"
        seed_file.parent.mkdir()
        monkeypatch.setattr(config_module, "CHECKOUT_SEED_FILE", seed_file)
        for name, seed in ((checkout, []), (f"{checkout}-7", ["--seed", "7"])):
            assert main(["--config", str(path), "--run-name", name, *seed]) == 0
            handins[name] = packed(tmp_path, tmp_path / "expts" / name)
        drawn = checkout_seed(seed_file)
        assert handins[checkout][2]["seed"] == handins[checkout][1]["seed"] == drawn, (
            "config.yaml and the run card record the checkout's seed")
        assert handins[f"{checkout}-7"][2]["seed"] == handins[f"{checkout}-7"][1]["seed"] == 7
    assert handins["a"][1]["seed"] != handins["b"][1]["seed"]
    weights = {name: torch.load(io.BytesIO(handin[0]), weights_only=True)
               for name, handin in handins.items()}
    assert not any(torch.equal(weights["a"][key], weights["b"][key])
                   for key in weights["a"] if key.endswith("weight")), "other seeds, other weights"
    assert handins["a-7"][0] == handins["b-7"][0], "--seed 7 gives the same bytes in any checkout"
    assert handins["a-7"][1]["state_dict_sha256"] == handins["b-7"][1]["state_dict_sha256"]
