"""Compare torch devices by what they mean, not by how they are spelled."""
from __future__ import annotations

import torch


def resolved_device(device: str | torch.device) -> torch.device:
    """``device`` with its index filled in: ``cuda`` -> ``cuda:<current device>``.

    A tensor created on ``torch.device("cuda")`` reports ``cuda:0`` (the current device), so
    ``torch.device("cuda") != tensor.device`` although both name the same GPU. Devices without
    an index of their own (``cpu``, ``meta``), and ``cuda`` where torch sees no GPU, come back as
    they are.
    """
    device = torch.device(device)
    if device.index is None and device.type == "cuda" and torch.cuda.is_available():
        return torch.device("cuda", torch.cuda.current_device())
    return device


def same_device(a: str | torch.device, b: str | torch.device) -> bool:
    """Whether ``a`` and ``b`` are the same place: same type, and the same index once an index
    left out is resolved to the current device (``cuda`` is ``cuda:0`` while device 0 is
    current, and not ``cuda:1``)."""
    return resolved_device(a) == resolved_device(b)
