# hw4p1: instructor-only
"""The static inspection's guard at its bounds (``autograder.judging.intake.handin_guard``): a
file read up to its limit and refused one byte past it, an error's message kept to 160
characters on one line.

    .venv/bin/python -m pytest -q tests/classroom/test_guard_bounds.py
"""
import pytest

from autograder.judging.intake import handin_guard


@pytest.mark.parametrize("size, limit", [(0, 0), (10, 10), (10, 11), (10_000, 10_000)])
def test_a_file_up_to_its_limit_is_read_whole(tmp_path, size, limit):
    (tmp_path / "a.py").write_bytes(b"x" * size)
    assert handin_guard.read_bounded(tmp_path / "a.py", limit) == b"x" * size


@pytest.mark.parametrize("size, limit", [(1, 0), (11, 10), (10_001, 10_000)])
def test_a_file_one_byte_past_its_limit_is_refused(tmp_path, size, limit):
    (tmp_path / "a.py").write_bytes(b"x" * size)
    with pytest.raises(ValueError, match=f"a.py is larger than {limit} bytes"):
        handin_guard.read_bounded(tmp_path / "a.py", limit)


@pytest.mark.parametrize("message, kept", [
    ("m" * 160, "m" * 160), ("m" * 161, "m" * 160), ("a;  b\n\tc; d", "a, b c, d"), ("", None)])
def test_an_error_is_one_line_of_at_most_160_characters(message, kept):
    described = handin_guard.describe(ValueError(message))
    assert described == (f"ValueError: {kept}" if kept is not None else "ValueError")


def test_a_step_that_raises_is_a_finding_and_one_that_returns_its_value():
    assert handin_guard.guarded("x.py", int, "z") == (
        None, "x.py could not be inspected (ValueError: invalid literal for int() with base 10: "
              "'z')")
    assert handin_guard.guarded("x.py", int, "7") == (7, "")
