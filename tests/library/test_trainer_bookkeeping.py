# hw4p1: instructor-only
"""LMTrainer's bookkeeping around the student's steps (hw4lib/trainers/lm_trainer.py outside its
solution regions), each number read by value against a count or a sum worked out here.

The training pass: its losses summed per target and read every 16 batches (the finite check names
the batches of each window); the optimizer stepped at the end of each accumulation window and after
the last batch, the gradients clipped only when ``grad_clip_norm`` is positive, a per-step scheduler
stepped with it. The loop: the epochs it runs (a resumed run continues), the best checkpoint only
on a strictly lower validation perplexity, samples every ``samples_every`` epochs.
"""
import contextlib
import io
import math
from types import SimpleNamespace

import pytest
import torch
from torch.utils.data import DataLoader

from hw4lib.trainers import lm_trainer
from hw4lib.trainers._checks import NonFiniteLossError
from tests.library.small_trainer import TRAIN_TEXTS, small_trainer


class ScriptedBatches:
    """A loader of ``len(tokens)`` batches, batch i of one row with ``tokens[i]`` targets; its
    dataset has ``total_chars`` characters."""

    def __init__(self, tokens: list[int], total_chars: int):
        self.tokens = tokens
        self.dataset = SimpleNamespace(total_chars=total_chars)

    def __len__(self):
        return len(self.tokens)

    def __iter__(self):
        for count in self.tokens:
            yield torch.zeros(1, count, dtype=torch.long), torch.zeros(1, count, dtype=torch.long), \
                torch.tensor([count])


def scripted_steps(trainer, losses: list[float], last_attention: dict):
    """Make ``trainer._train_step`` return ``losses[i]`` for batch i; its attention dict holds None
    per layer (the fused path) but for the last batch, where it is ``last_attention``."""
    def step(padded_shifted, padded_golden, lengths, batch_index, batches):
        last = batch_index + 1 == batches
        return torch.tensor(losses[batch_index]), (last_attention if last else dict.fromkeys(last_attention))
    trainer._train_step = step


def test_the_training_loss_is_each_batchs_loss_weighted_by_its_targets(tmp_path):
    trainer, _ = small_trainer(tmp_path, TRAIN_TEXTS)
    tokens = [1, 2, 3, 4, 5]
    losses = [0.5, 1.0, 1.5, 2.0, 2.5]
    layers = {"layer1": torch.rand(2, 6, 6), "layer2": torch.rand(2, 6, 6)}
    scripted_steps(trainer, losses, layers)
    metrics, attn = trainer._train_epoch(ScriptedBatches(tokens, total_chars=40))
    nll = sum(loss * count for loss, count in zip(losses, tokens))          # 27.5 nats
    assert metrics["ce_loss_token"] == pytest.approx(nll / 15, rel=1e-12)
    assert metrics["ce_loss_char"] == pytest.approx(nll / 40, rel=1e-12)
    assert (metrics["num_tokens"], metrics["num_chars"]) == (15, 40)
    # The last batch has one row of 5 targets: the last layer's map of row 0, 5 x 5.
    assert torch.equal(attn, layers["layer2"][0, :5, :5])


def test_the_attention_map_is_cropped_to_the_first_rows_length(tmp_path):
    trainer, _ = small_trainer(tmp_path, TRAIN_TEXTS)
    layers = {"layer1": torch.rand(2, 6, 6), "layer2": torch.rand(2, 6, 6)}
    scripted_steps(trainer, [1.0], layers)

    class TwoRows(ScriptedBatches):
        def __iter__(self):
            yield torch.zeros(2, 6, dtype=torch.long), torch.zeros(2, 6, dtype=torch.long), torch.tensor([4, 3])

    _, attn = trainer._train_epoch(TwoRows([7], total_chars=9))
    assert torch.equal(attn, layers["layer2"][0, :4, :4])


@pytest.mark.parametrize("bad_batch, batches, window", [
    (0, 20, "0-15"), (15, 20, "0-15"), (16, 20, "16-19"), (19, 20, "16-19"), (16, 40, "16-31"),
    (3, 5, "0-4")])
