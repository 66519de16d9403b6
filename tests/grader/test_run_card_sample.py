# hw4p1: instructor-only
"""The run card's sampled check: make handin records each test transcript's loss, the grader
re-measures a fresh random sample of them and compares them one by one.

    .venv/bin/python -m pytest -q tests/grader/test_run_card_sample.py

Truths independent of the code under test: each transcript's NLL computed line by line in float64
without padding, batching or the library's metric; the hypergeometric probability by its product
formula and by enumerating every sample of a small set.
"""
import contextlib
import io
import itertools
import json
import math
import shutil
import tarfile
from pathlib import Path

import pytest
import torch

from autograder.judging.scoring import grade_model, integrity, language_model, rubric
from autograder.judging.intake.safe_tar import Extraction
from datagen.build_data import Utterance, write_split
from hw4lib import handin
from hw4lib.data import H4Tokenizer
from hw4lib.data.tokenizer import DEFAULT_TOKEN_MAP
from hw4lib.handin import pack
from hw4lib.handin_format import (METRICS_FILE, RUN_CARD_FILE, SAMPLE_DETECTION,
                                  SAMPLE_TAMPER_FRACTION, STATE_DICT_FILE, detection_probability,
                                  lowest_per_character, sample_size, sample_transcripts,
                                  transcripts_sha256)
from hw4lib.model import DecoderOnlyTransformer
from hw4lib.trainers.metrics import evaluate_language_model, transcript_losses
from tests.grader.autograder_helpers import (TINY_MODEL, direct_nll, direct_perplexity_char,
                                             make_run_folder)
from tests.grader.test_grade_model import make_hidden_set


# 60 transcripts of 4 to 60 characters: the sample (sample_size(60)) leaves some out
LINES = [f"LINE {chr(ord('A') + index % 26)} " + "THE SHIP SAILED " * (index % 4) + "X" * (index % 7)
         for index in range(60)]
TOKENIZER = H4Tokenizer(DEFAULT_TOKEN_MAP, "char")


def fresh_model(seed: int = 0) -> DecoderOnlyTransformer:
    torch.manual_seed(seed)
    return DecoderOnlyTransformer(**TINY_MODEL, num_classes=TOKENIZER.vocab_size)


def packed_handin(root: Path, model: torch.nn.Module, reported: float | None = None) -> Path:
    """make handin's folder of a run whose test split is LINES (``root/data``), extracted;
    test_metrics.json reports ``reported``, by default what the weights give."""
    honest = direct_perplexity_char(model, TOKENIZER, LINES)
    make_run_folder(root, model.state_dict(), reported or honest, test_lines=LINES)
    (root / "mytorch").mkdir()
    (root / "mytorch/__init__.py").write_text("")
    pack(root, "run", root / "handin.tar")
    with tarfile.open(root / "handin.tar") as tar:
        tar.extractall(root / "extracted", filter="data")
    return root / "extracted" / "handin"


def card_of(folder: Path) -> dict:
    return json.loads((folder / RUN_CARD_FILE).read_text())


def graded(folder: Path, card: dict, seed: int, hidden: Path, reported: float | None = None):
    """(flags, lm details) of the handin in ``folder`` carrying ``card`` (and test_metrics.json
    reporting ``reported``, else its own), the model child's sample drawn by ``seed``."""
    (folder / RUN_CARD_FILE).write_text(json.dumps(card))
    if reported is not None:
        (folder / METRICS_FILE).write_text(json.dumps({"perplexity_char": reported}))
    files = {name: folder / name for name in (RUN_CARD_FILE, METRICS_FILE, STATE_DICT_FILE)}
    test_set = card["test_set"]
    result = grade_model.evaluate_handin(folder, hidden, (folder.parents[1] / "data", len(LINES),
                                                          test_set["sha256"], seed))
    self_reported = language_model.self_reported_perplexity(Extraction(files=files))
    lm = {"reported_perplexity_char": self_reported,
          "compared_sample": result.get("compared_sample"),
          "compared_perplexity_char": result.get("compared_perplexity_char")}
    return integrity.integrity_flags(Extraction(files=files), lm), lm


