"""The points of each graded part of the homework and its pass mark. Standard library only.

The one definition of these numbers: the autograder awards these points and scores the language
model on these thresholds, ``tests/test_mytorch.py`` reports the mytorch points, and the README's
"Grading" section and the data card state them, all from this module (it ships with the homework
and with the autograder alike). Change a number here and all of them follow.
"""

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
