# hw4p1: instructor-only
"""The language model's integrity flags, likely causes and feedback: true on honest work, both
numbers on tampering, nothing about the hidden set.

    .venv/bin/python -m pytest -q tests/grader/test_lm_integrity.py

The run card names the test set test_metrics.json measured (``hw4lib.handin.measured_test_set``),
the grader measures the packed weights on exactly those transcripts
(``autograder.judging.scoring.grade_model.compare_with_report``) and flags for the staff only facts
that honest work packed by make handin cannot show
(``autograder.judging.scoring.integrity.integrity_flags``). Truths here are independent of the code
under test: the transcripts' digest is recomputed from the files, the perplexity of the compared set
line by line without the library's metric
(``tests.grader.autograder_helpers.direct_perplexity_char``).
"""
import contextlib
import io
import json
import math
import re
from dataclasses import replace
from pathlib import Path

import pytest
import torch

from autograder.judging import gradescope
from autograder.judging.scoring import grade_model, integrity, language_model, rubric
from autograder.judging.scoring.lm_diagnosis import lm_hint
from autograder.judging.scoring.report import GradingReport, LanguageModelResult
from autograder.judging.intake.safe_tar import Extraction
from datagen.build_data import Utterance, write_split
from hw4lib.data import H4Tokenizer
from hw4lib.data.tokenizer import DEFAULT_TOKEN_MAP
from hw4lib.handin import measured_test_set
from hw4lib.handin_format import (METRICS_FILE, STATE_DICT_FILE,
                                  transcripts_sha256)
from tests.grader.autograder_helpers import (TINY_MODEL, direct_perplexity_char, make_model_handin,
                                             run_files_handin)
from tests.grader.test_grade_model import HIDDEN_LINES, make_hidden_set


PUBLIC_LINES = [f"THE PUBLIC TEST SPLIT {chr(ord('A') + index)}" + " LA" * (index % 7)
                for index in range(20)]
TOLERANCE = integrity.REPORTED_TOLERANCE


def write_test_partition(root: Path, lines: list[str]) -> Path:
    """``root/test/<id>.npy`` as make data writes them (ids sort in the order of ``lines``)."""
    write_split(root / "test", [Utterance(f"7000-{index:06d}-0000", text)
                                for index, text in enumerate(lines)])
    (root / ".complete").write_text(json.dumps({"source": "generator", "seed": 3}))
    return root


def test_the_run_card_names_the_test_set_that_was_measured(tmp_path):
    data = write_test_partition(tmp_path / "data", PUBLIC_LINES)
    for subset, kept in ((1.0, 20), (0.1, 2), (0.25, 5)):
        config = {"data": {"root": "data", "subset": subset}}
        chars = sum(len(line) for line in PUBLIC_LINES[:kept])
        with contextlib.redirect_stdout(io.StringIO()):
            test_set = measured_test_set(config, {"num_chars": chars}, tmp_path)
        assert test_set == {"split": "test", "subset": subset, "data_seed": 3, "transcripts": kept,
                            "characters": chars,
                            "sha256": transcripts_sha256(PUBLIC_LINES[:kept])}, subset
    # The digest is of the transcripts in order, each ended by a newline (recomputed here)
    import hashlib
    assert transcripts_sha256(PUBLIC_LINES[:2]) == hashlib.sha256(
        "".join(line + "\n" for line in PUBLIC_LINES[:2]).encode()).hexdigest()
    # A set that is not the one measured (the data rebuilt since), or that cannot be read: none,
    # with a note, and so no comparison later
    for config, metrics in (({"data": {"root": "data", "subset": 0.1}}, {"num_chars": 1}),
                            ({"data": {"root": "elsewhere"}}, {"num_chars": 1}),
                            ({}, {"num_chars": 1})):
        printed = io.StringIO()
        with contextlib.redirect_stdout(printed):
            assert measured_test_set(config, metrics, tmp_path) is None
        assert "will not compare" in printed.getvalue()
    assert data.is_dir()


def test_the_grader_reads_exactly_the_first_transcripts_the_card_counts(tmp_path):
    # Every count of 49 files: count / 49 * 49 falls short of count for some (1 / 49 * 49 < 1),
    # so a subset of count / 49 would keep one file too few
    lines = [f"LINE {chr(ord('A') + index % 26)}" * (1 + index % 3) for index in range(49)]
    public = write_test_partition(tmp_path / "public", lines)
    dataset = grade_model.read_partition(public, H4Tokenizer(DEFAULT_TOKEN_MAP, "char"))
    assert dataset.transcripts == lines
    for count in range(1, len(lines) + 1):
        assert grade_model.first_transcripts(dataset, count).transcripts == lines[:count], count


