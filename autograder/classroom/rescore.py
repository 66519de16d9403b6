"""Rescore a graded class when only the scoring line changed: no handin is graded again.

    python -m autograder.classroom.regrade --rescore-only [--out regrade] [--autograder dist]
    make rescore [OUT=regrade]

A grader is recorded as two things, in its ``build_info.json`` (``tools/make_autograde.py``) and
in each grades.csv row it writes:

- ``grader_sha256``, its identity: what decides each hidden test's outcome and each measured
  perplexity, that is every file of autograde.tar (code, hidden tests, hidden set) and its Makefile,
  less the numbers of the scoring line (``hw4lib/grading_numbers.py`` and the points of each
  ``@hidden_test(category, points)`` decorator) and ``build_info.json`` itself;
- ``scoring``, its scoring line (JSON): the points of each hidden test, of each category, and the
  language model's two thresholds, which turn those outcomes into points.

When a grader with a row's identity has another scoring line (``make autograde
ARGS='--full-marks-ppl 3.2'``, or points moved in ``hw4lib/grading_numbers.py`` and the
decorators), the row's points are computed again from its recorded results with the grader's own
functions: ``rubric.lm_score`` on the recorded perplexity, ``rubric.added`` over the points of the
tests it passed (a hidden test earns all its points or none). That takes seconds for a class, where
grading it again takes an hour. A row is rescored only when its recorded results give back its
recorded points under its own scoring line; otherwise it is graded again and the log says why.
``make regrade`` does this by itself (it grades only what changed otherwise: :func:`decide`,
:func:`apply_rescore`); ``make rescore`` rescores grades.csv without the handins and lists the
rows only a regrade can update (:func:`rescore_class`).

A rescore changes grades.csv, summary.txt and the top of each changed feedback file, not what
Autolab or Gradescope show: import grades.csv with ``make gradebook``. The staff's adjustments
(``adjustments.csv``, ``autograder/classroom/adjustments.py``) apply again on top, and a hand edit
of grades.csv's points is refused, naming the line that keeps it.
"""
from __future__ import annotations

import hashlib
import json
import re
import sys
import tarfile
from dataclasses import dataclass
from pathlib import Path

from autograder.classroom.class_summary import summarize
from autograder.classroom.grades_csv import feedback_path, read_settled, write_rows
from autograder.judging import grading_run
from autograder.judging.scoring import rubric
from autograder.judging.scoring.hidden_tests.mytorch_hidden import tests_of
from autograder.judging.scoring.report import Status
from hw4lib import grading_numbers
from hw4lib.file_io import file_sha256

BUILD_INFO_NAME = "build_info.json"
# What holds only the scoring line's numbers, left out of the grader's identity: the archive's
# hw4lib/grading_numbers.py, and the points of each decorator in the hidden tests' modules.
NUMBERS_MODULE = f"{grading_numbers.__name__.replace('.', '/')}.py"
HIDDEN_TESTS_DIR = "autograder/judging/scoring/hidden_tests/"
DECORATOR_POINTS = re.compile(rb"(@hidden_test\([^,()]+,)[^()]*\)")
# The keys of build_info.json that make the scoring line.
SCORING_KEYS = ("rubric", "test_points", "lm_thresholds")

GRADE, RESCORE, KEEP = "grade", "rescore", "keep"
UNCHANGED = "unchanged: the same handin, grader and scoring line"
CRASHED_AGAIN = "it crashed last time (the grader failed, not the student): graded again"


class NotRescorable(Exception):
    """A row whose recorded results cannot be rescored; the message says why."""


@dataclass(frozen=True)
class Grader:
    """A built grader as the class tools compare it: its identity, its scoring line (None for a
    grader built before scoring lines were recorded: its identity is then its files' sha256)."""

    identity: str
    scoring: dict | None

    @property
    def scoring_text(self) -> str:
        """The scoring line as grades.csv's ``scoring`` cell ('' when not recorded)."""
        return scoring_text(self.scoring) if self.scoring else ""


def scoring_text(scoring: dict) -> str:
    return json.dumps(scoring, separators=(",", ":"))


