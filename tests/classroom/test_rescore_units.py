# hw4p1: instructor-only
"""The rescore's decisions one by one (autograder/classroom/rescore.py), without a grading: each
branch of :func:`rescore.decide` in its order, the grader read from its build_info.json (and
where it is not one), which bytes make the grader's identity, what a scoring line's change is
called, the reasons' lines and their cut, and what a rescore writes at the top of a changed
row's feedback (and not of a kept one's). Every expected value is worked out by hand here.

    .venv/bin/python -m pytest -q -n 0 tests/classroom/test_rescore_units.py
"""
import io
import json
import tarfile
from dataclasses import FrozenInstanceError
from pathlib import Path

import pytest

from autograder.classroom import rescore
from autograder.classroom.grades_csv import write_rows
from autograder.judging.scoring import rubric
from autograder.judging.scoring.report import Status

CATEGORIES = list(rubric.MYTORCH_RUBRIC)


def line(full: float = 3.5, zero: float = 4.5, first: float = 2.0, lm: float = rubric.LM_POINTS
         ) -> dict:
    """A scoring line: mytorch category i has the one test t<i> worth ``first`` (i = 0) or 10."""
    tests = {category: {f"t{index}": first if index == 0 else 10.0}
             for index, category in enumerate(CATEGORIES)}
    points = {category: sum(tests[category].values()) for category in CATEGORIES}
    return rescore.scoring_line({**points, rubric.LM_CATEGORY: lm}, tests, full, zero)


def row_under(graded_with: dict, **cells) -> dict:
    """A grades.csv row graded under the line ``graded_with``: t0 passed, every other test
    failed, perplexity 4.5 (no LM points)."""
    first = graded_with["test_points"][CATEGORIES[0]]["t0"]
    row = {"student": "ann", "status": "ok", "handin_sha256": "h", "grader_sha256": "g",
           "scoring": rescore.scoring_text(graded_with), "perplexity_recomputed": "4.5",
           **{category: "0.0" for category in rubric.RUBRIC}, CATEGORIES[0]: str(first),
           "total": str(first), "test:t0": str(first),
           **{f"test:t{index}": "0.0" for index in range(1, len(CATEGORIES))}}
    return {**row, **cells}


@pytest.mark.parametrize("row, handin, force, action, why", [
    ({}, "h", True, rescore.GRADE, "not graded yet"),
    (row_under(line()), "h", True, rescore.GRADE, "--force"),
    (row_under(line(), status=Status.CRASHED), "h", False, rescore.GRADE, rescore.CRASHED_AGAIN),
    (row_under(line()), "other", False, rescore.GRADE,
     "its handin changed since it was graded"),
    (row_under(line(), handin_sha256="other"), None, False, rescore.KEEP, rescore.UNCHANGED),
    (row_under(line(), grader_sha256="other"), "h", False, rescore.GRADE,
     "graded by another grader (its code or hidden set changed)"),
    (row_under(line()), "h", False, rescore.KEEP, rescore.UNCHANGED)])
def test_each_branch_of_decide_in_its_order(row, handin, force, action, why):
    assert rescore.decide(row, handin, rescore.Grader("g", line()), force) == (action, why)


def test_a_changed_line_is_rescored_unless_a_line_is_not_recorded_or_cannot_be_read():
    grader = rescore.Grader("g", line(full=3.0))
    assert rescore.decide(row_under(line()), "h", grader) == (
        rescore.RESCORE, "rescored from its recorded results (full marks at perplexity <= 3.5 "
                         "-> 3.0)")
    not_recorded = "the scoring line it was graded with is not recorded"
    assert rescore.decide(row_under(line(), scoring=""), "h", grader) == (rescore.GRADE,
                                                                         not_recorded)
    assert rescore.decide(row_under(line()), "h", rescore.Grader("g", None)) == (rescore.GRADE,
                                                                                not_recorded)
    action, why = rescore.decide(row_under(line(), scoring="{not json"), "h", grader)
    assert action == rescore.GRADE
    assert why.startswith("the scoring line changed and its results cannot be rescored: ")


def test_a_test_cell_that_is_neither_none_nor_all_of_its_points_is_not_rescorable():
    row = row_under(line(), **{"test:t0": "1.0", CATEGORIES[0]: "1.0", "total": "1.0"})
    with pytest.raises(rescore.NotRescorable, match="its test t0 earned 1 of its 2 points"):
        rescore.rescored(row, line(), line(full=3.0))
    assert rescore.outcomes(row_under(line(), **{"test:t1": "", "perplexity_recomputed": ""}),
                            line()) == ({"t0": True, "t2": False, "t3": False}, None)


