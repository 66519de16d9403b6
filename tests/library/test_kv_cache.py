# hw4p1: instructor-only
"""The key/value cache of ``generator_for_model`` and ``SequenceGenerator.for_model``
(``hw4lib.model.kv_cache``).

The truth is the model itself: ``SequenceGenerator(model.score, ...)`` recomputes every prefix from
scratch, so the cached generator must return the same tokens and the same scores (to float
rounding) for every search and setting: random models (with an EOS bias that ends some sequences
mid-way) and a tiny model trained here for a few seconds. The scorer is also checked call by call
against ``model.score`` (prefill, reordered rows as in beam search, a cache grown past its
capacity), and it must not spend compute on finished sequences.

Run: ``.venv/bin/python -m pytest -q tests/library/test_kv_cache.py``.
"""
import inspect
import itertools
from types import SimpleNamespace

import pytest
import torch

from hw4lib.decoding import SequenceGenerator, cached_generator, generator_for_model
from hw4lib.decoding.cached_generator import CachedSequenceGenerator
from hw4lib.model import DecoderOnlyTransformer
from hw4lib.model.kv_cache import CachedScorer


PAD, EOS = 0, 1


def tokenizer(vocab_size: int) -> SimpleNamespace:
    """The attributes SequenceGenerator reads from a tokenizer."""
    return SimpleNamespace(pad_id=PAD, eos_id=EOS, vocab_size=vocab_size)


def random_model(seed: int, vocab_size: int = 40, num_layers: int = 2, d_model: int = 32,
                 num_heads: int = 4, max_len: int = 48, eos_bias: float = 0.0) -> DecoderOnlyTransformer:
    """An untrained model with weights scaled up so its distributions are peaked (no near-ties).

    ``eos_bias`` is added to the EOS logit: with a suitable value some sequences end mid-way.
    """
    torch.manual_seed(seed)
    model = DecoderOnlyTransformer(num_layers, d_model, num_heads, 2 * d_model, dropout=0.1,
                                   max_len=max_len, num_classes=vocab_size)
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.mul_(6.0)
        model.final_linear.bias[EOS] += eos_bias
        model.final_linear.bias[PAD] -= 50.0  # a real model never predicts padding
    return model.eval()


def prompts(seed: int, num_prompts: int, length: int, vocab_size: int) -> torch.Tensor:
    """(num_prompts, length) int64 prompts of ordinary tokens (no PAD, no EOS)."""
    return torch.randint(2, vocab_size, (num_prompts, length), generator=torch.Generator().manual_seed(seed))


def assert_same(name: str, uncached, cached) -> None:
    """Identical tokens, scores equal to float rounding."""
    (seqs, scores), (cached_seqs, cached_scores) = uncached, cached
    assert torch.equal(seqs, cached_seqs), (
        f"{name}: the cached generator returned different tokens;\nexpected {seqs.tolist()}\n"
        f"got      {cached_seqs.tolist()}")
    assert torch.allclose(scores, cached_scores, rtol=1e-4, atol=1e-3), (
        f"{name}: scores differ; expected {scores.tolist()}, got {cached_scores.tolist()}")


def compare_searches(model, vocab_size: int, max_length: int, searches,
                     build=generator_for_model) -> list[torch.Tensor]:
    """Run each (name, search) on ``SequenceGenerator(model.score, ...)`` and on
    ``build(model, ...)``; return the former's sequences."""
    uncached = SequenceGenerator(model.score, tokenizer(vocab_size), max_length, "cpu")
    cached = build(model, tokenizer(vocab_size), max_length, "cpu")
    outputs = []
    with torch.no_grad():
        for name, search in searches:
            expected = search(uncached)
            assert_same(name, expected, search(cached))
            outputs.append(expected[0])
    return outputs


def ends_mid_way(seqs: torch.Tensor, prompt_length: int) -> tuple[bool, bool]:
    """(some sequence emitted EOS before the end, some sequence never emitted EOS)."""
    has_eos = (seqs[..., prompt_length:] == EOS).any(-1)
    early = (seqs[..., -1] == PAD) & has_eos
    return bool(early.any()), bool((~has_eos).any())


