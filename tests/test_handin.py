"""Tests of ``make handin`` (hw4lib.handin) on fake run folders in a temporary directory.

    python -m tests.test_handin        (or: .venv/bin/python -m pytest -q tests/test_handin.py)

The fake run has the files the trainer writes, and a checkpoint that, like the trainer's, also holds
numpy RNG states, so that only the extracted state dict loads with ``weights_only=True``.
"""
import io
import json
import os
import pickle
import tarfile
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml

from hw4lib import handin_format
from hw4lib.config import vocab_size_of
from hw4lib.model.state_dict_contract import expected_entries, load_manifest
from hw4lib import handin
from hw4lib.handin import BEST_CHECKPOINT_PATH, HandinError, main, pack
from tests.testing_framework import rubric, run_module

RUBRIC = {"Handin packing": 0, "Handin refusals": 0}

# A model section the grader accepts (the packer checks the config as the grader does).
MODEL_CONFIG = {"num_layers": 1, "d_model": 4, "num_heads": 1, "d_ff": 8, "dropout": 0.0,
                "max_len": 16, "weight_tying": True}
EXPECTED_RUN_MEMBERS = {"handin/test_metrics.json", "handin/test_generated_results.json",
                        "handin/model_arch.txt", "handin/config.yaml", "handin/model_state_dict.pt",
                        "handin/run_card.json"}


def grader_state_dict(seed: int = 0) -> dict[str, torch.Tensor]:
    """A trained model's state dict without the training: random tensors with the names and shapes
    the grader's model has for MODEL_CONFIG (the manifest's), the tied weights one tensor."""
    generator = torch.Generator().manual_seed(seed)
    entries = expected_entries(MODEL_CONFIG, vocab_size_of("char"))
    state = {key: torch.randn(entry.shape, generator=generator) for key, entry in entries.items()}
    first, *others = load_manifest()["tied"]
    state.update((key, state[first]) for key in others)
    return state


def make_repo(root: Path) -> None:
    """A repository root with a student's mytorch package, caches, a non-.py stray and a notebook
    checkpoint copy (not a module name, which the grader would not import) included."""
    (root / "mytorch" / "nn" / "__pycache__").mkdir(parents=True)
    (root / "mytorch" / "nn" / ".ipynb_checkpoints").mkdir(parents=True)
    (root / "mytorch" / "__init__.py").write_text('"""mytorch"""\n')
    (root / "mytorch" / "nn" / "linear.py").write_text("class Linear:\n    pass\n")
    (root / "mytorch" / "nn" / "__pycache__" / "linear.cpython-311.pyc").write_bytes(b"\0" * 64)
    (root / "mytorch" / "nn" / "scratch.npy").write_bytes(b"\0" * 64)
    (root / "mytorch" / "nn" / ".ipynb_checkpoints" / "linear-checkpoint.py").write_text("x = 1\n")


def make_run(root: Path, name: str, state: dict | None = None, **overrides) -> Path:
    """expts/<name>/ as the trainer writes it; ``overrides`` replaces (None: deletes) a file."""
    folder = root / "expts" / name
    (folder / "checkpoints").mkdir(parents=True)
    state = grader_state_dict() if state is None else state
    files = {
        "config.yaml": yaml.safe_dump({"model": MODEL_CONFIG,
                                       "tokenization": {"token_type": "char"}}),
        "model_arch.txt": "DecoderOnlyTransformer(...)\n",
        "test_metrics.json": json.dumps({"ce_loss_token": 1.0, "ce_loss_char": 0.5,
                                         "perplexity_token": 2.7, "perplexity_char": 1.6}),
        "test_generated_results.json": json.dumps({"greedy": [], "beam": [], "sample": []}),
    }
    checkpoint = {"model_state_dict": state, "epoch": 1, "step": 3,
                  "rng_states": {"numpy": np.random.get_state()}}
    for file, content in overrides.items():
        if file == "checkpoint":
            checkpoint = content
        else:
            files[file] = content
    for file, content in files.items():
        if content is not None:
            (folder / file).write_text(content)
    if checkpoint is not None:
        torch.save(checkpoint, folder / BEST_CHECKPOINT_PATH)
    return folder


def read_tar(path: Path) -> dict[str, bytes]:
    with tarfile.open(path) as tar:
        return {m.name: tar.extractfile(m).read() for m in tar.getmembers() if m.isfile()}


