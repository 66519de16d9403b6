# hw4p1: instructor-only
"""Step 3 of the judge read line by line, fast: what the model child's result gives in points,
details and feedback (``autograder.judging.scoring.language_model``), and the likely causes of a
weak model (``autograder.judging.scoring.lm_diagnosis``), each bound tried at it and on each side.

    .venv/bin/python -m pytest -q tests/grader/test_lm_scoring.py

The model child is a recording stand-in passed as the ``parked`` child the judge would give
(``ScriptedChild``): it writes the result JSON a real child would and ends as told, so every
branch on how the child ended runs in milliseconds; tests/grader/test_lm_integrity.py runs the
real child. Truths are written out by hand: the rubric's linear scale at the midpoint of its two
marks, exp(total NLL / characters) for a card's perplexity, exact binary fractions at each bound.
"""
import json
import math
import types
from pathlib import Path

import pytest

from autograder.judging.intake.safe_tar import Extraction
from autograder.judging.isolation.processes import Run
from autograder.judging.scoring import language_model, rubric
from autograder.judging.scoring.lm_diagnosis import fitting_tokenizers, lm_hint, tokenizer_hint
from autograder.judging.scoring.report import GradingReport, Status
from hw4lib.handin_format import CONFIG_FILE, METRICS_FILE, RUN_CARD_FILE, STATE_DICT_FILE
from tests.grader.autograder_helpers import run_files_handin

FULL, ZERO = 4.0, 8.0  # the marks these tests grade with: 6.0 is exactly half the points
DIGEST = "d" * 64


class ScriptedChild:
    """A parked model child that writes ``result`` (a JSON value, or None: nothing) to its
    ``--out`` and ends with ``returncode`` (None: at the time limit) after ``seconds``; it records
    the arguments it was given and whether it was closed."""

    def __init__(self, result, returncode: int | None = 0, seconds: float = 1.23456) -> None:
        self.result, self.returncode, self.seconds = result, returncode, seconds
        self.argv: list[str] | None = None
        self.closed = False

    def run(self, argv: list[str], cwd: Path, env: dict, timeout: float, limits: dict) -> Run:
        self.argv = argv
        if self.result is not None:
            out = Path(argv[argv.index("--out") + 1])
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_text(json.dumps(self.result))
        return Run(self.returncode, self.seconds, "child output\n")

    def close(self) -> None:
        self.closed = True


def handin(folder: Path, card: dict | None = None, reported: float | None = None) -> Extraction:
    """An extracted handin naming config.yaml and the weights (the scripted child reads neither),
    with ``card`` as run_card.json and ``reported`` as test_metrics.json's perplexity_char."""
    extraction = run_files_handin(folder, card, reported)
    extraction.files[CONFIG_FILE] = folder / CONFIG_FILE
    return extraction


def grade(tmp_path: Path, child: ScriptedChild, extraction: Extraction | None = None):
    """(points, details) of grade_language_model with the marks FULL and ZERO."""
    return language_model.grade_language_model(
        extraction or handin(tmp_path / "work/handin"), tmp_path / "work", 60, FULL, ZERO, child)


# ------------------------------------------------------------------------------------------------
# How the child ended -> points
# ------------------------------------------------------------------------------------------------

def test_a_measured_perplexity_is_scored_on_the_rubric_scale(tmp_path, capsys):
    child = ScriptedChild({"perplexity_char": 6.0, "num_parameters": 1234, "token_type": "char"})
    points, details = grade(tmp_path, child)
    assert points == rubric.LM_POINTS / 2  # 6.0: halfway between the marks 4.0 and 8.0
    assert details["perplexity_char"] == 6.0 and details["seconds"] == 1.235
    assert details["num_parameters"] == 1234 and details["token_type"] == "char"
    assert child.argv[:2] == ["--handin", str(tmp_path / "work/handin")]
    assert child.argv[child.argv.index("--out") + 1] == str(tmp_path / "work/lm/result.json")
    assert "6.00 (full marks <= 4.0, none >= 8.0" in capsys.readouterr().out


@pytest.mark.parametrize("result, returncode", [
    ({"perplexity_char": 6.0}, 1),           # a perplexity, but the child failed
    ({"perplexity_char": 6.0}, -1),          # killed by a signal
    ({"perplexity_char": 6}, 0),             # not what grade_model writes (a float)
    ({"error": "config.yaml: model.d_model must be an int"}, 1),
    (None, 1),                               # no result file at all
])
def test_a_child_that_did_not_measure_scores_zero(tmp_path, result, returncode):
    points, details = grade(tmp_path, ScriptedChild(result, returncode))
    assert points == 0 and details["message"].startswith("the model could not be evaluated")
    assert "perplexity_char" not in details
    if result and "error" in result:
        assert details["message"].endswith(": config.yaml: model.d_model must be an int")