def grader_identity(members: dict[str, bytes], makefile: str) -> str:
    """sha256 of a grader's archive ``members`` ({path inside the archive root: bytes}) and its
    ``makefile`` text, without the scoring line's numbers and build_info.json."""
    digest = hashlib.sha256()
    for name in sorted(members):
        if name in (NUMBERS_MODULE, BUILD_INFO_NAME):
            continue
        data = members[name]
        if name.startswith(HIDDEN_TESTS_DIR):
            data = DECORATOR_POINTS.sub(rb"\1 _)", data)
        digest.update(f"{name}\0{len(data)}\0".encode())
        digest.update(data)
    digest.update(makefile.encode("utf-8"))
    return digest.hexdigest()


def hidden_test_points() -> dict[str, dict[str, float]]:
    """{mytorch category: {hidden test: its points}}, in the order the judge runs them."""
    return {category: {test.name: float(test.points) for test in tests_of(category)}
            for category in rubric.MYTORCH_RUBRIC}


def scoring_line(points: dict[str, float], test_points: dict[str, dict[str, float]],
                 full_marks_ppl: float, zero_marks_ppl: float) -> dict:
    """The scoring line as build_info.json records it: ``points`` {category: points},
    ``test_points`` {mytorch category: {hidden test: points}, in the order the judge runs them}."""
    return {"rubric": dict(points), "test_points": test_points,
            "lm_thresholds": {"full_marks_ppl": full_marks_ppl, "zero_marks_ppl": zero_marks_ppl}}


def read_build_info(tar: Path) -> dict | None:
    """The build_info.json of an autograde.tar (``autograde/build_info.json``), or None."""
    try:
        with tarfile.open(tar) as archive:
            for member in archive:
                if member.isfile() and member.name.count("/") == 1 \
                        and member.name.endswith("/" + BUILD_INFO_NAME):
                    info = json.loads(archive.extractfile(member).read())
                    return info if isinstance(info, dict) else None
    except (OSError, tarfile.TarError, ValueError):
        return None
    return None


def grader_of(tar: Path, makefile: Path) -> Grader:
    """The grader of ``tar`` and ``makefile`` (``make autograde``'s two files)."""
    info = read_build_info(tar)
    if info and isinstance(info.get("grader_sha256"), str) and all(key in info
                                                                    for key in SCORING_KEYS):
        return Grader(info["grader_sha256"], {key: info[key] for key in SCORING_KEYS})
    return Grader(file_sha256(tar, makefile), None)


def outcomes(row: dict, scoring: dict) -> tuple[dict[str, bool], float | None]:
    """({hidden test: passed}, the measured perplexity or None) recorded in ``row`` (a grades.csv
    row) graded under ``scoring``. A test without a cell did not run (it earned nothing)."""
    passed = {}
    for tests in scoring["test_points"].values():
        for name, points in tests.items():
            cell = row.get(f"test:{name}", "")
            if cell in ("", None):
                continue
            earned = float(cell)
            if earned not in (0, points):
                raise NotRescorable(f"its test {name} earned {earned:g} of its {points:g} points")
            passed[name] = earned == points
    cell = row.get("perplexity_recomputed", "")
    return passed, (None if cell in ("", None) else float(cell))


def scores(passed: dict[str, bool], perplexity: float | None, scoring: dict) -> dict[str, float]:
    """Every category's points for these outcomes under ``scoring``, as the judge awards them."""
    result = {category: rubric.added(points for name, points in tests.items() if passed.get(name))
              for category, tests in scoring["test_points"].items()}
    thresholds = scoring["lm_thresholds"]
    result[rubric.LM_CATEGORY] = rubric.lm_score(perplexity, thresholds["full_marks_ppl"],
                                                 thresholds["zero_marks_ppl"],
                                                 scoring["rubric"][rubric.LM_CATEGORY])
    return result


