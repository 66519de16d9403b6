"""Extract a student's handin.tar without trusting it. Standard library only.

Every member is checked before anything is written, and only the files the grader needs are
extracted: those ``hw4lib.handin_format.size_limit`` gives a limit (``config.yaml``,
``model_state_dict.pt``, ``test_metrics.json``, ``test_generated_results.json``,
``model_arch.txt`` and the ``.py`` files of ``mytorch/``), each under an optional leading
``handin/`` (itself optionally under one more folder, for a handin packed from the folder above).
A member is skipped, with a note saying why, when it

* is absolute, climbs out with ``..``, or has a name that is not a plain relative path;
* is anything but a regular file: a symlink, a hard link, a device, a fifo, a sparse file;
* is not one of the expected files, or is larger than its limit;
* lies deeper in ``mytorch/`` than ``make handin`` packs (``MAX_MYTORCH_DEPTH`` folders).

Names are quoted short in the notes (``plain_tar.quoted``), whatever their length.

A file that appears more than once is graded as ``tar -x`` leaves it: its last copy (a note names
the duplicate), so the file graded is the one the student and the staff see after extracting, and a
fix appended with ``tar -rf`` counts. When that last copy is refused, the file is not graded.

Before ``tarfile`` sees anything, the archive is copied as a bounded plain tar
(``autograder.judging.intake.plain_tar``: a zip, a compressed or a damaged archive read alike, up to
the first problem). Accepted members are written by ``tarfile`` with ``filter="data"`` (the
library's own refusal of unsafe members, when the Python has it) after being renamed to their
checked relative path, and the final path is checked once more to lie inside the destination.
"""
from __future__ import annotations

import itertools
import os
import re
import stat
import tarfile
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from autograder.judging.intake.plain_tar import HandinError, normalize, quoted
from hw4lib.handin_format import (HANDIN_DIR, MAX_MEMBERS, MAX_MYTORCH_BYTES, MAX_MYTORCH_DEPTH,
                                  MYTORCH_DIR, size_limit)

# The mode of every extracted file: 0o644
READ_ONLY_FOR_OTHERS = stat.S_IRUSR | stat.S_IWUSR | stat.S_IRGRP | stat.S_IROTH

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
    plain = dest.with_name(dest.name + ".plain.tar")
    try:
        normalize(tar_path, plain, result.notes)
        with tarfile.open(plain, mode="r:") as archive:
            accepted = _select_members(archive, result.notes)
            for relative, member in accepted.items():
                try:
                    result.files[relative] = _extract_member(archive, member, relative, dest)
                except (tarfile.TarError, OSError, EOFError, ValueError) as error:
                    why = getattr(error, "strerror", None) or type(error).__name__
                    result.notes.append(f"{quoted(member.name)}: could not be extracted ({why}); "
                                        f"skipped")
    except (tarfile.TarError, OSError) as error:
        raise HandinError(f"{tar_path.name} could not be read ({error}); create it with "
                          f"`make handin`") from None
    finally:
        plain.unlink(missing_ok=True)
    return result


def _check_archive_file(tar_path: Path) -> None:
    # No limit on the file's own size: normalize() reads at most MAX_TAR_BYTES of members, so the
    # members before the limit are graded, the first past it named in a note.
    if not os.path.lexists(tar_path):
        raise HandinError(f"no {tar_path.name} was handed in; create it with `make handin`")
    if not os.path.isfile(tar_path) or os.path.islink(tar_path):
        raise HandinError(f"{tar_path.name} is not a regular file")


def _select_members(archive: tarfile.TarFile, notes: list[str]) -> dict[str, tarfile.TarInfo]:
    """Read the headers one by one; return {checked relative path: member} of those to extract."""
    accepted: dict[str, tarfile.TarInfo] = {}
    mytorch_bytes = 0
    for count in itertools.count():  # ends at MAX_MEMBERS at the latest
        try:
            member = archive.next()
        except (tarfile.TarError, OSError, EOFError, RecursionError) as error:
            notes.append(f"the archive is damaged after {count} members ({error}); "
                         f"the rest is ignored")
            break
        if member is None:
            break
        if count == MAX_MEMBERS:
            notes.append(f"the archive has more than {MAX_MEMBERS} members; "
                         f"the rest is ignored")
            break
        relative, problem = _check_member(member)
        path = relative or (_relative_path(member.name) if problem is not None else None)
        if path in accepted:  # tar -x leaves the last copy: that one is graded (or nothing)
            earlier = accepted.pop(path)
            if path.startswith(MYTORCH_DIR + "/"):
                mytorch_bytes -= earlier.size
            notes.append(f"{quoted(member.name)}: appears more than once in the archive; the last "
                         f"copy is graded, as `tar -x` leaves it")
        if relative is None:  # a directory, or a member refused for the reason given
            if problem is not None:
                notes.append(f"{quoted(member.name)}: {problem}; skipped")
            continue
        if problem is None and relative.startswith(MYTORCH_DIR + "/"):
            mytorch_bytes += member.size
            if mytorch_bytes > MAX_MYTORCH_BYTES:
                problem = (f"mytorch/ adds up to more than {MAX_MYTORCH_BYTES // 10**6} MB "
                           f"of .py files")
        if problem is not None:
            notes.append(f"{quoted(member.name)}: {problem}; skipped")
        else:
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
        return None, f"is a {kind} link (to {quoted(member.linkname)})"
    if member.ischr() or member.isblk() or member.isfifo():
        return None, "is a device or a fifo"
    if not member.isreg() or member.issparse():
        return None, "is not a regular file"
    relative = _relative_path(name)
    depth = relative.count("/") - 1
    if relative.startswith(MYTORCH_DIR + "/") and depth > MAX_MYTORCH_DEPTH:
        return None, (f"lies {depth} folders deep in {MYTORCH_DIR}/, deeper than make handin packs "
                      f"(at most {MAX_MYTORCH_DEPTH})")
    limit = size_limit(relative)
    if limit is None:
        return None, "is not a file the grader uses"
    if member.size > limit:
        return None, f"is {member.size} bytes, over the {limit} byte limit for this file"
    return relative, None


def _relative_path(name: str) -> str:
    """A member's path relative to the handin: ``./``, a leading ``handin/`` and one folder above
    it (a handin packed from the folder above) dropped."""
    parts = [part for part in PurePosixPath(name).parts if part != "."]
    if parts and parts[0] == HANDIN_DIR:
        parts = parts[1:]
    elif len(parts) > 2 and parts[1] == HANDIN_DIR and parts[0] != MYTORCH_DIR:
        parts = parts[2:]
    return "/".join(parts)


def _extract_member(archive: tarfile.TarFile, member: tarfile.TarInfo, relative: str,
                    dest: Path) -> Path:
    target = (dest / relative).resolve()
    if not target.is_relative_to(dest.resolve()):
        raise ValueError(f"{relative} would land outside {dest}")
    if hasattr(tarfile, "data_filter"):
        renamed = member.replace(name=relative, mode=READ_ONLY_FOR_OTHERS)
        archive.extract(renamed, dest, filter="data")
    else:  # Pythons without extraction filters: write the bytes ourselves
        target.parent.mkdir(parents=True, exist_ok=True)
        source = archive.extractfile(member)
        with source, open(target, "xb") as sink:
            sink.write(source.read(member.size))
    if not target.is_file() or target.is_symlink():  # pragma: no mutate (equivalent: target is resolved, never a link; tarfile raises before leaving a non-file)
        raise ValueError(f"{relative} did not extract to a regular file")
    return target
