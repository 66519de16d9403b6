# hw4p1: instructor-only
"""Tests of the grading report (autograder/judging/scoring/report.py): its JSON form round-trips, a
report of another version or a malformed one is refused naming the fix, and every tool that reads a
grading (the Gradescope adapter, the bulk regrade) reads the judge's details.json through
report.load.

    .venv/bin/python -m pytest -q tests/grader/test_report.py
"""
import ast
import json
import re
from dataclasses import replace
from pathlib import Path

import pytest

from autograder.judging import gradescope, grading_run
from autograder.judging.scoring import report, rubric
from autograder.classroom import gradebook, regrade
from autograder.judging.scoring.report import (GradingReport, LanguageModelResult, ReportError,
                                               Status, TestResult)
from hw4lib.file_io import json_text

REPO = Path(__file__).resolve().parents[2]


def full_report() -> GradingReport:
    """A report with every field set to a value other than its default."""
    return GradingReport(
        status=Status.TIMEOUT, scores={**rubric.zero_scores(), "Linear": 2.5},
        tests=[TestResult("linear_forward", "Linear", 2.5, 2.5, "Linear's forward", ""),
               TestResult("linear_backward", "Linear", 2.5, 0, "Linear's backward", "dW differs",
                          hint="the bias gradient is summed over the wrong axis",
                          family="linear-bias", seconds=0.125)],
        lm=LanguageModelResult(
            message="per-character perplexity on the hidden test set: 3.71", timed_out=False,
            perplexity_char=3.7123, seconds=12.5, phase_seconds={"load": 1.5, "hidden": 11.0},
            reported_perplexity_char=3.6, compared_perplexity_char=3.61, compare_note="",
            num_parameters=123456, token_type="char", state_dict_sha256="ab" * 32,
            config_sha256="cd" * 32, weights_fingerprint="wf1:0123456789abcdef:AAAA",
            hint="the model is undertrained"),
        sandbox="bwrap", handin_notes=["handin/notes.txt: skipped"],
        flags=["test_metrics.json reports 1.0, these weights give 3.71"],
        seconds={"Linear": 1.25, "LanguageModel": 12.75}, weights_sha256="ab" * 32,
        runtime_code=["exec (mytorch/nn/linear.py:3)"],
        static_findings=["mytorch/nn/linear.py defines no graded class of its own (Linear is "
                         "defined in mytorch/nn/lin_impl.py)"])


def test_the_json_form_round_trips(tmp_path):
    written = full_report()
    report.write(tmp_path / "details.json", written)
    text = (tmp_path / "details.json").read_text()
    data = json.loads(text)
    # the keys today's readers look up, with their JSON types
    assert data["version"] == report.VERSION and data["status"] == "timeout"
    assert data["lm"]["perplexity_char"] == 3.7123 and data["tests"][1]["family"] == "linear-bias"
    assert data["scores"]["Linear"] == 2.5 and data["weights_sha256"] == "ab" * 32
    assert data["runtime_code"] == ["exec (mytorch/nn/linear.py:3)"]
    assert data["static_findings"][0].startswith("mytorch/nn/linear.py defines no graded class")
    read = report.load(tmp_path / "details.json")
    assert read == written and read.status is Status.TIMEOUT
    assert isinstance(read.lm, LanguageModelResult) and isinstance(read.tests[0], TestResult)
    # a report of defaults (the judge stopped before the model) round-trips too
    empty = GradingReport(status=Status.CRASHED)
    assert report.from_json(json.loads(json.dumps(empty.to_json()))) == empty


