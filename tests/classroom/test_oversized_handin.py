# hw4p1: instructor-only
"""An archive over the 200 MiB limit is graded as autograder/README.md says
(autograder/judging/intake/safe_tar.py, plain_tar.py): the members before the limit are graded in
full, the first past it is named in a note with what follows it; the file's own size decides
nothing. The limit is pinned by its value: members adding up to exactly 200 MiB are read whole, one
byte more is not. The big members are sparse files, so the tests write little to disk.

    .venv/bin/python -m pytest -q -n 0 tests/classroom/test_oversized_handin.py
"""
import tarfile
from pathlib import Path

from autograder.judging.intake.safe_tar import extract_handin

MIB = 2**20
LIMIT = 200 * MIB  # the guide's number, by value
BLOCK = 512
SMALL = {"handin/config.yaml": b"model: {}\n",
         "handin/mytorch/__init__.py": b"",
         "handin/mytorch/nn/linear.py": b"class Linear:\n    pass\n",
         "handin/model_state_dict.pt": b"weights"}


def header(name: str, size: int) -> bytes:
    info = tarfile.TarInfo(name)
    info.size = size
    return info.tobuf(format=tarfile.GNU_FORMAT)


def archive(path: Path, big_name: str, big_size: int) -> Path:
    """A tar (GNU format, as `tar` writes): the SMALL members, then ``big_name`` of
    ``big_size`` zero bytes (sparse on disk), then the end of the archive's two zero blocks."""
    with open(path, "wb") as file:
        for name, data in SMALL.items():
            file.write(header(name, len(data)) + data + bytes(-len(data) % BLOCK))
        file.write(header(big_name, big_size))
        file.truncate(file.tell() + -(-big_size // BLOCK) * BLOCK + 2 * BLOCK)
    return path


def small_members_end() -> int:
    """Where the big member's header starts: after the SMALL members, each a header and its
    data padded to blocks."""
    return sum(BLOCK + -(-len(data) // BLOCK) * BLOCK for data in SMALL.values())


def test_a_checkpoint_appended_past_the_limit_leaves_the_handin_graded(tmp_path):
    """The TA's case: the trained handin with a 205 MiB checkpoint appended last (a 205 MiB file,
    over the limit): every member before it extracted, the checkpoint named in the note."""
    path = archive(tmp_path / "handin.tar", "handin/epoch_12.pt", 205 * MIB)
    assert path.stat().st_size > LIMIT
    result = extract_handin(path, tmp_path / "out")
    assert sorted(result.files) == ["config.yaml", "model_state_dict.pt",
                                    "mytorch/__init__.py", "mytorch/nn/linear.py"], result.notes
    assert result.files["mytorch/nn/linear.py"].read_bytes() == SMALL["handin/mytorch/nn/linear.py"]
    assert result.notes == ["reading stopped after 4 members at members adding up to more than "
                            "200 MiB ('handin/epoch_12.pt', 205 MiB, and what follows it are not "
                            "graded); the rest is ignored"], result.notes


def test_the_limit_is_200_mib_of_members_exactly(tmp_path):
    """A last member whose header and padded data end exactly at 200 MiB is read (and skipped as
    a file the grader does not use, not as one past the limit); one byte more is past it."""
    fits = LIMIT - small_members_end() - BLOCK  # its data, padded, ends at the limit exactly
    at = extract_handin(archive(tmp_path / "at.tar", "handin/padding.bin", fits), tmp_path / "a")
    assert len(at.files) == 4 and not any("200 MiB" in note for note in at.notes), at.notes
    assert any(note.startswith("'handin/padding.bin': ") for note in at.notes), at.notes
    over = extract_handin(archive(tmp_path / "over.tar", "handin/padding.bin", fits + 1),
                          tmp_path / "o")
    assert len(over.files) == 4, over.notes
    assert any("more than 200 MiB ('handin/padding.bin'" in note for note in over.notes), \
        over.notes
