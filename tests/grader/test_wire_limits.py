# hw4p1: instructor-only
"""The wire format's limits and branches, each pinned by its value with a case on each side
(``autograder.sandboxed.wire``): a record's header and array sizes, a frame's payload, an error's
fields and operands, the line read for a hint, the PEP 263 declaration the worker honours; a
program's names and copies; a record decoded back to the values it holds, the first of each test,
the unexpected ones skipped, the malformed ones ending the stream with a note that says why.

    .venv/bin/python -m pytest -q tests/grader/test_wire_limits.py
"""
import dataclasses
import io
import json
import struct

import numpy as np
import pytest

from autograder.sandboxed import wire

HEADER_LIMIT = 64 * 1024        # a record's JSON header, bytes
ARRAY_LIMIT = 32 * 1024 * 1024  # one returned .npy, bytes
FRAME_LIMIT = 1024 * 1024       # one frame's payload, bytes
FIELD_LIMIT = 200               # an error's text field, characters
OPERAND_ROW = 11                # kind, dtype, ndim and 8 dims
OPERAND_LIMIT = 1 << 40         # the largest dim or int an operand row carries


def record(header: dict, *blobs: bytes) -> bytes:
    """A record as a hostile worker could write it: 8-byte little-endian header length, the
    JSON ``header`` as given, then ``blobs``."""
    text = json.dumps(header).encode()
    return struct.pack("<Q", len(text)) + text + b"".join(blobs)


def npy(array: np.ndarray, allow_pickle: bool = False) -> bytes:
    """``array`` as .npy bytes."""
    buffer = io.BytesIO()
    np.save(buffer, array, allow_pickle=allow_pickle)
    return buffer.getvalue()


def framing_of(sizes: dict) -> bytes:
    """The length prefix and header of a record of test 't' whose arrays have ``sizes``."""
    return record({"test": "t", "error": None, "sizes": sizes, "none": []})


# --- sizes: one byte under, at and over each limit -------------------------------------------

@pytest.mark.parametrize("length, accepted", [(HEADER_LIMIT - 1, True), (HEADER_LIMIT, True),
                                              (HEADER_LIMIT + 1, False)])
def test_a_header_of_at_most_64_kib_is_read(length, accepted):
    prefix = struct.pack("<Q", length)
    if accepted:
        assert wire.framing_size(prefix) == 8 + length
    else:
        with pytest.raises(ValueError, match=f"a header of {length} bytes"):
            wire.framing_size(prefix)


@pytest.mark.parametrize("size, accepted", [(-1, False), (0, True), (ARRAY_LIMIT, True),
                                            (ARRAY_LIMIT + 1, False), ("3", False)])
def test_an_array_of_0_to_32_mib_is_announced(size, accepted):
    """record_extent reads only the framing: the announced size counts in the record's extent
    when it is within the limit, and is refused past it (or negative, or not an int)."""
    framing = framing_of({"a": size, "b": 5})
    if accepted:
        assert wire.record_extent(framing) == ("t", len(framing) + size + 5)
    else:
        with pytest.raises(ValueError, match=f"an array of {size!r} bytes"):
            wire.record_extent(framing)


@pytest.mark.parametrize("length, accepted", [(FRAME_LIMIT, True), (FRAME_LIMIT + 1, False)])
def test_a_frame_carries_at_most_1_mib(length, accepted):
    data = b"T" + length.to_bytes(4, "little")
    if accepted:
        assert wire.frame_header(data) == (wire.OUTPUT_TAIL, length)
    else:
        with pytest.raises(ValueError, match=f"{length} bytes"):
            wire.frame_header(data)


def test_a_frame_is_its_kind_its_length_and_its_payload():
    assert wire.frame(wire.RESULT, b"abc") == b"R\x03\x00\x00\x00abc"
    for kind in (b"R", b"H", b"T", b"E"):
        assert wire.frame_header(kind + b"\x00\x00\x00\x00") == (kind, 0)
    with pytest.raises(ValueError, match="kind b'X'"):
        wire.frame_header(b"X\x00\x00\x00\x00")


# --- an error's fields -----------------------------------------------------------------------

@pytest.mark.parametrize("chars, kept", [(FIELD_LIMIT, True), (FIELD_LIMIT + 1, False)])
def test_an_error_text_field_of_at_most_200_characters_is_kept(chars, kept):
    error = {"kind": "raised", "type": "x" * chars, "step": 3, "line": True}
    expected = {"kind": "raised", "step": 3} | ({"type": "x" * chars} if kept else {})
    assert wire.error_fields(error) == expected


@pytest.mark.parametrize("rows, kept", [(6, True), (7, False)])
def test_at_most_6_operand_rows_are_kept(rows, kept):
    operands = [1] * (rows * OPERAND_ROW)
    assert ("operands" in wire.error_fields({"operands": operands})) is kept
    assert wire.error_fields({"operands": operands[:-1]}).get("operands") == (
        operands[:-1] if kept else None)


@pytest.mark.parametrize("value, kept", [(-1, False), (0, True), (OPERAND_LIMIT, True),
                                         (OPERAND_LIMIT + 1, False), (True, False)])
