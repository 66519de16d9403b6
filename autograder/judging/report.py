"""The grading report: what the judge (``autograder/judging/grade.py``) found about one handin, as
one typed record. The judge writes it as ``details.json`` (``--results-json``); every tool that
reads a grading (the Gradescope adapter, the bulk regrade and the rows it gives the rescore and the
gradebook, the leaderboard) reads it through :func:`load` or :func:`from_json`, the one parser.
Standard library only: the Gradescope adapter reads it.

Its JSON form is one object, each field of :class:`GradingReport` a key:

- ``version`` (int): :data:`VERSION`; a report of another version is refused, naming the fix;
- ``status``: one of :class:`Status`;
- ``scores`` ({category: points}): the scores line the judge printed;
- ``tests`` ([:class:`TestResult`]): every hidden mytorch test's outcome, in grading order;
- ``lm`` (:class:`LanguageModelResult` or null when the judge stopped before the model);
- ``sandbox`` (str or null): the isolation mode the worker ran under;
- ``handin_notes`` ([str]): the extraction's notes, as every channel shows them;
- ``flags`` ([str]): the integrity facts for the staff (no score depends on them);
- ``seconds`` ({category: wall seconds of its grading});
- ``weights_sha256`` (str): sha256 of the handin's state dict file, '' when it has none (the class
  tools compare students' weights by it without opening the handin);
- ``model_child`` (str): "forked from the judge", or "started fresh: <why the fork was refused>"
  ('' when the judge stopped before it);
- ``threads`` ({threads, cpus, load, gradings, why} or null): the math threads the judge chose
  for itself and its model child (``autograder/judging/thread_policy.py``), and why;
- ``runtime_code`` ([str]): where the handin's mytorch builds code at run time, "<what>
  (<path>:<line>)" (``autograder/judging/static_inspection.py``, never run);
- ``static_findings`` ([str]): what that inspection found for the staff: a file (or the whole
  mytorch) that could not be inspected, a graded file that defines no graded class of its own.

Version 2 added the last two, so that the class tools never extract a handin again; they read
only reports of the grader they graded with, so a version-1 report is refused like any other.
"""
from __future__ import annotations

import dataclasses
import enum
import json
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path

from hw4lib.file_io import write_json

VERSION = 2
FIX = ("grade the handin again with this commit's `make autograde`, whose judge writes the report "
       "these tools read")


class ReportError(ValueError):
    """A details.json that is not a grading report of :data:`VERSION`; the message names the fix."""


class Status(enum.StrEnum):
    """How a grading ended."""

    OK = "ok"
    INVALID = "invalid"  # no handin to grade (an archive refused, or one missing a part)
    TIMEOUT = "timeout"  # a part hit its time limit
    CRASHED = "crashed"  # the grader itself failed (or its report could not be read)


def _checked(record) -> None:
    """Raise ReportError unless each field of the dataclass ``record`` has its annotated type."""
    hints = typing.get_type_hints(type(record))
    for item in dataclasses.fields(record):
        value = getattr(record, item.name)
        if not _has_type(value, hints[item.name]):
            raise ReportError(f"{type(record).__name__}.{item.name} is {value!r:.80}, not "
                              f"{_described(hints[item.name])}: {FIX}")


def _described(hint) -> str:
    """A type as a report's reader would name it: a class by its name, the Status by its values."""
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        return " or ".join(repr(member.value) for member in hint)
    return hint.__name__ if isinstance(hint, type) else str(hint)


def _has_type(value, hint) -> bool:
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        return any(_has_type(value, arg) for arg in args)
    if origin is list:
        return isinstance(value, list) and all(_has_type(item, args[0]) for item in value)
    if origin is dict:
        return isinstance(value, dict) and all(
            isinstance(key, str) and _has_type(item, args[1]) for key, item in value.items())
    if hint is type(None):
        return value is None
    if hint is float:  # JSON writes 2.0 as 2.0, but the judge's zero scores are ints
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    return isinstance(value, hint)


@dataclass
class TestResult:
    """The outcome of one hidden test, as both platforms report it."""

    __test__ = False  # a record, not a test class for pytest to collect
    name: str
    category: str
    max_points: float
    points: float
    summary: str  # what the test checks
    message: str  # empty when it passed; what differed otherwise (no hidden inputs)
    hint: str = ""  # the likely bug, when the category's failures point to one (diagnosis.py)
    family: str = ""  # that bug's family, for the staff (the regrade's counts, the hint report)
    seconds: float | None = None  # from its request to its answer (Lockstep); None: never asked

    def __post_init__(self) -> None:
        _checked(self)

    @property
    def passed(self) -> bool:
        return self.points == self.max_points