def test_greedy_same_tokens_and_scores():
    max_length = 24
    model = random_model(0, eos_bias=4.6)
    searches = []
    for length, (temperature, penalty) in itertools.product((1, 5, max_length - 1, max_length),
                                                            ((1.0, 1.0), (0.7, 1.3))):
        x = prompts(length, 6, length, 40)
        searches.append((f"greedy(prompt length {length}, temperature {temperature}, repeat_penalty {penalty})",
                         lambda g, x=x, t=temperature, p=penalty: g.generate_greedy(x, t, p)))
    outputs = compare_searches(model, 40, max_length, searches)
    early, unfinished = ends_mid_way(outputs[0], 1)  # prompt length 1, temperature 1, no penalty
    assert early and unfinished, ("the test model should end some sequences mid-way and not others, "
                                  f"got early EOS: {early}, a sequence without EOS: {unfinished}")


def test_beam_same_tokens_and_scores():
    max_length = 20
    model = random_model(1, eos_bias=8.0)
    searches = []
    for width, length, (temperature, penalty) in itertools.product((1, 3, 5), (1, 4, max_length),
                                                                   ((1.0, 1.0), (1.5, 1.2))):
        x = prompts(width + length, 4, length, 40)
        searches.append((f"beam(width {width}, prompt length {length}, temperature {temperature}, "
                         f"repeat_penalty {penalty})",
                         lambda g, x=x, w=width, t=temperature, p=penalty: g.generate_beam(x, w, t, p)))
    outputs = compare_searches(model, 40, max_length, searches)
    assert any(ends_mid_way(seqs, 1)[0] for seqs in outputs), "no beam ended mid-way: EOS is never tested"
    assert any(ends_mid_way(seqs, 1)[1] for seqs in outputs), "every beam ended: long beams are never tested"


def test_sampling_same_tokens_and_scores():
    max_length = 24
    model = random_model(2, eos_bias=9.0)
    searches = []
    settings = ((1.0, 0, 1.0), (0.6, 5, 1.0), (1.8, 0, 0.8), (1.0, 5, 0.8))
    for (temperature, top_k, top_p), length in itertools.product(settings, (1, 6)):
        x = prompts(length, 6, length, 40)
        searches.append((f"sample(temperature {temperature}, top_k {top_k}, top_p {top_p}, prompt length {length})",
                         lambda g, x=x, t=temperature, k=top_k, p=top_p: g.generate_sample(
                             x, t, k, p, generator=torch.Generator().manual_seed(7))))
    outputs = compare_searches(model, 40, max_length, searches)
    assert any(ends_mid_way(seqs, 1)[0] for seqs in outputs), "no sample ended mid-way: EOS is never tested"


def test_for_model_builds_the_cached_generator():
    """``SequenceGenerator.for_model``, the interface's name, gives ``generator_for_model``'s
    generator: the cached one, with the given settings and model.score's results."""
    max_length = 24
    model = random_model(0, eos_bias=4.6)
    built = SequenceGenerator.for_model(model, tokenizer(40), max_length, "cpu")
    expected = generator_for_model(model, tokenizer(40), max_length, "cpu")
    assert type(built) is type(expected), (
        f"for_model returned a {type(built).__name__}, expected generator_for_model's "
        f"{type(expected).__name__}")
    assert (built.max_length, built.device) == (max_length, torch.device("cpu")), (
        f"for_model's generator has max_length={built.max_length}, device={built.device}; "
        f"expected {max_length}, cpu")
    x = prompts(1, 6, 1, 40)  # some sequences end mid-way (test_greedy_same_tokens_and_scores)
    compare_searches(model, 40, max_length, [("for_model greedy", lambda g: g.generate_greedy(x)),
                                             ("for_model beam(width 3)", lambda g: g.generate_beam(x, 3))],
                     build=SequenceGenerator.for_model)


