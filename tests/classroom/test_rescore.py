# hw4p1: instructor-only
"""Tests of the rescore (autograder/classroom/rescore.py and its use by autograder/classroom/regrade.py): a change of
the scoring line alone is a rescore of the recorded results, by the grader's own functions, equal
to a full regrade; anything else is graded again, and the log says why.

    .venv/bin/python -m pytest -q tests/classroom/test_rescore.py
"""
import csv
import io
import json
import shutil
import tarfile
from pathlib import Path

import pytest

from autograder.judging.scoring import rubric
from autograder.classroom import regrade, rescore
from autograder.judging.scoring.report import GradingReport, LanguageModelResult, TestResult
from tests.grader.autograder_helpers import (TEST_FULL_MARKS_PPL, TEST_HIDDEN_CHARS,
                                             TEST_ZERO_MARKS_PPL, attack_handin, built_autograder,
                                             session_folder)
from tests.classroom.regrade_fakes import grade_with

CATEGORIES = list(rubric.MYTORCH_RUBRIC)


def scoring(full: float, zero: float, shares: list[list[float]]) -> dict:
    """A scoring line whose mytorch category i has tests t<i>_0, t<i>_1, ... worth ``shares[i]``."""
    tests = {category: {f"t{i}_{j}": float(points) for j, points in enumerate(shares[i])}
             for i, category in enumerate(CATEGORIES)}
    points = {category: sum(tests[category].values()) for category in CATEGORIES}
    return rescore.scoring_line({**points, rubric.LM_CATEGORY: rubric.LM_POINTS}, tests, full,
                                zero)


# The old line: Linear's tests worth 2 and 3, one test per other category; the new line moves
# Linear's points (4 and 1), doubles Softmax's and moves both LM thresholds.
OLD = scoring(3.5, 4.5, [[2, 3], [5], [20], [12, 8]])
NEW = scoring(3.0, 5.0, [[4, 1], [10], [20], [12, 8]])


def recorded_row(**cells) -> dict:
    """A grades.csv row graded under OLD (cells as the CSV gives them back: strings): Linear's
    first test passed, its second failed, Softmax passed, SDPA failed, MHA not run, perplexity
    3.75 (LM: (4.5 - 3.75) / (4.5 - 3.5) = 3/4 of its points)."""
    row = {"student": "ann", "status": "ok",
           **dict(zip(CATEGORIES, ("2.0", "5.0", "0.0", "0.0"))),
           rubric.LM_CATEGORY: str(0.75 * rubric.LM_POINTS),
           "total": str(7 + 0.75 * rubric.LM_POINTS), "perplexity_recomputed": "3.75",
           "test:t0_0": "2.0", "test:t0_1": "0.0", "test:t1_0": "5.0", "test:t2_0": "0.0",
           "handin_sha256": "h", "grader_sha256": "g", "scoring": rescore.scoring_text(OLD)}
    return {**row, **cells}


def test_a_rescore_gives_the_new_line_s_points_computed_by_hand():
    """Under NEW: Linear 4 (its passed test is now worth 4), Softmax 10, SDPA and MHA 0, and the
    LM (5 - 3.75) / (5 - 3) = 5/8 of its points; each recorded test's cell follows."""
    row = recorded_row()
    changed = rescore.apply(row, OLD, NEW)
    lm = 0.625 * rubric.LM_POINTS
    assert {key: row[key] for key in [*rubric.RUBRIC, "total"]} == {
        "Linear": 4.0, "Softmax": 10.0, "ScaledDotProductAttention": 0.0,
        "MultiHeadAttention": 0.0, rubric.LM_CATEGORY: lm, "total": 14 + lm}, row
    assert (row["test:t0_0"], row["test:t0_1"], row["test:t1_0"]) == (4.0, 0.0, 10.0)
    assert "test:t3_0" not in row and row["scoring"] == rescore.scoring_text(NEW)
    assert changed == ["Linear 2 -> 4", "Softmax 5 -> 10",
                       f"{rubric.LM_CATEGORY} {0.75 * rubric.LM_POINTS:g} -> {lm:g}",
                       f"total {7 + 0.75 * rubric.LM_POINTS:g} -> {14 + lm:g}"]
    assert rescore.apply(row, NEW, NEW) == []  # the rescored row is consistent with its new line