def test_a_child_past_its_time_limit_scores_zero_and_says_so(tmp_path):
    points, details = grade(tmp_path, ScriptedChild({"perplexity_char": 6.0}, returncode=None))
    assert points == 0 and details["timed_out"] is True
    assert details["message"] == "evaluating the model took more than the 60 s limit"


def test_a_handin_without_its_model_files_scores_zero_without_a_child(tmp_path):
    child = ScriptedChild({"perplexity_char": 6.0})
    for files in ({}, {CONFIG_FILE: tmp_path / CONFIG_FILE},
                  {STATE_DICT_FILE: tmp_path / STATE_DICT_FILE}):
        points, details = grade(tmp_path, child, Extraction(files=files))
        assert points == 0 and details["message"].startswith("the handin has no ")
    assert child.argv is None


def test_grade_lm_scores_records_and_closes_the_parked_child(tmp_path, monkeypatch):
    clock = iter([100.0, 101.23456, 200.0, 201.0])  # each step's start and end
    monkeypatch.setattr(language_model, "time", types.SimpleNamespace(monotonic=clock.__next__))
    report, scores, child = GradingReport(), {}, ScriptedChild({"perplexity_char": 6.0})
    language_model.grade_lm(handin(tmp_path / "work/handin"), tmp_path / "work", {}, 60, scores,
                            report, child)
    assert child.closed and report.status is Status.OK
    assert report.seconds[rubric.LM_CATEGORY] == 1.23
    assert report.lm.perplexity_char == 6.0
    assert report.flags == ["no readable run_card.json: the handin was not packed by make handin"]
    # the build's thresholds, when given, replace the rubric's
    report, scores = GradingReport(), {}
    language_model.grade_lm(handin(tmp_path / "work/handin"), tmp_path / "work",
                            {"full_marks_ppl": FULL, "zero_marks_ppl": ZERO}, 60, scores, report,
                            ScriptedChild({"perplexity_char": 6.0}))
    assert scores[rubric.LM_CATEGORY] == rubric.LM_POINTS / 2


def test_grade_lm_without_a_parked_child_and_past_the_limit(tmp_path):
    report, scores = GradingReport(), {}
    language_model.grade_lm(Extraction(files={}), tmp_path / "work", {}, 60, scores, report, None)
    assert scores[rubric.LM_CATEGORY] == 0 and report.status is Status.OK
    language_model.grade_lm(handin(tmp_path / "work/handin"), tmp_path / "work", {}, 60, scores,
                            report, ScriptedChild({"perplexity_char": 6.0}, returncode=None))
    assert report.status is Status.TIMEOUT and report.lm.timed_out


# ------------------------------------------------------------------------------------------------
# The run card's test set: what the child is asked, and what its answer gives
# ------------------------------------------------------------------------------------------------

CARD_LOSSES = {"transcript_nll": [3.0, 4.0], "transcript_tokens": [5, 6], "total_nll": 7.0}
SAMPLE = {"seed": 1, "transcripts": 2, "drawn": [0], "lowest": [1], "characters": 9,
          "indices": [0, 1], "names": ["a", "b"], "nll": [3.0, 4.0], "tokens": [5, 6],
          "chars": [4, 5]}


def test_a_test_set_of_one_transcript_is_compared(tmp_path, monkeypatch):
    monkeypatch.setattr(language_model, "PUBLIC_SET", tmp_path)
    args, note = language_model.compare_arguments(7.5, {"test_set": {"transcripts": 1,
                                                                     "sha256": DIGEST}})
    assert args == ["--public-set", str(tmp_path), "--compare", "1", DIGEST] and note == ""


def test_a_card_with_losses_gets_a_fresh_63_bit_seed(tmp_path, monkeypatch):
    monkeypatch.setattr(language_model, "PUBLIC_SET", tmp_path)
    card = {"test_set": {"transcripts": 2, "sha256": DIGEST, **CARD_LOSSES}}
    seeds = []
    for _ in range(64):
        args, _ = language_model.compare_arguments(7.5, card)
        assert args[:5] == ["--public-set", str(tmp_path), "--compare", "2", DIGEST]
        assert args[5] == "--sample-seed"
        seeds.append(int(args[6]))
    # 64 draws of 63 bits: all below 2**62 or one at 2**63 or above, each by chance 2**-64
    assert max(seeds) < 2**63 and max(seeds) >= 2**62 and len(set(seeds)) == 64


