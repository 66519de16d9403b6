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

``auto`` picks the fastest format the device supports natively, fp32 otherwise. On a GPU with
bf16 it measures: a few training steps of the configured model in fp32 with TF32 matrix products
and in bf16 (``choose_by_timing``), and keeps the faster; both keep the logits in float32, the
quality this module's formats share. Small models can be faster in fp32 (autocast's casts cost
more than the 16-bit products save). Evaluation always
runs in float32 (``evaluate_language_model``), so the reported perplexity does not depend on it.
"""
from __future__ import annotations

from typing import Callable

import torch
import torch.nn as nn

DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}


def cpu_has_native_bf16() -> bool:
    """True when this CPU multiplies bf16 numbers in hardware (AVX512-BF16 or AMX tiles)."""
    checks = ("_is_avx512_bf16_supported", "_is_amx_tile_supported")
    return any(getattr(torch.cpu, name, lambda: False)() for name in checks)


def choose_by_timing(step_seconds: Callable[[torch.dtype], float]) -> tuple[torch.dtype, str]:
    """The faster of fp32 with TF32 matrix products and bf16 autocast, by ``step_seconds(dtype)``
    (seconds per training step; run with TF32 allowed for float32), and a sentence with both
    timings. TF32 stays allowed when fp32 wins, and is restored as it was when bf16 does."""
    before = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision("high")  # TF32 matrix products for float32
    timings = {dtype: step_seconds(dtype) for dtype in (torch.float32, torch.bfloat16)}
    best = min(timings, key=timings.get)
    if best != torch.float32:
        torch.set_float32_matmul_precision(before)
    measured = ", ".join(f"{'fp32+TF32' if dtype == torch.float32 else precision_name(dtype)} "
                         f"{seconds * 1e3:.1f} ms" for dtype, seconds in timings.items())
    return best, f"auto: measured a training step of this model: {measured}"


def resolve_precision(requested: str, device: torch.device,
                      step_seconds: Callable[[torch.dtype], float] | None = None
                      ) -> tuple[torch.dtype, str]:
    """The autocast dtype for ``requested`` (a validated ``training.precision``: auto, fp32, bf16
    or fp16) on ``device``, and a sentence saying why. ``auto`` on a GPU with bf16 times both
    formats with ``step_seconds`` when given (``choose_by_timing``).

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
            if step_seconds is not None:
                return choose_by_timing(step_seconds)
            return torch.bfloat16, "auto: this GPU supports bf16 (not measured)"
        return torch.float16, "auto: this GPU lacks bf16, so fp16 with grad scaling"
    if device.type == "cpu" and cpu_has_native_bf16():
        return torch.bfloat16, "auto: this CPU has native bf16 instructions (AVX512-BF16/AMX)"
    return torch.float32, f"auto: no native 16-bit matrix units on {device.type}"


def precision_name(dtype: torch.dtype) -> str:
    """'fp32', 'bf16' or 'fp16'."""
    return {value: key for key, value in DTYPES.items()}[dtype]


def train_step_seconds(model: nn.Module, batch_size: int, length: int, device: torch.device,
                       dtype: torch.dtype, steps: int = 5) -> float:
    """Median seconds of a training step (forward under ``dtype`` autocast, cross-entropy,
    backward, AdamW step) of a copy of ``model`` (a ``DecoderOnlyTransformer``) on random
    (batch_size, length) int64 tokens on ``device``, after one warm-up step. ``model`` itself is
    left untouched."""
    import copy
    import time

    twin = copy.deepcopy(model).to(device).train()
    logits_in_float32(twin)
    optimizer = torch.optim.AdamW(twin.parameters(), lr=1e-4)
    tokens = torch.randint(0, twin.num_classes, (batch_size, length + 1), device=device)
    lengths = torch.full((batch_size,), length, device=device)
    times = []
    for _ in range(steps + 1):
        start = time.perf_counter()
        with torch.autocast(device.type, dtype=dtype, enabled=dtype != torch.float32):
            logits, _ = twin(tokens[:, :-1], lengths)
        loss = nn.functional.cross_entropy(logits.flatten(0, 1).float(), tokens[:, 1:].flatten())
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        times.append(time.perf_counter() - start)
    return sorted(times[1:])[steps // 2]


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