def test_the_loss_is_checked_every_16_batches_and_at_the_end(tmp_path, bad_batch, batches, window):
    trainer, _ = small_trainer(tmp_path, TRAIN_TEXTS)
    losses = [1.0] * batches
    losses[bad_batch] = math.nan
    scripted_steps(trainer, losses, {"layer1": torch.rand(1, 2, 2)})
    with pytest.raises(NonFiniteLossError, match=f"in epoch 1, training batches {window};"):
        trainer._train_epoch(ScriptedBatches([2] * batches, total_chars=100))


def one_transcript_per_batch(tmp_path, **training):
    """A small trainer (SGD at ``lr``, no momentum) and a loader of its 6 training transcripts,
    one per batch."""
    trainer, (train_loader, _) = small_trainer(tmp_path, TRAIN_TEXTS, **training)
    dataset = train_loader.dataset
    return trainer, DataLoader(dataset, batch_size=1, collate_fn=dataset.collate_fn)


@pytest.mark.parametrize("accumulation, updates", [(1, 6), (2, 3), (4, 2), (5, 2), (6, 1), (7, 1)])
def test_one_update_per_accumulation_window_and_one_after_the_last_batch(tmp_path, accumulation,
                                                                         updates):
    trainer, loader = one_transcript_per_batch(tmp_path, gradient_accumulation_steps=accumulation)
    stepped = []
    trainer.scheduler = SimpleNamespace(step=lambda: stepped.append(trainer.global_step))
    trainer._train_epoch(loader)
    assert trainer.global_step == updates
    assert stepped == list(range(1, updates + 1)), "a per-step schedule steps after each update"
    assert all(p.grad is None for p in trainer.model.parameters()), \
        "the gradients are set to None after each update, not kept as zeros"


def test_a_per_epoch_schedule_is_not_stepped_by_the_training_pass(tmp_path):
    trainer, loader = one_transcript_per_batch(tmp_path)
    stepped = []
    trainer.scheduler = SimpleNamespace(step=lambda: stepped.append(1))
    trainer._scheduler_interval = lambda: "epoch"
    trainer._train_epoch(loader)
    assert trainer.global_step == 6 and stepped == []


def update_norm(tmp_path, clip: float) -> tuple[float, float]:
    """(the norm of one SGD update at lr 1 over all 6 transcripts, the gradient's norm)."""
    trainer, (train_loader, _) = small_trainer(tmp_path / str(clip), TRAIN_TEXTS, grad_clip_norm=clip)
    dataset = train_loader.dataset
    loader = DataLoader(dataset, batch_size=len(dataset), collate_fn=dataset.collate_fn)
    params = list(trainer.model.parameters())
    before = [p.detach().clone() for p in params]
    gradients = []
    trainer.optimizer = torch.optim.SGD(params, lr=1.0)
    step = trainer.optimizer.step
    trainer.optimizer.step = lambda *a, **k: gradients.append(
        torch.cat([p.grad.flatten() for p in params]).norm().item()) or step(*a, **k)
    trainer._train_epoch(loader)
    moved = torch.cat([(p.detach() - b).flatten() for p, b in zip(params, before)]).norm().item()
    return moved, gradients[0]


def test_gradients_are_clipped_only_for_a_positive_grad_clip_norm(tmp_path):
    moved, gradient = update_norm(tmp_path, 0.0)
    assert gradient > 0.6, f"the test needs a gradient longer than the clip norms below ({gradient})"
    assert moved == pytest.approx(gradient, rel=1e-4), "grad_clip_norm 0 must not clip"
    for clip in (0.5, 1e-3):
        moved, gradient = update_norm(tmp_path, clip)
        assert moved == pytest.approx(clip, rel=1e-3), f"grad_clip_norm {clip}: update of norm {moved}"
        assert gradient == pytest.approx(clip, rel=1e-3), "clipped before the optimizer's step"


