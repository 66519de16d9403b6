"""Training speed of the default config, where its time goes, and how long the last run took.

``python -m bench train`` prints:

1. training-step speed on one fixed batch of 32 x 200 tokens: float32 with the attention weights
   computed (what the trainer ran before), then ``precision: auto`` with the weights computed,
   the same with the logits left in 16 bits (the trainer computes them in float32), and with the
   fused attention path; medians of interleaved repeats, so the ratios hold on a busy
   machine (the trainer skips the weights except in bf16 on a CPU, where the plain path is faster);
   beside it, the same ratio for one layer's matrix products alone: a step's other work (norms,
   softmax, casts, the optimizer) gains nothing in 16 bits, so the step's ratio stays below it;
2. training throughput (target tokens per second, forward + backward + AdamW step) of the
   default model, as the trainer runs it, on real batches of the training set (or of a generated
   stand-in corpus when ``make data`` has not run);
3. a torch.profiler table of the operators that dominate a training step;
4. from the latest ``expts/default-*`` run with metrics: per-epoch time and validation
   perplexity, and the wall time at which the validation perplexity first reached the pass mark.
"""
from __future__ import annotations

import tempfile
import time
from contextlib import nullcontext
from functools import partial
from pathlib import Path

import numpy as np
import torch

from bench.timing import interleaved_medians
from hw4lib.data import LMDataset
from hw4lib.file_io import read_json
from hw4lib.grading_numbers import FULL_MARKS_PPL
from hw4lib.handin_format import METRICS_FILE, TIMING_FILE
from hw4lib.train import build_loader, build_model, build_tokenizer, load_config, set_seed
from hw4lib.model.fused_attention import attention_weights_off
from hw4lib.trainers.precision import logits_in_float32, precision_name, resolve_precision
from hw4lib.utils import create_optimizer

CONFIG = Path("configs/default.yaml")


def training_dataset(config, tokenizer) -> LMDataset:
    """The config's training partition, or 300k generated characters when it is missing."""
    try:
        return LMDataset(config.data.train_partition, config.data.model_dump(), tokenizer)
    except FileNotFoundError:
        from datagen.corpus import generate_split

        print("(no built data: timing on a generated stand-in corpus; run `make data` for the real one)")
        root = Path(tempfile.mkdtemp(prefix="bench_train_"))
        (root / "train").mkdir()
        for index, text in enumerate(generate_split(0, 300_000, split="bench")):
            np.save(root / "train" / f"{index:06d}.npy", np.array(list(text)))
        return LMDataset("train", {**config.data.model_dump(), "root": str(root), "subset": 1.0}, tokenizer)


def training_step(config, precision: torch.dtype, fused: bool, pad_id: int, float32_logits: bool = True):
    """A fresh default model (seed 0) and its ``step(batch) -> target tokens``, as the trainer runs it.

    ``precision`` is the autocast dtype (float32: none); ``fused`` skips the attention weights;
    ``float32_logits`` False leaves the output projection to autocast (the trainer does not).
    """
    set_seed(0)
    model = build_model(config, build_tokenizer(config)).train()
    if float32_logits:
        logits_in_float32(model)
    optimizer = create_optimizer(model, config.optimizer)
    criterion = torch.nn.CrossEntropyLoss(ignore_index=pad_id)

    def step(batch):
        shifted, golden, lengths = batch
        weights_off = attention_weights_off(model) if fused else nullcontext()
        with torch.autocast("cpu", dtype=precision, enabled=precision != torch.float32), weights_off:
            logits, _ = model(shifted, lengths)
            loss = criterion(logits.reshape(-1, logits.size(-1)), golden.reshape(-1))
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        return int(lengths.sum())

    return model, step


def compare_step_speed(config, vocab_size: int, repeats: int = 5, batch=(32, 200)) -> None:
    """Print tokens/s of auto precision (with and without fused attention, and with 16-bit logits)
    against float32."""
    auto, reason = resolve_precision("auto", torch.device("cpu"))
    tokens = torch.randint(4, vocab_size, (batch[0], batch[1] + 1), generator=torch.Generator().manual_seed(0))
    fixed_batch = (tokens[:, :-1], tokens[:, 1:], torch.full((batch[0],), batch[1]))
    variants = {"fp32, attention weights computed": (torch.float32, False, True),
                f"auto = {precision_name(auto)}, weights computed": (auto, False, True),
                f"  the same, {precision_name(auto)} logits": (auto, False, False),
                f"auto = {precision_name(auto)}, fused attention": (auto, True, True)}
    steps = {name: partial(training_step(config, precision, fused, 0, float32_logits)[1], fixed_batch)
             for name, (precision, fused, float32_logits) in variants.items()}
    medians = interleaved_medians(steps, repeats)
    print(f"training step, batch {batch[0]} x {batch[1]} tokens, medians of {repeats} ({reason}); "
          "on a shared machine run with OMP_NUM_THREADS=1 and read the CPU-time ratio:")
    base = medians[next(iter(variants))]
    for name, timing in medians.items():
        print(f"  {name:>36}: {timing.wall:6.2f} s/step {batch[0] * batch[1] / timing.wall:>9,.0f} tokens/s "
              f"{base.wall / timing.wall:5.2f}x   CPU {timing.cpu:6.2f} s/step {base.cpu / timing.cpu:5.2f}x")
    if auto != torch.float32:
        ceiling = matmul_ceiling(auto, config.model.d_model, config.model.d_ff)
        print(f"  {'one layer, matrix products only':>36}: {precision_name(auto)} {ceiling:.2f}x faster "
              "than fp32 (the ceiling of the step ratios above)")


