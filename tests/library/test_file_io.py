# hw4p1: instructor-only
"""hw4lib/file_io.py: the digest of several files against hashlib's of their bytes joined, read
in blocks of at most 1 MiB; the JSON text every file is written as, to the character; writes
that leave no temporary file; untrusted reads that give None for what cannot be read.

    .venv/bin/python -m pytest -q tests/library/test_file_io.py
"""
import hashlib
import io

from hw4lib import file_io
from hw4lib.file_io import (atomic_write_bytes, file_sha256, json_text, read_json,
                            read_untrusted_json, write_json)

MIB = 2 ** 20


def test_the_digest_of_files_is_that_of_their_bytes_one_after_the_other(tmp_path):
    (tmp_path / "a").write_bytes(b"first\n")
    (tmp_path / "b").write_bytes(b"second")
    assert file_sha256(tmp_path / "a", tmp_path / "b") == hashlib.sha256(b"first\nsecond").hexdigest()
    assert file_sha256() == hashlib.sha256().hexdigest()


def test_a_large_file_is_read_a_mebibyte_at_a_time(tmp_path, monkeypatch):
    """3 MiB and a byte: four reads of at most 1 MiB and the empty one that ends the loop."""
    data = bytes(range(256)) * (3 * MIB // 256) + b"!"
    (tmp_path / "big").write_bytes(data)
    reads = []

    class Recorded(io.FileIO):
        def read(self, size=-1):
            reads.append(size)
            return super().read(size)

    monkeypatch.setattr(file_io, "open", lambda path, mode: Recorded(path, "r"), raising=False)
    assert file_sha256(tmp_path / "big") == hashlib.sha256(data).hexdigest()
    assert reads == [MIB] * 5


def test_json_is_written_indented_by_two_with_a_final_newline(tmp_path):
    text = '{\n  "a": [\n    1,\n    "x"\n  ]\n}\n'
    assert json_text({"a": [1, "x"]}) == text
    write_json(tmp_path / "f.json", {"a": [1, "x"]})
    assert (tmp_path / "f.json").read_text() == text
    assert read_json(tmp_path / "f.json") == {"a": [1, "x"]}
    assert sorted(path.name for path in tmp_path.iterdir()) == ["f.json"]


def test_an_atomic_write_replaces_the_file_through_a_temporary_name(tmp_path):
    target = tmp_path / "out.bin"
    target.write_bytes(b"old")
    written = []

    def write(tmp):
        written.append(tmp.name)
        assert target.read_bytes() == b"old", "the old file stays until the new one is whole"
        tmp.write_bytes(b"new")

    atomic_write_bytes(target, write)
    assert written == ["out.bin.tmp"] and target.read_bytes() == b"new"
    assert not (tmp_path / "out.bin.tmp").exists()


def test_an_untrusted_file_that_cannot_be_read_is_none(tmp_path):
    (tmp_path / "bad.json").write_text("{not json")
    (tmp_path / "deep.json").write_text("[" * 100_000 + "]" * 100_000)
    (tmp_path / "good.json").write_text('{"k": 1}')
    assert read_untrusted_json(tmp_path / "missing.json") is None
    assert read_untrusted_json(tmp_path / "bad.json") is None
    assert read_untrusted_json(tmp_path / "deep.json") is None
    assert read_untrusted_json(tmp_path) is None
    assert read_untrusted_json(tmp_path / "good.json") == {"k": 1}
