"""Tests of hw4lib.decoding.SequenceGenerator.

The "model" is a Markov chain over a six-token vocabulary: the next-token logits are a row of a
fixed table chosen by the last token. Its exact answers are computed here independently, one
sequence at a time in plain Python: the step-wise argmax path for greedy search, every possible
sequence for beam search, and the filtered distribution for sampling.

Only ``generate_greedy`` is written by students ("Greedy", the graded category); the other
categories check the provided beam search, sampling and helpers and carry no points.
"""
import math

import pytest
import torch

from hw4lib.decoding import SequenceGenerator
from tests.failure_messages import in_case
from tests.testing_framework import check_built_on_input_device, rubric, run_module

RUBRIC = {"Greedy": 0, "Beam search": 0, "Sampling": 0, "Helpers and input checks": 0}
# Graded only through the language model's perplexity (testing_framework.py).
THROUGH_LM = ("Greedy",)

PAD, EOS, A, B, C, D = range(6)
NEG_INF = float("-inf")

# Row = last token, column = next token. Every token has a finite probability, PAD included (as
# with a real model), but PAD is never the most probable one, with or without the tests' repeat
# penalties. Greedy paths: A -> EOS; B -> C -> A -> EOS; D -> D -> ... (never ends unless a repeat
# penalty pushes it to A).
GREEDY_TABLE = torch.tensor([
    # PAD  EOS   A     B     C     D
    [-0.5, 0.0, 0.0, 0.0, 0.0, 0.0],    # after PAD (only fed after EOS)
    [-0.5, 0.0, 0.0, 0.0, 0.0, 0.0],    # after EOS
    [0.9, 2.0, 0.5, -1.0, 0.3, 1.1],    # after A
    [-0.2, -0.5, 0.2, 0.1, 1.7, 0.4],   # after B
    [-0.3, 0.0, 1.5, 0.8, -0.7, 0.3],   # after C
    [-0.8, -1.0, 0.6, 0.2, -0.3, 1.9],  # after D
], dtype=torch.float64)


class ToyTokenizer:
    """The three attributes and the method SequenceGenerator may use, for the six-token vocabulary."""

    pad_id, eos_id, vocab_size = PAD, EOS, 6

    def decode(self, ids, skip_special_tokens=False):
        return "".join("_$ABCD"[int(i)] for i in ids)


class MarkovChain:
    """score_fn whose next-token logits are ``table[last token]``; counts its calls and keeps a
    copy of each answer, so a test can check that the search left the answers as they were.

    A (V, V, V) table makes a second-order chain, ``table[second-to-last token, last token]``.
    """

    def __init__(self, table: torch.Tensor):
        self.table = table
        self.calls = 0
        self.answers = []     # (the tensor returned, a copy made when it was returned)

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        self.calls += 1
        if self.table.dim() == 3:
            # A one-token sequence reads as PAD then that token.
            previous = x[:, -2] if x.size(1) > 1 else torch.full_like(x[:, -1], PAD)
            logits = self.table[previous, x[:, -1]]
        else:
            logits = self.table[x[:, -1]]
        self.answers.append((logits, logits.clone()))
        return logits

    def assert_answers_untouched(self, what: str) -> None:
        """Fail when the search wrote into a tensor this score_fn returned."""
        changed = sum(not torch.equal(given, kept) for given, kept in self.answers)
        assert not changed, (
            f"{what}: the search wrote into {changed} of the {len(self.answers)} logits tensors "
            f"score_fn returned (in place, e.g. logits[:, pad_id] = -inf or logits /= "
            f"temperature). score_fn's output belongs to the model and must be left as it was: "
            f"compute on a new tensor (logits / temperature, torch.where, masked_fill)")


def make_generator(table=GREEDY_TABLE, max_length=8):
    chain = MarkovChain(table)
    return SequenceGenerator(chain, ToyTokenizer(), max_length=max_length, device="cpu"), chain


