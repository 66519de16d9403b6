"""Decoding: greedy search, beam search and sampling on top of any next-token scorer."""
from hw4lib.decoding.sequence_generator import SequenceGenerator
from hw4lib.decoding import cached_generator  # noqa: F401 - registers the cached fast path

__all__ = ["SequenceGenerator"]
