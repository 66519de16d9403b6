# hw4p1: instructor-only
"""The similarity flag's threshold pinned by value (autograder/classroom/similarity.py): a student
who shares with another as many lines as they wrote themselves shares about half of their code:
just above half is flagged, just below is not.

    .venv/bin/python -m pytest -q tests/classroom/test_similarity_thresholds.py
"""
import random

import pytest

from autograder.classroom import similarity

PATH = "mytorch/nn/linear.py"  # each student's one graded module, compared whole
OPERATORS = ("+", "-", "*", "/", "%", "&", "|", "^", "<<", ">>", "//", "**", "<", ">", "==", "!=",
             "and", "or")


def lines(seed: int, count: int) -> str:
    """``count`` lines of code that no other seed's share a run of 25 normalised tokens with."""
    rng = random.Random(seed)
    return "".join("x = " + " ".join(f"({rng.choice('xyz')} {rng.choice(OPERATORS)}"
                                     for _ in range(8)) + " y" + ")" * 8 + "\n"
                   for _ in range(count))


@pytest.mark.parametrize("shared, own_a, own_b, share, flagged", [
    (20, 20, 30, 0.5016, True), (40, 40, 60, 0.4986, False)])
def test_half_of_a_students_code_found_in_anothers_flags_the_pair(tmp_path, shared, own_a, own_b,
                                                                   share, flagged):
    """The pair's similarity is the larger share (b wrote more of their own): a's, just above
    half of a's code, then just below."""
    assert similarity.NOISE_TOKENS == 25  # copydetect's k, pinned here: the shares barely move
    texts = {"a": lines(0, shared) + lines(1, own_a), "b": lines(0, shared) + lines(2, own_b)}
    documents = {student: similarity.code_of({PATH: similarity.fingerprint(text)}, [PATH], {})
                 for student, text in texts.items()}
    [row] = similarity.compare(documents, "", tmp_path)
    assert row["similarity"] == row["share_of_a"] == pytest.approx(share, abs=0.001), row
    assert row["share_of_b"] < 0.45, row
    assert row["flagged"] is flagged, row
