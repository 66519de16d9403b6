"""LMTrainer and the per-character perplexity metric, on tiny in-memory stand-ins.

Run: ``python -m tests.test_lm_trainer`` (or pytest). The model, tokenizer and dataset here are
small stand-ins built in this file, so these tests exercise the trainer alone: a failure points at
hw4lib/trainers, not at the data or model code.
"""
import json
import math

import pytest
import torch
from torch import nn
from torch.nn.utils.rnn import pad_sequence
from torch.utils.data import DataLoader

from tests.testing_framework import rubric, run_module

RUBRIC = {"Perplexity metric": 5, "LMTrainer": 10}

PAD, SOS, EOS = 0, 1, 2
VOCAB = 8


class StubTokenizer:
    """Ids 3..7 are the letters A..E; 0, 1, 2 are [PAD], [SOS], [EOS]."""

    pad_id, sos_id, eos_id, vocab_size = PAD, SOS, EOS, VOCAB

    def decode(self, ids, skip_special_tokens=False):
        return "".join("ABCDE"[i - 3] if i >= 3 else ("" if skip_special_tokens else f"<{i}>")
                       for i in ids)


class StubDataset:
    """An in-memory LMDataset: each transcript's characters are one token each (ids 3..7)."""

    def __init__(self, sequences, chars_per_token=1):
        self.golden = [list(s) + [EOS] for s in sequences]
        self.shifted = [[SOS] + list(s) for s in sequences]
        self.total_chars = sum(len(s) for s in sequences) * chars_per_token
        self.total_tokens = sum(len(g) for g in self.golden)

    def __len__(self):
        return len(self.golden)

    def __getitem__(self, index):
        return torch.tensor(self.shifted[index]), torch.tensor(self.golden[index])

    def collate_fn(self, batch):
        shifted, golden = zip(*batch)
        lengths = torch.tensor([len(s) for s in shifted])
        return (pad_sequence(shifted, batch_first=True, padding_value=PAD),
                pad_sequence(golden, batch_first=True, padding_value=PAD), lengths)

    def sample_prompts(self, num_samples, prompt_length, seed=None):
        chosen = list(range(num_samples))
        prompts = torch.tensor([self.shifted[i][: prompt_length + 1] for i in chosen])
        return prompts, [torch.tensor(self.golden[i]) for i in chosen]


class TableLM(nn.Module):
    """Next-token logits that depend only on the current token: a bigram table.

    With ``dropout`` the forward pass draws random numbers, so RNG handling matters; ``nan_after``
    makes the logits NaN from that many training forwards on (to test the NaN guard).
    """

    def __init__(self, dropout=0.0, nan_after=None):
        super().__init__()
        self.max_len, self.num_classes = 64, VOCAB
        self.embedding = nn.Embedding(VOCAB, 16)
        self.dropout = nn.Dropout(dropout)
        self.final_linear = nn.Linear(16, VOCAB)
        self.nan_after, self.training_forwards = nan_after, 0

    def forward(self, tokens, lengths=None):
        logits = self.final_linear(self.dropout(self.embedding(tokens)))
        if self.training:
            self.training_forwards += 1
            if self.nan_after is not None and self.training_forwards > self.nan_after:
                logits = logits * float("nan")
        length = tokens.size(1)
        causal_uniform = torch.tril(torch.ones(length, length)) / torch.arange(1, length + 1).unsqueeze(1)
        return logits, {"layer1_dec_self": causal_uniform.expand(tokens.size(0), length, length)}

    def score(self, tokens):
        return self.forward(tokens)[0][:, -1]


class FixedLogits(nn.Module):
    """Returns the same (N, T, K) logits whatever the input."""

    def __init__(self, logits):
        super().__init__()
        self.logits = logits

    def forward(self, tokens, lengths=None):
        return self.logits, {}


SEQUENCES = [[3, 4, 5, 6], [4, 5, 6, 7], [5, 6, 7, 3], [6, 7, 3, 4, 5], [7, 3, 4], [3, 5, 7, 4]]


def _config(tmp_path, **training):
    return {
        "training": {"expts_dir": str(tmp_path / "expts"), "gradient_accumulation_steps": 1,
                     "grad_clip_norm": 1.0, "progress_bar": False,
                     "precision": "fp32", **training},  # float32: the tests compare runs exactly
        "scheduler": {"name": "cosine", "interval": "step"},
        "generation": {"num_samples": 2, "prompt_length": 2, "max_length": 8,
                       "greedy": {}, "beam": {"beam_width": 2}, "sample": {"top_k": 3, "seed": 1}},
    }


def _trainer(tmp_path, model, run_name="run", lr=0.05, **training):
    from hw4lib.trainers import LMTrainer

    trainer = LMTrainer(model, StubTokenizer(), _config(tmp_path, **training), run_name, None, device="cpu")
    trainer.optimizer = torch.optim.AdamW(trainer.model.parameters(), lr=lr)
    trainer.scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(trainer.optimizer, T_max=20)
    return trainer


