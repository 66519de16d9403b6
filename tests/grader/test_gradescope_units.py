# hw4p1: instructor-only
"""The Gradescope adapter's own steps (autograder/judging/gradescope.py) on hand-built reports: the
results.json each report gives, number by number, the summary a student sees, which uploaded file
is graded, and main's order (the zero results first, the hidden archive gone before the judge).
tests/grader/test_gradescope.py runs the whole adapter on built graders (slow); these run in
about a second.

    .venv/bin/python -m pytest -q tests/grader/test_gradescope_units.py
"""
import json
import subprocess
import sys
from pathlib import Path

from autograder.judging import gradescope, grading_run
from autograder.judging.scoring import rubric
from autograder.judging.scoring.report import GradingReport, LanguageModelResult, TestResult

REPO = Path(__file__).resolve().parents[2]
CATEGORIES = list(rubric.MYTORCH_RUBRIC)
FIRST, SECOND = CATEGORIES[0], CATEGORIES[1]
SUMMARY_LIMIT = 60_000  # characters of the summary Gradescope is given


def scores_with(**given: float) -> dict[str, float]:
    return {**rubric.zero_scores(), **given}


def result(category: str, points: float, max_points: float, message: str = "", hint: str = "",
           name: str = "t") -> TestResult:
    return TestResult(name, category, max_points, points, f"checks {name}", message, hint)


def by_number(payload: dict) -> dict[str, dict]:
    return {test["number"]: test for test in payload["tests"]}


def test_each_hidden_test_is_one_gradescope_test_numbered_by_category_then_test():
    half = rubric.MYTORCH_RUBRIC[FIRST] / 2
    report = GradingReport(tests=[result(FIRST, half, half, name="a"),
                                  result(FIRST, 0.0, half, "differs", "cause", name="b"),
                                  result(SECOND, 1.0, 2.0, "", "a hint without a message")])
    payload = gradescope.results_payload(scores_with(**{FIRST: half, SECOND: 1.0}), report,
                                         "summary", "hidden")
    tests = by_number(payload)
    assert tests["1.1"] == {"name": f"{FIRST}: a", "number": "1.1", "score": half,
                            "max_score": half, "status": "passed", "output": "Checks: checks a",
                            "tags": [FIRST], "visibility": "hidden"}
    assert tests["1.2"]["status"] == "failed" and tests["1.2"]["score"] == 0.0
    assert tests["1.2"]["output"] == "Checks: checks b\nWhat differed: differs\nLikely cause: cause"
    assert tests["2.1"]["output"] == "Checks: checks t"  # a hint is shown only with a difference
    assert tests["2.1"]["status"] == "failed" and tests["2.1"]["max_score"] == 2.0
    # A category that ran no test is one test of its whole points and its score.
    assert tests["3.1"]["name"] == f"{CATEGORIES[2]}: all tests"
    assert tests["3.1"]["max_score"] == rubric.MYTORCH_RUBRIC[CATEGORIES[2]]
    assert tests["3.1"]["output"].endswith("not graded: see the summary")
    assert payload["score"] == half + 1.0
    assert [t["number"] for t in payload["tests"]][-1] == f"{len(CATEGORIES) + 1}.1"


def test_a_category_whose_tests_disagree_with_its_score_by_more_than_a_hundredth_is_one_test():
    """The scores line is the grade: tests that do not add up to it (past 0.01) are replaced."""
    def first_category(test_points: float, score: float) -> list[dict]:
        report = GradingReport(tests=[result(FIRST, test_points, 1.0)])
        payload = gradescope.results_payload(scores_with(**{FIRST: score}), report, "", "visible")
        return [t for t in payload["tests"] if t["tags"] == [FIRST]]

    assert first_category(0.02, 0.01)[0]["name"] == f"{FIRST}: t"  # exactly 0.01 apart: kept
    assert first_category(0.5, 0.5)[0]["name"] == f"{FIRST}: t"
    replaced = first_category(0.5, 0.25)  # the scores line says 0.25
    assert [(t["name"], t["score"], t["max_score"]) for t in replaced] == [
        (f"{FIRST}: all tests", 0.25, rubric.MYTORCH_RUBRIC[FIRST])]
    assert replaced[0]["output"] == f"Checks: the hidden tests of {FIRST}"
    # points past a test's own maximum count as its maximum: 2 of 1 adds up to a score of 1
    assert first_category(2.0, 1.0)[0]["name"] == f"{FIRST}: t"


