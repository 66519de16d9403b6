# hw4p1: instructor-only
"""Every threshold that decides a grade, a flag or a hint, pinned by its value: each is written
here as a number (never read from the module that decides), with a case on each side close to it,
through the function that decides. A threshold changed on purpose changes its line here too, with
the measurement that justifies it (docs/results.md).

    .venv/bin/python -m pytest -q tests/grader/test_thresholds.py
"""
import base64
import math
import zlib

import numpy as np
import pytest
import torch

from autograder.judging.scoring import integrity, rubric, weights_fingerprint as wf
from autograder.judging.scoring.lm_diagnosis import lm_hint
from hw4lib import handin_format


@pytest.mark.parametrize("ratio, flagged", [(1.249, False), (1.25, False), (1.251, True),
                                            (1.2, False), (1.3, True)])
def test_the_hidden_margin_is_25_percent(ratio, flagged):
    """A report more than 25% below the hidden set's measurement is flagged, not one within."""
    reported = 4.0
    lm = {"reported_perplexity_char": reported, "perplexity_char": reported * ratio}
    assert bool(integrity.below_hidden_set(lm)) is flagged
    if flagged:
        assert "(honest runs: at most 25% above their report)" in integrity.below_hidden_set(lm)[0]


@pytest.mark.parametrize("ratio, close", [(1.0199, True), (0.9801, True), (1.0201, False),
                                          (0.9799, False)])
def test_the_reported_tolerance_is_2_percent(ratio, close):
    """A reported perplexity within 2% (relative to the measured one) agrees; beyond, it does not
    (the flag of test_metrics.json against the run card and the language-model hints both)."""
    assert handin_format.REPORTED_TOLERANCE == 0.02
    assert integrity.close(4.0 * ratio, 4.0) is close
    hint = lm_hint(3.0, 3.5, 3.0 * ratio, 3.0, 2.95, handin_format.REPORTED_TOLERANCE)
    assert (hint == "") is close


@pytest.mark.parametrize("gap, hinted", [(1.099, False), (1.101, True)])
def test_the_validation_to_test_gap_is_10_percent(gap, hinted):
    """Weights 10% worse on the test transcripts than their checkpoint's best validation are
    still its best epoch's; beyond, the hint says the checkpoint holds other weights."""
    hint = lm_hint(4.0, 3.5, 4.0, 4.0, 4.0 / gap, 0.02)
    assert ("best epoch" in hint) is hinted


def test_the_lm_curve_rounds_to_cents():
    """Exact values of the curve (full marks at 3.5, zero at 4.5, 50 points) between its ends,
    where rounding to whole points, to tenths or not at all would each give another number."""
    assert rubric.FULL_MARKS_PPL == 3.5 and rubric.ZERO_MARKS_PPL == 4.5 and rubric.LM_POINTS == 50
    exact = {3.5: 50.0, 3.50001: 50.0, 3.61234: 44.38, 3.777: 36.15, 4.0: 25.0, 4.4998: 0.01,
             4.49: 0.5, 4.5: 0.0, 9.0: 0.0}
    for perplexity, points in exact.items():
        assert rubric.lm_score(perplexity) == points, perplexity
    assert rubric.lm_score(3.0, full_marks_ppl=2.0, zero_marks_ppl=4.0, points=7) == 3.5
    assert rubric.lm_score(2.5, full_marks_ppl=2.0, zero_marks_ppl=5.0, points=10) == 8.33
    assert rubric.added([0.004, 0.004]) == 0.01 and rubric.added([1 / 3] * 3) == 1.0


def fingerprint(learned: np.ndarray, start: np.ndarray) -> str:
    """A wf1 fingerprint of one tensor whose sketches are ``learned`` and ``start`` (K,)."""
    sketches = np.stack([learned, start])[None].astype(np.float32)
    encoded = base64.b64encode(zlib.compress(sketches.tobytes())).decode()
    return f"wf1:{'0' * 16}:{encoded}"


@pytest.mark.parametrize("sine, shared", [(0.0249, True), (0.0251, False), (0.02, True),
                                          (0.03, False)])
def test_the_shared_weights_tolerance_is_0_025(sine, shared):
    """Two handins whose learned weights make an angle of sine 0.025 or less share their weights;
    more, they do not (the distance is that sine, the initialisations projected away)."""
    assert wf.TOLERANCE == 0.025
    width = wf.SKETCH_WIDTH
    start, along, across, start_b = np.eye(width)[:4]  # initialisations apart from what is learned
    other = math.sqrt(1 - sine**2) * along + sine * across
    prints = {"a": fingerprint(along + start, start), "b": fingerprint(other + start_b, start_b)}
    assert wf.distance(wf.decode(prints["a"])[1], wf.decode(prints["b"])[1]) == pytest.approx(
        sine, abs=2e-6)
    assert bool(wf.shared_weights(prints)) is shared


@pytest.mark.parametrize("fraction, trained", [(0.9e-4, False), (1.1e-4, True)])
def test_an_untrained_tensor_changed_less_than_1e_4(fraction, trained):
    """A tensor whose part beyond its initial direction is 1e-4 of it or less did not train: its
    sketches are left out (zeros); a little more, and they are kept."""
    start = torch.zeros(64, dtype=torch.float64)
    start[0] = 1.0
    weights = start.clone()
    weights[1] = fraction / math.sqrt(1 - fraction**2)  # learned_fraction == fraction
    assert wf.learned_fraction(weights, start) == pytest.approx(fraction, rel=1e-9)
    sketches = wf.decode(wf.fingerprint({"w": weights}, {"w": start}))[1]
    assert bool(np.abs(sketches).sum() > 0) is trained


@pytest.mark.parametrize("transcripts", [1, 10, 50, 200, 1000, 5000])
def test_the_run_card_sample_catches_a_10_percent_tamper_99_times_in_100(transcripts):
    """The sample is the smallest that includes one of ceil(10%) tampered transcripts with
    probability at least 0.99, computed here from the hypergeometric product."""
    tampered = max(1, math.ceil(0.10 * transcripts))
    missed, expected = 1.0, transcripts
    for drawn in range(1, transcripts + 1):
        missed *= (transcripts - tampered - drawn + 1) / (transcripts - drawn + 1)
        if 1 - missed >= 0.99 - 1e-12:
            expected = drawn
            break
    assert handin_format.sample_size(transcripts) == expected