def test_changed_categories_or_a_cell_that_is_not_a_number_are_not_rescorable():
    renamed = {**line(), "rubric": {**{k: v for k, v in line()["rubric"].items()
                                      if k != CATEGORIES[0]}, "Other": 2.0}}
    with pytest.raises(rescore.NotRescorable, match="the categories changed"):
        rescore.rescored(row_under(line()), line(), renamed)
    with pytest.raises(rescore.NotRescorable, match="the categories changed"):
        rescore.rescored(row_under(line()), renamed, renamed)
    with pytest.raises(rescore.NotRescorable, match=r"a cell is not a number"):
        rescore.rescored(row_under(line(), perplexity_recomputed="n/a"), line(), line(full=3.0))


@pytest.mark.parametrize("new, said", [
    (line(zero=5.0), "none at >= 4.5 -> 5.0"),
    (line(lm=80.0), f"{rubric.LM_CATEGORY} {rubric.LM_POINTS} -> 80.0 points"),
    (line(first=3.0), f"{CATEGORIES[0]} 2.0 -> 3.0 points; the points of 1 hidden test(s): t0"),
    (line(), "the same numbers, recorded differently")])
def test_each_change_of_a_scoring_line_is_named(new, said):
    assert rescore.changes(line(), new) == said


@pytest.mark.parametrize("moved, listed", [(3, "t0, t1, t2"), (4, "t0, t1, t2, ...")])
def test_moved_hidden_tests_are_named_three_at_most(moved, listed):
    new = line()
    new["test_points"] = {category: {name: points + (1 if index < moved else 0)
                                     for name, points in tests.items()}
                          for index, (category, tests) in enumerate(new["test_points"].items())}
    assert rescore.changes(line(), new).endswith(
        f"the points of {moved} hidden test(s): {listed}")


def test_the_reasons_are_counted_most_first_and_cut_after_the_shown():
    reasons = {"a": "changed", "b": "changed", "c": "changed", "d": "new", "e": rescore.UNCHANGED}
    assert rescore.why_lines(reasons, shown=2) == [
        "  3 changed: a, b and 1 more", "  1 new: d", f"  1 {rescore.UNCHANGED}"]
    assert rescore.why_lines(reasons, shown=3)[0] == "  3 changed: a, b, c"


def test_a_rescore_notes_the_change_atop_each_changed_feedback_and_cuts_its_list(tmp_path):
    old, new = line(), line(first=3.0)
    rows = {key: row_under(old, student=key) for key in ("al", "ann", "bo")}
    rows["al"]["test:t0"] = rows["al"][CATEGORIES[0]] = rows["al"]["total"] = "0.0"  # failed t0
    (tmp_path / "feedback").mkdir()
    for key in rows:
        (tmp_path / "feedback" / f"{key}.txt").write_text("old feedback\n")
    shown = rescore.apply_rescore(rows, set(rows), rescore.Grader("g", new), tmp_path, shown=1)
    why = f"{CATEGORIES[0]} 2.0 -> 3.0 points; the points of 1 hidden test(s): t0"
    text = (tmp_path / "rescore.txt").read_text()
    assert text == (f"3 rows rescored from their recorded results, none graded again (the "
                    f"scoring line changed: {why}); 2 changed points, 1 kept them\n"
                    f"  ann: {CATEGORIES[0]} 2 -> 3, total 2 -> 3\n"
                    f"  bo: {CATEGORIES[0]} 2 -> 3, total 2 -> 3\n")
    assert shown == (text.splitlines(keepends=True)[0] + text.splitlines(keepends=True)[1]
                     + f"  ... and 1 more in {tmp_path / 'rescore.txt'}\n")
    assert (tmp_path / "feedback/ann.txt").read_text() == (
        f"Rescored after this grading, which was not run again: the scoring line changed "
        f"({why}). This handin now earns {CATEGORIES[0]} 2 -> 3, total 2 -> 3 (total was 2.0); "
        f"the points below are those of the old line.\n\nold feedback\n")
    assert (tmp_path / "feedback/al.txt").read_text() == "old feedback\n"
    assert rescore.apply_rescore(rows, set(rows), rescore.Grader("g", new), tmp_path,
                                 shown=3).count("\n") == 1


def test_twenty_lines_are_shown_by_default(tmp_path):
    keys = [f"s{index:02d}" for index in range(21)]
    assert rescore.why_lines({key: "changed" for key in keys})[0] == (
        "  21 changed: " + ", ".join(keys[:20]) + " and 1 more")
    assert rescore.why_lines({key: "changed" for key in keys[:20]})[0] == (
        "  20 changed: " + ", ".join(keys[:20]))
    rows = {key: row_under(line(), student=key) for key in keys}
    shown = rescore.apply_rescore(rows, set(keys), rescore.Grader("g", line(first=3.0)),
                                  tmp_path)
    assert shown.splitlines()[-2:] == [f"  s19: {CATEGORIES[0]} 2 -> 3, total 2 -> 3",
                                       f"  ... and 1 more in {tmp_path / 'rescore.txt'}"]


