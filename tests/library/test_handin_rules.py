# hw4p1: instructor-only
"""make handin's rules by their values (hw4lib/handin_format.py, hw4lib/handin.py): each size and
count limit with a case at it and one past it, the names the grader imports, the run card's
sample sizes and checks, and the numbers of the expected-grade lines; every expectation is written
out by hand, never read from the constant it pins.

    .venv/bin/python -m pytest -q tests/library/test_handin_rules.py
"""
import hashlib
import json
import math
import platform
import tarfile
from pathlib import Path

import pytest
import torch

from hw4lib import handin, handin_format
from hw4lib.data import H4Tokenizer
from hw4lib.data.tokenizer import DEFAULT_TOKEN_MAP
from hw4lib.grading_numbers import FULL_MARKS_PPL, LM_POINTS, MYTORCH_RUBRIC
from hw4lib.handin import HandinError, check_size, grade_outlook, local_mytorch_points, pack
from hw4lib.handin_format import (card_losses, card_perplexity, config_digest,
                                  detection_probability, finite_number, is_mytorch_source,
                                  lowest_per_character, sample_size, transcripts_sha256)
from hw4lib.model import DecoderOnlyTransformer
from tests.grader.autograder_helpers import TINY_MODEL, direct_perplexity_char, make_run_folder

# The grader's limits in bytes, written out: a member at its limit is packed, one byte more is not.
LIMITS = {"model_state_dict.pt": 136_777_216,   # 4 bytes x 30M parameters + 16 MiB
          "config.yaml": 10_000_000, "test_metrics.json": 10_000_000,
          "test_generated_results.json": 10_000_000, "model_arch.txt": 10_000_000,
          "run_card.json": 10_000_000, "mytorch/nn/linear.py": 1_000_000,
          "mytorch/__init__.py": 1_000_000}
LINES = ["THE SHIP", "A LONGER LINE OF TEXT", "SAILED", "X"]


@pytest.mark.parametrize("name, limit", LIMITS.items())
def test_each_member_is_packed_at_its_limit_and_refused_one_byte_over(name, limit):
    check_size(Path(name), name, limit)
    with pytest.raises(HandinError, match=f"over the grader's .* limit for {name}"):
        check_size(Path(name), name, limit + 1)


def test_files_the_grader_does_not_use_have_no_limit():
    for name in ("notes.txt", "mytorch", "handin/config.yaml", "model_state_dict.pth"):
        assert handin_format.size_limit(name) is None, name


def test_the_sizes_are_said_in_megabytes_to_one_decimal(monkeypatch):
    """10,049,999 bytes are 10.0 MB and 10,050,000 are 10.1 MB (a divisor off by one in a
    million moves one of them)."""
    with pytest.raises(HandinError, match=r"is 10\.0 MB, over the grader's 10\.0 MB limit"):
        check_size(Path("a"), "config.yaml", 10_049_999)
    with pytest.raises(HandinError, match=r"is 10\.1 MB, over the grader's 10\.0 MB limit"):
        check_size(Path("a"), "config.yaml", 10_050_000)
    monkeypatch.setattr(handin_format, "MAX_RUN_FILE_BYTES", 10_050_000)
    with pytest.raises(HandinError, match=r"over the grader's 10\.1 MB limit"):
        check_size(Path("a"), "config.yaml", 10_050_001)
    monkeypatch.setattr(handin_format, "MAX_RUN_FILE_BYTES", 10_049_999)
    with pytest.raises(HandinError, match=r"over the grader's 10\.0 MB limit"):
        check_size(Path("a"), "config.yaml", 10_050_000)


@pytest.mark.parametrize("name, imported", [
    ("mytorch/__init__.py", True), ("mytorch/nn/linear.py", True), ("mytorch/a/b/c/m_2.py", True),
    ("mytorch/" + "d/" * 8 + "m.py", True), ("mytorch/" + "d/" * 9 + "m.py", False),
    ("mytorch", False), ("mytorch.py", False), ("other/nn/linear.py", False),
    ("nn/mytorch/linear.py", False), ("mytorch/nn/linear.txt", False),
    ("mytorch/nn.py/linear.txt", False), ("mytorch/bad-name/linear.py", False),
    ("mytorch/nn/bad-dir/linear.py", False), ("mytorch/nn/x-.py", False),
    ("mytorch/nn/abc-.py", False), ("mytorch/nn/1linear.py", False),
    ("mytorch/nn/lin.ear.py", False), ("mytorch/x.py", True),
])
def test_the_sources_packed_are_those_the_grader_can_import(name, imported):
    assert is_mytorch_source(name) is imported


