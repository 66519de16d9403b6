# hw4p1: instructor-only
"""The plain-tar copy on small crafted archives (``autograder.judging.intake.plain_tar``): a
member cut short in its header or its data, an archive that ends without its zero blocks,
compressed data that cannot be read, every byte of a header in its checksum, the zip end record
found within the last 64 KiB + 22 bytes and its zip64 record read, zip entries counted in tar
blocks as they are copied, a zip entry that fails its CRC, a damaged zip directory.

    .venv/bin/python -m pytest -q tests/grader/test_plain_tar_streams.py

Truths written from the formats, not from the code: tar's header checksum (the sum of the 512
bytes with the checksum field read as 8 spaces), a tar member's blocks (a header and its data in
512-byte blocks), the zip end records' layouts (APPNOTE 4.3.14 to 4.3.16).
"""
import bz2
import gzip
import lzma
import random
import struct
import tarfile
import zipfile
from pathlib import Path

import pytest

from autograder.judging.intake import plain_tar
from autograder.judging.intake.plain_tar import HandinError

BLOCK = 512
END_BLOCKS = bytes(2 * BLOCK)


def member(name: str, data: bytes) -> bytes:
    """A ustar member: its header and its data padded to whole blocks."""
    info = tarfile.TarInfo(name)
    info.size = len(data)
    return info.tobuf(format=tarfile.USTAR_FORMAT) + data + bytes(-len(data) % BLOCK)


def normalized(tmp_path: Path, data: bytes, name: str = "handin.tar") -> tuple[list[str], dict]:
    """(notes, {name: data} of the plain tar) of normalizing ``data``."""
    source = tmp_path / name
    source.write_bytes(data)
    notes: list[str] = []
    plain_tar.normalize(source, tmp_path / "plain.tar", notes)
    with tarfile.open(tmp_path / "plain.tar") as copy:
        return notes, {info.name: copy.extractfile(info).read() for info in copy.getmembers()}


def stopped(members: int, problem: str) -> list[str]:
    return [f"reading stopped after {members} members at {problem}; the rest is ignored"]


# ------------------------------------------------------------------------------------------------
# Where a tar ends
# ------------------------------------------------------------------------------------------------

FIRST = member("handin/a.py", b"x = 1\n")
SECOND = member("handin/b.py", b"y" * 700)  # a header and two data blocks


@pytest.mark.parametrize("tail, notes", [
    (SECOND + END_BLOCKS, []),
    (SECOND, []),                                              # no zero blocks: it just ends
    (SECOND[:100], stopped(1, "a member cut short")),          # inside a header
    (SECOND[:BLOCK], stopped(1, "a member cut short")),        # a header, no data at all
    (SECOND[:2 * BLOCK], stopped(1, "a member cut short")),    # one data block of two
    (SECOND[:2 * BLOCK + 1], stopped(1, "a member cut short")),
])
def test_a_member_cut_short_is_dropped_and_those_before_it_kept(tmp_path, tail, notes):
    found, files = normalized(tmp_path, FIRST + tail)
    assert found == notes
    whole = tail.startswith(SECOND)
    assert files == ({"handin/a.py": b"x = 1\n", "handin/b.py": b"y" * 700} if whole
                     else {"handin/a.py": b"x = 1\n"})


def test_the_first_member_cut_short_leaves_an_empty_archive(tmp_path):
    assert normalized(tmp_path, SECOND[:BLOCK]) == (stopped(0, "a member cut short"), {})


def test_a_damaged_header_stops_the_copy_there(tmp_path):
    damaged = bytearray(SECOND[:BLOCK])
    damaged[0] ^= 0x01
    found, files = normalized(tmp_path, FIRST + bytes(damaged) + SECOND + END_BLOCKS)
    assert found == stopped(1, "a damaged header") and list(files) == ["handin/a.py"]


def test_a_header_with_an_unreadable_size_stops_the_copy_there(tmp_path):
    unreadable = bytearray(SECOND[:BLOCK])
    unreadable[124:136] = b"0000000009x\0"
    found, files = normalized(tmp_path, FIRST + with_checksum(unreadable) + SECOND + END_BLOCKS)
    assert found == stopped(1, "a header with an unreadable size")
    assert list(files) == ["handin/a.py"]


@pytest.mark.parametrize("records, notes", [
    (8, []), (9, stopped(0, "more than 8 name records in a row"))])