def test_make_rescore_rescores_what_it_can_and_counts_the_rest(tmp_path, capsys):
    source = tmp_path / "dist"
    source.mkdir()
    info = {"grader_sha256": "g", **line(first=3.0)}
    tar_with(source / "autograde.tar", {"autograde/build_info.json": json.dumps(info).encode()})
    (source / "autograde-Makefile").write_text("all:\n")
    out = tmp_path / "out"
    out.mkdir()
    (out / "grades.csv").write_text("student\n")
    with pytest.raises(SystemExit, match="holds no graded row: run `make regrade` first"):
        rescore.rescore_class(out, source)
    rows = {"ann": row_under(line(), student="ann"),
            "bo": row_under(line(), student="bo", grader_sha256="other"),
            "cy": row_under(line(), student="cy", grader_sha256="other")}
    write_rows(out / "grades.csv", rows, [])
    after = rescore.rescore_class(out, source)
    assert (after["ann"]["total"], float(after["bo"]["total"])) == (3.0, 2.0)
    err = capsys.readouterr().err
    assert "2 rows can only be updated by grading them again" in err
    assert "1 rows rescored from their recorded results" in err


def tar_with(path: Path, members: dict[str, bytes]) -> Path:
    with tarfile.open(path, "w") as tar:
        for name, data in members.items():
            member = tarfile.TarInfo(name)
            member.size = len(data)
            tar.addfile(member, io.BytesIO(data))
    return path


def test_the_grader_is_its_build_info_s_identity_and_line_or_else_its_files(tmp_path):
    makefile = tmp_path / "Makefile"
    makefile.write_text("all:\n")
    info = {"grader_sha256": "abc", **line()}
    tar = tar_with(tmp_path / "a.tar", {"autograde/build_info.json": json.dumps(info).encode()})
    assert rescore.grader_of(tar, makefile) == rescore.Grader("abc", line())
    assert rescore.read_build_info(tar) == info
    for name, content in [("autograde/deeper/build_info.json", info),
                          ("autograde/build_info.json", [info]),
                          ("autograde/build_info.json", {**info, "grader_sha256": 1}),
                          ("autograde/build_info.json", {"grader_sha256": "abc",
                                                         "rubric": info["rubric"]})]:
        other = tar_with(tmp_path / "b.tar", {name: json.dumps(content).encode()})
        assert rescore.grader_of(other, makefile).scoring is None, (name, content)
    assert rescore.read_build_info(makefile) is None  # not a tar


def test_the_identity_counts_each_file_s_name_and_length_apart():
    one = rescore.grader_identity({"a": b"xy", "b": b""}, "m")
    assert rescore.grader_identity({"a": b"x", "b": b"y"}, "m") != one
    assert rescore.grader_identity({"ax": b"y", "b": b""}, "m") != one
    for skipped in (rescore.NUMBERS_MODULE, rescore.BUILD_INFO_NAME):  # files after it count
        assert (rescore.grader_identity({skipped: b"", "zz.py": b"a"}, "m")
                != rescore.grader_identity({skipped: b"", "zz.py": b"b"}, "m"))
    points = b'@hidden_test("Linear", 2)\n'
    assert (rescore.grader_identity({"elsewhere.py": points}, "m")
            != rescore.grader_identity({"elsewhere.py": points.replace(b"2", b"3")}, "m"))


def test_a_grader_folder_without_its_two_files_is_refused_naming_the_fix(tmp_path):
    with pytest.raises(SystemExit, match="autograde.tar not found: run `make autograde` first"):
        rescore.grader_in(tmp_path)
    tar_with(tmp_path / "autograde.tar", {})
    with pytest.raises(SystemExit, match="autograde-Makefile not found"):
        rescore.grader_in(tmp_path)


def test_a_row_without_a_total_had_none_before_its_rescore():
    row = row_under(line())
    del row["total"]
    assert rescore.apply(row, line(), line(first=3.0))[-1] == "total 0 -> 3"


def test_a_grader_is_frozen():
    grader = rescore.Grader("g", line())
    with pytest.raises(FrozenInstanceError):
        grader.identity = "other"  # one grader compared against every row of a class
    assert grader.scoring_text == rescore.scoring_text(line())
    assert rescore.Grader("g", None).scoring_text == ""


def test_a_test_that_did_not_run_is_skipped_not_the_rest_of_its_category():
    tests = {CATEGORIES[0]: {"first": 2.0, "second": 3.0}}
    scoring = {"test_points": tests}
    assert rescore.outcomes({"test:first": "", "test:second": "3.0"}, scoring) == (
        {"second": True}, None)


def test_the_list_is_cut_only_past_the_lines_shown(tmp_path):
    rows = {key: row_under(line(), student=key) for key in ("ann", "bo")}
    shown = rescore.apply_rescore(rows, set(rows), rescore.Grader("g", line(first=3.0)),
                                  tmp_path, shown=2)
    assert shown == (tmp_path / "rescore.txt").read_text()
