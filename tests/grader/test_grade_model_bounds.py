# hw4p1: instructor-only
"""The model child (``autograder.judging.scoring.grade_model``) at each of its bounds, fast: its
command line, what it writes and when it fails, the environment it follows, the seed it reads,
the dropout it reports, the evaluation order, a model's max_len at the longest transcript and one
short, and the run card's test set at 0, 1, a few, all and one more transcripts.

    .venv/bin/python -m pytest -q tests/grader/test_grade_model_bounds.py

Truths independent of the code under test: each perplexity computed line by line without the
library's metric (``tests.grader.autograder_helpers.direct_perplexity_char``, ``direct_nll``),
the longest transcript's length counted from the text, the seconds from a scripted clock.
"""
import itertools
import json
import types
from pathlib import Path

import pytest
import torch
import yaml
from tqdm import tqdm

from autograder.build_time.hidden_data import hidden_utterances
from autograder.judging.scoring import grade_model
from datagen.build_data import write_split
from hw4lib.data import H4Tokenizer
from hw4lib.data.tokenizer import DEFAULT_TOKEN_MAP
from hw4lib.handin_format import RUN_CARD_FILE, sample_transcripts, transcripts_sha256
from hw4lib.model import DecoderOnlyTransformer
from tests.grader.autograder_helpers import (TINY_MODEL, direct_nll, direct_perplexity_char,
                                             make_model_handin)

LINES = ["A GULL CRIED", "THE CAPTAIN HOISTED THE SAIL", "IT'S A FINE DAY", "NO",
         "THE MATE SAID SO TO THE COOK"]
LONGEST = max(len(line) for line in LINES) + 1  # the char tokenizer's tokens, [SOS] included
CHAR = H4Tokenizer(DEFAULT_TOKEN_MAP, "char")


def data_root(folder: Path, lines: list[str] = LINES) -> Path:
    """A data root whose test partition holds ``lines`` in their order."""
    write_split(folder / grade_model.PARTITION, hidden_utterances(lines))
    return folder


def char_model(max_len: int = 64) -> DecoderOnlyTransformer:
    torch.manual_seed(0)
    return DecoderOnlyTransformer(**{**TINY_MODEL, "max_len": max_len},
                                  num_classes=CHAR.vocab_size).eval()


@pytest.fixture
def quiet_environment(monkeypatch):
    """main() follows OMP_NUM_THREADS and TQDM_DISABLE: set so that it changes nothing here."""
    monkeypatch.setenv("OMP_NUM_THREADS", str(torch.get_num_threads()))
    monkeypatch.delenv("TQDM_DISABLE", raising=False)


# ------------------------------------------------------------------------------------------------
# The command line
# ------------------------------------------------------------------------------------------------

def test_the_command_line_refuses_what_does_not_go_together(tmp_path, capsys, quiet_environment):
    hidden, handin, out = data_root(tmp_path / "hidden"), tmp_path / "h", tmp_path / "out.json"
    make_model_handin(handin)
    need = {"--handin": str(handin), "--hidden-set": str(hidden), "--out": str(out)}
    digest = transcripts_sha256(LINES[:3])
    each_one_left_out = [[arg for key, value in need.items() if key != left
                          for arg in (key, value)] for left in need]
    whole = [arg for pair in need.items() for arg in pair]
    refused = [whole + extra for extra in (
        ["--compare", "3", digest],                                      # without --public-set
        ["--public-set", str(hidden)],                                   # without --compare
        ["--public-set", str(hidden), "--compare", "three", digest],     # a count not a number
        ["--public-set", str(hidden), "--compare", digest, "3"],         # the two swapped
        ["--sample-seed", "5"],                                          # without --compare
    )]
    for argv in each_one_left_out + refused:
        with pytest.raises(SystemExit) as stopped:
            grade_model.main(argv)
        assert stopped.value.code == 2, argv
    assert not out.exists()
    capsys.readouterr()


def test_main_writes_the_measurement_with_its_seconds(tmp_path, monkeypatch, quiet_environment):
    clock = itertools.count(10.0, 1.23456)  # each reading 1.23456 s after the one before
    monkeypatch.setattr(grade_model, "time", types.SimpleNamespace(monotonic=lambda: next(clock)))
    hidden, public = data_root(tmp_path / "hidden"), data_root(tmp_path / "public")
    model = make_model_handin(tmp_path / "h")
    out = tmp_path / "new/deeper/result.json"  # folders made, and reused on a second run
    for _ in range(2):
        grade_model.main(["--handin", str(tmp_path / "h"), "--hidden-set", str(hidden), "--out",
                          str(out), "--public-set", str(public), "--compare", "3",
                          transcripts_sha256(LINES[:3])])
    result = json.loads(out.read_text())
    assert result["perplexity_char"] == pytest.approx(direct_perplexity_char(model, CHAR, LINES),
                                                      rel=1e-5)
    assert result["compared_perplexity_char"] == pytest.approx(
        direct_perplexity_char(model, CHAR, LINES[:3]), rel=1e-5)
    # main's start and end are five readings apart (the three phases and their start between)
    assert result["seconds"] == 6.17
    assert result["phase_seconds"] == {"load": 1.235, "hidden": 1.235, "compare": 1.235}
    assert result["num_utterances"] == len(LINES) and result["dropout_active"] is False


