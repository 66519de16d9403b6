"""Glue between the PyTorch model and its numpy twin, ``mytorch.nn.DecoderOnlyTransformer``.

``mytorch`` never imports torch; everything that touches torch tensors, checkpoints, data loaders
or the decoding code lives here::

    model, config = load_numpy_model("expts/<run>")             # or a handin folder
    metrics = evaluate_numpy_model(model, test_loader)           # same numbers as the trainer's
    generator = SequenceGenerator(numpy_score_fn(model), tokenizer, max_length, "cpu")
    seqs, scores = generator.generate_greedy(prompts)

    losses = train_numpy(model, torch_model, config, batches, train_loader, tokenizer.pad_id)

The metrics follow :func:`hw4lib.trainers.metrics.evaluate_language_model` exactly (summed
next-token NLL over every non-pad target, divided by the tokens and by the characters), and the
training step follows ``LMTrainer``'s (cross-entropy ignoring the pad id, clipping, the config's
AdamW parameter groups and learning-rate schedule).
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Iterable, Sized

import numpy as np
import torch
import yaml

from hw4lib.config import Config, Model, Optimizer, parse_section, validate_config
from hw4lib.handin_format import CONFIG_FILE, STATE_DICT_FILE
from hw4lib.trainers.base_trainer import BEST_CHECKPOINT_PATH
from hw4lib.trainers.metrics import language_model_metrics
from hw4lib.utils.create_lr_scheduler import scheduler_interval, simulate_lr_schedule
from hw4lib.utils.create_optimizer import build_param_groups, create_optimizer
from mytorch.nn import CrossEntropyLoss, DecoderOnlyTransformer
from mytorch.optim import AdamW, clip_grad_norm


def numpy_state(state_dict: dict[str, torch.Tensor], dtype=np.float32) -> dict[str, np.ndarray]:
    """A torch state dict as numpy arrays of ``dtype``."""
    return {name: tensor.detach().cpu().numpy().astype(dtype) for name, tensor in state_dict.items()}


def numpy_model_from_state(model_config: Model | dict[str, Any], state_dict: dict[str, torch.Tensor],
                           dtype=np.float32) -> DecoderOnlyTransformer:
    """The numpy twin of ``DecoderOnlyTransformer(**model_config, num_classes=K)`` in eval mode,
    holding ``state_dict``'s weights; K is read from the state dict's output layer.
    ``model_config`` is the config's ``model`` section (validated here when it is a mapping)."""
    settings = parse_section(Model, model_config, "model")
    state = numpy_state(state_dict, dtype)
    num_classes = state["final_linear.bias"].shape[0]
    model = DecoderOnlyTransformer(
        settings.num_layers, settings.d_model, settings.num_heads, settings.d_ff, settings.max_len,
        num_classes, weight_tying=settings.weight_tying, dropout=settings.dropout, dtype=dtype)
    model.load_state_dict(state)
    return model.eval()


def load_numpy_model(path: str | Path, dtype=np.float32) -> tuple[DecoderOnlyTransformer, Config]:
    """The numpy model of a run folder or of a handin, and the config it was trained with.

    ``path`` is a run folder (``expts/<run>``: its config.yaml and best checkpoint), a handin folder
    (config.yaml and model_state_dict.pt, as ``make handin`` packs them), or a
    ``model_state_dict.pt`` file with config.yaml beside it.
    """
    path = Path(path)
    folder = path.parent if path.is_file() else path
    checkpoint = folder / BEST_CHECKPOINT_PATH
    if path.is_file():
        state_dict = torch.load(path, map_location="cpu", weights_only=True)
    elif (folder / STATE_DICT_FILE).is_file():
        state_dict = torch.load(folder / STATE_DICT_FILE, map_location="cpu", weights_only=True)
    elif checkpoint.is_file():
        # The trainer's checkpoints also hold RNG states and the config: not tensors only.
        state_dict = torch.load(checkpoint, map_location="cpu", weights_only=False)["model_state_dict"]
    else:
        raise FileNotFoundError(f"{path}: expected a run folder with {BEST_CHECKPOINT_PATH}, "
                                f"a handin folder with {STATE_DICT_FILE}, or a {STATE_DICT_FILE} file")
    config_file = folder / CONFIG_FILE
    if not config_file.is_file():
        raise FileNotFoundError(f"{config_file} not found: the weights need the config.yaml of the "
                                f"run that trained them")
    config = validate_config(yaml.safe_load(config_file.read_text()))
    return numpy_model_from_state(config.model, state_dict, dtype), config