@rubric("Handin packing")
def test_handin_packs_run_and_mytorch_sources(tmp_path):
    make_repo(tmp_path)
    original = grader_state_dict()
    make_run(tmp_path, "run-a", original)
    pack(tmp_path)
    members = read_tar(tmp_path / "handin.tar")
    assert set(members) == EXPECTED_RUN_MEMBERS | {"handin/mytorch/__init__.py",
                                                   "handin/mytorch/nn/linear.py"}
    assert members["handin/model_arch.txt"] == b"DecoderOnlyTransformer(...)\n"

    state = torch.load(io.BytesIO(members["handin/model_state_dict.pt"]), weights_only=True)
    assert list(state) == list(original), "the packed state dict must keep every key, in order"
    for key, value in original.items():
        assert torch.equal(state[key], value), key
    first, *others = load_manifest()["tied"]
    for key in others:  # a tied weight stays one tensor, stored once
        assert state[key].untyped_storage().data_ptr() == state[first].untyped_storage().data_ptr()
    # the full checkpoint itself would not load that way: the extraction is what makes it safe
    with pytest.raises(pickle.UnpicklingError):
        torch.load(tmp_path / "expts" / "run-a" / BEST_CHECKPOINT_PATH, weights_only=True)


@rubric("Handin packing")
def test_run_card_describes_what_was_packed(tmp_path):
    """run_card.json: the sha256 of the packed weights, the config's digest, the parameter count
    (a tied weight once), the run's seed, epoch and metrics; a checkpoint trained with another
    model than config.yaml says is refused."""
    import hashlib

    make_repo(tmp_path)
    config = {"model": MODEL_CONFIG, "tokenization": {"token_type": "char"}, "seed": 7}
    make_run(tmp_path, "run-a", **{"config.yaml": yaml.safe_dump(config)})
    pack(tmp_path)
    members = read_tar(tmp_path / "handin.tar")
    card = json.loads(members["handin/run_card.json"])
    assert card["state_dict_sha256"] == hashlib.sha256(members["handin/model_state_dict.pt"]).hexdigest()
    assert card["config_sha256"] == handin_format.config_digest(
        {"model": handin.validate_untrusted(config)["model"], "tokenization": {"token_type": "char"}})
    state = torch.load(io.BytesIO(members["handin/model_state_dict.pt"]), weights_only=True)
    storages = {}  # the learned tensors, a tied weight once; the positional table is a buffer
    for key, value in state.items():
        if key != "positional_encoding.pe":
            storages[value.untyped_storage().data_ptr()] = value.numel()
    assert card["parameters"] == sum(storages.values())
    assert (card["seed"], card["epochs"], card["test_perplexity_char"]) == (7, 1, 1.6)
    assert card["versions"]["torch"] == torch.__version__

    other = {**MODEL_CONFIG, "dropout": 0.3 if MODEL_CONFIG.get("dropout") != 0.3 else 0.1}
    trained_elsewhere = {"model_state_dict": grader_state_dict(), "epoch": 1,
                         "config": {"model": other, "tokenization": {"token_type": "char"}}}
    make_run(tmp_path, "run-b", checkpoint=trained_elsewhere)
    with pytest.raises(HandinError, match="trained with another model or tokenizer"):
        pack(tmp_path, run="run-b", out=tmp_path / "b.tar")


@rubric("Handin packing")
def test_handin_picks_latest_run_unless_named(tmp_path):
    make_repo(tmp_path)
    old = make_run(tmp_path, "old", **{"model_arch.txt": "old\n"})
    new = make_run(tmp_path, "new", **{"model_arch.txt": "new\n"})
    os.utime(old, (1_000, 1_000))
    os.utime(new, (2_000, 2_000))
    main(["--root", str(tmp_path)])
    assert read_tar(tmp_path / "handin.tar")["handin/model_arch.txt"] == b"new\n"
    out = tmp_path / "picked.tar"
    main(["--root", str(tmp_path), "--run", "old", "--out", str(out)])
    assert read_tar(out)["handin/model_arch.txt"] == b"old\n"