def mytorch_root(root: Path, sizes: list[int]) -> None:
    """root/mytorch with __init__.py and one module of each size in ``sizes`` (bytes)."""
    (root / "mytorch").mkdir(parents=True)
    (root / "mytorch/__init__.py").write_text("")
    for index, size in enumerate(sizes):
        (root / f"mytorch/part{index}.py").write_bytes(b"#" * size)


def test_mytorch_is_packed_at_four_million_bytes_and_refused_one_byte_over(tmp_path,
                                                                           monkeypatch):
    mytorch_root(tmp_path / "at", [1_000_000] * 4)
    assert len(handin.mytorch_files(tmp_path / "at")) == 5
    mytorch_root(tmp_path / "over", [1_000_000] * 3 + [999_999, 2])
    with pytest.raises(HandinError, match=r"holds 4\.0 MB of \.py files, over the grader's 4\.0 MB"):
        handin.mytorch_files(tmp_path / "over")
    # 4,050,000 bytes are 4.0 MB and 4,150,000 are 4.2 MB at one decimal (binary rounding)
    mytorch_root(tmp_path / "down", [1_000_000] * 4 + [50_000])
    with pytest.raises(HandinError, match=r"holds 4\.0 MB of \.py files"):
        handin.mytorch_files(tmp_path / "down")
    mytorch_root(tmp_path / "up", [1_000_000] * 4 + [150_000])
    with pytest.raises(HandinError, match=r"holds 4\.2 MB"):
        handin.mytorch_files(tmp_path / "up")
    mytorch_root(tmp_path / "past", [1_000_000] * 4 + [150_001])
    for limit, words in ((4_050_000, "4.0"), (4_150_000, "4.2")):
        monkeypatch.setattr(handin, "MAX_MYTORCH_BYTES", limit)
        with pytest.raises(HandinError, match=f"over the grader's {words} MB limit for mytorch/"):
            handin.mytorch_files(tmp_path / "past")


def test_mytorch_without_init_is_refused(tmp_path):
    (tmp_path / "mytorch").mkdir()
    with pytest.raises(HandinError, match="__init__.py not found"):
        handin.mytorch_files(tmp_path)


def test_a_handin_of_500_members_is_packed_and_of_501_refused(tmp_path):
    """The run gives 6 members (4 run files, the weights, the run card); mytorch the rest."""
    make_run_folder(tmp_path, DecoderOnlyTransformer(**TINY_MODEL, num_classes=vocab()).state_dict(),
                    3.0)
    mytorch_root(tmp_path, [1] * 493)
    assert len(pack(tmp_path, "run", tmp_path / "at.tar")) == 500
    (tmp_path / "mytorch/extra.py").write_text("")
    with pytest.raises(HandinError, match="would hold 501 files, over the grader's limit of 500"):
        pack(tmp_path, "run", tmp_path / "over.tar")
    assert not (tmp_path / "over.tar").exists()
    with tarfile.open(tmp_path / "at.tar") as tar:
        assert {member.mode for member in tar.getmembers()} == {0o644}


def vocab() -> int:
    return H4Tokenizer(DEFAULT_TOKEN_MAP, "char").vocab_size


def test_weights_that_are_not_a_dict_of_tensors_are_refused(tmp_path):
    for name, state, words in (("list", [1, 2], "has no model_state_dict"),
                               ("empty", {}, "has no model_state_dict"),
                               ("numbers", {"w": 1.0}, r"entries that are not tensors: \['w'\]")):
        make_run_folder(tmp_path / name, state, 3.0)
        mytorch_root(tmp_path / name, [])
        with pytest.raises(HandinError, match=words):
            pack(tmp_path / name, "run", tmp_path / name / "h.tar")


def test_a_named_run_that_is_missing_lists_the_runs_or_none(tmp_path):
    (tmp_path / "expts").mkdir()
    with pytest.raises(HandinError, match=r"'gone' not found under .*; runs there: none"):
        handin.find_run(tmp_path / "expts", "gone")
    (tmp_path / "expts/b").mkdir()
    (tmp_path / "expts/a").mkdir()
    with pytest.raises(HandinError, match=r"runs there: \['a', 'b'\]"):
        handin.find_run(tmp_path / "expts", "gone")
    assert handin.find_run(tmp_path / "expts", str(tmp_path / "expts/a")) == tmp_path / "expts/a"


def packed_card(root: Path, reported: float | None, capsys) -> tuple[dict, str]:
    """(run card, make handin's output) of a run whose test split is LINES and whose
    test_metrics.json reports ``reported`` (None: the honest perplexity)."""
    torch.manual_seed(0)
    model = DecoderOnlyTransformer(**TINY_MODEL, num_classes=vocab())
    honest = direct_perplexity_char(model, H4Tokenizer(DEFAULT_TOKEN_MAP, "char"), LINES)
    make_run_folder(root, model.state_dict(), reported(honest) if reported else honest,
                    test_lines=LINES)
    mytorch_root(root, [])
    capsys.readouterr()
    pack(root, "run", root / "handin.tar")
    with tarfile.open(root / "handin.tar") as tar:
        card = json.loads(tar.extractfile(f"handin/{handin_format.RUN_CARD_FILE}").read())
    return card, capsys.readouterr().out


