# hw4p1: instructor-only
"""The plain-tar copy's limits at exactly each value and one past it
(``autograder.judging.intake.plain_tar``), on archives of headers only: a name record of 64 KiB,
8 name records in a row, members adding up to 200 MiB (a declared size decides, before any data
is read), a zip's directory of 500 entries and 4 MiB, 500 zip entries copied, a name quoted whole
up to 100 characters.

    .venv/bin/python -m pytest -q tests/grader/test_plain_tar_limits.py
"""
import struct
import tarfile
import zipfile

import pytest

from autograder.judging.intake import plain_tar
from autograder.judging.intake.plain_tar import HandinError

BLOCK = 512
MIB = 2**20


def header(name: str, size: int = 0, kind: bytes = tarfile.REGTYPE) -> bytes:
    """One member's header (a GNU long-name record first when ``name`` needs one), no data."""
    info = tarfile.TarInfo(name)
    info.size, info.type = size, kind
    return info.tobuf(format=tarfile.GNU_FORMAT)


def copied(tmp_path, data: bytes) -> list[str]:
    """The notes of normalizing ``data`` (written as handin.tar) into a plain tar."""
    source = tmp_path / "handin.tar"
    source.write_bytes(data)
    notes: list[str] = []
    plain_tar.normalize(source, tmp_path / "plain.tar", notes)
    return notes


def stopped(problem: str, members: int = 0) -> list[str]:
    return [f"reading stopped after {members} members at {problem}; the rest is ignored"]


@pytest.mark.parametrize("chars, refused", [(64 * 1024 - 1, False), (64 * 1024, True)])
def test_a_name_record_of_at_most_64_kib_is_copied(tmp_path, chars, refused):
    """A GNU long name of ``chars`` characters is a record of chars + 1 bytes (its NUL)."""
    notes = copied(tmp_path, header("a" * chars) + bytes(2 * BLOCK))
    assert notes == (stopped(f"a {chars + 1:,}-byte name record (at most 65,536)") if refused
                     else [])


@pytest.mark.parametrize("records, refused", [(8, False), (9, True)])
def test_at_most_8_name_records_in_a_row_are_copied(tmp_path, records, refused):
    pax = header("pax", kind=tarfile.XHDTYPE)
    data = header("first.py") + pax * records + header("second.py") + bytes(2 * BLOCK)
    assert copied(tmp_path, data) == (stopped("more than 8 name records in a row", 1) if refused
                                      else [])


@pytest.mark.parametrize("size, problem", [
    (200 * MIB - BLOCK, "a member cut short"),  # within the limit: its data is read, and missing
    (200 * MIB - BLOCK + 1, "members adding up to more than 200 MiB ('big.pt', 200 MiB, and "
                            "what follows it are not graded)"),
])
def test_members_add_up_to_at_most_200_mib(tmp_path, size, problem):
    assert copied(tmp_path, header("big.pt", size)) == stopped(problem)


@pytest.mark.parametrize("size, shown", [
    (2**30, "1024"),   # octal 10000000000: a first digit '1' (0x31) is no base-256 mark
    (8**11 - 1, "8192"),  # octal 77777777777, the largest an octal field holds
    (256**10, f"{2**60}"),  # base-256 (tarfile past 8 GiB): its first byte after the mark is 1
])
def test_a_size_past_the_limit_is_read_whole_in_the_note(tmp_path, size, shown):
    """A header's size read as the format says: octal up to 8 GiB - 1, GNU base-256 beyond."""
    assert copied(tmp_path, header("big.pt", size)) == stopped(
        f"members adding up to more than 200 MiB ('big.pt', {shown} MiB, and what follows it "
        f"are not graded)")


def test_a_file_without_one_tar_header_is_refused(tmp_path):
    with pytest.raises(HandinError, match=r"handin.tar is not a tar archive \(a damaged header\)"):
        copied(tmp_path, b"x" * BLOCK)


def zip_end(entries: int, directory_bytes: int) -> bytes:
    """An empty zip's end record declaring ``entries`` in ``directory_bytes``."""
    return struct.pack("<4s4H2LH", b"PK\x05\x06", 0, 0, entries, entries, directory_bytes, 0, 0)


@pytest.mark.parametrize("entries, directory_bytes, refused", [
    (500, 4 * MIB, False), (501, 0, True), (0, 4 * MIB + 1, True)])
def test_a_zip_directory_of_at_most_500_entries_and_4_mib_is_read(tmp_path, entries,
                                                                  directory_bytes, refused):
    """Past a limit the directory is refused as declared; within them zipfile reads it (and
    finds none here)."""
    words = ("is a zip archive whose directory declares" if refused
             else "is a damaged zip archive")
    with pytest.raises(HandinError, match=words):
        copied(tmp_path, zip_end(entries, directory_bytes))


