# hw4p1: instructor-only
"""Tests of a program on disk (``autograder.sandboxed.wire``: ``Program.save``, ``load_program``):
two files whatever the number of arrays, each array read back with its values, dtype, shape and
memory order, writable and apart from the judge's, and a layout that points outside the arrays'
file refused by name.

    .venv/bin/python -m pytest -q tests/grader/test_wire_program.py
"""
import json

import numpy as np
import pytest

from autograder.sandboxed import wire


def arrays_of_every_layout() -> dict[str, np.ndarray]:
    """Inputs as the hidden tests send them and their edge cases: every numeric kind and bool,
    0-d, empty, C and Fortran order, a strided view, a non-native byte order, odd sizes (so that
    later arrays start at offsets no dtype is aligned to)."""
    rng = np.random.default_rng(0)
    return {
        "float64": rng.standard_normal((3, 4, 5)),
        "bool": rng.random((2, 7)) < 0.5,
        "float32 F": np.asfortranarray(rng.standard_normal((4, 3)).astype(np.float32)),
        "int8": np.arange(-3, 2, dtype=np.int8),
        "strided": rng.standard_normal((6, 6))[::2, 1::2],
        "0-d": np.array(2.5),
        "empty": np.zeros((0, 3)),
        "uint16": np.array([1, 65535], dtype=np.uint16),
        "big-endian": np.arange(5, dtype=">f8"),
        "float64 F 3-d": np.asfortranarray(rng.standard_normal((2, 3, 4))),
        "int64": rng.integers(-10**12, 10**12, size=(3,)),
    }


def saved(tmp_path, arrays: dict[str, np.ndarray]) -> tuple[wire.Program, dict]:
    """A program echoing each of ``arrays``, saved in tmp_path/p; (program, {label: Ref})."""
    program = wire.Program()
    refs = {label: program.array(x) for label, x in arrays.items()}
    for ref in refs.values():
        program.echo(ref)
    program.save(tmp_path / "p")
    return program, refs


def test_every_array_comes_back_as_it_was_sent_from_two_files(tmp_path):
    arrays = arrays_of_every_layout()
    program, refs = saved(tmp_path, arrays)
    assert sorted(p.name for p in (tmp_path / "p").iterdir()) == sorted(
        [wire.PROGRAM_FILE, wire.ARRAYS_FILE]), "one file for all the arrays, whatever their count"
    loaded, steps, returned = wire.load_program(tmp_path / "p")
    assert (steps, returned) == (program.steps, program.returned)
    assert sorted(loaded) == sorted(ref.name for ref in refs.values())
    for label, x in arrays.items():
        y = loaded[refs[label].name]
        assert y.dtype == x.dtype and y.shape == x.shape, label
        assert np.array_equal(y, x), label
        if x.flags.f_contiguous and not x.flags.c_contiguous:
            assert y.flags.f_contiguous and not y.flags.c_contiguous, label
        else:
            assert y.flags.c_contiguous, label
        assert y.flags.writeable and y.flags.owndata, label
    first, second = (loaded[refs[label].name] for label in ("float64", "int64"))
    first[...] = 0  # student code writing into one input touches no other
    assert np.array_equal(second, arrays["int64"])


def test_a_hidden_test_program_round_trips_through_the_worker_s_reader(tmp_path):
    """A real hidden test's inputs (many arrays) come back equal, one by one."""
    from autograder.judging.scoring.hidden_tests.mytorch_hidden import tests_of

    test = tests_of("MultiHeadAttention")[0]
    program = wire.Program()
    test.build(program, np.random.default_rng(3))
    program.save(tmp_path / "p")
    loaded, _, _ = wire.load_program(tmp_path / "p")
    assert len(loaded) == len(program.arrays) > 10
    for name, x in program.arrays.items():
        assert loaded[name].dtype == x.dtype and np.array_equal(loaded[name], x), name
    total = sum(x.nbytes for x in program.arrays.values())
    assert (tmp_path / "p" / wire.ARRAYS_FILE).stat().st_size == total


@pytest.mark.parametrize("change, why", [
    ({"offset": -1}, "are not inside arrays.bin"),
    ({"bytes": 10**9}, "are not inside arrays.bin"),
    ({"offset": 1.0}, "are not inside arrays.bin"),
    ({"offset": "0"}, "are not inside arrays.bin"),
    ({"bytes": 23}, "are no float64 array of shape [3]"),
    ({"shape": [4]}, "are no float64 array of shape [4]"),
    ({"order": "A"}, "in order 'A'"),
    ({"dtype": "|O"}, "are no object array"),
])
def test_a_layout_outside_the_arrays_file_is_refused_by_name(tmp_path, change, why):
    program = wire.Program()
    program.array(np.zeros(3))
    program.array(np.ones(2))
    program.save(tmp_path / "p")
    spec_path = tmp_path / "p" / wire.PROGRAM_FILE
    spec = json.loads(spec_path.read_text())
    assert spec["arrays"]["in0"] == {"offset": 0, "bytes": 24, "dtype": "<f8", "shape": [3],
                                     "order": "C"}
    assert spec["arrays"]["in1"]["offset"] == 24
    spec["arrays"]["in0"].update(change)
    spec_path.write_text(json.dumps(spec))
    with pytest.raises(ValueError, match="array in0: ") as raised:
        wire.load_program(tmp_path / "p")
    assert why in str(raised.value) and "Program.save" in str(raised.value), raised.value
