"""Decoding: greedy search, beam search and sampling on top of any next-token scorer."""
from hw4lib.decoding.cached_generator import generator_for_model
from hw4lib.decoding.sequence_generator import SequenceGenerator

__all__ = ["SequenceGenerator", "generator_for_model"]