@pytest.mark.parametrize("ratio, noted", [(1.019, False), (0.981, False), (1.021, True),
                                          (0.979, True)])
def test_a_reported_perplexity_two_percent_off_is_noted(tmp_path, capsys, ratio, noted):
    card, out = packed_card(tmp_path, lambda honest: honest * ratio, capsys)
    assert ("test_metrics.json reports a test perplexity" in out) is noted, out
    assert len(card["test_set"]["transcript_nll"]) == len(LINES)
    assert card["test_set"]["transcripts"] == len(LINES)


def test_a_perplexity_exactly_two_percent_off_is_not_noted(tmp_path, capsys, monkeypatch):
    """The packed weights' perplexity pinned at 50 (so 2% of it is 1.0 exactly in binary): a
    report of 51 is within the tolerance, one of 51.00001 is not."""
    monkeypatch.setattr(handin, "card_perplexity", lambda total_nll, characters: 50.0)
    for reported, noted in ((51.0, False), (51.00001, True), (49.0, False)):
        _, out = packed_card(tmp_path / str(reported), lambda honest: reported, capsys)
        assert ("test_metrics.json reports a test perplexity" in out) is noted, (reported, out)


def test_the_run_card_names_the_python_and_the_test_set(tmp_path, capsys):
    card, out = packed_card(tmp_path, None, capsys)
    with tarfile.open(tmp_path / "handin.tar") as tar:
        for member in tar.getmembers():
            assert f"{member.size:>12,d} B  {member.name}" in out, (member.name, out)
    assert card["versions"]["python"] == platform.python_version()
    assert card["test_set"]["subset"] == 1.0 and card["test_set"]["split"] == "test"
    assert card["test_set"]["characters"] == sum(len(line) for line in LINES)


def test_a_config_without_a_subset_is_measured_on_the_whole_split(tmp_path, capsys):
    torch.manual_seed(0)
    model = DecoderOnlyTransformer(**TINY_MODEL, num_classes=vocab())
    make_run_folder(tmp_path, model.state_dict(), 3.0, test_lines=LINES)
    found = handin.measured_test_set(
        {"data": {"root": "data"}}, {"num_chars": sum(map(len, LINES))}, tmp_path)
    assert found["subset"] == 1.0 and found["transcripts"] == len(LINES)
    assert found["split"] == "test"


# ---------------------------------------------------------------- the run card's numbers

def test_the_config_digest_ignores_key_order_and_reads_model_and_tokenizer():
    model = {"d_model": 4, "num_layers": 1}
    digest = config_digest({"model": model, "tokenization": {"token_type": "char"}})
    assert digest == config_digest({"tokenization": {"token_type": "char"},
                                    "model": {"num_layers": 1, "d_model": 4}})
    assert digest != config_digest({"model": model, "tokenization": {"token_type": "1k"}})
    assert digest != config_digest({"model": {**model, "d_model": 8},
                                    "tokenization": {"token_type": "char"}})


def test_the_transcripts_digest_is_the_sha256_of_each_line_then_a_newline():
    assert transcripts_sha256(["ab", "cd"]) == hashlib.sha256(b"ab\ncd\n").hexdigest()


@pytest.mark.parametrize("transcripts, tampered, sampled, probability", [
    (10, 1, 1, 1 / 10), (10, 2, 2, 1 - 28 / 45), (10, 1, 10, 1.0),
    (60, 6, 3, 1 - (54 * 53 * 52) / (60 * 59 * 58))])
def test_the_detection_probability_is_hypergeometric(transcripts, tampered, sampled, probability):
    assert detection_probability(transcripts, tampered, sampled) == pytest.approx(probability)


@pytest.mark.parametrize("transcripts, size", [(1, 1), (2, 2), (10, 10), (30, 23), (100, 36),
                                               (1000, 43)])
def test_the_sample_catches_a_tenth_tampered_with_99_percent(transcripts, size):
    """The fewest k with 1 - C(n - t, k) / C(n, k) >= 0.99 for t = ceil(n / 10), checked by the
    product formula at k and k - 1."""
    tampered = math.ceil(transcripts / 10)

    def caught(k: int) -> float:
        return 1 - math.prod((transcripts - tampered - i) / (transcripts - i) for i in range(k))

    assert sample_size(transcripts) == size
    assert caught(size) >= 0.99 and (size == 1 or caught(size - 1) < 0.99)


