"""Optimizer and learning-rate scheduler factories against hand-computed learning rates.

Run: ``python -m tests.test_optim_sched`` (or pytest). The model here is a stand-in whose parameter
names mimic DecoderOnlyTransformer's, so these tests do not depend on the model code.
"""
import math

import pytest
import torch
from torch import nn

from tests.testing_framework import rubric, run_module

RUBRIC = {"Optimizer": 0, "Scheduler": 0}

LR = 0.1


class NamedLikeTheLM(nn.Module):
    """target_embedding, dec_layers.{0,1}.{ffn, norm}, norm, final_linear: the LM's name layout."""

    def __init__(self):
        super().__init__()
        self.target_embedding = nn.Embedding(5, 4)
        self.dec_layers = nn.ModuleList(
            nn.ModuleDict({"ffn": nn.Linear(4, 4), "norm": nn.LayerNorm(4)}) for _ in range(2))
        self.norm = nn.LayerNorm(4)
        self.final_linear = nn.Linear(4, 5)


def _opt_config(**overrides):
    config = {"name": "adamw", "lr": LR, "weight_decay": 0.01}
    config.update(overrides)
    return config


def _settings_by_name(model, optimizer):
    """{parameter name: (lr, weight_decay)} read back from the optimizer's groups."""
    where = {}
    for group in optimizer.param_groups:
        for param in group["params"]:
            where[id(param)] = (group["lr"], group["weight_decay"])
    return {name: where[id(param)] for name, param in model.named_parameters()}


class FakeLoader:
    """Only len() matters to the scheduler factory."""

    def __init__(self, batches):
        self.batches = batches

    def __len__(self):
        return self.batches


def _lrs(optimizer, scheduler, steps, metric=None):
    """lr of group 0 before each of ``steps`` scheduler steps."""
    values = []
    for _ in range(steps):
        values.append(optimizer.param_groups[0]["lr"])
        optimizer.step()
        scheduler.step() if metric is None else scheduler.step(metric)
    return values


def _one_param_sgd(lr=LR):
    return torch.optim.SGD([nn.Parameter(torch.zeros(1))], lr=lr)


def _cosine(t, period, lr0=LR, eta_min=0.0):
    return eta_min + (lr0 - eta_min) * (1 + math.cos(math.pi * t / period)) / 2


@rubric("Optimizer")
def test_optimizer_kinds_and_hyperparameters():
    from hw4lib.utils import create_optimizer

    model = NamedLikeTheLM()
    sgd = create_optimizer(model, _opt_config(name="sgd", sgd={"momentum": 0.9, "nesterov": True}))
    assert type(sgd) is torch.optim.SGD
    assert sgd.param_groups[0]["momentum"] == 0.9 and sgd.param_groups[0]["nesterov"]
    adam = create_optimizer(model, _opt_config(name="adam", adam={"betas": [0.8, 0.95], "eps": 1e-6}))
    assert type(adam) is torch.optim.Adam and adam.param_groups[0]["betas"] == (0.8, 0.95)
    assert adam.param_groups[0]["eps"] == 1e-6
    assert type(create_optimizer(model, _opt_config())) is torch.optim.AdamW
    with pytest.raises(ValueError, match="optimizer.name"):
        create_optimizer(model, _opt_config(name="lion"))


@rubric("Optimizer")
def test_every_parameter_in_exactly_one_group_with_no_decay_patterns():
    from hw4lib.utils import create_optimizer

    model = NamedLikeTheLM()
    optimizer = create_optimizer(model, _opt_config(no_decay_patterns=["norm", "bias", "embedding"]))
    ids = [id(p) for group in optimizer.param_groups for p in group["params"]]
    assert sorted(ids) == sorted(id(p) for p in model.parameters()), "each parameter exactly once"
    for name, (lr, weight_decay) in _settings_by_name(model, optimizer).items():
        decayed = not any(s in name for s in ("norm", "bias", "embedding"))
        assert lr == LR
        assert weight_decay == (0.01 if decayed else 0.0), name


@rubric("Optimizer")
def test_param_group_patterns_override_lr_and_weight_decay():
    from hw4lib.utils import create_optimizer

    model = NamedLikeTheLM()
    groups = [{"name": "ffn", "patterns": ["ffn"], "lr": 0.5, "weight_decay": 0.2}]
    settings = _settings_by_name(model, create_optimizer(
        model, _opt_config(param_groups=groups, no_decay_patterns=["bias"])))
    assert settings["dec_layers.0.ffn.weight"] == (0.5, 0.2)
    assert settings["dec_layers.1.ffn.bias"] == (0.5, 0.0)
    assert settings["final_linear.weight"] == (LR, 0.01)


@rubric("Optimizer")
def test_layer_wise_lr_decay_hand_computed():
    from hw4lib.utils import create_optimizer

    model = NamedLikeTheLM()
    optimizer = create_optimizer(model, _opt_config(layer_decay={"enabled": True, "decay_rate": 0.5}))
    settings = _settings_by_name(model, optimizer)
    # depths: embedding 0, dec_layers.0 -> 1, dec_layers.1 -> 2, final norm/linear -> 3 (top)
    expected = {"target_embedding.weight": LR / 8, "dec_layers.0.ffn.weight": LR / 4,
                "dec_layers.1.norm.bias": LR / 2, "norm.weight": LR, "final_linear.bias": LR}
    for name, lr in expected.items():
        assert settings[name][0] == pytest.approx(lr), name
    with pytest.raises(ValueError, match="layer_pattern"):
        create_optimizer(nn.Linear(2, 2), _opt_config(layer_decay={"enabled": True, "decay_rate": 0.5}))


