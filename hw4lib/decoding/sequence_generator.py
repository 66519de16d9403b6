"""Turn a next-token scorer into text: greedy search, beam search and sampling.

Every method extends a batch of prompts one token at a time until each sequence has emitted EOS or
the sequences reach ``max_length`` tokens (prompt included). The model is only seen through
``score_fn``, so the same code decodes a Transformer, an n-gram table or a hand-written test chain.

Conventions shared by all three searches
----------------------------------------
* Scores are summed natural-log probabilities of the generated tokens (the prompt is not scored),
  without length normalisation, so they rank hypotheses by their joint probability exactly.
* A sequence is *finished* once it has emitted EOS. Its score then stays frozen, and every later
  position holds ``tokenizer.pad_id``, because the batch is one rectangular tensor.
  ``post_process_sequence`` cuts each sequence right after its first EOS, which removes that padding.
* Prompts are unpadded (N, T) LongTensors of equal length, usually starting with SOS.

The score_fn contract
---------------------
``score_fn`` is only ever called with (N, T) batches whose row i continues prompt i, N being the
number of prompts. Beam search therefore scores its N x B hypotheses with one call per beam slot
(B calls of N rows) rather than one flattened call. A scorer may thus depend on the row: a
sequence-to-sequence model's score_fn can close over one encoder output per prompt.

Fast decoding of a ``DecoderOnlyTransformer``
---------------------------------------------
``SequenceGenerator.for_model(model, tokenizer, max_length, device)`` runs the same three searches
with a key/value cache (``hw4lib.model.kv_cache``): the prompts go through the model once, then
each step computes only the newest token of each unfinished sequence. It returns the same tokens
and scores (to float rounding) as ``SequenceGenerator(model.score, ...)``, many times faster.
"""
from __future__ import annotations

from typing import Callable

import torch

from ._checks import (check_beam_width, check_generator, check_positive, check_prompts,
                      check_sampling, check_sequences)

ScoreFn = Callable[[torch.Tensor], torch.Tensor]