def test_the_language_model_test_carries_its_points_message_and_cause():
    lm = LanguageModelResult(message="perplexity 3.1", hint="the tokenizer")
    full = gradescope.results_payload(scores_with(**{rubric.LM_CATEGORY: rubric.LM_POINTS}),
                                      GradingReport(lm=lm), "", "hidden")
    test = by_number(full)[f"{len(CATEGORIES) + 1}.1"]
    assert test == {"name": f"{rubric.LM_CATEGORY}: perplexity on the hidden test set",
                    "number": f"{len(CATEGORIES) + 1}.1", "score": rubric.LM_POINTS,
                    "max_score": float(rubric.LM_POINTS), "status": "passed",
                    "output": "perplexity 3.1\nLikely cause: the tokenizer",
                    "tags": [rubric.LM_CATEGORY], "visibility": "visible"}
    assert full["score"] == rubric.LM_POINTS
    part = gradescope.results_payload(scores_with(**{rubric.LM_CATEGORY: 1.0}), GradingReport(),
                                      "", "hidden")
    test = by_number(part)[f"{len(CATEGORIES) + 1}.1"]
    assert (test["status"], test["output"], test["score"]) == ("failed", "see the summary", 1.0)


def test_flags_are_a_hidden_test_of_no_points_and_no_flag_no_test():
    report = GradingReport(flags=["same weights as bo", "copied"])
    payload = gradescope.results_payload(scores_with(), report, "", "visible")
    flags = by_number(payload)[f"{len(CATEGORIES) + 1}.2"]
    assert (flags["score"], flags["max_score"], flags["visibility"]) == (0.0, 0.0, "hidden")
    assert flags["output"] == "- same weights as bo\n- copied"
    assert flags["tags"] == [rubric.LM_CATEGORY, "integrity"] and flags["status"] == "failed"
    unflagged = gradescope.results_payload(scores_with(), GradingReport(), "", "visible")
    assert len(unflagged["tests"]) == len(payload["tests"]) - 1


def test_the_score_is_the_tests_sum_to_two_decimals_and_the_summary_its_last_60000_characters():
    report = GradingReport(tests=[result(FIRST, 0.125, 1.0), result(SECOND, 0.0, 1.0)])
    summary = "h" + "x" * (SUMMARY_LIMIT + 9) + "end"
    payload = gradescope.results_payload(scores_with(**{FIRST: 0.125}), report, summary, "visible")
    assert payload["score"] == 0.12  # round(0.125, 2): the tie to even
    assert len(payload["output"]) == SUMMARY_LIMIT and payload["output"].endswith("xend")
    short = gradescope.results_payload(scores_with(), report, "short", "visible")
    assert short["output"] == "short" and short["stdout_visibility"] == "hidden"
    assert "leaderboard" not in short


def test_the_leaderboard_is_the_measured_model_s_row_ascending_where_the_rubric_says():
    lm = LanguageModelResult(message="", perplexity_char=3.14159, num_parameters=1200,
                             token_type="char")
    payload = gradescope.results_payload(scores_with(), GradingReport(lm=lm), "", "visible")
    assert payload["leaderboard"] == [
        {"name": "Perplexity (hidden set)", "value": 3.14, "order": "asc"},
        {"name": "Parameters", "value": 1200, "order": "asc"},
        {"name": "Tokenizer", "value": "char"}]


def test_the_visible_summary_gives_notes_the_model_and_each_category_s_total():
    report = GradingReport(handin_notes=["a note"], lm=LanguageModelResult(message="ppl 9"))
    scores = scores_with(**{FIRST: 0.125, SECOND: 1.0})
    lines = gradescope.visible_summary(scores, report, True, "after_due_date").splitlines()
    assert lines[0] == "handin.tar: a note" and lines[1] == f"{rubric.LM_CATEGORY}: ppl 9"
    assert lines[2] == f"  {FIRST:<28s} {0.125:>6g}/{rubric.MYTORCH_RUBRIC[FIRST]}"
    assert len(lines) == 2 + len(rubric.RUBRIC) + 2
    total = sum(rubric.RUBRIC.values())
    assert lines[-2] == f"  {'Total':<28s} {1.12:>6g}/{total}"  # round(1.125, 2)
    assert lines[-1] == "The hidden mytorch tests' details: after due date."
    for lm in (None, LanguageModelResult(message="")):
        summary = gradescope.visible_summary(scores, GradingReport(lm=lm), False, "visible")
        assert summary.splitlines()[:2] == [
            "No handin.tar was found in the submission: upload the handin.tar that `make handin` "
            "writes.", f"{rubric.LM_CATEGORY}: not graded"]