def tampered(card: dict, changes: dict[int, float]) -> tuple[dict, float]:
    """(the card with transcript i's loss multiplied by ``changes[i]``, its total and reported
    perplexity made to agree: a consistent forgery), and that perplexity."""
    test_set = json.loads(json.dumps(card["test_set"]))
    for index, factor in changes.items():
        test_set["transcript_nll"][index] *= factor
    test_set["total_nll"] = math.fsum(test_set["transcript_nll"])
    reported = math.exp(test_set["total_nll"] / test_set["characters"])
    return {**card, "test_set": test_set, "test_perplexity_char": reported}, reported


def test_the_sample_catches_a_tenth_tampered_with_the_promised_probability():
    for n, t, k in ((8, 2, 3), (10, 1, 4), (12, 6, 5)):  # every k-subset, counted
        hits = sum(1 for chosen in itertools.combinations(range(n), k) if min(chosen) < t)
        assert detection_probability(n, t, k) == pytest.approx(hits / math.comb(n, k))
    for n in (1, 2, 7, 20, 60, 459, 2620):
        k, t = sample_size(n), max(1, math.ceil(SAMPLE_TAMPER_FRACTION * n))
        missed = math.prod((n - t - i) / (n - i) for i in range(k))  # all k drawn untampered
        assert 1 - missed >= SAMPLE_DETECTION - 1e-12, n
        if k > 1:  # and no smaller sample would do
            assert 1 - math.prod((n - t - i) / (n - i) for i in range(k - 1)) < SAMPLE_DETECTION
        draw = sample_transcripts(n, 12345)
        assert draw == sorted(set(draw)) and len(draw) == k and 0 <= draw[0] and draw[-1] < n
        assert sample_transcripts(n, 12345) == draw  # a seed names its sample
    assert len({tuple(sample_transcripts(459, seed)) for seed in range(20)}) == 20
    # The lowest losses per character, by hand: 0.1, 0.2, 0.2 (ties by index), then 0.5 and up
    losses, chars = [5.0, 1.0, 2.0, 9.0, 2.0, 3.0, 8.0] * 10, [10, 10, 10, 10, 10, 6, 8] * 10
    picked = lowest_per_character(losses, chars)
    assert len(picked) == sample_size(70) // 2
    # every 0.1, then the first six 0.2s by index
    assert picked == sorted({i for i in range(70) if i % 7 == 1} | {2, 4, 9, 11, 16, 18})


def test_transcript_losses_are_each_transcripts_own_nll(tmp_path):
    write_split(tmp_path / "data/test", [Utterance(f"7000-{index:06d}-0000", text)
                                         for index, text in enumerate(LINES)])
    dataset = grade_model.read_partition(tmp_path / "data", TOKENIZER)
    assert dataset.transcripts == LINES
    model = fresh_model()
    truth = direct_nll(model, TOKENIZER, LINES)
    order = [37, 2, 59, 0, 14]  # any transcripts, in any order, any batch size
    for batch_size in (1, 3, 32):
        losses = transcript_losses(model, dataset, order, batch_size, "cpu")
        assert losses == pytest.approx([truth[i] for i in order], rel=1e-5), batch_size
    everything = transcript_losses(model, dataset, range(len(LINES)), 8, "cpu")
    total = evaluate_language_model(model, grade_model.evaluation_loader(dataset, 2, 64), "cpu")
    assert math.fsum(everything) == pytest.approx(total["ce_loss_char"] * dataset.total_chars,
                                                  rel=1e-9)
    model.train()
    transcript_losses(model, dataset, [0], 1, "cpu")
    assert model.training, "the model's train/eval mode is restored"


