# hw4p1: instructor-only
"""The run folder's bookkeeping (hw4lib/trainers/base_trainer.py), each value read back: the
parameter counts of model_arch.txt worked out by hand, the files and folders of a new run, the
curves' and the attention map's figures (lines, sizes), the schedule stepped per epoch, the
checkpoint's optional states, the abstract methods a trainer must provide, and when the forward
runs in autocast or without attention weights.
"""
import contextlib
import io
import re
import struct
import warnings
from types import SimpleNamespace

import pytest
import torch
import yaml
from torch import nn

from hw4lib.file_io import read_json
from hw4lib.handin_format import GENERATIONS_FILE, METRICS_FILE
from hw4lib.trainers import base_trainer
from hw4lib.trainers.base_trainer import BaseTrainer, describe_model
from tests.library.small_trainer import TRAIN_TEXTS, small_trainer


class TiedAndFrozen(nn.Module):
    """An embedding (10 x 4 = 40), an output layer tied to it (+10 bias), a frozen layer (2 x 3 + 3 = 9)."""

    def __init__(self):
        super().__init__()
        self.embedding = nn.Embedding(10, 4)
        self.output = nn.Linear(4, 10)
        self.output.weight = self.embedding.weight
        self.frozen = nn.Linear(2, 3).requires_grad_(False)


def test_model_arch_counts_tied_weights_once_and_frozen_ones_as_untrainable():
    text = describe_model(TiedAndFrozen())
    counts = text.split("Parameters per top-level module (tied weights counted once):\n")[1]
    assert counts == ("  embedding                          40\n"
                      "  output                             10\n"
                      "  frozen                              9\n"
                      "  total                              59\n"
                      "  trainable                          50\n")
    assert text.startswith(str(TiedAndFrozen()) + "\n\n")


def test_a_new_run_folder_holds_its_config_and_architecture(tmp_path):
    with contextlib.redirect_stdout(io.StringIO()):
        trainer, _ = small_trainer(tmp_path, TRAIN_TEXTS, run_name="first")
    root = tmp_path / "expts" / "first"
    assert trainer.expt_root == root and trainer.checkpoint_dir == root / "checkpoints"
    for folder in ("checkpoints", "metrics", "attn", "text"):
        assert (root / folder).is_dir(), folder
    saved = yaml.safe_load((root / "config.yaml").read_text())
    assert list(saved) == list(trainer.config.dump()), "the config's own section order"
    assert saved == trainer.config.dump()
    assert (root / "model_arch.txt").read_text() == describe_model(trainer.model)
    assert (trainer.current_epoch, trainer.global_step, trainer.config_file) == (0, 0, None)
    assert not trainer.scaler.is_enabled(), "fp32 needs no gradient scaler"


def test_the_config_file_is_recorded_as_text(tmp_path):
    trainer, _ = small_trainer(tmp_path, TRAIN_TEXTS)
    again = type(trainer)(trainer.model, trainer.tokenizer, trainer.config, "second",
                          tmp_path / "tiny.yaml", device="cpu")
    assert again.config_file == str(tmp_path / "tiny.yaml")


@pytest.mark.parametrize("missing", ["train", "evaluate", "generate"])
def test_a_trainer_must_provide_train_evaluate_and_generate(missing):
    methods = {name: lambda self, *args: None for name in ("train", "evaluate", "generate")
               if name != missing}
    Partial = type("Partial", (BaseTrainer,), methods)
    with pytest.raises(TypeError, match=missing):
        Partial(None, None, {}, "run", None)


def test_autocast_and_attention_weights_follow_the_precision(tmp_path):
    trainer, _ = small_trainer(tmp_path, TRAIN_TEXTS)
    attention = [m for m in trainer.model.modules() if isinstance(m, nn.MultiheadAttention)]

    def weights_off(needed: bool) -> bool:
        with trainer._attention_weights(needed):
            hooked = [bool(m._forward_pre_hooks) for m in attention]
        assert len(set(hooked)) == 1
        return hooked[0]

    with trainer._autocast():
        assert not torch.is_autocast_enabled("cpu"), "fp32 runs without autocast"
    assert (weights_off(False), weights_off(True)) == (True, False)
    trainer.precision = torch.bfloat16
    with trainer._autocast():
        assert torch.is_autocast_enabled("cpu") and torch.get_autocast_dtype("cpu") == torch.bfloat16
    assert (weights_off(False), weights_off(True)) == (False, False), "bf16 on a CPU: the plain path"


