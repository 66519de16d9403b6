"""The grading report: what the judge (``autograder/judging/grade.py``) found about one handin, as
one typed record. The judge writes it as ``details.json`` (``--results-json``); every tool that
reads a grading (the Gradescope adapter, the bulk regrade and the rows it gives the rescore and the
gradebook, the leaderboard) reads it through :func:`load` or :func:`from_json`, the one parser.

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
  for itself and its model child (``autograder/judging/isolation/thread_policy.py``), and why;
- ``runtime_code`` ([str]): where the handin's mytorch builds code at run time, "<what>
  (<path>:<line>)" (``autograder/judging/intake/static_inspection.py``, never run);
- ``static_findings`` ([str]): what that inspection found for the staff: a file (or the whole
  mytorch) that could not be inspected, a graded file that defines no graded class of its own.

Version 2 added the last two, so that the class tools never extract a handin again; they read
only reports of the grader they graded with, so a version-1 report is refused like any other.

The schema is the three records below, pydantic dataclasses: a report is validated when it is
built (the judge's, or one read by :func:`from_json`), and again when :func:`write` writes it
(the judge sets fields after building it). pydantic is in requirements-grader.txt; the Gradescope
adapter and ``grading_run``, which import the standard library only, import this module only when
they read a report.
"""
from __future__ import annotations

import dataclasses
import enum
import functools
import itertools
import typing
from pathlib import Path

from pydantic import ConfigDict, StrictBool, StrictFloat, StrictInt, StrictStr, ValidationError
from pydantic.dataclasses import dataclass

from hw4lib.file_io import read_json, write_json

VERSION = 2
FIX = ("grade the handin again with this commit's `make autograde`, whose judge writes the report "
       "these tools read")
# A number keeps the type it was written with (the judge's zero scores are ints, JSON writes them
# as 0), so that a report read and written again has the same bytes; never a bool or a text.
Number = StrictInt | StrictFloat
# Every key of a report is a field: one the schema does not name is refused, never dropped.
RECORD = ConfigDict(extra="forbid")


class ReportError(ValueError):
    """A details.json that is not a grading report of :data:`VERSION`; the message names the fix."""


class Status(enum.StrEnum):
    """How a grading ended."""

    OK = "ok"
    INVALID = "invalid"  # no handin to grade (an archive refused, or one missing a part)
    TIMEOUT = "timeout"  # a part hit its time limit
    CRASHED = "crashed"  # the grader itself failed (or its report could not be read)


def record(cls: type) -> type:
    """``cls`` as a pydantic dataclass of the report's schema, whose refusal of the values it is
    built from (arguments, or a details.json's objects, nested ones included) is a ReportError
    (:func:`refusal`)."""
    cls = dataclass(config=RECORD)(cls)
    validated = cls.__init__

    @functools.wraps(validated)  # pragma: no mutate (equivalent: only the name and doc of __init__ differ; nothing reads them)
    def __init__(self, *args, **kwargs) -> None:
        try:
            validated(self, *args, **kwargs)
        except ValidationError as error:
            raise refusal(cls, error) from None

    cls.__init__ = __init__
    return cls


def refusal(built: type, error: ValidationError) -> ReportError:
    """The ReportError for pydantic's ``error`` building a ``built``: the first field refused, as
    ``Record.field[key]`` (the innermost record's: ``TestResult.points``, not
    ``GradingReport.tests``), what it holds and what it must hold, and the fix."""
    first = error.errors()[0]
    cause = first.get("ctx", {}).get("error")
    if isinstance(cause, ReportError):  # raised by a record's own check (the version)
        return cause
    if not first["loc"]:
        return ReportError(f"{built.__name__}: {first['msg']}: {FIX}")
    owner, name, _ = field_of(built, first["loc"])
    if first["type"] == "missing":
        return ReportError(f"{owner.__name__}.{name} is missing: {FIX}")
    if first["type"].startswith("unexpected_"):
        return ReportError(f"{owner.__name__}.{name} is not a field of the report: {FIX}")
    # A union (a Number) refuses once per member, the member's name ending the location
    group = [(field_of(built, item["loc"])[2], item["msg"].removeprefix("Input should be "))
             for item in error.errors() if field_of(built, item["loc"])[:2] == (owner, name)]
    path = [key for key, *_ in itertools.takewhile(lambda keys: len(set(keys)) == 1,
                                                   zip(*(inside for inside, _ in group)))]
    wanted = " or ".join(dict.fromkeys(message for _, message in group))
    return ReportError(f"{owner.__name__}.{name}{''.join(f'[{key!r}]' for key in path)} is "
                       f"{first['input']!r:.80}, not {wanted}: {FIX}")


def field_of(built: type, loc: tuple) -> tuple[type, str, tuple]:
    """(record, field, location inside the field) that a pydantic error's location ``loc`` in a
    ``built`` ends in: its innermost record's field, a positional argument by its field's name."""
    names = [item.name for item in dataclasses.fields(built)]
    name = names[loc[0]] if isinstance(loc[0], int) and loc[0] < len(names) else str(loc[0])
    inner = nested_record(typing.get_type_hints(built).get(name))
    rest = loc[1:]
    item = rest[1:] if rest and isinstance(rest[0], int) else rest  # inside a list's item
    return field_of(inner, item) if inner is not None and item else (built, name, rest)