def test_the_card_s_sampled_losses_give_the_compared_perplexity(tmp_path, monkeypatch):
    monkeypatch.setattr(language_model, "PUBLIC_SET", tmp_path)
    card = {"test_set": {"transcripts": 2, "sha256": DIGEST, **CARD_LOSSES}}
    child = ScriptedChild({"perplexity_char": 6.0, "compared_sample": SAMPLE})
    _, details = grade(tmp_path, child, handin(tmp_path / "work/handin", card, 2.2))
    assert "--sample-seed" in child.argv
    assert details["compared_perplexity_char"] == pytest.approx(math.exp(7.0 / 9))
    assert details["compare_note"] == "" and details["compared_sample"] == SAMPLE
    # one re-measured transcript 10% off: the card's number is not what these weights give
    off = {**SAMPLE, "nll": [3.0, 4.0 + 5 * math.log(1.1)]}
    _, details = grade(tmp_path, ScriptedChild({"perplexity_char": 6.0, "compared_sample": off}),
                       handin(tmp_path / "work/handin", card, 2.2))
    assert details["compared_perplexity_char"] is None
    assert "per-transcript losses disagree with these weights" in details["compare_note"]


def test_a_whole_set_re_measured_is_compared_and_says_why(tmp_path, monkeypatch):
    monkeypatch.setattr(language_model, "PUBLIC_SET", tmp_path)
    older = {"test_set": {"transcripts": 2, "sha256": DIGEST}}
    malformed = {"test_set": {**older["test_set"], "total_nll": "seven"}}
    for card, why in ((older, f"{RUN_CARD_FILE} has no per-transcript losses (an older make "
                              f"handin)"),
                      (malformed, f"{RUN_CARD_FILE}'s per-transcript losses are not as make "
                                  f"handin writes them")):
        child = ScriptedChild({"perplexity_char": 6.0, "compared_perplexity_char": 2.5})
        _, details = grade(tmp_path, child, handin(tmp_path / "work/handin", card, 2.5))
        assert "--sample-seed" not in child.argv and "--compare" in child.argv
        assert details["compared_perplexity_char"] == 2.5
        assert details["compare_note"] == f"{why}: the whole test set it names was re-measured"


def test_the_child_s_note_is_kept_when_the_judge_had_none(tmp_path, monkeypatch):
    monkeypatch.setattr(language_model, "PUBLIC_SET", tmp_path)
    card = {"test_set": {"transcripts": 2, "sha256": DIGEST}}
    child = ScriptedChild({"perplexity_char": 6.0, "compare_note": "not the start of the split"})
    _, details = grade(tmp_path, child, handin(tmp_path / "work/handin", card, 2.5))
    assert details["compare_note"] == "not the start of the split"
    assert details["compared_perplexity_char"] is None
    # the judge's own reason comes first: nothing was asked of the child
    child = ScriptedChild({"perplexity_char": 6.0, "compare_note": "the child's"})
    _, details = grade(tmp_path, child, handin(tmp_path / "work/handin", card, None))
    assert details["compare_note"] == f"{METRICS_FILE} has no usable perplexity_char"
    assert "--compare" not in child.argv


def test_the_student_s_own_number_is_echoed_beside_the_measurement(tmp_path, capsys):
    assert language_model.self_reported_perplexity(handin(tmp_path / "h", None, 2.5)) == 2.5
    assert language_model.self_reported_perplexity(handin(tmp_path / "n")) is None
    language_model.report_self_reported_metrics(None, 2.5, "unused")
    assert "no usable perplexity_char" in capsys.readouterr().out
    language_model.report_self_reported_metrics(2.5, 2.51234, "unused", " (how)")
    assert "reports 2.5000; these weights give 2.5123 on the same transcripts (how);" in \
        capsys.readouterr().out
    language_model.report_self_reported_metrics(2.5, None, "the reason")
    assert "reports 2.5000; not compared with these weights: the reason;" in \
        capsys.readouterr().out


# ------------------------------------------------------------------------------------------------
# lm_diagnosis: the likely cause, each bound at it and on each side
# ------------------------------------------------------------------------------------------------

VOCAB = {"char": 30, "1k": 1000}


