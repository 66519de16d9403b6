# hw4p1: instructor-only
"""Reading a handin's members, fast (``autograder.judging.intake.safe_tar.extract_handin``): a
clean archive leaves no note, an archive damaged after some members keeps those, the extraction
without tarfile's filters (older Pythons) writes the same regular files; and the plain copy
(``plain_tar``) is the members then exactly two zero blocks, a zip's folders skipped without
stopping, its entries cut at 500.

    .venv/bin/python -m pytest -q tests/grader/test_safe_tar_members.py
"""
import stat
import tarfile
import zipfile
from pathlib import Path

import pytest

from autograder.judging.intake import plain_tar, safe_tar

BLOCK = 512
FILES = {"handin/config.yaml": b"model: {}\n", "handin/mytorch/nn/linear.py": b"x = 1\n" * 100}


def member(name: str, data: bytes, kind: bytes = tarfile.REGTYPE) -> bytes:
    """A ustar member of mode 0o777: its header and its data padded to whole blocks."""
    info = tarfile.TarInfo(name)
    info.size, info.type, info.mode = len(data), kind, 0o777
    return info.tobuf(format=tarfile.USTAR_FORMAT) + data + bytes(-len(data) % BLOCK)


def extracted(tmp_path: Path, data: bytes) -> safe_tar.Extraction:
    (tmp_path / "handin.tar").write_bytes(data)
    return safe_tar.extract_handin(tmp_path / "handin.tar", tmp_path / "out")


def test_a_clean_archive_is_extracted_without_a_note(tmp_path):
    result = extracted(tmp_path, b"".join(member(n, d) for n, d in FILES.items()) + bytes(1024))
    assert result.notes == []
    assert {name: path.read_bytes() for name, path in result.files.items()} == {
        name.removeprefix("handin/"): data for name, data in FILES.items()}
    assert not (tmp_path / "out.plain.tar").exists()
    # written read-only for others, whatever mode the member declares (0o777 here)
    assert {stat.S_IMODE(path.stat().st_mode) for path in result.files.values()} == {0o644}


def test_an_archive_damaged_after_a_member_keeps_the_members_before(tmp_path):
    # a long name's record, then a header whose checksum holds but whose mode is not a number:
    # the plain copy keeps them (it reads sizes only), tarfile raises there
    info = tarfile.TarInfo("handin/mytorch/nn/" + "a" * 100 + ".py")
    damaged = bytearray(info.tobuf(format=tarfile.GNU_FORMAT))
    header = len(damaged) - BLOCK
    damaged[header + 100:header + 108] = b"zzzzzzz\0"
    damaged[header + 148:header + 156] = b" " * 8
    damaged[header + 148:header + 156] = f"{sum(damaged[header:]):06o}\0 ".encode()
    data = member("handin/config.yaml", b"a: 1\n") + bytes(damaged) + bytes(1024)
    result = extracted(tmp_path, data)
    assert list(result.files) == ["config.yaml"]
    assert len(result.notes) == 1
    assert result.notes[0].startswith("the archive is damaged after 1 members (")
    assert result.notes[0].endswith("); the rest is ignored")


def test_without_tarfile_s_filters_the_same_regular_files_are_written(tmp_path, monkeypatch):
    archive = b"".join(member(n, d) for n, d in FILES.items()) + bytes(1024)
    monkeypatch.delattr(tarfile, "data_filter")
    result = extracted(tmp_path, archive)
    assert result.notes == []
    for name, path in result.files.items():
        assert path.is_file() and not path.is_symlink()
        assert path.read_bytes() == FILES[f"handin/{name}"]


def test_the_plain_copy_is_the_members_then_two_zero_blocks(tmp_path):
    members = b"".join(member(n, d) for n, d in FILES.items())
    for tail in (bytes(1024), bytes(5 * BLOCK), b""):
        (tmp_path / "handin.tar").write_bytes(members + tail)
        plain_tar.normalize(tmp_path / "handin.tar", tmp_path / "plain.tar", [])
        assert (tmp_path / "plain.tar").read_bytes() == members + bytes(2 * BLOCK)


def zip_of(path: Path, names: list[str]) -> Path:
    with zipfile.ZipFile(path, "w") as archive:
        for name in names:
            archive.writestr(name, "" if name.endswith("/") else name)
    return path


def test_a_zip_folder_entry_is_skipped_and_the_entries_after_it_copied(tmp_path):
    source = zip_of(tmp_path / "handin.tar", ["handin/", "handin/mytorch/", "handin/config.yaml"])
    notes: list[str] = []
    plain_tar.normalize(source, tmp_path / "plain.tar", notes)
    with tarfile.open(tmp_path / "plain.tar") as copy:
        assert copy.getnames() == ["handin/config.yaml"] and notes == []


@pytest.mark.parametrize("count", [501, 502])
def test_zip_entries_past_500_are_never_copied(tmp_path, count):
    source = zip_of(tmp_path / "handin.tar", [f"handin/mytorch/m{i}.py" for i in range(count)])
    notes: list[str] = []
    # the end record declares 500 either way: zipfile reads the directory by its bytes
    data = bytearray(source.read_bytes())
    at = data.rfind(b"PK\x05\x06")
    data[at + 8:at + 12] = (500).to_bytes(2, "little") * 2
    source.write_bytes(bytes(data))
    plain_tar.normalize(source, tmp_path / "plain.tar", notes)
    assert notes == ["the archive has more than 500 members; the rest is ignored"]
    with tarfile.open(tmp_path / "plain.tar") as copy:
        assert len(copy.getnames()) == 500


def test_a_member_the_file_system_refuses_is_skipped_with_its_words(tmp_path):
    too_long = "handin/mytorch/" + "a" * 300 + ".py"  # a module name past the 255-byte file name
    info = tarfile.TarInfo(too_long)
    info.size = 6
    data = (info.tobuf(format=tarfile.GNU_FORMAT) + b"x = 1\n" + bytes(BLOCK - 6)
            + member("handin/config.yaml", b"a: 1\n") + bytes(1024))
    result = extracted(tmp_path, data)
    assert list(result.files) == ["config.yaml"]
    assert result.notes == [f"{plain_tar.quoted(too_long)}: could not be extracted (File name too "
                            f"long); skipped"]


def test_members_past_the_500th_are_never_selected(tmp_path):
    names = [f"handin/mytorch/m{index}.py" for index in range(502)]
    (tmp_path / "plain.tar").write_bytes(b"".join(member(name, b"") for name in names)
                                         + bytes(1024))
    notes: list[str] = []
    with tarfile.open(tmp_path / "plain.tar") as archive:
        accepted = safe_tar._select_members(archive, notes)
    assert list(accepted) == [name.removeprefix("handin/") for name in names[:500]]
    assert notes == ["the archive has more than 500 members; the rest is ignored"]