def test_main_reports_a_handin_it_cannot_evaluate_and_exits_1(tmp_path, capsys,
                                                               quiet_environment):
    make_model_handin(tmp_path / "h")
    (tmp_path / "h/config.yaml").write_text("model: [unclosed\n")
    out = tmp_path / "out.json"
    with pytest.raises(SystemExit) as stopped:
        grade_model.main(["--handin", str(tmp_path / "h"), "--hidden-set",
                          str(data_root(tmp_path / "hidden")), "--out", str(out)])
    assert stopped.value.code == 1
    assert json.loads(out.read_text())["error"].startswith("config.yaml is not valid YAML")
    assert "config.yaml is not valid YAML" in capsys.readouterr().out


# ------------------------------------------------------------------------------------------------
# What the child follows and reads
# ------------------------------------------------------------------------------------------------

def test_the_child_takes_the_threads_its_environment_asks_for(monkeypatch):
    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(2)
        for asked, expected in (("1", 1), ("3", 3), ("0", 3), ("x", 3), ("", 3), ("-2", 3)):
            monkeypatch.setenv("OMP_NUM_THREADS", asked)
            grade_model.follow_environment()
            assert torch.get_num_threads() == expected, asked
    finally:
        torch.set_num_threads(threads)


def test_the_child_hides_progress_bars_only_when_asked(monkeypatch):
    monkeypatch.setattr(tqdm, "__init__", tqdm.__init__)  # restored after the test
    monkeypatch.setenv("OMP_NUM_THREADS", "")
    monkeypatch.setenv("TQDM_DISABLE", "")
    grade_model.follow_environment()
    assert tqdm(range(3)).disable is False
    monkeypatch.setenv("TQDM_DISABLE", "1")
    grade_model.follow_environment()
    assert tqdm(range(3)).disable is True


def test_the_seed_is_the_config_s_when_the_trainer_accepts_it(tmp_path):
    make_model_handin(tmp_path)
    config = yaml.safe_load((tmp_path / "config.yaml").read_text())
    # the trainer's seeds are 0 .. 2**63 - 1; anything else trained with its default, 0
    for seed, read in ((5, 5), (2**63 - 1, 2**63 - 1), (2**63, 0), (-1, 0), (True, 0),
                       ("5", 0), (5.0, 0), (None, 0)):
        (tmp_path / "config.yaml").write_text(yaml.safe_dump({**config, "seed": seed}))
        assert grade_model.load_config(tmp_path / "config.yaml")[1] == read, seed


@pytest.mark.parametrize("dropout, layer_drop, active", [
    (0.1, 0.0, True), (0.0, 0.1, True), (0.0, 0.0, False)])
def test_dropout_is_reported_when_either_kind_is_on(tmp_path, dropout, layer_drop, active):
    make_model_handin(tmp_path / "h", model_config={**TINY_MODEL, "dropout": dropout,
                                                    "layer_drop_rate": layer_drop})
    result = grade_model.evaluate_handin(tmp_path / "h", data_root(tmp_path / "hidden", LINES[:2]),
                                         probe_set=tmp_path / "absent")
    assert result["dropout_active"] is active


# ------------------------------------------------------------------------------------------------
# The evaluation: its order and the max_len bound
# ------------------------------------------------------------------------------------------------

def test_evaluation_batches_come_in_one_fixed_order_by_length(tmp_path):
    dataset = grade_model.read_partition(data_root(tmp_path / "d", LINES * 3), CHAR)
    # a width past the activation budget: one transcript per batch, so the order is all there is
    passes = [[len(batch[0][0]) for batch in grade_model.evaluation_loader(dataset, 2, 2**26)]
              for _ in range(2)]
    assert len(passes[0]) == 15 and passes[0] == passes[1]
    assert passes[0] in (sorted(passes[0]), sorted(passes[0], reverse=True))


