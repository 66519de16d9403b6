"""Decoding: greedy search, beam search and sampling on top of any next-token scorer."""
from hw4lib.decoding.sequence_generator import SequenceGenerator

__all__ = ["SequenceGenerator"]
