"""mytorch.nn: a decoder-only Transformer in numpy, each layer with forward and a hand-written backward.

The attention stack (Linear, Softmax, ScaledDotProductAttention, MultiHeadAttention) is the main
assignment; the rest, up to the whole DecoderOnlyTransformer, is the bonus track.
"""
from .activation import Softmax
from .decoder_layers import SelfAttentionDecoderLayer
from .dropout import Dropout
from .embedding import Embedding
from .gelu import GELU, erf
from .layer_norm import LayerNorm
from .linear import Linear
from .loss import CrossEntropyLoss
from .multi_head_attention import MultiHeadAttention
from .positional_encoding import PositionalEncoding
from .scaled_dot_product_attention import ScaledDotProductAttention
from .sublayers import FeedForwardLayer, SelfAttentionLayer
from .transformers import DecoderOnlyTransformer

__all__ = ["Linear", "Softmax", "ScaledDotProductAttention", "MultiHeadAttention", "Embedding",
           "LayerNorm", "GELU", "erf", "Dropout", "CrossEntropyLoss", "PositionalEncoding",
           "SelfAttentionLayer", "FeedForwardLayer", "SelfAttentionDecoderLayer",
           "DecoderOnlyTransformer"]
