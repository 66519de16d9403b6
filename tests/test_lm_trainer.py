"""LMTrainer and the per-character perplexity metric, on tiny in-memory stand-ins.

Run: ``python -m tests.test_lm_trainer`` (or pytest). The model, tokenizer and dataset here are
small stand-ins built in this file, so these tests exercise the trainer alone: a failure points at
hw4lib/trainers, not at the data or model code.
"""
import inspect
import json
import math

import pytest
import torch
from torch import nn
from torch.utils.data import DataLoader

from tests.failure_messages import in_case
from tests.testing_framework import rubric, run_module

RUBRIC = {"Perplexity metric": 0, "LMTrainer": 0}
# Graded only through the language model's perplexity (testing_framework.py).
THROUGH_LM = ("LMTrainer",)

# The letters A..E are ids 0..4 and the special ids are not 0, so code that takes 0 for the pad
# id ignores a real letter instead of the padding.
PAD, SOS, EOS = 5, 6, 7
VOCAB = 8


class StubTokenizer:
    """Ids 0..4 are the letters A..E; 5, 6, 7 are [PAD], [SOS], [EOS]."""

    pad_id, sos_id, eos_id, vocab_size = PAD, SOS, EOS, VOCAB

    def decode(self, ids, skip_special_tokens=False):
        return "".join("ABCDE"[i] if i < 5 else ("" if skip_special_tokens else f"<{i}>")
                       for i in ids)


class StubDataset:
    """An in-memory LMDataset: each transcript's characters are one token each (ids 0..4).

    Items come padded with PAD to the longest transcript, with their true length, so the default
    collate gives the batches LMDataset.collate_fn would give (padded a little wider).
    """

    def __init__(self, sequences, chars_per_token=1):
        self.golden = [list(s) + [EOS] for s in sequences]
        self.shifted = [[SOS] + list(s) for s in sequences]
        self.total_chars = sum(len(s) for s in sequences) * chars_per_token
        self.total_tokens = sum(len(g) for g in self.golden)
        self.width = max(len(g) for g in self.golden)

    def __len__(self):
        return len(self.golden)

    def __getitem__(self, index):
        padding = [PAD] * (self.width - len(self.golden[index]))
        return (torch.tensor(self.shifted[index] + padding),
                torch.tensor(self.golden[index] + padding), torch.tensor(len(self.golden[index])))

    def sample_prompts(self, num_samples, prompt_length, seed=None):
        chosen = list(range(num_samples))
        prompts = torch.tensor([self.shifted[i][: prompt_length + 1] for i in chosen])
        return prompts, [torch.tensor(self.golden[i]) for i in chosen]


class TableLM(nn.Module):
    """Next-token logits that depend only on the current token: a bigram table.

    With ``dropout`` the forward pass draws random numbers, so RNG handling matters; ``nan_after``
    makes the logits NaN from that many training forwards on (to test the NaN guard); a training
    forward is one in train mode that builds a graph, so a validation pass that forgets eval mode
    is left to the test that checks it, whose message says so.
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
        if self.training and torch.is_grad_enabled():
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


SEQUENCES = [[0, 1, 2, 3], [1, 2, 3, 4], [2, 3, 4, 0], [3, 4, 0, 1, 2], [4, 0, 1], [0, 2, 4, 1]]


# Every value differs from its default and from the other keys' values, and strategies are named
# apart from their method ("greedy" takes its method from its name, "cool" is a second greedy
# strategy), so code that reads one key for another, keeps a default, or keys the results by
# method instead of by name gives other results.
GENERATION = {"num_samples": 2, "prompt_length": 3, "max_length": 9,
              "greedy": {"temperature": 0.7, "repeat_penalty": 1.5},
              "cool": {"method": "greedy", "temperature": 0.4},
              "wide": {"method": "beam", "beam_width": 4, "temperature": 1.3, "repeat_penalty": 1.2},
              "draw": {"method": "sample", "top_k": 5, "top_p": 0.8, "temperature": 1.7, "seed": 6}}
PROMPT_LENGTH = GENERATION["prompt_length"]


def _config(tmp_path, scheduler=None, **training):
    from tests.tiny_config import tiny_config

    return tiny_config(tmp_path, {"gradient_accumulation_steps": 1, "grad_clip_norm": 1.0, **training},
                       scheduler=scheduler or {"name": "cosine", "interval": "step"},
                       generation=GENERATION)


def _trainer(tmp_path, model, run_name="run", lr=0.05, scheduler=None, **training):
    from hw4lib.trainers import LMTrainer

    trainer = LMTrainer(model, StubTokenizer(), _config(tmp_path, scheduler, **training), run_name,
                        None, device="cpu")
    trainer.optimizer = torch.optim.AdamW(trainer.model.parameters(), lr=lr)
    trainer.scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(trainer.optimizer, T_max=20)
    return trainer


def _loader(shuffle=True, batch_size=2, sequences=SEQUENCES, chars_per_token=1):
    dataset = StubDataset(sequences, chars_per_token)
    return DataLoader(dataset, batch_size=batch_size, shuffle=shuffle)


def _close(got, expected, what, rel=1e-6):
    assert got == pytest.approx(expected, rel=rel), f"{what}: expected {expected!r}, got {got!r}"


def _reference_metrics(model, loader):
    """Summed NLL of every non-pad target over ``loader``, computed here from the model's logits."""
    model.eval()
    nll, targets = 0.0, 0
    with torch.no_grad():
        for shifted, golden, lengths in loader:
            log_probs = model(shifted, lengths)[0].log_softmax(-1)
            for row, length in enumerate(lengths.tolist()):
                picked = log_probs[row, torch.arange(length), golden[row, :length]]
                nll -= float(picked.double().sum())
                targets += length
    return nll, targets