def test_an_operand_integer_lies_in_0_to_2_to_the_40(value, kept):
    operands = [0, 1, value]
    assert wire.error_fields({"operands": operands}) == ({"operands": operands} if kept else {})


def test_an_error_that_is_no_dict_is_unreadable_and_none_is_no_error():
    assert wire.error_fields(None) is None
    assert wire.error_fields(["raised"]) == {"kind": "unreadable"}


@pytest.mark.parametrize("flat, count, rows", [
    ([0, 0] + [0] * 9, 1, [[0, 0] + [0] * 9]),
    ([4, 16] + [7] * 9, 1, [[4, 16] + [7] * 9]),            # the last kind and dtype
    ([5, 0] + [0] * 9, 1, None),                           # no kind 5
    ([0, 17] + [0] * 9, 1, None),                          # no dtype 17
    ([-1, 0] + [0] * 9, 1, None),
    ([0, -1] + [0] * 9, 1, None),
    ([1, 11, 2, 4, 3] + [0] * 6 + [2, 15, 2, 9] + [0] * 7, 2,
     [[1, 11, 2, 4, 3] + [0] * 6, [2, 15, 2, 9] + [0] * 7]),
    ([0] * 11, 2, None),                                   # one row where two were named
    ([0] * 12, 1, None),
])
def test_operand_rows_are_11_integers_of_known_kind_and_dtype(flat, count, rows):
    assert wire.operand_rows(flat, count) == rows


# --- the line that raised ----------------------------------------------------------------------

def test_the_line_read_lies_in_the_first_mib_and_is_cut_to_200_characters():
    source = b"a\n  " + b"y" * 205 + b"  \nlast"
    assert [wire.line_of(source, n) for n in (0, 1, 2, 3, 4)] == ["", "a", "y" * 200, "last", ""]
    assert wire.line_of(b"y" * 199 + b"z", 1) == "y" * 199 + "z"
    long_first = b"x" * (1024 * 1024 - 5) + b"\nabcdefgh\n"
    assert wire.line_of(long_first, 2) == "abcd"


@pytest.mark.parametrize("code, names", [
    ("c = foo.bar + 1", ["foo"]),
    ("return self.a.b + x", ["self.a", "x"]),
])
def test_a_dotted_name_is_named_by_its_first_part_or_self_and_its_attribute(code, names):
    assert wire.line_operands(code) == names


def test_each_step_is_labelled_in_the_students_terms():
    program = wire.Program()
    x = program.array(np.zeros(2))
    layer = program.new("Linear", 2, 3)
    program.call(layer, "forward", x)
    program.get(layer, "W")
    program.echo(x)
    steps = program.steps
    labels = [wire.step_label(steps, index) for index in range(-1, len(steps) + 1)]
    assert labels == ["importing mytorch", "Linear(...)", "Linear.forward", "reading Linear.W",
                      "reading an input back", "importing mytorch"]
    # an object the program did not build before the step is unknown
    assert wire.step_label([steps[1]], 0) == "?.forward"


# --- the encoding a mytorch file declares ------------------------------------------------------

@pytest.mark.parametrize("source, encoding", [
    (b"# -*- coding: latin-1 -*-\nx = 1\n", "latin-1"),
    (b"\xef\xbb\xbf# coding=utf-8\n", "utf-8"),
    (b"#!/usr/bin/env python\n# vim: set fileencoding=cp1252 :\n", "cp1252"),
    (b"\n# coding: koi8-r\n", "koi8-r"),
    (b"x = 1\n# coding: latin-1\n", None),        # line 2 counts only after a comment or blank
    (b"#\n\n# coding: latin-1\n", None),            # line 3 never counts
    (b"x = 1\n", None),
    (b"", None),
])
def test_the_declared_encoding_is_read_from_line_1_or_2_as_python_does(source, encoding):
    assert wire.declared_encoding(source) == encoding


@pytest.mark.parametrize("encoding, native", [("utf-8", True), ("UTF_8", True),
                                              ("utf-8-unix", True), ("utf8", False),
                                              ("latin-1", False), ("utf-16", False)])
def test_only_utf_8_spellings_are_read_without_a_codec_lookup(encoding, native):
    assert wire.is_native_utf8(encoding) is native


# --- a program's names and copies --------------------------------------------------------------

def test_a_program_names_each_value_once_and_keeps_its_own_copies(tmp_path):
    program = wire.Program()
    x = np.arange(3.0)
    first = program.array(x)
    x[0] = 7.0                                     # the judge's later change is not sent
    layer = program.new("Linear", 3)
    second = program.array(np.ones(2))
    single = program.call(layer, "forward", first)
    pair = program.call(layer, "backward", second, outputs=2)
    weight = program.get(layer, "W")
    back = program.echo(first)
    assert [first.name, layer.name, second.name, single.name] == ["in0", "r1", "in2", "r3"]
    assert [ref.name for ref in pair] == ["r4_0", "r4_1"]
    assert [weight.name, back.name] == ["r5", "r6"]
    assert program.returned == ["r3", "r4_0", "r4_1", "r5", "r6"]
    assert program.arrays["in0"].tolist() == [0.0, 1.0, 2.0]
    with pytest.raises(dataclasses.FrozenInstanceError):
        first.name = "in2"
    program.save(tmp_path / "a" / "b")             # parent folders created
    arrays, steps, returned = wire.load_program(tmp_path / "a" / "b")
    assert arrays["in0"].tolist() == [0.0, 1.0, 2.0] and returned == program.returned


