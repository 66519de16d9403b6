"""The points of each graded part of the homework and its pass mark. Standard library only.

The one definition of these numbers: the autograder awards these points and scores the language
model on these thresholds, ``tests/test_mytorch.py`` reports the mytorch points, and the README's
"Grading" section and the data card state them, all from this module (it ships with the homework
and with the autograder alike). Change a number here and all of them follow.
"""
import math

# mytorch categories: the classes the autograder's hidden tests grade (each hidden test carries a
# share of its category's points).
MYTORCH_RUBRIC = {
    "Linear": 5,
    "Softmax": 5,
    "ScaledDotProductAttention": 20,
    "MultiHeadAttention": 20,
}
LM_CATEGORY = "LanguageModel"
LM_POINTS = 50

# Per-character perplexity on the hidden test set: LM_POINTS at or below FULL_MARKS_PPL (the pass
# mark), nothing at or above ZERO_MARKS_PPL, a straight line in between, so that a model just short
# of the pass mark keeps most of its credit rather than falling off a cliff.
FULL_MARKS_PPL = 3.5
ZERO_MARKS_PPL = 4.5


def lm_score(perplexity_char: float, full_marks_ppl: float = FULL_MARKS_PPL,
             zero_marks_ppl: float = ZERO_MARKS_PPL, points: float = LM_POINTS) -> float:
    """Points for a per-character perplexity on the hidden test set.

    ``points`` (LM_POINTS; a rescore gives those of the scoring line it applies) at or below
    ``full_marks_ppl``, 0 at or above ``zero_marks_ppl``, linear in between,
    rounded to 2 decimals. NaN, infinite and non-numeric values score 0. The default thresholds
    are the homework's; ``python -m tools.make_autograde --full-marks-ppl X --zero-marks-ppl Y``
    builds a grader with others and records the values used in its build_info.json. The grader
    scores with this function (``autograder.judging.scoring.rubric`` imports it), and ``make
    handin`` states what it gives the perplexity measured on the public test set.
    """
    if not full_marks_ppl < zero_marks_ppl:
        raise ValueError(f"full_marks_ppl ({full_marks_ppl}) must be below zero_marks_ppl "
                         f"({zero_marks_ppl})")
    if not isinstance(perplexity_char, (int, float)) or isinstance(perplexity_char, bool):
        return 0.0
    if not math.isfinite(perplexity_char) or perplexity_char >= zero_marks_ppl:
        return 0.0
    if perplexity_char <= full_marks_ppl:
        return float(points)
    fraction = (zero_marks_ppl - perplexity_char) / (zero_marks_ppl - full_marks_ppl)
    return round(points * fraction, 2)
