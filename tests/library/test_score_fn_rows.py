# hw4p1: instructor-only
"""The score_fn contract of ``SequenceGenerator``: every call's row i continues prompt i.

The scorer here stands for a sequence-to-sequence model: it closes over one "encoder output" per
prompt (a row of logits) and adds it to a Markov chain's logits, so its answer depends on the row
index. It checks every call it receives (N rows, row i starting with prompt i). The truth for a
batch is the same search run on each prompt alone with a scorer closed over that prompt's row.

Run: ``.venv/bin/python -m pytest -q tests/library/test_score_fn_rows.py``.
"""
from types import SimpleNamespace

import torch

from hw4lib.decoding import SequenceGenerator


PAD, EOS, VOCAB = 0, 1, 8
TOKENIZER = SimpleNamespace(pad_id=PAD, eos_id=EOS, vocab_size=VOCAB)


class RowScorer:
    """score_fn = per-prompt memory row + transition logits of the last token; checks alignment."""

    def __init__(self, prompts: torch.Tensor, memory: torch.Tensor, chain: torch.Tensor):
        self.prompts, self.memory, self.chain = prompts, memory, chain
        self.calls = 0

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        self.calls += 1
        assert x.size(0) == self.prompts.size(0), (
            f"score_fn expected {self.prompts.size(0)} rows (one per prompt), got {x.size(0)}")
        prefix = x[:, : self.prompts.size(1)]
        assert torch.equal(prefix, self.prompts), (
            f"score_fn row i must continue prompt i: expected prefixes {self.prompts.tolist()}, "
            f"got {prefix.tolist()}")
        return self.memory + self.chain[x[:, -1]]


def setup(num_prompts: int = 4, seed: int = 0):
    generator = torch.Generator().manual_seed(seed)
    prompts = torch.randint(2, VOCAB, (num_prompts, 2), generator=generator)
    memory = 3.0 * torch.randn(num_prompts, VOCAB, generator=generator)
    chain = torch.randn(VOCAB, VOCAB, generator=generator)
    chain[:, PAD] = float("-inf")
    return prompts, memory, chain


def run_batch_and_alone(search, max_length: int = 7):
    """(batched output, outputs of each prompt alone, stacked), each as (seqs, scores)."""
    prompts, memory, chain = setup()
    batched = search(SequenceGenerator(RowScorer(prompts, memory, chain), TOKENIZER, max_length, "cpu"), prompts)
    alone = [search(SequenceGenerator(RowScorer(prompts[i:i + 1], memory[i:i + 1], chain), TOKENIZER,
                                      max_length, "cpu"), prompts[i:i + 1])
             for i in range(prompts.size(0))]
    return batched, tuple(torch.cat(parts) for parts in zip(*alone))


def test_beam_search_calls_score_fn_with_rows_aligned_to_prompts():
    for width in (1, 2, 3):
        (seqs, scores), (alone_seqs, alone_scores) = run_batch_and_alone(
            lambda g, x, w=width: g.generate_beam(x, w, repeat_penalty=1.2))
        assert torch.equal(seqs, alone_seqs), (
            f"beam width {width}: each prompt's beams must be those of the prompt searched alone;"
            f" expected {alone_seqs.tolist()}, got {seqs.tolist()}")
        assert torch.allclose(scores, alone_scores), f"beam width {width}: expected {alone_scores}, got {scores}"


def test_greedy_and_sampling_calls_are_row_aligned():
    (seqs, scores), (alone_seqs, alone_scores) = run_batch_and_alone(lambda g, x: g.generate_greedy(x))
    assert torch.equal(seqs, alone_seqs), f"greedy: expected {alone_seqs.tolist()}, got {seqs.tolist()}"
    assert torch.allclose(scores, alone_scores), f"greedy: expected {alone_scores}, got {scores}"
    prompts, memory, chain = setup()
    scorer = RowScorer(prompts, memory, chain)
    SequenceGenerator(scorer, TOKENIZER, 7, "cpu").generate_sample(prompts, top_k=3)  # RowScorer checks rows
    assert scorer.calls > 0, "generate_sample never called score_fn"