def step_log_probs(table, seq, temperature=1.0, repeat_penalty=1.0):
    """Next-token log-probabilities after ``seq`` (a list), penalty applied token by token."""
    logits = (table[seq[-2], seq[-1]] if table.dim() == 3 else table[seq[-1]]).tolist()
    for token in set(seq):
        value = logits[token]
        logits[token] = value / repeat_penalty if value > 0 else value * repeat_penalty
    return torch.log_softmax(torch.tensor(logits, dtype=torch.float64) / temperature, dim=-1)


def reference_greedy(table, prompt, max_length, temperature=1.0, repeat_penalty=1.0):
    """The argmax path of one prompt and its summed log-probability."""
    seq, score = list(prompt), 0.0
    while len(seq) < max_length:
        log_probs = step_log_probs(table, seq, temperature, repeat_penalty)
        token = int(log_probs.argmax())
        seq.append(token)
        score += float(log_probs[token])
        if token == EOS:
            break
    return seq, score


def all_sequences(table, prompt, max_length, temperature=1.0, repeat_penalty=1.0):
    """Every continuation of ``prompt`` with non-zero probability: [(tokens, log-prob)], best first.

    A continuation ends at its first EOS or at max_length tokens.
    """
    finished, frontier = [], [(list(prompt), 0.0)]
    while frontier:
        seq, score = frontier.pop()
        if seq[-1] == EOS and len(seq) > len(prompt) or len(seq) == max_length:
            finished.append((seq, score))
            continue
        log_probs = step_log_probs(table, seq, temperature, repeat_penalty)
        frontier.extend((seq + [token], score + float(lp))
                        for token, lp in enumerate(log_probs) if lp > NEG_INF)
    return sorted(finished, key=lambda item: -item[1])


def assert_padded_row(row, expected_tokens):
    """``row`` holds ``expected_tokens`` followed only by PAD."""
    row = row.tolist()
    n = len(expected_tokens)
    assert row[:n] == expected_tokens, f"expected {expected_tokens} (then PAD), got {row}"
    assert all(t == PAD for t in row[n:]), f"positions after EOS must hold PAD ({PAD}), got {row}"


# ---------------------------------------------------------------------------------------------
# Greedy (students)
# ---------------------------------------------------------------------------------------------

@rubric("Greedy")
def test_greedy_stays_on_the_sequences_device():
    """On the meta device (every machine has it; it holds shapes, no data), greedy search of a
    batch on that device must keep every tensor there: a tensor made without device= lands on
    the CPU, which works on a CPU-only machine and fails on a GPU. A meta tensor has no value, so
    here reading one (``if finished.all()``, ``.item()``, ``int(...)``, ``.tolist()``) reads zeros:
    no sequence ever finishes and the loop runs to max_length."""
    def greedy(device):
        generator = SequenceGenerator(lambda x: torch.zeros(x.size(0), 6, device=x.device),
                                      ToyTokenizer(), max_length=5, device=device)
        x = torch.zeros(3, 2, dtype=torch.long, device=device)
        seqs, scores = generator.generate_greedy(x, temperature=0.8, repeat_penalty=1.5)
        for name, value, shape in (("seqs", seqs, (3, 5)), ("scores", scores, (3,))):
            assert tuple(value.shape) == shape, (
                f"{name}: expected shape {shape}, got {tuple(value.shape)}")
        return seqs, scores

    check_built_on_input_device(greedy, "greedy search", "the sequences and scores")


