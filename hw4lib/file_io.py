"""Files written atomically, and JSON files read and written one way (standard library only: the
judge and the Gradescope adapter import it)."""
from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any, Callable


def atomic_write_bytes(path: Path, write: Callable[[Path], Any]) -> None:
    """Call ``write(tmp_path)`` then rename the file onto ``path``.

    ``os.replace`` is atomic on one file system, so a crash mid-write leaves the previous file
    intact rather than a truncated one.
    """
    tmp = path.with_name(path.name + ".tmp")
    write(tmp)
    os.replace(tmp, path)


def file_sha256(*paths: Path) -> str:
    """sha256 (hex) of the files ``paths``' bytes, one after the other, read in blocks."""
    digest = hashlib.sha256()
    for path in paths:
        with open(path, "rb") as file:
            for block in iter(lambda: file.read(1 << 20), b""):
                digest.update(block)
    return digest.hexdigest()


def json_text(payload: Any) -> str:
    """``payload`` as JSON indented by 2, ending with a newline: the text of every JSON file the
    repository writes for people to read."""
    return json.dumps(payload, indent=2) + "\n"


def write_json(path: Path, payload: Any) -> None:
    """Write ``payload`` to ``path`` as :func:`json_text`, atomically (a reader never sees half a
    file)."""
    atomic_write_bytes(Path(path), lambda tmp: tmp.write_text(json_text(payload), encoding="utf-8"))


def read_json(path: str | os.PathLike) -> Any:
    """The parsed JSON of the UTF-8 file ``path``; OSError when it cannot be read, ValueError
    (``json.JSONDecodeError``) when it is not JSON."""
    return json.loads(Path(path).read_text(encoding="utf-8"))


def read_untrusted_json(path: str | os.PathLike) -> Any:
    """:func:`read_json` of a file from a handin or a child process, or None when it is missing,
    unreadable, not JSON, or nested too deep to parse."""
    try:
        return read_json(path)
    except (OSError, ValueError, RecursionError):
        return None