def test_another_version_or_a_malformed_report_is_refused_naming_the_fix(tmp_path):
    good = full_report().to_json()
    lm = good["lm"]
    test = good["tests"][0]
    cases = {
        "the next version": ({**good, "version": report.VERSION + 1},
                             f"version {report.VERSION + 1}"),
        "the next version with a new field": (
            {**good, "version": report.VERSION + 1, "lm": {**lm, "bits": 3}},
            f"version {report.VERSION + 1}"),
        # version 1 had no static findings: the class tools read reports of their own grader only
        "version 1": ({key: value for key, value in {**good, "version": 1}.items()
                       if key not in ("runtime_code", "static_findings")}, "version 1"),
        "no version": ({key: value for key, value in good.items() if key != "version"},
                       "without a version"),
        "a status no judge writes": ({**good, "status": "great"}, "GradingReport.status"),
        "an unknown key": ({**good, "grade": "A"}, "grade"),
        "a test without its points": ({**good, "tests": [{k: v for k, v in test.items()
                                                         if k != "points"}]}, "points"),
        "a perplexity as text": ({**good, "lm": {**lm, "perplexity_char": "3.7"}},
                                 "LanguageModelResult.perplexity_char"),
        "a bool for a number": ({**good, "seconds": {"Linear": True}},
                                "GradingReport.seconds['Linear'] is True"),
        "flags as one string": ({**good, "flags": "shares its weights"}, "GradingReport.flags"),
        "a finding as a number": ({**good, "static_findings": [3]},
                                  "GradingReport.static_findings"),
        "a list": ([good], "not list"),
    }
    for name, (data, named) in cases.items():
        with pytest.raises(ReportError) as refused:
            report.from_json(data)
        message = str(refused.value)
        assert named in message and "make autograde" in message, (name, message)
    (tmp_path / "half.json").write_text(json.dumps(good)[:100])
    (tmp_path / "old.json").write_text(json.dumps({**good, "version": 0}))
    for name in ("half.json", "missing.json", "old.json"):
        with pytest.raises(ReportError, match=f"{name}: .*make autograde"):
            report.load(tmp_path / name)
    # the judge cannot build a report that every reader would then refuse
    with pytest.raises(ReportError, match="LanguageModelResult.num_parameters"):
        LanguageModelResult(message="", num_parameters=1.5)
    with pytest.raises(ReportError, match="version"):
        replace(full_report(), version=report.VERSION + 1)


def test_a_report_reads_and_writes_back_to_the_same_bytes(tmp_path):
    """A details.json as the judge writes it (json_text: key order, indent 2; the zero scores and
    points ints, the others floats, a NaN perplexity) is read and written again byte for byte: a
    schema that turned 0 into 0.0, sorted or dropped a key would change them."""
    data = full_report().to_json()
    data["scores"] = {**data["scores"], "Softmax": 0}
    data["tests"][1]["points"] = 0
    data["lm"]["perplexity_char"] = float("nan")
    data["lm"]["compared_sample"] = {"transcripts": 2, "perplexities": [3.5, 4]}
    data["threads"] = {"threads": 2, "cpus": 2, "load": 0.25, "gradings": 1, "why": "2 cpus"}
    text = json_text(data)
    assert '"Softmax": 0,' in text and '"perplexity_char": NaN' in text  # what it is made of
    (tmp_path / "judged.json").write_text(text)
    report.write(tmp_path / "again.json", report.load(tmp_path / "judged.json"))
    assert (tmp_path / "again.json").read_text() == text


def test_a_field_set_after_the_report_was_built_is_checked_when_it_is_written(tmp_path):
    """The judge builds its report first and fills it in as it grades: write refuses what every
    reader would then refuse, names the field and leaves no file."""
    for field, value, named in (("flags", "shares its weights", "GradingReport.flags"),
                                ("scores", {"Linear": "2.5"}, "GradingReport.scores['Linear']"),
                                ("status", "great", "GradingReport.status")):
        written = full_report()
        setattr(written, field, value)
        with pytest.raises(ReportError, match=re.escape(named)):
            report.write(tmp_path / "details.json", written)
        assert not (tmp_path / "details.json").exists(), field
    written = full_report()
    written.tests[0].points = True
    with pytest.raises(ReportError, match="TestResult.points is True"):
        report.write(tmp_path / "details.json", written)


def fake_judge(source: Path, written: dict | str) -> None:
    """``source`` as a built autograder whose Makefile writes ``written`` (a report's JSON form,
    or any text) where --results-json says and prints the scores of ``full_report``."""
    source.mkdir(parents=True, exist_ok=True)
    (source / grading_run.AUTOGRADE_TAR).write_text("not the hidden set")
    (source / "report.json").write_text(written if isinstance(written, str)
                                        else json.dumps(written))
    scores = json.dumps({"scores": full_report().scores})
    (source / grading_run.MAKEFILE).write_text(
        f"all:\n\t@cp {source / 'report.json'} $(lastword $(GRADER_FLAGS))\n"
        f"\t@echo '{scores}'\n")


