"""Build a torch optimizer from the ``optimizer:`` section of a config.

Each parameter's learning rate and weight decay come from three rules, applied in this order:

1. ``param_groups``: a list of ``{name, patterns, lr?, weight_decay?}``. A parameter joins the first
   group with a pattern found in its name (``re.search``, so a plain substring works) and takes that
   group's ``lr`` / ``weight_decay`` in place of the base values.
2. ``no_decay_patterns``: a parameter whose name matches any of these gets ``weight_decay = 0``.
   Decaying LayerNorm gains, biases or embeddings only pulls them towards zero without
   regularising anything useful, so the default config lists ``norm``, ``bias`` and ``embedding``.
3. ``layer_decay`` (layer-wise learning-rate decay): with ``enabled: true`` and rate ``r``, a
   parameter at depth ``d`` gets ``lr * r ** (D - d)``, where the input embeddings are depth 0,
   layer ``i`` (found with ``layer_pattern``, default ``dec_layers.<i>.``) is depth ``i + 1`` and
   everything after the last layer (final norm, output projection) is depth ``D = num_layers + 1``.
   Layers near the input then move less than the layers near the output.

Parameters that end up with the same (group, lr, weight decay) share one torch parameter group, whose
``name`` key says where it came from (handy when printing or plotting learning rates).
"""
from __future__ import annotations

import re
from typing import Any

import torch
from torch import nn

from hw4lib.config import Optimizer, parse_section


def _layer_depths(names: list[str], layer_pattern: str) -> tuple[dict[str, int], int]:
    """Map each parameter name to its depth for layer-wise decay; return (depths, max depth).

    Names before any layer in the model's registration order (the embeddings) get depth 0,
    names inside layer i get i + 1, names after the last layer get num_layers + 1.
    """
    layer_of = {}
    for name in names:
        match = re.search(layer_pattern, name)
        layer_of[name] = int(match.group(1)) if match else None
    layer_ids = [i for i in layer_of.values() if i is not None]
    if not layer_ids:
        raise ValueError(
            f"optimizer.layer_decay: no parameter name matches layer_pattern {layer_pattern!r}; "
            f"set layer_pattern to a regex with one group capturing the layer index"
        )
    top = max(layer_ids) + 2
    depths, seen_layer = {}, False
    for name in names:
        if layer_of[name] is not None:
            depths[name], seen_layer = layer_of[name] + 1, True
        else:
            depths[name] = top if seen_layer else 0
    return depths, top


def build_param_groups(model: nn.Module, opt_config: dict[str, Any] | Optimizer) -> list[dict[str, Any]]:
    """Split ``model``'s trainable parameters into torch parameter groups (see the module docstring).

    Returns a list of dicts ``{"params": [...], "lr": float, "weight_decay": float, "name": str}``
    in which every trainable parameter appears exactly once.
    """
    settings = parse_section(Optimizer, opt_config, "optimizer")
    layer_decay = settings.layer_decay
    named = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
    if not named:
        raise ValueError("create_optimizer: the model has no trainable parameters")
    depths, top = ({}, 0)
    if layer_decay.enabled:
        depths, top = _layer_depths([n for n, _ in named], layer_decay.layer_pattern)

    buckets: dict[tuple[str, float, float], list[nn.Parameter]] = {}
    for name, param in named:
        label, lr, wd = "default", settings.lr, settings.weight_decay
        for group in settings.param_groups:
            if any(re.search(pattern, name) for pattern in group.patterns):
                label = group.name
                lr = settings.lr if group.lr is None else group.lr
                wd = settings.weight_decay if group.weight_decay is None else group.weight_decay
                break
        if any(re.search(pattern, name) for pattern in settings.no_decay_patterns):
            label, wd = f"{label}/no_decay", 0.0
        if depths:
            lr *= layer_decay.decay_rate ** (top - depths[name])
            label = f"{label}/depth{depths[name]}"
        buckets.setdefault((label, lr, wd), []).append(param)
    return [{"params": params, "lr": lr, "weight_decay": wd, "name": label}
            for (label, lr, wd), params in buckets.items()]


def create_optimizer(model: nn.Module, opt_config: dict[str, Any] | Optimizer) -> torch.optim.Optimizer:
    """Create the optimizer named by ``opt_config["name"]`` (sgd | adam | adamw).

    Args:
        model: the module whose trainable parameters are optimized.
        opt_config: the config's ``optimizer:`` section (``hw4lib.config.Optimizer`` lists its
            keys and defaults): ``name``, ``lr``, ``weight_decay``, ``param_groups``,
            ``no_decay_patterns``, ``layer_decay`` and one sub-dict per optimizer with its own
            keyword arguments (``sgd: {momentum, nesterov, dampening}``, ``adam``/``adamw:
            {betas, eps, amsgrad}``). A bad value raises ConfigError naming ``optimizer.<key>``.

    Returns:
        A torch optimizer whose parameter groups follow :func:`build_param_groups`.
    """
    settings = parse_section(Optimizer, opt_config, "optimizer")
    groups = build_param_groups(model, settings)
    if settings.name == "sgd":
        return torch.optim.SGD(groups, lr=settings.lr, **settings.sgd.model_dump())
    optimizer_cls = torch.optim.Adam if settings.name == "adam" else torch.optim.AdamW
    return optimizer_cls(groups, lr=settings.lr, **getattr(settings, settings.name).model_dump())