def test_the_grader_measures_exactly_the_set_the_card_names(tmp_path):
    hidden = make_hidden_set(tmp_path / "hidden")
    public = write_test_partition(tmp_path / "public", PUBLIC_LINES)
    model = make_model_handin(tmp_path / "h")
    tokenizer = H4Tokenizer(DEFAULT_TOKEN_MAP, "char")
    for kept in (2, 20):
        result = grade_model.evaluate_handin(
            tmp_path / "h", hidden, (public, kept, transcripts_sha256(PUBLIC_LINES[:kept])))
        expected = direct_perplexity_char(model, tokenizer, PUBLIC_LINES[:kept])
        assert result["compared_perplexity_char"] == pytest.approx(expected, rel=1e-5), kept
        assert "compare_note" not in result
    # Not the start of the public split (other data, another order, a count out of range):
    # nothing is measured, and the note says why
    for kept, digest in ((2, transcripts_sha256(PUBLIC_LINES[1:3])), (0, transcripts_sha256([])),
                         (21, transcripts_sha256(PUBLIC_LINES))):
        result = grade_model.evaluate_handin(tmp_path / "h", hidden, (public, kept, digest))
        assert "compared_perplexity_char" not in result
        assert "not the start of the public test split" in result["compare_note"]


def test_only_a_count_and_a_digest_from_the_card_reach_the_model_child(tmp_path, monkeypatch):
    monkeypatch.setattr(language_model, "PUBLIC_SET", tmp_path)
    good = {"transcripts": 45, "sha256": "d" * 64}
    args, note = language_model.compare_arguments(7.5, {"test_set": good})
    assert args == ["--public-set", str(tmp_path), "--compare", "45", "d" * 64] and note == ""
    for test_set in (None, [], {**good, "transcripts": -1}, {**good, "transcripts": 0},
                     {**good, "transcripts": True}, {**good, "transcripts": 4.0},
                     {**good, "sha256": "D" * 64}, {**good, "sha256": "--out=/etc/x" + "d" * 52},
                     {**good, "sha256": None}):
        args, note = language_model.compare_arguments(7.5, {"test_set": test_set})
        assert args == [] and "does not name the test set" in note, test_set
    assert language_model.compare_arguments(None, {"test_set": good}) == (
        [], "test_metrics.json has no usable perplexity_char")
    monkeypatch.setattr(language_model, "PUBLIC_SET", tmp_path / "absent")
    assert language_model.compare_arguments(7.5, {"test_set": good})[0] == []


CARD = {"state_dict_sha256": "a" * 64, "config_sha256": "c" * 64, "test_perplexity_char": 7.5149,
        "test_set": {"split": "test", "subset": 0.1, "transcripts": 45, "characters": 9876,
                     "sha256": "d" * 64}}
MEASURED = {"state_dict_sha256": "a" * 64, "config_sha256": "c" * 64,
            "reported_perplexity_char": 7.5149, "compared_perplexity_char": 7.5150}


def test_honest_handins_are_never_flagged(tmp_path):
    # A data.subset 0.1 run: 7.5149 reported on its tenth of the test split, and measured there
    # (the whole split, a different set, would give another value: it is not what is compared).
    assert integrity.integrity_flags(run_files_handin(tmp_path, CARD, 7.5149), MEASURED) == []
    # The set could not be compared (other data, an older make handin): a note, never a flag
    not_compared = {**MEASURED, "compared_perplexity_char": None,
                    "compare_note": "the test set the run card names is not ..."}
    assert integrity.integrity_flags(run_files_handin(tmp_path, {**CARD, "test_set": None}, 7.5149),
                                 not_compared) == []