def test_every_class_tool_reads_the_judges_report_through_load(tmp_path, monkeypatch):
    """The regrade and the Gradescope adapter each run a grading whose judge wrote a report
    (a fake Makefile); each reads it once, through report.from_json, and what they write comes
    from it. A report of another version is each grading's crashed row, naming the fix."""
    parsed = []

    def spy(data):
        parsed.append(data)
        return from_json(data)

    from_json = report.from_json
    monkeypatch.setattr(report, "from_json", spy)
    written = full_report()
    fake_judge(tmp_path / "grader", written.to_json())
    handins = tmp_path / "handins"
    handins.mkdir()
    for student in ("ann", "bo"):
        (handins / f"{student}_1_handin.tar").write_bytes(student.encode())
    rows = regrade.regrade(handins, tmp_path / "out", tmp_path / "grader", progress=False)
    assert len(parsed) == 2
    for row in rows.values():
        assert row["status"] == "timeout" and row["weights_sha256"] == written.weights_sha256
        assert row["perplexity_recomputed"] == written.lm.perplexity_char
        assert row["test:linear_backward"] == 0 and row["test_seconds:linear_backward"] == 0.125
        assert row["likely_causes"] == "linear-bias"
        # the judge's static findings follow its integrity notes; its run-time code has a column
        assert row["integrity_flags"] == "; ".join([*written.flags, *written.static_findings])
        assert row["runtime_code"] == written.runtime_code[0]
    assert "shares its weights with bo (byte-identical" in rows["ann"]["flags"]

    root = tmp_path / "gradescope"
    fake_judge(root / "source", written.to_json())
    (root / "submission").mkdir(parents=True)
    (root / "submission/handin.tar").write_bytes(b"ann")
    gradescope.main(["--root", str(root)])
    assert len(parsed) == 3
    results = json.loads((root / "results/results.json").read_text())
    backward = next(test for test in results["tests"] if test["name"].endswith("linear_backward"))
    assert "Likely cause: the bias gradient is summed" in backward["output"]
    assert [entry["value"] for entry in results["leaderboard"]] == written.scoreboard()

    fake_judge(tmp_path / "newer", {**written.to_json(), "version": report.VERSION + 1})
    refused = grading_run.run(grading_run.prepare(tmp_path / "newer", handins / "ann_1_handin.tar"))
    assert refused.status is Status.CRASHED and refused.report is None
    assert f"version {report.VERSION + 1}" in refused.error and "make autograde" in refused.error


def spelled_statuses(tree: ast.AST) -> list[tuple[int, list[str]]]:
    """(line, the statuses) of each collection (set, list, tuple, dict's keys) or comparison
    with ``in`` that spells two or more of Status's values as strings: a second hand-kept list."""
    values = {status.value for status in Status}
    found = []
    for node in ast.walk(tree):
        items = (node.keys if isinstance(node, ast.Dict) else node.elts
                 if isinstance(node, (ast.Set, ast.List, ast.Tuple)) else [])
        spelled = [item.value for item in items
                   if isinstance(item, ast.Constant) and item.value in values]
        if len(spelled) >= 2:
            found.append((node.lineno, spelled))
    return found


def test_the_statuses_live_once():
    """Status is the one list of how a grading ends: no module of the repository (but the tests)
    spells two of its values in a collection of its own; the gradebook derives the statuses it
    scores from it (every one but crashed)."""
    assert spelled_statuses(ast.parse('SCORED = {"ok", "invalid", "timeout"}')) == [
        (1, ["ok", "invalid", "timeout"])]
    assert spelled_statuses(ast.parse('if status in ("ok", Status.TIMEOUT): pass')) == []
    found = [f"{path.relative_to(REPO)}:{line}: {spelled}"
             for folder in ("autograder", "hw4lib", "tools")
             for path in sorted((REPO / folder).rglob("*.py"))
             for line, spelled in spelled_statuses(ast.parse(path.read_text(encoding="utf-8")))]
    assert found == [], found
    assert set(gradebook.SCORED_STATUSES) == set(Status) - {Status.CRASHED}
    assert [status.value for status in Status] == ["ok", "invalid", "timeout", "crashed"]


