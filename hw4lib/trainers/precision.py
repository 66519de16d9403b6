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

``auto`` picks the fastest format the device supports natively, fp32 otherwise. Where 16-bit
products are native (a GPU with bf16, a CPU with AVX512-BF16 or AMX) it measures: a few training
steps of the configured model in each format the device has (``measure_formats``: fp32, fp32 with
TF32 matrix products on a GPU, bf16), all with the logits in float32, and keeps the fastest (a tie
keeps the earlier, fp32 first). Small models can be faster in fp32 (autocast's casts cost more
than the 16-bit products save). The measurement is recorded (``recorded_speeds``: a JSON file in
the experiments folder, one per device, torch version and model) and every later run of that
model there reads the record instead of measuring again, so the notebook and ``make train`` of one
config choose alike even on a loaded machine. Evaluation always runs in float32
(``evaluate_language_model``), so the reported perplexity does not depend on it.
"""
from __future__ import annotations

import hashlib
import json
import os
import platform
from pathlib import Path
from typing import Callable

import torch
import torch.nn as nn

from hw4lib.file_io import json_text, read_json

DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}
# The formats auto measures: name -> (autocast dtype, the float32 matmul precision it runs with).
FORMATS = {"fp32": (torch.float32, "highest"), "fp32+TF32": (torch.float32, "high"),
           "bf16": (torch.bfloat16, "highest")}
RECORD_PREFIX = "precision-auto-"  # auto's records in the experiments folder


def cpu_has_native_bf16() -> bool:
    """True when this CPU multiplies bf16 numbers in hardware (AVX512-BF16 or AMX tiles)."""
    checks = ("_is_avx512_bf16_supported", "_is_amx_tile_supported")
    return any(getattr(torch.cpu, name, lambda: False)() for name in checks)


def has_native_bf16(device: torch.device) -> bool:
    """True when ``device`` multiplies bf16 numbers in hardware (a GPU with bf16, a CPU with
    AVX512-BF16 or AMX)."""
    if device.type == "cuda":
        return torch.cuda.is_bf16_supported()
    return device.type == "cpu" and cpu_has_native_bf16()


def formats_on(device: torch.device) -> list[str]:
    """The ``FORMATS`` that ``auto`` measures on ``device``, in order: fp32, fp32+TF32 on CUDA,
    bf16 where it is native."""
    names = ["fp32"]
    if device.type == "cuda":
        names.append("fp32+TF32")
    if has_native_bf16(device):
        names.append("bf16")
    return names


def measure_formats(model: nn.Module, batch_size: int, length: int, device: torch.device,
                    steps: int = 5) -> dict[str, float]:
    """Training-step tokens per second (``batch_size * length`` over ``train_step_seconds``) of
    ``model`` in each of ``formats_on(device)``, each under its float32 matmul precision, which is
    restored afterwards."""
    before = torch.get_float32_matmul_precision()
    speeds = {}
    try:
        for name in formats_on(device):
            dtype, matmul = FORMATS[name]
            torch.set_float32_matmul_precision(matmul)
            seconds = train_step_seconds(model, batch_size, length, device, dtype, steps)
            speeds[name] = batch_size * length / seconds
    finally:
        torch.set_float32_matmul_precision(before)
    return speeds


def fastest(speeds: dict[str, float]) -> str:
    """The format with the most tokens per second; a tie keeps the earlier in ``speeds``."""
    return max(speeds, key=speeds.get)


def device_description(device: torch.device, cpuinfo: Path = Path("/proc/cpuinfo")) -> str:
    """What a measurement on ``device`` depends on: the GPU's name, or the CPU's model name (the
    first ``model name`` line of ``cpuinfo`` where there is one, else the platform's processor or
    machine name) with torch's CPU capability (e.g. AVX512)."""
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    names = [line.partition(":")[2].strip() for line in
             (cpuinfo.read_text().splitlines() if cpuinfo.is_file() else [])
             if line.startswith("model name")]
    model_name = names[0] if names else platform.processor() or platform.machine()
    return f"{device.type}: {model_name} ({torch.backends.cpu.get_cpu_capability()})"


def measurement_key(model: nn.Module, batch_size: int, length: int, device: torch.device) -> dict:
    """What ``auto``'s measurement of ``model`` depends on: the device, the torch version, the
    model (a digest of its printout: layers, sizes, vocabulary) and the timed batch's shape."""
    return {"device": device_description(device), "torch": torch.__version__,
            "model_sha256": hashlib.sha256(str(model).encode()).hexdigest(),
            "batch_size": batch_size, "length": length}