def _loader(shuffle=True, batch_size=2, sequences=SEQUENCES):
    dataset = StubDataset(sequences)
    return DataLoader(dataset, batch_size=batch_size, shuffle=shuffle, collate_fn=dataset.collate_fn)


@rubric("Perplexity metric")
def test_evaluate_language_model_hand_computed():
    from hw4lib.trainers import evaluate_language_model

    # Two transcripts: lengths 3 and 2 (targets include EOS); 4 classes; 11 characters in total.
    golden = torch.tensor([[3, 1, 2], [0, 2, 0]])      # the trailing 0 of row 2 is padding
    shifted = torch.tensor([[1, 3, 1], [1, 0, 0]])
    lengths = torch.tensor([3, 2])
    probs = torch.full((2, 3, 4), 0.1)
    probs[0, 0] = torch.tensor([0.1, 0.1, 0.1, 0.7])   # p(target 3) = 0.7
    probs[0, 1] = torch.tensor([0.2, 0.5, 0.2, 0.1])   # p(target 1) = 0.5
    probs[0, 2] = torch.tensor([0.25, 0.25, 0.25, 0.25])
    probs[1, 0] = torch.tensor([0.4, 0.2, 0.2, 0.2])   # p(target 0) = 0.4 (a real target, not pad)
    probs[1, 1] = torch.tensor([0.1, 0.1, 0.6, 0.2])   # p(target 2) = 0.6
    probs[1, 2] = torch.tensor([0.97, 0.01, 0.01, 0.01])  # padding: must not count
    model = FixedLogits(probs.log())
    loader = [(shifted, golden, lengths)]
    nll = -(math.log(0.7) + math.log(0.5) + math.log(0.25) + math.log(0.4) + math.log(0.6))
    metrics = evaluate_language_model(model, loader, "cpu", total_chars=11)
    assert metrics["ce_loss_token"] == pytest.approx(nll / 5, rel=1e-6)
    assert metrics["ce_loss_char"] == pytest.approx(nll / 11, rel=1e-6)
    assert metrics["perplexity_token"] == pytest.approx(math.exp(nll / 5), rel=1e-6)
    assert metrics["perplexity_char"] == pytest.approx(math.exp(nll / 11), rel=1e-6)
    assert (metrics["num_tokens"], metrics["num_chars"]) == (5, 11)


@rubric("Perplexity metric")
def test_evaluate_language_model_reads_dataset_chars_and_restores_mode():
    from hw4lib.trainers import evaluate_language_model

    # Uniform logits: every target costs ln(8); 2 chars per token in the stub's count.
    dataset = StubDataset(SEQUENCES, chars_per_token=2)
    loader = DataLoader(dataset, batch_size=4, collate_fn=dataset.collate_fn)
    model = TableLM()
    nn.init.zeros_(model.final_linear.weight)
    nn.init.zeros_(model.final_linear.bias)
    model.train()
    metrics = evaluate_language_model(model, loader, "cpu")
    assert model.training, "the model's train/eval mode is restored"
    targets = sum(len(s) + 1 for s in SEQUENCES)
    assert metrics["ce_loss_token"] == pytest.approx(math.log(VOCAB), rel=1e-6)
    assert metrics["ce_loss_char"] == pytest.approx(targets * math.log(VOCAB) / dataset.total_chars, rel=1e-6)
    with pytest.raises(ValueError, match="total_chars"):
        evaluate_language_model(model, [next(iter(loader))], "cpu")


@rubric("LMTrainer")
def test_criterion_ignores_padding_and_applies_label_smoothing(tmp_path):
    trainer = _trainer(tmp_path, TableLM(), label_smoothing=0.1)
    logits = torch.randn(6, VOCAB)
    targets = torch.tensor([3, 4, PAD, 5, PAD, 2])
    keep = targets != PAD
    log_probs = logits[keep].log_softmax(-1)
    expected = (0.9 * -log_probs.gather(1, targets[keep, None]).squeeze(1) - 0.1 * log_probs.mean(-1)).mean()
    assert trainer.criterion(logits, targets).item() == pytest.approx(expected.item(), rel=1e-5)