def test_make_handin_records_each_transcripts_loss(tmp_path, monkeypatch, capsys):
    model = fresh_model()
    card = card_of(packed_handin(tmp_path / "a", model))
    test_set = card["test_set"]
    assert test_set["transcript_nll"] == pytest.approx(direct_nll(model, TOKENIZER, LINES), rel=1e-5)
    assert test_set["transcript_tokens"] == [len(TOKENIZER.encode(line)) + 1 for line in LINES]
    assert test_set["total_nll"] == math.fsum(test_set["transcript_nll"])
    assert test_set["sha256"] == transcripts_sha256(LINES)
    # A report other weights gave: packed all the same, with a note saying what the grader flags
    packed_handin(tmp_path / "b", model, reported=2.0)
    assert "test_metrics.json reports a test perplexity of 2.0000" in capsys.readouterr().out
    # Model code that cannot run here: packed, no losses (the grader re-measures the whole set)
    monkeypatch.setattr(handin, "DecoderOnlyTransformer", None)
    folder = tmp_path / "c"
    make_run_folder(folder, model.state_dict(), 9.0, test_lines=LINES)
    (folder / "mytorch").mkdir()
    (folder / "mytorch/__init__.py").write_text("")
    pack(folder, "run", folder / "handin.tar")
    assert "records no per-transcript losses" in capsys.readouterr().out
    with tarfile.open(folder / "handin.tar") as tar:
        card = json.loads(tar.extractfile(f"handin/{RUN_CARD_FILE}").read())
    assert "transcript_nll" not in card["test_set"] and card["test_set"]["transcripts"] == 60


@pytest.mark.slow
def test_tampered_cards_are_flagged_and_honest_ones_never(tmp_path):
    hidden = make_hidden_set(tmp_path / "hidden")
    folder = packed_handin(tmp_path / "run", fresh_model())
    honest = card_of(folder)
    seeds = range(12)
    chars = [len(line) for line in LINES]
    lowest = lowest_per_character(honest["test_set"]["transcript_nll"], chars)
    assert len(lowest) == sample_size(len(LINES)) // 2
    for seed in seeds:
        flags, lm = graded(folder, honest, seed, hidden)
        assert flags == [], (seed, flags)
        sample = lm["compared_sample"]
        assert sample["drawn"] == sample_transcripts(len(LINES), seed)
        assert sample["lowest"] == lowest
        assert sample["indices"] == sorted(set(sample["drawn"]) | set(lowest))
    # One transcript's loss lowered (what a forgery does): among the lowest per character, so
    # re-measured by every seed, and named with both numbers
    target = 41
    assert target not in lowest
    catching = next(seed for seed in range(100) if target in sample_transcripts(len(LINES), seed))
    missing = next(seed for seed in range(100)
                   if target not in sample_transcripts(len(LINES), seed))
    card, reported = tampered(honest, {target: 0.5})
    for seed in (catching, missing):
        flags, lm = graded(folder, card, seed, hidden, reported)
        text = "\n".join(flags)
        sample = lm["compared_sample"]
        assert f"1 of the {len(sample['indices'])} test transcripts re-measured here" in text, flags
        measured = sample["nll"][sample["indices"].index(target)]
        assert (f"#{target} 7000-{target:06d}-0000: "
                f"{honest['test_set']['transcript_nll'][target] * 0.5:.6g} nats") in text, flags
        assert f"these weights {measured:.6g} over" in text, flags
    # Raised instead: caught by a seed that draws it; a sample without it cannot see it
    # (1 - detection_probability(60, 1, k) of the gradings)
    card, reported = tampered(honest, {target: 1.5})
    assert any("test transcripts re-measured here" in flag
               for flag in graded(folder, card, catching, hidden, reported)[0])
    assert graded(folder, card, missing, hidden, reported)[0] == []
    # Half the transcripts: caught by every seed
    card, reported = tampered(honest, {index: 0.7 for index in range(0, len(LINES), 2)})
    for seed in seeds:
        flags, _ = graded(folder, card, seed, hidden, reported)
        assert any("test transcripts re-measured here" in flag for flag in flags), (seed, flags)
    # The total alone (and the report with it): the losses no longer add up, whatever the sample
    forged = {**honest, "test_set": {**honest["test_set"],
                                     "total_nll": honest["test_set"]["total_nll"] * 0.8}}
    flags, _ = graded(folder, forged, 0, hidden, reported)
    assert any("per-transcript losses add up to" in flag for flag in flags), flags
    assert any("reports a test perplexity of" in flag for flag in flags), flags
    # Only test_metrics.json edited: compared with the sum of the card's losses
    flags, _ = graded(folder, honest, 0, hidden, 1.0)
    assert any(flag.startswith("test_metrics.json reports a test perplexity of 1.0000; these "
                               "weights give") for flag in flags), flags


