"""mytorch.nn: the attention stack in numpy, each layer with forward and a hand-written backward."""
from .activation import Softmax
from .linear import Linear
from .multi_head_attention import MultiHeadAttention
from .scaled_dot_product_attention import ScaledDotProductAttention

__all__ = ["Linear", "Softmax", "ScaledDotProductAttention", "MultiHeadAttention"]
