"""Speed and size of the default model: one training step (forward + backward) and one inference
forward on a batch of 32 x 256 tokens, and the parameter count.

The model is ``DecoderOnlyTransformer(**config.model, num_classes=V)`` of configs/default.yaml,
with V the vocabulary of the 1k tokenizer (1000 if its JSON is missing), seed 0. Each timing is the
best of a few repeats after one warm-up, which is the least disturbed figure on a shared machine.

    .venv/bin/python -m bench bench_model      # or: make bench BENCH=bench_model
"""
import os
import time
from pathlib import Path

import torch
import torch.nn.functional as F

from hw4lib.config import load_config
from hw4lib.model import DecoderOnlyTransformer

REPO_ROOT = Path(__file__).resolve().parents[1]
CONFIG = REPO_ROOT / "configs" / "default.yaml"
TOKENIZER_JSON = REPO_ROOT / "hw4lib" / "data" / "tokenizer_jsons" / "tokenizer_1000.json"
BATCH, LENGTH, REPEATS = 32, 256, 3


def vocab_size() -> int:
    """Vocabulary of the committed 1k tokenizer, or 1000 when it is not there."""
    if not TOKENIZER_JSON.is_file():
        return 1000
    from tokenizers import Tokenizer

    return Tokenizer.from_file(str(TOKENIZER_JSON)).get_vocab_size()


def best_time(step, repeats: int = REPEATS) -> float:
    """Seconds of the fastest of ``repeats`` calls of step(), after one warm-up call."""
    step()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        step()
        times.append(time.perf_counter() - start)
    return min(times)


def main() -> None:
    model_config = load_config(CONFIG).model.model_dump()
    vocab = vocab_size()
    torch.manual_seed(0)
    model = DecoderOnlyTransformer(**model_config, num_classes=vocab)
    parameters = sum(p.numel() for p in model.parameters())  # a tied matrix is counted once
    tokens = torch.randint(0, vocab, (BATCH, LENGTH))
    lengths = torch.full((BATCH,), LENGTH)

    def train_step() -> None:
        model.zero_grad(set_to_none=True)
        logits, _ = model(tokens, lengths)
        F.cross_entropy(logits.reshape(-1, vocab), tokens.reshape(-1)).backward()

    def inference_forward() -> None:
        with torch.inference_mode():
            model(tokens, lengths)

    model.train()
    train_seconds = best_time(train_step)
    model.eval()
    eval_seconds = best_time(inference_forward)

    config_text = ", ".join(f"{key}={value}" for key, value in model_config.items())
    print(f"model: {config_text}, num_classes={vocab}")
    print(f"parameters: {parameters:,} ({parameters * 4 / 2**20:.1f} MiB in float32)")
    load = ", ".join(f"{value:.1f}" for value in os.getloadavg())
    print(f"batch: {BATCH} x {LENGTH} tokens, torch threads: {torch.get_num_threads()}, "
          f"load average: {load} (a busy machine slows every figure)")
    print(f"{'measurement':<36} {'seconds':>8} {'tokens/s':>10}")
    tokens_per_batch = BATCH * LENGTH
    for name, seconds in [("train step (forward + backward)", train_seconds),
                          ("inference forward (eval, no grad)", eval_seconds)]:
        print(f"{name:<36} {seconds:>8.3f} {tokens_per_batch / seconds:>10.0f}")


if __name__ == "__main__":
    main()
