"""The training metrics the trainer logs, read by value against an independent evaluation.

With a learning rate of 0 the weights never move, so the training pass's summed loss must equal
the evaluation of the same model on the training loader, whatever the accumulation window.
"""
import contextlib
import io
import math

import pytest
import torch

from hw4lib.trainers.metrics import (evaluate_language_model, evaluation_batch_size,
                                     language_model_metrics, safe_exp, transcript_losses)
from tests.library.small_trainer import TRAIN_TEXTS, small_trainer


@pytest.mark.parametrize("accumulation", [1, 2, 3])
def test_training_metrics_equal_an_evaluation_of_the_unchanged_model(tmp_path, accumulation):
    trainer, (train_loader, _) = small_trainer(tmp_path, TRAIN_TEXTS,
                                          gradient_accumulation_steps=accumulation)
    trainer.optimizer = torch.optim.SGD(trainer.model.parameters(), lr=0.0)
    truth = evaluate_language_model(trainer.model, train_loader, "cpu")
    metrics, _ = trainer._train_epoch(train_loader)
    for key in ("ce_loss_token", "ce_loss_char"):
        assert metrics[key] == pytest.approx(truth[key], rel=1e-5), (
            f"with gradient_accumulation_steps={accumulation} the training {key} is {metrics[key]:.5f}, "
            f"but the unchanged model scores {truth[key]:.5f} on the same batches: the logged loss "
            "must be each batch's own loss, not the loss scaled for the backward")
    assert (metrics["num_tokens"], metrics["num_chars"]) == (truth["num_tokens"], truth["num_chars"])


def test_a_nan_training_loss_is_stopped_by_the_training_pass_itself(tmp_path):
    """The training pass names its own batches; validation (which would also see NaN weights) is
    never reached."""
    from hw4lib.trainers._checks import NonFiniteLossError

    trainer, loaders = small_trainer(tmp_path, TRAIN_TEXTS)
    criterion = trainer.criterion
    trainer.criterion = lambda logits, golden: criterion(logits, golden) * float("nan")
    validated = []
    trainer._validate_epoch = lambda loader: validated.append(loader) or {"ce_loss_char": 1.0}
    with contextlib.redirect_stdout(io.StringIO()), pytest.raises(NonFiniteLossError) as raised:
        trainer.train(*loaders, epochs=1)
    assert "training batches" in str(raised.value), str(raised.value)
    assert not validated, "validation ran although the training pass's loss was NaN"


# ---------------------------------------------------------------- the metric's numbers, by hand