@rubric("LMTrainer")
def test_train_writes_run_folder_and_learns(tmp_path):
    from hw4lib.trainers.base_trainer import CHECKPOINT_BEST, CHECKPOINT_LAST

    torch.manual_seed(0)
    trainer = _trainer(tmp_path, TableLM(), samples_every=1)
    loader = _loader()
    start = trainer._validate_epoch(loader)["ce_loss_token"]
    trainer.train(loader, loader, epochs=3)
    root = tmp_path / "expts" / "run"
    history = json.loads((root / "metrics" / "history.json").read_text())
    assert [record["epoch"] for record in history] == [1, 2, 3]
    assert history[-1]["val"]["ce_loss_token"] < start - 0.3, "three epochs of AdamW must lower the loss"
    for name in ("config.yaml", "model_arch.txt", "metrics/epoch_003.json", "metrics/loss.png",
                 "metrics/perplexity.png", "attn/train_last_layer_epoch003.png",
                 "text/val_greedy_epoch003.json", f"checkpoints/{CHECKPOINT_BEST}",
                 f"checkpoints/{CHECKPOINT_LAST}"):
        assert (root / name).is_file(), name
    assert not list(root.rglob("*.tmp")), "checkpoints are written through a temporary file"
    checkpoint = torch.load(root / "checkpoints" / CHECKPOINT_LAST, weights_only=False)
    for key in ("model_state_dict", "optimizer_state_dict", "scheduler_state_dict", "epoch", "step",
                "best_metric", "config", "rng_states"):
        assert key in checkpoint, key
    assert (checkpoint["epoch"], checkpoint["step"]) == (3, 9)
    assert checkpoint["best_metric"] == pytest.approx(min(r["val"]["perplexity_char"] for r in history))


@rubric("LMTrainer")
def test_resume_continues_exactly_like_an_uninterrupted_run(tmp_path):
    from hw4lib.trainers.base_trainer import CHECKPOINT_LAST

    def fresh(run_name, seed):
        torch.manual_seed(seed)
        return _trainer(tmp_path, TableLM(dropout=0.3), run_name)

    straight = fresh("straight", 0)
    straight.train(_loader(), _loader(shuffle=False), epochs=2)

    first = fresh("interrupted", 0)
    first.train(_loader(), _loader(shuffle=False), epochs=1)
    torch.manual_seed(123)  # whatever happens between the runs must not matter
    resumed = fresh("interrupted", 99)
    resumed.load_checkpoint(tmp_path / "expts" / "interrupted" / "checkpoints" / CHECKPOINT_LAST)
    resumed.train(_loader(), _loader(shuffle=False), epochs=2)

    assert [r["epoch"] for r in resumed.history] == [1, 2]
    for key in ("train", "val"):
        assert resumed.history[1][key] == straight.history[1][key], f"epoch 2 {key} metrics differ"
    for name, value in straight.model.state_dict().items():
        assert torch.equal(value, resumed.model.state_dict()[name]), name


@rubric("LMTrainer")
def test_nan_loss_stops_training_and_keeps_last_good_checkpoint(tmp_path):
    from hw4lib.trainers import NonFiniteLossError
    from hw4lib.trainers.base_trainer import CHECKPOINT_LAST

    torch.manual_seed(0)
    trainer = _trainer(tmp_path, TableLM(nan_after=4))   # 3 batches per epoch: NaN in epoch 2
    with pytest.raises(NonFiniteLossError, match="epoch 2") as error:
        trainer.train(_loader(), _loader(shuffle=False), epochs=3)
    assert CHECKPOINT_LAST in str(error.value)
    checkpoint = torch.load(tmp_path / "expts" / "run" / "checkpoints" / CHECKPOINT_LAST, weights_only=False)
    assert checkpoint["epoch"] == 1
    assert all(torch.isfinite(v).all() for v in checkpoint["model_state_dict"].values())


@rubric("LMTrainer")
def test_gradient_accumulation_matches_one_large_batch(tmp_path):
    equal_length = [[3, 4, 5], [4, 5, 6], [5, 6, 7], [6, 7, 3]]
    results = []
    for run_name, batch_size, accumulation in (("big", 4, 1), ("accumulated", 1, 4)):
        torch.manual_seed(0)
        trainer = _trainer(tmp_path, TableLM(), run_name, gradient_accumulation_steps=accumulation,
                           grad_clip_norm=0.0)
        trainer.optimizer = torch.optim.SGD(trainer.model.parameters(), lr=0.5)
        trainer.scheduler = None
        trainer._train_epoch(_loader(shuffle=False, batch_size=batch_size, sequences=equal_length))
        assert trainer.global_step == 1
        results.append(trainer.model.state_dict())
    for name, value in results[0].items():
        assert torch.allclose(value, results[1][name], atol=1e-6), name


@rubric("LMTrainer")
def test_evaluate_writes_metrics_and_three_generation_strategies(tmp_path):
    torch.manual_seed(0)
    trainer = _trainer(tmp_path, TableLM())
    loader = _loader(shuffle=False)
    metrics, generations = trainer.evaluate(loader)
    root = tmp_path / "expts" / "run"
    assert json.loads((root / "test_metrics.json").read_text()) == pytest.approx(metrics)
    assert set(generations) == {"greedy", "beam", "sample"}
    assert json.loads((root / "test_generated_results.json").read_text()) == generations
    for samples in generations.values():
        assert len(samples) == 2
        for sample, sequence in zip(samples, SEQUENCES):
            assert sample["prompt"] == StubTokenizer().decode(sequence[:2])
            assert sample["original"] == StubTokenizer().decode(sequence)
            assert len(sample["generated"]) <= 8 - 3 and math.isfinite(sample["score"])


if __name__ == "__main__":
    run_module(__name__)