def test_at_most_8_name_records_open_an_archive(tmp_path, records, notes):
    pax = tarfile.TarInfo("pax")
    pax.type = tarfile.XHDTYPE
    found, files = normalized(tmp_path, pax.tobuf(format=tarfile.USTAR_FORMAT) * records + FIRST
                              + END_BLOCKS)
    assert found == notes and list(files) == ([] if notes else ["handin/a.py"])


@pytest.mark.parametrize("opener, suffix", [(gzip.compress, "gz"), (bz2.compress, "bz2"),
                                            (lzma.compress, "xz")])
def test_each_compression_is_recognised_by_its_magic_bytes(tmp_path, opener, suffix):
    found, files = normalized(tmp_path, opener(FIRST + END_BLOCKS), f"handin.{suffix}")
    assert found == [] and files == {"handin/a.py": b"x = 1\n"}


def test_compressed_data_that_cannot_be_read_stops_the_copy_there(tmp_path):
    noise = member("handin/noise.bin", random.Random(0).randbytes(40_000))  # does not compress
    packed = bytearray(gzip.compress(FIRST + noise + SECOND + END_BLOCKS))
    found, files = normalized(tmp_path, bytes(packed[:len(packed) // 2]), "handin.tar.gz")
    assert found == stopped(1, "compressed data that cannot be read (EOFError)")
    assert list(files) == ["handin/a.py"]
    packed[12:20] = b"\xff" * 8  # the deflate stream's first bytes: unreadable from the start
    with pytest.raises(HandinError, match=r"not a tar archive \(compressed data that cannot be "
                                          r"read \(\w+\)\)"):
        normalized(tmp_path, bytes(packed), "handin.tar.gz")


# ------------------------------------------------------------------------------------------------
# The header checksum: every byte counts
# ------------------------------------------------------------------------------------------------

def with_checksum(block: bytearray, signed: bool = False) -> bytes:
    """``block`` with its checksum written as tar does: the sum of its 512 bytes with the
    checksum field read as 8 spaces (bytes above 127 negative when ``signed``)."""
    block[148:156] = b" " * 8
    total = sum(byte - 256 if signed and byte > 127 else byte for byte in block)
    block[148:156] = f"{total:06o}\0 ".encode()
    return bytes(block)


def full_header() -> bytearray:
    """A ustar header whose bytes next to the checksum field are not zero (an mtime of 12 digits
    to byte 147, the type flag at byte 156) and whose checksum needs all 6 octal digits (a name
    and prefix of 'z's: their sum alone is over 0o100000)."""
    block = bytearray(tarfile.TarInfo("handin/a.py").tobuf(format=tarfile.USTAR_FORMAT))
    block[0:100], block[345:500] = b"z" * 100, b"z" * 155
    block[136:148] = b"123456701234"
    return block


def test_each_byte_of_a_header_is_in_its_checksum():
    header = with_checksum(full_header())
    assert header[148] != ord("0") and plain_tar._checksum_ok(header)
    for at in (0, 147, 156, 157, 511):  # each side of the checksum field, and both ends
        block = bytearray(header)
        block[at] ^= 0x01
        assert not plain_tar._checksum_ok(bytes(block)), at


def test_a_checksum_of_8_digits_without_a_terminator_is_read():
    block = bytearray(with_checksum(full_header()))
    block[148:156] = f"{int(bytes(block[148:154]), 8):08o}".encode()
    assert plain_tar._checksum_ok(bytes(block))
    block[155] = ord("7")  # now another number
    assert not plain_tar._checksum_ok(bytes(block))


@pytest.mark.parametrize("byte", [127, 128, 0xE9, 255])
def test_a_checksum_summed_signed_counts_the_bytes_above_127_negative(byte):
    block = bytearray(tarfile.TarInfo("handin/a.py").tobuf(format=tarfile.USTAR_FORMAT))
    block[0] = byte
    for signed in (True, False):
        header = bytearray(with_checksum(bytearray(block), signed=signed))
        assert plain_tar._checksum_ok(bytes(header)), signed
        header[1] ^= 0x01
        assert not plain_tar._checksum_ok(bytes(header)), signed


# ------------------------------------------------------------------------------------------------
# The zip end records
# ------------------------------------------------------------------------------------------------

def zip_end(entries: int, directory: int, comment: int = 0) -> bytes:
    """The end of central directory record (APPNOTE 4.3.16), 1 entry on this disk."""
    return struct.pack("<4s4H2LH", b"PK\x05\x06", 0, 0, 1, entries, directory, 0, comment)


def zip64_end(entries: int, directory: int) -> bytes:
    """The zip64 end of central directory record (4.3.14), 56 bytes, 1 entry on this disk."""
    return struct.pack("<4sQ2H2L4Q", b"PK\x06\x06", 44, 45, 45, 0, 0, 1, entries, directory, 0)


def zip64_locator(offset: int, signature: bytes = b"PK\x06\x07") -> bytes:
    """The zip64 end of central directory locator (4.3.15), 20 bytes."""
    return struct.pack("<4sLQL", signature, 0, offset, 1)


def directory_of(tmp_path: Path, data: bytes) -> tuple[int, int]:
    (tmp_path / "handin.zip").write_bytes(data)
    return plain_tar.zip_directory(tmp_path / "handin.zip")


def test_the_end_record_is_found_within_the_last_64_kib_and_22_bytes(tmp_path):
    # the record at the window's first byte, then one byte before it (a comment of 65,535 bytes
    # is the most a record can be followed by)
    assert directory_of(tmp_path, zip_end(7, 99) + bytes(0xFFFF)) == (7, 99)
    assert directory_of(tmp_path, zip_end(7, 99) + bytes(0xFFFF + 1)) == (0, 0)
    assert directory_of(tmp_path, zip_end(7, 99)) == (7, 99)          # the whole file
    assert directory_of(tmp_path, zip_end(7, 99)[:-1]) == (0, 0)      # a record cut short
    assert directory_of(tmp_path, b"PK" + zip_end(7, 99)[:-1]) == (0, 0)
    assert directory_of(tmp_path, b"no record here") == (0, 0)


def test_the_zip64_record_declares_more_than_the_end_record_can(tmp_path):
    big, small = zip64_end(70_000, 5 * 2**20), zip64_end(2, 10)
    # zip64 record at 0, its locator, the end record: the larger of each count is read
    assert directory_of(tmp_path, big + zip64_locator(0) + zip_end(3, 30)) == (70_000, 5 * 2**20)
    assert directory_of(tmp_path, small + zip64_locator(0) + zip_end(3, 30)) == (3, 30)
    # the locator at the file's start: the end record right after it, the zip64 record last
    located = zip64_locator(42) + zip_end(3, 30) + big
    assert directory_of(tmp_path, located) == (70_000, 5 * 2**20)
    # a locator pointing at or past the end, a record cut short, either signature wrong: the end
    # record alone
    for data in (zip64_locator(62) + zip_end(3, 30) + big[:20],
                 zip64_locator(98) + zip_end(3, 30) + big,
                 zip64_locator(42) + zip_end(3, 30) + big[:-1],
                 zip64_locator(42, b"PK\x06\x08") + zip_end(3, 30) + big,
                 zip64_locator(42) + zip_end(3, 30) + b"PK\x06\x07" + big[4:]):
        assert directory_of(tmp_path, data) == (3, 30)


# ------------------------------------------------------------------------------------------------
# Zip entries as they are copied
# ------------------------------------------------------------------------------------------------

def zipped(tmp_path: Path, entries: dict[str, bytes]) -> Path:
    source = tmp_path / "handin.tar"
    with zipfile.ZipFile(source, "w") as archive:
        for name, data in entries.items():
            archive.writestr(name, data)
    return source


ENTRIES = {"handin/a.py": b"a" * 1000, "handin/b.py": b"b" * 513, "handin/c.py": b"c" * 512}


@pytest.mark.parametrize("limit, kept", [
    # an entry fits when the tar so far, its header and its declared size do: a at 512 + 1000;
    # b at 1536 (a's header and padded data) + 512 + 513; c at 1536 + 1536 + 512 + 512
    (4096, 3), (4095, 2), (2561, 2), (2560, 1), (1512, 1), (1511, 0)])
def test_zip_entries_count_their_tar_blocks_as_they_are_copied(tmp_path, monkeypatch, limit,
                                                               kept):
    """MAX_TAR_BYTES is set small (its own value is tested at 200 MiB by
    test_plain_tar_limits.py): each entry copied adds its header and its padded data."""
    monkeypatch.setattr(plain_tar, "MAX_TAR_BYTES", limit)
    notes: list[str] = []
    plain_tar.normalize(zipped(tmp_path, ENTRIES), tmp_path / "plain.tar", notes)
    with tarfile.open(tmp_path / "plain.tar") as copy:
        assert copy.getnames() == list(ENTRIES)[:kept]
    assert (notes == []) is (kept == 3)
    if kept < 3:
        assert notes[0].startswith(f"reading stopped after {kept} members at members adding up")


def test_a_zip_entry_that_fails_its_crc_ends_the_copy_there(tmp_path):
    source = zipped(tmp_path, ENTRIES)
    data = bytearray(source.read_bytes())
    at = data.find(b"b" * 513)
    data[at] = ord("x")  # b.py's data no longer matches its CRC-32
    source.write_bytes(bytes(data))
    notes: list[str] = []
    plain_tar.normalize(source, tmp_path / "plain.tar", notes)
    assert notes == ["'handin/b.py': could not be read (BadZipFile); the rest is ignored"]
    assert b"c" * 512 not in (tmp_path / "plain.tar").read_bytes()  # nothing after b.py
    with tarfile.open(tmp_path / "plain.tar") as copy:
        assert copy.getnames()[0] == "handin/a.py" and "handin/c.py" not in copy.getnames()


def test_a_damaged_zip_directory_is_refused(tmp_path):
    source = zipped(tmp_path, ENTRIES)
    data = bytearray(source.read_bytes())
    at = data.find(b"PK\x01\x02")
    data[at:at + 4] = b"PK\x09\x09"  # the first directory record's signature
    source.write_bytes(bytes(data))
    with pytest.raises(HandinError, match=r"handin.tar is a damaged zip archive \(BadZipFile\)"):
        plain_tar.normalize(source, tmp_path / "plain.tar", [])


def test_a_member_past_the_limit_is_named_with_its_ustar_prefix(tmp_path):
    prefix, name = "handin/" + "p" * 148, "n" * 97 + ".py"  # 155 and 100 characters: full fields
    info = tarfile.TarInfo(f"{prefix}/{name}")
    info.size = 200 * 2**20
    header = info.tobuf(format=tarfile.USTAR_FORMAT)
    assert header[345:500] == prefix.encode() and header[0:100] == name.encode()
    found, _ = normalized(tmp_path, header)
    assert found == stopped(0, f"members adding up to more than 200 MiB "
                               f"({plain_tar.quoted(f'{prefix}/{name}')}, 200 MiB, and what "
                               f"follows it are not graded)")


def over_limit(name: str, prefix: bytes = b"", magic: bytes = b"ustar\x0000",
               padding: bytes = bytes(12)) -> bytes:
    """A header of a 200 MiB member (past the limit): ``name`` in its name field, ``prefix`` in
    its prefix field (345-500), ``magic`` and version at 257-265, ``padding`` at 500-512."""
    info = tarfile.TarInfo(name)
    info.size = 200 * 2**20
    block = bytearray(info.tobuf(format=tarfile.USTAR_FORMAT))
    block[257:265], block[345:345 + len(prefix)], block[500:512] = magic, prefix, padding
    return with_checksum(block)


@pytest.mark.parametrize("header, shown", [
    (over_limit("a.pt"), "a.pt"),                                  # no prefix: no slash
    (over_limit("a.pt", b"handin"), "handin/a.pt"),
    (over_limit("a.pt", b"handin", magic=b"ustar  \0"), "a.pt"),   # GNU: no prefix field there
    (over_limit("a.pt", b"handin", magic=b"ustas\x0000"), "a.pt"),
    (over_limit("a.pt", b"p" * 155, padding=b"X" * 12), f"{'p' * 155}/a.pt"),  # the pad is no name
    (over_limit("a.pt", b"hand\0in\0x"), "hand/a.pt"),            # up to the first NUL
])
def test_a_member_past_the_limit_is_named_from_its_name_and_ustar_prefix_fields(tmp_path,
                                                                                   header, shown):
    found, _ = normalized(tmp_path, header)
    assert found == stopped(0, f"members adding up to more than 200 MiB "
                               f"({plain_tar.quoted(shown)}, 200 MiB, and what follows it are "
                               f"not graded)")