@rubric("Handin packing")
def test_handin_packs_the_newest_complete_run_and_names_what_it_skipped(tmp_path, capsys):
    make_repo(tmp_path)
    done = make_run(tmp_path, "done", **{"model_arch.txt": "done\n"})
    stopped = make_run(tmp_path, "stopped", **{"test_metrics.json": None})   # Ctrl-C in training
    training = make_run(tmp_path, "training", **{"test_generated_results.json": None})
    for age, folder in enumerate((done, stopped, training)):
        os.utime(folder, (1_000 + age, 1_000 + age))
    main(["--root", str(tmp_path)])
    out = capsys.readouterr().out
    assert read_tar(tmp_path / "handin.tar")["handin/model_arch.txt"] == b"done\n"
    assert f"packed run {done}" in out, out
    assert "skipped newer incomplete runs (interrupted or still training): training, stopped" in out, out
    done.rename(tmp_path / "elsewhere")
    with pytest.raises(HandinError, match=r"no complete run under .*training lacks "
                                          r"test_generated_results\.json; stopped lacks test_metrics\.json"):
        pack(tmp_path, out=tmp_path / "none.tar")


@rubric("Handin packing")
def test_handin_states_the_expected_grade_on_the_graders_curve(tmp_path, capsys):
    """The outlook names the measured perplexity, the pass mark and the points the grader's curve
    gives it (full at the pass mark, nothing at the zero mark, the straight line between: checked
    at the midpoint and a quarter of the way), the local mytorch points and the caveat."""
    from hw4lib.grading_numbers import FULL_MARKS_PPL, LM_POINTS, MYTORCH_RUBRIC, ZERO_MARKS_PPL
    from hw4lib.handin import grade_outlook

    full, zero, mytorch = FULL_MARKS_PPL, ZERO_MARKS_PPL, sum(MYTORCH_RUBRIC.values())
    first, *others = MYTORCH_RUBRIC
    scores = {category: None if category == first else MYTORCH_RUBRIC[category]
              for category in MYTORCH_RUBRIC}
    passing = mytorch - MYTORCH_RUBRIC[first]
    for perplexity, points in ((full, LM_POINTS), (full - 0.5, LM_POINTS), (zero, 0),
                               (zero + 3, 0), ((full + zero) / 2, LM_POINTS / 2),
                               (full + (zero - full) / 4, LM_POINTS * 3 / 4)):
        text = grade_outlook({"perplexity_char": perplexity}, scores)
        assert f"perplexity per character {perplexity:.4f}" in text, text
        assert f"pass mark {full:g} ({LM_POINTS:g} points)" in text, text
        assert f": {points:g}/{LM_POINTS:g}" in text, (perplexity, points, text)
        assert f"{passing:g}/{passing:g} from the categories whose local tests all pass; " \
            f"{first} fail" in text, text
        assert f"total: {points + passing:g}/{LM_POINTS + mytorch:g} plus what the hidden tests " \
            f"give {first}" in text, text
        assert f"total: {points + mytorch:g}/" in grade_outlook(
            {"perplexity_char": perplexity}, dict(MYTORCH_RUBRIC))
        assert "hidden test set" in text and "decide" in text, text
    assert "not measured" in grade_outlook({"perplexity_char": full}, None)
    make_repo(tmp_path)
    make_run(tmp_path, "run-a", grader_state_dict())
    pack(tmp_path)
    assert "expected grade" in capsys.readouterr().out, "make handin states the expected grade"


@rubric("Handin refusals")
def test_handin_refuses_without_runs(tmp_path):
    make_repo(tmp_path)
    with pytest.raises(HandinError, match="no run folder"):
        pack(tmp_path)
    make_run(tmp_path, "only")
    with pytest.raises(HandinError, match="'missing' not found.*only"):
        pack(tmp_path, run="missing")
    with pytest.raises(SystemExit, match="nothing packed"):
        main(["--root", str(tmp_path), "--run", "missing"])
    assert not (tmp_path / "handin.tar").exists()


@rubric("Handin refusals")
def test_handin_refuses_incomplete_runs_naming_the_problem(tmp_path):
    make_repo(tmp_path)
    cases = {
        "no-metrics": ({"test_metrics.json": None}, "missing: test_metrics.json"),
        "no-generations": ({"test_generated_results.json": None}, "test_generated_results.json"),
        "no-checkpoint": ({"checkpoint": None}, "checkpoint-best-metric-model.pth"),
        "no-state-dict": ({"checkpoint": {"epoch": 1}}, "has no model_state_dict"),
        "bad-json": ({"test_metrics.json": "{not json"}, "not valid JSON"),
        "no-ppl": ({"test_metrics.json": json.dumps({"ce_loss_token": 1.0})}, "perplexity_char"),
        "bad-config": ({"config.yaml": "seed: 0\n"}, "tokenization.token_type"),
        "typed-config": ({"config.yaml": yaml.safe_dump({
            "tokenization": {"token_type": "char"}, "model": {**MODEL_CONFIG, "d_ff": "8"}})},
            r"model\.d_ff'?: input should be a valid integer"),
        "huge-model": ({"config.yaml": yaml.safe_dump({
            "tokenization": {"token_type": "char"}, "model": {**MODEL_CONFIG, "num_layers": 49}})},
            r"model\.num_layers' is 49, outside the grader's limits \[1, 48\]"),
    }
    for name, (overrides, message) in cases.items():
        make_run(tmp_path, name, **overrides)
        with pytest.raises(HandinError, match=message):
            pack(tmp_path, run=name)
    assert not list(tmp_path.glob("handin.tar*"))


