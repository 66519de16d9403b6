"""What the autograder awards, and its time limits. Standard library only.

The time limits an instructor may want to tune live here. The points and the perplexity thresholds
of the language-model curve live in ``hw4lib/grading_numbers.py``, shared with the handout; what a
handin holds and its size limits (files, model) in ``hw4lib/handin_format.py``, shared with
``make handin``.
"""
from __future__ import annotations

from hw4lib.grading_numbers import (FULL_MARKS_PPL, LM_CATEGORY, LM_POINTS,  # noqa: F401
                                    MYTORCH_RUBRIC, ZERO_MARKS_PPL, lm_score)  # (re-exported)

# Every category the grader scores, in the order of the scores line.
RUBRIC = {**MYTORCH_RUBRIC, LM_CATEGORY: LM_POINTS}

# Time limits in seconds (wall clock). Each mytorch category runs in its own process; the language
# model is rebuilt and evaluated in one more.
MYTORCH_TIMEOUT_S = 60.0
MODEL_TIMEOUT_S = 300.0
# The judge's own time beyond its children's limits: choosing the sandbox (each mode's probe may
# take sandbox.PROBE_TIMEOUT_S), draining each child's output after it ends, extracting the handin
# and inspecting its mytorch (static_inspection.INSPECTION_S at most), computing the hidden tests'
# truths. tests/grader/test_worker_scoring.py checks that it covers the probes and the inspection.
JUDGE_OVERHEAD_S = 240.0


def worst_case_seconds(model_timeout: float = MODEL_TIMEOUT_S,
                       mytorch_timeout: float = MYTORCH_TIMEOUT_S) -> float:
    """The longest one grading can take, every limit reached: what a platform's timeout must
    exceed (autograder/README.md quotes it for Autolab and Gradescope)."""
    return model_timeout + len(MYTORCH_RUBRIC) * mytorch_timeout + JUDGE_OVERHEAD_S


# The leaderboard: only what the judge measured itself (never the handin's own numbers), the row
# autograder/judging/scoring/report.py's GradingReport.scoreboard gives. Autolab's assessment takes
# SCOREBOARD_COLUMNS as its scoreboard spec; Gradescope's results.json gets the same values as its
# "leaderboard".
SCOREBOARD_COLUMNS = [{"hdr": "Perplexity (hidden set)", "asc": 1}, {"hdr": "Parameters", "asc": 1},
                      {"hdr": "Tokenizer"}]


def added(points) -> float:
    """Points added up as the grader adds them (a category's tests, a handin's categories): the
    sum, rounded to 2 decimals."""
    return round(sum(points), 2)


def zero_scores() -> dict[str, float]:
    """Every category at 0: what a handin that cannot be graded at all earns."""
    return {category: 0 for category in RUBRIC}