@rubric("Greedy")
def test_greedy_matches_stepwise_argmax_path():
    prompts = torch.tensor([[D, B], [A, D], [C, B], [B, D], [D, A]])
    for temperature, penalty in [(1.0, 1.0), (0.7, 1.0), (1.0, 4.0), (1.6, 1.3)]:
        generator, chain = make_generator(max_length=9)
        seqs, scores = generator.generate_greedy(prompts, temperature=temperature, repeat_penalty=penalty)
        expected = [reference_greedy(GREEDY_TABLE, p.tolist(), 9, temperature, penalty) for p in prompts]
        setting = f"temperature={temperature}, repeat_penalty={penalty}"
        chain.assert_answers_untouched(setting)
        shape = (len(prompts), max(len(s) for s, _ in expected))
        assert seqs.shape == shape, (
            f"{setting}: expected seqs of shape (N, longest prompt + generated) = {shape}, got "
            f"{tuple(seqs.shape)}"
        )
        assert scores.shape == (len(prompts),), (
            f"{setting}: expected scores of shape (N,) = ({len(prompts)},), got {tuple(scores.shape)}"
        )
        for row, row_score, (tokens, score) in zip(seqs, scores, expected):
            assert_padded_row(row, tokens)
            assert math.isclose(float(row_score), score, rel_tol=1e-5, abs_tol=1e-5), \
                f"{setting}: score {float(row_score):.6f}, expected {score:.6f} for {tokens}"


def hand_log_prob(row, token, temperature=1.0):
    """log softmax(row / temperature)[token], in plain Python."""
    scaled = [value / temperature for value in row]
    return scaled[token] - math.log(sum(math.exp(value) for value in scaled))


@rubric("Greedy")
def test_greedy_scores_count_every_token_pad_included():
    """PAD has a finite probability in every row (a real model never gives it exactly zero), so
    the scores are log-probabilities over the whole vocabulary, PAD included: a search that masks
    PAD before normalising scores too high. Hand-computed, and score_fn's answers must come back
    as they were."""
    after_b = [1.0, -1.0, 0.0, 0.5, 2.0, 0.0]   # PAD EOS A B C D: C, then PAD, is the most probable
    after_c = [1.5, 1.8, 0.2, -0.5, 0.0, 0.1]   # EOS, then PAD
    table = torch.tensor([[0.3, 0.0, 0.1, 0.2, -0.4, 0.0]] * 6, dtype=torch.float64)
    table[B], table[C] = torch.tensor(after_b, dtype=torch.float64), torch.tensor(after_c, dtype=torch.float64)
    prompts = torch.tensor([[A, B], [D, C]])
    for temperature in (1.0, 0.5):
        generator, chain = make_generator(table, max_length=6)
        with in_case(f"temperature={temperature}", prompts=prompts):
            seqs, scores = generator.generate_greedy(prompts, temperature=temperature)
        assert_padded_row(seqs[0], [A, B, C, EOS])
        assert_padded_row(seqs[1], [D, C, EOS])
        expected = [hand_log_prob(after_b, C, temperature) + hand_log_prob(after_c, EOS, temperature),
                    hand_log_prob(after_c, EOS, temperature)]
        for row in range(2):
            assert math.isclose(float(scores[row]), expected[row], rel_tol=1e-6), (
                f"temperature={temperature}, row {row}: expected the score {expected[row]:.6f}, the "
                f"sum of log softmax(logits / temperature) over all 6 tokens, PAD included; got "
                f"{float(scores[row]):.6f} (do not mask PAD: the model's probabilities are the scores)")
        chain.assert_answers_untouched(f"temperature={temperature}")


@rubric("Greedy")
def test_greedy_scores_the_whole_sequence():
    """A second-order chain: the next token depends on the last two tokens, so a loop that gives
    score_fn only the last token (``score_fn(x[:, -1:])``) follows another path."""
    table = random_table(seed=5, order=2)
    prompts = torch.tensor([[D, B], [A, D], [C, C], [B, A], [A, B]])
    generator, _ = make_generator(table, max_length=8)
    seqs, scores = generator.generate_greedy(prompts)
    truth = [reference_greedy(table, p.tolist(), 8) for p in prompts]
    # What score_fn(x[:, -1:]) sees is the first-order chain table[PAD].
    last_token_only = [reference_greedy(table[PAD], p.tolist(), 8) for p in prompts]
    assert [t for t, _ in truth] != [t for t, _ in last_token_only], \
        "the chain does not tell the two loops apart; pick another seed"
    for row, row_score, (tokens, score) in zip(seqs, scores, truth):
        got = row.tolist()[:len(tokens)]
        assert got == tokens, (
            f"expected {tokens}, got {row.tolist()}: here the next token depends on the last two "
            f"tokens, so score_fn must be given the whole sequences x")
        assert_padded_row(row, tokens)
        assert math.isclose(float(row_score), score, rel_tol=1e-5, abs_tol=1e-5), \
            f"score {float(row_score):.6f}, expected {score:.6f} for {tokens}"


