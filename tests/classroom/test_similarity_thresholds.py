# hw4p1: instructor-only
"""The similarity flag's threshold pinned by value (autograder/classroom/similarity.py): two
students who share 20 lines of code and each wrote 20 (then 21) lines of their own share half of
their code (then less) and are flagged (then not).

    .venv/bin/python -m pytest -q tests/classroom/test_similarity_thresholds.py
"""
import random

import pytest

from autograder.classroom import similarity

OPERATORS = ("+", "-", "*", "/", "%", "&", "|", "^", "<<", ">>", "//", "**", "<", ">", "==", "!=",
             "and", "or")


def lines(seed: int, count: int) -> str:
    """``count`` lines of code that no other seed's share a run of 25 normalised tokens with."""
    rng = random.Random(seed)
    return "".join("x = " + " ".join(f"({rng.choice('xyz')} {rng.choice(OPERATORS)}"
                                     for _ in range(8)) + " y" + ")" * 8 + "\n"
                   for _ in range(count))


@pytest.mark.parametrize("own, share, flagged", [(20, 0.5016, True), (21, 0.4899, False)])
def test_half_of_a_students_code_found_in_anothers_flags_the_pair(tmp_path, own, share, flagged):
    shared = lines(0, 20)
    documents = {"a": shared + lines(1, own), "b": shared + lines(2, own)}
    [row] = similarity.compare(documents, "", tmp_path)
    assert row["similarity"] == pytest.approx(share, abs=0.003), row
    assert row["flagged"] is flagged, row
