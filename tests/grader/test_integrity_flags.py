# hw4p1: instructor-only
"""The integrity flags, called directly on a run card and a model child's result
(``autograder.judging.scoring.integrity``): a card whose per-transcript losses add up to their
total (to 1e-9 relative, 1e-9 absolute below 1) or not, a re-measured transcript 2% apart in
per-character perplexity on each side, another token count, the first 5 disagreements listed and
the rest counted; test_metrics.json against the card's summed losses and against the
re-measurement of an older card, 2% on each side; no flag for a handin with no files.

    .venv/bin/python -m pytest -q tests/grader/test_integrity_flags.py
"""
import json
import math

import pytest

from autograder.judging.intake.safe_tar import Extraction
from autograder.judging.scoring import integrity

RATIO_INSIDE, RATIO_OUTSIDE = 1.0199, 1.0201  # around the 2% tolerance


def card_of(nll: list[float], tokens: list[int], total: float | None = None) -> dict:
    return {"test_set": {"transcripts": len(nll), "transcript_nll": nll,
                         "transcript_tokens": tokens,
                         "total_nll": math.fsum(nll) if total is None else total,
                         "split": "test", "subset": 1.0}}


def sample_of(indices: list[int], nll: list[float], tokens: list[int], chars: list[int],
              characters: int = 1000) -> dict:
    """A model child's re-measurement of the card's transcripts ``indices``."""
    return {"indices": indices, "names": [f"t{i}" for i in indices], "nll": nll,
            "tokens": tokens, "chars": chars, "drawn": indices[:1], "lowest": indices[1:],
            "transcripts": 9, "seed": 7, "characters": characters}


def test_losses_that_agree_give_no_flag():
    card = card_of([10.0, 20.0], [5, 6])
    assert integrity.card_loss_problems(card, sample_of([0, 1], [10.0, 20.0], [5, 6],
                                                        [100, 200])) == []


@pytest.mark.parametrize("nll, total, flagged", [
    ([20.0, 40.0], 60.0 + 5e-8, False), ([20.0, 40.0], 60.0 + 7e-8, True),
    ([0.0, 0.0], 0.9e-9, False), ([0.0, 0.0], 1.1e-9, True),
])
def test_losses_must_add_up_to_their_total(nll, total, flagged):
    problems = integrity.card_loss_problems(card_of(nll, [1, 1], total), sample_of([], [], [], []))
    assert bool(problems) is flagged
    if flagged:
        assert problems[0].startswith(f"run_card.json's per-transcript losses add up to "
                                      f"{math.fsum(nll):.6g} nats, its total_nll is {total:.6g}")


@pytest.mark.parametrize("ratio, flagged", [(RATIO_INSIDE, False), (RATIO_OUTSIDE, True),
                                            (0.9801, False), (0.9799, True)])
def test_a_transcript_is_flagged_2_percent_apart_in_per_character_perplexity(ratio, flagged):
    """The card says 30 nats over 100 characters; the weights give per-character perplexity
    ``ratio`` times lower (``ratio`` > 1: the card claims worse than the weights)."""
    measured = 30.0 - 100 * math.log(ratio)
    card = card_of([5.0, 30.0], [4, 7])
    problems = integrity.card_loss_problems(card, sample_of([1], [measured], [7], [100]))
    assert bool(problems) is flagged
    if flagged:
        apart = abs(ratio - 1)
        assert problems[0] == (
            f"1 of the 1 test transcripts re-measured here (a fresh random sample of 1 of the 9 "
            f"run_card.json records, seed 7, and the 0 whose recorded loss per character is "
            f"lowest) disagree with it by more than 2%: #1 t1: 30 nats over 7 tokens in "
            f"run_card.json, these weights {measured:.6g} over 7 ({apart:.1%} apart in "
            f"per-character perplexity)")


def test_another_token_count_or_an_empty_transcript_is_compared_too():
    card = card_of([5.0, 30.0], [4, 7])
    assert integrity.card_loss_problems(card, sample_of([0], [5.0], [5], [10]))
    # an empty transcript: its [EOS] alone, per 1 character
    assert not integrity.card_loss_problems(card, sample_of([0], [5.0 - 0.0197], [4], [0]))
    assert integrity.card_loss_problems(card, sample_of([0], [5.0 - 0.0199], [4], [0]))
    far = integrity.card_loss_problems(card_of([800.0], [4]), sample_of([0], [0.0], [4], [1]))
    assert "(inf% apart in per-character perplexity)" in far[0]


@pytest.mark.parametrize("wrong, listed, more", [(5, 5, ""), (6, 5, "; and 1 more")])
def test_the_first_5_disagreements_are_listed_then_counted(wrong, listed, more):
    nll = [10.0] * 8
    card = card_of(nll, [3] * 8)
    indices = list(range(wrong))
    problems = integrity.card_loss_problems(card, sample_of(indices, [1.0] * wrong, [3] * wrong,
                                                            [10] * wrong))
    assert problems[0].count(" nats over 3 tokens in run_card.json") == listed
    assert problems[0].endswith("per-character perplexity)" + more)


def test_unreadable_losses_are_one_flag():
    card = card_of([10.0, -1.0], [3, 3])
    assert integrity.card_loss_problems(card, {}) == [
        "run_card.json's per-transcript losses are not one finite non-negative loss and one token "
        "count per transcript it counts: not as make handin writes them"]


def handin_with(tmp_path, card) -> Extraction:
    (tmp_path / "run_card.json").write_text(json.dumps(card))
    return Extraction({"run_card.json": tmp_path / "run_card.json"})


