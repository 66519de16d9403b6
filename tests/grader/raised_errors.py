# hw4p1: instructor-only
"""An error raised by handin code, taken through the worker's describe, the wire and the judge's
reading, as a grading takes it: for the tests of quoted lines and hint families."""
from pathlib import Path

import pytest

from autograder.judging.scoring.verdicts import line_operands
from autograder.sandboxed import replay, wire


def judged(path: Path, call) -> tuple[dict, str]:
    """(the error's fields as the judge decodes them, the judge's words for the line) of
    ``call()``, which must raise; ``path`` is the file of the code that raised."""
    with pytest.raises(BaseException) as raised:
        call()
    record = wire.encode_record("t", {**replay.describe(raised.value), "step": 0}, {})
    decoded, note = wire.decode_records(record, {"t": []})
    assert note == ""
    error = decoded["t"].error
    return error, line_operands(wire.line_of(path.read_bytes(), error["line"]), error)