def test_a_sample_that_reaches_the_detection_exactly_is_enough(monkeypatch):
    """10 transcripts, 1 tampered: k of them catch it with probability k / 10 exactly."""
    monkeypatch.setattr(handin_format, "SAMPLE_DETECTION", 0.5)
    assert sample_size(10) == 5


def test_each_seed_draws_its_own_sorted_sample():
    drawn = handin_format.sample_transcripts(60, 3)
    assert drawn == sorted(drawn) and len(set(drawn)) == len(drawn) == sample_size(60)
    assert drawn == handin_format.sample_transcripts(60, 3)
    assert drawn != handin_format.sample_transcripts(60, 4)
    assert all(0 <= index < 60 for index in drawn)


def test_the_lowest_losses_per_character_are_re_measured():
    """Per character: 0.9, 0.06, 0.5, 0.7 and 9 (no characters: counted as one); 5 transcripts
    give a sample of 5, so the 2 lowest: indices 1 and 2."""
    losses, characters = [0.9, 0.6, 5.0, 7.0, 9.0], [1, 10, 10, 10, 0]
    assert lowest_per_character(losses, characters) == [1, 2]


def card(**changes) -> dict:
    test_set = {"transcripts": 2, "transcript_nll": [0.0, 2.5], "transcript_tokens": [1, 3],
                "total_nll": 2.5, **changes}
    return {"test_set": test_set}


def test_a_card_with_its_losses_reads_back():
    assert card_losses(card()) == ([0.0, 2.5], [1, 3], 2.5)


@pytest.mark.parametrize("changes", [
    {"transcripts": True}, {"transcripts": 3}, {"transcript_nll": (0.0, 2.5)},
    {"transcript_tokens": (1, 3)}, {"transcript_nll": [0.0]}, {"transcript_tokens": [1]},
    {"total_nll": None}, {"total_nll": math.inf}, {"transcript_nll": [-0.5, 2.5]},
    {"transcript_nll": [None, 2.5]}, {"transcript_nll": ["1", 2.5]},
    {"transcript_tokens": [0, 3]}, {"transcript_tokens": [1.0, 3]}, {"transcript_tokens": [-1, 3]},
])
def test_a_card_with_a_wrong_field_has_no_losses(changes):
    assert card_losses(card(**changes)) is None


def test_a_card_without_a_test_set_has_no_losses():
    for value in (None, [], {"test_set": None}, {"test_set": [1]}, {}):
        assert card_losses(value) is None


@pytest.mark.parametrize("value, number", [(3, 3.0), (2.5, 2.5), (True, None), ("1", None),
                                           (10 ** 400, None), (math.inf, None), (math.nan, None),
                                           (None, None)])
def test_only_finite_ints_and_floats_are_numbers(value, number):
    assert finite_number(value) == number


def test_the_card_perplexity_is_exp_of_nats_per_character_up_to_overflow():
    assert card_perplexity(4 * math.log(3), 4) == pytest.approx(3.0)
    assert card_perplexity(699.5, 1) == pytest.approx(math.exp(699.5))
    assert card_perplexity(700.0, 1) == math.inf
    assert card_perplexity(1400.0, 2) == math.inf


# ---------------------------------------------------------------- the expected grade

def test_the_expected_mytorch_points_are_rounded_to_hundredths():
    first, *others = MYTORCH_RUBRIC
    scores = {first: 1.2345, **{category: None for category in others}}
    text = grade_outlook({"perplexity_char": FULL_MARKS_PPL}, scores)
    assert f"1.23/{MYTORCH_RUBRIC[first]:g} from the categories" in text, text
    assert f"total: {LM_POINTS + 1.23:g}/" in text, text


def fake_local_tests(root: Path, lines: list[str]) -> None:
    """root/tests/test_mytorch.py printing ``lines``: what make handin reads the local points
    from."""
    (root / "tests").mkdir(parents=True)
    (root / "tests/__init__.py").write_text("")
    (root / "tests/test_mytorch.py").write_text(
        "".join(f"print({line!r})\n" for line in lines))


def test_the_local_points_are_the_last_line_of_the_local_tests(tmp_path):
    scores = {category: points for category, points in MYTORCH_RUBRIC.items()}
    decoy = json.dumps({"scores": {"Linear": 1}})
    fake_local_tests(tmp_path / "a", [decoy, decoy, json.dumps({"scores": scores})])
    assert local_mytorch_points(tmp_path / "a") == scores
    fake_local_tests(tmp_path / "b", [json.dumps({"scores": {**scores, "Extra": 1}})])
    assert local_mytorch_points(tmp_path / "b") is None
    fake_local_tests(tmp_path / "c", [])
    assert local_mytorch_points(tmp_path / "c") is None
