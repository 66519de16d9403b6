"""Generation speed of the default model: the key/value cache against full recomputation.

The model is configs/default.yaml's, untrained, with peaked distributions and EOS never chosen
(``hw4lib.gpu_check.peaked_model``), under ``torch.no_grad``. Each search runs twice per repeat on
the same BATCH prompts: with ``SequenceGenerator(model.score, ...)``, which re-runs the whole
prefix every step, and with ``generator_for_model(model, ...)``, which keeps each layer's keys and
values; every sequence generates exactly ``NEW_TOKENS`` tokens. Times
are medians of REPEATS interleaved runs after a warm-up run of each, in wall-clock seconds and in
CPU seconds of this process: on a machine shared with other jobs, run it with
``OMP_NUM_THREADS=1`` and read the CPU-time ratio (two threads on an overloaded machine spend most
of their time waiting for each other). "same tokens" and the largest score difference confirm
that both generators agreed. Where greedy search or sampling did not, the line names the first
differing token and the gap between the two best logits of ``model.score`` there: a gap near
float rounding (about 1e-5 of the logits) is a near-tie that the two summation orders break
differently, not a cache error (tests/library/test_kv_cache.py checks exactness). For beam search it
names the first prompt whose beams differ.

    OMP_NUM_THREADS=1 .venv/bin/python -m bench bench_decoding
    make bench BENCH=bench_decoding
"""
from __future__ import annotations

from functools import partial
from pathlib import Path

import torch

from bench.timing import interleaved_medians
from hw4lib.decoding import SequenceGenerator, generator_for_model
from hw4lib.gpu_check import peaked_model

CONFIG = Path(__file__).resolve().parents[1] / "configs" / "default.yaml"
BATCH, PROMPT_LEN, NEW_TOKENS, BEAM_WIDTH, REPEATS = 16, 10, 100, 3, 3


def load_model_and_tokenizer():
    """:func:`hw4lib.gpu_check.peaked_model` of the default config on the CPU, or (None, None) when
    the model code cannot be built yet."""
    try:
        return peaked_model(CONFIG)
    except (ImportError, NotImplementedError) as error:
        print(f"model not available ({type(error).__name__}: {error}); nothing measured")
        return None, None


def main() -> None:
    model, tokenizer = load_model_and_tokenizer()
    if model is None:
        return
    prompts = torch.randint(0, tokenizer.vocab_size, (BATCH, PROMPT_LEN), generator=torch.Generator().manual_seed(0))
    prompts[:, 0] = tokenizer.sos_id
    max_length = PROMPT_LEN + NEW_TOKENS
    generators = {"uncached": SequenceGenerator(model.score, tokenizer, max_length, "cpu"),
                  "cached": generator_for_model(model, tokenizer, max_length, "cpu")}
    searches = {
        "greedy": lambda g: g.generate_greedy(prompts),
        f"beam, width {BEAM_WIDTH}": lambda g: g.generate_beam(prompts, BEAM_WIDTH),
        "sample, top_k=50 top_p=0.9": lambda g: g.generate_sample(
            prompts, top_k=50, top_p=0.9, generator=torch.Generator().manual_seed(0)),
    }
    print(f"model: {sum(p.numel() for p in model.parameters()) / 1e6:.2f}M parameters, vocab "
          f"{tokenizer.vocab_size}, batch {BATCH} prompts of {PROMPT_LEN} tokens, {NEW_TOKENS} new tokens, "
          f"{torch.get_num_threads()} torch threads, medians of {REPEATS} runs")
    print(f"{'search':>28} {'uncached s':>11} {'cached s':>9} {'speed-up':>9} {'CPU s':>13} {'CPU speed-up':>13} "
          f"{'cached tokens/s':>16} same tokens (max score diff)")
    with torch.no_grad():
        for name, search in searches.items():
            timings = interleaved_medians({kind: partial(search, generator) for kind, generator in generators.items()},
                                          REPEATS)
            uncached, cached = timings["uncached"], timings["cached"]
            score_diff = (uncached.result[1] - cached.result[1]).abs().max().item()
            print(f"{name:>28} {uncached.wall:>11.2f} {cached.wall:>9.3f} {uncached.wall / cached.wall:>8.1f}x "
                  f"{uncached.cpu:>6.1f}/{cached.cpu:<6.2f} {uncached.cpu / cached.cpu:>12.1f}x "
                  f"{BATCH * NEW_TOKENS / cached.wall:>16.0f} "
                  f"{agreement(model, uncached.result[0], cached.result[0])} ({score_diff:.1e})", flush=True)


@torch.no_grad()
def agreement(model, expected: torch.Tensor, got: torch.Tensor) -> str:
    """"yes" when both generators returned the same tokens (N, T) or (N, B, T), else where they split.

    For greedy search and sampling (N, T), the gap between the two largest logits that
    ``model.score`` gives for the common prefix says whether rounding could have decided the
    first differing token. Beam search ranks summed scores, which the score column compares.
    """
    if torch.equal(expected, got):
        return "yes"
    if expected.shape != got.shape:
        return f"NO (shapes {tuple(expected.shape)} and {tuple(got.shape)})"
    rows = (expected != got).flatten(1).any(dim=1).nonzero()
    row = int(rows[0])
    if expected.dim() == 3:
        return f"NO: the beams of prompt {row} differ"
    step = int((expected[row] != got[row]).nonzero()[0])
    top2 = model.score(expected[row: row + 1, :step]).topk(2, dim=-1).values[0]
    return f"NO: sequence {row} from token {step}, top-2 logit gap {float(top2[0] - top2[1]):.1e} there"


if __name__ == "__main__":
    main()