@rubric("Greedy")
def test_greedy_finished_sequences_stop_scoring():
    # Row 0 ends at once (A -> EOS); row 1 cycles on D until max_length.
    generator, _ = make_generator(max_length=7)
    seqs, scores = generator.generate_greedy(torch.tensor([[B, A], [B, D]]))
    log_p_eos_after_a = float(torch.log_softmax(GREEDY_TABLE[A], dim=-1)[EOS])
    assert seqs.shape == (2, 7), f"expected (2, 7) (max_length reached by row 1), got {tuple(seqs.shape)}"
    assert_padded_row(seqs[0], [B, A, EOS])
    assert seqs[1].tolist() == [B, D, D, D, D, D, D], f"expected row 1 = {[B, D, D, D, D, D, D]}, got {seqs[1].tolist()}"
    assert math.isclose(float(scores[0]), log_p_eos_after_a, rel_tol=1e-6), \
        f"a finished sequence's score must stop at its EOS: got {float(scores[0])}, expected {log_p_eos_after_a}"
    log_p_d_after_d = float(torch.log_softmax(GREEDY_TABLE[D], dim=-1)[D])
    assert math.isclose(float(scores[1]), 5 * log_p_d_after_d, rel_tol=1e-6), (
        f"row 1 generated D five times: expected score {5 * log_p_d_after_d:.6f}, got {float(scores[1]):.6f}"
    )


@rubric("Greedy")
def test_greedy_stops_when_all_finished():
    generator, chain = make_generator(max_length=20)
    seqs, _ = generator.generate_greedy(torch.tensor([[C, B], [D, C]]))
    # B -> C -> A -> EOS takes three steps, C -> A -> EOS two: the loop must stop after three.
    assert chain.calls == 3, f"expected 3 score_fn calls (all finished), got {chain.calls}"
    assert seqs.shape == (2, 5), f"expected shape (2, 5), got {tuple(seqs.shape)}"
    assert_padded_row(seqs[1], [D, C, A, EOS])


@rubric("Greedy")
def test_greedy_prompt_at_max_length_is_returned_unchanged():
    generator, chain = make_generator(max_length=3)
    prompts = torch.tensor([[A, B, C], [D, D, D]])
    seqs, scores = generator.generate_greedy(prompts)
    assert torch.equal(seqs, prompts), f"prompts already at max_length must come back unchanged, got {seqs.tolist()}"
    assert chain.calls == 0, f"prompts already at max_length need no score_fn call, got {chain.calls}"
    assert torch.equal(scores, torch.zeros(2, dtype=scores.dtype)), f"expected scores [0, 0], got {scores.tolist()}"


# ---------------------------------------------------------------------------------------------
# Beam search (provided)
# ---------------------------------------------------------------------------------------------

def random_table(seed, order=1):
    """Random logits of a Markov chain of the given order over the toy vocabulary; PAD never comes next."""
    shape = (ToyTokenizer.vocab_size,) * (order + 1)
    table = torch.randn(shape, generator=torch.Generator().manual_seed(seed), dtype=torch.float64) * 1.5
    table[..., PAD] = NEG_INF
    return table