def nested_record(hint) -> type | None:
    """The record class inside the type ``hint`` (``list[TestResult]``: TestResult), if any."""
    if dataclasses.is_dataclass(hint):
        return hint
    return next(filter(None, map(nested_record, typing.get_args(hint))), None)


@record
class TestResult:
    """The outcome of one hidden test, as both platforms report it."""

    __test__ = False  # pragma: no mutate (equivalent: pytest only warns on a class it cannot collect)
    name: StrictStr
    category: StrictStr
    max_points: Number
    points: Number
    summary: StrictStr  # what the test checks
    message: StrictStr  # empty when it passed; what differed otherwise (no hidden inputs)
    # the likely bug, when the category's failures point to one (diagnosis.py)
    hint: StrictStr = ""
    family: StrictStr = ""  # that bug's family, for the staff (the regrade's counts, hint report)
    seconds: Number | None = None  # from its request to its answer (Lockstep); None: never asked

    @property
    def passed(self) -> bool:
        return self.points == self.max_points


@record
class LanguageModelResult:
    """The language model's grading: ``message`` (what the student sees) always; the rest when
    the model child measured the weights (``perplexity_char`` set) or, ``timed_out``, ran out of
    time. The digests, the fingerprint and the compared numbers are for the staff."""

    message: StrictStr
    timed_out: StrictBool = False
    perplexity_char: Number | None = None  # on the hidden test set
    seconds: Number | None = None  # the model child's wall time
    phase_seconds: dict[StrictStr, Number] | None = None  # {phase: seconds} inside the model child
    reported_perplexity_char: Number | None = None  # the handin's own test_metrics.json
    compared_perplexity_char: Number | None = None  # the weights on the transcripts it reported on
    compare_note: StrictStr = ""  # why nothing was compared, when nothing was
    # the run card's transcripts re-measured, one by one (grade_model.compare_with_report)
    compared_sample: dict | None = None
    num_parameters: StrictInt | None = None
    token_type: StrictStr | None = None
    state_dict_sha256: StrictStr | None = None
    config_sha256: StrictStr | None = None
    # autograder/judging/scoring/weights_fingerprint.py's encoding
    weights_fingerprint: StrictStr | None = None
    hint: StrictStr | None = None  # the likely cause of a high perplexity

    def scoreboard(self) -> list | None:
        """The leaderboard's row, [perplexity, parameters, tokenizer] as the judge measured them
        (rubric.SCOREBOARD_COLUMNS), or None when the model was not measured."""
        if self.perplexity_char is None:
            return None
        # 2 decimals, as in the feedback: the board is public, and it must not sharpen an oracle
        # of the hidden set
        return [round(self.perplexity_char, 2), self.num_parameters, self.token_type]


@record
class GradingReport:
    """One grading, as the judge found it (fields: the module docstring's JSON form)."""

    version: StrictInt = VERSION
    status: Status = Status.OK
    scores: dict[StrictStr, Number] = dataclasses.field(default_factory=dict)
    tests: list[TestResult] = dataclasses.field(default_factory=list)
    lm: LanguageModelResult | None = None
    sandbox: StrictStr | None = None
    handin_notes: list[StrictStr] = dataclasses.field(default_factory=list)
    flags: list[StrictStr] = dataclasses.field(default_factory=list)
    seconds: dict[StrictStr, Number] = dataclasses.field(default_factory=dict)
    weights_sha256: StrictStr = ""
    # how the model child started: forked from the judge, or why fresh
    model_child: StrictStr = ""
    # thread_policy.report: the math threads
    threads: dict[StrictStr, Number | StrictStr] | None = None
    # static_inspection: code made at run time, and what it found for the staff
    runtime_code: list[StrictStr] = dataclasses.field(default_factory=list)
    static_findings: list[StrictStr] = dataclasses.field(default_factory=list)

    def __post_init__(self) -> None:
        if self.version != VERSION:
            raise other_version(self.version)

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
    return GradingReport(**data)


def load(path: Path) -> GradingReport:
    """The report in ``path`` (a details.json); ReportError naming the file, the problem and the
    fix when it is missing, not JSON or not a report of this version."""
    try:
        data = read_json(path)
    except (OSError, ValueError, RecursionError) as error:
        raise ReportError(f"{path}: no readable grading report ({type(error).__name__}): "
                          f"{FIX}") from None
    try:
        return from_json(data)
    except ReportError as error:
        raise ReportError(f"{path}: {error}") from None


def write(path: Path, report: GradingReport) -> None:
    """Write ``report``'s JSON form to ``path`` atomically (a reader never sees half a file), once
    :func:`from_json` reads it back: ReportError, and nothing written, when a field set after the
    report was built (as the judge does) is not of its type."""
    data = report.to_json()
    from_json(data)
    write_json(path, data)