def rescored(row: dict, old: dict, new: dict) -> tuple[dict[str, float], dict[str, float]]:
    """(every category's points, every recorded test's points) of ``row`` under the scoring line
    ``new``, from its results recorded under ``old``; NotRescorable when they cannot be computed or
    do not give back the row's own points under ``old``."""
    if set(old["rubric"]) != set(new["rubric"]) or set(new["rubric"]) != set(rubric.RUBRIC):
        raise NotRescorable(f"the categories changed ({', '.join(old['rubric'])} -> "
                            f"{', '.join(new['rubric'])})")
    try:
        passed, perplexity = outcomes(row, old)
        recorded = {category: float(row.get(category) or 0) for category in rubric.RUBRIC}
    except (TypeError, ValueError) as error:
        raise NotRescorable(f"a cell is not a number ({error})") from None
    again = scores(passed, perplexity, old)
    differ = [f"{category} {again[category]:g}, recorded {recorded[category]:g}"
              for category in rubric.RUBRIC if again[category] != recorded[category]]
    if differ:
        raise NotRescorable(f"its recorded results do not give back its points under its own "
                            f"scoring line ({'; '.join(differ)})")
    test_points = {name: (points if passed[name] else 0.0)
                   for tests in new["test_points"].values() for name, points in tests.items()
                   if name in passed}
    return scores(passed, perplexity, new), test_points


def apply(row: dict, old: dict, new: dict) -> list[str]:
    """Rescore ``row`` in place from ``old`` to ``new`` (see :func:`rescored`); return what changed
    ('LanguageModel 40 -> 45.5', ...; empty when its points stay)."""
    points, test_points = rescored(row, old, new)
    before = {category: float(row.get(category) or 0) for category in rubric.RUBRIC}
    before["total"] = float(row.get("total") or 0)
    after = {**points, "total": rubric.added(points[category] for category in rubric.RUBRIC)}
    row.update(after)
    row.update({f"test:{name}": value for name, value in test_points.items()})
    row["scoring"] = scoring_text(new)
    return [f"{key} {before[key]:g} -> {after[key]:g}" for key in after
            if before[key] != after[key]]


def changes(old: dict, new: dict) -> str:
    """What differs between two scoring lines, in a few words."""
    found = []
    for key, what in (("full_marks_ppl", "full marks at perplexity <="),
                      ("zero_marks_ppl", "none at >=")):
        before, after = old["lm_thresholds"].get(key), new["lm_thresholds"].get(key)
        if before != after:
            found.append(f"{what} {before} -> {after}")
    for category in dict.fromkeys([*old["rubric"], *new["rubric"]]):
        before, after = old["rubric"].get(category), new["rubric"].get(category)
        if before != after:
            found.append(f"{category} {before} -> {after} points")
    old_tests = {name: points for tests in old["test_points"].values()
                 for name, points in tests.items()}
    moved = [name for tests in new["test_points"].values() for name, points in tests.items()
             if old_tests.get(name) != points]
    if moved:
        found.append(f"the points of {len(moved)} hidden test(s): {', '.join(moved[:3])}"
                     f"{', ...' if len(moved) > 3 else ''}")
    return "; ".join(found) or "the same numbers, recorded differently"


def decide(row: dict, handin_sha: str | None, grader: Grader,
           force: bool = False) -> tuple[str, str]:
    """(GRADE, RESCORE or KEEP, why) for a handin recorded as ``row`` ({} when not graded yet) and
    ``grader``; a crashed row is always graded again. ``handin_sha``: the handin's sha256, or None when the handin is not at hand
    (``make rescore``: the recorded results are what is rescored)."""
    if not row:
        return GRADE, "not graded yet"
    if force:
        return GRADE, "--force"
    if row.get("status") == Status.CRASHED:  # no result of the handin's: never kept
        return GRADE, CRASHED_AGAIN
    if handin_sha is not None and row.get("handin_sha256") != handin_sha:
        return GRADE, "its handin changed since it was graded"
    if row.get("grader_sha256") != grader.identity:
        return GRADE, "graded by another grader (its code or hidden set changed)"
    if (row.get("scoring") or "") == grader.scoring_text:
        return KEEP, UNCHANGED
    if grader.scoring is None or not row.get("scoring"):
        return GRADE, "the scoring line it was graded with is not recorded"
    try:
        old = json.loads(row["scoring"])
        rescored(row, old, grader.scoring)
    except (NotRescorable, ValueError, KeyError, TypeError, AttributeError) as why:
        return GRADE, f"the scoring line changed and its results cannot be rescored: {why}"
    return RESCORE, f"rescored from its recorded results ({changes(old, grader.scoring)})"