def recorded_speeds(folder: Path, key: dict, measure: Callable[[], dict[str, float]]
                    ) -> tuple[dict[str, float], str]:
    """The speeds (format name -> tokens/s) recorded in ``folder`` for ``key``; when there is no
    record, ``measure()``'s, recorded first. Also a sentence saying which happened and where.

    The record is ``folder/precision-auto-<12 hex digits of key's sha256>.json``, holding ``key``
    and ``tokens_per_s``. It is linked into place, never replaced: when two runs measure at once,
    the first to record wins and both use its speeds.

    Raises:
        ValueError: the record is not one (not JSON, or no ``tokens_per_s`` of known formats).
    """
    digest = hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:12]
    path = Path(folder) / f"{RECORD_PREFIX}{digest}.json"
    source = f"read from {path}; delete it to measure again"
    if not path.is_file():
        speeds = measure()
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
        tmp.write_text(json_text({**key, "tokens_per_s": speeds}), encoding="utf-8")
        try:
            os.link(tmp, path)
            source = f"measured now, recorded in {path} for later runs"
        except FileExistsError:
            source = f"measured now, but another run recorded first: {source}"
        except OSError:  # a file system without hard links: the last to record wins
            os.replace(tmp, path)
        tmp.unlink(missing_ok=True)
    try:
        speeds = read_json(path)["tokens_per_s"]
        if not speeds or not set(speeds) <= set(FORMATS):
            raise ValueError(f"tokens_per_s names no formats of {sorted(FORMATS)}: {speeds}")
    except (ValueError, KeyError, TypeError) as error:
        raise ValueError(f"{path} is not a record of precision auto's measurement ({error}): "
                         "delete it and auto measures again") from error
    return speeds, source


def resolve_precision(requested: str, device: torch.device,
                      speeds: Callable[[], tuple[dict[str, float], str]] | None = None
                      ) -> tuple[torch.dtype, str]:
    """The autocast dtype for ``requested`` (a validated ``training.precision``: auto, fp32, bf16
    or fp16) on ``device``, and a sentence saying why.

    ``auto`` where bf16 is native calls ``speeds()`` when given (format name -> tokens/s, and where
    they come from: ``recorded_speeds``), keeps the ``fastest`` and sets the float32 matmul
    precision it was measured with (TF32 on for fp32+TF32, off otherwise); without ``speeds`` it
    says bf16, not measured.

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
    if device.type == "cuda" and not torch.cuda.is_bf16_supported():
        return torch.float16, "auto: this GPU lacks bf16, so fp16 with grad scaling"
    if not has_native_bf16(device):
        return torch.float32, f"auto: no native 16-bit matrix units on {device.type}"
    if speeds is None:
        return torch.bfloat16, f"auto: this {device.type} has native bf16 (not measured)"
    measured, source = speeds()
    name = fastest(measured)
    dtype, matmul = FORMATS[name]
    torch.set_float32_matmul_precision(matmul)
    timings = ", ".join(f"{format_name} {value:,.0f} tokens/s" for format_name, value in measured.items())
    return dtype, f"auto: {name} trained this model fastest here ({timings}; {source})"


def precision_name(dtype: torch.dtype) -> str:
    """'fp32', 'bf16' or 'fp16'."""
    return {value: key for key, value in DTYPES.items()}[dtype]


def train_step_seconds(model: nn.Module, batch_size: int, length: int, device: torch.device,
                       dtype: torch.dtype, steps: int) -> float:
    """Median seconds of a training step (forward under ``dtype`` autocast, cross-entropy,
    backward, AdamW step) of a copy of ``model`` (a ``DecoderOnlyTransformer``) on random
    (batch_size, length) int64 tokens on ``device``, after one warm-up step. ``model`` itself and
    torch's random state are left as they were: a run that measures trains as one that reads the
    measurement."""
    import copy
    import time

    with torch.random.fork_rng(devices=[device] if device.type == "cuda" else []):
        twin = copy.deepcopy(model).to(device).train()
        logits_in_float32(twin)
        optimizer = torch.optim.AdamW(twin.parameters(), lr=1e-4)  # pragma: no mutate (equivalent: the copy's weights are thrown away, only the step's time is read)
        tokens = torch.randint(twin.num_classes, (batch_size, length + 1), device=device)
        lengths = torch.full((batch_size,), length, device=device)
        times = []
        for _ in range(steps + 1):
            start = time.perf_counter()
            with torch.autocast(device.type, dtype=dtype, enabled=dtype != torch.float32):
                logits, _ = twin(tokens[:, :-1], lengths)
            loss = nn.functional.cross_entropy(logits.flatten(0, 1).float(),
                                               tokens[:, 1:].flatten())
            loss.backward()
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)  # pragma: no mutate (equivalent: zeroed or dropped, the next backward's time is alike)
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