def scripted_loop(tmp_path, perplexities: list[float], **training):
    """A small trainer whose epochs are scripted: validation perplexities in turn, a 3 x 3 map;
    the checkpoints, samples and maps it would write are recorded as (epoch, what) instead."""
    trainer, loaders = small_trainer(tmp_path, TRAIN_TEXTS, **training)
    params = list(trainer.model.parameters())
    trainer.optimizer = torch.optim.SGD([{"params": params[:1], "lr": 0.25},
                                         {"params": params[1:], "lr": 0.5}])
    upcoming = iter(perplexities)
    trainer._train_epoch = lambda loader: ({"ce_loss_char": 1.0}, torch.rand(3, 3))

    def validate(loader):
        perplexity = next(upcoming)
        return {"ce_loss_char": math.log(perplexity), "perplexity_char": perplexity,
                "perplexity_token": perplexity}

    trainer._validate_epoch = validate
    done = []
    trainer.save_checkpoint = lambda name: done.append((trainer.current_epoch, name.split("-")[1]))
    trainer.generate = lambda loader, settings: done.append((trainer.current_epoch, "samples")) or []
    trainer._save_attention_plot = lambda attn, epoch, name: done.append((epoch, "map"))
    return trainer, loaders, done


def test_the_loop_keeps_a_strictly_better_checkpoint_and_samples_every_second_epoch(tmp_path):
    trainer, loaders, done = scripted_loop(tmp_path, [5.0, 5.0, 4.0, 6.0, 3.0], samples_every=2)
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        trainer.train(*loaders, epochs=4)
    assert done == [(1, "map"), (1, "best"), (1, "last"), (2, "map"), (2, "samples"), (2, "last"),
                    (3, "map"), (3, "best"), (3, "last"), (4, "map"), (4, "samples"), (4, "last")]
    assert trainer.best_metric == 4.0 and trainer.current_epoch == 4
    assert [record["lr"] for record in trainer.history] == [0.25] * 4, "param group 0's rate"
    assert all(0 <= record["epoch_seconds"] < 60 for record in trainer.history)
    assert "val ppl/char 6.0000  val ppl/token 6.00  lr 2.50e-01" in printed.getvalue()
    done.clear()
    with contextlib.redirect_stdout(io.StringIO()):
        trainer.train(*loaders, epochs=5)  # a resumed run: only the epoch still missing
    assert done == [(5, "map"), (5, "best"), (5, "last")]


def test_without_samples_every_no_samples_are_drawn(tmp_path):
    trainer, loaders, done = scripted_loop(tmp_path, [5.0, 4.0], samples_every=0)
    with contextlib.redirect_stdout(io.StringIO()):
        trainer.train(*loaders, epochs=2)
    assert [what for _, what in done] == ["map", "best", "last", "map", "best", "last"]


@pytest.mark.parametrize("shown", [True, False])
def test_the_progress_bar_is_shown_only_when_asked_and_leaves_no_line(tmp_path, shown):
    trainer, (train_loader, _) = small_trainer(tmp_path, TRAIN_TEXTS, progress_bar=shown)
    trainer.current_epoch = 2
    written = io.StringIO()
    with contextlib.redirect_stderr(written):
        trainer._train_epoch(train_loader)
    assert ("[epoch 3] train" in written.getvalue()) is shown, written.getvalue()
    assert not written.getvalue().endswith("\n"), "the bar of a finished epoch is cleared"


def test_the_progress_bar_shows_the_running_loss_of_each_window(tmp_path, monkeypatch):
    """Every 16 batches and at the end: the loss per target so far, its exponential, group 0's rate."""
    shown = []

    class RecordedBar(lm_trainer.tqdm):
        def set_postfix(self, refresh=True, **values):
            shown.append(values)

    monkeypatch.setattr(lm_trainer, "tqdm", RecordedBar)
    trainer, _ = small_trainer(tmp_path, TRAIN_TEXTS)
    params = list(trainer.model.parameters())
    trainer.optimizer = torch.optim.SGD([{"params": params[:1], "lr": 0.25},
                                         {"params": params[1:], "lr": 0.5}])
    scripted_steps(trainer, [1.0] * 16 + [3.0] * 4, {"layer1": torch.rand(1, 2, 2)})
    trainer._train_epoch(ScriptedBatches([1] * 16 + [4] * 4, total_chars=100))
    # 16 targets at 1.0, then 16 more at 3.0: 1.0 after the first window, 2.0 at the end.
    assert shown == [{"loss": "1.000", "ppl_tok": "2.72", "lr": "2.50e-01"},
                     {"loss": "2.000", "ppl_tok": "7.39", "lr": "2.50e-01"}]