@rubric("Beam search")
def test_beam_equals_exhaustive_search():
    # Second order: in a first-order chain, reordered cycles (A B A A vs A A B A) tie exactly.
    table = random_table(seed=3, order=2)
    prompts = torch.tensor([[B, C], [D, A], [A, A]])
    max_length = 5
    for temperature, penalty in [(1.0, 1.0), (0.8, 1.5)]:
        truth = [all_sequences(table, p.tolist(), max_length, temperature, penalty) for p in prompts]
        width = max(len(t) for t in truth)
        gaps = [a[1] - b[1] for t in truth for a, b in zip(t, t[1:])]
        assert min(gaps) > 1e-7, "the test chain has near-ties; pick another seed"
        generator, _ = make_generator(table, max_length)
        seqs, scores = generator.generate_beam(prompts, width, temperature=temperature, repeat_penalty=penalty)
        assert seqs.shape[:2] == (len(prompts), width) and scores.shape == (len(prompts), width)
        for n, expected in enumerate(truth):
            got = SequenceGenerator.post_process_sequence(seqs[n], ToyTokenizer())
            for rank, (tokens, score) in enumerate(expected):
                assert got[rank].tolist() == tokens, \
                    f"prompt {n}, rank {rank}: got {got[rank].tolist()}, expected {tokens}"
                assert math.isclose(float(scores[n, rank]), score, rel_tol=1e-5, abs_tol=1e-6)
            # Slots beyond the possible sequences are empty.
            assert torch.all(scores[n, len(expected):] == NEG_INF)


@rubric("Beam search")
def test_beam_finds_what_greedy_misses():
    # After A, token B (0.55) beats C (0.45); but B is followed by a near-uniform choice while C is
    # almost surely followed by EOS: greedy takes A B ... (0.55 * 0.34) and misses A C EOS (0.45 * 0.98).
    probs = torch.tensor([
        [0.0, 0.2, 0.2, 0.2, 0.2, 0.2],
        [0.0, 0.2, 0.2, 0.2, 0.2, 0.2],
        [0.0, 0.0, 0.0, 0.55, 0.45, 0.0],
        [0.0, 0.34, 0.0, 0.33, 0.33, 0.0],
        [0.0, 0.98, 0.0, 0.01, 0.01, 0.0],
        [0.0, 0.2, 0.2, 0.2, 0.2, 0.2],
    ], dtype=torch.float64)
    table = probs.log()
    greedy_tokens, greedy_score = reference_greedy(table, [A], 3)
    assert greedy_tokens == [A, B, EOS]
    generator, _ = make_generator(table, max_length=3)
    seqs, scores = generator.generate_beam(torch.tensor([[A], [A]]), beam_width=2)
    for n in range(2):
        assert seqs[n, 0].tolist() == [A, C, EOS], f"best beam {seqs[n, 0].tolist()}, expected [A, C, EOS]"
        assert math.isclose(float(scores[n, 0]), math.log(0.45 * 0.98), rel_tol=1e-6)
        assert float(scores[n, 0]) > greedy_score
        assert float(scores[n, 0]) >= float(scores[n, 1])


@rubric("Beam search")
def test_beam_width_one_is_greedy_and_finished_beams_are_not_duplicated():
    prompts = torch.tensor([[D, B], [A, D], [C, B]])
    generator, _ = make_generator(max_length=9)
    seqs, scores = generator.generate_beam(prompts, beam_width=1, repeat_penalty=4.0)
    for n, prompt in enumerate(prompts):
        tokens, score = reference_greedy(GREEDY_TABLE, prompt.tolist(), 9, repeat_penalty=4.0)
        assert_padded_row(seqs[n, 0], tokens)
        assert math.isclose(float(scores[n, 0]), score, rel_tol=1e-6)
    # Width 4 from [A]: A EOS finishes at step 1 and must occupy exactly one slot afterwards.
    seqs, scores = generator.generate_beam(torch.tensor([[A]]), beam_width=4)
    beams = [tuple(s.tolist()) for s in SequenceGenerator.post_process_sequence(seqs[0], ToyTokenizer())]
    assert len(set(beams)) == 4, f"duplicate hypotheses in the beam: {beams}"
    assert beams[0] == (A, EOS)
    assert torch.all(scores[0, :-1] >= scores[0, 1:]), "beams must be sorted best first"