def test_each_tampering_is_flagged_with_both_numbers(tmp_path):
    cases = {
        "edited metrics": (CARD, {**MEASURED, "reported_perplexity_char": 5.0},
                           ["reports a test perplexity of 5.0000, run_card.json 7.5149",
                            "reports a test perplexity of 5.0000; these weights give 7.5150 on "
                            "the same 45 transcripts"]),
        "edited metrics and card": ({**CARD, "test_perplexity_char": 5.0},
                                    {**MEASURED, "reported_perplexity_char": 5.0},
                                    ["5.0000; these weights give 7.5150", "33.5% apart"]),
        "swapped weights": (CARD, {**MEASURED, "state_dict_sha256": "b" * 64,
                                   "compared_perplexity_char": 9.0},
                            ["model_state_dict.pt's sha256 is 'bbbbbbbbbbbbbbbb..., run_card.json "
                             "records 'aaaaaaaaaaaaaaaa...", "7.5149; these weights give 9.0000"]),
        "swapped config": (CARD, {**MEASURED, "config_sha256": "e" * 64},
                           ["config.yaml's model and tokenizer digest is 'eeee"]),
    }
    for name, (card, lm, expected) in cases.items():
        flags = integrity.integrity_flags(
            run_files_handin(tmp_path, card, lm["reported_perplexity_char"]), lm)
        text = "\n".join(flags)
        for part in expected:
            assert part in text, (name, flags)
    assert integrity.integrity_flags(run_files_handin(tmp_path, None, 7.5), MEASURED) == [
        "no readable run_card.json: the handin was not packed by make handin"]


def test_a_likely_cause_is_given_only_where_it_can_be_true():
    mark = rubric.FULL_MARKS_PPL  # the perplexities below sit around the pass mark
    good, weak, far, best = mark - 0.5, mark + 0.1, mark + 1.0, mark - 0.55
    # Swapped weights (the card disagrees): nothing about the training run can be read from them
    assert lm_hint(good, mark, weak, good, best, TOLERANCE, card_disagrees=True) == ""
    assert lm_hint(far, mark, good, far, best, TOLERANCE, card_disagrees=True) == ""
    # A report worse than the weights in eval mode: training mode only where dropout exists
    with_dropout = lm_hint(good, mark, weak, good, best, TOLERANCE, dropout_active=True)
    without = lm_hint(good, mark, weak, good, best, TOLERANCE, dropout_active=False)
    assert "model.eval()" in with_dropout and "other weights" in with_dropout
    assert "eval" not in without and "other weights than the packed" in without
    # A report better than the weights: other weights were evaluated
    assert "not the ones that were evaluated" in lm_hint(weak, mark, good, weak, mark, TOLERANCE)
    # Not compared like with like: no cause from the report
    assert lm_hint(good, mark, weak, None, best, TOLERANCE, dropout_active=True) == ""
    # Consistent and good, or weak with nothing known: nothing to say
    assert lm_hint(good, mark, good + 0.01, good, best, TOLERANCE) == ""
    assert lm_hint(mark + 0.5, mark, None, None, None, TOLERANCE) == ""


def test_gradescope_shows_the_flags_to_the_staff_only():
    flags = ["test_metrics.json reports a test perplexity of 5.0000; these weights give 7.5150"]
    details = GradingReport(lm=LanguageModelResult(
        message="per-character perplexity on the hidden test set: 4.57", perplexity_char=4.5678),
        flags=flags)
    scores = rubric.zero_scores()
    payload = gradescope.results_payload(scores, details, "summary", "after_due_date")
    staff = [test for test in payload["tests"] if flags[0] in test["output"]]
    assert [test["visibility"] for test in staff] == ["hidden"] and staff[0]["max_score"] == 0
    visible = [test for test in payload["tests"] if test["visibility"] != "hidden"]
    assert not any("5.0000" in test["output"] for test in visible)
    assert "5.0000" not in payload["output"]
    assert payload["leaderboard"][0]["value"] == 4.57  # public: two decimals, like the feedback
    no_flags = gradescope.results_payload(scores, replace(details, flags=[]), "s", "visible")
    assert all(test["visibility"] != "hidden" for test in no_flags["tests"])


def leaks(feedback: str, model: torch.nn.Module, lines: list[str]) -> list[str]:
    """What ``feedback`` tells about the hidden set ``lines`` beyond the perplexity to 2 decimals:
    a number with more decimals within 0.005 of its perplexity, its size in characters or
    transcripts, its longest transcript in tokens (char tokenizer, + [SOS])."""
    ppl = direct_perplexity_char(model, H4Tokenizer(DEFAULT_TOKEN_MAP, "char"), lines)
    chars = sum(len(line) for line in lines)
    sizes = {str(chars), f"{chars:,}", str(len(lines)), str(max(len(line) for line in lines) + 1)}
    found = [number for number in re.findall(r"\d[\d,]*(?:\.\d+)?", feedback)
             if number in sizes or ("." in number and len(number.split(".")[1]) > 2
                                    and abs(float(number.replace(",", "")) - ppl) < 0.005)]
    return found


