"""The decoder-only Transformer and its parts, built bottom-up in this order:
masks -> positional encoding -> sublayers -> decoder layer -> model."""
from .decoder_layers import SelfAttentionDecoderLayer
from .masks import CausalMask, PadMask
from .positional_encoding import PositionalEncoding
from .sublayers import FeedForwardLayer, SelfAttentionLayer
from .transformers import DecoderOnlyTransformer

__all__ = [
    "CausalMask",
    "PadMask",
    "PositionalEncoding",
    "SelfAttentionLayer",
    "FeedForwardLayer",
    "SelfAttentionDecoderLayer",
    "DecoderOnlyTransformer",
]