class SpyScaler:
    """Wraps the trainer's GradScaler and records every tensor passed to ``scale``."""

    def __init__(self, scaler):
        self.scaler, self.scaled = scaler, []

    def scale(self, value):
        self.scaled.append(value.detach().clone())
        return self.scaler.scale(value)

    def __getattr__(self, name):
        return getattr(self.scaler, name)


def _quiet(trainer):
    """Skip drawing the PNGs (matplotlib is most of a short run's time; test_train_validates...
    checks them)."""
    trainer._plot_curves = trainer._save_attention_plot = lambda *args: None
    return trainer


def _count_calls(scheduler):
    """Record the arguments of every ``scheduler.step(...)`` call from now on, in a list.

    The scheduler becomes an instance of a subclass whose ``step`` records, so it stays what it
    was for ``isinstance`` and its ``state_dict`` (checkpoints) is unchanged."""
    calls, kind = [], type(scheduler)

    def step(self, *args, **kwargs):
        calls.append(args)
        return kind.step(self, *args, **kwargs)

    scheduler.__class__ = type(f"Counted{kind.__name__}", (kind,), {"step": step})
    return calls


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
    _close(metrics["ce_loss_token"], nll / 5, "ce_loss_token = NLL / 5 targets")
    _close(metrics["ce_loss_char"], nll / 11, "ce_loss_char = NLL / 11 characters")
    _close(metrics["perplexity_token"], math.exp(nll / 5), "perplexity_token")
    _close(metrics["perplexity_char"], math.exp(nll / 11), "perplexity_char")
    counts = (metrics["num_tokens"], metrics["num_chars"])
    assert counts == (5, 11), f"(num_tokens, num_chars): expected (5, 11), got {counts}"


@rubric("Perplexity metric")
def test_evaluate_language_model_reads_dataset_chars_and_restores_mode():
    from hw4lib.trainers import evaluate_language_model

    # Uniform logits: every target costs ln(8); 2 chars per token in the stub's count.
    dataset = StubDataset(SEQUENCES, chars_per_token=2)
    loader = DataLoader(dataset, batch_size=4)
    model = TableLM()
    nn.init.zeros_(model.final_linear.weight)
    nn.init.zeros_(model.final_linear.bias)
    model.train()
    metrics = evaluate_language_model(model, loader, "cpu")
    assert model.training, "evaluate_language_model must restore the model's train mode; it was left in eval mode"
    targets = sum(len(s) + 1 for s in SEQUENCES)
    _close(metrics["ce_loss_token"], math.log(VOCAB), "uniform logits: ce_loss_token = ln(8)")
    _close(metrics["ce_loss_char"], targets * math.log(VOCAB) / dataset.total_chars,
           "uniform logits: ce_loss_char = targets * ln(8) / total_chars")
    with pytest.raises(ValueError, match="total_chars"):
        evaluate_language_model(model, [next(iter(loader))], "cpu")


