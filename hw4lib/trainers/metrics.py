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
from typing import Iterable

import torch
import torch.nn.functional as F
from torch import nn

from hw4lib.model.fused_attention import attention_weights_off


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
    was_training = model.training
    model.eval()
    total_nll = torch.zeros((), dtype=torch.float64)
    total_tokens = 0
    try:
        with attention_weights_off(model):  # nobody reads them: the fused attention path
            for padded_shifted, padded_golden, lengths in loader:
                padded_shifted, padded_golden = padded_shifted.to(device), padded_golden.to(device)
                lengths = lengths.to(device)
                logits, _ = model(padded_shifted, lengths)
                positions = torch.arange(padded_golden.size(1), device=device)
                is_target = positions.unsqueeze(0) < lengths.unsqueeze(1)              # (N, T)
                nll = F.cross_entropy(logits.float().transpose(1, 2), padded_golden, reduction="none")
                total_nll += nll[is_target].sum(dtype=torch.float64).cpu()
                total_tokens += int(is_target.sum())
    finally:
        model.train(was_training)
    return language_model_metrics(float(total_nll), total_tokens, int(total_chars))