class SequenceGenerator:
    """Autoregressive decoding driven by a next-token scoring function.

    Args:
        score_fn: maps sequences (N, T) int64 to next-token logits (N, V) float; for a
            ``DecoderOnlyTransformer`` pass ``model.score`` with the model in eval mode.
        tokenizer: anything with ``eos_id``, ``pad_id``, ``vocab_size`` and ``decode`` (an
            ``H4Tokenizer`` in practice).
        max_length: the total length (prompt + generated tokens) at which generation stops.
        device: where the sequences live; prompts are moved there.
    """

    def __init__(self, score_fn: ScoreFn, tokenizer, max_length: int, device: str | torch.device):
        check_generator(score_fn, max_length)
        self.score_fn = score_fn
        self.tokenizer = tokenizer
        self.max_length = max_length
        self.device = torch.device(device)

    # Faster generators for some model classes: {model class: factory(model, tokenizer, max_length,
    # device)}. hw4lib.decoding.cached_generator registers the cached one of DecoderOnlyTransformer
    # when the package is imported, so this module imports nothing that imports it back.
    _fast_paths: dict[type, Callable] = {}

    @classmethod
    def register_fast_path(cls, model_class: type, factory: Callable) -> None:
        """Make :meth:`for_model` build instances of ``model_class`` with ``factory``."""
        cls._fast_paths[model_class] = factory

    @classmethod
    def for_model(cls, model, tokenizer, max_length: int, device: str | torch.device) -> "SequenceGenerator":
        """The fastest generator for ``model`` (in eval mode), with the results of ``model.score``.

        A ``DecoderOnlyTransformer`` gets a key/value cache: same searches, same results as
        ``SequenceGenerator(model.score, tokenizer, max_length, device)``, but each step runs only
        the newest tokens through the model. Any other model gets exactly that plain generator.
        """
        for model_class, factory in cls._fast_paths.items():
            if isinstance(model, model_class):
                return factory(model, tokenizer, max_length, device)
        return cls(model.score, tokenizer, max_length, device)

    # ----------------------------------------------------------------------------------------
    # Logit transforms shared by the searches
    # ----------------------------------------------------------------------------------------

    def _prompts_on_device(self, x) -> torch.Tensor:
        """Check the prompt batch (N, T) and return it as int64 on ``self.device``."""
        check_prompts(x, self.max_length)
        return x.to(device=self.device, dtype=torch.long)

    def _apply_repeat_penalty(self, logits: torch.Tensor, sequences: torch.Tensor,
                              penalty: float = 1.0) -> torch.Tensor:
        """Discourage tokens that already occur in each sequence (CTRL, Keskar et al. 2019).

        A seen token's positive logit is divided by ``penalty`` and its negative logit multiplied
        by it, so with ``penalty > 1`` the token always becomes less likely; ``penalty == 1`` is a
        no-op. Counts do not matter: a token seen once and a token seen ten times get the same
        penalty.

        Args:
            logits: (M, V) float next-token logits.
            sequences: (M, T) int64 tokens generated so far (prompt included), row-aligned with logits.
            penalty: a number > 0.
        Returns:
            (M, V) penalised logits; the input tensor is never modified in place.
        """
        check_positive(repeat_penalty=penalty)
        if penalty == 1.0:
            return logits
        seen = torch.zeros_like(logits, dtype=torch.bool).scatter_(1, sequences, True)
        penalised = torch.where(logits > 0, logits / penalty, logits * penalty)
        return torch.where(seen, penalised, logits)

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

    # ----------------------------------------------------------------------------------------
    # Searches
    # ----------------------------------------------------------------------------------------

    def generate_greedy(self, x: torch.Tensor, temperature: float = 1.0,
                        repeat_penalty: float = 1.0) -> tuple[torch.Tensor, torch.Tensor]:
        """Extend each prompt with its most probable next token until EOS or ``max_length``.

        The loop is ``_extend``'s, shared with sampling (finished sequences keep their score and
        get pad); what makes it greedy is ``_greedy_choice``, the choice of each step's token.

        Args:
            x: (N, T) int64 prompts.
            temperature: > 0; changes the scores, not the chosen tokens.
            repeat_penalty: > 0; 1.0 disables it.
        Returns:
            seqs: (N, T') int64 with T <= T' <= max_length, prompt first.
            scores: (N,) float summed log-probabilities of each sequence's generated tokens up to
                and including its first EOS.
        """
        x = self._prompts_on_device(x)
        check_positive(temperature=temperature, repeat_penalty=repeat_penalty)
        return self._extend(x, lambda seqs: self._greedy_choice(seqs, temperature, repeat_penalty))

    def _greedy_choice(self, x: torch.Tensor, temperature: float, repeat_penalty: float
                       ) -> tuple[torch.Tensor, torch.Tensor]:
        """The next token of every sequence of the batch and its log-probability, greedily.

        For the whole batch at once (no Python loop over sequences):
          1. logits = ``self.score_fn(x)``, shape (N, V);
          2. penalise repeated tokens with ``self._apply_repeat_penalty(logits, x, repeat_penalty)``;
          3. log_probs = ``log_softmax(logits / temperature)`` over the vocabulary;
          4. the next token is the argmax of log_probs, and its score is that log-probability.

        Args:
            x: (N, T) int64 sequences so far (prompt included).
            temperature, repeat_penalty: as in ``generate_greedy``.
        Returns:
            next_tokens: (N,) int64.
            token_scores: (N,) float log-probabilities of next_tokens.
        Hints: torch.log_softmax, tensor.max(dim=...) gives values and indices.
        """
        # TODO: score x, penalise repeats, log-softmax at the temperature, take the best token:
        #       x (N, T) -> (next_tokens (N,), token_scores (N,))
        # BEGIN SOLUTION
        logits = self._apply_repeat_penalty(self.score_fn(x), x, repeat_penalty)
        log_probs = torch.log_softmax(logits / temperature, dim=-1)
        token_scores, next_tokens = log_probs.max(dim=-1)
        return next_tokens, token_scores
        # END SOLUTION

    def _extend(self, x: torch.Tensor, choose) -> tuple[torch.Tensor, torch.Tensor]:
        """Append one token per sequence until every sequence has emitted EOS or ``x`` holds
        ``max_length`` tokens: the loop of greedy search and sampling.

        Args:
            x: (N, T) int64 prompts on ``self.device``.
            choose: maps the sequences so far (N, T') to (next_tokens (N,) int64, token_scores
                (N,) float), the step's choice.
        Returns:
            seqs: (N, T'') int64; after a sequence's EOS, every position holds pad.
            scores: (N,) float sums of token_scores up to and including each sequence's first EOS.
        """
        scores = torch.zeros(x.size(0), device=x.device)
        finished = torch.zeros(x.size(0), dtype=torch.bool, device=x.device)
        for _ in range(self.max_length - x.size(1)):
            if finished.all():
                break
            next_tokens, token_scores = choose(x)
            scores = torch.where(finished, scores, scores + token_scores)
            next_tokens = torch.where(finished, self.tokenizer.pad_id, next_tokens)
            x = torch.cat([x, next_tokens.unsqueeze(1)], dim=1)
            finished = finished | (next_tokens == self.tokenizer.eos_id)
        return x, scores

    def generate_beam(self, x: torch.Tensor, beam_width: int, temperature: float = 1.0,
                      repeat_penalty: float = 1.0) -> tuple[torch.Tensor, torch.Tensor]:
        """Beam search: keep the ``beam_width`` most probable hypotheses per prompt at every step.

        The hypotheses are scored with ``self._score_beams``: one ``score_fn`` call of N rows per
        beam slot, so that row i always continues prompt i (see the module docstring). A finished
        hypothesis stays in the beam with its frozen score and keeps competing: it contributes one
        candidate per step (itself, followed by pad), so it is never duplicated. Since every new
        token can only lower a score, the search stops once all kept hypotheses have finished.
        Scores are not length-normalised: a beam as wide as the number of possible sequences returns
        exactly the ``beam_width`` most probable ones.

        Args:
            x: (N, T) int64 prompts.
            beam_width: int >= 1 hypotheses kept per prompt (1 is greedy search).
            temperature, repeat_penalty: as in ``generate_greedy``.
        Returns:
            seqs: (N, beam_width, T') int64, best first.
            scores: (N, beam_width) float summed log-probabilities, descending. A score of -inf
                marks an empty slot, which only happens when beam_width exceeds the number of
                distinct continuations.
        """
        x = self._prompts_on_device(x)
        check_beam_width(beam_width)
        check_positive(temperature=temperature, repeat_penalty=repeat_penalty)
        batch_size, beam = x.size(0), beam_width
        seqs = x.unsqueeze(1).repeat(1, beam, 1)
        # The beams start identical; only the first may expand, or the top-k would pick duplicates.
        scores = torch.full((batch_size, beam), float("-inf"), device=x.device)
        scores[:, 0] = 0.0
        finished = torch.zeros(batch_size, beam, dtype=torch.bool, device=x.device)
        for _ in range(self.max_length - x.size(1)):
            if finished.all():
                break
            flat = seqs.flatten(0, 1)
            logits = self._apply_repeat_penalty(self._score_beams(seqs, finished).flatten(0, 1), flat,
                                                repeat_penalty)
            vocab_size = logits.size(-1)
            log_probs = torch.log_softmax(logits / temperature, dim=-1).view(batch_size, beam, vocab_size)
            # A finished beam's only candidate is itself followed by pad, at its frozen score.
            frozen_candidate = torch.full_like(log_probs[0, 0], float("-inf"))
            frozen_candidate[self.tokenizer.pad_id] = 0.0
            step_scores = torch.where(finished.unsqueeze(-1), frozen_candidate, log_probs)
            candidates = (scores.unsqueeze(-1) + step_scores).view(batch_size, beam * vocab_size)
            scores, flat_index = candidates.topk(beam, dim=-1)
            parent, token = flat_index // vocab_size, flat_index % vocab_size
            parent_seqs = seqs.gather(1, parent.unsqueeze(-1).expand_as(seqs))
            seqs = torch.cat([parent_seqs, token.unsqueeze(-1)], dim=-1)
            finished = finished.gather(1, parent) | (token == self.tokenizer.eos_id)
        return seqs, scores

    def _score_beams(self, seqs: torch.Tensor, finished: torch.Tensor) -> torch.Tensor:
        """Next-token logits of every hypothesis: seqs (N, B, T) int64 -> (N, B, V) float.

        One ``score_fn`` call per beam slot b, on the N rows ``seqs[:, b]``, so that row i of every
        call continues prompt i. A slot whose N hypotheses have all finished (``finished`` (N, B)
        bool) is not scored: its logits are never read, and it gets zeros.
        """
        scored = {b: self.score_fn(seqs[:, b]) for b in range(seqs.size(1)) if not finished[:, b].all()}
        template = next(iter(scored.values()))
        return torch.stack([scored.get(b, torch.zeros_like(template)) for b in range(seqs.size(1))], dim=1)

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
        return self._extend(x, lambda seqs: self._sample_choice(seqs, temperature, top_k, top_p,
                                                                generator))

    def _sample_choice(self, x: torch.Tensor, temperature: float, top_k: int, top_p: float,
                       generator: torch.Generator | None) -> tuple[torch.Tensor, torch.Tensor]:
        """One draw per sequence from the filtered next-token distribution: x (N, T) int64 ->
        (next_tokens (N,) int64, token_scores (N,) float log-probabilities under that
        distribution)."""
        kept, token_ids = self._candidates(self.score_fn(x), temperature, top_k, top_p)
        log_probs = torch.log_softmax(kept, dim=-1)
        choice = torch.multinomial(log_probs.exp(), num_samples=1, generator=generator)   # (N, 1)
        token_scores = log_probs.gather(1, choice).squeeze(1)
        next_tokens = choice if token_ids is None else token_ids.gather(1, choice)
        return next_tokens.squeeze(1), token_scores

    # ----------------------------------------------------------------------------------------
    # Output clean-up
    # ----------------------------------------------------------------------------------------

    @staticmethod
    def post_process_sequence(seq: torch.Tensor, tokenizer):
        """Cut each sequence right after its first EOS (kept); sequences without EOS stay whole.

        Args:
            seq: (T,), (N, T) or (N, B, T) int64, as returned by the generate methods.
            tokenizer: anything with ``eos_id``.
        Returns:
            (T,) input: one 1-D tensor. (N, T): a list of N 1-D tensors. (N, B, T): a list of N
            lists of B 1-D tensors. Lengths differ, hence lists.
        """
        check_sequences(seq)
        if seq.dim() > 1:
            return [SequenceGenerator.post_process_sequence(row, tokenizer) for row in seq]
        eos_positions = (seq == tokenizer.eos_id).nonzero()
        if eos_positions.numel() == 0:
            return seq
        return seq[: int(eos_positions[0]) + 1]