def evaluate_numpy_model(model: DecoderOnlyTransformer, loader: Iterable,
                         total_chars: int | None = None) -> dict[str, float]:
    """``evaluate_language_model``'s metrics, with the forward pass and the NLL in numpy.

    ``loader`` yields ``(padded_shifted, padded_golden, lengths)``; only the first ``lengths[i]``
    targets of row i count. ``total_chars`` defaults to ``loader.dataset.total_chars``.
    """
    total_chars = loader.dataset.total_chars if total_chars is None else total_chars
    was_training = model.training
    model.eval()
    criterion = CrossEntropyLoss(ignore_index=-1, reduction="sum")
    total_nll, total_tokens = 0.0, 0
    try:
        for padded_shifted, padded_golden, lengths in loader:
            tokens, golden, lengths = (t.numpy() for t in (padded_shifted, padded_golden, lengths))
            is_target = np.arange(golden.shape[1])[None, :] < lengths[:, None]
            total_nll += criterion.forward(model.forward(tokens, lengths),
                                           np.where(is_target, golden, -1))
            total_tokens += int(is_target.sum())
    finally:
        model.train(was_training)
    return language_model_metrics(total_nll, total_tokens, int(total_chars))


def numpy_score_fn(model: DecoderOnlyTransformer) -> Callable[[torch.Tensor], torch.Tensor]:
    """A ``SequenceGenerator`` score_fn: (N, T) int64 prompts -> (N, K) next-token logits, computed
    by the numpy model (in eval mode)."""
    def score(prompts: torch.Tensor) -> torch.Tensor:
        return torch.from_numpy(model.score(prompts.cpu().numpy())).to(prompts.device)
    return score


def numpy_optimizer(model: DecoderOnlyTransformer, torch_model: torch.nn.Module,
                    opt_config: Optimizer) -> AdamW:
    """mytorch's AdamW over ``model``'s parameters, grouped as ``create_optimizer`` groups
    ``torch_model``'s (same learning rates and weight decay per parameter name)."""
    if opt_config.name != "adamw":
        raise ValueError(f"numpy_optimizer: only optimizer.name adamw has a numpy twin, got "
                         f"{opt_config.name!r}")
    names = {id(p): name for name, p in torch_model.named_parameters()}
    params = model.parameters()
    groups = [{"params": {names[id(p)]: params[names[id(p)]] for p in group["params"]},
               "lr": group["lr"], "weight_decay": group["weight_decay"]}
              for group in build_param_groups(torch_model, opt_config)]
    adamw = opt_config.adamw
    if adamw.amsgrad:
        raise ValueError("numpy_optimizer: amsgrad has no numpy twin; set optimizer.adamw.amsgrad: false")
    return AdamW(groups, lr=opt_config.lr, betas=adamw.betas, eps=adamw.eps)


def numpy_train_step(model: DecoderOnlyTransformer, criterion: CrossEntropyLoss,
                     optimizer: AdamW, batch, grad_clip_norm: float) -> float:
    """One update on ``batch`` = (padded_shifted, padded_golden, lengths) tensors, as LMTrainer's
    step with one batch per update: loss, backward, clip (when > 0), AdamW. Returns the loss."""
    tokens, golden, lengths = (t.numpy() for t in batch)
    logits = model.forward(tokens, lengths)
    loss = criterion.forward(logits, golden)
    model.backward(criterion.backward())
    gradients = model.gradients()
    if grad_clip_norm > 0:
        clip_grad_norm(gradients, grad_clip_norm)
    optimizer.step(gradients)
    return loss


def train_numpy(model: DecoderOnlyTransformer, torch_model: torch.nn.Module, config: Config,
                batches: list, train_loader: Sized, pad_id: int) -> list[float]:
    """Train ``model`` on ``batches`` with the config's optimizer, schedule and clipping, one
    update per batch; return the loss of each batch before its update.

    ``torch_model`` is the hw4lib model of the same config (its parameter names pick the optimizer
    groups); ``train_loader``'s length sizes the learning-rate schedule, as in the trainer.
    """
    training = config.training
    if training.gradient_accumulation_steps != 1 or training.label_smoothing:
        raise ValueError("train_numpy: set training.gradient_accumulation_steps: 1 and "
                         "training.label_smoothing: 0 (the numpy loop has neither)")
    optimizer = numpy_optimizer(model, torch_model, config.optimizer)
    schedule = simulate_lr_schedule(create_optimizer(torch_model, config.optimizer),
                                    config.scheduler, train_loader, 1, training.epochs)
    updates_per_entry = 1 if scheduler_interval(config.scheduler) == "step" else len(train_loader)
    criterion = CrossEntropyLoss(ignore_index=pad_id)
    model.train()
    losses = []
    for step, batch in enumerate(batches):
        for group, lrs in zip(optimizer.param_groups, schedule):
            group["lr"] = lrs[step // updates_per_entry]
        losses.append(numpy_train_step(model, criterion, optimizer, batch,
                                       training.grad_clip_norm))
    return losses