def test_the_handin_is_handin_tar_else_the_one_archive_uploaded(tmp_path):
    submission = tmp_path / "submission"
    assert gradescope.find_handin(submission) is None  # nothing uploaded
    submission.write_text("a file, not the folder")
    assert gradescope.find_handin(submission) is None
    submission.unlink()
    submission.mkdir()
    (submission / "notes.txt").write_text("not an archive")
    (submission / "folder.tar").mkdir()  # a folder named like an archive is not one
    assert gradescope.find_handin(submission) is None
    (submission / "mine.tgz").write_bytes(b"x")
    assert gradescope.find_handin(submission) == submission / "mine.tgz"
    (submission / "other.zip").write_bytes(b"x")
    assert gradescope.find_handin(submission) is None  # two archives: which one is unknown
    (submission / "handin.tar").write_bytes(b"x")
    assert gradescope.find_handin(submission) == submission / "handin.tar"


def test_the_failure_results_award_nothing_in_every_category():
    payload = gradescope.failure_results("why")
    assert payload["score"] == 0.0 and payload["output"] == "why"
    assert [(t["name"], t["number"], t["score"], t["max_score"], t["output"])
            for t in payload["tests"]] == [
        (category, str(number), 0.0, float(points), "why")
        for number, (category, points) in enumerate(rubric.RUBRIC.items(), start=1)]


def autograder_root(tmp_path: Path, handin: bool = True) -> Path:
    root = tmp_path / "root"
    (root / "source").mkdir(parents=True)
    (root / "source" / gradescope.HIDDEN_SOURCE).write_bytes(b"hidden")
    (root / "source" / grading_run.MAKEFILE).write_text("all:\n")
    (root / "submission").mkdir()
    if handin:
        (root / "submission" / "handin.tar").write_bytes(b"handin")
    return root


def test_the_judge_grades_without_the_hidden_archive_left_in_source(tmp_path, monkeypatch):
    root = autograder_root(tmp_path)
    seen = []

    def fake_run(grading, grader_flags):
        seen.append(((root / "source" / gradescope.HIDDEN_SOURCE).exists(),
                     (grading / grading_run.AUTOGRADE_TAR).read_bytes(),
                     (grading / "handin.tar").read_bytes(), grader_flags))
        return grading_run.GradingRun(scores_with(**{FIRST: 1.0}), None, "out", 1.0, False)

    monkeypatch.setattr(grading_run, "run", fake_run)
    payload = gradescope.grade_submission(root, "visible", "--flag")
    assert seen == [(False, b"hidden", b"handin", "--flag")]
    assert payload["score"] == 1.0
    assert f"{rubric.LM_CATEGORY}: not graded" in payload["output"]  # no report: crashed
    assert "No handin.tar" not in payload["output"]
    (root / "source" / gradescope.HIDDEN_SOURCE).write_bytes(b"hidden")
    (root / "submission" / "handin.tar").unlink()
    monkeypatch.setattr(grading_run, "run", lambda grading, flags: grading_run.GradingRun(
        scores_with(), GradingReport(lm=LanguageModelResult(message="ppl")), "", 1.0, False))
    payload = gradescope.grade_submission(root, "visible", "")
    assert payload["output"].startswith("No handin.tar was found")
    assert f"{rubric.LM_CATEGORY}: ppl" in payload["output"]


def test_main_writes_the_zero_results_first_and_the_timed_payload_last(tmp_path, monkeypatch,
                                                                      capsys):
    root = tmp_path / "not" / "yet"
    results = root / "results" / "results.json"
    clock = iter([100.0, 101.2345])
    monkeypatch.setattr(gradescope.time, "monotonic", lambda: next(clock))

    def grade(root_given, visibility, grader_flags):
        first = json.loads(results.read_text())
        assert first["score"] == 0.0 and first["output"].startswith("The autograder did not finish")
        assert (root_given, visibility, grader_flags) == (root, "hidden", "-x")
        return {"score": 3.0, "output": "the summary", "tests": []}

    monkeypatch.setattr(gradescope, "grade_submission", grade)
    gradescope.main(["--root", str(root), "--visibility", "hidden", "--grader-flags=-x"])
    written = json.loads(results.read_text())
    assert written == {"score": 3.0, "output": "the summary", "tests": [],
                       "execution_time": 1.2}
    assert capsys.readouterr().out == "the summary\n"


def test_python_m_writes_valid_zero_results_when_grading_fails(tmp_path):
    """The module's entry point (run_autograder's command): a root without source/ fails inside
    the grading, and results.json says so with every category at zero."""
    root = tmp_path / "root"
    done = subprocess.run([sys.executable, "-m", "autograder.judging.gradescope", "--root",
                           str(root)], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    payload = json.loads((root / "results" / "results.json").read_text())
    assert payload["score"] == 0.0 and len(payload["tests"]) == len(rubric.RUBRIC)
    assert payload["output"].startswith("The autograder itself failed (FileNotFoundError")
    assert payload["output"] in done.stdout