def train_tiny_model(steps: int = 100) -> DecoderOnlyTransformer:
    """A one-layer model trained to continue counting sequences (k, k+1, ... mod 10, then EOS).

    Its distributions are as peaked as a real model's, which the random models only imitate.
    """
    torch.manual_seed(0)
    vocab_size, length = 14, 16
    model = DecoderOnlyTransformer(1, 32, 2, 64, dropout=0.0, max_len=32, num_classes=vocab_size)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    for _ in range(steps):
        starts = torch.randint(0, 10, (16, 1))
        stops = torch.randint(6, length, (16, 1))
        positions = torch.arange(length + 1)
        tokens = torch.where(positions < stops, 4 + (starts + positions) % 10, EOS)
        tokens = torch.where(positions > stops, PAD, tokens)
        tokens = torch.cat([torch.full((16, 1), 2), tokens], dim=1)          # 2 plays SOS
        logits, _ = model(tokens[:, :-1])
        loss = torch.nn.functional.cross_entropy(logits.transpose(1, 2), tokens[:, 1:], ignore_index=PAD)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return model.eval()


@pytest.mark.slow
def test_trained_tiny_model_all_searches():
    model = train_tiny_model()
    x = torch.cat([torch.full((5, 1), 2), 4 + (torch.arange(5).unsqueeze(1) + torch.arange(3)) % 10], dim=1)
    searches = [
        ("greedy", lambda g: g.generate_greedy(x)),
        ("greedy(repeat_penalty 1.5)", lambda g: g.generate_greedy(x, repeat_penalty=1.5)),
        ("beam(width 3)", lambda g: g.generate_beam(x, 3)),
        ("beam(width 4, temperature 0.5)", lambda g: g.generate_beam(x, 4, temperature=0.5)),
        ("sample(top_k 3, top_p 0.9)", lambda g: g.generate_sample(
            x, 1.0, 3, 0.9, generator=torch.Generator().manual_seed(3))),
    ]
    greedy = compare_searches(model, 14, 30, searches)[0]
    counted = (greedy[:, 1:4] - 4 + 1) % 10 + 4
    assert torch.equal(greedy[:, 2:5], counted), (
        f"the tiny model did not learn to count (expected {counted.tolist()}, got {greedy[:, 2:5].tolist()}), "
        "so this test would not exercise a trained model")


def test_scorer_matches_score_after_reordering_and_growth():
    model = random_model(3)
    scorer = CachedScorer(model, capacity=6)
    x = prompts(0, 4, 3, 40)
    with torch.no_grad():
        for step in range(6):  # lengths 3..8: past the capacity of 6
            logits = scorer(x)
            expected = model.score(x)
            assert torch.allclose(logits, expected, atol=1e-3, rtol=1e-4), (
                f"step {step} (length {x.size(1)}): cached logits differ from model.score by "
                f"{(logits - expected).abs().max().item():.2e}")
            assert scorer.keys[0].size(2) == max(6, x.size(1)), "the cache grows only past its capacity"
            parents = torch.tensor([2, 0, 0, 3])  # as beam search: rows continue other rows
            x = torch.cat([x[parents], torch.randint(2, 40, (4, 1))], dim=1)
        fresh = prompts(1, 3, 5, 40)  # not a continuation: starts over
        assert torch.allclose(scorer(fresh), model.score(fresh), atol=1e-3, rtol=1e-4), \
            "a batch that continues nothing must be scored from scratch"
        assert scorer.keys[0].shape == (3, 4, 6, 8), "a new cache of the capacity"
        short = CachedScorer(model, capacity=2)
        short(fresh)
        assert short.keys[0].shape == (3, 4, 5, 8), "prompts longer than the capacity fit"


