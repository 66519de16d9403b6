"""Extract a student's handin.tar without trusting it. Standard library only.

Every member is checked before anything is written, and only the files the grader needs are
extracted: ``config.yaml``, ``model_state_dict.pt``, ``test_metrics.json``,
``test_generated_results.json``, ``model_arch.txt`` and the ``.py`` files of ``mytorch/``, each
under an optional leading ``handin/``. A member is skipped, with a note saying why, when it

* is absolute, climbs out with ``..``, or has a name that is not a plain relative path;
* is anything but a regular file: a symlink, a hard link, a device, a fifo, a sparse file;
* is not one of the expected files, is a duplicate, or is larger than its limit.

Accepted members are written by ``tarfile`` with ``filter="data"`` (the library's own refusal of
unsafe members, when the Python has it) after being renamed to their checked relative path, and
the final path is checked once more to lie inside the destination.
"""
from __future__ import annotations

import os
import re
import tarfile
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from autograder import rubric

TOP_LEVEL_FILES = {
    "config.yaml": rubric.MAX_SMALL_FILE_BYTES,
    "model_state_dict.pt": rubric.MAX_STATE_DICT_BYTES,
    "test_metrics.json": rubric.MAX_SMALL_FILE_BYTES,
    "test_generated_results.json": rubric.MAX_SMALL_FILE_BYTES,
    "model_arch.txt": rubric.MAX_SMALL_FILE_BYTES,
}
MYTORCH_DIR = "mytorch"
_MODULE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


class HandinError(Exception):
    """handin.tar is missing or is not a readable tar archive: nothing can be graded."""


@dataclass
class Extraction:
    """What came out of a handin: {relative path: extracted file}, one note per skipped member."""

    files: dict[str, Path] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


def extract_handin(tar_path: Path, dest: Path) -> Extraction:
    """Check every member of ``tar_path`` and extract the expected ones into ``dest``.

    ``dest`` must not exist yet; it is created. Relative paths in the result drop the leading
    ``handin/`` (``"mytorch/nn/linear.py"``, ``"config.yaml"``). Raises HandinError when the archive
    itself is unusable; problems with single members only skip those members.
    """
    _check_archive_file(tar_path)
    dest.mkdir(parents=True)
    result = Extraction()
    try:
        archive = tarfile.open(tar_path, mode="r:*")
    except (tarfile.TarError, OSError, EOFError) as error:
        raise HandinError(f"{tar_path.name} is not a tar archive ({error}); create it with "
                          f"`make handin`") from None
    with archive:
        accepted = _select_members(archive, result.notes)
        for relative, member in accepted.items():
            try:
                result.files[relative] = _extract_member(archive, member, relative, dest)
            except (tarfile.TarError, OSError, EOFError, ValueError) as error:
                result.notes.append(f"{member.name}: could not be extracted ({error}); skipped")
    return result


def _check_archive_file(tar_path: Path) -> None:
    try:
        info = os.lstat(tar_path)
    except FileNotFoundError:
        message = f"no {tar_path.name} was handed in; create it with `make handin`"
        raise HandinError(message) from None
    if not os.path.isfile(tar_path) or os.path.islink(tar_path):
        raise HandinError(f"{tar_path.name} is not a regular file")
    if info.st_size > rubric.MAX_TAR_BYTES:
        raise HandinError(f"{tar_path.name} is {info.st_size / 2**20:.0f} MiB, over the "
                          f"{rubric.MAX_TAR_BYTES / 2**20:.0f} MiB limit")