@rubric("Beam search")
def test_beam_stops_when_all_beams_finished():
    probs = torch.full((6, 6), 0.2, dtype=torch.float64)
    probs[:, PAD] = 0.0
    probs[A] = torch.tensor([0.0, 0.9, 0.0, 0.1, 0.0, 0.0], dtype=torch.float64)  # A -> EOS or B
    probs[B] = torch.tensor([0.0, 1.0, 0.0, 0.0, 0.0, 0.0], dtype=torch.float64)  # B -> EOS
    generator, chain = make_generator(probs.log(), max_length=50)
    seqs, scores = generator.generate_beam(torch.tensor([[A]]), beam_width=2)
    # Two steps, one score_fn call per unfinished beam slot: both slots, then only [A, B].
    assert chain.calls == 3, f"expected 3 score_fn calls (2 in step 1, 1 in step 2), got {chain.calls}"
    assert seqs[0, 0].tolist() == [A, EOS, PAD] and seqs[0, 1].tolist() == [A, B, EOS]
    assert torch.allclose(scores[0], torch.tensor([math.log(0.9), math.log(0.1)], dtype=scores.dtype))


# ---------------------------------------------------------------------------------------------
# Sampling (provided)
# ---------------------------------------------------------------------------------------------

def reference_filtered_probs(logits, temperature, top_k, top_p):
    """{token: probability} of the filtered, renormalised next-token distribution."""
    probs = torch.softmax(logits / temperature, dim=-1).tolist()
    ranked = sorted(range(len(probs)), key=lambda t: -probs[t])
    if top_k:
        ranked = ranked[:top_k]
    kept_mass = sum(probs[t] for t in ranked)
    nucleus, mass = [], 0.0
    for token in ranked:
        nucleus.append(token)
        mass += probs[token] / kept_mass
        if mass >= top_p:
            break
    total = sum(probs[t] for t in nucleus)
    return {t: probs[t] / total for t in nucleus}


def chi_square_critical(df, z=4.265):
    """Upper chi-square quantile at about p = 1e-5 (Wilson-Hilferty approximation)."""
    c = 2.0 / (9.0 * df)
    return df * (1.0 - c + z * math.sqrt(c)) ** 3


@rubric("Sampling")
def test_sample_frequencies_match_filtered_distribution():
    table = torch.tensor([[NEG_INF, 0.3, 1.2, -0.4, 0.9, 0.1]] * 6, dtype=torch.float64)
    num_draws = 20000
    prompts = torch.full((num_draws, 1), B)
    for temperature, top_k, top_p in [(1.0, 0, 1.0), (0.7, 3, 1.0), (1.4, 0, 0.75), (1.0, 4, 0.6), (2.0, 2, 1.0)]:
        setting = f"temperature={temperature}, top_k={top_k}, top_p={top_p}"
        expected = reference_filtered_probs(table[B], temperature, top_k, top_p)
        generator, _ = make_generator(table, max_length=2)
        rng = torch.Generator().manual_seed(1234)
        seqs, scores = generator.generate_sample(prompts, temperature, top_k, top_p, generator=rng)
        tokens = seqs[:, 1]
        counts = torch.bincount(tokens, minlength=6).tolist()
        outside = {t: c for t, c in enumerate(counts) if c and t not in expected}
        assert not outside, f"{setting}: sampled tokens outside the kept set {sorted(expected)}: {outside}"
        statistic = sum((counts[t] - num_draws * p) ** 2 / (num_draws * p) for t, p in expected.items())
        if len(expected) > 1:
            assert statistic < chi_square_critical(len(expected) - 1), \
                f"{setting}: chi-square {statistic:.1f} too large; counts {counts}, expected {expected}"
        expected_log_probs = torch.full((6,), NEG_INF, dtype=scores.dtype)
        expected_log_probs[list(expected)] = torch.tensor(list(expected.values()), dtype=scores.dtype).log()
        assert torch.allclose(scores, expected_log_probs[tokens], atol=1e-5), \
            f"{setting}: scores must be the log-probabilities under the filtered distribution"


