# hw4p1: instructor-only
"""Tests of the Autolab autograder (autograder/, tools/make_autograde.py) against its threat model.

    python -m tests.test_autograder     (or: .venv/bin/python -m pytest -q tests/test_autograder.py)

Unit tests check the pieces on hand-built inputs: the handin extraction on archives holding every
kind of hostile member, the model grading on good and broken configs and state dicts, the child
process runner on hangs, floods and huge files. The end-to-end tests build the autograder once per
test process into a temporary folder (``make_autograde.build``), then grade handins as Autolab
does (``make`` in a folder holding the Makefile, autograde.tar and handin.tar) and check the
scores line, the report, and that nothing changed outside the grading folder.
"""
import base64
import functools
import gzip
import io
import json
import math
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
import zipfile
import zlib
from pathlib import Path

import pytest
import torch
import yaml

import numpy as np

from autograder import (grade_model, grading_run, landlock, rubric, safe_tar, sandbox, wire,
                        worker)
from autograder.safe_tar import HandinError, extract_handin
from hw4lib import handin_format
from hw4lib.data import H4Tokenizer
from hw4lib.data.lm_dataset import load_transcript
from hw4lib.data.tokenizer import DEFAULT_TOKEN_MAP
from hw4lib.model import DecoderOnlyTransformer
from hw4lib.handin import BEST_CHECKPOINT
from tests import platform_profiles
from tests.testing_framework import rubric as rubric_category, run_module

RUBRIC = {"Handin extraction": 0, "Scoring": 0, "Model grading": 0, "Child processes": 0,
          "End to end": 0}
REPO_ROOT = Path(__file__).resolve().parents[1]
TINY_MODEL = {"num_layers": 1, "d_model": 16, "num_heads": 2, "d_ff": 32, "dropout": 0.0,
              "max_len": 512, "weight_tying": False, "layer_drop_rate": 0.0}


# ------------------------------------------------------------------------------------------------
# Archives and processes
# ------------------------------------------------------------------------------------------------

def regular(name: str, data: bytes = b"x = 1\n") -> tuple[tarfile.TarInfo, bytes]:
    """A regular-file member."""
    info = tarfile.TarInfo(name)
    info.size, info.mode = len(data), 0o644
    return info, data


def special(name: str, kind: bytes, linkname: str = "") -> tuple[tarfile.TarInfo, None]:
    """A member of another type (tarfile.SYMTYPE, LNKTYPE, CHRTYPE, BLKTYPE, FIFOTYPE)."""
    info = tarfile.TarInfo(name)
    info.type, info.linkname = kind, linkname
    return info, None


def write_tar(path: Path, members: list[tuple[tarfile.TarInfo, bytes | None]],
              mode: str = "w", **options) -> Path:
    with tarfile.open(path, mode, **options) as tar:
        for info, data in members:
            tar.addfile(info, io.BytesIO(data) if data is not None else None)
    return path


def tree(folder: Path) -> set[str]:
    """Every path under ``folder``, relative, symlinks included."""
    return {p.relative_to(folder).as_posix() for p in folder.rglob("*")}


def wait_until_dead(pid: int, seconds: float = 5.0) -> bool:
    """True once ``pid`` has exited (a killed orphan may stay a zombie until init reaps it)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(") ", 1)[1][:1]
        except (FileNotFoundError, ProcessLookupError):
            return True
        if state in ("Z", "X"):
            return True
        time.sleep(0.05)
    return False


# ------------------------------------------------------------------------------------------------
# Handin extraction
# ------------------------------------------------------------------------------------------------

@rubric_category("Handin extraction")
def test_expected_files_are_extracted_and_the_rest_skipped(tmp_path):
    members = [regular("handin/config.yaml", b"a: 1\n"),
               regular("handin/model_state_dict.pt", b"\0" * 10),
               regular("handin/mytorch/__init__.py"), regular("./handin/mytorch/nn/linear.py"),
               regular("handin/mytorch/nn/notes.md"), regular("handin/mytorch/nn/bad-name.py"),
               regular("handin/mytorch/nn/__pycache__/linear.cpython-311.pyc"),
               regular("handin/extra.py"), regular("handin/test_metrics.json", b"{}")]
    result = extract_handin(write_tar(tmp_path / "handin.tar", members), tmp_path / "out")
    assert set(result.files) == {"config.yaml", "model_state_dict.pt", "mytorch/__init__.py",
                                 "mytorch/nn/linear.py", "test_metrics.json"}
    assert (tmp_path / "out/config.yaml").read_bytes() == b"a: 1\n"
    assert (tmp_path / "out/mytorch/nn/linear.py").read_bytes() == b"x = 1\n"
    skipped = " ".join(result.notes)
    for name in ("notes.md", "bad-name.py", "linear.cpython-311.pyc", "extra.py"):
        assert name in skipped, (name, result.notes)
    # a handin packed without the leading handin/ folder is read the same way
    flat = write_tar(tmp_path / "flat.tar", [regular("mytorch/nn/linear.py")])
    assert set(extract_handin(flat, tmp_path / "flat").files) == {"mytorch/nn/linear.py"}


@rubric_category("Handin extraction")
def test_hostile_members_are_skipped_and_nothing_lands_outside(tmp_path):
    grading = tmp_path / "grading"
    grading.mkdir()
    members = [
        regular("/tmp/hw4p1_absolute_escape.py"),
        regular("../../../escape_three_up.py"),
        regular("handin/../../../../escape_four_up.py"),
        regular("handin/mytorch/../../../../../escape_from_mytorch.py"),
        special("handin/config.yaml", tarfile.SYMTYPE, "/etc/passwd"),
        # a directory symlink pointing out, then a file "inside" it: naive extraction writes outside
        special("handin/mytorch", tarfile.SYMTYPE, "../../.."),
        special("handin/model_state_dict.pt", tarfile.LNKTYPE, "/etc/passwd"),
        special("handin/mytorch/device.py", tarfile.CHRTYPE),
        special("handin/mytorch/block.py", tarfile.BLKTYPE),
        special("handin/mytorch/fifo.py", tarfile.FIFOTYPE),
        special("handin/mytorch/sparse.py", tarfile.GNUTYPE_SPARSE),
        regular("handin/mytorch/__init__.py", b"GOOD = 1\n"),
    ]
    archive = write_tar(grading / "handin.tar", members, format=tarfile.GNU_FORMAT)
    result = extract_handin(archive, grading / "work/handin")
    assert set(result.files) == {"mytorch/__init__.py"}, result.files
    expected_reasons = ["absolute", "'..'", "'..'", "'..'", "symbolic link", "symbolic link",
                        "hard link", "device or a fifo", "device or a fifo", "device or a fifo",
                        "not a regular file"]
    assert len(result.notes) == len(expected_reasons), result.notes
    for note, reason in zip(result.notes, expected_reasons):
        assert reason in note, (reason, note)
    assert tree(tmp_path) == {"grading", "grading/handin.tar", "grading/work",
                              "grading/work/handin", "grading/work/handin/mytorch",
                              "grading/work/handin/mytorch/__init__.py"}
    assert not (grading / "work/handin/mytorch").is_symlink()
    assert not Path("/tmp/hw4p1_absolute_escape.py").exists()


@rubric_category("Handin extraction")
def test_oversize_duplicate_and_excess_members_are_skipped(tmp_path):
    big_config = regular("handin/config.yaml", b"#" * (handin_format.MAX_RUN_FILE_BYTES + 1))
    big_source = regular("handin/mytorch/big.py", b"#" * (handin_format.MAX_PY_FILE_BYTES + 1))
    first = regular("handin/mytorch/nn/linear.py", b"FIRST = 1\n")
    second = regular("handin/mytorch/nn/linear.py", b"SECOND = 1\n")
    archive = write_tar(tmp_path / "a.tar", [big_config, big_source, first, second])
    result = extract_handin(archive, tmp_path / "a")
    assert set(result.files) == {"mytorch/nn/linear.py"}
    # a duplicate is graded as `tar -x` leaves it: the last copy (a fix appended with tar -rf)
    assert (tmp_path / "a/mytorch/nn/linear.py").read_bytes() == b"SECOND = 1\n"
    assert [("limit" in note, "the last copy is graded" in note) for note in result.notes] == [
        (True, False), (True, False), (False, True)]
    # ... and when the last copy is refused, nothing is graded for that file
    refused = regular("handin/mytorch/nn/linear.py", b"#" * (handin_format.MAX_PY_FILE_BYTES + 1))
    result = extract_handin(write_tar(tmp_path / "b.tar", [first, refused]), tmp_path / "b")
    assert not result.files and any("the last copy is graded" in note for note in result.notes)

    # A header declaring a state dict over the limit: refused from the header (here the data is
    # missing too, which stops the reading first).
    header = tarfile.TarInfo("handin/model_state_dict.pt")
    header.size = handin_format.MAX_STATE_DICT_BYTES + 1
    (tmp_path / "huge.tar").write_bytes(header.tobuf(format=tarfile.GNU_FORMAT))
    result = extract_handin(tmp_path / "huge.tar", tmp_path / "huge")
    assert not result.files and any("cut short" in note for note in result.notes), result.notes
    big = write_tar(tmp_path / "big.tar", [regular("handin/model_state_dict.pt",
                                                   bytes(handin_format.MAX_STATE_DICT_BYTES + 1))])
    result = extract_handin(big, tmp_path / "big")
    assert not result.files and any("limit" in note for note in result.notes), result.notes
    # What a decompression bomb shows first: a header declaring more than any handin may hold.
    header = tarfile.TarInfo("handin/padding.bin")
    header.size = handin_format.MAX_TAR_BYTES + 1
    (tmp_path / "bomb.tar").write_bytes(header.tobuf(format=tarfile.GNU_FORMAT))
    result = extract_handin(tmp_path / "bomb.tar", tmp_path / "bomb")
    assert not result.files and any("adding up to" in note for note in result.notes), result.notes

    many = [regular(f"handin/mytorch/m{i}.py") for i in range(handin_format.MAX_MEMBERS + 5)]
    result = extract_handin(write_tar(tmp_path / "many.tar", many), tmp_path / "many")
    assert len(result.files) == handin_format.MAX_MEMBERS, (
        f"expected the first {handin_format.MAX_MEMBERS} members, got {len(result.files)}")
    assert any("more than" in note for note in result.notes), (
        f"expected a note saying the archive holds more than {handin_format.MAX_MEMBERS} members, "
        f"got {result.notes}")


@rubric_category("Handin extraction")
def test_unusable_archives_raise_a_clear_error(tmp_path):
    (tmp_path / "garbage.tar").write_bytes(os.urandom(4096))
    (tmp_path / "empty.tar").write_bytes(b"")
    (tmp_path / "folder.tar").mkdir()
    real = write_tar(tmp_path / "real.tar", [regular("handin/config.yaml")])
    (tmp_path / "link.tar").symlink_to(real)
    (tmp_path / "zstd.tar").write_bytes(b"\x28\xb5\x2f\xfd" + os.urandom(200))
    (tmp_path / "broken-zip.tar").write_bytes(b"PK\x03\x04" + os.urandom(200))
    for name, message in [("garbage.tar", "not a tar archive"), ("empty.tar", "not a tar archive"),
                          ("missing.tar", "no missing.tar"), ("folder.tar", "not a regular file"),
                          ("link.tar", "not a regular file"), ("zstd.tar", "compressed with zstd"),
                          ("broken-zip.tar", "damaged zip archive")]:
        with pytest.raises(HandinError, match=message):
            extract_handin(tmp_path / name, tmp_path / f"out-{name}")
    # a compressed archive is fine
    gz = write_tar(tmp_path / "h.tar.gz", [regular("handin/config.yaml")], "w:gz")
    assert set(extract_handin(gz, tmp_path / "gz").files) == {"config.yaml"}


def deep_mytorch_member(depth: int) -> tuple[tarfile.TarInfo, bytes]:
    """A mytorch module ``depth`` folders below mytorch/, every folder a module name."""
    return regular("handin/mytorch/" + "a/" * depth + "deep.py")


def long_name_members(count: int, length: int) -> list[tuple[tarfile.TarInfo, bytes]]:
    """``count`` members the grader does not use, each named with ``length`` characters."""
    return [regular(f"handin/{index:03d}" + "n" * length) for index in range(count)]


def zip_directory_bomb(path: Path, entries: int) -> Path:
    """A zip (whatever ``path`` is named) whose central directory really holds ``entries`` one-byte
    named entries, each pointing at one empty stored file: what ``zipfile`` parses whole."""
    local = b"PK\x03\x04" + bytes(22) + (1).to_bytes(2, "little") + bytes(2) + b"x"
    central = (b"PK\x01\x02" + bytes(24) + (1).to_bytes(2, "little") + bytes(16) + b"x")
    end = (b"PK\x05\x06" + bytes(4) + (min(entries, 0xFFFF)).to_bytes(2, "little") * 2
           + (len(central) * entries).to_bytes(4, "little") + len(local).to_bytes(4, "little")
           + bytes(2))
    with open(path, "wb") as file:
        file.write(local)
        for _ in range(entries // 100_000):
            file.write(central * 100_000)
        file.write(central * (entries % 100_000))
        file.write(end)
    return path


@rubric_category("Handin extraction")
def test_deep_paths_long_names_and_zip_directories_are_refused_before_any_cost(tmp_path):
    from autograder import grade

    limit = handin_format.MAX_MYTORCH_DEPTH
    tar = write_tar(tmp_path / "deep.tar", [deep_mytorch_member(limit), deep_mytorch_member(1500),
                                           *long_name_members(470, 60_000)])
    result = extract_handin(tar, tmp_path / "deep")
    assert list(result.files) == ["mytorch/" + "a/" * limit + "deep.py"], list(result.files)
    assert any(f"1500 folders deep in mytorch/, deeper than make handin packs (at most {limit})"
               in note for note in result.notes), result.notes[:3]
    # every note quotes a name short; every channel shows a bounded summary of them
    assert max(len(note) for note in result.notes) < 400, max(result.notes, key=len)[:500]
    shown = grade.summarised(result.notes)
    assert len(shown) == grade.MAX_NOTES + 1 and "459 more notes" in shown[-1], shown[-1]
    assert len(json.dumps(shown)) < 10_000
    assert len(json.dumps(grade.summarised(["x" * 10**6] * 3))) < 3 * grade.MAX_NOTE_CHARS + 20
    # a zip's directory is sized from its end record before zipfile reads any of it
    bomb = zip_directory_bomb(tmp_path / "handin.tar", 200_000)
    assert safe_tar.zip_directory(bomb) == (0xFFFF, 200_000 * 47)
    with pytest.raises(HandinError, match="directory declares 65,535 entries in 9,400,000 bytes"):
        extract_handin(bomb, tmp_path / "bomb")
    small = zip_directory_bomb(tmp_path / "small.tar", 3)
    assert safe_tar.zip_directory(small) == (3, 3 * 47)
    assert list(extract_handin(small, tmp_path / "small").files) == []  # parsed: names unused
    # zip64: the counts its own end record declares are the ones read
    with zipfile.ZipFile(tmp_path / "z64.zip", "w", allowZip64=True) as archive:
        archive.writestr("handin/config.yaml", "x: 1\n")
    data = bytearray((tmp_path / "z64.zip").read_bytes())
    end = data.rfind(b"PK\x05\x06")
    data[end + 8:end + 12] = b"\xff\xff\xff\xff"  # point zipfile at a zip64 record
    record = (b"PK\x06\x06" + (44).to_bytes(8, "little") + bytes(12)
              + (5_000_000).to_bytes(8, "little") * 2 + (10**9).to_bytes(8, "little") + bytes(8))
    locator = b"PK\x06\x07" + bytes(4) + end.to_bytes(8, "little") + (1).to_bytes(4, "little")
    (tmp_path / "z64.tar").write_bytes(bytes(data[:end]) + record + locator + bytes(data[end:]))
    assert safe_tar.zip_directory(tmp_path / "z64.tar") == (5_000_000, 10**9)
    with pytest.raises(HandinError, match="declares 5,000,000 entries"):
        extract_handin(tmp_path / "z64.tar", tmp_path / "z64")


@rubric_category("Handin extraction")
def test_tree_walks_and_removal_do_not_recurse(tmp_path):
    from autograder import judge

    root = deep = tmp_path / "tree"
    for _ in range(1101):  # deeper than Python's recursion limit (makedirs would recurse)
        deep.mkdir()
        deep = deep / "a"
    deep = deep.parent
    (deep / "m.py").write_text("x = 1\n")
    (root / "link").symlink_to("/usr")  # never followed, never changed
    sandbox.make_readable(root)
    assert (deep / "m.py").stat().st_mode & 0o777 == 0o644 and deep.stat().st_mode & 0o777 == 0o755
    assert judge.student_files(root) == {"a/" * 1100 + "m.py"}
    sandbox.remove_tree(root)
    assert not root.exists() and Path("/usr").is_dir()
    sandbox.remove_tree(root)  # nothing there: nothing to do


# ------------------------------------------------------------------------------------------------
# Scoring
# ------------------------------------------------------------------------------------------------

@rubric_category("Scoring")
def test_lm_score_curve():
    points = rubric.LM_POINTS
    assert rubric.lm_score(1.0) == rubric.lm_score(rubric.FULL_MARKS_PPL) == points
    assert rubric.lm_score(rubric.ZERO_MARKS_PPL) == rubric.lm_score(100.0) == 0
    middle = (rubric.FULL_MARKS_PPL + rubric.ZERO_MARKS_PPL) / 2
    assert rubric.lm_score(middle) == pytest.approx(points / 2, abs=0.01)
    grid = [rubric.FULL_MARKS_PPL + k * 0.01 for k in range(120)]
    scores = [rubric.lm_score(p) for p in grid]
    assert all(a >= b for a, b in zip(scores, scores[1:]))
    for bad in (math.nan, math.inf, -math.inf, "1.0", None, True):
        assert rubric.lm_score(bad) == 0, bad
    assert rubric.lm_score(3.0, full_marks_ppl=2.0, zero_marks_ppl=4.0) == pytest.approx(points / 2)
    with pytest.raises(ValueError):
        rubric.lm_score(3.0, full_marks_ppl=4.0, zero_marks_ppl=4.0)


@rubric_category("Scoring")
def test_worker_records_are_decoded_without_trusting_them():
    good = {"r1": np.arange(6.0).reshape(2, 3), "r2": np.array([True, False]), "r3": None}
    stream = wire.encode_record("t", None, good)
    records, note = wire.decode_records(stream, {"t": ["r1", "r2", "r3"]})
    assert note == "" and records["t"].error is None and not records["t"].problems
    assert np.array_equal(records["t"].values["r1"], good["r1"]) and records["t"].values["r3"] is None
    # strings and pickled objects are refused, never unpickled; the first record of a test counts
    pickled = io.BytesIO()
    np.save(pickled, np.array([object()], dtype=object), allow_pickle=True)
    forged = bytearray(wire.encode_record("t", None, {"r1": np.array(["text"])}))
    header = json.dumps({"test": "u", "error": None, "sizes": {"r1": len(pickled.getvalue())},
                         "none": []}).encode()
    forged += len(header).to_bytes(8, "little") + header + pickled.getvalue()
    records, note = wire.decode_records(bytes(forged) + stream, {"t": ["r1"], "u": ["r1"]})
    assert "r1" not in records["t"].values and records["t"].problems["r1"] == wire.NOT_AN_ARRAY
    assert "r1" not in records["u"].values and "not a plain .npy" in records["u"].problems["r1"]
    # garbage, huge headers and truncated arrays end the decoding with a note
    for junk in (b"\xff" * 100, (2**40).to_bytes(8, "little"), stream[:-5]):
        records, note = wire.decode_records(junk, {"t": ["r1"]})
        assert "unreadable" in note and "t" not in records, (junk[:20], note)


@rubric_category("Scoring")
def test_any_malformed_worker_output_is_unreadable_and_costs_only_its_tests():
    good = wire.encode_record("t", None, {"r1": np.zeros(2)})

    def record(header: str) -> bytes:
        return len(header.encode()).to_bytes(8, "little") + header.encode()

    nested = "[" * 32_000 + "]" * 32_000
    junk = {"nested 32,000 deep": record(nested),
            "nested in a field": record('{"test": "u", "error": ' + nested[:60_000] + "}"),
            "NaN size": record('{"test": "u", "error": null, "sizes": {"r1": NaN}, "none": []}'),
            "huge number": record('{"test": "u", "sizes": {"r1": ' + "9" * 5000 + "}}"),
            "a list": record("[1, 2]"),
            "unhashable test": record('{"test": [], "error": null, "sizes": {}, "none": []}'),
            "unhashable none": record('{"test": "u", "error": null, "sizes": {}, "none": [[]]}'),
            "long size text": record('{"test": "u", "error": null, "sizes": {"r1": "'
                                     + "x" * 60_000 + '"}, "none": []}')}
    for name, bad in junk.items():
        records, note = wire.decode_records(good + bad + good, {"t": ["r1"], "u": ["r1"]})
        assert note.startswith(f"{wire.UNREADABLE} after 1 results"), (name, note[:300])
        assert len(note) < 300 and list(records) == ["t"], (name, note[:300])


def judge_in_process(nn, tests, folder: Path, seed: int) -> list:
    """Each hidden test of ``tests`` replayed by the worker's own code on ``nn`` (a namespace of
    mytorch.nn classes) in this process, then judged: the checks without the sandbox's cost."""
    from autograder import judge, worker

    results = []
    programs, checks = judge.build_programs(tests, seed)
    for test in tests:
        program = programs[test.name]
        program.save(folder / test.name)
        stream = worker.run_test(nn, folder / test.name, test.name)
        records, note = wire.decode_records(stream, {test.name: program.returned})
        result, _ = judge.judge_test(test, records.get(test.name), checks[test.name], note,
                                     program.steps, frozenset())
        results.append(result)
    return results


