# hw4p1: instructor-only
"""Tests of the handin extraction (autograder/judging/intake/safe_tar.py, plain_tar.py) against its
threat model: archives holding every kind of hostile member, unusable archives, deep paths, long
names and zip directory bombs; and every ordinary way a student may re-pack the handin, read and
graded alike.

    .venv/bin/python -m pytest -q tests/grader/test_handin_extraction.py
"""
import gzip
import io
import json
import os
import shutil
import subprocess
import tarfile
import zipfile
import zlib
from pathlib import Path

import pytest

from autograder.judging.intake import plain_tar
from autograder.judging.isolation import file_trees, sandbox
from autograder.judging.intake.safe_tar import HandinError, extract_handin
from hw4lib import handin_format
from tests.grader.autograder_helpers import (copy_reference_mytorch, honest_scores,
                                             make_model_handin, pack_folder, regular, run_grader,
                                             tree, write_tar)
from tests.grader.attack_handins import (deep_mytorch_member, long_name_members,
                                         zip_directory_bomb)


# ------------------------------------------------------------------------------------------------
# Handin extraction
# ------------------------------------------------------------------------------------------------

def special(name: str, kind: bytes, linkname: str = "") -> tuple[tarfile.TarInfo, None]:
    """A member of another type (tarfile.SYMTYPE, LNKTYPE, CHRTYPE, BLKTYPE, FIFOTYPE)."""
    info = tarfile.TarInfo(name)
    info.type, info.linkname = kind, linkname
    return info, None


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


def test_deep_paths_long_names_and_zip_directories_are_refused_before_any_cost(tmp_path):
    from autograder.judging.scoring import feedback

    limit = handin_format.MAX_MYTORCH_DEPTH
    tar = write_tar(tmp_path / "deep.tar", [deep_mytorch_member(limit), deep_mytorch_member(1500),
                                           *long_name_members(470, 60_000)])
    result = extract_handin(tar, tmp_path / "deep")
    assert list(result.files) == ["mytorch/" + "a/" * limit + "deep.py"], list(result.files)
    assert any(f"1500 folders deep in mytorch/, deeper than make handin packs (at most {limit})"
               in note for note in result.notes), result.notes[:3]
    # every note quotes a name short; every channel shows a bounded summary of them
    assert max(len(note) for note in result.notes) < 400, max(result.notes, key=len)[:500]
    shown = feedback.summarised(result.notes)
    assert len(shown) == feedback.MAX_NOTES + 1 and "459 more notes" in shown[-1], shown[-1]
    assert len(json.dumps(shown)) < 10_000
    shown = json.dumps(feedback.summarised(["x" * 10**6] * 3))
    assert len(shown) < 3 * feedback.MAX_NOTE_CHARS + 20
    # a zip's directory is sized from its end record before zipfile reads any of it
    bomb = zip_directory_bomb(tmp_path / "handin.tar", 200_000)
    assert plain_tar.zip_directory(bomb) == (0xFFFF, 200_000 * 47)
    with pytest.raises(HandinError, match="directory declares 65,535 entries in 9,400,000 bytes"):
        extract_handin(bomb, tmp_path / "bomb")
    small = zip_directory_bomb(tmp_path / "small.tar", 3)
    assert plain_tar.zip_directory(small) == (3, 3 * 47)
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
    assert plain_tar.zip_directory(tmp_path / "z64.tar") == (5_000_000, 10**9)
    with pytest.raises(HandinError, match="declares 5,000,000 entries"):
        extract_handin(tmp_path / "z64.tar", tmp_path / "z64")


def test_tree_walks_and_removal_do_not_recurse(tmp_path):
    from autograder.judging.scoring import verdicts

    root = deep = tmp_path / "tree"
    for _ in range(1101):  # deeper than Python's recursion limit (makedirs would recurse)
        deep.mkdir()
        deep = deep / "a"
    deep = deep.parent
    (deep / "m.py").write_text("x = 1\n")
    (root / "link").symlink_to("/usr")  # never followed, never changed
    sandbox.make_readable(root)
    assert (deep / "m.py").stat().st_mode & 0o777 == 0o644 and deep.stat().st_mode & 0o777 == 0o755
    assert verdicts.student_files(root) == {"a/" * 1100 + "m.py"}
    file_trees.remove_tree(root)
    assert not root.exists() and Path("/usr").is_dir()
    file_trees.remove_tree(root)  # nothing there: nothing to do


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
@pytest.mark.long
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
@pytest.mark.long
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