def test_a_model_s_max_len_must_hold_the_longest_transcript(tmp_path):
    dataset = grade_model.read_partition(data_root(tmp_path / "d"), CHAR)
    assert dataset.text_max_len == LONGEST
    metrics, count = grade_model.measure(char_model(LONGEST), TINY_MODEL, dataset)
    assert count == len(LINES) and metrics["perplexity_char"] == pytest.approx(
        direct_perplexity_char(char_model(LONGEST), CHAR, LINES), rel=1e-5)
    with pytest.raises(grade_model.GradingError, match=f"max_len is {LONGEST - 1}, shorter"):
        grade_model.measure(char_model(LONGEST - 1), TINY_MODEL, dataset)


# ------------------------------------------------------------------------------------------------
# The run card's test set
# ------------------------------------------------------------------------------------------------

def compare(tmp_path: Path, count: int, digest: str | None = None, seed: int | None = None,
            card_nll: list[float] | None = None, max_len: int = 64) -> dict:
    public = tmp_path / "public"
    if not public.exists():
        data_root(public)
    return grade_model.compare_with_report(
        char_model(max_len), TINY_MODEL, CHAR, public, count,
        transcripts_sha256(LINES[:count]) if digest is None else digest, seed, card_nll)


@pytest.mark.parametrize("count", [1, 3, len(LINES)])
def test_the_first_transcripts_the_card_names_are_measured(tmp_path, count):
    assert compare(tmp_path, count) == {"compared_perplexity_char": pytest.approx(
        direct_perplexity_char(char_model(), CHAR, LINES[:count]), rel=1e-5)}


def test_a_test_set_that_is_not_the_split_s_start_is_not_compared(tmp_path):
    for count, digest in ((0, transcripts_sha256([])), (len(LINES) + 1, transcripts_sha256(LINES)),
                          (2, transcripts_sha256(LINES[1:3]))):
        assert "not the start of the public test split" in compare(
            tmp_path, count, digest)["compare_note"], count


def test_a_longer_transcript_than_max_len_is_not_compared(tmp_path):
    assert "compared_perplexity_char" in compare(tmp_path, len(LINES), max_len=LONGEST)
    too_long = {"compare_note": "a transcript of that test set is longer than the model's max_len"}
    assert compare(tmp_path, len(LINES), max_len=LONGEST - 1) == too_long
    assert "compared_sample" in compare(tmp_path, len(LINES), seed=3, max_len=LONGEST)
    assert compare(tmp_path, len(LINES), seed=3, max_len=LONGEST - 1) == too_long


def test_a_seed_measures_its_sample_one_by_one(tmp_path):
    count = len(LINES)
    sample = compare(tmp_path, count, seed=7)["compared_sample"]
    drawn = sample_transcripts(count, 7)
    assert sample["drawn"] == drawn and sample["lowest"] == [] and sample["indices"] == drawn
    assert sample["seed"] == 7 and sample["transcripts"] == count
    assert sample["characters"] == sum(len(line) for line in LINES)
    assert sample["chars"] == [len(LINES[i]) for i in drawn]
    assert sample["names"] == [utterance.id for utterance in hidden_utterances(LINES)
                               if int(utterance.id.split("-")[1]) in drawn]
    expected = direct_nll(char_model(), CHAR, [LINES[i] for i in drawn])
    assert sample["nll"] == pytest.approx(expected, rel=1e-5)
    # a card's losses, one per transcript: the lowest per character are measured too
    lowest = compare(tmp_path, count, seed=7, card_nll=[9.0, 0.0, 9.0, 9.0, 9.0])
    assert 1 in lowest["compared_sample"]["lowest"]
    assert 1 in lowest["compared_sample"]["indices"]
    assert compare(tmp_path, count, seed=7, card_nll=[0.0] * (count - 1))["compared_sample"][
        "lowest"] == []


def test_the_run_card_s_own_losses_choose_the_lowest_transcripts_measured(tmp_path):
    """A run card recording each transcript's loss: the two lowest per character by hand are
    #1 (0 nats) and #4 (9 nats over the longest, 28 characters); by token counts they would be
    #4 and #2."""
    make_model_handin(tmp_path / "h")
    public = data_root(tmp_path / "public")
    (tmp_path / "h" / RUN_CARD_FILE).write_text(json.dumps({"test_set": {
        "transcripts": 5, "sha256": transcripts_sha256(LINES),
        "transcript_nll": [9.0, 0.0, 9.0, 9.0, 9.0], "transcript_tokens": [13, 100, 16, 3, 29],
        "total_nll": 36.0}}))
    result = grade_model.evaluate_handin(tmp_path / "h", data_root(tmp_path / "hidden"),
                                         (public, 5, transcripts_sha256(LINES), 7),
                                         probe_set=tmp_path / "absent")
    assert result["compared_sample"]["lowest"] == [1, 4]
