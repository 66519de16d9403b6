# hw4p1: instructor-only
"""The handin's limits at exactly each value and one past it (``autograder.judging.intake.
safe_tar``), on archives built in memory: the archive's bytes (200 MiB), its members (500), each
file's bytes (1 MB a mytorch source, 10 MB a run file), mytorch/ in all (4 MB), the folders below
mytorch/ (8); and which member is graded when a path comes twice (the last copy, its bytes counted
once).

    .venv/bin/python -m pytest -q tests/grader/test_handin_limits.py
"""
import io
import os
import tarfile

import pytest

from autograder.judging.intake import safe_tar
from autograder.judging.intake.plain_tar import HandinError

MIB = 2**20


def member(name: str, size: int = 0, kind: bytes = tarfile.REGTYPE) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.size, info.type = size, kind
    if kind == tarfile.GNUTYPE_SPARSE:
        info.sparse = [(0, size)]
    return info


def selected(*files: tuple[str, int]) -> tuple[list[str], list[str]]:
    """(accepted paths, notes) of an in-memory archive of ``files`` ((name, bytes of zeros))."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as archive:
        for name, size in files:
            archive.addfile(member(name, size), io.BytesIO(bytes(size)))
    buffer.seek(0)
    notes: list[str] = []
    with tarfile.open(fileobj=buffer, mode="r:") as archive:
        accepted = safe_tar._select_members(archive, notes)
    return list(accepted), notes


@pytest.mark.parametrize("size", [200 * MIB, 200 * MIB + 1])
def test_an_archive_of_any_size_is_opened(tmp_path, size):
    """The file's own size refuses nothing: reading stops where its members pass 200 MiB
    (test_plain_tar_limits, test_oversized_handin)."""
    path = tmp_path / "handin.tar"
    with open(path, "wb") as sparse:
        sparse.truncate(size)
    safe_tar._check_archive_file(path)


def test_a_missing_or_linked_archive_is_refused(tmp_path):
    with pytest.raises(HandinError, match="no handin.tar was handed in"):
        safe_tar._check_archive_file(tmp_path / "handin.tar")
    (tmp_path / "real.tar").write_bytes(b"")
    os.symlink(tmp_path / "real.tar", tmp_path / "handin.tar")
    with pytest.raises(HandinError, match="handin.tar is not a regular file"):
        safe_tar._check_archive_file(tmp_path / "handin.tar")


@pytest.mark.parametrize("count, kept", [(499, 499), (500, 500), (501, 500)])
def test_at_most_500_members_are_read(count, kept):
    accepted, notes = selected(*((f"handin/mytorch/m{i}.py", 0) for i in range(count)))
    assert len(accepted) == kept
    over = ["the archive has more than 500 members; the rest is ignored"]
    assert notes == (over if count > 500 else [])


@pytest.mark.parametrize("name, limit", [("mytorch/nn/linear.py", 1_000_000),
                                         ("test_metrics.json", 10_000_000),
                                         ("config.yaml", 10_000_000)])
def test_each_file_is_accepted_up_to_its_limit(name, limit):
    assert safe_tar._check_member(member("handin/" + name, limit)) == (name, None)
    assert safe_tar._check_member(member("handin/" + name, limit + 1)) == (
        None, f"is {limit + 1} bytes, over the {limit} byte limit for this file")


@pytest.mark.parametrize("depth, accepted", [(1, True), (8, True), (9, False)])
def test_mytorch_is_read_8_folders_deep(depth, accepted):
    name = "mytorch/" + "a/" * depth + "m.py"
    relative, problem = safe_tar._check_member(member(name))
    if accepted:
        assert (relative, problem) == (name, None)
    else:
        assert (relative, problem) == (None, "lies 9 folders deep in mytorch/, deeper than make "
                                             "handin packs (at most 8)")


def test_mytorch_adds_up_to_at_most_4_mb():
    at_limit = [(f"handin/mytorch/m{i}.py", 1_000_000) for i in range(4)]
    accepted, notes = selected(*at_limit, ("handin/config.yaml", 10))
    assert len(accepted) == 5 and notes == []
    accepted, notes = selected(*at_limit, ("handin/mytorch/last.py", 1), ("handin/config.yaml", 10))
    assert accepted == [f"mytorch/m{i}.py" for i in range(4)] + ["config.yaml"]
    assert notes == ["'handin/mytorch/last.py': mytorch/ adds up to more than 4 MB of .py files; "
                     "skipped"]


def test_a_file_that_comes_twice_is_graded_from_its_last_copy_counted_once():
    accepted, notes = selected(*((f"handin/mytorch/m{i}.py", 900_000) for i in range(4)),
                               ("handin/mytorch/m0.py", 400_000))
    assert accepted == ["mytorch/m1.py", "mytorch/m2.py", "mytorch/m3.py", "mytorch/m0.py"]
    assert notes == ["'handin/mytorch/m0.py': appears more than once in the archive; the last copy "
                     "is graded, as `tar -x` leaves it"]
    accepted, notes = selected(("handin/config.yaml", 5), ("handin/config.yaml", 10_000_001))
    assert accepted == [] and len(notes) == 2 and "over the 10000000 byte limit" in notes[1]


@pytest.mark.parametrize("info, problem", [
    (member("/etc/passwd"), "is an absolute or non-POSIX path"),
    (member("C:evil.py"), "is an absolute or non-POSIX path"),
    (member("a\\b.py"), "is an absolute or non-POSIX path"),
    (member("handin/../x.py"), "climbs out of the archive with '..'"),
    (member("handin/mytorch", kind=tarfile.DIRTYPE), None),
    (member("handin/config.yaml", kind=tarfile.FIFOTYPE), "is a device or a fifo"),
    (member("handin/config.yaml", kind=tarfile.CHRTYPE), "is a device or a fifo"),
    (member("handin/config.yaml", kind=tarfile.BLKTYPE), "is a device or a fifo"),
    (member("handin/config.yaml", kind=tarfile.GNUTYPE_SPARSE), "is not a regular file"),
    (member("handin/notes.txt"), "is not a file the grader uses"),
    (member("handin/config.yaml", kind=tarfile.SYMTYPE), "is a symbolic link (to '')"),
    (member("handin/config.yaml", kind=tarfile.LNKTYPE), "is a hard link (to '')"),
])
def test_a_member_that_is_no_plain_expected_file_is_refused(info, problem):
    assert safe_tar._check_member(info) == (None, problem)


@pytest.mark.parametrize("name, relative", [
    ("handin/config.yaml", "config.yaml"), ("./handin/./config.yaml", "config.yaml"),
    ("run/handin/config.yaml", "config.yaml"), ("config.yaml", "config.yaml"),
    ("mytorch/handin/x.py", "mytorch/handin/x.py"), ("run/handin", "run/handin"),
])
def test_the_path_graded_drops_handin_and_one_folder_above_it(name, relative):
    assert safe_tar._relative_path(name) == relative


def test_a_refused_member_does_not_stop_the_members_after_it():
    accepted, notes = selected(("handin/notes.txt", 1), ("handin/config.yaml", 1))
    assert accepted == ["config.yaml"]
    assert notes == ["'handin/notes.txt': is not a file the grader uses; skipped"]


def test_the_accepted_members_are_extracted_as_regular_files(tmp_path):
    tar = tmp_path / "handin.tar"
    with tarfile.open(tar, "w") as archive:
        for name, data in (("handin/config.yaml", b"a: 1\n"), ("handin/mytorch/nn/x.py", b"y\n"),
                           ("handin/notes.txt", b"")):
            archive.addfile(member(name, len(data)), io.BytesIO(data))
    dest = tmp_path / "out" / "handin"
    result = safe_tar.extract_handin(tar, dest)
    assert {name: path.read_bytes() for name, path in result.files.items()} == {
        "config.yaml": b"a: 1\n", "mytorch/nn/x.py": b"y\n"}
    assert result.files["config.yaml"] == (dest / "config.yaml").resolve()
    assert result.notes == ["'handin/notes.txt': is not a file the grader uses; skipped"]
    assert sorted(path.name for path in (tmp_path / "out").iterdir()) == ["handin"]
    assert {path.stat().st_mode & 0o777 for path in result.files.values()} == {0o644}


def test_a_zstd_archive_is_refused_by_name(tmp_path):
    tar = tmp_path / "handin.tar"
    tar.write_bytes(b"\x28\xb5\x2f\xfd" + bytes(100))
    with pytest.raises(HandinError, match="handin.tar is compressed with zstd"):
        safe_tar.extract_handin(tar, tmp_path / "out")
