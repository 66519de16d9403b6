"""The number format of training steps: ``training.precision: auto | fp32 | bf16 | fp16``.

bf16 and fp16 run the forward pass under ``torch.autocast``: matrix products in 16 bits,
reductions and the loss in float32, weights and optimizer state in float32. That is faster only
where the hardware multiplies 16-bit numbers natively:

* CUDA: bf16 on GPUs that support it (Ampere and later), else fp16 with a ``GradScaler``, which
  scales the loss so small fp16 gradients do not round to zero (bf16 has fp32's range and needs none);
* CPU: bf16 where the CPU has bf16 instructions (AVX512-BF16 or AMX); elsewhere autocast would
  emulate bf16 and be slower than fp32.

One layer stays in float32 under autocast: the output projection ``final_linear``
(``logits_in_float32``). Rounded to bf16, a logit of 8 is only known to +-0.03; that noise on
every token's loss and gradient cost the default model more test perplexity than the float32
projection costs in step time (the course's measurements compare both).

``auto`` picks the fastest format the device supports natively, fp32 otherwise. Evaluation always
runs in float32 (``evaluate_language_model``), so the reported perplexity does not depend on it.
"""
from __future__ import annotations

import torch
import torch.nn as nn

DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}


def cpu_has_native_bf16() -> bool:
    """True when this CPU multiplies bf16 numbers in hardware (AVX512-BF16 or AMX tiles)."""
    checks = ("_is_avx512_bf16_supported", "_is_amx_tile_supported")
    return any(getattr(torch.cpu, name, lambda: False)() for name in checks)


def resolve_precision(requested: str, device: torch.device) -> tuple[torch.dtype, str]:
    """The autocast dtype for ``requested`` (a validated ``training.precision``: auto, fp32, bf16
    or fp16) on ``device``, and a sentence saying why.

    Returns:
        (torch.float32, torch.bfloat16 or torch.float16; float32 means no autocast), reason.
    Raises:
        ValueError: fp16 off CUDA (it needs grad scaling, which only CUDA has here).
    """
    device = torch.device(device)
    if requested == "fp16" and device.type != "cuda":
        raise ValueError(f"training.precision 'fp16' needs a CUDA device (got {device.type}): "
                         "use 'bf16' or 'auto'")
    if requested != "auto":
        return DTYPES[requested], "as the config asks"
    if device.type == "cuda":
        if torch.cuda.is_bf16_supported():
            return torch.bfloat16, "auto: this GPU supports bf16"
        return torch.float16, "auto: this GPU lacks bf16, so fp16 with grad scaling"
    if device.type == "cpu" and cpu_has_native_bf16():
        return torch.bfloat16, "auto: this CPU has native bf16 instructions (AVX512-BF16/AMX)"
    return torch.float32, f"auto: no native 16-bit matrix units on {device.type}"


def precision_name(dtype: torch.dtype) -> str:
    """'fp32', 'bf16' or 'fp16'."""
    return {value: key for key, value in DTYPES.items()}[dtype]


class Float32Linear(nn.Linear):
    """An ``nn.Linear`` that computes in float32 even under autocast (input cast up, output float32)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        with torch.autocast(x.device.type, enabled=False):
            return super().forward(x.float())


def logits_in_float32(model: nn.Module) -> None:
    """Make ``model.final_linear``, when it is a plain ``nn.Linear``, compute its logits in float32.

    Only the module's class changes (to ``Float32Linear``): its parameters, a weight tied to the
    embedding, hooks and state-dict names stay as they are, and outside autocast it computes
    exactly what it computed before.
    """
    if type(getattr(model, "final_linear", None)) is nn.Linear:
        model.final_linear.__class__ = Float32Linear
