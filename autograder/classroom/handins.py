"""The handins of a bulk download, in either platform's layout, as the class tools read them
(``autograder/classroom/regrade.py``'s docstring describes both layouts and the choice of
versions)."""
from __future__ import annotations

import math
import re
import sys
import zipfile
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, tzinfo
from pathlib import Path

from autograder.judging.gradescope import find_handin
from hw4lib.file_io import file_sha256
from hw4lib.handin_format import HANDIN_ARCHIVE_SUFFIXES

GRADESCOPE_METADATA = "submission_metadata.yml"
MEMBER_FIELDS = ("name", "email", "sid")
MEMBER_SEPARATOR = "; "  # between a group's members in each of MEMBER_FIELDS
VERSION_CHOICES = ("latest", "all")
_SUFFIX = "(?P<suffix>" + "|".join(map(re.escape, HANDIN_ARCHIVE_SUFFIXES)) + ")"
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
    name: str = ""  # name, email, sid: every member of a group, joined by MEMBER_SEPARATOR
    email: str = ""
    sid: str = ""
    submitted_at: str = ""
    note: str = ""  # what discovery chose for this handin, when it had to choose


def safe_name(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9@._+-]", "_", text).strip(".") or "_"


def gradescope_metadata(folder: Path) -> dict[str, dict[str, str]]:
    """{submission folder: {name, email, sid, submitted_at}} from Gradescope's
    submission_metadata.yml (``{submission_<id>: {":submitters": [{":name", ":email", ":sid"}],
    ":created_at": time, ...}}``); {} without one. A group's members are joined by
    MEMBER_SEPARATOR in the order Gradescope lists them, every member in every field (an empty
    one where Gradescope gives none), so :func:`members_of` pairs them up again."""
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
            **{field: MEMBER_SEPARATOR.join(member_field(s.get(f":{field}"))
                                            for s in submitters)
               for field in MEMBER_FIELDS},
            "submitted_at": (created.isoformat() if isinstance(created, datetime)
                             else str(created or ""))}
    return found


def member_field(value: object) -> str:
    """One member's name, email or SID as a cell of a joined list (no separator inside); a name
    given as a list of its parts (``[Mallory, Stone]``) is written as its parts, spaced."""
    if isinstance(value, list | tuple):
        return " ".join(filter(None, map(member_field, value)))
    return re.sub(r"\s+", " ", str(value if value is not None else "")).replace(";", ",").strip()


def members_of(row: Mapping[str, str]) -> list[dict[str, str]]:
    """[{name, email, sid}] of everyone who handed in a grades.csv row (or a Handin's fields):
    a group's members, or the one student; an Autolab row, which carries no email, has the
    row's name as its email when that is an address."""
    lists = [(row.get(field) or "").split(MEMBER_SEPARATOR) for field in MEMBER_FIELDS]
    count = max(map(len, lists))
    members = [{field: (values[index] if index < len(values) else "").strip()
                for field, values in zip(MEMBER_FIELDS, lists)} for index in range(count)]
    if count == 1:
        [member] = members
        if not member["email"] and "@" in (row.get("student") or ""):
            member["email"] = row["student"]
    return members


def autolab_download(path: Path) -> dict[str, zipfile.ZipInfo] | None:
    """{member file name: its entry} when ``path`` is Autolab's "Download all submissions" zip
    itself (every file in it an Autolab-named handin), else None."""
    if path.suffix != ".zip":
        return None
    try:
        with zipfile.ZipFile(path) as archive:
            files = [info for info in archive.infolist() if not info.is_dir()]
    except (OSError, zipfile.BadZipFile):
        return None
    names = {Path(info.filename).name: info for info in files}
    if files and all(AUTOLAB_NAME.fullmatch(name) for name in names):
        return names
    return None


def zip_times(entries: dict[str, zipfile.ZipInfo], zone: tzinfo) -> dict[str, str]:
    """{member file name: its entry time as ISO 8601 with the offset ``zone`` had then}: a zip
    entry holds the file's local time without a zone (the server's)."""
    return {name: datetime(*info.date_time, tzinfo=zone).isoformat()
            for name, info in entries.items()}