@rubric("LMTrainer")
def test_criterion_ignores_padding_and_applies_label_smoothing(tmp_path):
    """Label smoothing 0.0 (the default) and 0.2, so a value typed into the code instead of the
    config's ``training.label_smoothing`` fails one of them."""
    logits = torch.randn(6, VOCAB, generator=torch.Generator().manual_seed(0))
    targets = torch.tensor([3, 0, PAD, 4, PAD, EOS])   # 0 is the letter A, a real target
    keep = targets != PAD
    log_probs = logits[keep].log_softmax(-1)
    for smoothing in (0.0, 0.2):
        trainer = _trainer(tmp_path, TableLM(), f"smoothing{smoothing}", label_smoothing=smoothing)
        expected = ((1 - smoothing) * -log_probs.gather(1, targets[keep, None]).squeeze(1)
                    - smoothing * log_probs.mean(-1)).mean()
        with in_case(f"training.label_smoothing={smoothing}", logits=logits, targets=targets):
            got = trainer.criterion(logits, targets).item()
        _close(got, expected.item(),
               f"criterion with training.label_smoothing={smoothing} from the config, over the "
               f"non-pad targets (pad id {PAD}), averaged", rel=1e-5)


@rubric("LMTrainer")
def test_one_training_step_matches_autograd_through_the_scaler(tmp_path):
    # One batch, plain SGD with lr 1: the update must be minus the gradient of the mean
    # label-smoothed cross-entropy over the non-pad targets of padded_golden, computed here, scaled
    # down to total norm training.grad_clip_norm when clipping is on and the gradient is longer.
    loader = _loader(shuffle=False, batch_size=len(SEQUENCES))
    shifted, golden, lengths = next(iter(loader))
    for smoothing, clip in ((0.1, 0.0), (0.0, 0.3)):
        torch.manual_seed(0)
        model = TableLM()
        reference = TableLM()
        reference.load_state_dict(model.state_dict())
        trainer = _trainer(tmp_path, model, f"step{smoothing}-{clip}", grad_clip_norm=clip,
                           label_smoothing=smoothing)
        trainer.optimizer = torch.optim.SGD(trainer.model.parameters(), lr=1.0)
        trainer.scheduler = None
        trainer.scaler = spy = SpyScaler(trainer.scaler)
        trainer._train_epoch(loader)

        logits, _ = reference(shifted, lengths)
        loss = nn.functional.cross_entropy(logits.reshape(-1, VOCAB), golden.reshape(-1),
                                           ignore_index=PAD, label_smoothing=smoothing)
        loss.backward()
        norm = math.sqrt(sum(float(p.grad.double().pow(2).sum()) for p in reference.parameters()))
        factor = 1.0
        if clip:
            assert norm > clip, f"the test's gradient (norm {norm:.3f}) must be longer than {clip}"
            factor = clip / (norm + 1e-6)
        setting = f"label_smoothing={smoothing}, grad_clip_norm={clip}"
        assert len(spy.scaled) == 1, (
            f"{setting}: backward must go through self.scaler.scale(loss / accumulation_steps) "
            f"once per batch: expected 1 call of scaler.scale for 1 batch, got {len(spy.scaled)}"
        )
        _close(spy.scaled[0].item(), loss.item(),
               f"{setting}: the loss passed to scaler.scale (accumulation 1)", rel=1e-5)
        for name, parameter in reference.named_parameters():
            expected = parameter.detach() - factor * parameter.grad
            got = trainer.model.state_dict()[name]
            assert torch.allclose(got, expected, atol=1e-6), (
                f"{setting}: {name} after one SGD step (lr 1) differs from the autograd update by "
                f"up to {(got - expected).abs().max().item():.3g}: the loss must be the mean "
                "cross-entropy of the logits against padded_golden, ignoring pad targets, with the "
                "config's label smoothing"
            )


