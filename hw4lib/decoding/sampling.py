"""Sampling for ``SequenceGenerator``: temperature, top-k and nucleus (top-p) filtering, then a draw.

Kept apart from ``sequence_generator.py`` so that file reads as greedy and beam search. ``Sampling``
is a base class of ``SequenceGenerator`` and uses what that class sets up: ``score_fn``,
``tokenizer``, ``max_length`` and ``_prompts_on_device``; the conventions (scores, EOS, padding, the
score_fn contract) are those of ``sequence_generator.py``'s docstring.
"""
from __future__ import annotations

import torch

from ._checks import check_sampling


class Sampling:
    """``generate_sample`` and the logit filters of ``SequenceGenerator``."""

    def generate_sample(self, x: torch.Tensor, temperature: float = 1.0, top_k: int = 0,
                        top_p: float = 1.0, generator: torch.Generator | None = None
                        ) -> tuple[torch.Tensor, torch.Tensor]:
        """Sample each next token from the filtered distribution (see ``_filter_logits``).

        Temperature, top-k and top-p compose; with the defaults this is ancestral sampling from
        the model. Randomness comes from ``generator`` when given (it must live on ``self.device``),
        otherwise from torch's global RNG, so ``torch.manual_seed`` makes a run repeatable.

        Args:
            x: (N, T) int64 prompts.
            temperature: > 0; small values approach greedy search, large ones the uniform distribution.
            top_k: >= 0, 0 disables it.
            top_p: in (0, 1], 1 disables it.
            generator: optional ``torch.Generator`` for the draws.
        Returns:
            seqs: (N, T') int64, finished sequences padded as in ``generate_greedy``.
            scores: (N,) float summed log-probabilities of the sampled tokens under the filtered,
                renormalised distribution they were drawn from.
        """
        x = self._prompts_on_device(x)
        check_sampling(temperature, top_k, top_p)
        done = x.new_zeros(x.size(0), dtype=torch.bool)
        scores = x.new_zeros(x.size(0), dtype=torch.float)
        while x.size(1) < self.max_length and not done.all():
            # Only the K kept columns (all V when nothing is filtered) take part in the draw.
            kept, token_ids = self._candidates(self.score_fn(x), temperature, top_k, top_p)
            log_probs = torch.log_softmax(kept, dim=-1)
            column = torch.multinomial(log_probs.exp(), num_samples=1, generator=generator)   # (N, 1)
            drawn = column if token_ids is None else token_ids.gather(1, column)
            scores = scores + log_probs.gather(1, column).squeeze(1).masked_fill(done, 0.0)
            drawn = drawn.masked_fill(done.unsqueeze(1), self.tokenizer.pad_id)
            x = torch.cat([x, drawn], dim=1)
            done |= drawn.squeeze(1) == self.tokenizer.eos_id
        return x, scores

    def _filter_logits(self, logits: torch.Tensor, temperature: float = 1.0, top_k: int = 0,
                       top_p: float = 1.0) -> torch.Tensor:
        """Temperature-scale the logits, then keep only the top-k and/or nucleus (top-p) tokens.

        The filters compose in this order: divide by ``temperature``; keep the ``top_k`` largest
        logits (exactly k, ties broken by ``torch.topk``; 0 keeps all); then keep the smallest set of
        most probable remaining tokens whose probability mass reaches ``top_p`` (1 keeps all). The
        most probable token always survives. Removed tokens get ``-inf``, so a softmax of the result
        is the renormalised filtered distribution.

        Args:
            logits: (M, V) float.
        Returns:
            (M, V) float filtered logits.
        """
        kept, token_ids = self._candidates(logits, temperature, top_k, top_p)
        if token_ids is None:
            return kept
        return torch.full_like(logits, float("-inf")).scatter_(-1, token_ids, kept)

    def _candidates(self, logits: torch.Tensor, temperature: float, top_k: int, top_p: float
                    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """The filtered logits of ``_filter_logits``, on the top-k tokens only.

        Sampling from these K columns gives the same distribution as sampling from all V, and
        with top-k it draws K random numbers per row instead of V.

        Args:
            logits: (M, V) float.
        Returns:
            kept: (M, K) float logits / temperature, best first, ``-inf`` where top-p drops a token.
            token_ids: (M, K) int64 vocabulary ids of those columns, or None when nothing is
                filtered (K = V, the columns in vocabulary order).
        """
        check_sampling(temperature, top_k, top_p)
        logits = logits / temperature
        if not 0 < top_k < logits.size(-1):
            if top_p == 1.0:
                return logits, None
            kept, token_ids = logits.sort(dim=-1, descending=True)
        else:
            kept, token_ids = logits.topk(top_k, dim=-1)
        if top_p < 1.0:
            probs = kept.softmax(dim=-1)
            # A token is dropped when the more probable tokens before it already reach top_p.
            mass_before = probs.cumsum(dim=-1) - probs
            kept = kept.masked_fill(mass_before >= top_p, float("-inf"))
        return kept, token_ids
