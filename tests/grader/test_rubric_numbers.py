# hw4p1: instructor-only
"""The rubric's numbers by value (``autograder.judging.scoring.rubric``): the time limits that
autograder/README.md quotes (60 s a mytorch category, 300 s the model, 240 s the judge's own work,
780 s in all), the scores of a handin that cannot be graded (every category at the integer 0), the
leaderboard's columns as Autolab reads them, and the rounding of points added up.

    .venv/bin/python -m pytest -q tests/grader/test_rubric_numbers.py
"""
from autograder.judging.scoring import rubric
from hw4lib.grading_numbers import LM_CATEGORY, MYTORCH_RUBRIC


def test_the_time_limits_are_the_ones_the_readme_quotes():
    assert (rubric.MYTORCH_TIMEOUT_S, rubric.MODEL_TIMEOUT_S) == (60.0, 300.0)
    assert len(MYTORCH_RUBRIC) == 4
    assert rubric.worst_case_seconds() == 780.0
    # each limit counts once, the mytorch one per category
    assert rubric.worst_case_seconds(model_timeout=10.0, mytorch_timeout=1.0) == 10 + 4 + 240


def test_a_handin_that_cannot_be_graded_scores_the_integer_zero_everywhere():
    zeros = rubric.zero_scores()
    assert list(zeros) == [*MYTORCH_RUBRIC, LM_CATEGORY]
    assert all(type(points) is int and points == 0 for points in zeros.values())


def test_the_leaderboard_sorts_perplexity_and_parameters_ascending():
    assert rubric.SCOREBOARD_COLUMNS == [{"hdr": "Perplexity (hidden set)", "asc": 1},
                                         {"hdr": "Parameters", "asc": 1}, {"hdr": "Tokenizer"}]


def test_points_are_added_and_rounded_to_two_decimals():
    assert rubric.added([0.1, 0.2]) == 0.3
    assert rubric.added([1.004, 1.0]) == 2.0
    assert rubric.added([1.006]) == 1.01
    assert rubric.added([]) == 0