def find_handins(folder: Path, versions: str = "latest",
                 autolab_zone: tzinfo | None = None) -> dict[str, Handin]:
    """{row key: handin} for both layouts (see the module docstring). ``autolab_zone``: the
    Autolab server's time zone; each handin's submission time is then its entry time in the
    download zip beside it (approximate, noted)."""
    if not folder.is_dir():
        raise SystemExit(f"{folder} is not a folder: give the folder of a bulk download")
    if versions not in VERSION_CHOICES:
        raise SystemExit(f"--versions must be one of {', '.join(VERSION_CHOICES)}, got {versions!r}")
    metadata = gradescope_metadata(folder)
    times: dict[str, str] = {}
    downloads = {path: entries for path in sorted(folder.iterdir()) if path.is_file()
                 and (entries := autolab_download(path)) is not None}
    for download, entries in downloads.items():
        print(f"skipped {download.name}: Autolab's download zip itself, not a student's handin "
              f"(its handins are read unpacked beside it)", file=sys.stderr)
        if autolab_zone is not None:
            times.update(zip_times(entries, autolab_zone))
    if autolab_zone is not None and not downloads:
        raise SystemExit(f"--autolab-zone reads the submission times from Autolab's download "
                         f"zip, and {folder} holds none: put the zip that \"Download all "
                         f"submissions\" gave beside its unpacked handins")
    candidates: dict[tuple[str, str, str], list[Handin]] = {}
    for path in sorted(set(folder.iterdir()) - set(downloads)):
        if path.is_dir():
            found = find_handin(path)
            if found is None:
                if any(path.iterdir()):
                    print(f"skipped {path.name}/: no handin.tar and not exactly one tar or zip in "
                          f"it", file=sys.stderr)
                continue
            facts = metadata.get(path.name, {})
            lead = next((member[field] for field in ("email", "sid") for member in members_of(facts)
                         if member[field]), path.name)
            handin = Handin(safe_name(lead), found, **facts)
            if path.name not in metadata and metadata:
                handin.note = f"{GRADESCOPE_METADATA} does not list {path.name}/"
        elif path.name.endswith(HANDIN_ARCHIVE_SUFFIXES):
            match = AUTOLAB_NAME.fullmatch(path.name) or PLAIN_NAME.fullmatch(path.name)
            handin = Handin(safe_name(match["student"]), path,
                            version=match.groupdict().get("version") or "",
                            submitted_at=times.get(path.name, ""))
            if path.name in times:
                handin.note = (f"submission time approximate: the download zip's time of this "
                               f"file ({autolab_zone})")
        else:
            continue
        group = group_of(handin)
        candidates.setdefault((group, handin.version, "" if group.strip() else handin.student),
                              []).append(handin)
    chosen = [one_copy(copies) for copies in candidates.values()]
    # One student leading submissions of different members (a group's and their own) makes
    # several rows: each is named by its folder as well, and the gradebook lists the conflict.
    leads = Counter((handin.student, handin.version) for handin in chosen)
    for handin in chosen:
        if leads[handin.student, handin.version] > 1:
            handin.note = "; ".join(filter(None, [
                handin.note, f"{handin.student} also handed in another submission with other "
                             f"members: this row is named by its folder too"]))
            handin.student = safe_name(f"{handin.student}_{handin.path.parent.name}")
    by_student: dict[str, list[Handin]] = {}
    for handin in chosen:
        by_student.setdefault(handin.student, []).append(handin)
    handins = {}
    for student, found in by_student.items():
        # a handin without a version (Gradescope's) before every numbered one
        found.sort(key=lambda h: (int(h.version) if h.version else -math.inf, h.submitted_at))
        for handin in found:
            handin.versions_found = len(found)
        if versions == "all":
            handins.update({f"{student}#{h.version}" if h.version else student: h for h in found})
        else:
            handins[student] = found[-1]
    return handins


def group_of(handin: Handin) -> str:
    """Who handed ``handin`` in, as a key (blank when no member has an email or SID): two
    submissions by the same members are one student's (or group's) resubmissions, whichever
    member the platform lists first (and so leads the row); an email in other case is another
    member (the gradebook lists the conflict)."""
    return MEMBER_SEPARATOR.join(sorted(f"{member['email']} {member['sid']}"
                                        for member in members_of(vars(handin))))


def one_copy(copies: list[Handin]) -> Handin:
    """The handin to grade of several files of one student and version (a re-download, one
    student in both layouts, a Gradescope resubmission): identical copies are one; of different
    ones, the latest submitted when each has a submission time, else the newest file, with a
    note."""
    first, *others = copies
    if not others:  # one copy: nothing to compare, no file to hash
        return first
    digests = {file_sha256(copy.path) for copy in copies}
    times = [submitted_time(copy.submitted_at) for copy in copies]
    by_time = None not in times
    # without every time, None: equal for every copy, so the file times alone decide
    newest = max(zip(copies, times), key=lambda pair: (pair[1] if by_time else None,
                                                       pair[0].path.stat().st_mtime))[0]
    if len(digests) > 1:
        names = ", ".join(f"{c.path.parent.name}/" if by_time else c.path.name for c in copies)
        newest.note = (f"{len(copies)} different submissions ({names}); graded the latest "
                       f"submitted, {newest.path.parent.name}/" if by_time else
                       f"{len(copies)} different files of this version ({names}); graded the "
                       f"newest, {newest.path.name}")
    return newest


def submitted_time(text: str) -> float | None:
    """A submission time (ISO 8601 with its UTC offset) as a POSIX time; None when there is none
    or it has no offset."""
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        return None
    return moment.timestamp() if moment.tzinfo is not None else None
