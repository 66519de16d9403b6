"""The main job, ``python -m hw4lib.train``: config validation, and a tiny run end to end.

Run: ``python -m tests.test_train_e2e`` (or pytest; the end-to-end test is marked slow). The
end-to-end test generates a small corpus with the data builder's corpus generator in a temporary
folder, trains ``configs/tiny.yaml`` on it twice with the same seed and checks the run folder, that
the two runs agree exactly, and that the autograder's way of rebuilding the model reproduces the
reported test perplexity.
"""
import copy
import json
import math
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml

from tests.testing_framework import rubric, run_module
from tests.tiny_config import tiny_yaml

RUBRIC = {"Config validation": 0, "Length-bucketed batches": 0, "Training run": 0}
# The run trains your model with your trainer, data and decoding: graded through its perplexity.
THROUGH_LM = ("Training run",)

REPO = Path(__file__).resolve().parents[1]


@rubric("Config validation")
def test_shipped_configs_are_valid():
    from hw4lib.train import load_config

    for name in ("default.yaml", "tiny.yaml"):
        config = load_config(REPO / "configs" / name)
        assert config.training.gradient_accumulation_steps >= 1, "defaults are filled in"
    config = load_config(REPO / "configs" / "tiny.yaml",
                         {"training.epochs": 5, "scheduler.warmup.epochs": 0.5, "scheduler.cosine": {}})
    assert config.scheduler.cosine.T_max == 4.5, "a cosine without T_max spans the rest of training"


@rubric("Config validation")
def test_config_errors_name_the_key():
    from hw4lib.train import ConfigError, validate_config

    cases = [
        (("training", "epochs"), 0, "training.epochs"),
        (("optimizer", "lr"), "fast", "optimizer.lr"),
        (("optimizer", "name"), "lion", "optimizer.name"),
        (("tokenization", "token_type"), "bpe", "tokenization.token_type"),
        (("data", "subset"), 1.5, "data.subset"),
        (("model", "num_classes"), 10, "model.num_classes"),
        (("model", "d_model"), 129, "d_model"),
        (("training", "epoch"), 3, "training.epoch"),
        (("scheduler", "cosine"), {"T_max": -1}, "scheduler.cosine.T_max"),
        (("generation", "beam"), {"beam_width": 0}, "generation.beam.beam_width"),
    ]
    for (section, key), value, named in cases:
        config = tiny_yaml()
        config[section][key] = value
        with pytest.raises(ConfigError, match=named.replace(".", r"\.")):
            validate_config(config)
    config = tiny_yaml()
    del config["data"]["batch_size"]
    with pytest.raises(ConfigError, match=r"data\.batch_size"):
        validate_config(config)
    config = tiny_yaml()
    config["scheduler"]["name"] = "reduce_lr"
    with pytest.raises(ConfigError, match=r"scheduler\.warmup"):
        validate_config(config)


@rubric("Config validation")
def test_cli_reports_a_bad_config_and_exits_nonzero(tmp_path):
    from hw4lib.train import main

    config = tiny_yaml()
    config["data"]["batch_size"] = -1
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(config))
    assert main(["--config", str(path)]) == 1


@rubric("Length-bucketed batches")
def test_bucketed_batches_cover_each_transcript_once_with_little_padding():
    from hw4lib.data import LengthBucketBatchSampler

    generator = torch.Generator().manual_seed(0)
    lengths = torch.randint(1, 200, (1000,), generator=generator).tolist()
    sampler = LengthBucketBatchSampler(lengths, batch_size=16, shuffle=True, pool_batches=10)
    torch.manual_seed(0)
    epoch = list(sampler)
    assert len(epoch) == len(sampler)
    assert sorted(i for batch in epoch for i in batch) == list(range(1000)), "each index exactly once"
    assert all(1 <= len(batch) <= 16 for batch in epoch)
    padded = sum(len(batch) * max(lengths[i] for i in batch) for batch in epoch)
    assert sum(lengths) / padded > 0.85, "batches of similar length waste little on padding"
    torch.manual_seed(0)
    assert list(sampler) == epoch, "the global torch seed fixes the batches"
    assert list(sampler) != epoch, "the next epoch draws new batches"
    fixed = LengthBucketBatchSampler(lengths, batch_size=16, shuffle=False)
    assert list(fixed) == list(fixed)
    flat = [lengths[i] for batch in fixed for i in batch]
    assert flat == sorted(lengths), "without shuffling the batches are sorted by length"