def test_only_results_that_give_back_their_own_points_are_rescored():
    """A row is rescored only when its recorded results give its recorded points under its own
    line; otherwise it is graded again, with why."""
    grader = rescore.Grader("g", NEW)
    assert rescore.decide(recorded_row(), "h", grader)[0] == rescore.RESCORE
    assert "full marks at perplexity <= 3.5 -> 3.0" in rescore.decide(recorded_row(), "h",
                                                                      grader)[1]
    for cells, why in (({rubric.LM_CATEGORY: "30.0"}, "LanguageModel 37.5, recorded 30"),
                       ({"Linear": "5.0"}, "Linear 2, recorded 5"),
                       ({"test:t0_1": "1.5"}, "earned 1.5 of its 3"),
                       ({"perplexity_recomputed": ""}, "LanguageModel 0, recorded 37.5"),
                       ({"Linear": "x"}, "not a number")):
        action, reason = rescore.decide(recorded_row(**cells), "h", grader)
        assert action == rescore.GRADE and why in reason, (cells, reason)
    assert rescore.decide({}, "h", grader) == (rescore.GRADE, "not graded yet")
    assert rescore.decide(recorded_row(), "other", grader)[1].startswith("its handin changed")
    assert rescore.decide(recorded_row(), "h", rescore.Grader("other", NEW))[1].startswith(
        "graded by another grader")
    assert rescore.decide(recorded_row(), "h", rescore.Grader("g", OLD)) == (rescore.KEEP,
                                                                             rescore.UNCHANGED)
    assert rescore.decide(recorded_row(), "h", rescore.Grader("g", OLD), force=True)[0] == \
        rescore.GRADE
    assert rescore.decide(recorded_row(scoring=""), "h", grader)[0] == rescore.GRADE


def test_a_change_of_the_language_model_s_points_is_rescored_not_graded_again():
    """Graded when the LM was worth 40 points (perplexity 3.75: 3/4 of them, 30); under a line
    giving it 80 the same result earns 60, and back again: a rescore, never a regrade."""
    def line(lm_points: float) -> dict:
        return {**OLD, "rubric": {**OLD["rubric"], rubric.LM_CATEGORY: lm_points}}

    row = recorded_row(**{rubric.LM_CATEGORY: "30.0", "total": "37.0",
                          "scoring": rescore.scoring_text(line(40))})
    action, why = rescore.decide(row, "h", rescore.Grader("g", line(80)))
    assert action == rescore.RESCORE and "LanguageModel 40 -> 80 points" in why, why
    assert rescore.apply(row, line(40), line(80)) == [f"{rubric.LM_CATEGORY} 30 -> 60",
                                                     "total 37 -> 67"]
    assert rescore.apply(row, line(80), line(40)) == [f"{rubric.LM_CATEGORY} 60 -> 30",
                                                     "total 67 -> 37"]


def test_the_grader_s_identity_leaves_out_the_scoring_line_alone():
    test_module = b'@hidden_test("Linear", 2)\ndef linear_forward(program, rng):\n    pass\n'
    members = {"autograder/judging/grade.py": b"code",
               "autograder/judging/scoring/hidden_tests/linear_tests.py": test_module,
               "hw4lib/grading_numbers.py": b"FULL_MARKS_PPL = 3.5\n",
               "autograder/hidden_set/test/1.npy": b"hidden"}
    identity = rescore.grader_identity(members, "makefile")

    def changed(path: str, data: bytes) -> str:
        return rescore.grader_identity({**members, path: data}, "makefile")

    assert changed("hw4lib/grading_numbers.py", b"FULL_MARKS_PPL = 3.0\n") == identity
    assert changed("autograder/judging/scoring/hidden_tests/linear_tests.py",
                   test_module.replace(b"2)", b"3.5)")) == identity
    assert changed("build_info.json", b"{}") == identity
    assert changed("autograder/judging/scoring/hidden_tests/linear_tests.py",
                   test_module.replace(b"pass", b"return")) != identity
    assert changed("autograder/hidden_set/test/1.npy", b"other") != identity
    assert changed("autograder/judging/grade.py", b"other") != identity
    assert rescore.grader_identity(members, "other makefile") != identity


def fake_grader(folder: Path, identity: str, line: dict) -> Path:
    """A grader folder whose autograde.tar holds only a build_info.json (gradings are replaced)."""
    folder.mkdir(parents=True)
    info = json.dumps({"grader_sha256": identity, **line}).encode()
    with tarfile.open(folder / regrade.grading_run.AUTOGRADE_TAR, "w") as tar:
        member = tarfile.TarInfo(f"autograde/{rescore.BUILD_INFO_NAME}")
        member.size = len(info)
        tar.addfile(member, io.BytesIO(info))
    (folder / regrade.grading_run.MAKEFILE).write_text("all:\n")
    return folder


