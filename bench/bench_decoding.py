"""Generation speed of the default model: greedy, beam and sampling, and the searches' own overhead.

The model is ``DecoderOnlyTransformer(**config["model"], num_classes=V)`` of configs/default.yaml,
untrained (seed 0), in eval mode under ``torch.no_grad``; ``model.score`` is the score_fn, which
re-runs the whole prefix every step (no key/value cache), so a step costs more as sequences grow.
EOS is forbidden while timing so every sequence really generates ``NEW_TOKENS`` tokens. Beam search
runs on BATCH // BEAM_WIDTH prompts, so that every search scores BATCH rows per step; its tokens/s
counts the best beam's tokens only. The "search only" column replays the same loop with a free
score_fn (a fixed logits row), which isolates what the SequenceGenerator itself costs.

    .venv/bin/python -m bench bench_decoding      # or: make bench BENCH=bench_decoding
"""
from __future__ import annotations

import time
from pathlib import Path

import torch
import yaml

from hw4lib.decoding import SequenceGenerator

CONFIG = Path(__file__).resolve().parents[1] / "configs" / "default.yaml"
BATCH, PROMPT_LEN, NEW_TOKENS, BEAM_WIDTH = 16, 10, 100, 4


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


def without_eos(score_fn, eos_id: int):
    """Wrap a score_fn so EOS is never chosen: every run then lasts exactly NEW_TOKENS steps."""

    def score(x: torch.Tensor) -> torch.Tensor:
        logits = score_fn(x)
        logits[:, eos_id] = float("-inf")
        return logits

    return score


def timed(run) -> float:
    """Seconds taken by one call of ``run()``."""
    start = time.perf_counter()
    run()
    return time.perf_counter() - start


def main() -> None:
    model, tokenizer = load_model_and_tokenizer()
    if model is None:
        return
    vocab_size = tokenizer.vocab_size
    prompts = torch.randint(0, vocab_size, (BATCH, PROMPT_LEN), generator=torch.Generator().manual_seed(0))
    prompts[:, 0] = tokenizer.sos_id
    free_logits = torch.randn(vocab_size, generator=torch.Generator().manual_seed(1))

    def make(score_fn) -> SequenceGenerator:
        return SequenceGenerator(without_eos(score_fn, tokenizer.eos_id), tokenizer,
                                 max_length=PROMPT_LEN + NEW_TOKENS, device="cpu")

    with_model = make(model.score)
    search_only = make(lambda x: free_logits.expand(x.size(0), -1).clone())
    searches = {  # name: (number of prompts, run)
        "greedy": (BATCH, lambda g: g.generate_greedy(prompts)),
        f"beam, width {BEAM_WIDTH}": (BATCH // BEAM_WIDTH,
                                      lambda g: g.generate_beam(prompts[: BATCH // BEAM_WIDTH], BEAM_WIDTH)),
        "sample, top_k=50 top_p=0.9": (BATCH, lambda g: g.generate_sample(prompts, top_k=50, top_p=0.9)),
    }
    print(f"model: {sum(p.numel() for p in model.parameters()) / 1e6:.2f}M parameters, vocab {vocab_size}, "
          f"batch {BATCH}, prompt {PROMPT_LEN} tokens, {NEW_TOKENS} new tokens, "
          f"{torch.get_num_threads()} torch threads", flush=True)
    print(f"{'search':>28} {'seconds':>8} {'new tokens/s':>13} {'ms/step':>8} {'search only ms/step':>20}")
    with torch.no_grad():
        model.score(prompts)  # warm-up: first-call allocations stay out of the timings
        for name, (num_prompts, search) in searches.items():
            seconds = timed(lambda: search(with_model))
            search(search_only)  # warm-up: the free score_fn is cheap enough to run twice
            overhead = timed(lambda: search(search_only))
            print(f"{name:>28} {seconds:>8.2f} {num_prompts * NEW_TOKENS / seconds:>13.0f} "
                  f"{1e3 * seconds / NEW_TOKENS:>8.1f} {1e3 * overhead / NEW_TOKENS:>20.2f}", flush=True)


if __name__ == "__main__":
    main()