def _write_corpus(root: Path, train_chars: int) -> None:
    """A small train/val/test corpus from the data builder's generator, as .npy transcripts."""
    from datagen.corpus import generate_split

    train = generate_split(0, train_chars, split="train")
    splits = {"train": train,
              "val": generate_split(1, train_chars // 10, exclude=train, split="val"),
              "test": generate_split(2, train_chars // 10, exclude=train, split="test")}
    for split, texts in splits.items():
        (root / split).mkdir(parents=True)
        for index, text in enumerate(texts):
            np.save(root / split / f"{split}-{index:05d}.npy", np.array(list(text)))


@pytest.mark.slow
@rubric("Training run")
def test_tiny_run_end_to_end_is_complete_deterministic_and_gradable(tmp_path):
    from hw4lib.data import H4Tokenizer, LMDataset
    from hw4lib.model import DecoderOnlyTransformer
    from hw4lib.train import run
    from hw4lib.trainers.metrics import evaluate_language_model

    _write_corpus(tmp_path / "data", train_chars=60_000)
    config = tiny_yaml()
    config["data"].update(root=str(tmp_path / "data"), subset=1.0, batch_size=8)
    config["training"].update(expts_dir=str(tmp_path / "expts"), epochs=2, progress_bar=False)
    config["generation"].update(num_samples=2, max_length=24)
    config_file = tmp_path / "tiny.yaml"
    config_file.write_text(yaml.safe_dump(config))

    folders = [run(config_file, run_name=name) for name in ("first", "second")]
    root = folders[0]
    for name in ("config.yaml", "model_arch.txt", "lr_schedule.png", "test_metrics.json",
                 "test_generated_results.json", "timing.json", "metrics/epoch_002.json",
                 "metrics/loss.png", "metrics/perplexity.png", "attn/train_last_layer_epoch002.png",
                 "text/val_greedy_epoch002.json", "checkpoints/checkpoint-best-metric-model.pth",
                 "checkpoints/checkpoint-last-epoch-model.pth"):
        assert (root / name).is_file(), f"run folder lacks {name}"
    assert "total" in (root / "model_arch.txt").read_text()

    metrics = json.loads((root / "test_metrics.json").read_text())
    for key in ("ce_loss_token", "ce_loss_char", "perplexity_token", "perplexity_char"):
        assert math.isfinite(metrics[key]), key
    vocab_size = H4Tokenizer(config["tokenization"]["token_map"], config["tokenization"]["token_type"]).vocab_size
    uniform = math.exp(math.log(vocab_size) * metrics["num_tokens"] / metrics["num_chars"])
    assert metrics["perplexity_char"] < 0.85 * uniform, "two epochs must beat a uniform guess"
    history = json.loads((root / "metrics" / "history.json").read_text())
    assert history[1]["train"]["ce_loss_char"] < history[0]["train"]["ce_loss_char"]
    assert metrics == json.loads((folders[1] / "test_metrics.json").read_text()), \
        "the same seed must give the same metrics"
    generations = json.loads((root / "test_generated_results.json").read_text())
    assert set(generations) == {"greedy", "beam", "sample"}
    assert all(len(samples) == 2 for samples in generations.values())

    # What the autograder does: rebuild from config.yaml, load tensors only, strict, then score.
    saved = yaml.safe_load((root / "config.yaml").read_text())
    checkpoint = torch.load(root / "checkpoints" / "checkpoint-best-metric-model.pth", weights_only=False)
    tensors_only = tmp_path / "model_state_dict.pt"
    torch.save(copy.deepcopy(checkpoint["model_state_dict"]), tensors_only)
    tokenizer = H4Tokenizer(saved["tokenization"]["token_map"], saved["tokenization"]["token_type"])
    model = DecoderOnlyTransformer(**saved["model"], num_classes=tokenizer.vocab_size)
    model.load_state_dict(torch.load(tensors_only, weights_only=True), strict=True)
    test_set = LMDataset("test", saved["data"], tokenizer)
    loader = torch.utils.data.DataLoader(test_set, batch_size=7, collate_fn=test_set.collate_fn)
    regraded = evaluate_language_model(model, loader, "cpu")
    assert regraded["perplexity_char"] == pytest.approx(metrics["perplexity_char"], rel=1e-4)


if __name__ == "__main__":
    run_module(__name__)
