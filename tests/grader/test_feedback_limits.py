# hw4p1: instructor-only
"""What the student reads, called directly (``autograder.judging.scoring.feedback``): a handin
graded only with a mytorch, a config and weights (each missing one named), the handin's notes
cut at 12 and at 400 characters on each side of both limits, the summary's scores and total.

    .venv/bin/python -m pytest -q tests/grader/test_feedback_limits.py
"""
import pytest

from autograder.judging.intake.safe_tar import Extraction
from autograder.judging.scoring import feedback
from hw4lib.grading_numbers import MYTORCH_RUBRIC

COMPLETE = {"mytorch/nn/linear.py": None, "config.yaml": None, "model_state_dict.pt": None}


def test_a_handin_with_a_mytorch_a_config_and_weights_is_complete():
    assert feedback.gradable_problem(Extraction(dict(COMPLETE))) == ""


@pytest.mark.parametrize("dropped, lacks", [
    ("mytorch/nn/linear.py", "it has no mytorch/ .py files;"),
    ("config.yaml", "it has no config.yaml;"),
    ("model_state_dict.pt", "it has no model_state_dict.pt;"),
])
def test_a_handin_missing_a_part_is_not_complete(dropped, lacks):
    files = {name: None for name in COMPLETE if name != dropped}
    problem = feedback.gradable_problem(Extraction(files, ["x.txt: is not a file; skipped", "y"]))
    assert problem.startswith(f"Not a complete handin: {lacks} it holds 2 files the grader uses "
                              f"({', '.join(sorted(files))}) and 1 it skipped (see the notes "
                              f"above). Run `make handin`")


def test_an_empty_handin_lacks_everything_and_lists_at_most_five_files():
    assert feedback.gradable_problem(Extraction()).startswith(
        "Not a complete handin: it has no mytorch/ .py files, no config.yaml, no "
        "model_state_dict.pt; it holds no file the grader uses. Run")
    five = {f"f{i}.json": None for i in range(5)}
    assert "it holds 5 files the grader uses (f0.json, f1.json, f2.json, f3.json, f4.json). " in (
        feedback.gradable_problem(Extraction(five)))
    six = {**five, "f5.json": None}
    assert "(f0.json, f1.json, f2.json, f3.json, f4.json, ...). " in (
        feedback.gradable_problem(Extraction(six)))


@pytest.mark.parametrize("count, shown", [(12, 12), (13, 13)])
def test_at_most_12_notes_are_shown_then_a_count(count, shown):
    notes = [f"note {i}" for i in range(count)]
    summary = feedback.summarised(notes)
    assert summary[:12] == notes[:12] and len(summary) == shown
    if count > 12:
        assert summary[12] == ("... and 1 more notes like these: the archive should hold only "
                               "what `make handin` packs")


def test_a_note_is_cut_to_400_characters():
    assert feedback.summarised(["a" * 400, "b" * 401]) == ["a" * 400, "b" * 397 + "..."]


def test_the_summary_adds_every_category(capsys):
    parts = (5, 2.5, 0.125, 20)  # 5 + 2.5 + 0.125 + 20 + 33.333 = 60.958
    scores = {**dict(zip(MYTORCH_RUBRIC, parts)), "LanguageModel": 33.333}
    feedback.print_summary(scores)
    lines = capsys.readouterr().out.splitlines()
    assert lines[-1] == f"  {'Total':<28s} {60.96:>6g}/100"
    assert f"  {'Softmax':<28s} {2.5:>6g}/5" in lines


def test_quoted_text_is_prefixed_line_by_line():
    assert feedback.indent("a\nb\n", "> ") == "> a\n> b"
    assert feedback.indent(" \n") == "    | (no output)"


def test_the_extraction_summary_names_the_files_and_shows_the_notes(capsys):
    feedback.report_extraction(Extraction(dict(COMPLETE), ["a note"]))
    feedback.report_extraction(Extraction({"mytorch/a.py": None}))
    assert capsys.readouterr().out.splitlines() == [
        "  extracted 1 mytorch files and: config.yaml, model_state_dict.pt", "  note: a note",
        "  extracted 1 mytorch files and: nothing else"]
