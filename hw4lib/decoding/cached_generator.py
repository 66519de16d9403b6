"""``SequenceGenerator`` on a key/value cache, and ``generator_for_model``
(``SequenceGenerator.for_model``), which picks it for a ``DecoderOnlyTransformer``.

The searches are the base class's own; only the score function changes (a ``CachedScorer`` in
place of ``model.score``), and beam search scores all its hypotheses in one call, which the cached
scorer allows because it never depends on the row (each row is a sequence, nothing more).
"""
from __future__ import annotations

import functools

import torch

from hw4lib.decoding.sequence_generator import SequenceGenerator
from hw4lib.model import DecoderOnlyTransformer
from hw4lib.model.kv_cache import CachedScorer


def host_reads_are_free(device: torch.device) -> bool:
    """Whether the host reads tensors on ``device`` without waiting: on the CPU they are already
    there; on a GPU a read waits for every queued kernel (see hw4lib/model/kv_cache.py)."""
    return device.type == "cpu"


def _with_fresh_cache(search, rows_in_place: bool):
    """Wrap a search so it starts from an empty cache and frees the cache when it returns.

    Off the CPU the scorer defers its checks (``CachedScorer.deferred``) and the search reads them
    once at its end. ``rows_in_place``: the search's row i always continues row i (greedy search,
    sampling), so the cache never moves.
    """

    @functools.wraps(search)
    def run(self, *args, **kwargs):
        scorer = self.score_fn
        scorer.reset()
        scorer.deferred, scorer.rows_in_place = not host_reads_are_free(self.device), rows_in_place
        try:
            result = search(self, *args, **kwargs)
            if not scorer.consistent():
                raise RuntimeError(f"{search.__name__}: a decoding step's rows did not continue the "
                                   "previous step's, so the key/value cache was stale; decode with "
                                   "SequenceGenerator(model.score, ...) and report this")
            return result
        finally:
            scorer.reset()
            scorer.deferred = scorer.rows_in_place = False

    return run


class CachedSequenceGenerator(SequenceGenerator):
    """Greedy search, beam search and sampling for a ``DecoderOnlyTransformer``, incrementally.

    Args:
        model: a ``DecoderOnlyTransformer`` in eval mode, on ``device``.
        tokenizer, max_length, device: as ``SequenceGenerator``; ``max_length`` may not exceed
            ``model.max_len``.
    """

    def __init__(self, model, tokenizer, max_length: int, device: str | torch.device):
        if isinstance(max_length, int) and max_length > model.max_len:
            raise ValueError(f"max_length={max_length} exceeds the model's max_len={model.max_len}: "
                             "lower max_length")
        super().__init__(CachedScorer(model, capacity=max_length, eos_id=tokenizer.eos_id),
                         tokenizer, max_length, device)

    generate_greedy = _with_fresh_cache(SequenceGenerator.generate_greedy, rows_in_place=True)
    generate_beam = _with_fresh_cache(SequenceGenerator.generate_beam, rows_in_place=False)
    generate_sample = _with_fresh_cache(SequenceGenerator.generate_sample, rows_in_place=True)

    def _score_beams(self, seqs: torch.Tensor, finished: torch.Tensor) -> torch.Tensor:
        """All N x B hypotheses in one call: (N, B, T) -> (N, B, V) (finished ones cost nothing)."""
        return self.score_fn(seqs.flatten(0, 1)).view(*seqs.shape[:2], -1)


def generator_for_model(model, tokenizer, max_length: int, device: str | torch.device
                        ) -> SequenceGenerator:
    """The fastest generator for ``model`` (in eval mode), with the results of ``model.score``.

    A ``DecoderOnlyTransformer`` gets a ``CachedSequenceGenerator``: same searches, same tokens and
    scores (to float rounding) as ``SequenceGenerator(model.score, tokenizer, max_length, device)``,
    but each step runs only the newest token of each unfinished sequence through the model. Any
    other model gets exactly that plain generator.
    """
    if isinstance(model, DecoderOnlyTransformer):
        return CachedSequenceGenerator(model, tokenizer, max_length, device)
    return SequenceGenerator(model.score, tokenizer, max_length, device)


# The name the course's interface gives it. Set here, not in sequence_generator.py: this module
# imports that one, and an import back would close a circle. Importing any hw4lib.decoding module
# runs the package's __init__, which imports this one, so the name is always there.
SequenceGenerator.for_model = staticmethod(generator_for_model)
