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
``SequenceGenerator.for_model(model, ...)`` runs the same searches on a key/value cache, with the
same tokens and scores as ``SequenceGenerator(model.score, ...)``.
"""
from __future__ import annotations

from typing import Callable

import torch

from ._checks import check_beam_width, check_generator, check_positive, check_prompts, check_sequences
from .sampling import Sampling

ScoreFn = Callable[[torch.Tensor], torch.Tensor]


class SequenceGenerator(Sampling):
    """Autoregressive decoding driven by a next-token scoring function.

    Greedy search and beam search are here; ``generate_sample`` and its logit filters
    (``_filter_logits``) come from ``Sampling``.

    Args:
        score_fn: maps sequences (N, T) int64 to next-token logits (N, V) float; for a
            ``DecoderOnlyTransformer`` pass ``model.score`` with the model in eval mode.
        tokenizer: anything with ``eos_id``, ``pad_id``, ``vocab_size`` and ``decode`` (an
            ``H4Tokenizer`` in practice).
        max_length: the total length (prompt + generated tokens) at which generation stops.
        device: where the sequences live; prompts are moved there.

    ``SequenceGenerator.for_model(model, tokenizer, max_length, device)`` gives the fastest
    generator for a model, with ``model.score``'s results: it is ``generator_for_model``, which
    ``cached_generator.py`` attaches here (that module subclasses this class, so this one cannot
    import it).
    """

    def __init__(self, score_fn: ScoreFn, tokenizer, max_length: int, device: str | torch.device):
        check_generator(score_fn, max_length)
        self.score_fn = score_fn
        self.tokenizer = tokenizer
        self.max_length = max_length
        self.device = torch.device(device)

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

    # ----------------------------------------------------------------------------------------
    # Greedy search (yours)
    # ----------------------------------------------------------------------------------------

    def generate_greedy(self, x: torch.Tensor, temperature: float = 1.0,
                        repeat_penalty: float = 1.0) -> tuple[torch.Tensor, torch.Tensor]:
        """Extend each prompt with its most probable next token until EOS or ``max_length``.

        For the whole batch at once (no Python loop over sequences), while some sequence is
        unfinished and ``x`` holds fewer than ``max_length`` tokens:
          1. logits = ``self.score_fn(x)``, shape (N, V), on all of ``x`` (the score_fn contract);
          2. penalise repeated tokens with ``self._apply_repeat_penalty(logits, x, repeat_penalty)``;
          3. log_probs = ``log_softmax(logits / temperature)`` over the vocabulary;
          4. each sequence's next token is its argmax, and that log-probability is added to its
             score, except for finished sequences: they keep their score and get ``pad_id``;
          5. append the tokens to ``x``; a sequence that has just emitted ``eos_id`` is finished.

        Args:
            x: (N, T) int64 prompts.
            temperature: > 0; changes the scores, not the chosen tokens.
            repeat_penalty: > 0; 1.0 disables it.
        Returns:
            seqs: (N, T') int64 with T <= T' <= max_length, prompt first; T' = T when the prompts
                already hold max_length tokens (then score_fn is never called).
            scores: (N,) float summed log-probabilities of each sequence's generated tokens up to
                and including its first EOS.
        Hints: torch.log_softmax; tensor.max(dim=...) gives values and indices; torch.where keeps
            the finished rows as they were; make every new tensor on x.device.
        """
        x = self._prompts_on_device(x)
        check_positive(temperature=temperature, repeat_penalty=repeat_penalty)
        # TODO: steps 1-5 of the docstring, for the whole batch: x (N, T) -> (seqs (N, T'), scores (N,))
        # BEGIN SOLUTION
        scores = torch.zeros(x.size(0), device=x.device)
        finished = torch.zeros(x.size(0), dtype=torch.bool, device=x.device)
        for _ in range(self.max_length - x.size(1)):
            if finished.all():
                break
            logits = self._apply_repeat_penalty(self.score_fn(x), x, repeat_penalty)
            log_probs = torch.log_softmax(logits / temperature, dim=-1)
            token_scores, next_tokens = log_probs.max(dim=-1)
            scores = torch.where(finished, scores, scores + token_scores)
            next_tokens = torch.where(finished, self.tokenizer.pad_id, next_tokens)
            x = torch.cat([x, next_tokens.unsqueeze(1)], dim=1)
            finished = finished | (next_tokens == self.tokenizer.eos_id)
        return x, scores
        # END SOLUTION

    # ----------------------------------------------------------------------------------------
    # Beam search (given; sampling is in sampling.py)
    # ----------------------------------------------------------------------------------------

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

        That is also why the best beam can be the prompt followed at once by EOS, which decodes to
        an empty continuation. That hypothesis enters the beam whenever EOS is among the
        ``beam_width`` most probable first tokens, and its score is that one log-probability, while
        every longer hypothesis pays one log-probability per token: a weak model's continuation to
        ``max_length`` easily scores below a single unlikely EOS. Beam search then returns the empty
        continuation, correctly, as the more probable one; greedy search goes on unless EOS is the
        single most probable token, and sampling unless EOS is drawn.

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
        while seqs.size(-1) < self.max_length and not finished.all():
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