def _select_members(archive: tarfile.TarFile, notes: list[str]) -> dict[str, tarfile.TarInfo]:
    """Read the headers one by one; return {checked relative path: member} of those to extract."""
    accepted: dict[str, tarfile.TarInfo] = {}
    declared_bytes = 0
    mytorch_bytes = 0
    for count in range(rubric.MAX_MEMBERS + 1):
        try:
            member = archive.next()
        except (tarfile.TarError, OSError, EOFError) as error:
            notes.append(f"the archive is damaged after {count} members ({error}); "
                         f"the rest is ignored")
            break
        if member is None:
            break
        if count == rubric.MAX_MEMBERS:
            notes.append(f"the archive has more than {rubric.MAX_MEMBERS} members; "
                         f"the rest is ignored")
            break
        declared_bytes += max(member.size, 0)
        if declared_bytes > rubric.MAX_TAR_BYTES:
            # Only a compressed archive can declare more than the file holds: stop before
            # decompressing a bomb.
            notes.append(f"the archive's members add up to more than "
                         f"{rubric.MAX_TAR_BYTES / 2**20:.0f} MiB; {member.name!r} and the rest "
                         f"are ignored")
            break
        relative, problem = _check_member(member)
        if problem is None and relative in accepted:
            problem = "appears twice in the archive; the first copy is used"
        if problem is None and relative.startswith(MYTORCH_DIR + "/"):
            mytorch_bytes += member.size
            if mytorch_bytes > rubric.MAX_MYTORCH_BYTES:
                problem = (f"mytorch/ adds up to more than {rubric.MAX_MYTORCH_BYTES / 1e6:.0f} MB "
                           f"of .py files")
        if problem is not None:
            notes.append(f"{member.name!r}: {problem}; skipped")
        elif relative is not None:
            accepted[relative] = member
    return accepted


def _check_member(member: tarfile.TarInfo) -> tuple[str | None, str | None]:
    """Return (relative path to extract or None to ignore silently, problem or None)."""
    name = member.name
    if "\\" in name or "\x00" in name or name.startswith("/") or re.match(r"[A-Za-z]:", name):
        return None, "is an absolute or non-POSIX path"
    parts = [part for part in PurePosixPath(name).parts if part != "."]
    if ".." in parts:
        return None, "climbs out of the archive with '..'"
    if member.isdir():
        return None, None
    if member.issym() or member.islnk():
        kind = "symbolic" if member.issym() else "hard"
        return None, f"is a {kind} link (to {member.linkname!r})"
    if member.ischr() or member.isblk() or member.isfifo():
        return None, "is a device or a fifo"
    if not member.isreg() or member.issparse():
        return None, "is not a regular file"
    if parts and parts[0] == "handin":
        parts = parts[1:]
    relative = "/".join(parts)
    if relative in TOP_LEVEL_FILES:
        limit = TOP_LEVEL_FILES[relative]
    elif _is_mytorch_source(parts):
        limit = rubric.MAX_PY_FILE_BYTES
    else:
        return None, "is not a file the grader uses"
    if member.size > limit:
        return None, f"is {member.size} bytes, over the {limit} byte limit for this file"
    return relative, None


def _is_mytorch_source(parts: list[str]) -> bool:
    """True for mytorch/<package>/.../<module>.py with every component a valid module name."""
    if len(parts) < 2 or parts[0] != MYTORCH_DIR or not parts[-1].endswith(".py"):
        return False
    return all(_MODULE_NAME.match(part) for part in parts[1:-1] + [parts[-1][:-3]])


def _extract_member(archive: tarfile.TarFile, member: tarfile.TarInfo, relative: str,
                    dest: Path) -> Path:
    target = (dest / relative).resolve()
    if not target.is_relative_to(dest.resolve()):
        raise ValueError(f"{relative} would land outside {dest}")
    if hasattr(tarfile, "data_filter"):
        renamed = member.replace(name=relative, mode=0o644, deep=False)
        archive.extract(renamed, dest, filter="data")
    else:  # Pythons without extraction filters: write the bytes ourselves
        target.parent.mkdir(parents=True, exist_ok=True)
        source = archive.extractfile(member)
        with source, open(target, "xb") as sink:
            sink.write(source.read(member.size))
    if not target.is_file() or target.is_symlink():
        raise ValueError(f"{relative} did not extract to a regular file")
    return target