@rubric("LMTrainer")
def test_train_validates_on_the_validation_loader_and_writes_run_folder(tmp_path):
    from hw4lib.trainers import evaluate_language_model
    from hw4lib.trainers.base_trainer import BEST_CHECKPOINT_NAME, LAST_CHECKPOINT_NAME

    torch.manual_seed(0)
    trainer = _trainer(tmp_path, TableLM(), samples_every=2)
    train_loader = _loader()
    val_loader = _loader(shuffle=False, sequences=SEQUENCES[::-1][:4], chars_per_token=3)
    start = evaluate_language_model(trainer.model, val_loader, "cpu")["ce_loss_token"]
    trainer.train(train_loader, val_loader, epochs=3)
    root = tmp_path / "expts" / "run"
    history = json.loads((root / "metrics" / "history.json").read_text())
    epochs = [record["epoch"] for record in history]
    assert epochs == [1, 2, 3], f"history.json: expected epochs [1, 2, 3], got {epochs}"
    nll, targets = _reference_metrics(trainer.model, val_loader)
    chars = val_loader.dataset.total_chars
    _close(history[-1]["val"]["ce_loss_char"], nll / chars,
           f"last epoch's validation ce_loss_char: the NLL of the validation loader / its {chars} "
           "characters (validate on val_loader, with evaluate_language_model)", rel=1e-5)
    _close(history[-1]["val"]["ce_loss_token"], nll / targets,
           "last epoch's validation ce_loss_token", rel=1e-5)
    assert history[-1]["val"]["ce_loss_token"] < start - 0.3, (
        f"three epochs of AdamW must lower the validation loss by 0.3: from {start:.3f} to "
        f"{history[-1]['val']['ce_loss_token']:.3f}"
    )
    for name in ("config.yaml", "model_arch.txt", "metrics/epoch_003.json", "metrics/loss.png",
                 "metrics/perplexity.png", "attn/train_last_layer_epoch003.png",
                 "text/val_greedy_epoch002.json", f"checkpoints/{BEST_CHECKPOINT_NAME}",
                 f"checkpoints/{LAST_CHECKPOINT_NAME}"):
        assert (root / name).is_file(), f"expected the run folder to hold {name}; it does not"
    samples = sorted(path.name for path in (root / "text").iterdir())
    assert samples == ["val_greedy_epoch002.json"], (
        f"training.samples_every=2 over 3 epochs: expected samples after epoch 2 only, got {samples}")
    assert not list(root.rglob("*.tmp")), "checkpoints are written through a temporary file"
    checkpoint = torch.load(root / "checkpoints" / LAST_CHECKPOINT_NAME, weights_only=False)
    for key in ("model_state_dict", "optimizer_state_dict", "scheduler_state_dict", "epoch", "step",
                "best_metric", "config", "rng_states"):
        assert key in checkpoint, f"the checkpoint must hold {key!r}; it has {sorted(checkpoint)}"
    counters = (checkpoint["epoch"], checkpoint["step"])
    assert counters == (3, 9), f"(epoch, step) after 3 epochs of 3 batches: expected (3, 9), got {counters}"
    _close(checkpoint["best_metric"], min(r["val"]["perplexity_char"] for r in history),
           "best_metric = the lowest validation perplexity_char")


class ModeRecordingLM(TableLM):
    """A TableLM that records ``(batch size, training?)`` for every forward pass."""

    def __init__(self, dropout):
        super().__init__(dropout=dropout)
        self.forwards = []

    def forward(self, tokens, lengths=None):
        self.forwards.append((tokens.size(0), self.training))
        return super().forward(tokens, lengths)


@rubric("LMTrainer")
def test_validation_and_evaluation_run_in_eval_mode(tmp_path):
    """With dropout 0.5, a validation or test pass in train mode gives noisy metrics, and a
    checkpoint chosen on them. Training batches hold 2 transcripts and validation and test batches
    3, so the recorded batch size says which pass each forward belongs to."""
    torch.manual_seed(0)
    model = ModeRecordingLM(dropout=0.5)
    trainer = _quiet(_trainer(tmp_path, model))
    val_loader = _loader(shuffle=False, batch_size=3, chars_per_token=2)
    trainer.train(_loader(batch_size=2), val_loader, epochs=1)
    validation = [training for size, training in model.forwards if size == 3]
    assert validation and not any(validation), (
        f"{sum(validation)} of the {len(validation)} validation forwards ran in train mode "
        f"(dropout on): your validation loop must call model.eval() (evaluate_language_model "
        f"does it for you)")
    training = [training for size, training in model.forwards if size == 2]
    assert training and all(training), "the training forwards must run in train mode"
    nll, _ = _reference_metrics(model, val_loader)
    _close(trainer.history[-1]["val"]["ce_loss_char"], nll / val_loader.dataset.total_chars,
           "validation ce_loss_char with dropout 0.5, which only eval mode gives", rel=1e-5)

    model.train()
    model.forwards.clear()
    test_loader = _loader(shuffle=False, batch_size=3, chars_per_token=3)
    metrics, _ = trainer.evaluate(test_loader)
    scored = [training for size, training in model.forwards]
    assert scored and not any(scored), (
        f"{sum(scored)} of the {len(scored)} forwards of evaluate() ran in train mode (dropout "
        f"on): evaluate must score the test loader in eval mode (model.eval(); "
        f"evaluate_language_model does it for you)")
    nll, _ = _reference_metrics(model, test_loader)
    _close(metrics["ce_loss_char"], nll / test_loader.dataset.total_chars,
           "test ce_loss_char with dropout 0.5, which only eval mode gives", rel=1e-5)


