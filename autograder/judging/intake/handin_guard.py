"""One handin's static inspection, isolated from the rest of the grading or of the class.

The judge's static inspection (``autograder/judging/intake/static_inspection.py``) and the
similarity (``autograder/classroom/similarity.py``) decode, parse and read each student's files
without running them; a hostile or broken file must cost only that handin's findings, never the
grading or the class run. ``guarded`` runs one step of an inspection and turns any
failure (any exception, RecursionError and MemoryError included: a coding declaration naming a
codec that raises on decoding, an expression nested deep enough to end ``ast.parse``) into a finding
the tool lists for that handin; ``read_bounded`` reads a file only up to a limit, so nothing in a
handin sizes the tool's memory. KeyboardInterrupt and SystemExit still stop the tool. Standard
library only.
"""
from __future__ import annotations

from pathlib import Path
from typing import Callable, TypeVar

T = TypeVar("T")
MESSAGE_CHARS = 160  # of the error's message kept in a finding (a handin chooses the message)


def guarded(what: str, function: Callable[..., T], *args, **kwargs) -> tuple[T | None, str]:
    """``(function(*args, **kwargs), "")``, or ``(None, finding)`` when it raises: the finding is
    "<what> could not be inspected (<ExceptionType>: <message>)", one line, without "; " (the
    separator of a CSV's list of flags)."""
    try:
        return function(*args, **kwargs), ""
    except Exception as error:  # noqa: BLE001 - whatever a handin causes is that handin's finding
        return None, f"{what} could not be inspected ({describe(error)})"


def describe(error: BaseException) -> str:
    """``"<ExceptionType>: <message>"`` on one line, the message shortened, "; " made ", "."""
    message = " ".join(str(error).split())[:MESSAGE_CHARS].replace("; ", ", ")
    return f"{type(error).__name__}: {message}" if message else type(error).__name__


def read_bounded(path: Path, limit: int) -> bytes:
    """The bytes of ``path``; ValueError, naming the file and the limit, when it holds more than
    ``limit`` bytes (at most ``limit`` bytes and one buffer past them are read)."""
    with open(path, "rb") as file:
        data = file.read(limit)
        if file.peek():  # a byte past the limit
            raise ValueError(f"{path.name} is larger than {limit} bytes, the most the grader's "
                             f"inspection reads")
    return data
