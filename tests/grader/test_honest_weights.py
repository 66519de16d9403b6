# hw4p1: instructor-only
"""The shared-weights tolerance and the hidden-set margin hold on the honest trainings they were
derived from (``tools/honest_weights.py``, docs/results.md). Marked ``measurement``: ten
trainings on a fresh machine are a measurement to repeat when the fingerprint or the margin
changes (below), not part of ``make test`` or CI.

    .venv/bin/python -m pytest -q -m measurement tests/grader/test_honest_weights.py
"""
import pytest

from autograder.judging.scoring import integrity, weights_fingerprint as wf


@pytest.mark.measurement
def test_honest_trainings_are_apart_and_their_copies_are_flagged(tmp_path):
    """The trainings of tools/honest_weights.py (seeds, subsets, the same seed with other
    hyperparameters): every pair of one architecture is farther apart than TOLERANCE and every pair probed
    alike than OUTPUT_TOLERANCE; every copy (one ulp, rescaled, permuted, noise of 1% of what was
    learned) within one of them; the initialisation the
    fingerprint removes is the one training used; no honest run reports a perplexity
    HIDDEN_MARGIN below the hidden set's."""
    from tools.honest_weights import measure

    measured = measure(tmp_path, noise_scales=(0.01,))
    assert all(run["initialisation_reproduced"] for run in measured["runs"].values())
    assert min(measured["honest"].values()) > wf.TOLERANCE, measured["honest"]
    unflagged = {copy: (gap, output) for copy, (gap, _, output) in measured["copies"].items()
                 if gap > wf.TOLERANCE and output > wf.OUTPUT_TOLERANCE}
    assert not unflagged, f"copies neither within the weights' nor the outputs' tolerance: {unflagged}"
    assert min(measured["outputs"].values()) > wf.OUTPUT_TOLERANCE, measured["outputs"]
    for run in measured["runs"].values():
        lm = {"reported_perplexity_char": run["reported"], "perplexity_char": run["hidden"]}
        assert integrity.below_hidden_set(lm) == [], run
