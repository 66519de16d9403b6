"""Which files of the repository the handout (``tools/make_handout.py``) gets: the git-tracked
files, less what only instructors get (:data:`EXCLUDED_DIRS`, :data:`EXCLUDED_FILES`, ``.py`` files
whose first line is :data:`INSTRUCTOR_ONLY`) and caches; and the Makefile without its instructor
targets (the block from :data:`MAKEFILE_BEGIN` to :data:`MAKEFILE_END`)."""
from __future__ import annotations

import re
import subprocess
from pathlib import Path

from tools.handout_regions import HandoutError

INSTRUCTOR_ONLY = "# hw4p1: instructor-only"
MAKEFILE_BEGIN = "# BEGIN INSTRUCTOR TARGETS"
MAKEFILE_END = "# END INSTRUCTOR TARGETS"

# Paths (directories end with "/") that only instructors get, or that are built locally. The
# instructor's tests live in tests/'s sub-folders by what they test; tests/ itself holds what
# students get (their component tests and the helpers those import).
INSTRUCTOR_TESTS = ("tests/grader/", "tests/platforms/", "tests/classroom/", "tests/kit/",
                    "tests/library/")
EXCLUDED_DIRS = ("autograder/", "tools/", "bench/", ".ci/", "docs/", "hw4_data/hw4p1_data/",
                 "expts/", "dist/", ".venv/", *INSTRUCTOR_TESTS)
EXCLUDED_FILES = ("DEVELOPERS.md", "pyproject.toml")
# Directory names that are caches or metadata wherever they appear.
EXCLUDED_PARTS = ("__pycache__", ".pytest_cache", ".ipynb_checkpoints", ".git")


def tracked_files(repo: Path) -> list[str]:
    """Repo-relative paths of the git-tracked files present in the working tree, sorted."""
    try:
        listed = subprocess.run(["git", "-C", str(repo), "ls-files", "-z", "--cached"],
                                check=True, capture_output=True).stdout
    except (OSError, subprocess.CalledProcessError) as error:
        raise HandoutError(f"{repo} must be a git repository with git on PATH: {error}") from error
    paths = {name for name in listed.decode().split("\0") if name}
    return sorted(p for p in paths if (repo / p).is_file())


def exclusion_reason(path: str, repo: Path) -> str | None:
    """Why ``path`` stays out of the handout, or None when students get it."""
    parts = path.split("/")
    if any(part in EXCLUDED_PARTS for part in parts[:-1]) or parts[-1].endswith((".pyc", ".pyo")):
        return "cache"
    for prefix in EXCLUDED_DIRS:
        if path.startswith(prefix):
            return f"instructor-only directory {prefix}"
    if path in EXCLUDED_FILES:
        return "instructor-only file"
    if path.endswith(".py"):
        with open(repo / path, encoding="utf-8") as file:
            if file.readline().strip() == INSTRUCTOR_ONLY:
                return "hidden test (instructor-only)"
    return None


def instructor_targets(makefile: str) -> set[str]:
    """The targets the Makefile defines between MAKEFILE_BEGIN and MAKEFILE_END."""
    names, inside = set(), False
    for line in makefile.splitlines():
        if line.strip() in (MAKEFILE_BEGIN, MAKEFILE_END):
            inside = line.strip() == MAKEFILE_BEGIN
        elif inside and (match := re.match(r"([A-Za-z0-9_-]+):", line)):
            names.add(match.group(1))
    return names


def strip_instructor_targets(makefile: str) -> str:
    """The Makefile without the lines from MAKEFILE_BEGIN to MAKEFILE_END (both included), and
    without the names of the targets defined there in its ``.PHONY`` line (which may continue
    over several lines ending in a backslash; it comes back as one line)."""
    lines = makefile.splitlines(keepends=True)
    begins = [i for i, line in enumerate(lines) if line.strip() == MAKEFILE_BEGIN]
    ends = [i for i, line in enumerate(lines) if line.strip() == MAKEFILE_END]
    if len(begins) != len(ends) or any(b > e for b, e in zip(begins, ends)) or len(begins) > 1:
        raise HandoutError(f"Makefile: expected one '{MAKEFILE_BEGIN}' ... '{MAKEFILE_END}' "
                           f"block, found begins at lines {[b + 1 for b in begins]} and ends at "
                           f"lines {[e + 1 for e in ends]}")
    if not begins:
        return makefile
    before, after = lines[:begins[0]], lines[ends[0] + 1:]
    if before and after and not before[-1].strip() and not after[0].strip():
        after = after[1:]  # one blank line where the block was, not two
    dropped = instructor_targets(makefile)
    kept, phony = [], None  # phony: the .PHONY line read so far, across "\\" continuations
    for line in before + after:
        if phony is None and not line.startswith(".PHONY:"):
            kept.append(line)
            continue
        phony = (phony or "") + line.rstrip().removesuffix("\\") + " "
        if not line.rstrip().endswith("\\"):
            names = [name for name in phony[len(".PHONY:"):].split() if name not in dropped]
            kept.append(".PHONY: " + " ".join(names) + "\n")
            phony = None
    return "".join(kept)
