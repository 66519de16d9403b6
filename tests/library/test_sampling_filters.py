# hw4p1: instructor-only
"""hw4lib/decoding/sampling.py (given code): the logit filters on hand-computed cases, each bound
on each side (top-k at 1 and at the vocabulary, top-p reached exactly), and sampling checked
draw by draw against ``torch.multinomial`` on the softmax in vocabulary order with the same
generator, its scores against the log-probabilities summed by hand, padding after EOS and the
length limit.

    .venv/bin/python -m pytest -q tests/library/test_sampling_filters.py
"""
import math
from types import SimpleNamespace

import torch

from hw4lib.decoding import SequenceGenerator

PAD, EOS, VOCAB = 0, 1, 6
TOKENIZER = SimpleNamespace(pad_id=PAD, eos_id=EOS, vocab_size=VOCAB)
INF = float("inf")


def generator(score_fn=None, max_length: int = 8) -> SequenceGenerator:
    return SequenceGenerator(score_fn or (lambda x: torch.zeros(x.size(0), VOCAB)), TOKENIZER,
                             max_length, "cpu")


def kept(filtered: torch.Tensor) -> list[int]:
    """How many tokens of each row a filter kept."""
    return torch.isfinite(filtered).sum(dim=-1).tolist()


def test_the_defaults_filter_nothing_and_temperature_divides():
    logits = torch.tensor([[2.0, 1.0, 0.0, -1.0, 3.0]])
    assert torch.equal(generator()._filter_logits(logits), logits)
    assert torch.equal(generator()._filter_logits(logits, temperature=2.0), logits / 2)


def test_top_k_keeps_the_k_largest_from_one_up_to_the_vocabulary():
    logits = torch.tensor([[2.0, 1.0, 0.0, -1.0, 3.0]])
    filter_logits = generator()._filter_logits
    assert torch.equal(filter_logits(logits, top_k=1), torch.tensor([[-INF, -INF, -INF, -INF, 3.0]]))
    assert torch.equal(filter_logits(logits, top_k=2), torch.tensor([[2.0, -INF, -INF, -INF, 3.0]]))
    assert torch.equal(filter_logits(logits, top_k=4), torch.tensor([[2.0, 1.0, 0.0, -INF, 3.0]]))
    assert torch.equal(filter_logits(logits, top_k=5), logits)
    assert torch.equal(filter_logits(logits, top_k=9), logits)
    rows = torch.tensor([[0.0, 1.0, 2.0], [2.0, 1.0, 0.0]])  # each row its own k largest
    assert torch.equal(filter_logits(rows, top_k=1), torch.tensor([[-INF, -INF, 2.0],
                                                                  [2.0, -INF, -INF]]))


def test_top_p_keeps_the_fewest_tokens_whose_mass_reaches_it():
    """Four equal tokens (a quarter each, exact in binary): the mass before the k-th is
    (k - 1) / 4, so top_p = 1/2 keeps 2, a hair more keeps 3, 1/4 keeps 1 and 1 keeps all."""
    equal = torch.zeros(1, 4)
    filter_logits = generator()._filter_logits
    for top_p, count in ((0.25, 1), (0.5, 2), (0.5000001, 3), (0.75, 3), (0.76, 4), (1.0, 4),
                         (0.01, 1)):
        assert kept(filter_logits(equal, top_p=top_p)) == [count], top_p
    probable = torch.log(torch.tensor([[0.1, 0.6, 0.3]]))
    assert torch.equal(torch.isfinite(filter_logits(probable, top_p=0.7)),
                       torch.tensor([[False, True, True]]))


def test_top_p_of_one_keeps_a_token_of_negligible_mass():
    """exp(-200) is 0 in float32: the mass before the last kept token is already 1."""
    logits = torch.tensor([[0.0, -200.0, -300.0]])
    assert torch.equal(generator()._filter_logits(logits, top_k=2, top_p=1.0),
                       torch.tensor([[0.0, -200.0, -INF]]))


def draws_by_hand(logits: torch.Tensor, seed: int, steps: int) -> list[list[int]]:
    """The tokens torch.multinomial draws, step after step, from softmax(logits) in vocabulary
    order with a generator seeded ``seed`` (a constant score_fn)."""
    random = torch.Generator().manual_seed(seed)
    return [torch.multinomial(logits.softmax(dim=-1), 1, generator=random)[:, 0].tolist()
            for _ in range(steps)]


def test_unfiltered_sampling_draws_from_the_vocabulary_in_order():
    logits = torch.tensor([[0.5, 0.0, 1.0, 2.0, 0.3, 1.5], [0.1, 0.0, 0.2, 0.3, 2.0, 1.0]])
    logits[:, EOS] = -INF  # no row ends: 6 draws each
    expected = torch.tensor(draws_by_hand(logits, 7, 6)).T
    prompts = torch.tensor([[2], [3]])
    for options in ({}, {"temperature": 1.0, "top_k": 0, "top_p": 1.0}, {"top_k": VOCAB},
                    {"top_k": VOCAB + 3}):
        seqs, scores = generator(lambda x: logits.clone(), max_length=7).generate_sample(
            prompts, generator=torch.Generator().manual_seed(7), **options)
        assert torch.equal(seqs[:, 1:], expected), options
        log_probs = logits.log_softmax(dim=-1)
        by_hand = [math.fsum(log_probs[row, token].item() for token in expected[row])
                   for row in range(2)]
        assert torch.allclose(scores, torch.tensor(by_hand)), options


def chain_scorer(chain: dict[int, int]):
    """score_fn that makes chain[last token] next with probability 0.9, the rest shared."""

    def score(x: torch.Tensor) -> torch.Tensor:
        probs = torch.full((x.size(0), VOCAB), 0.1 / (VOCAB - 1))
        for row, last in enumerate(x[:, -1].tolist()):
            probs[row, chain.get(last, last)] = 0.9
        return probs.log()

    return score


def test_a_finished_row_is_padded_and_scores_nothing_more():
    """Top-k 1 makes each draw the chain's: row 0 reaches EOS after 2 tokens, row 1 never does
    and stops at max_length 7; each drawn token scores log 1 = 0 under the filtered
    distribution, so the scores are 0."""
    chain = {2: 3, 3: EOS, 4: 5, 5: 4}
    prompts = torch.tensor([[2, 2, 2], [4, 4, 4]])
    seqs, scores = generator(chain_scorer(chain), max_length=7).generate_sample(prompts, top_k=1)
    assert seqs.tolist() == [[2, 2, 2, 3, EOS, PAD, PAD], [4, 4, 4, 5, 4, 5, 4]]
    assert scores.tolist() == [0.0, 0.0]


def test_sampling_scores_sum_the_drawn_tokens_log_probabilities():
    """With top-k 2 the chain's token has 0.9 / (0.9 + 0.02) of the mass: a row that draws
    only chain tokens scores that log-probability per token."""
    chain = {2: 3, 3: EOS}
    prompts = torch.tensor([[2]])
    for seed in range(20):
        seqs, scores = generator(chain_scorer(chain), max_length=5).generate_sample(
            prompts, top_k=2, generator=torch.Generator().manual_seed(seed))
        if seqs.tolist() == [[2, 3, EOS]]:  # the batch stops when its every row has ended
            assert math.isclose(scores.item(), 2 * math.log(0.9 / 0.92), rel_tol=1e-5)
            return
    raise AssertionError("no seed of 20 drew the chain")