@pytest.mark.parametrize("count, notes", [
    (500, []), (501, ["the archive has more than 500 members; the rest is ignored"])])
def test_at_most_500_zip_entries_are_copied(tmp_path, count, notes):
    """The end record says 500 entries either way (zipfile reads the directory by its bytes)."""
    source = tmp_path / "handin.tar"
    with zipfile.ZipFile(source, "w") as archive:
        for index in range(count):
            archive.writestr(f"handin/mytorch/m{index}.py", "")
    data = bytearray(source.read_bytes())
    at = data.rfind(b"PK\x05\x06")
    data[at + 8:at + 12] = struct.pack("<2H", 500, 500)
    source.write_bytes(bytes(data))
    found: list[str] = []
    plain_tar.normalize(source, tmp_path / "plain.tar", found)
    assert found == notes
    with tarfile.open(tmp_path / "plain.tar") as copy:
        assert len(copy.getnames()) == 500


@pytest.mark.parametrize("name, shown", [
    ("a" * 100, repr("a" * 100)),
    ("a" * 50 + "b" * 51, f"{'a' * 50!r}...{'b' * 25!r} (101 characters)"),
])
def test_a_name_is_quoted_whole_up_to_100_characters(name, shown):
    assert plain_tar.quoted(name) == shown


def test_a_header_checksum_is_read_as_tar_writes_it_unsigned_or_signed():
    block = bytearray(header("handin/config.yaml", 7))
    assert plain_tar._checksum_ok(bytes(block))
    block[0] = 0xE9  # a byte above 127: an old tar summed it as a signed char, 0xE9 - 256
    unsigned = sum(block[:148]) + 8 * 32 + sum(block[156:])
    signed = unsigned - 256
    for stored, ok in ((unsigned, True), (signed, True), (unsigned + 1, False),
                       (signed - 1, False)):
        block[148:156] = f"{stored:06o}\0 ".encode()
        assert plain_tar._checksum_ok(bytes(block)) is ok
    block[148:156] = b"garbage!"
    assert not plain_tar._checksum_ok(bytes(block))


@pytest.mark.parametrize("field, size", [
    (b"00000000017\0", 0o17),                                  # octal
    (b"           \0", 0),                                     # blank: no data
    (b"\x80" + (300 * MIB).to_bytes(11, "big"), 300 * MIB),    # GNU base-256
    (b"\x80\x01" + bytes(10), 256**10),                          # every byte after the mark
    (b"10000000000\0", 2**30),                                 # octal, a first digit '1'
    (b"\xff" + bytes(11), None),                               # a negative base-256 number
    (b"0000000009x\0", None),
])
def test_a_member_size_is_read_in_octal_or_base_256(field, size):
    block = bytearray(BLOCK)
    block[124:136] = field
    assert plain_tar._header_size(bytes(block)) == size


def test_a_zip_entry_that_is_a_link_is_skipped(tmp_path):
    source = tmp_path / "handin.tar"
    with zipfile.ZipFile(source, "w") as archive:
        link = zipfile.ZipInfo("handin/config.yaml")
        link.external_attr = (0o120777 << 16)
        archive.writestr(link, "/etc/passwd")
        archive.writestr("handin/mytorch/a.py", "x = 1\n")
        archive.writestr("handin/mytorch/", "")
    notes: list[str] = []
    plain_tar.normalize(source, tmp_path / "plain.tar", notes)
    assert notes == ["'handin/config.yaml': is a symbolic link; skipped"]
    with tarfile.open(tmp_path / "plain.tar") as copy:
        [member] = copy.getmembers()
        assert (member.name, member.size, member.mode) == ("handin/mytorch/a.py", 6, 0o644)
        assert copy.extractfile(member).read() == b"x = 1\n"


@pytest.mark.parametrize("size, note", [
    (200 * MIB - BLOCK, "'handin/model_state_dict.pt': could not be read (OSError); the rest is "
                        "ignored"),   # within the limit: read, and its data is not there
    (200 * MIB - BLOCK + 1, "reading stopped after 0 members at members adding up to more than "
                            "200 MiB ('handin/model_state_dict.pt', 200 MiB, and what follows it "
                            "are not graded); the rest is ignored"),
])
def test_zip_entries_add_up_to_at_most_200_mib(tmp_path, size, note):
    """An entry whose directory record declares ``size`` bytes (its data: 3 bytes)."""
    source = tmp_path / "handin.tar"
    with zipfile.ZipFile(source, "w") as archive:
        archive.writestr("handin/model_state_dict.pt", "abc")
    data = bytearray(source.read_bytes())
    record = data.rfind(b"PK\x01\x02")
    data[record + 24:record + 28] = struct.pack("<L", size)
    source.write_bytes(bytes(data))
    notes: list[str] = []
    plain_tar.normalize(source, tmp_path / "plain.tar", notes)
    assert notes == [note]