@dataclass
class LanguageModelResult:
    """The language model's grading: ``message`` (what the student sees) always; the rest when
    the model child measured the weights (``perplexity_char`` set) or, ``timed_out``, ran out of
    time. The digests, the fingerprint and the compared numbers are for the staff."""

    message: str
    timed_out: bool = False
    perplexity_char: float | None = None  # on the hidden test set
    seconds: float | None = None  # the model child's wall time
    phase_seconds: dict[str, float] | None = None  # {phase: seconds} inside the model child
    reported_perplexity_char: float | None = None  # the handin's own test_metrics.json
    compared_perplexity_char: float | None = None  # the weights on the transcripts it reported on
    compare_note: str = ""  # why nothing was compared, when nothing was
    # the run card's transcripts re-measured, one by one (grade_model.compare_with_report)
    compared_sample: dict | None = None
    num_parameters: int | None = None
    token_type: str | None = None
    state_dict_sha256: str | None = None
    config_sha256: str | None = None
    weights_fingerprint: str | None = None  # autograder/judging/weights_fingerprint.py's encoding
    hint: str | None = None  # the likely cause of a high perplexity

    def __post_init__(self) -> None:
        _checked(self)

    def scoreboard(self) -> list | None:
        """The leaderboard's row, [perplexity, parameters, tokenizer] as the judge measured them
        (rubric.SCOREBOARD_COLUMNS), or None when the model was not measured."""
        if self.perplexity_char is None:
            return None
        # 2 decimals, as in the feedback: the board is public, and it must not sharpen an oracle
        # of the hidden set
        return [round(self.perplexity_char, 2), self.num_parameters, self.token_type]


@dataclass
class GradingReport:
    """One grading, as the judge found it (fields: the module docstring's JSON form)."""

    version: int = VERSION
    status: Status = Status.OK
    scores: dict[str, float] = field(default_factory=dict)
    tests: list[TestResult] = field(default_factory=list)
    lm: LanguageModelResult | None = None
    sandbox: str | None = None
    handin_notes: list[str] = field(default_factory=list)
    flags: list[str] = field(default_factory=list)
    seconds: dict[str, float] = field(default_factory=dict)
    weights_sha256: str = ""
    model_child: str = ""  # how the model child started: forked from the judge, or why fresh
    threads: dict[str, int | float | str] | None = None  # thread_policy.report: the math threads
    runtime_code: list[str] = field(default_factory=list)  # static_inspection: code made at run time
    static_findings: list[str] = field(default_factory=list)  # static_inspection: for the staff

    def __post_init__(self) -> None:
        if self.version != VERSION:
            raise other_version(self.version)
        _checked(self)

    def scoreboard(self) -> list | None:
        """The leaderboard's row (LanguageModelResult.scoreboard), None without a measurement."""
        return self.lm.scoreboard() if self.lm is not None else None

    def to_json(self) -> dict:
        """The JSON form (the module docstring): plain dicts, lists, strings and numbers."""
        return dataclasses.asdict(self)


def other_version(version) -> ReportError:
    """The error refusing a report of ``version``, naming both versions and the fix."""
    return ReportError(f"a grading report of version {version!r:.20}, and this tool reads version "
                       f"{VERSION}: read it with the class tools of the commit its autograder was "
                       f"built from, or grade the handins again with this commit's `make "
                       f"autograde`")


def from_json(data) -> GradingReport:
    """The report whose JSON form is ``data`` (a parsed details.json); ReportError naming what is
    wrong and the fix when it is not one of this version."""
    if not isinstance(data, dict):
        raise ReportError(f"a grading report is a JSON object, not {type(data).__name__}: "
                          f"{FIX}")
    if "version" not in data:
        raise ReportError(f"a grading report without a version (written before reports had one): "
                          f"{FIX}")
    if data["version"] != VERSION:  # before its fields: another version may have other ones
        raise other_version(data["version"])
    try:
        data = dict(data)
        if isinstance(data.get("status"), str) and data["status"] in set(Status):
            data["status"] = Status(data["status"])
        if isinstance(data.get("lm"), dict):
            data["lm"] = LanguageModelResult(**data["lm"])
        if isinstance(data.get("tests"), list):
            data["tests"] = [TestResult(**test) if isinstance(test, dict) else test
                             for test in data["tests"]]
        return GradingReport(**data)
    except TypeError as error:  # a key missing or unknown
        raise ReportError(f"not a grading report of version {VERSION} ({error}): {FIX}") from None


def load(path: Path) -> GradingReport:
    """The report in ``path`` (a details.json); ReportError naming the file, the problem and the
    fix when it is missing, not JSON or not a report of this version."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError) as error:
        raise ReportError(f"{path}: no readable grading report ({type(error).__name__}): "
                          f"{FIX}") from None
    try:
        return from_json(data)
    except ReportError as error:
        raise ReportError(f"{path}: {error}") from None


def write(path: Path, report: GradingReport) -> None:
    """Write ``report``'s JSON form to ``path`` atomically (a reader never sees half a file)."""
    write_json(path, report.to_json())