def test_a_rerun_rescores_a_new_line_and_says_why_for_each_handin(tmp_path, monkeypatch,
                                                                  capsys):
    """Graded under OLD; a rerun with NEW grades nothing, rescores every row (rescore.txt and the
    feedback say how) and make rescore then finds nothing to do; another identity grades all."""
    handins = tmp_path / "handins"
    handins.mkdir()
    for student in ("ann", "bo"):
        (handins / f"{student}.tar").write_bytes(student.encode())
    graded = []

    def fake_run(grading, grader_flags="", gradings=1, started=None, zygote=None):
        student = Path(grading).read_text()
        graded.append(student)
        passed = student == "ann"
        lm = rubric.lm_score(3.75, 3.5, 4.5)
        scores = {**rubric.zero_scores(), "Linear": 2.0 if passed else 0.0,
                  rubric.LM_CATEGORY: lm}
        details = GradingReport(lm=LanguageModelResult(message="", perplexity_char=3.75),
                                tests=[TestResult("t0_0", "Linear", 2, 2.0 if passed else 0.0,
                                                  "", ""),
                                       TestResult("t0_1", "Linear", 2, 0.0, "", "")])
        return regrade.grading_run.GradingRun(scores, details, f"report of {student}\n", 1.0,
                                              False)

    grade_with(fake_run, monkeypatch, tmp_path)
    out = tmp_path / "out"
    regrade.regrade(handins, out, fake_grader(tmp_path / "old", "g", OLD), progress=False)
    assert sorted(graded) == ["ann", "bo"]
    graded.clear()
    capsys.readouterr()
    rows = regrade.regrade(handins, out, fake_grader(tmp_path / "new", "g", NEW), progress=False)
    log = capsys.readouterr().err
    assert graded == [], log
    assert "2 handins, 2 already graded by this grader, 0 to grade" in log
    assert "2 rescored from its recorded results (full marks at perplexity <= 3.5 -> 3.0" in log
    lm = 0.625 * rubric.LM_POINTS
    assert (rows["ann"]["Linear"], rows["ann"]["total"], rows["bo"]["total"]) == (4.0, 4 + lm, lm)
    with open(out / "grades.csv", newline="") as file:
        written = {row["student"]: row for row in csv.DictReader(file)}
    assert float(written["ann"]["total"]) == 4 + lm and written["ann"]["scoring"] == \
        rescore.scoring_text(NEW)
    changes = (out / "rescore.txt").read_text()
    assert f"ann: Linear 2 -> 4, {rubric.LM_CATEGORY} 37.5 -> {lm:g}" in changes, changes
    assert (out / "feedback/ann.txt").read_text().startswith("Rescored after this grading")
    assert (out / "feedback/ann.txt").read_text().endswith("report of ann\n")

    capsys.readouterr()
    rescore.rescore_class(out, tmp_path / "new")
    assert f"2 {rescore.UNCHANGED}" in capsys.readouterr().err
    shutil.rmtree(tmp_path / "new")
    regrade.regrade(handins, out, fake_grader(tmp_path / "new", "h", NEW), progress=False)
    assert sorted(graded) == ["ann", "bo"]
    assert "2 graded by another grader (its code or hidden set changed): ann, bo" in \
        capsys.readouterr().err


@pytest.mark.class_fixture
def test_rescoring_a_graded_class_equals_regrading_it_under_new_thresholds(tmp_path, capsys):
    """A small class (an honest handin, an empty archive) graded with the tests' grader; a second
    grader built from the same tree with other thresholds has its identity; the rerun with it
    rescores every row and grades none, and every row's points and total are those a full regrade
    with it gives."""
    from tools import make_autograde

    folder = session_folder("hw4p1-rescore-")
    folder.chmod(0o755)
    handins = folder / "handins"
    handins.mkdir()
    shutil.copy(attack_handin(folder / "build/honest", "", None), handins / "honest.tar")
    (handins / "empty.tar").write_bytes(b"")
    first, out = built_autograder(), folder / "out"
    regrade.regrade(handins, out, first, jobs=2, grader_flags="--mytorch-timeout 20",
                    progress=False)
    second = folder / "second"
    full, zero = TEST_FULL_MARKS_PPL / 2, TEST_ZERO_MARKS_PPL / 20
    make_autograde.build(second, hidden_chars=TEST_HIDDEN_CHARS, full_marks_ppl=full,
                         zero_marks_ppl=zero)
    assert rescore.grader_of(second / "autograde.tar", second / "autograde-Makefile").identity \
        == rescore.grader_of(first / "autograde.tar", first / "autograde-Makefile").identity
    capsys.readouterr()
    rescored = regrade.regrade(handins, out, second, jobs=2, progress=False)
    assert "2 already graded by this grader, 0 to grade" in capsys.readouterr().err
    regraded = regrade.regrade(handins, folder / "full", second, jobs=2,
                               grader_flags="--mytorch-timeout 20", progress=False)
    columns = [*rubric.RUBRIC, "total"]
    assert {key: {c: float(row[c]) for c in columns} for key, row in rescored.items()} == \
        {key: {c: float(row[c]) for c in columns} for key, row in regraded.items()}
    honest = regraded["honest"]
    assert float(honest[rubric.LM_CATEGORY]) == rubric.lm_score(
        float(honest["perplexity_recomputed"]), full, zero)
    assert "honest: LanguageModel" in (out / "rescore.txt").read_text(), \
        "the new thresholds must move the honest model's points, or this test shows nothing"