def test_finished_sequences_cost_nothing():
    model = random_model(0, eos_bias=9.0)
    rows_per_step = []
    hook = model.final_linear.register_forward_hook(lambda module, args, out: rows_per_step.append(args[0].shape[0]))
    x = prompts(5, 6, 1, 40)
    try:
        with torch.no_grad():
            seqs, _ = generator_for_model(model, tokenizer(40), 24, "cpu").generate_greedy(x)
    finally:
        hook.remove()
    finished_before = [int(((seqs[:, 1:step] == EOS).any(1)).sum()) for step in range(1, seqs.size(1))]
    expected = [6 - finished for finished in finished_before]
    assert rows_per_step == expected, (
        f"rows run through the model per step: expected the unfinished ones {expected}, got {rows_per_step}")
    assert expected[-1] < expected[0], "no sequence finished early: the test does not exercise skipping"


def test_max_length_may_reach_the_models_max_len_but_not_pass_it():
    model = random_model(0, max_len=12)
    assert CachedSequenceGenerator(model, tokenizer(40), 12, "cpu").max_length == 12
    with pytest.raises(ValueError, match="max_length=13 exceeds the model's max_len=12"):
        CachedSequenceGenerator(model, tokenizer(40), 13, "cpu")


def test_after_a_search_the_scorer_checks_its_rows_again():
    """A search's settings (deferred checks, rows in place) end with it: the scorer, called
    directly afterwards on a batch that does not continue the previous one, starts over."""
    model = random_model(4)
    generator = generator_for_model(model, tokenizer(40), 12, "cpu")
    with torch.no_grad():
        generator.generate_greedy(prompts(1, 3, 1, 40))
        generator.score_fn(prompts(2, 3, 4, 40))
        unrelated = prompts(3, 3, 5, 40)
        assert torch.allclose(generator.score_fn(unrelated), model.score(unrelated), atol=1e-3,
                              rtol=1e-4), "the scorer extended a cache of other rows"


def test_only_beam_search_reorders_the_cache_on_the_gpu_path(monkeypatch):
    """Greedy search and sampling continue row i with row i: on the deferred (GPU) path their
    cache never moves; beam search's hypotheses do move it."""
    monkeypatch.setattr(cached_generator, "host_reads_are_free", lambda device: False)
    moves = []
    keep_rows = CachedScorer._keep_rows
    monkeypatch.setattr(CachedScorer, "_keep_rows",
                        lambda self, *args, **kwargs: moves.append(1) or keep_rows(self, *args, **kwargs))
    generator = generator_for_model(random_model(2), tokenizer(40), 12, "cpu")
    x = prompts(1, 3, 1, 40)
    with torch.no_grad():
        for name, search in (("greedy", lambda: generator.generate_greedy(x)),
                             ("sample", lambda: generator.generate_sample(
                                 x, 1.0, 5, 0.8, generator=torch.Generator().manual_seed(7)))):
            moves.clear()
            search()
            assert moves == [], f"{name}: the cache was reordered {len(moves)} times"
        generator.generate_beam(x, 3)
    assert moves, "beam search never reordered the cache: the spy sees nothing"


def test_host_reads_are_free_on_the_cpu_only():
    assert cached_generator.host_reads_are_free(torch.device("cpu"))
    for device in ("cuda", "cuda:1", "meta"):
        assert not cached_generator.host_reads_are_free(torch.device(device)), device


def test_the_cached_searches_keep_the_plain_searches_signature_and_docs():
    """help() and an editor show the cached searches' parameters and docs, not the wrapper's."""
    for name in ("generate_greedy", "generate_beam", "generate_sample"):
        cached, plain = getattr(CachedSequenceGenerator, name), getattr(SequenceGenerator, name)
        assert (cached.__name__, cached.__doc__) == (plain.__name__, plain.__doc__), name
        assert inspect.signature(cached) == inspect.signature(plain), name


def test_the_scorer_refuses_attention_it_cannot_cache():
    for kwargs in ({"add_bias_kv": True}, {"kdim": 16, "vdim": 16}):
        model = random_model(0)
        model.dec_layers[-1].self_attn.mha = torch.nn.MultiheadAttention(32, 4, batch_first=True, **kwargs)
        with pytest.raises(ValueError, match="one packed in_proj_weight and no bias_k/bias_v"):
            CachedScorer(model, capacity=8)
    CachedScorer(random_model(0), capacity=8)  # the defaults: accepted


