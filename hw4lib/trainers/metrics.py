"""The evaluation metric: the numbers every run reports and the autograder checks.

Over a loader of ``(padded_shifted, padded_golden, lengths)`` batches, :func:`evaluate_language_model`
sums the next-token negative log-likelihood, in nats, of every non-pad target (each transcript's
``[EOS]`` included):

    NLL = - sum over transcripts s, positions t < len(s) of  log p(golden[s, t] | shifted[s, :t+1])

and divides it by two different counts:

    ce_loss_token = NLL / (number of targets)              perplexity_token = exp(ce_loss_token)
    ce_loss_char  = NLL / (characters of the transcripts)  perplexity_char  = exp(ce_loss_char)

The per-token numbers depend on the tokenizer (a 10k-word vocabulary has fewer, harder targets than
a character one); the per-character numbers do not, so ``perplexity_char`` compares models across
tokenizers, and it is the one the pass mark is set on. Every target is scored with plain
cross-entropy (no label smoothing) in float32, in eval mode.
"""
from __future__ import annotations

import math
from typing import Iterable, Iterator, Sequence

import torch
import torch.nn.functional as F
from torch import nn

from hw4lib.model.fused_attention import attention_weights_off

# Evaluation batches (evaluation_batch_size): at most MAX_BATCH_SIZE transcripts, and the largest
# activation of one batch under ACTIVATION_BUDGET elements: the attention weights (batch x heads x
# T x T) and the widest per-position tensor (batch x T x max(d_ff, d_model, vocab)), so a model with
# many heads or a huge feed-forward on long sequences does not exhaust memory.
MAX_BATCH_SIZE = 32
ACTIVATION_BUDGET = 2**26


def evaluation_batch_size(longest: int, num_heads: int, width: int) -> int:
    """Transcripts per evaluation batch when the longest holds ``longest`` tokens, the model has
    ``num_heads`` attention heads and ``width`` features at its widest (at least 1)."""
    batch_size = ACTIVATION_BUDGET // (longest * max(num_heads * longest, width))
    return min(max(batch_size, 1), MAX_BATCH_SIZE)


def language_model_metrics(total_nll: float, total_tokens: int, total_chars: int) -> dict[str, float]:
    """The four metrics from a summed NLL (nats) and its two denominators (see the module docstring)."""
    if total_tokens <= 0 or total_chars <= 0:
        raise ValueError(f"cannot average over {total_tokens} targets and {total_chars} characters")
    ce_token, ce_char = total_nll / total_tokens, total_nll / total_chars
    return {"ce_loss_token": ce_token, "ce_loss_char": ce_char,
            "perplexity_token": safe_exp(ce_token), "perplexity_char": safe_exp(ce_char),
            "num_tokens": int(total_tokens), "num_chars": int(total_chars)}


def safe_exp(value: float) -> float:
    """exp that returns inf instead of raising OverflowError for a diverged loss."""
    return math.exp(value) if value < 700 else math.inf


@torch.no_grad()
def evaluate_language_model(model: nn.Module, loader: Iterable, device: str | torch.device,
                            total_chars: int | None = None) -> dict[str, float]:
    """Score ``model`` on every batch of ``loader``; the metric the trainer and the grader share.

    Args:
        model: maps ``(padded_shifted (N, T) int64, lengths (N,) int64)`` to ``(logits (N, T, K),
            attention dict)``, like ``DecoderOnlyTransformer``. Evaluated in eval mode; its
            train/eval mode is restored afterwards.
        loader: yields ``(padded_shifted, padded_golden, lengths)``; only the first ``lengths[i]``
            positions of row i are targets, so the pad id does not matter here.
        device: where to run the model.
        total_chars: characters of the transcripts the loader covers; by default
            ``loader.dataset.total_chars`` (an ``LMDataset``).

    Returns:
        ``{"ce_loss_token", "ce_loss_char", "perplexity_token", "perplexity_char", "num_tokens",
        "num_chars"}``; losses in nats (see the module docstring for the exact definitions).
    """
    if total_chars is None:
        total_chars = getattr(getattr(loader, "dataset", None), "total_chars", None)
        if total_chars is None:
            raise ValueError("evaluate_language_model: pass total_chars, or a loader whose dataset "
                             "has a total_chars attribute (an LMDataset)")
    total_nll = torch.zeros((), dtype=torch.float64)
    total_tokens = 0
    for nll, is_target in _target_nll(model, loader, device):
        total_nll += nll[is_target].sum(dtype=torch.float64).cpu()
        total_tokens += int(is_target.sum())
    return language_model_metrics(float(total_nll), total_tokens, int(total_chars))


@torch.no_grad()
def transcript_losses(model: nn.Module, dataset, indices: Sequence[int], batch_size: int,
                      device: str | torch.device) -> list[float]:
    """The summed next-token NLL (nats, accumulated in float64) of each transcript ``indices``
    names, in that order: the terms whose sum :func:`evaluate_language_model` divides.

    Args:
        model: as for :func:`evaluate_language_model`.
        dataset: an ``LMDataset`` (``dataset[i]`` is ``(shifted, golden)``, ``collate_fn`` pads,
            ``transcripts_golden[i]`` has the length of transcript i's targets).
        indices: transcripts of ``dataset``, each at most once.
        batch_size: transcripts per forward pass; they are batched by length, so the padding is
            small (the result does not depend on it, to float32 rounding).
        device: where to run the model.
    """
    by_length = sorted(range(len(indices)),
                       key=lambda k: len(dataset.transcripts_golden[indices[k]]))
    batches = [by_length[start:start + batch_size]
               for start in range(0, len(by_length), batch_size)]
    loader = (dataset.collate_fn([dataset[indices[k]] for k in batch]) for batch in batches)
    losses = [0.0] * len(indices)  # pragma: no mutate (equivalent: the loop below writes every slot)
    # _target_nll first: zip then runs it to its end, which restores the model's mode
    for (nll, is_target), batch in zip(_target_nll(model, loader, device), batches):
        sums = torch.where(is_target, nll, 0.0).sum(dim=1, dtype=torch.float64).cpu()
        for k, value in zip(batch, sums.tolist()):
            losses[k] = value
    return losses


def _target_nll(model: nn.Module, loader: Iterable, device: str | torch.device
                ) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
    """Per batch of ``loader``: (float32 NLL of every position (N, T), which are targets (N, T)
    bool), ``model`` in eval mode with its attention weights off, its mode restored after."""
    was_training = model.training
    model.eval()
    try:
        with attention_weights_off(model):  # nobody reads them: the fused attention path
            for padded_shifted, padded_golden, lengths in loader:
                padded_shifted, padded_golden = padded_shifted.to(device), padded_golden.to(device)
                lengths = lengths.to(device)
                logits, _ = model(padded_shifted, lengths)
                positions = torch.arange(padded_golden.size(1), device=device)
                is_target = positions.unsqueeze(0) < lengths.unsqueeze(1)              # (N, T)
                nll = F.cross_entropy(logits.float().transpose(1, 2), padded_golden, reduction="none")
                yield nll, is_target
    finally:
        model.train(was_training)