def why_lines(reasons: dict[str, str], shown: int = 20) -> list[str]:
    """One line per reason: how many handins, and which (all but the unchanged, the first
    ``shown``)."""
    groups: dict[str, list[str]] = {}
    for key in sorted(reasons):
        groups.setdefault(reasons[key], []).append(key)
    lines = []
    for reason, keys in sorted(groups.items(), key=lambda item: -len(item[1])):
        names = "" if reason == UNCHANGED else ": " + ", ".join(keys[:shown]) + (
            f" and {len(keys) - shown} more" if len(keys) > shown else "")
        lines.append(f"  {len(keys)} {reason}{names}")
    return lines


def apply_rescore(rows: dict[str, dict], keys: set[str], grader: Grader, out: Path,
                  shown: int = 20) -> str:
    """Rescore ``rows[key]`` for each of ``keys`` under ``grader``'s scoring line; note it at the
    top of each changed row's feedback; write rescore.txt; return its first ``shown`` changes."""
    changed, why = [], set()
    for key in sorted(keys):
        old = json.loads(rows[key]["scoring"])
        why.add(changes(old, grader.scoring))
        before = rows[key]["total"]
        differences = apply(rows[key], old, grader.scoring)
        if not differences:
            continue
        changed.append(f"{key}: {', '.join(differences)}")
        feedback = feedback_path(out, key)
        if feedback.is_file():
            feedback.write_text(
                f"Rescored after this grading, which was not run again: the scoring line changed "
                f"({changes(old, grader.scoring)}). This handin now earns "
                f"{', '.join(differences)} (total was {before}); the points below are those "
                f"of the old line.\n\n" + feedback.read_text(encoding="utf-8", errors="replace"),
                encoding="utf-8")
    text = (f"{len(keys)} rows rescored from their recorded results, none graded again "
            f"(the scoring line changed: {' | '.join(sorted(why))}); {len(changed)} changed "
            f"points, {len(keys) - len(changed)} kept them\n" + "".join(f"  {line}\n"
                                                                      for line in changed))
    (out / "rescore.txt").write_text(text, encoding="utf-8")
    lines = text.splitlines(keepends=True)
    return "".join(lines[:shown + 1]) + (f"  ... and {len(lines) - shown - 1} more in "
                                         f"{out / 'rescore.txt'}\n" if len(lines) > shown + 1
                                         else "")


def rescore_class(out: Path, source: Path) -> dict[str, dict]:
    """``make rescore``: rescore the rows of ``out/grades.csv`` under the scoring line of the
    grader in ``source``, without the handins; list the rows only a regrade can update."""
    grader = grader_in(source)
    csv_path = out / "grades.csv"
    rows, staff = read_settled(csv_path)
    if not rows:
        raise SystemExit(f"{csv_path} holds no graded row: run `make regrade` first")
    decided = {key: decide(row, None, grader) for key, row in rows.items()}
    print(f"{len(rows)} rows in {csv_path}:", file=sys.stderr)
    print("\n".join(why_lines({key: why for key, (_, why) in decided.items()})), file=sys.stderr)
    keys = {key for key, (action, _) in decided.items() if action == RESCORE}
    if keys:
        print(apply_rescore(rows, keys, grader, out), end="", file=sys.stderr)
    write_rows(csv_path, rows, staff)  # also when no point moved: adjustments may have
    stale = sum(action == GRADE for action, _ in decided.values())
    if stale:
        print(f"{stale} rows can only be updated by grading them again: `make regrade "
              f"HANDINS=<the download> OUT={out}` grades those alone", file=sys.stderr)
    print(summarize(rows, out), end="", file=sys.stderr)
    return rows


def grader_in(source: Path) -> Grader:
    """The grader of ``source``'s autograde.tar and autograde-Makefile (SystemExit naming the fix
    when either is missing)."""
    for name in (grading_run.AUTOGRADE_TAR, grading_run.MAKEFILE):
        if not (source / name).is_file():
            raise SystemExit(f"{source / name} not found: run `make autograde` first (or give "
                             f"--autograder the folder holding {grading_run.AUTOGRADE_TAR} and "
                             f"{grading_run.MAKEFILE})")
    return grader_of(source / grading_run.AUTOGRADE_TAR, source / grading_run.MAKEFILE)