# Every JSON parse in autograder/ outside report.py, by (file, function): what it parses. None of
# them is the judge's details.json; a new one fails the test below until it is named here (a
# details.json is read with report.load).
JSON_READERS = {
    ("autograder/classroom/rescore.py", "read_build_info"): "dist/'s build_info.json",
    ("autograder/classroom/rescore.py", "decide"): "grades.csv's scoring cell",
    ("autograder/classroom/rescore.py", "apply_rescore"): "grades.csv's scoring cell",
    ("autograder/classroom/adjustments.py", "hand_edits"): "grades.csv's points_as_written cell",
    ("autograder/judging/grade.py", "grade"): "the autograder's build_info.json",
    ("autograder/judging/scoring/grade_model.py", "evaluate_handin"): "the handin's run_card.json",
    ("autograder/judging/grading_run.py", "parse_scores"): "the judge's scores line on stdout",
    ("autograder/judging/scoring/integrity.py", "read_card"): "the handin's run_card.json",
    ("autograder/judging/isolation/judge_zygote.py", "answer"): "a zygote's answer line",
    ("autograder/judging/isolation/judge_zygote.py", "serve"): "a request line to the zygote",
    ("autograder/judging/scoring/language_model.py", "grade_language_model"):
        "the model child's result",
    ("autograder/judging/scoring/language_model.py", "self_reported_perplexity"):
        "test_metrics.json",
    ("autograder/judging/isolation/parked_child.py", "_parked"): "a request to the parked child",
    ("autograder/sandboxed/wire.py", "load_program"): "the worker's program.json",
    ("autograder/sandboxed/wire.py", "_header"): "a worker record's header",
}
# The JSON parsers: the json module's (called through it or imported from it), hw4lib.file_io's
# readers and pydantic's, however they are reached.
JSON_FUNCTIONS = {"load", "loads", "JSONDecoder"}
JSON_READER_FUNCTIONS = {"read_json", "read_untrusted_json", "model_validate_json"}


def json_parses(tree: ast.AST) -> list[tuple[str, int]]:
    """(enclosing function, line) of every call to a JSON parser in a module, however it is
    named (``json.loads``, ``loads`` imported from json, ``file_io.read_json``, ``read_json``)."""
    imported = {alias.asname or alias.name for node in ast.walk(tree)
                if isinstance(node, ast.ImportFrom) and node.module == "json"
                for alias in node.names}
    found = []

    def parses(func: ast.expr) -> bool:
        if isinstance(func, ast.Attribute):
            return (func.attr in JSON_READER_FUNCTIONS or func.attr in JSON_FUNCTIONS
                    and isinstance(func.value, ast.Name) and func.value.id == "json")
        return isinstance(func, ast.Name) and (func.id in JSON_READER_FUNCTIONS
                                               or func.id in imported)

    def visit(node, function):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            function = node.name
        if isinstance(node, ast.Call) and parses(node.func):
            found.append((function, node.lineno))
        for child in ast.iter_child_nodes(node):
            visit(child, function)

    visit(tree, "<module>")
    return found


def test_no_class_tool_parses_a_details_json_itself():
    """A supplement to the test above: outside autograder/judging/scoring/report.py, every JSON
    parse in
    autograder/ is one JSON_READERS names, none of them the judge's details.json."""
    assert json_parses(ast.parse("from json import loads as x\ndef f(p):\n    return x(p)\n"
                                 "def g(p):\n    return torch.load(p), file_io.read_json(p)\n")
                       ) == [("f", 3), ("g", 5)]
    found = set()
    for path in sorted((REPO / "autograder").rglob("*.py")):
        if path.name != "report.py":
            name = path.relative_to(REPO).as_posix()
            found |= {(name, function) for function, _ in
                      json_parses(ast.parse(path.read_text(encoding="utf-8")))}
    assert found == set(JSON_READERS), (sorted(found - set(JSON_READERS)),
                                        sorted(set(JSON_READERS) - found))