@rubric("Handin refusals")
def test_handin_refuses_large_strays(tmp_path):
    make_repo(tmp_path)
    make_run(tmp_path, "run")
    (tmp_path / "mytorch" / "big.py").write_bytes(b"#" * 1_100_000)
    with pytest.raises(HandinError, match="big.py is 1.1 MB"):
        pack(tmp_path)
    (tmp_path / "mytorch" / "big.py").unlink()
    (tmp_path / "expts" / "run" / "model_arch.txt").write_bytes(b"x" * 10_500_000)
    with pytest.raises(HandinError, match="model_arch.txt is 10.5 MB"):
        pack(tmp_path)
    (tmp_path / "expts" / "run" / "model_arch.txt").write_text("small\n")
    for index in range(5):
        (tmp_path / "mytorch" / f"part{index}.py").write_bytes(b"#" * 900_000)
    with pytest.raises(HandinError, match="4.5 MB of .py files, over the grader's 4.0 MB"):
        pack(tmp_path)
    assert not list(tmp_path.glob("handin.tar*"))


@rubric("Handin refusals")
def test_handin_refuses_what_the_grader_would(tmp_path, monkeypatch):
    """The packer enforces the grader's limits (hw4lib.handin_format), whatever their values."""
    make_repo(tmp_path)
    make_run(tmp_path, "run")
    pack(tmp_path)
    state_dict_bytes = len(read_tar(tmp_path / "handin.tar")["handin/model_state_dict.pt"])
    monkeypatch.setattr(handin_format, "MAX_STATE_DICT_BYTES", state_dict_bytes - 1)
    with pytest.raises(HandinError, match="over the grader's .* limit for model_state_dict.pt"):
        pack(tmp_path, out=tmp_path / "second.tar")
    monkeypatch.setattr(handin, "MAX_MEMBERS", 4)
    monkeypatch.setattr(handin_format, "MAX_STATE_DICT_BYTES", state_dict_bytes)
    members = len(EXPECTED_RUN_MEMBERS) + 2  # and mytorch/__init__.py, mytorch/nn/linear.py
    with pytest.raises(HandinError, match=f"would hold {members} files, over the grader's limit of 4"):
        pack(tmp_path, out=tmp_path / "second.tar")
    assert not (tmp_path / "second.tar").exists(), "a refused handin must leave no second.tar"


@rubric("Handin refusals")
def test_handin_refuses_a_state_dict_the_grader_cannot_load(tmp_path):
    """Keys the reference model lacks or has, and shapes that differ, are each named; nothing is
    written. Two of them are what a final_linear without bias and an FFN LayerNorm without
    weight and bias give: models that train well and would score 0."""
    make_repo(tmp_path)
    state = grader_state_dict()
    for key in ("final_linear.bias", "dec_layers.0.ffn.norm.weight", "dec_layers.0.ffn.norm.bias"):
        del state[key]
    state["dec_layers.0.ffn.scale"] = torch.ones(4)
    state["norm.weight"] = torch.ones(5)
    make_run(tmp_path, "run", state)
    with pytest.raises(HandinError) as refusal:
        pack(tmp_path)
    message = str(refusal.value)
    for named in ("missing final_linear.bias", "DecoderOnlyTransformer.final_linear (nn.Linear)",
                  "missing dec_layers.0.ffn.norm.weight", "missing dec_layers.0.ffn.norm.bias",
                  "FeedForwardLayer.norm (nn.LayerNorm)", "unexpected dec_layers.0.ffn.scale",
                  "wrong shape for norm.weight: expected [4], got [5]"):
        assert named in message, f"the refusal must say {named!r}; it says:\n{message}"
    assert not (tmp_path / "handin.tar").exists(), "a refused handin must leave no handin.tar"


if __name__ == "__main__":
    run_module(__name__)
