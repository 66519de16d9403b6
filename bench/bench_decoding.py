"""Generation speed of the default model: the key/value cache against full recomputation.

The model is ``DecoderOnlyTransformer(**config["model"], num_classes=V)`` of configs/default.yaml,
untrained (seed 0), in eval mode under ``torch.no_grad``. Each search runs twice per repeat on the
same BATCH prompts: with ``SequenceGenerator(model.score, ...)``, which re-runs the whole prefix
every step, and with ``SequenceGenerator.for_model(model, ...)``, which keeps each layer's keys and
values. The EOS logit's bias is pushed to -1e4 so every sequence generates exactly ``NEW_TOKENS``
tokens. Times are medians of REPEATS interleaved runs, so the speed-up is a ratio measured in one
run on the same, possibly busy, machine; "same tokens" confirms both generators agreed.

    .venv/bin/python -m bench bench_decoding      # or: make bench BENCH=bench_decoding
"""
from __future__ import annotations

import statistics
import time
from pathlib import Path

import torch
import yaml

from hw4lib.decoding import SequenceGenerator

CONFIG = Path(__file__).resolve().parents[1] / "configs" / "default.yaml"
BATCH, PROMPT_LEN, NEW_TOKENS, BEAM_WIDTH, REPEATS = 16, 10, 100, 3, 3


def load_model_and_tokenizer():
    """The default config's model and tokenizer, or None when the model code cannot be built yet."""
    from hw4lib.data import H4Tokenizer

    config = yaml.safe_load(CONFIG.read_text())
    tokenizer = H4Tokenizer(config["tokenization"]["token_map"], config["tokenization"]["token_type"])
    try:
        from hw4lib.model import DecoderOnlyTransformer

        torch.manual_seed(0)
        model = DecoderOnlyTransformer(**config["model"], num_classes=tokenizer.vocab_size)
    except (ImportError, NotImplementedError) as error:
        print(f"model not available ({type(error).__name__}: {error}); nothing measured")
        return None, tokenizer
    return model.eval(), tokenizer


def timed(run) -> tuple[float, object]:
    """(seconds taken by one call of ``run()``, its result)."""
    start = time.perf_counter()
    result = run()
    return time.perf_counter() - start, result


def main() -> None:
    model, tokenizer = load_model_and_tokenizer()
    if model is None:
        return
    with torch.no_grad():
        model.final_linear.bias[tokenizer.eos_id] = -1e4  # never finish: every run is NEW_TOKENS long
    prompts = torch.randint(0, tokenizer.vocab_size, (BATCH, PROMPT_LEN), generator=torch.Generator().manual_seed(0))
    prompts[:, 0] = tokenizer.sos_id
    max_length = PROMPT_LEN + NEW_TOKENS
    generators = {"uncached": SequenceGenerator(model.score, tokenizer, max_length, "cpu"),
                  "cached": SequenceGenerator.for_model(model, tokenizer, max_length, "cpu")}
    searches = {
        "greedy": lambda g: g.generate_greedy(prompts),
        f"beam, width {BEAM_WIDTH}": lambda g: g.generate_beam(prompts, BEAM_WIDTH),
        "sample, top_k=50 top_p=0.9": lambda g: g.generate_sample(
            prompts, top_k=50, top_p=0.9, generator=torch.Generator().manual_seed(0)),
    }
    print(f"model: {sum(p.numel() for p in model.parameters()) / 1e6:.2f}M parameters, vocab "
          f"{tokenizer.vocab_size}, batch {BATCH} prompts of {PROMPT_LEN} tokens, {NEW_TOKENS} new tokens, "
          f"{torch.get_num_threads()} torch threads, medians of {REPEATS} runs")
    print(f"{'search':>28} {'uncached s':>11} {'cached s':>9} {'speed-up':>9} {'cached tokens/s':>16} same tokens")
    with torch.no_grad():
        model.score(prompts)  # warm-up: first-call allocations stay out of the timings
        for name, search in searches.items():
            seconds = {kind: [] for kind in generators}
            outputs = {}
            for _ in range(REPEATS):
                for kind, generator in generators.items():
                    elapsed, outputs[kind] = timed(lambda: search(generator))
                    seconds[kind].append(elapsed)
            uncached, cached = (statistics.median(seconds[kind]) for kind in generators)
            same = torch.equal(outputs["uncached"][0], outputs["cached"][0])
            print(f"{name:>28} {uncached:>11.2f} {cached:>9.3f} {uncached / cached:>8.1f}x "
                  f"{BATCH * NEW_TOKENS / cached:>16.0f} {'yes' if same else 'NO'}", flush=True)


if __name__ == "__main__":
    main()
