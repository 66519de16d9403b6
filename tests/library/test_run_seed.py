# hw4p1: instructor-only
"""A seed of each run's own: a config that names no seed trains under a seed drawn afresh for that
run (``hw4lib.config.draw_seed``, ``secrets.randbelow(2**31)``), printed at the start and recorded
in the run's config.yaml and run card, so two honest default trainings in one checkout never
coincide, while ``--seed N`` (or ``seed: N``) repeats a run byte for byte.

Run: ``.venv/bin/python -m pytest -q tests/library/test_run_seed.py``. The trainings are
``hw4lib.train``'s whole run on a one-layer model and a few transcripts.
"""
import io
import json
import pickle
import secrets
import tarfile

import pytest
import torch
import yaml

from hw4lib.config import load_config, seed_note, validate_config
from tests.library.small_trainer import TRAIN_TEXTS, write_split
from tests.tiny_config import TINY, tiny_yaml

REPO = TINY.parents[1]


def counted_draws(monkeypatch, value=None) -> list[int]:
    """Replace ``secrets.randbelow`` by a stand-in that records each bound it is asked for and
    returns ``value(bound)`` (default: the real draw); the list of bounds."""
    bounds, draw = [], secrets.randbelow

    def randbelow(bound):
        bounds.append(bound)
        return draw(bound) if value is None else value(bound)

    monkeypatch.setattr(secrets, "randbelow", randbelow)
    return bounds


def test_each_config_without_a_seed_draws_its_own_once(monkeypatch):
    bounds = counted_draws(monkeypatch)
    first, second = load_config(TINY), load_config(TINY)
    assert bounds == [2**31, 2**31], "one draw per config built, below 2**31"
    assert first.seed != second.seed, "two runs, two seeds"
    for kept in (validate_config(first), validate_config(first.dump()), first.model_copy(),
                 pickle.loads(pickle.dumps(first))):  # validated again, re-read, a worker's copy
        assert kept.seed == first.seed
    assert len(bounds) == 2, "a config built again from a run's own draws nothing"
    assert load_config(TINY, {"seed": None}).seed >= 0 and len(bounds) == 3, "null draws too"
    assert load_config(TINY, {"seed": 7}).seed == 7 and len(bounds) == 3, "a seed given is used"


@pytest.mark.parametrize("drawn, seed", [(lambda bound: bound - 1, 2147483647),
                                         (lambda bound: 0, 0)], ids=["largest", "smallest"])
def test_the_drawn_seed_is_a_non_negative_int32(monkeypatch, drawn, seed):
    """randbelow's largest and smallest draws: 2**31 - 1 (an int32, numpy's and torch's seed) and 0."""
    counted_draws(monkeypatch, drawn)
    assert load_config(TINY).seed == seed


def test_the_run_says_whether_its_seed_was_drawn_or_given():
    drawn = load_config(TINY)
    assert seed_note(drawn) == (f"seed {drawn.seed} (drawn for this run; --seed {drawn.seed} "
                                f"repeats it)")
    assert seed_note(load_config(TINY, {"seed": 5})) == "seed 5 (--seed 5 repeats this run)"


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
def test_two_default_runs_train_apart_and_the_recorded_seed_repeats_one_byte_for_byte(
        tmp_path, monkeypatch, capsys):
    """Two default runs of one config in one checkout: each seeds with the seed it prints and
    records (config.yaml, the run card), and the two seeds and weights differ. ``--seed`` of the
    first's recorded seed: the same weights, byte for byte."""
    import hw4lib.train as train

    seeded, set_seed = [], train.set_seed
    monkeypatch.setattr(train, "set_seed", lambda seed: (seeded.append(seed), set_seed(seed)))
    path = tmp_path / "small.yaml"
    path.write_text(yaml.safe_dump(small_run_config(tmp_path)))
    handins, printed = {}, {}

    def train_and_pack(name, *arguments):
        assert train.main(["--config", str(path), "--run-name", name, *arguments]) == 0
        handins[name] = packed(tmp_path, tmp_path / "expts" / name)
        printed[name] = capsys.readouterr().out

    train_and_pack("a")
    train_and_pack("b")
    train_and_pack("again", "--seed", str(handins["a"][2]["seed"]))
    for index, name in enumerate(("a", "b")):
        recorded = handins[name][2]["seed"]
        assert handins[name][1]["seed"] == recorded == seeded[index], (
            "config.yaml and the run card record the seed the run trained under")
        assert f"seed {recorded} (drawn for this run; --seed {recorded} repeats it)" in printed[name]
    assert handins["a"][2]["seed"] != handins["b"][2]["seed"]
    weights = {name: torch.load(io.BytesIO(handin[0]), weights_only=True)
               for name, handin in handins.items()}
    assert not any(torch.equal(weights["a"][key], weights["b"][key])
                   for key in weights["a"] if key.endswith("weight")), "other seeds, other weights"
    again = handins["again"][2]["seed"]
    assert again == handins["again"][1]["seed"] == handins["a"][2]["seed"] == seeded[2]
    assert f"seed {again} (--seed {again} repeats this run)" in printed["again"]
    assert handins["again"][0] == handins["a"][0], "--seed of the recorded seed: the same bytes"
    assert handins["again"][1]["state_dict_sha256"] == handins["a"][1]["state_dict_sha256"]