def stub_namespace(code: str):
    """A mytorch.nn stand-in: the module ``code`` defines."""
    import types

    module = types.ModuleType("stub_nn")
    exec(code, module.__dict__)  # noqa: S102 - test-defined stubs
    return module


# A Linear that returns zeros of the right shapes and dtypes: a dtype-only check passes it.
ZERO_LINEAR_NN = """
import numpy as np
class Linear:
    def __init__(self, in_features, out_features):
        self.W = np.zeros((out_features, in_features))
        self.b = np.zeros(out_features)
    def init_weights(self, W, b):
        self.W, self.b = W, b
    def forward(self, A):
        self.A = A
        return np.zeros((*A.shape[:-1], self.W.shape[0]), dtype=A.dtype)
    def backward(self, dLdZ):
        self.dLdW, self.dLdb = np.zeros_like(self.W), np.zeros_like(self.b)
        return np.zeros_like(self.A)
"""
# MultiHeadAttention.backward returning (N, 1) and (1, N) arrays: adding them broadcasts to N x N.
BROADCAST_MHA_NN = """
import numpy as np
from mytorch.nn import MultiHeadAttention as Reference
class MultiHeadAttention(Reference):
    def backward(self, d_output):
        return np.zeros((N, 1)), np.zeros((1, N)), np.zeros((N, 1))
"""


@rubric_category("Scoring")
def test_no_check_that_decides_points_is_an_assert():
    """python -O strips asserts: the judge, the hidden tests and the truths they share with the
    students' tests hold none (so a zero stub cannot pass a check that vanished)."""
    import ast

    def asserts_in(node) -> list[int]:
        return [n.lineno for n in ast.walk(node) if isinstance(n, ast.Assert)]

    for path in [REPO_ROOT / "autograder/judge.py", REPO_ROOT / "autograder/wire.py",
                 REPO_ROOT / "hw4lib/numeric_truths.py",
                 *sorted((REPO_ROOT / "autograder/hidden_tests").glob("*.py"))]:
        found = asserts_in(ast.parse(path.read_text()))
        assert not found, f"{path.name} has assert statements at lines {found}"


@rubric_category("Scoring")
def test_hidden_tests_share_out_exactly_each_category_s_points():
    """The shares in the hidden tests' decorators add up to the points hw4lib/grading_numbers.py
    gives each mytorch category, and tag no other category."""
    from autograder.hidden_tests.mytorch_hidden import HIDDEN_TESTS

    shares: dict[str, list[float]] = {}
    for test in HIDDEN_TESTS:
        shares.setdefault(test.category, []).append(test.points)
    assert set(shares) == set(rubric.MYTORCH_RUBRIC), (
        f"the hidden tests grade {sorted(shares)}, the rubric {sorted(rubric.MYTORCH_RUBRIC)}")
    for category, points in rubric.MYTORCH_RUBRIC.items():
        assert math.isclose(sum(shares[category]), points), (
            f"the hidden tests of {category} share out {sum(shares[category])} points "
            f"({shares[category]}), but the category is worth {points}")