@rubric("LMTrainer")
def test_resume_continues_exactly_like_an_uninterrupted_run(tmp_path):
    from hw4lib.trainers.base_trainer import LAST_CHECKPOINT_NAME

    def fresh(run_name, seed, **training):
        torch.manual_seed(seed)
        return _trainer(tmp_path, TableLM(dropout=0.3), run_name, **training)

    straight = fresh("straight", 0)
    straight.train(_loader(), _loader(shuffle=False), epochs=2)

    first = fresh("interrupted", 0)
    first.train(_loader(), _loader(shuffle=False), epochs=1)
    torch.manual_seed(123)  # whatever happens between the runs must not matter
    last = tmp_path / "expts" / "interrupted" / "checkpoints" / LAST_CHECKPOINT_NAME
    resumed = fresh("interrupted", 99, resume_from=str(last))  # continues in the same run folder
    resumed.load_checkpoint(last)
    resumed.train(_loader(), _loader(shuffle=False), epochs=2)

    epochs = [r["epoch"] for r in resumed.history]
    assert epochs == [1, 2], f"the resumed history: expected epochs [1, 2], got {epochs}"
    for key in ("train", "val"):
        assert resumed.history[1][key] == straight.history[1][key], (
            f"epoch 2 {key} metrics: expected those of the uninterrupted run {straight.history[1][key]}, "
            f"got {resumed.history[1][key]}"
        )
    for name, value in straight.model.state_dict().items():
        assert torch.equal(value, resumed.model.state_dict()[name]), (
            f"{name} after resuming differs from the uninterrupted run"
        )


@rubric("LMTrainer")
def test_nan_loss_stops_training_and_keeps_last_good_checkpoint(tmp_path):
    from hw4lib.trainers import NonFiniteLossError
    from hw4lib.trainers.base_trainer import LAST_CHECKPOINT_NAME

    torch.manual_seed(0)
    trainer = _trainer(tmp_path, TableLM(nan_after=4))   # 3 batches per epoch: NaN in epoch 2
    with pytest.raises(NonFiniteLossError, match="epoch 2") as error:
        trainer.train(_loader(), _loader(shuffle=False), epochs=3)
    assert LAST_CHECKPOINT_NAME in str(error.value), (
        f"the error must name {LAST_CHECKPOINT_NAME}: {error.value}")
    checkpoint = torch.load(tmp_path / "expts" / "run" / "checkpoints" / LAST_CHECKPOINT_NAME,
                            weights_only=False)
    assert checkpoint["epoch"] == 1, f"the last good checkpoint is epoch 1's; got epoch {checkpoint['epoch']}"
    assert all(torch.isfinite(v).all() for v in checkpoint["model_state_dict"].values()), (
        "the kept checkpoint must hold finite weights"
    )


@rubric("LMTrainer")
def test_gradient_accumulation_matches_one_large_batch(tmp_path):
    equal_length = [[0, 1, 2], [1, 2, 3], [2, 3, 4], [3, 4, 0]]
    results, losses = [], []
    for run_name, batch_size, accumulation in (("big", 4, 1), ("accumulated", 1, 4)):
        torch.manual_seed(0)
        trainer = _trainer(tmp_path, TableLM(), run_name, gradient_accumulation_steps=accumulation,
                           grad_clip_norm=0.0)
        trainer.optimizer = torch.optim.SGD(trainer.model.parameters(), lr=0.5)
        trainer.scheduler = None
        metrics, _ = trainer._train_epoch(
            _loader(shuffle=False, batch_size=batch_size, sequences=equal_length))
        losses.append(metrics["ce_loss_token"])
        assert trainer.global_step == 1, (
            f"{accumulation} batches with gradient_accumulation_steps={accumulation}: expected 1 "
            f"optimizer step, got {trainer.global_step}"
        )
        results.append(trainer.model.state_dict())
    for name, value in results[0].items():
        assert torch.allclose(value, results[1][name], atol=1e-6), (
            f"{name}: 4 batches of 1 with gradient_accumulation_steps=4 must give the update of one "
            f"batch of 4 (backward of loss / accumulation_steps); they differ by up to "
            f"{(value - results[1][name]).abs().max().item():.3g}"
        )
    # Both runs score the same weights on the same tokens before their one update.
    _close(losses[1], losses[0], "the training ce_loss_token with gradient_accumulation_steps=4 "
           "(each batch's own loss: divide a copy for backward, never the loss logged)", rel=1e-5)