@rubric("Scheduler")
def test_linear_warmup_then_cosine_per_step_closed_form():
    from hw4lib.utils import create_scheduler

    # 10 batches, 2 per update -> 5 updates per epoch; warm-up 1 epoch = 5 updates; cosine 3 epochs.
    optimizer = _one_param_sgd()
    config = {"name": "cosine", "interval": "step", "cosine": {"T_max": 3, "eta_min": 0.001},
              "warmup": {"enabled": True, "epochs": 1, "start_factor": 0.2, "end_factor": 1.0}}
    scheduler = create_scheduler(optimizer, config, FakeLoader(10), gradient_accumulation_steps=2)
    expected = [LR * (0.2 + 0.8 * k / 5) for k in range(5)]
    expected += [_cosine(t, 15, eta_min=0.001) for t in range(16)]
    assert _lrs(optimizer, scheduler, len(expected)) == pytest.approx(expected, rel=1e-9, abs=1e-12)


@rubric("Scheduler")
def test_cosine_per_epoch_and_partial_accumulation_window():
    from hw4lib.utils import create_scheduler
    from hw4lib.utils.create_lr_scheduler import steps_per_epoch

    assert steps_per_epoch(FakeLoader(7), 2) == 4, "a last partial window still updates"
    optimizer = _one_param_sgd()
    scheduler = create_scheduler(optimizer, {"name": "cosine", "interval": "epoch", "cosine": {"T_max": 4}},
                                 train_loader=None)
    assert _lrs(optimizer, scheduler, 5) == pytest.approx([_cosine(t, 4) for t in range(5)], abs=1e-12)


@rubric("Scheduler")
def test_cosine_warm_restarts_closed_form():
    from hw4lib.utils import create_scheduler

    # 3 updates per epoch; first cycle T_0 = 1 epoch = 3 updates, then 6, then 12.
    optimizer = _one_param_sgd()
    config = {"name": "cosine_warm", "interval": "step", "cosine_warm": {"T_0": 1, "T_mult": 2, "eta_min": 0.0}}
    scheduler = create_scheduler(optimizer, config, FakeLoader(3), 1)
    expected = [_cosine(t, 3) for t in range(3)] + [_cosine(t, 6) for t in range(6)] + [_cosine(0, 12)]
    assert _lrs(optimizer, scheduler, len(expected)) == pytest.approx(expected, abs=1e-12)


@rubric("Scheduler")
def test_reduce_on_plateau_and_constant():
    from hw4lib.utils import create_scheduler, scheduler_interval

    config = {"name": "reduce_lr", "interval": "step", "reduce_lr": {"factor": 0.5, "patience": 1}}
    assert scheduler_interval(config) == "epoch", "plateau schedules are stepped once per epoch"
    optimizer = _one_param_sgd()
    scheduler = create_scheduler(optimizer, config, FakeLoader(4), 1)
    # never improving: the first call sets the best, then each 2nd bad epoch halves the lr
    assert _lrs(optimizer, scheduler, 6, metric=1.0) == pytest.approx([LR, LR, LR, LR / 2, LR / 2, LR / 4])
    with pytest.raises(ValueError, match="warmup"):
        create_scheduler(_one_param_sgd(), {**config, "warmup": {"enabled": True, "epochs": 1}}, FakeLoader(4), 1)

    optimizer = _one_param_sgd()
    constant = {"name": "constant", "warmup": {"enabled": True, "epochs": 1, "start_factor": 0.5}}
    scheduler = create_scheduler(optimizer, constant, FakeLoader(2), 1)
    assert _lrs(optimizer, scheduler, 4) == pytest.approx([LR * 0.5, LR * 0.75, LR, LR])
    with pytest.raises(ValueError, match="scheduler.name"):
        create_scheduler(_one_param_sgd(), {"name": "onecycle"}, FakeLoader(2), 1)


@rubric("Scheduler")
def test_plot_lr_schedule_writes_png_and_leaves_optimizer_alone(tmp_path):
    from hw4lib.utils import create_optimizer, plot_lr_schedule

    model = NamedLikeTheLM()
    optimizer = create_optimizer(model, _opt_config(layer_decay={"enabled": True, "decay_rate": 0.5}))
    before = [group["lr"] for group in optimizer.param_groups]
    config = {"name": "cosine", "cosine": {"T_max": 2}, "warmup": {"enabled": False}}
    lrs = plot_lr_schedule(optimizer, config, FakeLoader(4), 1, epochs=2, out_path=tmp_path / "lr.png")
    assert (tmp_path / "lr.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert [group["lr"] for group in optimizer.param_groups] == before
    assert len(lrs) == len(optimizer.param_groups) and len(lrs[0]) == 8
    for history, lr0 in zip(lrs, before):
        assert history == pytest.approx([_cosine(t, 8, lr0=lr0) for t in range(8)], abs=1e-12)


if __name__ == "__main__":
    run_module(__name__)