@rubric("Sampling")
def test_sample_at_tiny_temperature_is_greedy():
    prompts = torch.tensor([[D, B], [A, D], [C, B], [B, A]])
    generator, _ = make_generator(max_length=9)
    seqs, scores = generator.generate_sample(prompts, temperature=1e-4, generator=torch.Generator().manual_seed(0))
    for row, prompt in zip(seqs, prompts):
        tokens, _ = reference_greedy(GREEDY_TABLE, prompt.tolist(), 9)
        assert_padded_row(row, tokens)
    assert torch.allclose(scores, torch.zeros_like(scores), atol=1e-6)


@rubric("Sampling")
def test_sample_is_repeatable_with_a_seed():
    table = random_table(seed=7)
    prompts = torch.full((64, 1), C)
    generator, _ = make_generator(table, max_length=12)
    first = generator.generate_sample(prompts, generator=torch.Generator().manual_seed(5))
    second = generator.generate_sample(prompts, generator=torch.Generator().manual_seed(5))
    assert torch.equal(first[0], second[0]) and torch.equal(first[1], second[1])
    torch.manual_seed(11)
    third = generator.generate_sample(prompts)
    torch.manual_seed(11)
    fourth = generator.generate_sample(prompts)
    assert torch.equal(third[0], fourth[0]), "with no generator, torch.manual_seed must make sampling repeatable"
    # Finished rows are padded after EOS and their scores equal the sum over tokens up to EOS.
    for row, score in zip(*first):
        tokens = SequenceGenerator.post_process_sequence(row, ToyTokenizer()).tolist()
        assert all(t == PAD for t in row.tolist()[len(tokens):])
        total = sum(float(step_log_probs(table, tokens[:i])[tokens[i]]) for i in range(1, len(tokens)))
        assert math.isclose(float(score), total, rel_tol=1e-5, abs_tol=1e-5)


@rubric("Sampling")
def test_filter_logits_keeps_top_k_and_nucleus():
    generator, _ = make_generator()
    # Probabilities 0.05, 0.5, 0.15, 0.3 (token order scrambled on purpose).
    logits = torch.tensor([[0.05, 0.5, 0.15, 0.3], [0.3, 0.15, 0.5, 0.05]]).log()
    cases = {
        (1.0, 0, 0.4): [[1], [2]],            # the top token alone reaches 0.4
        (1.0, 0, 0.75): [[1, 3], [0, 2]],      # 0.5 + 0.3 reaches 0.75
        (1.0, 0, 0.85): [[1, 2, 3], [0, 1, 2]],
        (1.0, 0, 1.0): [[0, 1, 2, 3], [0, 1, 2, 3]],
        (1.0, 2, 1.0): [[1, 3], [0, 2]],
        (1.0, 3, 0.6): [[1, 3], [0, 2]],       # top-3 renormalised: 0.53, 0.32, 0.16
        (1.0, 9, 1.0): [[0, 1, 2, 3], [0, 1, 2, 3]],
    }
    for (temperature, top_k, top_p), kept in cases.items():
        filtered = generator._filter_logits(logits, temperature, top_k, top_p)
        for row, original, expected in zip(filtered, logits, kept):
            got = torch.isfinite(row).nonzero().flatten().tolist()
            assert got == expected, f"top_k={top_k}, top_p={top_p}: kept {got}, expected {expected}"
            assert torch.equal(row[expected], original[expected] / temperature), "kept logits must be unchanged"
    # Uniform over four tokens: exactly two reach mass 0.5 (0.25 is exact in floating point).
    kept = torch.isfinite(generator._filter_logits(torch.zeros(1, 4), top_p=0.5)).sum().item()
    assert kept == 2, f"top_p=0.5 on a uniform 4-token distribution must keep 2 tokens, kept {kept}"
    scaled = generator._filter_logits(logits, temperature=0.5)
    assert torch.allclose(scaled, logits / 0.5), "temperature must divide the logits"