def matmul_ceiling(dtype: torch.dtype, d_model: int, d_ff: int, tokens: int = 32 * 200,
                   repeats: int = 7) -> float:
    """How many times faster ``dtype`` runs one decoder layer's four linear products than float32.

    The products are q/k/v, the attention output and the two feed-forward linears, each over
    ``tokens`` rows (a 32 x 200 batch by default): most of a training step's arithmetic. Medians of
    interleaved repeats of the four products together.
    """
    shapes = [(d_model, 3 * d_model), (d_model, d_model), (d_model, d_ff), (d_ff, d_model)]
    operands = [(torch.randn(tokens, k), torch.randn(k, n)) for k, n in shapes]
    formats = {torch.float32: operands,
               dtype: [(left.to(dtype), right.to(dtype)) for left, right in operands]}
    medians = interleaved_medians({key: partial(multiply_all, products) for key, products in formats.items()},
                                  repeats)
    return medians[torch.float32].wall / medians[dtype].wall


def multiply_all(products: list[tuple[torch.Tensor, torch.Tensor]]) -> None:
    """``left @ right`` for each pair (the results are dropped: only the time counts)."""
    for left, right in products:
        left @ right


def measure_training(config, dataset, num_batches: int = 20, warmup_batches: int = 3):
    """Time ``num_batches`` training steps after ``warmup_batches``; return (tokens/s, chars/s, model)."""
    precision, _ = resolve_precision(config.training.precision, torch.device("cpu"))
    fused = precision != torch.bfloat16  # as BaseTrainer._attention_weights on a CPU
    model, step = training_step(config, precision, fused=fused, pad_id=dataset.pad_token)
    batches = iter(build_loader(config, dataset, shuffle=True))

    for _ in range(warmup_batches):
        step(next(batches))
    tokens, start = 0, time.perf_counter()
    for _ in range(num_batches):
        tokens += step(next(batches))
    seconds = time.perf_counter() - start
    tokens_per_second = tokens / seconds
    return tokens_per_second, tokens_per_second * dataset.get_avg_chars_per_token(), model, step, batches


def profile_steps(step, batches, num_batches: int = 5, rows: int = 12) -> str:
    """A torch.profiler table (self CPU time) over ``num_batches`` training steps."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU]) as profiler:
        for _ in range(num_batches):
            step(next(batches))
    return profiler.key_averages().table(sort_by="self_cpu_time_total", row_limit=rows)


def latest_run_summary(expts: Path = Path("expts"), prefix: str = "default") -> str:
    """Per-epoch times and validation perplexities of the newest ``<prefix>-*`` run with metrics."""
    runs = sorted((p for p in expts.glob(f"{prefix}*") if (p / "metrics" / "history.json").is_file()),
                  key=lambda p: (p / "metrics" / "history.json").stat().st_mtime)
    if not runs:
        return (f"no finished '{prefix}' run under {expts}/: run `make train` first, then this "
                "benchmark reports the time to reach the pass mark")
    run = runs[-1]
    history = read_json(run / "metrics" / "history.json")
    lines = [f"latest run: {run}"]
    elapsed, reached = 0.0, None
    for record in history:
        elapsed += record.get("epoch_seconds", 0.0)
        ppl = record["val"]["perplexity_char"]
        lines.append(f"  epoch {record['epoch']:>2}: {record.get('epoch_seconds', 0):6.0f}s  "
                     f"val ppl/char {ppl:.3f}")
        if reached is None and ppl <= FULL_MARKS_PPL:
            reached = (record["epoch"], elapsed)
    if reached:
        lines.append(f"  validation ppl/char <= {FULL_MARKS_PPL} after epoch {reached[0]}, "
                     f"{reached[1]:.0f}s of training")
    for name in (METRICS_FILE, TIMING_FILE):
        if (run / name).is_file():
            lines.append(f"  {name}: {(run / name).read_text().strip()}")
    return "\n".join(lines)


def main() -> None:
    config = load_config(CONFIG)
    tokenizer = build_tokenizer(config)
    dataset = training_dataset(config, tokenizer)
    print(f"config {CONFIG}: tokenizer {config.tokenization.token_type}, "
          f"batch {config.data.batch_size}, torch threads {torch.get_num_threads()}")
    compare_step_speed(config, tokenizer.vocab_size)
    tokens_per_second, chars_per_second, model, step, batches = measure_training(config, dataset)
    parameters = sum(p.numel() for p in model.parameters())
    epoch_seconds = dataset.total_tokens / tokens_per_second
    print(f"training throughput: {tokens_per_second:,.0f} target tokens/s "
          f"({chars_per_second:,.0f} chars/s), {parameters:,} parameters; "
          f"one epoch of this training set ~ {epoch_seconds:.0f}s")
    print("profile of 5 training steps (self CPU time):")
    print(profile_steps(step, batches))
    print(latest_run_summary())


if __name__ == "__main__":
    main()