def test_the_epoch_schedule_steps_per_epoch_only(tmp_path):
    trainer, _ = small_trainer(tmp_path, TRAIN_TEXTS)
    calls = []
    trainer.scheduler = SimpleNamespace(step=lambda *args: calls.append(args))
    trainer._scheduler_interval = lambda: "step"
    trainer._epoch_scheduler_step(0.5)
    assert calls == []
    trainer._scheduler_interval = lambda: "epoch"
    trainer._epoch_scheduler_step(0.5)
    assert calls == [()]
    trainer.scheduler = torch.optim.lr_scheduler.ReduceLROnPlateau(trainer.optimizer, patience=0)
    trainer._epoch_scheduler_step(0.5)
    trainer._epoch_scheduler_step(0.7)  # worse: the rate drops by the default factor 0.1
    assert trainer.optimizer.param_groups[0]["lr"] == pytest.approx(1e-4)
    trainer.scheduler = None
    trainer._epoch_scheduler_step(0.5)


def png_size(path) -> tuple[int, int]:
    """(width, height) in pixels from a PNG's header."""
    return struct.unpack(">II", path.read_bytes()[16:24])


@pytest.fixture
def closed_figures(monkeypatch):
    """The figures pyplot closes, kept for reading."""
    plt = base_trainer.pyplot()
    figures = []
    monkeypatch.setattr(plt, "close", figures.append)
    return figures


def test_the_curves_plot_each_split_that_has_every_epoch(tmp_path, closed_figures):
    trainer, _ = small_trainer(tmp_path, TRAIN_TEXTS)
    trainer.history = [{"epoch": 1, "train": {"ce_loss_char": 2.0, "perplexity_char": 7.0},
                        "val": {"ce_loss_char": 2.5}},
                       {"epoch": 2, "train": {"ce_loss_char": 1.5, "perplexity_char": 4.5},
                        "val": {"ce_loss_char": 2.25}}]
    BaseTrainer._plot_curves(trainer)
    loss, perplexity = closed_figures
    assert [(line.get_label(), list(line.get_ydata())) for line in loss.axes[0].get_lines()] == \
        [("train", [2.0, 1.5]), ("val", [2.5, 2.25])]
    assert [(line.get_label(), list(line.get_ydata())) for line in perplexity.axes[0].get_lines()] == \
        [("train", [7.0, 4.5])], "val has no perplexity: not drawn"
    for name in ("loss", "perplexity"):
        assert png_size(trainer.metrics_dir / f"{name}.png") == (600, 400), name


def test_the_attention_map_is_a_500_pixel_square_of_a_2d_map(tmp_path, closed_figures):
    trainer, _ = small_trainer(tmp_path, TRAIN_TEXTS)
    attn = torch.rand(3, 3)
    path = BaseTrainer._save_attention_plot(trainer, attn, 7, "layer")
    assert path == trainer.attn_dir / "layer_epoch007.png" and png_size(path) == (500, 500)
    assert (closed_figures[0].axes[0].images[0].get_array() == attn.numpy()).all()
    for shape in ((3,), (1, 3, 3)):
        with pytest.raises(ValueError, match=re.escape(f"expected a (T, T) attention map, got shape {shape}")):
            BaseTrainer._save_attention_plot(trainer, torch.rand(shape), 7, "layer")


def test_a_checkpoint_without_an_optimizer_and_scheduler(tmp_path):
    trainer, _ = small_trainer(tmp_path, TRAIN_TEXTS)
    trainer.optimizer = None
    best = trainer.save_checkpoint("best.pth")
    assert trainer.saved_epoch is None, "only the last-epoch checkpoint counts as saved"
    state = torch.load(best, weights_only=False)
    assert (state["optimizer_state_dict"], state["scheduler_state_dict"]) == (None, None)
    trainer.current_epoch = 3
    trainer.save_checkpoint(base_trainer.LAST_CHECKPOINT_NAME)
    assert trainer.saved_epoch == 3
    trainer.load_checkpoint(best)  # nothing to restore them into: fine
    trainer.optimizer = torch.optim.SGD(trainer.model.parameters(), lr=0.1)
    with pytest.raises(ValueError, match="has no optimizer state but this trainer has a optimizer"):
        trainer.load_checkpoint(best)
    with pytest.raises(FileNotFoundError, match="does not exist"):
        trainer.load_checkpoint(tmp_path / "none.pth")