@pytest.mark.parametrize("ratio, flagged", [(RATIO_INSIDE, False), (RATIO_OUTSIDE, True)])
def test_metrics_are_flagged_2_percent_from_the_cards_summed_losses(tmp_path, ratio, flagged):
    """Losses of 2000 nats over 1000 characters: e**2; test_metrics.json reports ``ratio`` of
    it."""
    card = card_of([500.0, 1500.0], [3, 3])
    lm = {"reported_perplexity_char": math.e ** 2 * ratio,
          "compared_sample": sample_of([0], [500.0], [3], [100])}
    flags = integrity.integrity_flags(handin_with(tmp_path, card), lm)
    assert len(flags) == flagged
    if flagged:
        assert flags[0].startswith(f"test_metrics.json reports a test perplexity of "
                                   f"{math.e ** 2 * ratio:.4f}; these weights give 7.3891 on the "
                                   f"same 2 transcripts (split 'test', subset 1.0) (the sum of "
                                   f"run_card.json's per-transcript losses; the 1 of them "
                                   f"re-measured here agree): 2.0% apart, more than 2%")


@pytest.mark.parametrize("ratio, flagged", [(RATIO_INSIDE, False), (RATIO_OUTSIDE, True)])
def test_an_older_cards_metrics_are_flagged_2_percent_from_the_remeasurement(tmp_path, ratio,
                                                                            flagged):
    card = {"test_set": {"transcripts": 4, "split": "test", "subset": 0.5}}
    lm = {"reported_perplexity_char": 5.0 * ratio, "compared_perplexity_char": 5.0}
    flags = integrity.integrity_flags(handin_with(tmp_path, card), lm)
    assert flags == ([f"test_metrics.json reports a test perplexity of {5.0 * ratio:.4f}; these "
                      f"weights give 5.0000 on the same 4 transcripts (split 'test', subset 0.5): "
                      f"2.0% apart, more than 2%"] if flagged else [])


def test_losses_that_disagree_flag_the_metrics_against_the_card_alone(tmp_path):
    card = card_of([500.0, 1500.0], [3, 3])
    lm = {"reported_perplexity_char": 3.0, "compared_sample": sample_of([0], [1.0], [3], [100])}
    flags = integrity.integrity_flags(handin_with(tmp_path, card), lm)
    assert len(flags) == 2 and flags[1].startswith(
        "test_metrics.json reports a test perplexity of 3.0000; run_card.json's per-transcript "
        "losses give 7.3891 on the same 2 transcripts")


def test_a_card_with_broken_losses_and_no_sample_is_flagged(tmp_path):
    card = card_of([10.0, -1.0], [3, 3])
    assert integrity.integrity_flags(handin_with(tmp_path, card), {}) == [
        integrity.card_loss_problems(card, {})[0]]
    assert integrity.integrity_flags(handin_with(tmp_path, {"test_set": {}}), {}) == []


def test_no_files_no_flags_and_no_card_one_flag(tmp_path):
    lm = {"reported_perplexity_char": 2.0, "perplexity_char": 9.0}
    assert integrity.integrity_flags(Extraction(), lm) == []
    other = tmp_path / "config.yaml"
    other.write_text("")
    flags = integrity.integrity_flags(Extraction({"config.yaml": other}), lm)
    assert flags[0] == ("no readable run_card.json: the handin was not packed by make handin")
    assert len(flags) == 2 and "on the hidden test set" in flags[1]


@pytest.mark.parametrize("value, shown", [("a" * 18, repr("a" * 18)),
                                          ("a" * 19, "'" + "a" * 16 + "...")])
def test_a_value_from_the_handin_is_quoted_in_at_most_20_characters(value, shown):
    assert integrity.short(value) == shown


def test_exactly_at_each_tolerance_nothing_is_flagged():
    """Values at which the float comparison is exact: 2% of 50 is 1.0; expm1 of this gap is
    0.02 to the last bit; a total 1e-9 from the losses' sum."""
    assert integrity.close(51.0, 50.0) and integrity.close(49.0, 50.0)
    gap = 0.019802627296179712
    assert abs(math.expm1(gap)) == 0.02
    card = card_of([gap], [2])
    assert integrity.card_loss_problems(card, sample_of([0], [0.0], [2], [1])) == []
    assert integrity.card_loss_problems(card_of([0.0], [1], 1e-9), sample_of([], [], [], [])) == []


@pytest.mark.parametrize("gap, infinite", [(699.5, False), (700.0, True), (700.5, True)])
def test_a_gap_of_700_nats_a_character_or_more_is_infinitely_apart(gap, infinite):
    problems = integrity.card_loss_problems(card_of([gap], [2]), sample_of([0], [0.0], [2], [1]))
    assert ("(inf% apart in per-character perplexity)" in problems[0]) is infinite


@pytest.mark.parametrize("reported, measured, flagged", [(0.0, 9.0, False), (0.5, 9.0, True),
                                                         (4.0, 5.0, False), (4.0, 5.01, True)])
def test_a_report_more_than_25_percent_below_the_hidden_set_is_flagged(reported, measured,
                                                                      flagged):
    lm = {"reported_perplexity_char": reported, "perplexity_char": measured}
    assert bool(integrity.below_hidden_set(lm)) is flagged


def test_a_sample_without_usable_metrics_compares_nothing(tmp_path):
    card = card_of([500.0, 1500.0], [3, 3])
    lm = {"reported_perplexity_char": None, "compared_sample": sample_of([0], [500.0], [3], [100])}
    assert integrity.integrity_flags(handin_with(tmp_path, card), lm) == []