def test_the_scorer_needs_eval_mode_and_whole_prompts():
    model = random_model(0)
    scorer = CachedScorer(model, capacity=8)
    with torch.no_grad():
        with pytest.raises(ValueError, match="whole prompts \\(start 0\\) or one token per row"):
            scorer._run(prompts(0, 2, 2, 40), start=1)
        model.train()
        with pytest.raises(RuntimeError, match="needs eval mode: call model.eval\\(\\) first"):
            scorer(prompts(0, 2, 3, 40))


def test_without_an_eos_id_every_row_is_computed():
    model = random_model(0, eos_bias=9.0)
    rows_per_step = []
    hook = model.final_linear.register_forward_hook(lambda module, args, out: rows_per_step.append(args[0].shape[0]))
    scorer = CachedScorer(model, capacity=8, eos_id=None)
    x = torch.cat([prompts(5, 3, 2, 40), torch.full((3, 1), EOS)], dim=1)  # every row "finished"
    try:
        with torch.no_grad():
            scorer(x[:, :2])
            assert torch.allclose(scorer(x), model.score(x), atol=1e-3, rtol=1e-4)
    finally:
        hook.remove()
    assert rows_per_step[:2] == [3, 3], rows_per_step


def test_a_deferred_scorer_reports_a_call_that_did_not_continue_its_rows():
    model = random_model(0)
    scorer = CachedScorer(model, capacity=8)
    scorer.deferred = scorer.rows_in_place = True
    x = prompts(0, 3, 2, 40)
    with torch.no_grad():
        scorer(x)
        assert scorer.consistent(), "nothing deferred yet"
        continued = torch.cat([x, prompts(1, 3, 1, 40)], dim=1)
        assert torch.allclose(scorer(continued), model.score(continued), atol=1e-3, rtol=1e-4)
        assert scorer.consistent()
        moved = torch.cat([continued.flip(0), prompts(2, 3, 1, 40)], dim=1)  # rows not in place
        scorer(moved)
        assert not scorer.consistent()
        scorer(torch.cat([moved, prompts(3, 3, 1, 40)], dim=1))  # continues the moved rows
        assert not scorer.consistent(), "a mismatch stays reported until the next reset"
    scorer.reset()
    assert scorer.consistent()


def test_a_bare_scorer_extends_reordered_rows_and_restarts_on_other_ones():
    """A scorer used directly (no search setting its flags): rows that continue earlier rows in
    another order run one new token each; rows of the same length that continue nothing start
    over and are scored right."""
    model = random_model(3)
    scorer = CachedScorer(model, capacity=8)
    tokens_run = []
    hook = model.target_embedding.register_forward_hook(
        lambda module, args, out: tokens_run.append(tuple(args[0].shape)))
    x = prompts(0, 4, 3, 40)
    try:
        with torch.no_grad():
            scorer(x)
            moved = torch.cat([x[torch.tensor([2, 0, 0, 3])], prompts(1, 4, 1, 40)], dim=1)
            assert torch.allclose(scorer(moved), model.score(moved), atol=1e-3, rtol=1e-4)
            assert tokens_run == [(4, 3), (4, 1), (4, 4)], "prefill, one new token, model.score"
            tokens_run.clear()
            other = prompts(2, 4, 5, 40)
            assert torch.allclose(scorer(other), model.score(other), atol=1e-3, rtol=1e-4)
            assert scorer.consistent()
    finally:
        hook.remove()
    assert tokens_run == [(4, 5), (4, 5)], "the scorer's prefill, then model.score's forward"


def test_the_scorer_keeps_no_autograd_graph():
    model = random_model(0)
    scorer = CachedScorer(model, capacity=8)
    x = prompts(0, 2, 3, 40)
    assert not scorer(x).requires_grad and not scorer.keys[0].requires_grad
