"""The handins of a bulk download, in either platform's layout, as the class tools read them
(``autograder/regrade.py``'s docstring describes both layouts and the choice of versions)."""
from __future__ import annotations

import hashlib
import re
import sys
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from autograder.gradescope import find_handin
from hw4lib.handin_format import HANDIN_ARCHIVE_SUFFIXES

GRADESCOPE_METADATA = "submission_metadata.yml"
VERSION_CHOICES = ("latest", "all")
_SUFFIX = "(?P<suffix>" + "|".join(map(re.escape, sorted(HANDIN_ARCHIVE_SUFFIXES, key=len,
                                                           reverse=True))) + ")"
# An Autolab download member: <student>_<version>_<file name>, maybe with a browser's " (1)".
AUTOLAB_NAME = re.compile(r"(?P<student>.+)_(?P<version>\d+)_(?P<file>[^_]+?)(?: ?\(\d+\))?"
                          + _SUFFIX)
PLAIN_NAME = re.compile(r"(?P<student>.+?)(?: ?\(\d+\))?" + _SUFFIX)


@dataclass
class Handin:
    """One handin to grade, and who handed it in."""

    student: str  # the row's name: email, SID or file/folder name, safe as a file name
    path: Path
    version: str = ""  # Autolab's version number; '' where the platform has none
    versions_found: int = 1
    name: str = ""
    email: str = ""
    sid: str = ""
    submitted_at: str = ""
    note: str = ""  # what discovery chose for this handin, when it had to choose


def safe_name(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9@._+-]", "_", text).strip(".") or "_"


def gradescope_metadata(folder: Path) -> dict[str, dict[str, str]]:
    """{submission folder: {name, email, sid, submitted_at}} from Gradescope's
    submission_metadata.yml (``{submission_<id>: {":submitters": [{":name", ":email", ":sid"}],
    ":created_at": time, ...}}``); {} without one."""
    path = folder / GRADESCOPE_METADATA
    if not path.is_file():
        return {}
    import yaml

    try:
        metadata = yaml.safe_load(path.read_text(encoding="utf-8", errors="replace"))
    except yaml.YAMLError as error:
        print(f"{path} could not be read ({error}); rows are named by their folders",
              file=sys.stderr)
        return {}
    found = {}
    for submission, entry in (metadata.items() if isinstance(metadata, dict) else ()):
        if not isinstance(entry, dict):
            continue
        submitters = [s for s in entry.get(":submitters") or [] if isinstance(s, dict)]
        created = entry.get(":created_at")
        found[str(submission)] = {
            "name": "; ".join(str(s.get(":name") or "") for s in submitters),
            "email": "; ".join(str(s.get(":email") or "") for s in submitters),
            "sid": "; ".join(str(s.get(":sid") or "") for s in submitters),
            "submitted_at": (created.isoformat() if isinstance(created, datetime)
                             else str(created or ""))}
    return found


def find_handins(folder: Path, versions: str = "latest") -> dict[str, Handin]:
    """{row key: handin} for both layouts (see the module docstring)."""
    if not folder.is_dir():
        raise SystemExit(f"{folder} is not a folder: give the folder of a bulk download")
    if versions not in VERSION_CHOICES:
        raise SystemExit(f"--versions must be one of {', '.join(VERSION_CHOICES)}, got {versions!r}")
    metadata = gradescope_metadata(folder)
    candidates: dict[tuple[str, str], list[Handin]] = {}
    for path in sorted(folder.iterdir()):
        if path.is_dir():
            found = find_handin(path)
            if found is None:
                if any(path.iterdir()):
                    print(f"skipped {path.name}/: no handin.tar and not exactly one tar or zip in "
                          f"it", file=sys.stderr)
                continue
            facts = metadata.get(path.name, {})
            who = (facts.get("email") or facts.get("sid") or path.name).split("; ")[0]
            handin = Handin(safe_name(who), found, **facts)
            if path.name not in metadata and metadata:
                handin.note = f"{GRADESCOPE_METADATA} does not list {path.name}/"
        elif path.name.endswith(HANDIN_ARCHIVE_SUFFIXES):
            match = AUTOLAB_NAME.fullmatch(path.name) or PLAIN_NAME.fullmatch(path.name)
            handin = Handin(safe_name(match["student"]), path,
                            version=match.groupdict().get("version") or "")
        else:
            continue
        candidates.setdefault((handin.student, handin.version), []).append(handin)
    by_student: dict[str, list[Handin]] = {}
    for (student, version), copies in candidates.items():
        by_student.setdefault(student, []).append(one_copy(copies))
    handins = {}
    for student, found in by_student.items():
        found.sort(key=lambda h: (int(h.version) if h.version else -1, h.submitted_at))
        for handin in found:
            handin.versions_found = len(found)
        for handin in (found if versions == "all" else found[-1:]):
            key = f"{student}#{handin.version}" if versions == "all" and handin.version else student
            handins[key] = handin
    return handins


def one_copy(copies: list[Handin]) -> Handin:
    """The handin to grade of several files of one student and version (a re-download, or one
    student in both layouts): identical copies are one; of different ones, the newest file, with
    a note."""
    if len(copies) == 1:
        return copies[0]
    digests = {sha256(copy.path) for copy in copies}
    newest = max(copies, key=lambda copy: copy.path.stat().st_mtime)
    if len(digests) > 1:
        newest.note = (f"{len(copies)} different files of this version "
                       f"({', '.join(c.path.name for c in copies)}); graded the newest, "
                       f"{newest.path.name}")
    return newest


def sha256(*paths: Path) -> str:
    digest = hashlib.sha256()
    for path in paths:
        with open(path, "rb") as file:
            for block in iter(lambda: file.read(1 << 20), b""):
                digest.update(block)
    return digest.hexdigest()