# (scheduler section, gradient_accumulation_steps, scheduler.step() calls in 2 epochs of 3 batches)
SCHEDULES = (
    ({"name": "cosine", "interval": "step"}, 2, 4),          # one per update: 2 updates an epoch
    ({"name": "cosine_warm", "interval": "epoch", "cosine_warm": {"T_0": 1}}, 3, 2),  # one per epoch
    ({"name": "reduce_lr"}, 1, 2),                           # per epoch, with the validation loss
)


@rubric("LMTrainer")
def test_the_scheduler_steps_as_often_as_its_config_says(tmp_path):
    """The trainer steps ``trainer.scheduler`` itself: after each optimizer update when
    ``scheduler.interval`` is ``step``, after each validation when it is ``epoch`` (``reduce_lr``
    always, with the validation ``ce_loss_char``). The scheduler is built from the trainer's own
    config, as ``hw4lib.train`` builds it; a second ``scheduler.step()`` in a student's loop moves
    the whole schedule (a cosine then ends near its peak)."""
    from hw4lib.utils import create_scheduler

    for section, accumulation, expected in SCHEDULES:
        torch.manual_seed(0)
        name = f"{section['name']}-{section.get('interval', 'epoch')}"
        trainer = _quiet(_trainer(tmp_path, TableLM(), name, scheduler=section,
                                  gradient_accumulation_steps=accumulation))
        train_loader = _loader(batch_size=2)                    # 3 batches an epoch
        trainer.scheduler = create_scheduler(trainer.optimizer, trainer.config.scheduler, train_loader,
                                             trainer.config.training.gradient_accumulation_steps)
        calls = _count_calls(trainer.scheduler)
        with in_case(f"scheduler {section}, gradient_accumulation_steps={accumulation}"):
            trainer.train(train_loader, _loader(shuffle=False), epochs=2)
        updates = 2 * math.ceil(3 / accumulation)
        assert trainer.global_step == updates, (
            f"gradient_accumulation_steps={accumulation}: 2 epochs of 3 batches make {updates} "
            f"optimizer updates, got {trainer.global_step}")
        assert len(calls) == expected, (
            f"scheduler {section} with gradient_accumulation_steps={accumulation}: expected "
            f"{expected} calls of scheduler.step() in 2 epochs of {updates // 2} optimizer updates, "
            f"got {len(calls)}. The trainer steps the scheduler itself (after each update for "
            f"interval 'step', after validation for interval 'epoch'): do not call "
            f"scheduler.step() in your code")
        if section["name"] == "reduce_lr":
            losses = [(record["val"]["ce_loss_char"],) for record in trainer.history]
            assert calls == losses, (
                f"reduce_lr must be stepped with each epoch's validation ce_loss_char {losses}, "
                f"got {calls}")


# What the recording generator below returns after the prompt: each continuation emits EOS and then
# more tokens, which the trainer must cut off. Beam search returns its beams best first.
CANNED = {"greedy": [0, 1, EOS, 2, 2], "sample": [3, EOS, 0, 0],
          "beam": [[2, 3, EOS, 4], [4, 4, 4, 4], [1, 1, 1, 1]]}
CANNED_SCORES = {"greedy": [-1.5, -2.5], "sample": [-0.5, -3.0],
                 "beam": [[-0.25, -0.5, -0.75], [-1.25, -1.5, -1.75]]}
EXPECTED_TEXT = {"greedy": "AB", "sample": "D", "beam": "CD"}