# --- records: encoded, then decoded to what they hold ----------------------------------------

def test_a_record_decodes_to_its_values_nones_and_refusals():
    small, big = np.arange(3, dtype=np.int16), np.ones((4, 5))
    stream = wire.encode_record("t", None, {"gone": None, "small": small, "big": big},
                                refused=["text"])
    header, extent = wire.record_extent(stream[:wire.framing_size(stream[:8])])
    assert (header, extent) == ("t", len(stream))
    records, note = wire.decode_records(stream, {"t": ["gone", "small", "big", "text"]})
    assert note == ""
    got = records["t"]
    assert got.error is None and got.values["gone"] is None
    assert got.values["small"].tolist() == [0, 1, 2] and got.values["small"].dtype == np.int16
    assert got.values["big"].tolist() == big.tolist()
    assert got.problems == {"text": wire.NOT_AN_ARRAY}


def test_an_object_array_is_never_pickled_onto_the_wire():
    with pytest.raises(ValueError, match="pickle"):
        wire.encode_record("t", None, {"o": np.array([{}], dtype=object)})


def test_records_after_an_unexpected_one_are_read_and_the_first_of_each_test_counts():
    stream = (wire.encode_record("other", None, {"v": np.zeros(1)})
              + wire.encode_record("t", {"kind": "raised"}, {"v": np.ones(2)})
              + wire.encode_record("t", None, {"v": np.zeros(3)}))
    records, note = wire.decode_records(stream, {"t": ["v"]})
    assert note == "" and list(records) == ["t"]
    assert records["t"].error == {"kind": "raised"} and records["t"].values["v"].tolist() == [1, 1]


def test_only_the_names_a_test_returns_are_kept():
    """A value both sent and listed None keeps its array; a None or refusal of a name the test
    does not return is dropped."""
    blob = npy(np.arange(2))
    stream = record({"test": "t", "error": None, "sizes": {"v": len(blob)},
                     "none": ["v", "stray"], "refused": ["v", "other"]}, blob)
    records, note = wire.decode_records(stream, {"t": ["v"]})
    assert note == ""
    assert records["t"].values["v"].tolist() == [0, 1] and records["t"].problems == {}
    assert list(records["t"].values) == ["v"]


@pytest.mark.parametrize("header, blobs, why", [
    ({"test": "t", "error": None, "sizes": [], "none": []}, (),
     "ValueError: a header without sizes"),
    ({"test": "t", "error": None, "sizes": {}, "none": {}}, (),
     "ValueError: a header without sizes"),
    ({"test": "t", "error": None, "sizes": {"v": 100}, "none": []}, (b"\0" * 99,),
     "ValueError: a truncated array"),
    ({"test": "t", "error": None, "sizes": {}, "none": [], "refused": "v"}, (),
     "ValueError: a header with unreadable refusals"),
    ({"test": "t", "error": None, "sizes": {"v": ARRAY_LIMIT + 1}, "none": []}, (),
     f"ValueError: an array of {ARRAY_LIMIT + 1} bytes"),
])
def test_a_malformed_record_ends_the_stream_with_a_note_saying_why(header, blobs, why):
    good = wire.encode_record("first", None, {"v": np.zeros(1)})
    records, note = wire.decode_records(good + record(header, *blobs),
                                        {"first": ["v"], "t": ["v"]})
    assert list(records) == ["first"]
    assert note == f"{wire.UNREADABLE} after 1 results ({why})"


def test_the_note_quotes_at_most_200_characters_of_the_error():
    note = wire.unreadable(2, ValueError("e" * 300))
    assert note == f"{wire.UNREADABLE} after 2 results (ValueError: {'e' * 188})"


@pytest.mark.parametrize("blob, problem", [
    (b"", "not a plain .npy array"),                          # EOFError
    (npy(np.arange(10.0))[:-8], "not a plain .npy array"),    # ValueError: short data
    (npy(np.array([{}], dtype=object), allow_pickle=True), "not a plain .npy array"),
    (npy(np.array(["text"])), wire.NOT_AN_ARRAY),
])
def test_a_value_that_is_no_plain_numeric_npy_is_refused(blob, problem):
    assert wire.load_array(blob) == (None, problem)


def test_an_npz_archive_is_no_array():
    buffer = io.BytesIO()
    np.savez(buffer, a=np.arange(3))
    assert wire.load_array(buffer.getvalue()) == (None, wire.NOT_AN_ARRAY)
    array, problem = wire.load_array(npy(np.array([True, False])))
    assert problem is None and array.tolist() == [True, False]