@pytest.mark.slow
@rubric_category("Scoring")
def test_zero_stub_earns_nothing_even_under_python_O(tmp_path):
    """Checks that decide points are explicit (python -O strips asserts); the float32 Linear test
    checks values, not only dtypes; the judge refuses to run under -O at all."""
    from autograder.hidden_tests.mytorch_hidden import tests_of

    float32_test = [t for t in tests_of("Linear") if t.name == "linear_float32_stays_float32"]
    (tmp_path / "f32").mkdir()
    result, = judge_in_process(stub_namespace(ZERO_LINEAR_NN), float32_test, tmp_path / "f32", 0)
    assert result.points == 0 and "float32 Z" in result.message, result
    code = ("import sys, tempfile\n"
            "from pathlib import Path\n"
            "from autograder.hidden_tests.mytorch_hidden import HIDDEN_TESTS\n"
            "from tests.test_autograder import ZEROS_NN, judge_in_process, stub_namespace\n"
            "results = judge_in_process(stub_namespace(ZEROS_NN), HIDDEN_TESTS,\n"
            "                           Path(tempfile.mkdtemp(dir=sys.argv[1])), 0)\n"
            "print(sys.flags.optimize, f'{sum(r.points for r in results):g}')\n")
    process = subprocess.run([sys.executable, "-O", "-c", code, str(tmp_path)], cwd=REPO_ROOT,
                             capture_output=True, text=True, timeout=300)
    assert process.returncode == 0, process.stderr[-3000:]
    assert process.stdout.split()[-2:] == ["1", "0"], process.stdout[-2000:]
    refused = subprocess.run([sys.executable, "-O", "-m", "autograder.grade",
                              str(tmp_path / "handin.tar"), "--work", str(tmp_path / "work")],
                             cwd=REPO_ROOT, capture_output=True, text=True, timeout=120)
    lines = refused.stdout.splitlines()
    assert "refuses to run under python -O" in refused.stdout, refused.stdout[-2000:]
    assert json.loads(lines[-1]) == {"scores": rubric.zero_scores()}
    assert not (tmp_path / "work").exists(), "nothing is graded under -O"


@rubric_category("Scoring")
def test_shapes_are_checked_before_arithmetic_on_returned_arrays(tmp_path):
    """(N, 1) and (1, N) gradients are refused by shape before the judge adds them (which would
    allocate N x N floats)."""
    import tracemalloc

    from autograder.hidden_tests.mytorch_hidden import tests_of

    test = [t for t in tests_of("MultiHeadAttention")
            if t.name == "mha_self_attention_with_one_array_for_query_key_value"]
    for n in (10, 4000):  # the first run warms up lazy imports; N x N float64 at 4000: 128 MB
        nn = stub_namespace(BROADCAST_MHA_NN.replace("(N, 1)", f"({n}, 1)")
                            .replace("(1, N)", f"(1, {n})"))
        (tmp_path / str(n)).mkdir()
        tracemalloc.start()
        try:
            result, = judge_in_process(nn, test, tmp_path / str(n), 0)
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        assert result.points == 0 and "expected shape" in result.message, result
    assert peak < 16 * 2**20, f"the judge allocated {peak / 2**20:.0f} MiB for 32 KB arrays"


# mytorch files the hidden tests grade (each category's class, and MultiHeadAttention's parts)
GRADED_MYTORCH_FILES = ("mytorch/nn/linear.py", "mytorch/nn/activation.py",
                        "mytorch/nn/scaled_dot_product_attention.py",
                        "mytorch/nn/multi_head_attention.py")
GRADINGS_PER_TREE = 3
# Grades each mytorch tree named on the command line GRADINGS_PER_TREE times, each with a fresh
# secrets seed as the judge draws it, in one process (mytorch is re-imported for each tree).
SCORE_TREES = """
import json, secrets, sys, tempfile
from pathlib import Path
from autograder.hidden_tests.mytorch_hidden import HIDDEN_TESTS
from tests.test_autograder import judge_in_process
repeats, trees = int(sys.argv[1]), sys.argv[2:]
scores = {}
for tree in trees:
    for name in [name for name in sys.modules if name.partition(".")[0] == "mytorch"]:
        del sys.modules[name]
    sys.path.insert(0, tree)
    import mytorch.nn as nn
    sys.path.remove(tree)
    scores[tree] = []
    for _ in range(repeats):
        results = judge_in_process(nn, HIDDEN_TESTS, Path(tempfile.mkdtemp()),
                                   secrets.randbits(128))
        totals = {}
        for result in results:
            totals[result.category] = totals.get(result.category, 0) + result.points
        scores[tree].append(totals)
print(json.dumps(scores))
"""


@pytest.mark.slow
@rubric_category("Scoring")
def test_fresh_inputs_give_the_same_score_every_time(tmp_path):
    """The reference and every catalogue mutant of a graded mytorch file, graded several times
    with fresh hidden-test inputs: each scores the same every time (the tolerances hold for any
    draw), the reference scores full marks and every mutant loses points."""
    from tools import mutants

    catalogue = [m for m in mutants.load_catalogue(sorted(
        (REPO_ROOT / "tools/mutant_catalogue").glob("*.yaml"))) if m.file in GRADED_MYTORCH_FILES]
    assert len(catalogue) >= 10, "the catalogue's mytorch mutants are missing"
    trees = {"reference": tmp_path / "reference"}
    copy_reference_mytorch(trees["reference"])
    for mutant in catalogue:
        trees[mutant.id] = tmp_path / mutant.id
        copy_reference_mytorch(trees[mutant.id])
        target = trees[mutant.id] / mutant.file
        target.write_text(mutants.mutate(target.read_text(), mutant))
    process = subprocess.run([sys.executable, "-c", SCORE_TREES, str(GRADINGS_PER_TREE),
                              *map(str, trees.values())], cwd=REPO_ROOT, capture_output=True,
                             text=True, timeout=1800)
    assert process.returncode == 0, process.stderr[-3000:]
    scores = json.loads(process.stdout.splitlines()[-1])
    full = sum(rubric.MYTORCH_RUBRIC.values())
    for name, tree in trees.items():
        runs = scores[str(tree)]
        assert all(run == runs[0] for run in runs), f"{name} scored differently: {runs}"
        total = sum(runs[0].values())
        if name == "reference":
            assert total == full, runs[0]
        else:
            assert total < full, f"mutant {name} keeps full marks on the hidden tests"


@rubric_category("Scoring")
def test_scores_line_is_printed_even_when_the_last_process_scan_fails(tmp_path):
    """A failure in the judge's final sweep of leftover processes (a /proc scan meeting a process
    name that is not UTF-8, say) still ends the output with the summary and the scores line."""
    import contextlib

    from autograder import grade

    def failing_scan():
        b"\xff\xfe".decode("utf-8")

    saved = sandbox.kill_descendants, sandbox.become_subreaper
    output = io.StringIO()
    try:
        sandbox.kill_descendants, sandbox.become_subreaper = failing_scan, lambda: None
        with contextlib.redirect_stdout(output):
            grade.main([str(tmp_path / "handin.tar"), "--work", str(tmp_path / "work")])
    finally:
        sandbox.kill_descendants, sandbox.become_subreaper = saved
    lines = output.getvalue().splitlines()
    assert "UnicodeDecodeError" in output.getvalue() and "Summary" in output.getvalue()
    assert json.loads(lines[-1]) == {"scores": rubric.zero_scores()}, lines[-5:]


@rubric_category("Scoring")
def test_documented_timeouts_cover_the_judges_worst_case():
    """The platform timeouts the README asks for exceed every limit of the judge reached at once
    (rubric.worst_case_seconds), whose own allowance covers a probe of every sandbox mode."""
    worst = rubric.worst_case_seconds()
    assert worst == (rubric.MODEL_TIMEOUT_S + len(rubric.MYTORCH_RUBRIC) * rubric.MYTORCH_TIMEOUT_S
                     + rubric.JUDGE_OVERHEAD_S)
    own_work_s = 60  # draining outputs, extraction, truths: seconds in practice
    assert len(sandbox.MODES) * sandbox.PROBE_TIMEOUT_S + own_work_s <= rubric.JUDGE_OVERHEAD_S
    readme = (REPO_ROOT / "autograder/README.md").read_text()
    autolab = int(re.search(r"autograding timeout to at\s+least (\d+) s", readme).group(1))
    assert autolab >= worst, f"README asks Autolab for {autolab} s, the worst case is {worst} s"
    assert grading_run.GRADING_TIMEOUT_S >= worst
    minutes = int(re.search(r"\*\*Autograder timeout\*\*: (\d+) minutes", readme).group(1))
    assert minutes * 60 > grading_run.GRADING_TIMEOUT_S, "Gradescope must outlast the adapter"


@rubric_category("Scoring")
def test_feedback_is_worded_by_the_judge_and_quotes_nothing_the_worker_sent():
    from autograder import judge
    from autograder.hidden_tests.mytorch_hidden import tests_of

    program = wire.Program()
    layer = program.new("Linear", 3, 2)
    program.call(layer, "forward", np.zeros((1, 3)))
    files = frozenset({"nn/linear.py", "__init__.py"})
    secret = "HIDDEN_TRANSCRIPT_LEAK"
    forged = {"kind": "raised", "step": 1, "type": secret, "file": f"../{secret}.py", "line": 7,
              "module": secret, "extra": secret * 100}
    stream = wire.encode_record("t", forged, {}, refused=[])
    records, note = wire.decode_records(stream, {"t": []})
    assert "extra" not in records["t"].error, "fields the protocol does not name are dropped"
    message = judge.describe_failure(records["t"].error, program.steps, files)
    assert message == "Linear.forward raised an exception of its own class", message
    honest = {"kind": "raised", "step": 1, "type": "NotImplementedError", "file": "nn/linear.py",
              "line": 12}
    assert judge.describe_failure(honest, program.steps, files) == (
        "not written yet: Linear.forward raised NotImplementedError (at mytorch/nn/linear.py:12)")
    numpy_only = {"kind": "numpy only", "step": -1, "module": secret}
    assert secret not in judge.describe_failure(numpy_only, program.steps, files)
    assert judge.describe_failure({"kind": "numpy only", "module": "torch"}, [], files) == (
        "mytorch must be written with numpy only: it imports torch")
    # a failed check names shapes and error sizes, never the values: here values that spell a
    # secret as character codes come back where floats were expected
    test = tests_of("Linear")[1]
    check_program = wire.Program()
    check = test.build(check_program, np.random.default_rng(0))
    codes = np.array([float(ord(c)) for c in secret])
    values = {name: codes for name in check_program.returned}
    result, _ = judge.judge_test(test, wire.Record(None, values, {}), check, "",
                                 check_program.steps, files)
    assert result.points == 0 and "shape" in result.message
    assert not any(str(int(code)) in result.message for code in codes[:3]), result.message


# ------------------------------------------------------------------------------------------------
# Model grading (in process, on a small hidden set)
# ------------------------------------------------------------------------------------------------

HIDDEN_LINES = ["THE CAPTAIN HOISTED THE SAIL", "IT'S A FINE DAY SAID THE MATE",
                "A GULL CRIED OVERHEAD"] * 4


def make_model_handin(folder: Path, token_type: str = "char",
                      model_config: dict | None = None) -> DecoderOnlyTransformer:
    """config.yaml and model_state_dict.pt of a freshly initialised model in ``folder``."""
    model_config = dict(model_config or TINY_MODEL)
    folder.mkdir(parents=True, exist_ok=True)
    tokenizer = H4Tokenizer(DEFAULT_TOKEN_MAP, token_type)
    torch.manual_seed(0)
    model = DecoderOnlyTransformer(**model_config, num_classes=tokenizer.vocab_size)
    torch.save(model.state_dict(), folder / "model_state_dict.pt")
    config = {"tokenization": {"token_type": token_type}, "model": model_config}
    (folder / "config.yaml").write_text(yaml.safe_dump(config))
    return model


def make_hidden_set(folder: Path, lines: list[str] = HIDDEN_LINES) -> Path:
    """A data root whose partition grade_model.PARTITION holds ``lines``, in their order, as
    ``make autograde`` ships the hidden set."""
    from autograder.hidden_data import hidden_utterances
    from datagen.build_data import write_split

    write_split(folder / grade_model.PARTITION, hidden_utterances(lines))
    return folder


def direct_perplexity_char(model: torch.nn.Module, tokenizer: H4Tokenizer,
                           lines: list[str]) -> float:
    """exp(NLL of [tokens, EOS] given [SOS, tokens] summed over lines / characters), line by line,
    without padding, batching or the library's metric code."""
    model.eval()
    total_nll = 0.0
    with torch.no_grad():
        for text in lines:
            ids = tokenizer.encode(text)
            logits, _ = model(torch.tensor([[tokenizer.sos_id] + ids]))
            log_probs = torch.log_softmax(logits[0].double(), dim=-1)
            targets = ids + [tokenizer.eos_id]
            total_nll -= log_probs[torch.arange(len(targets)), targets].sum().item()
    return math.exp(total_nll / sum(len(text) for text in lines))