class RecordingGenerator:
    """Stands in for ``generator_for_model(...)``: records how each search is called and
    returns CANNED continuations of the prompts, so the test knows what the trainer must report."""

    def __init__(self, calls, model, tokenizer, max_length, device):
        self.calls = calls
        calls.append(("generator_for_model", {"model": model, "max_length": max_length,
                                    "device": torch.device(device)}))

    def _search(self, method, args, kwargs):
        """Record the search's arguments as the real method would bind them (defaults included,
        the sampler's generator as its seed and device); return its canned result."""
        from hw4lib.decoding import SequenceGenerator

        bound = inspect.signature(getattr(SequenceGenerator, f"generate_{method}")).bind(
            self, *args, **kwargs)
        bound.apply_defaults()
        arguments = dict(bound.arguments)
        del arguments["self"]
        x = arguments.pop("x")
        if method == "sample":
            draws = arguments.pop("generator")
            arguments["seed"] = draws.initial_seed() if hasattr(draws, "initial_seed") else draws
            arguments["generator_device"] = getattr(draws, "device", None)
        self.calls.append((method, arguments))
        continuation = torch.tensor(CANNED[method]).expand(x.size(0), *torch.tensor(CANNED[method]).shape)
        if continuation.dim() == 3:   # beams: (N, B, T) after (N, B, prompt)
            x = x.unsqueeze(1).expand(-1, continuation.size(1), -1)
        return torch.cat([x, continuation], dim=-1), torch.tensor(CANNED_SCORES[method])

    def generate_greedy(self, *args, **kwargs):
        return self._search("greedy", args, kwargs)

    def generate_beam(self, *args, **kwargs):
        return self._search("beam", args, kwargs)

    def generate_sample(self, *args, **kwargs):
        return self._search("sample", args, kwargs)


def _generate_recorded(trainer, loader, settings):
    """trainer.generate(loader, settings) with generator_for_model recording the calls."""
    from hw4lib.trainers import lm_trainer

    calls = []
    original = lm_trainer.generator_for_model
    lm_trainer.generator_for_model = lambda *args: RecordingGenerator(calls, *args)
    try:
        return trainer.generate(loader, settings), calls
    finally:
        lm_trainer.generator_for_model = original


@rubric("LMTrainer")
def test_generate_passes_every_setting_to_its_search_and_reports_the_cut_best_result(tmp_path):
    """Each strategy's settings reach the search unchanged (sampling: a torch.Generator on the
    trainer's device seeded with the config's seed); beam search keeps the best beam; each
    continuation is cut after its first EOS; the scores are the search's."""
    trainer = _trainer(tmp_path, TableLM())
    loader = _loader(shuffle=False)
    # (method, keyword arguments) each strategy's search must get, from GENERATION by hand.
    expected_calls = {
        "greedy": ("greedy", {"temperature": 0.7, "repeat_penalty": 1.5}),
        "cool": ("greedy", {"temperature": 0.4, "repeat_penalty": 1.0}),
        "wide": ("beam", {"beam_width": 4, "temperature": 1.3, "repeat_penalty": 1.2}),
        "draw": ("sample", {"temperature": 1.7, "top_k": 5, "top_p": 0.8, "seed": 6,
                            "generator_device": torch.device("cpu")}),
    }
    strategies = trainer.config.generation.strategies()
    assert set(strategies) == set(expected_calls), f"the test's strategies: {sorted(strategies)}"
    for name, settings in strategies.items():
        method, expected_kwargs = expected_calls[name]
        label = f"strategy {name!r} (method {method})"
        samples, calls = _generate_recorded(trainer, loader, settings)
        searches = [(called, kwargs) for called, kwargs in calls if called != "generator_for_model"]
        assert [called for called, _ in searches] == [method], (
            f"{label}: expected one call of generate_{method} (the settings' method), got "
            f"{[called for called, _ in searches]}")
        _, created = calls[0]
        assert created["model"] is trainer.model and created["max_length"] == 9, (
            f"{label}: build the generator with generator_for_model(model, tokenizer, "
            f"max_length=9 from the settings, device); got max_length={created['max_length']}")
        assert searches[0][1] == expected_kwargs, (
            f"{label}: the search must get exactly the settings {expected_kwargs} (as keyword "
            f"arguments; sampling: generator=torch.Generator(device=...).manual_seed(seed)), "
            f"got {searches[0][1]}")
        scores = CANNED_SCORES[method] if method != "beam" else [row[0] for row in CANNED_SCORES[method]]
        for index, (sample, sequence) in enumerate(zip(samples, SEQUENCES)):
            prompt = StubTokenizer().decode(sequence[:PROMPT_LENGTH])
            assert sample["prompt"] == prompt, (
                f"{label}: expected the prompt {prompt!r}, got {sample['prompt']!r}")
            assert sample["original"] == StubTokenizer().decode(sequence), (
                f"{label}: expected the original {StubTokenizer().decode(sequence)!r}, "
                f"got {sample['original']!r}")
            assert sample["generated"] == EXPECTED_TEXT[method], (
                f"{label}: the search continued the prompt with {CANNED[method]} (beam search: the "
                f"first, best beam); cut after the first EOS that is {EXPECTED_TEXT[method]!r}, got "
                f"{sample['generated']!r}")
            assert sample["score"] == pytest.approx(scores[index]), (
                f"{label}: expected the search's score {scores[index]} (beam search: the best "
                f"beam's), got {sample['score']}")