def test_loading_restores_the_random_state_unless_asked_not_to(tmp_path):
    trainer, _ = small_trainer(tmp_path, TRAIN_TEXTS)
    path = trainer.save_checkpoint("state.pth")
    expected = torch.rand(3)  # the first draw after the saved state
    trainer.load_checkpoint(path)
    assert torch.equal(torch.rand(3), expected), "by default the saved random state is restored"
    torch.manual_seed(5)
    fresh = torch.rand(3)
    torch.manual_seed(5)
    trainer.load_checkpoint(path, restore_rng=False)
    assert torch.equal(torch.rand(3), fresh), "restore_rng=False leaves the random state alone"


def test_each_epoch_is_logged_to_its_files_and_to_a_wandb_run(tmp_path):
    trainer, _ = small_trainer(tmp_path, TRAIN_TEXTS)
    logged, finished = [], []
    trainer.wandb_run = SimpleNamespace(log=lambda values, step: logged.append((values, step)),
                                        finish=lambda: finished.append(True))
    trainer.global_step = 12
    metrics = {"train": {"ce_loss_char": 2.0}, "val": {"ce_loss_char": 2.5}, "lr": 0.1}
    trainer._log_metrics(metrics, 3)
    record = {"epoch": 3, "step": 12, **metrics}
    assert read_json(trainer.metrics_dir / "epoch_003.json") == record
    assert read_json(trainer.metrics_dir / "history.json") == [record]
    assert logged == [({"train/ce_loss_char": 2.0, "val/ce_loss_char": 2.5, "epoch": 3}, 12)]
    trainer.cleanup()
    trainer.cleanup()
    assert finished == [True] and trainer.wandb_run is None


def test_training_on_removes_both_test_results(tmp_path):
    trainer, _ = small_trainer(tmp_path, TRAIN_TEXTS)
    for name in (METRICS_FILE, GENERATIONS_FILE):
        (trainer.expt_root / name).write_text("{}")
    trainer._forget_test_results()
    assert not (trainer.expt_root / METRICS_FILE).exists()
    assert not (trainer.expt_root / GENERATIONS_FILE).exists()
    trainer._forget_test_results()  # nothing left to remove: fine


def test_the_device_argument_wins_over_the_configs(tmp_path):
    trainer, _ = small_trainer(tmp_path, TRAIN_TEXTS, device="cuda")  # small_trainer passes "cpu"
    assert trainer.device == torch.device("cpu")


@pytest.mark.parametrize("dtype, scaled", [(torch.float16, True), (torch.bfloat16, False),
                                           (torch.float32, False)])
def test_only_fp16_asks_for_a_gradient_scaler(tmp_path, monkeypatch, dtype, scaled):
    """On this CPU a scaler asked for disables itself with a warning; on a GPU it is enabled."""
    monkeypatch.setattr(base_trainer, "resolve_precision", lambda *args: (dtype, "as the test asks"))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        trainer, _ = small_trainer(tmp_path, TRAIN_TEXTS)
    asked = trainer.scaler.is_enabled() or any("GradScaler" in str(w.message) for w in caught)
    assert asked is scaled


@pytest.mark.parametrize("max_len, length", [(300, 200), (64, 64)])
def test_auto_precision_times_steps_of_200_tokens_or_the_models_max_len(tmp_path, monkeypatch,
                                                                        max_len, length):
    """``precision: auto`` times the training step on the config's batch size and sequences of
    200 tokens, or of ``max_len`` when the model is shorter."""
    from hw4lib.model import DecoderOnlyTransformer

    timed = []
    monkeypatch.setattr(base_trainer, "measure_formats",
                        lambda model, batch, length, device: timed.append((batch, length)) or
                        {"fp32": 1.0, "bf16": 2.0})
    monkeypatch.setattr(base_trainer, "resolve_precision",
                        lambda requested, device, speeds: (torch.float32, str(speeds())))
    trainer, _ = small_trainer(tmp_path, TRAIN_TEXTS)
    model = DecoderOnlyTransformer(1, 16, 2, 32, dropout=0.0, max_len=max_len, num_classes=10)
    with contextlib.redirect_stdout(io.StringIO()):
        type(trainer)(model, trainer.tokenizer, trainer.config, "timed", None, device="cpu")
    assert timed[-1] == (trainer.config.data.batch_size, length)
