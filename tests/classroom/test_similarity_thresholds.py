# hw4p1: instructor-only
"""The similarity flag's threshold pinned by value (autograder/classroom/similarity.py): a student
who shares with another three lines for each line they wrote themselves shares about three
quarters of their code: just above three quarters is flagged, just below is not.

    .venv/bin/python -m pytest -q tests/classroom/test_similarity_thresholds.py
"""
import pytest

from autograder.classroom import similarity
from tests.classroom.similarity_classes import unique_lines

PATH = "mytorch/nn/linear.py"  # each student's one graded module, compared whole


@pytest.mark.parametrize("shared, own_a, own_b, share, flagged", [
    (90, 30, 40, 0.7515, True), (89, 30, 40, 0.7494, False)])
def test_three_quarters_of_a_students_code_found_in_anothers_flags_the_pair(tmp_path, shared, own_a, own_b,
                                                                   share, flagged):
    """The pair's similarity is the larger share (b wrote more of their own): a's, just above
    three quarters of a's code, then just below."""
    assert similarity.NOISE_TOKENS == 25  # copydetect's k, pinned here: the shares barely move
    texts = {"a": unique_lines(0, shared) + unique_lines(1, own_a),
             "b": unique_lines(0, shared) + unique_lines(2, own_b)}
    documents = {student: similarity.code_of({PATH: similarity.fingerprint(text)}, [PATH], {})
                 for student, text in texts.items()}
    [row] = similarity.compare(documents, {}, tmp_path)
    assert row["similarity"] == row["share_of_a"] == pytest.approx(share, abs=0.001), row
    assert row["share_of_b"] < 0.7, row
    assert row["flagged"] is flagged, row