@rubric_category("Model grading")
def test_grade_model_measures_the_handed_in_weights(tmp_path):
    hidden = make_hidden_set(tmp_path / "hidden")
    for token_type in ("char", "1k"):
        model = make_model_handin(tmp_path / token_type, token_type)
        result = grade_model.evaluate_handin(tmp_path / token_type, hidden)
        tokenizer = H4Tokenizer(DEFAULT_TOKEN_MAP, token_type)
        expected = direct_perplexity_char(model, tokenizer, HIDDEN_LINES)
        assert result["perplexity_char"] == pytest.approx(expected, rel=1e-5), token_type
        assert result["num_chars"] == sum(len(line) for line in HIDDEN_LINES)
        assert result["num_utterances"] == len(HIDDEN_LINES)


def alias_bomb_config() -> str:
    """A config.yaml of a few hundred bytes whose model.num_layers expands to 9**9 strings."""
    levels = ['a0: &a0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    levels += [f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 9) + "]" for i in range(1, 9)]
    model = ", ".join(f"{k}: *a8" if k == "num_layers" else f"{k}: {v}"
                      for k, v in TINY_MODEL.items())
    return "\n".join(levels) + f"\ntokenization: {{token_type: char}}\nmodel: {{{model}}}\n"


@rubric_category("Model grading")
def test_grade_model_refuses_broken_configs(tmp_path):
    hidden = make_hidden_set(tmp_path / "hidden")
    make_model_handin(tmp_path / "h")
    good = yaml.safe_load((tmp_path / "h/config.yaml").read_text())
    huge = {**TINY_MODEL, "num_layers": 48, "d_model": 4096, "num_heads": 32, "d_ff": 16384}
    cases = [
        ({**good, "tokenization": {"token_type": "50k"}}, "token_type"),
        ({**good, "tokenization": None}, "token_type"),
        ({**good, "model": {**TINY_MODEL, "activation": "relu"}}, "model.activation' is unknown"),
        ({**good, "model": {k: v for k, v in TINY_MODEL.items() if k != "d_ff"}},
         "model.d_ff' is missing"),
        ({**good, "model": {**TINY_MODEL, "d_model": "16"}},
         "model.d_model': input should be a valid integer"),
        ({**good, "model": {**TINY_MODEL, "num_layers": True}},
         "model.num_layers': input should be a valid integer"),
        ({**good, "model": {**TINY_MODEL, "d_model": 10**6}},
         r"model.d_model' is 1000000, outside the grader's limits \[1, 4096\]"),
        ({**good, "model": huge}, "the grader builds at most 30,000,000"),
        ({**good, "model": {**TINY_MODEL, "num_heads": 3}}, "divisible"),
        (["not", "a", "mapping"], "mapping"),
    ]
    for config, message in cases:
        (tmp_path / "h/config.yaml").write_text(yaml.safe_dump(config))
        with pytest.raises(grade_model.GradingError, match=message):
            grade_model.evaluate_handin(tmp_path / "h", hidden)
    for bomb in (alias_bomb_config(), alias_bomb_config().replace("token_type: char",
                                                                  "token_type: *a8")):
        (tmp_path / "h/config.yaml").write_text(bomb)
        start = time.monotonic()
        with pytest.raises(grade_model.GradingError, match="must be one of|valid integer") as error:
            grade_model.evaluate_handin(tmp_path / "h", hidden)
        assert len(str(error.value)) < 500 and time.monotonic() - start < 10, (
            f"an alias bomb must give a short error quickly, got {len(str(error.value))} "
            f"characters after {time.monotonic() - start:.1f} s")
    (tmp_path / "h/config.yaml").write_text("model: [unclosed\n")
    with pytest.raises(grade_model.GradingError, match="not valid YAML"):
        grade_model.evaluate_handin(tmp_path / "h", hidden)
    make_model_handin(tmp_path / "short", model_config={**TINY_MODEL, "max_len": 20})
    with pytest.raises(grade_model.GradingError, match="max_len is 20"):
        grade_model.evaluate_handin(tmp_path / "short", hidden)


@rubric_category("Model grading")
def test_grade_model_refuses_broken_state_dicts(tmp_path):
    hidden = make_hidden_set(tmp_path / "hidden")
    state = make_model_handin(tmp_path / "h").state_dict()
    weights = tmp_path / "h/model_state_dict.pt"

    class RunsCode:
        """Unpickling this would create the marker file: weights_only must refuse it."""

        def __reduce__(self):
            return (open, (str(tmp_path / "pickle_ran_code"), "w"))

    renamed = {("renamed." + k if k.startswith("norm.") else k): v for k, v in state.items()}
    nan_bias = torch.full_like(state["final_linear.bias"], math.nan)
    cases = [
        ({**state, "payload": RunsCode()}, "weights_only"),
        (renamed, r"missing norm\.weight .*DecoderOnlyTransformer\.norm \(nn\.LayerNorm\)"),
        ({**state, "extra.weight": torch.zeros(1)}, r"unexpected extra\.weight \[1\]"),
        ({**state, "final_linear.bias": torch.zeros(7)},
         r"wrong shape for final_linear\.bias: expected \[\d+\], got \[7\]"),
        ({k: v for k, v in state.items() if k != "final_linear.bias"},
         r"missing final_linear\.bias .*DecoderOnlyTransformer\.final_linear \(nn\.Linear\)"),
        ({k: v for k, v in state.items() if ".ffn.norm." not in k},
         r"missing dec_layers\.0\.ffn\.norm\.weight .*FeedForwardLayer\.norm"),
        ({"model_state_dict": state, "epoch": 3}, re.escape("model.state_dict()")),
        ([torch.zeros(2)], re.escape("model.state_dict()")),
        ({**state, "final_linear.bias": nan_bias}, "NaN"),
    ]
    for payload, message in cases:
        torch.save(payload, weights)
        with pytest.raises(grade_model.GradingError, match=message):
            grade_model.evaluate_handin(tmp_path / "h", hidden)
    assert not (tmp_path / "pickle_ran_code").exists()
    weights.write_bytes(b"not a torch file")
    with pytest.raises(grade_model.GradingError, match="not the zip file torch.save writes"):
        grade_model.evaluate_handin(tmp_path / "h", hidden)
    # torch.save's zip with its entries deflated: refused before anything is inflated
    torch.save(state, weights)
    deflate_zip(weights)
    with pytest.raises(grade_model.GradingError, match="compressed entries"):
        grade_model.evaluate_handin(tmp_path / "h", hidden)


def deflate_zip(path: Path) -> None:
    """Rewrite the zip at ``path`` with every entry deflated (torch.save stores them)."""
    with zipfile.ZipFile(path) as source:
        entries = [(info.filename, source.read(info)) for info in source.infolist()]
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as sink:
        for name, data in entries:
            sink.writestr(name, data)


@rubric_category("Model grading")
def test_evaluation_batches_bound_attention_and_feed_forward_activations():
    class Lengths:  # what the evaluation loader reads of an LMDataset
        def __init__(self, lengths):
            self.transcripts_golden = [[0] * n for n in lengths]
            self.text_max_len = max(lengths)

        def __len__(self):
            return len(self.transcripts_golden)

        def collate_fn(self, batch):
            return batch

    lengths = [int(n) for n in np.random.default_rng(0).integers(1, 2000, 300)]
    for num_heads, width in ((64, 16), (1, 32768), (4, 1024), (1, 1)):
        loader = grade_model.evaluation_loader(Lengths(lengths), num_heads, width)
        batches = list(loader.batch_sampler)
        assert sorted(i for batch in batches for i in batch) == list(range(len(lengths))), (
            "every transcript must be evaluated exactly once")
        assert max(map(len, batches)) <= grade_model.MAX_BATCH_SIZE, (
            f"{num_heads} heads: expected batches of at most {grade_model.MAX_BATCH_SIZE}, "
            f"got one of {max(map(len, batches))}")
        for batch in batches:
            longest = max(lengths[i] for i in batch)
            largest = len(batch) * longest * max(num_heads * longest, width)
            assert len(batch) == 1 or largest <= grade_model.ACTIVATION_BUDGET, (
                f"{num_heads} heads, width {width}: a batch of {len(batch)} x {longest} holds "
                f"{largest} activations, over {grade_model.ACTIVATION_BUDGET}")
        # batches of similar lengths: sorted by length, each batch holds a contiguous run
        ordered = [lengths[i] for batch in batches for i in batch]
        assert ordered == sorted(lengths), f"{num_heads} heads: batches are not length-sorted"


@rubric_category("Model grading")
def test_what_make_handin_packs_the_grader_extracts_whole(tmp_path):
    """The packer and the grader share hw4lib.handin_format: every member of a packed handin is
    extracted, with no note; and a handin with every member at its limit fits MAX_TAR_BYTES."""
    from hw4lib.handin import pack

    student = tmp_path / "student"
    copy_reference_mytorch(student)
    make_run_folder(student, DecoderOnlyTransformer(**TINY_MODEL, num_classes=34).state_dict(),
                    reported_ppl=3.0)
    members = pack(student, "run", student / "handin.tar")
    result = extract_handin(student / "handin.tar", tmp_path / "out")
    assert not result.notes, f"expected a packed handin to extract with no note, got {result.notes}"
    packed, extracted = {name for name, _ in members}, {f"handin/{name}" for name in result.files}
    assert extracted == packed, (
        f"expected every packed member extracted; packed only: {sorted(packed - extracted)}, "
        f"extracted only: {sorted(extracted - packed)}")
    largest = (handin_format.MAX_STATE_DICT_BYTES + handin_format.MAX_MYTORCH_BYTES
               + len(handin_format.RUN_FILES) * handin_format.MAX_RUN_FILE_BYTES
               + handin_format.MAX_MEMBERS * 2 * 512)  # a header and padding per member
    assert largest <= handin_format.MAX_TAR_BYTES, (
        f"a handin within every member limit may take {largest} bytes, over MAX_TAR_BYTES "
        f"({handin_format.MAX_TAR_BYTES})")


# ------------------------------------------------------------------------------------------------
# Child processes
# ------------------------------------------------------------------------------------------------

def python_child(code: str, tmp_path: Path, timeout: float,
                 limits: dict | None = None) -> sandbox.Run:
    return sandbox.run_process([sys.executable, "-c", code], cwd=tmp_path, env=dict(os.environ),
                               timeout=timeout, limits=limits or {})


@rubric_category("Child processes")
def test_child_over_its_time_limit_is_killed_with_its_detached_children(tmp_path):
    sandbox.become_subreaper()  # as the grader does: detached descendants stay its own
    code = ("import os, subprocess, sys, time\n"
            "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)'],\n"
            "                         start_new_session=True)\n"
            "open('grandchild.pid', 'w').write(str(child.pid))\n"
            "print('started', flush=True)\n"
            "while True: time.sleep(0.1)\n")
    run = python_child(code, tmp_path, timeout=3)
    assert run.timed_out and "started" in run.output, run
    assert wait_until_dead(int((tmp_path / "grandchild.pid").read_text())), \
        "the detached grandchild outlived the time limit"


@rubric_category("Child processes")
def test_child_output_flood_is_bounded_and_escapes_removed(tmp_path):
    code = ("import sys\n"
            "for i in range(200_000): sys.stdout.write('spam ' * 20 + '\\x1b[2J\\r\\n')\n"
            "print('last line')\n")
    run = python_child(code, tmp_path, timeout=60)
    assert run.returncode == 0
    assert len(run.output) < sandbox.OUTPUT_HEAD_BYTES + sandbox.OUTPUT_TAIL_BYTES + 200
    assert "bytes of output omitted" in run.output and "\x1b" not in run.output
    assert run.output.rstrip().endswith("last line")


@rubric_category("Child processes")
def test_child_cannot_write_huge_files(tmp_path):
    import resource

    code = "open('big.bin', 'wb').write(b'0' * (4 * 2**20))"
    run = python_child(code, tmp_path, timeout=60, limits={resource.RLIMIT_FSIZE: 2**20})
    assert run.returncode != 0
    assert (tmp_path / "big.bin").stat().st_size <= 2**20


@rubric_category("Child processes")
def test_the_judge_runs_under_an_address_space_limit(tmp_path):
    from autograder import grade

    code = ("import resource\n"
            "from autograder import grade\n"
            "grade.limit_address_space()\n"
            "print(resource.getrlimit(resource.RLIMIT_AS)[0], flush=True)\n"
            "print(resource.getrlimit(resource.RLIMIT_AS)[1] in grade.model_limits().values())\n"
            "try:\n"
            "    block = bytearray(grade.judge_address_space())\n"
            "except MemoryError:\n"
            "    print('refused')\n")
    run = subprocess.run([sys.executable, "-c", code], cwd=REPO_ROOT, capture_output=True,
                         text=True, timeout=120)
    limit, model_unlimited, refused = run.stdout.split()
    physical = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    assert int(limit) == grade.judge_address_space() <= physical, run.stdout
    assert model_unlimited == "True" and refused == "refused", run.stdout + run.stderr


# ------------------------------------------------------------------------------------------------
# Code made at run time
# ------------------------------------------------------------------------------------------------

UTF7_SOURCE = "# -*- coding: utf-7 -*-\nx = 1\n"
TRICKS = r"""
import ast, builtins, collections, ctypes, dataclasses, fractions, io, marshal, sys, zlib
import numpy.polynomial  # a numpy module numpy imports lazily: compiled from its file
_Pair = collections.namedtuple("_Pair", "a b")  # the standard library's own generated code
@dataclasses.dataclass
class _Data:
    a: int = 1
assert ast.literal_eval("(1, 2)") == (1, 2) and _Pair(1, 2).b == 2 and _Data().a == 1
_BLOB = zlib.compress(b"_MADE = True")
_MARSHALLED = marshal.dumps(_Data.__init__.__code__)  # the audit hook lets dumps through
_open, _type, _frame = io.open, builtins.type, sys._getframe
io.open = lambda *args, **kwargs: _open(__file__, "rb")  # the hook must not call these
builtins.type = lambda *args: bytes
_TRICKS = {
    "exec of a blob": lambda: exec(zlib.decompress(_BLOB)),
    "eval of text": lambda: eval("1 + 1"),
    "compile under this file's name": lambda: compile(zlib.decompress(_BLOB), __file__, "exec"),
    "marshal": lambda: marshal.loads(_MARSHALLED),
    "code edited by hand": lambda: (lambda: 0).__code__.replace(co_consts=(1,)),
    "the interpreter's own C functions": lambda: ctypes.pythonapi.PyRun_SimpleString,
    "the hook's state through gc": lambda: __import__("gc").get_objects(),
}
_GOT_THROUGH = []
for _name, _trick in _TRICKS.items():
    try:
        _trick()
    except Exception as _error:
        if _type(_error).__name__ == "CodeAtRunTime":
            continue
    _GOT_THROUGH.append(_name)
io.open, builtins.type = _open, _type
if _GOT_THROUGH:
    raise SystemExit(f"got through: {_GOT_THROUGH}")
"""


def blob_mytorch(folder: Path) -> Path:
    """The reference mytorch with every file an ``exec(compile(zlib blob, __file__))`` of itself:
    the same code, unreadable to anyone reading the handin."""
    package = copy_reference_mytorch(folder)
    for path in package.rglob("*.py"):
        blob = base64.b64encode(zlib.compress(path.read_bytes())).decode()
        path.write_text(f"import base64, zlib\nexec(compile(zlib.decompress(base64.b64decode("
                        f"{blob!r})), __file__, 'exec'))\n")
    return package


@rubric_category("Child processes")
def test_the_worker_runs_only_mytorch_s_files_and_honest_code_still_passes():
    """The worker's audit hook in the mode the machine gives: honest code using what the standard
    library and numpy generate or import lazily keeps its points while every trick to run code
    that is not a file is refused (the mytorch stops itself if one works); a mytorch of blobs
    gets 0 and the message names the line."""
    from autograder import judge

    folder = open_folder("hw4p1-audit-")
    tricks = copy_reference_mytorch(folder / "tricks")
    (tricks / "__init__.py").write_text(TRICKS + (tricks / "__init__.py").read_text())
    for name, package, points in [("tricks", tricks, 5.0),
                                  ("blobs", blob_mytorch(folder / "blobs"), 0.0)]:
        layout = worker_layout(folder / f"layout-{name}", package)
        mode, notes = sandbox.choose_mode(layout, judge.python_executable(),
                                          allow_unisolated=True)
        run = judge.grade_category("Linear", layout, mode, timeout=120)
        messages = [result.message for result in run.results]
        assert sum(result.points for result in run.results) == points, (name, mode, messages,
                                                                        run.output[-3000:])
    assert all(message.endswith(f"{worker.MADE_AT_RUN_TIME} (at mytorch/__init__.py:2)")
               for message in messages), messages


@rubric_category("Handin extraction")
def test_sources_in_another_encoding_than_utf8_are_not_graded(tmp_path):
    from autograder import judge

    cases = {"a.py": (UTF7_SOURCE, "utf-7"),
             "b.py": ("#!/bin/python\n# coding=latin-1\n", "latin-1"),
             "c.py": ("\n# vim: set fileencoding=utf-7 :\n", "utf-7"),
             "d.py": ("\ufeff# coding: utf-8\n", "utf-8"), "e.py": ("# coding: UTF8\n", "UTF8"),
             "f.py": ("x = 1  # coding: utf-7\n", None), "g.py": ("x = 1\n# coding: utf-7\n", None),
             "h.py": ("# -*- coding: no-such-codec -*-\n", "no-such-codec")}
    files = {}
    for name, (text, encoding) in cases.items():
        files[f"mytorch/{name}"] = tmp_path / name
        files[f"mytorch/{name}"].write_bytes(text.encode("utf-8"))
        assert judge.declared_encoding(text.encode("utf-8")) == encoding, name
    files["config.yaml"] = tmp_path / "config.yaml"
    files["config.yaml"].write_text("# coding: utf-7\n")
    notes: list[str] = []
    judge.refuse_foreign_encodings(files, notes)
    assert sorted(files) == ["config.yaml", "mytorch/d.py", "mytorch/e.py", "mytorch/f.py",
                             "mytorch/g.py"]
    assert notes[0].startswith("mytorch/a.py: declares the source encoding 'utf-7'; the grader "
                               "reads mytorch as UTF-8 only"), notes


# ------------------------------------------------------------------------------------------------
# End to end: make in a grading folder, as Autolab does
# ------------------------------------------------------------------------------------------------

# Wide thresholds, so that an untrained tiny model earns partial credit and the end-to-end tests
# see the score follow the measured perplexity (the default line gives such a model 0).
TEST_FULL_MARKS_PPL, TEST_ZERO_MARKS_PPL = 2.0, 1000.0
TEST_HIDDEN_CHARS = 20_000  # a quarter of the default: the test measures the model twice
HIDDEN_PARTITION_MEMBER = "autograde/autograder/hidden_set/test"
PUBLIC_PARTITION_MEMBER = "autograde/autograder/public_test/test"


def build_autograder(out: Path) -> dict:
    from tools import make_autograde

    return make_autograde.build(out, hidden_chars=TEST_HIDDEN_CHARS,
                                full_marks_ppl=TEST_FULL_MARKS_PPL,
                                zero_marks_ppl=TEST_ZERO_MARKS_PPL)


SESSION_FOLDERS: list[Path] = []  # removed when the test session ends


def session_folder(prefix: str) -> Path:
    """A temporary folder that lives until the end of the test session."""
    folder = Path(tempfile.mkdtemp(prefix=prefix))
    SESSION_FOLDERS.append(folder)
    return folder


@pytest.fixture(scope="session", autouse=True)
def remove_session_folders():
    """Remove the session's folders at its end (atexit handlers do not run in xdist workers)."""
    yield
    for folder in SESSION_FOLDERS:
        shutil.rmtree(folder, ignore_errors=True)


@functools.lru_cache(maxsize=None)
def built_autograder() -> Path:
    """A folder with autograde.tar and autograde-Makefile, built once per test process."""
    out = session_folder("hw4p1-autograde-")
    build_autograder(out)
    return out


def import_without_site_packages(folder: Path, modules: tuple[str, ...]) -> dict[str, str]:
    """Import ``modules`` from ``folder`` in a fresh interpreter without site-packages (so without
    torch or numpy); return {module: the file it came from}. Fails unless every module imports,
    from ``folder``, and pulls in nothing outside the standard library."""
    code = ("import importlib, json, sys\n"
            f"files = {{name: importlib.import_module(name).__file__ for name in {modules!r}}}\n"
            "assert not {'torch', 'numpy', 'yaml'} & set(sys.modules), sorted(sys.modules)\n"
            "print(json.dumps(files))\n")
    process = subprocess.run([sys.executable, "-S", "-E", "-c", code], cwd=folder,
                             capture_output=True, text=True, timeout=60)
    assert process.returncode == 0, f"{modules} do not import from {folder}: {process.stderr}"
    files = json.loads(process.stdout)
    outside = {name: file for name, file in files.items()
               if not Path(file).resolve().is_relative_to(folder.resolve())}
    assert not outside, f"imported from outside {folder}: {outside}"
    return files


def read_hidden_lines(autograde_tar: Path) -> list[str]:
    """The hidden transcripts ``autograde_tar`` ships, in the order LMDataset reads them."""
    with tarfile.open(autograde_tar) as tar, tempfile.TemporaryDirectory() as scratch:
        members = [m for m in tar.getmembers() if m.name.startswith(HIDDEN_PARTITION_MEMBER + "/")]
        tar.extractall(scratch, members=members, filter="data")
        return [load_transcript(path)
                for path in sorted((Path(scratch) / HIDDEN_PARTITION_MEMBER).glob("*.npy"))]


def run_grader(tmp_path: Path, handin: Path | None, grader_flags: str = "",
               peak_memory: list | None = None, environment: dict | None = None,
               profile: str = "host") -> tuple[list[str], dict]:
    """Grade ``handin`` with make in ``tmp_path/grading``; return (output lines, scores).

    Checks that the last line is the scores line with every category in range, and that nothing
    outside the grading folder was created, deleted or modified. ``peak_memory`` (a list) receives
    the largest resident set, in bytes, of any process of the grading. ``profile``: the emulated
    platform make runs in (``tests/platform_profiles.py``; a non-root one owns the grading folder,
    and ``tmp_path`` must let it through).
    """
    grading = tmp_path / "grading"
    grading.mkdir()
    shutil.copy(built_autograder() / "autograde.tar", grading / "autograde.tar")
    shutil.copy(built_autograder() / "autograde-Makefile", grading / "Makefile")
    if handin is not None:
        shutil.copy(handin, grading / "handin.tar")
    if profile in platform_profiles.NON_ROOT:
        for path in [grading, *grading.rglob("*")]:
            os.chown(path, platform_profiles.PROFILE_UID, platform_profiles.PROFILE_UID)

    def outside() -> dict[str, int]:
        return {path: (tmp_path / path).lstat().st_mtime_ns for path in tree(tmp_path)
                if path.split("/")[0] != "grading"}

    before = outside()
    process = autolab_make([f"PYTHON={sys.executable}", f"GRADER_FLAGS={grader_flags}"],
                           cwd=grading, timeout=900, environment=environment, profile=profile)
    lines = process.stdout.splitlines()
    assert process.returncode == 0, process.stdout[-3000:] + process.stderr[-3000:]
    if peak_memory is not None:
        peak_memory.append(int(re.findall(r"PEAK_RSS_KIB (\d+)", process.stderr)[-1]) * 1024)
    scores = json.loads(lines[-1])["scores"]
    assert list(scores) == list(rubric.RUBRIC), scores
    assert all(0 <= scores[c] <= rubric.RUBRIC[c] for c in scores), scores
    after = outside()
    assert after == before, f"changed outside the grading folder: {set(after) ^ set(before)}"
    return lines, scores


def autolab_make(args: list[str], cwd: Path, timeout: float, environment: dict | None = None,
                 profile: str = "host") -> subprocess.CompletedProcess:
    """Run `make` as Autolab does: a top-level make, even when these tests run under `make test`
    (an inherited MAKELEVEL would make GNU make print "Leaving directory" after the scores line).
    ``environment`` adds variables to the grading environment; ``profile`` is the emulated
    platform (``tests/platform_profiles.py``)."""
    env = {k: v for k, v in os.environ.items() if k not in ("MAKELEVEL", "MAKEFLAGS", "MFLAGS")}
    if profile in platform_profiles.NON_ROOT:
        env["HOME"] = str(cwd)
    env.update(environment or {})
    # A small wrapper reports the peak memory of every process make waited for, on stderr.
    wrapper = ("import resource, subprocess, sys\n"
               "code = subprocess.run(sys.argv[1:]).returncode\n"
               "peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss\n"
               "sys.stderr.write(f'PEAK_RSS_KIB {peak}\\n')\n"
               "sys.exit(code)\n")
    command = [sys.executable, "-c", wrapper, "make", *args]
    return subprocess.run(platform_profiles.launcher(profile, command), cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=timeout)


def copy_reference_mytorch(root: Path) -> Path:
    shutil.copytree(REPO_ROOT / "mytorch", root / "mytorch",
                    ignore=shutil.ignore_patterns("__pycache__"))
    return root / "mytorch"


def make_run_folder(root: Path, state_dict: dict, reported_ppl: float,
                    test_lines: list[str] = ()) -> None:
    """expts/run/ with the files the trainer writes; test_metrics.json claims ``reported_ppl``
    on ``test_lines``, the run's test partition (written as make data does, ids in their order)."""
    run = root / "expts/run"
    (run / "checkpoints").mkdir(parents=True)
    config = {"name": "run", "tokenization": {"token_type": "char"}, "model": TINY_MODEL}
    if test_lines:
        (root / "data/test").mkdir(parents=True)
        for index, text in enumerate(test_lines):
            np.save(root / f"data/test/7000-{index:06d}-0000.npy", np.array(list(text), dtype="<U1"))
        config["data"] = {"root": "data", "subset": 1.0}
    (run / "config.yaml").write_text(yaml.safe_dump(config))
    (run / "model_arch.txt").write_text("DecoderOnlyTransformer(...)\n")
    metrics = {"ce_loss_token": 0.0, "ce_loss_char": 0.0, "perplexity_token": reported_ppl,
               "perplexity_char": reported_ppl, "num_chars": sum(len(t) for t in test_lines)}
    (run / "test_metrics.json").write_text(json.dumps(metrics))
    (run / "test_generated_results.json").write_text(json.dumps({"greedy": []}))
    torch.save({"model_state_dict": state_dict, "epoch": 1}, run / BEST_CHECKPOINT)


def reported_perplexity(lines: list[str]) -> float:
    found = [re.search(r"perplexity on the hidden test set: ([0-9.]+)", line) for line in lines]
    values = [float(match.group(1)) for match in found if match]
    assert len(values) == 1, "\n".join(lines[-60:])
    return values[0]


@pytest.mark.slow
@rubric_category("End to end")
def test_good_handin_with_edited_metrics_is_graded_on_its_weights(tmp_path):
    from autograder.hidden_data import public_splits
    from hw4lib.handin import pack

    student = tmp_path / "student"
    copy_reference_mytorch(student)
    tokenizer = H4Tokenizer(DEFAULT_TOKEN_MAP, "char")
    torch.manual_seed(0)
    model = DecoderOnlyTransformer(**TINY_MODEL, num_classes=tokenizer.vocab_size)
    measured_set = public_splits(0)["test"][:40]  # a run with data.subset < 1 measures a prefix
    make_run_folder(student, model.state_dict(), reported_ppl=1.0, test_lines=measured_set)
    pack(student, "run", student / "handin.tar")  # the real `make handin`

    details_path = tmp_path / "grading/details.json"  # what the staff see (the regrade's CSV)
    lines, scores = run_grader(tmp_path, student / "handin.tar",
                               f"--results-json {details_path}")
    details = json.loads(details_path.read_text())
    text = "\n".join(lines)
    for category, points in rubric.MYTORCH_RUBRIC.items():
        assert scores[category] == points, (category, text[-4000:])
    # The language model is scored on the perplexity its weights give on the hidden set, measured
    # here independently; the 1.0 the student reported changes nothing. The feedback shows it to
    # two decimals, details.json in full.
    measured = details["lm"]["perplexity_char"]
    hidden = read_hidden_lines(built_autograder() / "autograde.tar")
    direct = direct_perplexity_char(model, tokenizer, hidden)
    assert measured == pytest.approx(direct, rel=1e-5)
    assert reported_perplexity(lines) == round(measured, 2)
    assert 0 < scores["LanguageModel"] < rubric.LM_POINTS
    assert scores["LanguageModel"] == rubric.lm_score(measured, TEST_FULL_MARKS_PPL,
                                                      TEST_ZERO_MARKS_PPL)
    assert "reports 1.0000" in text
    # Autolab's scoreboard shows the measurement, never the 1.0 the handin claims
    parameters = sum(p.numel() for p in model.parameters())
    assert json.loads(lines[-1])["scoreboard"] == [round(measured, 2), parameters, "char"]
    # The weights agree with the run card make handin wrote; the 1.0 the run reports on its test
    # set is flagged for the staff against what the weights give on those very transcripts,
    # measured here too. The student's feedback only says that remarks were recorded.
    compared = direct_perplexity_char(model, tokenizer, measured_set)
    assert details["flags"] == [
        f"test_metrics.json reports a test perplexity of 1.0000; these weights give "
        f"{compared:.4f} on the same 40 transcripts (split 'test', subset 1.0): "
        f"{abs(1 - compared) / compared:.1%} apart, more than 2%"], details["flags"]
    assert "1 remark(s)" in text and "a test perplexity of" not in text

    # The same handin with other weights, a config of another dropout and edited metrics: each
    # disagreement with run_card.json is flagged for the staff, and the score is the measurement's.
    tampered = tmp_path / "tampered"
    with tarfile.open(student / "handin.tar") as tar:
        tar.extractall(tampered, filter="data")
    torch.manual_seed(1)
    other = DecoderOnlyTransformer(**TINY_MODEL, num_classes=tokenizer.vocab_size)
    torch.save(other.state_dict(), tampered / "handin/model_state_dict.pt")
    config = yaml.safe_load((tampered / "handin/config.yaml").read_text())
    config["model"]["dropout"] = 0.25
    (tampered / "handin/config.yaml").write_text(yaml.safe_dump(config))
    (tampered / "handin/test_metrics.json").write_text('{"perplexity_char": 0.9}')
    (tmp_path / "again").mkdir()
    details_path = tmp_path / "again/grading/details.json"
    lines, scores = run_grader(tmp_path / "again", pack_folder(tampered / "handin",
                                                               tmp_path / "tampered.tar"),
                               f"--results-json {details_path}")
    flags = "\n".join(json.loads(details_path.read_text())["flags"])
    assert "model_state_dict.pt's sha256 is" in flags, flags
    assert "config.yaml's model and tokenizer digest is" in flags
    assert "test_metrics.json reports a test perplexity of 0.9000, run_card.json 1.0000" in flags
    assert "test_metrics.json reports a test perplexity of 0.9000; these weights give" in flags
    assert "4 remark(s)" in "\n".join(lines) and "a test perplexity of" not in "\n".join(lines)
    remeasured = json.loads(details_path.read_text())["lm"]["perplexity_char"]
    assert scores["LanguageModel"] == rubric.lm_score(remeasured, TEST_FULL_MARKS_PPL,
                                                      TEST_ZERO_MARKS_PPL)
    # the secrets were deleted before student code ran
    grading = tmp_path / "grading"
    assert not (grading / "autograde.tar").exists()
    assert not (grading / "autograde/hw4lib").exists()
    assert not (grading / "autograde/autograder/hidden_set").exists()
    assert not (grading / "autograde/autograder/hidden_tests").exists()
    assert (grading / "autograde").stat().st_mode & 0o077 == 0, "the extraction stays private"
    assert "secrets" not in text and "seed" not in text.lower(), "the seed is never shown"


# ------------------------------------------------------------------------------------------------
# Attacks: each builds a malicious handin, grades it through make, and checks the exact scores
# ------------------------------------------------------------------------------------------------

FULL_LINE = json.dumps({"scores": {c: p for c, p in rubric.RUBRIC.items()}})
MYTORCH_ZERO = {category: 0 for category in rubric.MYTORCH_RUBRIC}
# A mytorch that does no work: every class raises when used (what the handout's stubs do).
STUB_NN = """
class _Stub:
    def __init__(self, *args, **kwargs):
        raise NotImplementedError("stub")
Linear = Softmax = ScaledDotProductAttention = MultiHeadAttention = _Stub
"""
# A mytorch that returns zeros everywhere, for harness-patching attacks.
ZEROS_NN = """
import numpy as np
class _Zeros:
    def __init__(self, *args, **kwargs): pass
    def __getattr__(self, name):
        return lambda *args, **kwargs: (np.zeros(1),) * 3
Linear = Softmax = ScaledDotProductAttention = MultiHeadAttention = _Zeros
"""
# Values no numeric check may accept: NaN, strings, a 256 MiB array, Python objects.
BAD_VALUES_NN = """
import numpy as np
class _Bad:
    value = None
    def __init__(self, *args, **kwargs): pass
    def __getattr__(self, name):
        return lambda *args, **kwargs: self.value
class Linear(_Bad): value = np.full((2, 2), np.nan)
class Softmax(_Bad): value = np.array(["a", "b"])
class ScaledDotProductAttention(_Bad): value = np.zeros(2**25)
class MultiHeadAttention(_Bad): value = [object(), object()]
"""
ATTACKS = {  # name: (code run when mytorch is imported, mytorch.nn, grader flags)
    "forged_line_then_os_exit": (f"import os\nprint({FULL_LINE!r}, flush=True)\nos._exit(0)\n",
                                 STUB_NN, ""),
    "forged_line_from_atexit": (f"import atexit\natexit.register(print, {FULL_LINE!r})\n",
                                STUB_NN, ""),
    "kill_the_grader_through_proc": (f"""
import os, signal
pid = os.getpid()
for _ in range(30):
    try:
        pid = int(open(f"/proc/{{pid}}/stat").read().rsplit(")", 1)[1].split()[1])
    except (OSError, ValueError):
        break
    if pid <= 0:
        break
    for fd in (1, 2):
        try:
            with open(f"/proc/{{pid}}/fd/{{fd}}", "w") as out:
                out.write({FULL_LINE!r} + "\\n")
        except OSError:
            pass
    for sig in (signal.SIGSTOP, signal.SIGKILL):
        try:
            os.kill(pid, sig)
        except OSError:
            pass
try:
    os.kill(-1, signal.SIGKILL)
except OSError:
    pass
""", STUB_NN, ""),
    "setsid_double_fork_survivor": (f"""
import os
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        os.execv("/bin/sh", ["sh", "-c", "sleep 7.25; echo '{FULL_LINE}'"])
    os._exit(0)
""", STUB_NN, ""),
    "patch_the_harness": ("""
import sys, numpy as np
np.array_equal = np.allclose = lambda *args, **kwargs: True
np.testing.assert_allclose = lambda *args, **kwargs: None
main = sys.modules.get("__main__")
for name in list(vars(main)) if main else []:
    if callable(getattr(main, name)):
        setattr(main, name, lambda *args, **kwargs: None)
worker = sys.modules.get("autograder.worker")
if worker is not None:
    worker.run_test = lambda nn, folder, test: worker.wire.encode_record(test, None, {})
""", ZEROS_NN, ""),
    "torch_instead_of_numpy": ("import torch\n", None, ""),
    "fork_bomb": ("""
import os, time
for _ in range(7):
    try:
        os.fork()
    except OSError:
        pass
while True:
    time.sleep(1)
""", STUB_NN, "--mytorch-timeout 4"),
    "flood_then_hang": ("""
import sys
for _ in range(100_000):
    sys.stdout.write("flood " * 40 + "\\x1b[31m\\n")
while True:
    pass
""", STUB_NN, "--mytorch-timeout 4"),
    "values_that_are_not_arrays": ("", BAD_VALUES_NN, ""),
}


def attack_handin(folder: Path, init_code: str, nn_code: str | None, nn_append: str = "") -> Path:
    """handin.tar: the tiny model, and the reference mytorch (or ``nn_code`` as mytorch.nn) with
    ``init_code`` run at its import and ``nn_append`` at the end of mytorch.nn's."""
    handin = folder / "handin"
    make_model_handin(handin)
    package = copy_reference_mytorch(handin)
    if nn_code is not None:
        shutil.rmtree(package / "nn")
        (package / "nn").mkdir()
        (package / "nn/__init__.py").write_text(nn_code)
    if nn_append:
        (package / "nn/__init__.py").write_text((package / "nn/__init__.py").read_text() + nn_append)
    (package / "__init__.py").write_text(init_code + (package / "__init__.py").read_text())
    return pack_folder(handin, folder / "handin.tar")


def pack_folder(handin: Path, tar_path: Path, **options) -> Path:
    """``handin/`` packed as make handin does: regular files only, under handin/."""
    members = [regular(f"handin/{path.relative_to(handin).as_posix()}", path.read_bytes())
               for path in sorted(handin.rglob("*")) if path.is_file()]
    return write_tar(tar_path, members, **options)


@functools.lru_cache(maxsize=None)
def honest_scores() -> dict:
    """Scores of the honest tiny handin (reference mytorch), graded once per test process."""
    folder = session_folder("hw4p1-honest-")
    _, scores = run_grader(folder, attack_handin(folder, "", None))
    assert all(scores[c] == p for c, p in rubric.MYTORCH_RUBRIC.items()), scores
    assert 0 < scores["LanguageModel"] < rubric.LM_POINTS, scores
    return scores


def survivors(marker: str) -> list[int]:
    """Live processes whose command line contains ``marker``."""
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            if marker.encode() in cmdline.read_bytes() and not _is_zombie(cmdline.parent):
                found.append(int(cmdline.parent.name))
        except OSError:
            pass
    return found


def _is_zombie(proc: Path) -> bool:
    try:
        return (proc / "stat").read_text().rsplit(") ", 1)[1][:1] in "ZX"
    except OSError:
        return True


SKIPS_ALLOWED = "HW4P1_ALLOW_SECURITY_SKIPS"  # set to 1 to let the attack tests skip


def open_folder(prefix: str) -> Path:
    """A session folder every sandbox uid can traverse (pytest's tmp_path is 0700 to root, which
    setpriv's fresh uid cannot enter: the grader would fall back to a weaker mode there)."""
    folder = session_folder(prefix)
    folder.chmod(0o755)
    return folder


def worker_layout(folder: Path, mytorch: Path | None = None) -> sandbox.Layout:
    """The folders a worker reads, under ``folder``, as the grader lays them out: its runtime,
    numpy, ``mytorch`` (a copy; an empty package when None) and empty input and tmp folders."""
    from autograder import grade

    layout = sandbox.Layout(folder / "runtime", folder / "pylib", folder / "student",
                            folder / "input", folder / "tmp")
    (layout.runtime_dir / "autograder").mkdir(parents=True)
    for name in grade.RUNTIME_FILES:
        shutil.copy(REPO_ROOT / "autograder" / name, layout.runtime_dir / "autograder" / name)
    grade.link_numpy(layout.pylib_dir)
    if mytorch is None:
        (layout.student_dir / "mytorch").mkdir(parents=True)
    else:
        shutil.copytree(mytorch, layout.student_dir / "mytorch",
                        ignore=shutil.ignore_patterns("__pycache__"))
    layout.input_dir.mkdir()
    layout.tmp_dir.mkdir()
    sandbox.make_readable(folder)
    if os.geteuid() == 0:
        os.chown(layout.tmp_dir, sandbox.grading_uid(), sandbox.grading_uid())
    return layout


def require_isolation() -> str:
    """The sandbox mode the grader picks on this machine (probed in a folder its uid can reach,
    as the grading folders of these tests are). When that is 'none' (unisolated: the attacks
    would hit the test run itself) the test FAILS, naming what to install, unless
    HW4P1_ALLOW_SECURITY_SKIPS=1 lets it skip: a security test never skips unnoticed."""
    probe = open_folder("hw4p1-probe-")
    mode, notes = sandbox.choose_mode(worker_layout(probe), str(Path(sys.executable).resolve()))
    shutil.rmtree(probe)
    if mode == "none":
        message = (f"no sandbox mode isolates student code here ({notes}); install bubblewrap or "
                   f"run as root (setpriv)")
        if os.environ.get(SKIPS_ALLOWED) != "1":
            pytest.fail(f"{message}; or set {SKIPS_ALLOWED}=1 to skip the attack tests")
        pytest.skip(message)
    return mode


@pytest.mark.slow
@rubric_category("End to end")
@pytest.mark.parametrize("attack", list(ATTACKS))
def test_attack_on_mytorch_scores_zero_there_and_keeps_the_rest(attack):
    require_isolation()
    folder = open_folder(f"hw4p1-attack-{attack}-")
    init_code, nn_code, flags = ATTACKS[attack]
    lines, scores = run_grader(folder, attack_handin(folder, init_code, nn_code), flags)
    text = "\n".join(lines)
    expected = {**MYTORCH_ZERO, "LanguageModel": honest_scores()["LanguageModel"]}
    assert scores == expected, f"{attack}: expected {expected}, got {scores}\n{text[-4000:]}"
    assert "The autograder itself failed" not in text, text[-4000:]
    assert lines.count(FULL_LINE) == 0, "a forged scores line reached the grader's output"
    assert len(text.encode()) < 200_000, "the student's output reached the grader's unbounded"
    assert "\x1b" not in text
    if attack == "torch_instead_of_numpy":
        assert "mytorch must be written with numpy only: it imports torch" in text
    if attack == "setsid_double_fork_survivor":
        time.sleep(0.5)
        assert not survivors("sleep 7.25"), "a detached process outlived the grading"
    if attack == "fork_bomb":
        assert "time limit" in text


@pytest.mark.slow
@rubric_category("End to end")
def test_snooping_and_writing_outside_the_sandbox_change_nothing():
    """Honest code that also prints what it can find of the grader and writes where it should
    not: full marks for the code, no secret in the output, nothing written."""
    require_isolation()
    tmp_path = open_folder("hw4p1-snoop-")
    grading = tmp_path / "grading"
    targets = [grading / "autograde/resource.py", grading / "autograde/autograder/rubric.py",
               grading / "work/sandbox/runtime/autograder/wire.py", grading / "Makefile",
               tmp_path / "outside.txt", Path("/tmp/hw4p1-written-by-student.txt"),
               Path("autograde/resource.py"), Path("../autograde/resource.py")]
    snoop = f"""
import os, time
start = time.time()
for top in ("/", os.path.expanduser("~"), {str(grading)!r}, "/proc/1/root", "..", "../.."):
    for folder, _, files in os.walk(top):
        if time.time() - start > 3:
            break
        for name in files:
            if name in ("mytorch_hidden.py", "test.txt", "grade.py", "build_info.json"):
                try:
                    print(open(os.path.join(folder, name)).read()[:3000])
                except OSError:
                    pass
for target in {[str(t) for t in targets]!r}:
    try:
        with open(target, "a") as out:
            out.write("import os\\n")
    except OSError:
        pass
"""
    lines, scores = run_grader(tmp_path, attack_handin(tmp_path, snoop, None))
    text = "\n".join(lines)
    assert scores == honest_scores(), text[-4000:]
    assert "def sdpa_against_explicit_torch_formula" not in text, "the hidden tests leaked"
    hidden_line = read_hidden_lines(built_autograder() / "autograde.tar")[0]
    assert hidden_line not in text, "the hidden set leaked"
    assert not (grading / "autograde/resource.py").exists()
    assert "import os" not in (grading / "Makefile").read_text()
    assert not Path("/tmp/hw4p1-written-by-student.txt").exists()
    assert not (tmp_path / "outside.txt").exists()


@pytest.mark.slow
@rubric_category("End to end")
def test_bad_side_files_cost_only_their_own_category(tmp_path):
    """test_metrics.json bombs change nothing; a YAML alias bomb and a deflated .pt cost only the
    language model, with a bounded message."""
    honest = honest_scores()
    cases = {}
    folder = tmp_path / "metrics"
    handin = folder / "handin"
    make_model_handin(handin)
    copy_reference_mytorch(handin)
    (handin / "test_metrics.json").write_text(
        '{"perplexity_char": 1' + "0" * 400 + ', "nested": ' + "[" * 100_000 + "]" * 100_000 + "}")
    cases["metrics"] = (pack_folder(handin, folder / "handin.tar"), honest, None)
    folder = tmp_path / "yaml"
    handin = folder / "handin"
    make_model_handin(handin)
    copy_reference_mytorch(handin)
    (handin / "config.yaml").write_text(alias_bomb_config())
    cases["yaml"] = (pack_folder(handin, folder / "handin.tar"),
                     {**honest, "LanguageModel": 0},
                     "model.num_layers': input should be a valid integer")
    folder = tmp_path / "deflated"
    handin = folder / "handin"
    make_model_handin(handin)
    copy_reference_mytorch(handin)
    deflate_zip(handin / "model_state_dict.pt")
    cases["deflated"] = (pack_folder(handin, folder / "handin.tar"),
                         {**honest, "LanguageModel": 0}, "compressed entries")
    for name, (tar_path, expected, message) in cases.items():
        lines, scores = run_grader(tar_path.parent, tar_path)
        text = "\n".join(lines)
        assert scores == expected, f"{name}: expected {expected}, got {scores}\n{text[-3000:]}"
        assert "The autograder itself failed" not in text and len(text) < 100_000, text[-3000:]
        if message:
            assert message in text, (name, text[-3000:])


def recorded_worker_streams(seed: int) -> dict[str, bytes]:
    """{category: what the worker sends back for the reference mytorch}, recorded in this process
    for hidden-test inputs drawn from ``seed``: what a replay attack would have saved from an
    earlier grading."""
    import mytorch.nn as reference_nn
    from autograder import worker
    from autograder.hidden_tests.mytorch_hidden import tests_of

    streams = {}
    for category in rubric.MYTORCH_RUBRIC:
        folder = Path(tempfile.mkdtemp(prefix="hw4p1-record-"))
        tests = tests_of(category)
        stream = b""
        for test, child in zip(tests, np.random.SeedSequence(seed).spawn(len(tests))):
            program = wire.Program()
            test.build(program, np.random.default_rng(child))
            program.save(folder / test.name)
            stream += worker.run_test(reference_nn, folder / test.name, test.name)
        shutil.rmtree(folder)
        streams[category] = stream
    return streams


# Replays a recorded stream on the worker's result fd, then exits before any class is used.
REPLAY_INIT = """
import base64, importlib, json, os, sys
_args = sys.argv
_tests = json.load(open(os.path.join(_args[_args.index("--input") + 1], "tests.json")))
_data = base64.b64decode(importlib.import_module("mytorch._replay_" + CATEGORY_OF[_tests[0]]).DATA)
_fd = int(_args[_args.index("--result-fd") + 1])
while _data:
    _data = _data[os.write(_fd, _data):]
os._exit(0)
"""
REPLAY_SEED = 20240  # the recorded grading's seed (any seed: the judge draws a fresh one)


def replay_handin(folder: Path) -> Path:
    """handin.tar: the tiny model, and a mytorch whose classes all raise NotImplementedError and
    whose import writes a recorded result stream of the reference mytorch to the result fd."""
    import base64

    from autograder.hidden_tests.mytorch_hidden import HIDDEN_TESTS

    category_of = {test.name: test.category for test in HIDDEN_TESTS}
    handin = folder / "handin"
    make_model_handin(handin)
    package = handin / "mytorch"
    (package / "nn").mkdir(parents=True)
    (package / "nn/__init__.py").write_text(STUB_NN)
    for category, stream in recorded_worker_streams(REPLAY_SEED).items():
        (package / f"_replay_{category}.py").write_text(
            f"DATA = {base64.b64encode(stream).decode()!r}\n")
    (package / "__init__.py").write_text(f"CATEGORY_OF = {category_of!r}\n{REPLAY_INIT}")
    return pack_folder(handin, folder / "handin.tar")


@pytest.mark.slow
@rubric_category("End to end")
def test_replaying_an_earlier_gradings_results_scores_zero(tmp_path):
    """A mytorch whose classes all raise NotImplementedError, which writes the worker's result
    stream of an earlier grading of the reference mytorch straight to the result fd: the inputs
    are drawn afresh, so the recorded values match nothing."""
    lines, scores = run_grader(tmp_path, replay_handin(tmp_path))
    text = "\n".join(lines)
    expected = {**MYTORCH_ZERO, "LanguageModel": honest_scores()["LanguageModel"]}
    assert scores == expected, f"replay: expected {expected}, got {scores}\n{text[-4000:]}"


@pytest.mark.slow
@rubric_category("End to end")
def test_pythonoptimize_in_the_grading_environment_changes_nothing(tmp_path):
    """PYTHONOPTIMIZE=1 set where make runs: the Makefile unexports it, and the checks are not
    asserts anyway; a mytorch returning zeros earns nothing."""
    lines, scores = run_grader(tmp_path, attack_handin(tmp_path, "", ZEROS_NN),
                               environment={"PYTHONOPTIMIZE": "1"})
    expected = {**MYTORCH_ZERO, "LanguageModel": honest_scores()["LanguageModel"]}
    assert scores == expected, "\n".join(lines)[-4000:]
    assert "refuses to run" not in "\n".join(lines), "the Makefile must clear PYTHONOPTIMIZE"


# ------------------------------------------------------------------------------------------------
# Ordinary archives: every way a student may re-pack the handin is read alike
# ------------------------------------------------------------------------------------------------

def repacked_handins(folder: Path) -> dict[str, Path]:
    """The honest handin as make handin packs it ("original"), then re-packed every ordinary way:
    GNU tar and bsdtar (when installed), Python's tarfile in each format, with and without
    directory entries and ./ prefixes, gzip-compressed, packed from the folder above handin/, and
    as zip archives (one named handin.tar)."""
    handin = folder / "handin"
    make_model_handin(handin)
    copy_reference_mytorch(handin)
    (handin / "test_metrics.json").write_text('{"perplexity_char": 3.0}')
    archives = {"original": pack_folder(handin, folder / "original.tar")}
    commands = {"gnu-tar-dirs": ["tar", "-cf", "{out}", "handin"],
                "gnu-tar-dot": ["tar", "-cf", "{out}", "-C", "handin", "."],
                "gnu-tar-pax": ["tar", "--format=pax", "-cf", "{out}", "handin"],
                "gnu-tar-ustar": ["tar", "--format=ustar", "-cf", "{out}", "handin"],
                "gnu-tar-gzip": ["tar", "-czf", "{out}", "handin"],
                "bsdtar": ["bsdtar", "-cf", "{out}", "handin"],
                "bsdtar-gzip-dot": ["bsdtar", "-czf", "{out}", "-C", "handin", "."]}
    for name, command in commands.items():
        if shutil.which(command[0]) is None:
            continue
        out = folder / f"{name}.tar"
        subprocess.run([arg.replace("{out}", str(out)) for arg in command], cwd=folder,
                       check=True)
        archives[name] = out
    for fmt in (tarfile.USTAR_FORMAT, tarfile.GNU_FORMAT, tarfile.PAX_FORMAT):
        for prefix, root in (("handin", folder), (".", handin)):
            out = folder / f"tarfile-{fmt}-{prefix}.tar"
            with tarfile.open(out, "w", format=fmt) as tar:
                tar.add(root / prefix if prefix == "handin" else handin, arcname=prefix)
            archives[out.stem] = out
    with tarfile.open(folder / "parent-folder.tar", "w") as tar:
        tar.add(handin, arcname="hw4p1/handin")
    archives["parent-folder"] = folder / "parent-folder.tar"
    for name, arcroot in (("zip-named-tar", "handin"), ("zip-flat", "")):
        out = folder / f"{name}.tar"
        with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
            for path in sorted(handin.rglob("*")):
                archive.write(path, f"{arcroot}/{path.relative_to(handin)}".lstrip("/"))
        archives[name] = out
    return archives


@rubric_category("Handin extraction")
def test_every_ordinary_repacking_extracts_the_same_files(tmp_path):
    archives = repacked_handins(tmp_path)
    assert {"gnu-tar-dirs", "gnu-tar-dot", "gnu-tar-gzip"} <= set(archives), archives
    reference = extract_handin(archives.pop("original"), tmp_path / "out-original")
    expected = {name: path.read_bytes() for name, path in reference.files.items()}
    assert "model_state_dict.pt" in expected and "mytorch/nn/linear.py" in expected
    for name, archive in archives.items():
        result = extract_handin(archive, tmp_path / f"out-{name}")
        got = {relative: path.read_bytes() for relative, path in result.files.items()}
        assert got == expected, f"{name}: extracted {sorted(got)}, expected {sorted(expected)}"
        assert not [note for note in result.notes if "stopped" in note], (name, result.notes)


@pytest.mark.slow
@rubric_category("End to end")
def test_repacked_handins_score_exactly_what_the_original_scores(tmp_path):
    archives = repacked_handins(tmp_path)
    for name in ("original", "gnu-tar-dirs", "bsdtar" if "bsdtar" in archives else "gnu-tar-pax",
                 "parent-folder", "zip-named-tar"):
        folder = tmp_path / f"grade-{name}"
        folder.mkdir()
        _, scores = run_grader(folder, archives[name])
        assert scores == honest_scores(), f"{name}: {scores}, original {honest_scores()}"


def honest_tar_bytes(folder: Path) -> bytes:
    """The honest handin's members as tar bytes, without the end-of-archive blocks."""
    handin = folder / "handin"
    make_model_handin(handin)
    copy_reference_mytorch(handin)
    buffer = io.BytesIO()
    tar = tarfile.open(fileobj=buffer, mode="w", format=tarfile.GNU_FORMAT)
    for path in sorted(handin.rglob("*")):
        if path.is_file():
            tar.add(path, arcname=f"handin/{path.relative_to(handin).as_posix()}")
    return buffer.getvalue()  # read before close(), which would add the end blocks


def long_name_header(size: int) -> bytes:
    info = tarfile.TarInfo("././@LongLink")
    info.type, info.size = tarfile.GNUTYPE_LONGNAME, size
    return info.tobuf(format=tarfile.GNU_FORMAT)


@pytest.mark.slow
@rubric_category("End to end")
def test_damaged_tails_and_name_bombs_keep_the_honest_members(tmp_path):
    """Honest members followed by a damaged header, 20,000 chained long-name records, or (gzip) a
    2 GiB long-name record: the honest part scores in full, with a note, in bounded memory."""
    honest = honest_tar_bytes(tmp_path / "members")
    damaged = bytearray(regular("handin/model_arch.txt", b"x")[0].tobuf())
    damaged[148:156] = b"0000000\0"  # a wrong checksum
    chain = b"".join(long_name_header(1000) + b"n" * 1000 + bytes(24) for _ in range(20_000))
    zeros = zlib.compressobj(1, zlib.DEFLATED, 31)
    zero_member = zeros.compress(bytes(16 * 2**20)) + zeros.flush()
    name_bomb = (gzip.compress(honest + long_name_header(2 * 2**30), compresslevel=1)
                 + zero_member * 128)  # concatenated gzip members: 2 GiB of name when inflated
    handins = {"damaged": honest + bytes(damaged) + bytes(1024),
               "chain": honest + chain + bytes(1024), "gzip-name-bomb": name_bomb}
    for name, data in handins.items():
        folder = tmp_path / name
        folder.mkdir()
        (folder / "handin.tar").write_bytes(data)
        peak = []
        lines, scores = run_grader(folder, folder / "handin.tar", peak_memory=peak)
        text = "\n".join(lines)
        assert scores == honest_scores(), f"{name}: {scores}\n{text[-3000:]}"
        assert "reading stopped after" in text, (name, text[-3000:])
        assert peak[0] < 1.5 * 2**30, f"{name}: a grader process used {peak[0] / 2**30:.1f} GiB"


@pytest.mark.slow
@rubric_category("End to end")
@pytest.mark.parametrize("mode", ["setpriv", "unshare", "none"])
def test_weaker_sandbox_modes_still_grade_and_hold(tmp_path, mode):
    """Each fallback mode, forced: the grader-killing attack still scores 0 for mytorch and the
    honest model keeps its points; 'none' grades honest code and warns."""
    reason = sandbox.unavailable(mode)
    if reason is not None:
        pytest.skip(f"{mode} cannot run here: {reason}")
    init_code, nn_code, _ = ATTACKS["kill_the_grader_through_proc"]
    if mode == "none":
        init_code, nn_code = "", None  # unisolated, the attack would kill the test's own make
    folder = open_folder(f"hw4p1-{mode}-")
    lines, scores = run_grader(folder, attack_handin(tmp_path, init_code, nn_code),
                               f"--sandbox {mode}")
    text = "\n".join(lines)
    if "does not work here, so student code was not run" in text:
        assert scores == {**MYTORCH_ZERO, "LanguageModel": honest_scores()["LanguageModel"]}
        pytest.skip(f"{mode} is installed but does not work here: "
                    f"{[line for line in lines if 'not used' in line]}")
    if mode == "none":
        isolation = ("confined by its Landlock layer only" if landlock.abi_version()
                     else "WARNING: student code ran UNISOLATED")
        assert scores == honest_scores() and isolation in text, text[-3000:]
    else:
        expected = {**MYTORCH_ZERO, "LanguageModel": honest_scores()["LanguageModel"]}
        assert scores == expected, f"{mode}: {scores}\n{text[-3000:]}"
        assert sandbox.mode_summary(mode) in text


@rubric_category("End to end")
def test_garbage_missing_incomplete_and_slow_handins_score_zero(tmp_path):
    (tmp_path / "garbage.tar").write_bytes(b"this is not a tar file\n" * 100)
    metrics_only = write_tar(tmp_path / "metrics_only.tar",
                             [regular("handin/test_metrics.json", b'{"perplexity_char": 1.0}')])
    make_model_handin(tmp_path / "model")
    model_only = write_tar(tmp_path / "model_only.tar", [
        regular(f"handin/{name}", (tmp_path / "model" / name).read_bytes())
        for name in ("config.yaml", "model_state_dict.pt")])
    # (handin, grader flags, messages expected in the report)
    cases = [(tmp_path / "garbage.tar", "", ["not a tar archive"]),
             (None, "", ["no handin.tar"]),
             (metrics_only, "", ["no config.yaml and no model_state_dict.pt", "no mytorch/"]),
             (model_only, "--model-timeout 1", ["more than the 1 s limit", "no mytorch/"])]
    for index, (handin, flags, messages) in enumerate(cases):
        folder = tmp_path / f"case{index}"
        folder.mkdir()
        lines, scores = run_grader(folder, handin, flags)
        assert scores == rubric.zero_scores(), (handin, scores)
        for message in messages:
            assert message in "\n".join(lines), (message, lines)


@rubric_category("End to end")
def test_makefile_prints_zeros_when_the_driver_cannot_start(tmp_path):
    shutil.copy(built_autograder() / "autograde-Makefile", tmp_path / "Makefile")
    (tmp_path / "autograde.tar").write_bytes(b"broken")
    process = autolab_make([f"PYTHON={sys.executable}"], cwd=tmp_path, timeout=60)
    assert json.loads(process.stdout.splitlines()[-1]) == {"scores": rubric.zero_scores()}


@rubric_category("End to end")
def test_autograde_tar_ships_the_shared_handin_format(tmp_path):
    """The extraction, the rubric and the handin rules they share import from the archive alone,
    before (and without) anything outside the standard library."""
    with tarfile.open(built_autograder() / "autograde.tar") as tar:
        tar.extractall(tmp_path, filter="data")
    files = import_without_site_packages(tmp_path / "autograde", (
        "hw4lib.handin_format", "autograder.rubric", "autograder.safe_tar"))
    assert Path(files["hw4lib.handin_format"]).read_bytes() == (
        REPO_ROOT / "hw4lib/handin_format.py").read_bytes(), (
        f"expected the archive to ship hw4lib/handin_format.py unchanged, got a different "
        f"{files['hw4lib.handin_format']}")


@pytest.mark.slow
@rubric_category("End to end")
def test_build_is_reproducible_and_keeps_the_seed_out(tmp_path):
    from autograder import hidden_data

    infos = [build_autograder(tmp_path / name) for name in ("first", "second")]
    first, second = (tmp_path / "first/autograde.tar", tmp_path / "second/autograde.tar")
    assert infos[0] == infos[1] and first.read_bytes() == second.read_bytes()
    with tarfile.open(first) as tar:
        names = tar.getnames()
        shipped = b"".join(tar.extractfile(m).read() for m in tar.getmembers() if m.isfile())
    assert str(hidden_data.HIDDEN_SEED).encode() not in shipped
    assert not [name for name in names if name.endswith(("hidden_data.py", "README.md"))
                or name.startswith("autograde/mytorch")]
    for needed in ("autograde/autograder/grade.py", "autograde/autograder/worker.py",
                   "autograde/hw4lib/numeric_truths.py",
                   "autograde/hw4lib/data/tokenizer_jsons/tokenizer_char.json",
                   "autograde/autograder/hidden_tests/mytorch_hidden.py",
                   "autograde/build_info.json"):
        assert needed in names, needed
    lines = read_hidden_lines(first)
    assert handin_format.transcripts_sha256(lines) == infos[0]["hidden_set_sha256"]
    assert sum(map(len, lines)) == infos[0]["hidden_chars"] >= TEST_HIDDEN_CHARS
    assert infos[0]["lm_thresholds"] == {"full_marks_ppl": TEST_FULL_MARKS_PPL,
                                         "zero_marks_ppl": TEST_ZERO_MARKS_PPL}
    assert not set(lines) & hidden_data.public_transcripts(infos[0]["public_seed"])
    # The public test split ships as the very files `make data` writes for it
    from datagen import build_data

    build_data.build(tmp_path / "data", seed=infos[0]["public_seed"])
    with tarfile.open(first) as tar:
        shipped = {Path(m.name).name: tar.extractfile(m).read() for m in tar.getmembers()
                   if m.name.startswith(PUBLIC_PARTITION_MEMBER + "/")}
    made = {path.name: path.read_bytes() for path in (tmp_path / "data/test").glob("*.npy")}
    assert shipped == made, f"{len(shipped)} files shipped, {len(made)} written by make data"


if __name__ == "__main__":
    run_module(__name__)