def test_the_tokenizers_that_fit_are_read_from_the_embedding_rows():
    assert fitting_tokenizers({"target_embedding.weight": (30, 1000)}, VOCAB) == ["char"]
    assert fitting_tokenizers({"final_linear.weight": (1000, 30)}, VOCAB) == ["1k"]
    assert fitting_tokenizers({"final_linear.weight": (77, 30)}, VOCAB) == []
    assert fitting_tokenizers({"encoder.weight": (30, 30)}, VOCAB) == []
    hint = tokenizer_hint("1k", {"target_embedding.weight": (30, 16)}, VOCAB)
    assert hint.startswith("the weights fit the char tokenizer, but config.yaml's "
                           "tokenization.token_type is 1k")
    assert tokenizer_hint("char", {"target_embedding.weight": (30, 16)}, VOCAB) == ""
    assert tokenizer_hint("char", {"target_embedding.weight": (77, 16)}, VOCAB) == ""


WORSE, BETTER, OTHER = "reports a worse", "reports a better", "much worse than the best validation"


def test_a_report_is_far_only_past_the_tolerance_on_either_side():
    # tolerance 0.25 of 8.0: 10.0 and 6.0 are exactly at the bounds (exact binary fractions)
    good = FULL - 1
    assert lm_hint(good, FULL, 10.0, 8.0, None, 0.25) == ""
    assert WORSE in lm_hint(good, FULL, math.nextafter(10.0, 11), 8.0, None, 0.25)
    assert lm_hint(good, FULL, 6.0, 8.0, None, 0.25) == ""
    assert BETTER in lm_hint(good, FULL, math.nextafter(6.0, 5), 8.0, None, 0.25)
    # a weak measurement with a report at either bound: no cause from the report
    assert lm_hint(FULL + 1, FULL, 10.0, 8.0, None, 0.25) == ""
    assert lm_hint(FULL + 1, FULL, 6.0, 8.0, None, 0.25) == ""


def test_a_report_is_read_only_beside_a_finite_float_comparison():
    for reported, compared in ((math.nan, 8.0), (20.0, math.nan), (20.0, None), (None, 8.0),
                               (20, 8.0), (20.0, 8), (math.inf, 8.0)):
        assert lm_hint(FULL - 1, FULL, reported, compared, None, 0.25) == "", (reported, compared)
        assert lm_hint(FULL + 1, FULL, reported, compared, None, 0.25) == "", (reported, compared)


def test_dropout_is_named_only_when_the_model_has_some():
    with_dropout = lm_hint(FULL - 1, FULL, 20.0, 8.0, None, 0.25, dropout_active=True)
    assert "in training mode (dropout on: call model.eval()" in with_dropout
    assert with_dropout.endswith("or on other weights than the packed best checkpoint "
                                 "(the last epoch's?)")
    assert "model.eval()" not in lm_hint(FULL - 1, FULL, 20.0, 8.0, None, 0.25)


def test_a_card_that_disagrees_silences_every_cause():
    assert lm_hint(FULL + 1, FULL, 20.0, 8.0, 1.0, 0.25, card_disagrees=True) == ""
    assert WORSE in lm_hint(FULL + 1, FULL, 20.0, 8.0, 1.0, 0.25)  # the default: it agrees


def test_the_validation_gap_is_ten_percent_of_the_best_validation():
    # 10.0 * 1.1 is exactly 11.0: at the bound no cause, one step past it the checkpoint's
    weak = FULL + 1
    assert lm_hint(weak, FULL, None, 11.0, 10.0, 0.25) == ""
    assert OTHER in lm_hint(weak, FULL, None, math.nextafter(11.0, 12), 10.0, 0.25)
    assert lm_hint(weak, FULL, None, 10.5, 10.0, 0.25) == ""
    # a model at the full-marks mark, whatever its checkpoint: nothing to explain
    assert lm_hint(FULL, FULL, None, 20.0, 10.0, 0.25) == ""
    assert OTHER in lm_hint(math.nextafter(FULL, 5), FULL, None, 20.0, 10.0, 0.25)
    # without either number, nothing can be read
    for compared, best in ((None, 10.0), (20.0, None), (math.nan, 10.0), (20.0, math.inf)):
        assert lm_hint(weak, FULL, None, compared, best, 0.25) == "", (compared, best)


def test_the_child_s_error_is_quoted_to_2000_printable_characters(tmp_path):
    """A handin's error text reaches the feedback cut to 2000 characters, control characters
    dropped first (the child's message may be anything the handin's files made it say)."""
    for length in (2000, 2001, 2002):
        error = "\x1b" + "e" * (length - 1)
        _, details = grade(tmp_path / str(length), ScriptedChild({"error": error}, 1))
        kept = "e" * min(length - 1, 2000)
        assert details["message"] == f"the model could not be evaluated: {kept}", length
