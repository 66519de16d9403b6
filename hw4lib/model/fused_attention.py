"""Skip the attention weights where nobody reads them, so attention runs as one fused kernel.

``nn.MultiheadAttention`` returns its (N, T, T) attention weights only when called with
``need_weights=True`` (the sublayer asks for them: the model's forward returns them). Computing
them forces the unfused path: the scores are materialised, softmaxed and kept for backward. With
``need_weights=False`` it calls ``F.scaled_dot_product_attention`` instead, which is faster and
uses less memory, and returns None for the weights. Training and evaluation steps never read the
weights, so they run inside ``attention_weights_off(model)``; outside it, the forward keeps its
contract (the weights in the returned dict).
"""
from __future__ import annotations

import inspect
from contextlib import contextmanager
from typing import Iterator

from torch import nn

_ATTENTION_FORWARD = inspect.signature(nn.MultiheadAttention.forward)


def _no_weights(module: nn.Module, args: tuple, kwargs: dict) -> tuple[tuple, dict]:
    """Forward pre-hook: call the attention with need_weights=False, however it was asked.

    The call is bound to ``nn.MultiheadAttention.forward``'s signature, so ``need_weights`` is
    found by its name whether it was passed by position, by keyword or left to its default.
    """
    call = _ATTENTION_FORWARD.bind(module, *args, **kwargs)
    call.arguments["need_weights"] = False
    return call.args[1:], call.kwargs


@contextmanager
def attention_weights_off(model: nn.Module) -> Iterator[None]:
    """Within the block, every ``nn.MultiheadAttention`` in ``model`` returns None as its weights.

    The layers' outputs are unchanged (to float rounding); the attention dict the model returns
    then holds None for every layer.
    """
    handles = [module.register_forward_pre_hook(_no_weights, with_kwargs=True)
               for module in model.modules() if isinstance(module, nn.MultiheadAttention)]
    try:
        yield
    finally:
        for handle in handles:
            handle.remove()