def test_each_grading_draws_a_fresh_sample_and_older_cards_are_compared_whole(tmp_path,
                                                                              monkeypatch):
    monkeypatch.setattr(language_model, "PUBLIC_SET", tmp_path)
    losses = {"transcript_nll": [1.5, 2.0], "transcript_tokens": [3, 4], "total_nll": 3.5}
    card = {"test_set": {"transcripts": 2, "sha256": "d" * 64, **losses}}
    seeds = set()
    for _ in range(5):
        args, note = language_model.compare_arguments(7.5, card)
        assert args[:5] == ["--public-set", str(tmp_path), "--compare", "2", "d" * 64]
        assert args[5] == "--sample-seed" and note == ""
        seeds.add(int(args[6]))
    assert len(seeds) == 5, "every grading draws its own sample"
    older = {"test_set": {"transcripts": 2, "sha256": "d" * 64}}
    assert language_model.compare_arguments(7.5, older)[0] == [
        "--public-set", str(tmp_path), "--compare", "2", "d" * 64]
    # A card whose losses are not as make handin writes them: compared whole, and flagged
    for broken in ({**losses, "transcript_nll": [1.5]}, {**losses, "transcript_nll": [1.5, -1]},
                   {**losses, "transcript_nll": [1.5, float("nan")]},
                   {**losses, "transcript_tokens": [3, True]}, {**losses, "total_nll": "3.5"}):
        card = {"test_set": {"transcripts": 2, "sha256": "d" * 64, **broken}}
        assert "--sample-seed" not in language_model.compare_arguments(7.5, card)[0], broken
        (tmp_path / RUN_CARD_FILE).write_text(json.dumps(card))
        flags = integrity.integrity_flags(
            Extraction(files={RUN_CARD_FILE: tmp_path / RUN_CARD_FILE}),
            {"compared_perplexity_char": 7.5})
        assert any("not as make handin writes them" in flag for flag in flags), broken


@pytest.mark.slow
def test_the_grader_samples_a_new_card_and_measures_an_older_one_whole(tmp_path, monkeypatch):
    """The grader's own steps (compare_arguments, the model child, the details)."""
    monkeypatch.setattr(language_model, "HIDDEN_SET", make_hidden_set(tmp_path / "hidden"))
    monkeypatch.setattr(language_model, "PUBLIC_SET", tmp_path / "run/data")
    model = fresh_model()
    packed = packed_handin(tmp_path / "run", model)
    truth = direct_perplexity_char(model, TOKENIZER, LINES)

    def grade_copy(work: Path) -> tuple[Extraction, dict, str]:
        """(the extraction, the lm details, what was printed) of the packed handin graded in
        ``work`` as the judge grades it."""
        shutil.copytree(packed, work / "handin")
        files = {path.name: path for path in (work / "handin").iterdir() if path.is_file()}
        with contextlib.redirect_stdout(io.StringIO()) as printed:
            _, lm = language_model.grade_language_model(
                Extraction(files=files), work, 120, rubric.FULL_MARKS_PPL, rubric.ZERO_MARKS_PPL)
        return Extraction(files=files), lm, printed.getvalue()

    extracted, lm, printed = grade_copy(tmp_path / "work")
    sample = lm["compared_sample"]
    assert sample["drawn"] == sample_transcripts(len(LINES), sample["seed"])
    assert lm["compare_note"] == "" and len(sample["lowest"]) == sample_size(len(LINES)) // 2
    assert lm["compared_perplexity_char"] == pytest.approx(truth, rel=1e-5)
    assert "re-measured here agree" in printed
    assert integrity.integrity_flags(extracted, lm) == []
    # The same handin with an older card (no per-transcript losses): the whole set, with a note
    card = card_of(packed)
    for key in ("transcript_nll", "transcript_tokens", "total_nll"):
        del card["test_set"][key]
    (packed / RUN_CARD_FILE).write_text(json.dumps(card))
    extracted, lm, _ = grade_copy(tmp_path / "work2")
    assert lm["compared_sample"] is None
    assert lm["compared_perplexity_char"] == pytest.approx(truth, rel=1e-5)
    assert "no per-transcript losses (an older make handin)" in lm["compare_note"]
    assert integrity.integrity_flags(extracted, lm) == []
