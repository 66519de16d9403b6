"""Copy a handed-in archive into a bounded plain tar before ``tarfile`` reads any of it (for
``autograder.judging.intake.safe_tar``). Standard library only.

Before ``tarfile`` sees anything, :func:`normalize` copies the archive (decompressing gzip, bzip2 or
xz) block by block into a plain tar, checking each header: the copy stops, with a note, at the first
damaged header, at a name record (GNU long name, pax header) over MAX_META_BYTES or after
MAX_META_RUN of them in a row, or once MAX_TAR_BYTES are written. So a decompression bomb, a
multi-gigabyte long name or an endless chain of name records costs neither memory nor time, and the
members before the problem are still graded. Any ordinary archive (GNU tar, bsdtar, Python's
``tarfile`` in ustar, gnu or pax format, with or without directory entries and ``./``) is read
alike.

A zip archive (whatever its name) is read too: its end record is read first, and an archive whose
central directory declares more than MAX_MEMBERS entries or MAX_ZIP_DIRECTORY_BYTES is refused
before ``zipfile`` parses (and holds in memory) any of it; then it is copied into a plain tar,
entry by entry, within the same limits. A zstd-compressed archive is refused with a message saying
so.
"""
from __future__ import annotations

import bz2
import gzip
import lzma
import os
import stat
import struct
import tarfile
import zipfile
import zlib
from pathlib import Path

from hw4lib.handin_format import MAX_MEMBERS, MAX_TAR_BYTES

BLOCK = 512
MAX_META_BYTES = 64 * 1024  # one GNU long-name / long-link record or pax header
MAX_META_RUN = 8  # name records in a row before a member
META_TYPES = (b"L", b"K", b"x", b"g")  # GNU long name, long link; pax extended, global
COMPRESSED = {b"\x1f\x8b": gzip.open, b"BZh": bz2.open, b"\xfd7zXZ\x00": lzma.open}
ARCHIVE_END = "the end of the file"  # an archive without its two zero blocks ends here too
STREAM_ERRORS = (OSError, EOFError, zlib.error, lzma.LZMAError, ValueError)
ZIP_MAGIC = (b"PK\x03\x04", b"PK\x05\x06")  # a zip's first entry; an empty zip
ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
# A zip's end record (signature, disk numbers, entries on this disk, entries, directory size and
# offset, comment length), the zip64 locator after it and the zip64 end record it points to.
ZIP_END = struct.Struct("<4s4H2LH")
ZIP64_LOCATOR = struct.Struct("<4sLQL")
ZIP64_END = struct.Struct("<4sQ2H2L4Q")
ZIP_END_SEARCH = ZIP_END.size + 0xFFFF  # the end record sits within the last 64 KiB + 22 bytes
MAX_ZIP_DIRECTORY_BYTES = 4 * 2**20  # what zipfile reads whole into memory before any entry
MAX_QUOTED_CHARS = 100  # a member's name in a note: its head and tail, and its length
ZIP_ERRORS = (zipfile.BadZipFile, zipfile.LargeZipFile, RuntimeError, NotImplementedError,
              tarfile.TarError, *STREAM_ERRORS)


class HandinError(Exception):
    """handin.tar is missing or is not a readable tar archive: nothing can be graded."""