# ---------------------------------------------------------------------------------------------
# Helpers and input checks (provided)
# ---------------------------------------------------------------------------------------------

@rubric("Helpers and input checks")
def test_repeat_penalty_hand_computed():
    generator, _ = make_generator()
    logits = torch.tensor([[2.0, -1.0, 0.5, -3.0, 1.0, 0.0],
                           [2.0, -1.0, 0.5, -3.0, 1.0, 0.0]])
    sequences = torch.tensor([[0, 1, 0], [3, 4, 5]])
    out = generator._apply_repeat_penalty(logits, sequences, 2.0)
    expected = torch.tensor([[1.0, -2.0, 0.5, -3.0, 1.0, 0.0],
                             [2.0, -1.0, 0.5, -6.0, 0.5, 0.0]])
    assert torch.equal(out, expected), f"got {out.tolist()}, expected {expected.tolist()}"
    assert torch.equal(generator._apply_repeat_penalty(logits, sequences, 1.0), logits)
    assert logits[0, 0] == 2.0, "the input logits must not be modified"


@rubric("Helpers and input checks")
def test_post_process_trims_after_first_eos():
    tok = ToyTokenizer()
    trim = SequenceGenerator.post_process_sequence
    assert trim(torch.tensor([A, B, EOS, PAD, PAD]), tok).tolist() == [A, B, EOS]
    assert trim(torch.tensor([A, EOS, C, EOS]), tok).tolist() == [A, EOS]
    assert trim(torch.tensor([A, B, C]), tok).tolist() == [A, B, C]
    batch = trim(torch.tensor([[EOS, A, PAD], [A, B, C]]), tok)
    assert [s.tolist() for s in batch] == [[EOS], [A, B, C]]
    beams = trim(torch.tensor([[[A, EOS, PAD], [A, B, EOS]], [[C, C, C], [D, EOS, PAD]]]), tok)
    assert [[s.tolist() for s in row] for row in beams] == [[[A, EOS], [A, B, EOS]], [[C, C, C], [D, EOS]]]


@rubric("Helpers and input checks")
def test_bad_inputs_raise_clear_errors():
    generator, _ = make_generator(max_length=4)
    prompt = torch.tensor([[A, B]])
    bad_calls = [
        (TypeError, "x", lambda: generator.generate_greedy([[A, B]])),
        (ValueError, "x", lambda: generator.generate_greedy(torch.tensor([A, B]))),
        (TypeError, "x", lambda: generator.generate_greedy(torch.tensor([[1.0, 2.0]]))),
        (ValueError, "max_length", lambda: generator.generate_greedy(torch.tensor([[A, B, C, D, A]]))),
        (ValueError, "temperature", lambda: generator.generate_greedy(prompt, temperature=0.0)),
        (ValueError, "repeat_penalty", lambda: generator.generate_greedy(prompt, repeat_penalty=-1.0)),
        (ValueError, "beam_width", lambda: generator.generate_beam(prompt, beam_width=0)),
        (ValueError, "repeat_penalty", lambda: generator.generate_beam(prompt, 2, repeat_penalty=0.0)),
        (ValueError, "temperature", lambda: generator.generate_beam(prompt, 2, temperature=-1.0)),
        (ValueError, "top_p", lambda: generator.generate_sample(prompt, top_p=0.0)),
        (ValueError, "top_p", lambda: generator.generate_sample(prompt, top_p=1.5)),
        (ValueError, "top_k", lambda: generator.generate_sample(prompt, top_k=-1)),
        (ValueError, "temperature", lambda: generator.generate_sample(prompt, temperature=0)),
        (ValueError, "max_length", lambda: SequenceGenerator(MarkovChain(GREEDY_TABLE), ToyTokenizer(), 0, "cpu")),
        (TypeError, "score_fn", lambda: SequenceGenerator(None, ToyTokenizer(), 5, "cpu")),
    ]
    for error, name, call in bad_calls:
        with pytest.raises(error, match=name):
            call()


if __name__ == "__main__":
    run_module(__name__)