@rubric("LMTrainer")
def test_evaluate_scores_the_test_loader_and_generates_with_each_strategy(tmp_path):
    torch.manual_seed(0)
    model = TableLM()
    nn.init.normal_(model.final_linear.weight, std=0.3)   # distinct but spread next-token choices
    trainer = _trainer(tmp_path, model)
    loader = _loader(shuffle=False, chars_per_token=3)
    torch.manual_seed(1234)   # sampling must use its own seeded generator, not this global state
    metrics, generations = trainer.evaluate(loader)

    root = tmp_path / "expts" / "run"
    saved = json.loads((root / "test_metrics.json").read_text())
    assert saved == pytest.approx(metrics), f"test_metrics.json: expected {metrics}, got {saved}"
    nll, targets = _reference_metrics(model, loader)
    chars = loader.dataset.total_chars
    _close(metrics["ce_loss_char"], nll / chars,
           f"test ce_loss_char = NLL of the test loader / its {chars} characters", rel=1e-5)
    _close(metrics["ce_loss_token"], nll / targets, "test ce_loss_token", rel=1e-5)

    names = sorted(trainer.config.generation.strategies())
    assert sorted(generations) == names, (
        f"expected one result per configured strategy, keyed by the strategy's name (not its "
        f"method) {names}, got {sorted(generations)}"
    )
    torch.manual_seed(99)
    again = trainer.generate(loader, trainer.config.generation.strategies()["draw"])
    assert again == generations["draw"], (
        "sampling must draw from a torch.Generator seeded with the config's seed, so that the global "
        f"RNG state does not matter: after torch.manual_seed(1234) got {generations['draw']}, after "
        f"torch.manual_seed(99) got {again}"
    )
    saved = json.loads((root / "test_generated_results.json").read_text())
    assert saved == generations, "test_generated_results.json must hold the returned generations"
    for name, settings in trainer.config.generation.strategies().items():
        assert generations[name] == trainer.generate(loader, settings), (
            f"evaluate's {name!r} generations must be generate(test_loader, settings) with that "
            f"strategy's settings from config.generation.strategies()")


@rubric("LMTrainer")
def test_evaluation_and_generation_use_the_trainers_device(tmp_path, monkeypatch):
    """Without a GPU, a torch.Generator() or a literal "cpu" works and then fails on a GPU. Here the
    trainer's device is "meta" (every machine has it): the metric, the generator and the sampler's
    torch.Generator must all get that device."""
    from hw4lib.trainers import lm_trainer

    trainer = _trainer(tmp_path, TableLM())
    trainer.device = torch.device("meta")
    devices, real_generator = {}, torch.Generator

    def recording_generator(*args, **kwargs):
        device = kwargs.get("device", args[0] if args else None)
        devices["torch.Generator"] = None if device is None else torch.device(device)
        return real_generator()

    def recording_metric(model, loader, device):
        devices["evaluate_language_model"] = torch.device(device)
        return {"ce_loss_token": 1.0, "ce_loss_char": 0.5, "perplexity_token": 2.7,
                "perplexity_char": 1.6}

    monkeypatch.setattr(torch, "Generator", recording_generator)
    monkeypatch.setattr(lm_trainer, "evaluate_language_model", recording_metric)
    calls = []
    monkeypatch.setattr(lm_trainer, "generator_for_model",
                        lambda *args: RecordingGenerator(calls, *args))
    trainer.evaluate(_loader(shuffle=False))
    devices["generator_for_model"] = next(kwargs["device"] for method, kwargs in calls
                                          if method == "generator_for_model")
    expected = dict.fromkeys(("evaluate_language_model", "generator_for_model",
                              "torch.Generator"), torch.device("meta"))
    assert devices == expected, (
        f"with the trainer on {trainer.device}, expected the devices {expected}, got {devices}: "
        f"pass self.device (torch.Generator(device=self.device) for sampling)")


if __name__ == "__main__":
    run_module(__name__)