@pytest.mark.slow
def test_the_feedback_tells_nothing_about_the_hidden_set(tmp_path, monkeypatch, capsys):
    hidden = make_hidden_set(tmp_path / "hidden")
    monkeypatch.setattr(language_model, "HIDDEN_SET", hidden)
    model = make_model_handin(tmp_path / "work/handin")
    files = {name: tmp_path / "work/handin" / name for name in ("config.yaml", STATE_DICT_FILE)}
    points, details = language_model.grade_language_model(
        Extraction(files=files), tmp_path / "work", 120, rubric.FULL_MARKS_PPL,
        rubric.ZERO_MARKS_PPL)
    feedback = capsys.readouterr().out + details["message"] + details["hint"]
    assert f"{details['perplexity_char']:.2f}" in feedback, feedback
    assert leaks(feedback, model, HIDDEN_LINES) == [], feedback
    # the check itself finds what it looks for
    assert leaks(f"{details['perplexity_char']:.6f} on 999 characters", model, HIDDEN_LINES)
    assert leaks(f"{sum(map(len, HIDDEN_LINES))} characters", model, HIDDEN_LINES)
    assert details["perplexity_char"] == pytest.approx(
        direct_perplexity_char(model, H4Tokenizer(DEFAULT_TOKEN_MAP, "char"), HIDDEN_LINES),
        rel=1e-5)
    assert LanguageModelResult(**details).scoreboard()[0] == round(details["perplexity_char"], 2)
    # A too small max_len: what to fix, not how long the hidden transcripts are
    make_model_handin(tmp_path / "short", model_config={**TINY_MODEL, "max_len": 8})
    with pytest.raises(grade_model.GradingError) as error:
        grade_model.evaluate_handin(tmp_path / "short", hidden)
    assert "max_len is 8" in str(error.value) and "larger model.max_len" in str(error.value)
    assert leaks(str(error.value), model, HIDDEN_LINES) == [], str(error.value)
    assert math.isfinite(points)


@pytest.mark.slow
def test_a_report_far_below_the_hidden_set_is_flagged_whatever_the_card_says(tmp_path,
                                                                             monkeypatch):
    """The grader's own steps (the model child on the hidden set, then integrity_flags): a
    test_metrics.json reporting a third of what the weights give on the hidden set is flagged with
    both numbers, with a card naming a test set that cannot be found and with no card at all; the
    same handin reporting the hidden set's own value (2% off: an honest split's gap) is not."""
    hidden = make_hidden_set(tmp_path / "hidden")
    monkeypatch.setattr(language_model, "HIDDEN_SET", hidden)
    monkeypatch.setattr(language_model, "PUBLIC_SET", tmp_path / "no-public-split")
    model = make_model_handin(tmp_path / "work/handin")
    truth = direct_perplexity_char(model, H4Tokenizer(DEFAULT_TOKEN_MAP, "char"), HIDDEN_LINES)
    lost_set = {**CARD, "test_set": {**CARD["test_set"], "sha256": "0" * 64}}
    cases = {  # name: (card, reported, flagged)
        "lying, its test set not found": (lost_set, truth / 3, True),
        "lying, no card": (None, truth / 3, True),
        "honest, its test set not found": (lost_set, truth / 1.02, False),
    }
    for name, (card, reported, flagged) in cases.items():
        handin = run_files_handin(tmp_path / "work/handin", card, reported)
        handin.files["config.yaml"] = tmp_path / "work/handin/config.yaml"
        with contextlib.redirect_stdout(io.StringIO()):
            _, lm = language_model.grade_language_model(handin, tmp_path / "work", 120,
                                               rubric.FULL_MARKS_PPL, rubric.ZERO_MARKS_PPL)
        assert lm["perplexity_char"] == pytest.approx(truth, rel=1e-5), name
        below = [flag for flag in integrity.integrity_flags(handin, lm) if "hidden" in flag]
        if flagged:
            assert below == [f"{METRICS_FILE} reports a test perplexity of {reported:.4f}; these "
                             f"weights give {truth:.2f} on the hidden test set, 200% above it "
                             f"(honest runs: at most 25% above their report)"], (name, below)
        else:
            assert below == [], (name, below)
    assert integrity.below_hidden_set({"reported_perplexity_char": None,
                                       "perplexity_char": 9.0}) == []