def test_evaluation_batches_fit_the_activation_budget_of_2_to_the_26():
    """Values worked out by hand from a budget of 2**26 elements and at most 32 transcripts."""
    cases = [((2048, 1, 1), 16),           # the attention weights bind: 2**26 / (2048 * 2048)
             ((2048, 4, 1), 4),            # four heads: a quarter of that
             ((64, 1, 2**16), 16),         # the widest per-position tensor binds
             ((64, 1, 2**16 + 1), 15),     # ... and is rounded down
             ((1000, 1, 10**5), 1),        # nothing fits: still one transcript
             ((16, 1, 16), 32),            # room for far more: the cap of 32
             ((1, 1, 2**26 // 33), 32),    # room for exactly 33
             ((1, 1, 2**26 // 31), 31),    # room for exactly 31
             ((1, 1, 2**26 // 2), 2)]      # room for exactly 2
    for (longest, heads, width), expected in cases:
        assert evaluation_batch_size(longest, heads, width) == expected, (longest, heads, width)


def test_the_four_metrics_of_a_summed_nll_by_value():
    metrics = language_model_metrics(6.0, 3, 4)
    assert metrics == {"ce_loss_token": 2.0, "ce_loss_char": 1.5, "perplexity_token": math.exp(2.0),
                       "perplexity_char": math.exp(1.5), "num_tokens": 3, "num_chars": 4}
    assert language_model_metrics(0.5, 1, 1)["perplexity_char"] == math.exp(0.5)
    for tokens, chars in ((0, 4), (3, 0), (-1, 4), (3, -1)):
        with pytest.raises(ValueError, match=f"cannot average over {tokens} targets and {chars} characters"):
            language_model_metrics(6.0, tokens, chars)


def test_a_diverged_loss_has_an_infinite_perplexity_from_700_nats_on():
    assert safe_exp(699.5) == math.exp(699.5) < math.inf
    assert safe_exp(700.0) == safe_exp(1e6) == math.inf


K, PEAK = 5, 2.0  # the toy model's vocabulary and the logit it gives its input token


class EchoModel(torch.nn.Module):
    """Logits PEAK for the input token, 0 elsewhere (K classes); in train mode a bias of 100 on
    class 0 that an evaluation must not see. Returns (logits (N, T, K), {}) as the LM does.
    ``grad_enabled``: whether autograd recorded each forward (an evaluation keeps no graph)."""

    def __init__(self):
        super().__init__()
        self.grad_enabled = []

    def forward(self, padded_shifted, lengths):
        self.grad_enabled.append(torch.is_grad_enabled())
        logits = torch.nn.functional.one_hot(padded_shifted, K).float() * PEAK
        if self.training:
            logits[..., 0] += 100.0
        return logits, {}


def echo_nll(shifted: list[int], golden: list[int]) -> float:
    """The EchoModel's summed NLL (eval mode) of one transcript, by the softmax's formula."""
    log_z = math.log(math.exp(PEAK) + K - 1)
    return sum(log_z - (PEAK if s == g else 0.0) for s, g in zip(shifted, golden))


# Three transcripts: (shifted, golden) of 3, 1 and 2 targets (padded with 4 in shifted, 1 in golden).
TRANSCRIPTS = [([3, 1, 2], [1, 2, 2]), ([3], [0]), ([3, 4], [4, 0])]


class EchoDataset:
    """The members of an LMDataset that transcript_losses and evaluate_language_model read."""

    total_chars = 7
    transcripts_golden = [golden for _, golden in TRANSCRIPTS]

    def __len__(self):
        return len(TRANSCRIPTS)

    def __getitem__(self, index):
        shifted, golden = TRANSCRIPTS[index]
        return torch.tensor(shifted), torch.tensor(golden)

    def collate_fn(self, batch):
        longest = max(len(shifted) for shifted, _ in batch)
        shifted = torch.stack([torch.cat([s, torch.full((longest - len(s),), 4)]) for s, _ in batch])
        golden = torch.stack([torch.cat([g, torch.full((longest - len(g),), 1)]) for _, g in batch])
        return shifted, golden, torch.tensor([len(s) for s, _ in batch])


@pytest.mark.parametrize("training", [True, False])
def test_the_evaluation_of_a_hand_computed_model(training):
    dataset = EchoDataset()
    loader = torch.utils.data.DataLoader(dataset, batch_size=2, collate_fn=dataset.collate_fn)
    model = EchoModel().train(training)
    nll = sum(echo_nll(*transcript) for transcript in TRANSCRIPTS)
    metrics = evaluate_language_model(model, loader, "cpu")
    assert model.training is training, "the model's mode was not restored"
    assert model.grad_enabled == [False, False], "the evaluation recorded an autograd graph"
    assert metrics["num_tokens"] == 6 and metrics["num_chars"] == 7
    assert metrics["ce_loss_token"] == pytest.approx(nll / 6, rel=1e-6)
    assert metrics["ce_loss_char"] == pytest.approx(nll / 7, rel=1e-6)
    assert evaluate_language_model(model, list(loader), "cpu", total_chars=12)["ce_loss_char"] == \
        pytest.approx(nll / 12, rel=1e-6)
    with pytest.raises(ValueError, match="pass total_chars, or a loader whose dataset has a total_chars"):
        evaluate_language_model(model, list(loader), "cpu")


@pytest.mark.parametrize("batch_size", [1, 2, 3])
def test_transcript_losses_are_each_transcripts_own_sum_in_the_order_asked(batch_size):
    model = EchoModel().train()
    indices = [2, 0, 1]
    losses = transcript_losses(model, EchoDataset(), indices, batch_size, "cpu")
    expected = [echo_nll(*TRANSCRIPTS[index]) for index in indices]
    assert losses == pytest.approx(expected, rel=1e-6), (batch_size, losses, expected)
    assert model.training, "the model's mode was not restored"
    assert not any(model.grad_enabled), "transcript_losses recorded an autograd graph"