def normalize(tar_path: Path, out: Path, notes: list[str]) -> None:
    """Copy ``tar_path`` as a plain tar into ``out``, header by header, up to the first problem.

    Raises HandinError when not even the first header is a tar header.
    """
    with open(tar_path, "rb") as raw:
        magic = raw.read(max(map(len, (*COMPRESSED, *ZIP_MAGIC, ZSTD_MAGIC))))
    if magic.startswith(ZSTD_MAGIC):
        raise HandinError(f"{tar_path.name} is compressed with zstd, which the grader does not "
                          f"read; create it with `make handin` (or tar, gzip, bzip2, xz or zip)")
    if magic.startswith(ZIP_MAGIC):
        zip_to_tar(tar_path, out, notes)
        return
    opener = next((open_ for prefix, open_ in COMPRESSED.items() if magic.startswith(prefix)),
                  None)
    with (opener or open)(tar_path, "rb") as source, open(out, "wb") as sink:
        complete, run_length, members, any_header = 0, 0, 0, False
        while True:
            problem, block = _read_exactly(source, BLOCK)
            if problem or block.count(0) == BLOCK:
                break
            if not _checksum_ok(block):
                problem = "a damaged header"
                break
            any_header = True
            size = _header_size(block)
            kind = block[156:157]
            if size is None:
                problem = "a header with an unreadable size"
                break
            if kind in META_TYPES:
                if size > MAX_META_BYTES:
                    problem = f"a {size:,}-byte name record (at most {MAX_META_BYTES:,})"
                    break
                run_length += 1
                if run_length > MAX_META_RUN:
                    problem = f"more than {MAX_META_RUN} name records in a row"
                    break
            padded = -(-size // BLOCK) * BLOCK
            if sink.tell() + BLOCK + padded > MAX_TAR_BYTES:
                problem = (f"members adding up to more than {MAX_TAR_BYTES / 2**20:.0f} MiB "
                           f"({quoted(_header_name(block))}, {size / 2**20:.0f} MiB, and what "
                           f"follows it are not graded)")
                break
            sink.write(block)
            problem = _copy(source, sink, padded)
            if problem:
                break
            if kind not in META_TYPES:
                members += 1
                complete, run_length = sink.tell(), 0
        if problem and not any_header:
            raise HandinError(f"{tar_path.name} is not a tar archive ({problem}); create it "
                              f"with `make handin`")
        if problem and problem != ARCHIVE_END:
            notes.append(f"reading stopped after {members} members at {problem}; the rest is "
                         f"ignored")
        sink.truncate(complete)  # drops a member cut short and name records left without one
        sink.seek(complete)
        sink.write(bytes(2 * BLOCK))


def zip_to_tar(zip_path: Path, out: Path, notes: list[str]) -> None:
    """Copy the regular files of the zip archive ``zip_path`` into the plain tar ``out``, in
    order, up to MAX_MEMBERS entries and MAX_TAR_BYTES in all (each entry streams at most its
    declared size, so a zip bomb costs no more than an honest archive of that size)."""
    entries, directory_bytes = zip_directory(zip_path)
    if entries > MAX_MEMBERS or directory_bytes > MAX_ZIP_DIRECTORY_BYTES:
        raise HandinError(f"{zip_path.name} is a zip archive whose directory declares {entries:,} "
                          f"entries in {directory_bytes:,} bytes (at most {MAX_MEMBERS} entries "
                          f"and {MAX_ZIP_DIRECTORY_BYTES:,} bytes); create it with `make handin`")
    try:
        with zipfile.ZipFile(zip_path) as archive, tarfile.open(out, "w",
                                                                format=tarfile.GNU_FORMAT) as sink:
            written = 0
            for count, info in enumerate(archive.infolist()):
                if count == MAX_MEMBERS:
                    notes.append(f"the archive has more than {MAX_MEMBERS} members; the rest is "
                                 f"ignored")
                    break
                if info.is_dir():
                    continue
                if stat.S_ISLNK(info.external_attr >> 16):
                    notes.append(f"{quoted(info.filename)}: is a symbolic link; skipped")
                    continue
                if written + BLOCK + info.file_size > MAX_TAR_BYTES:
                    notes.append(f"reading stopped after {count} members at members adding up to "
                                 f"more than {MAX_TAR_BYTES / 2**20:.0f} MiB "
                                 f"({quoted(info.filename)}, {info.file_size / 2**20:.0f} MiB, "
                                 f"and what follows it are not graded); the rest is ignored")
                    break
                member = tarfile.TarInfo(info.filename)
                member.size, member.mode = info.file_size, 0o644
                try:
                    with archive.open(info) as entry:
                        sink.addfile(member, entry)
                except ZIP_ERRORS as error:
                    notes.append(f"{quoted(info.filename)}: could not be read "
                                 f"({type(error).__name__}); the rest is ignored")
                    break  # the tar may end inside this member: stop here
                written += BLOCK + -(-info.file_size // BLOCK) * BLOCK
    except (zipfile.BadZipFile, OSError, EOFError, ValueError) as error:
        raise HandinError(f"{zip_path.name} is a damaged zip archive ({type(error).__name__}); "
                          f"create it with `make handin`") from None


def zip_directory(zip_path: Path) -> tuple[int, int]:
    """(entries, bytes) that the zip's end record (its zip64 one, when present) declares for the
    central directory: read from the last 64 KiB before ``zipfile`` parses anything, as ``zipfile``
    itself finds them. (0, 0) when there is no end record (``zipfile`` then refuses the file)."""
    with open(zip_path, "rb") as file:
        size = file.seek(0, os.SEEK_END)
        file.seek(max(0, size - ZIP_END_SEARCH))
        tail = file.read()
        at = tail.rfind(b"PK\x05\x06")
        if at < 0 or len(tail) - at < ZIP_END.size:
            return 0, 0
        entries, directory = ZIP_END.unpack_from(tail, at)[4:6]
        if at >= ZIP64_LOCATOR.size:
            signature, _, end64, _ = ZIP64_LOCATOR.unpack_from(tail, at - ZIP64_LOCATOR.size)
            if signature == b"PK\x06\x07":  # an offset at or past the end reads nothing
                file.seek(end64)
                record = file.read(ZIP64_END.size)
                if len(record) == ZIP64_END.size and record.startswith(b"PK\x06\x06"):
                    fields = ZIP64_END.unpack(record)
                    entries, directory = max(entries, fields[7]), max(directory, fields[8])
    return entries, directory


def quoted(name: str) -> str:
    """``name`` quoted for a note, at most about MAX_QUOTED_CHARS long whatever its length."""
    if len(name) <= MAX_QUOTED_CHARS:
        return repr(name)
    half = MAX_QUOTED_CHARS // 2
    return f"{name[:half]!r}...{name[-half // 2:]!r} ({len(name):,} characters)"


def _read_exactly(source, size: int) -> tuple[str, bytes]:
    """(problem or '', bytes): a problem when the stream ends early or cannot be decompressed."""
    try:
        data = source.read(size)
    except STREAM_ERRORS as error:
        return f"compressed data that cannot be read ({type(error).__name__})", b""
    if len(data) < size:
        return ("a member cut short" if data else ARCHIVE_END), data
    return "", data


def _copy(source, sink, size: int) -> str:
    """Copy ``size`` bytes in chunks; a problem string when the stream ends early."""
    while size:
        problem, chunk = _read_exactly(source, min(size, 1 << 20))  # pragma: no mutate (equivalent: the chunk size sets only how many reads copy a member)
        if problem:
            return "a member cut short" if problem == ARCHIVE_END else problem
        sink.write(chunk)
        size -= len(chunk)
    return ""


def _checksum_ok(block: bytes) -> bool:
    """The header checksum, computed as tar does (unsigned, or signed by old tars)."""
    stored = _octal(block[148:156])
    return stored is not None and stored in tarfile.calc_chksums(block)


def _header_name(block: bytes) -> str:
    """The name a ustar header holds (its prefix, then its name; a GNU long name's own record
    precedes it, and only its first 100 characters are here)."""
    name, prefix = (field.partition(b"\0")[0].decode("utf-8", "replace")
                    for field in (block[0:100], block[345:500]))
    return f"{prefix}/{name}" if prefix and block[257:263] == b"ustar\0" else name


def _header_size(block: bytes) -> int | None:
    field = block[124:136]
    if field[0] & 0x80:  # GNU base-256: a big-endian number in the remaining bytes
        return None if field[0] == 0xFF else int.from_bytes(field[1:], "big")
    return _octal(field)


def _octal(field: bytes) -> int | None:
    digits = field.replace(b"\0", b" ").strip()
    try:
        return int(digits, 8) if digits else 0
    except ValueError:
        return None
