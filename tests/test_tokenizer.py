"""Tests of H4Tokenizer, the four committed tokenizer files and the tokenizer builder.

    python -m tests.test_tokenizer      (or: python -m pytest -q tests/test_tokenizer.py)
"""
import functools
import random
from pathlib import Path

import numpy as np
import pytest
import torch

from datagen.build_data import DEFAULT_SIZES, SPLITS, Provenance, generated_splits
from datagen.build_tokenizers import main as build_tokenizers_main
from datagen.build_tokenizers import (read_partition, round_trip_failures, train_all,
                                      train_bpe_tokenizer, write_all)
from hw4lib.data import H4Tokenizer
from hw4lib.data.tokenizer import DEFAULT_TOKEN_MAP, SPECIAL_TOKENS, TOKENIZER_FILES
from tests.testing_framework import rubric, run_module

RUBRIC = {"Tokenizer": 0}

REPO_ROOT = Path(__file__).resolve().parents[1]
DATA_ROOT = REPO_ROOT / "hw4_data" / "hw4p1_data"
TOKEN_TYPE_OF_FILE = {name: kind for kind, (name, _) in TOKENIZER_FILES.items()}
# Awkward but legal LibriSpeech-style text: repeated, leading and trailing spaces, apostrophes.
EDGE_TEXTS = [
    "HELLO WORLD",
    "IT'S A DOG'S LIFE",
    "  TWO LEADING SPACES",
    "TRAILING SPACE ",
    "DOUBLE  SPACE",
    "'QUOTED'",
    "A",
    " ",
    "",
    "THE QUICK BROWN FOX JUMPS OVER THE LAZY DOG'S BACK",
]


def fixture_texts(num_texts: int = 1000, seed: int = 0) -> list[str]:
    """Random upper-case 'sentences' of 4000 random words: enough word types for 10000 BPE ids."""
    rng = random.Random(seed)
    letters = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
    words = ["".join(rng.choice(letters) for _ in range(rng.randint(3, 10))) for _ in range(4000)]
    words += ["IT'S", "DON'T", "O'CLOCK"]
    return [" ".join(rng.choices(words, k=rng.randint(1, 20))) for _ in range(num_texts)]


def load_all() -> dict[str, H4Tokenizer]:
    return {kind: H4Tokenizer(DEFAULT_TOKEN_MAP, kind) for kind in TOKENIZER_FILES}


@rubric("Tokenizer")
def test_committed_tokenizers_have_sizes_and_special_ids():
    for token_type, tokenizer in load_all().items():
        expected_size = TOKENIZER_FILES[token_type][1]
        if expected_size is None:  # char: the specials, then at least A-Z, apostrophe and space
            assert tokenizer.vocab_size >= len(SPECIAL_TOKENS) + 28, tokenizer
        else:
            assert tokenizer.vocab_size == expected_size, tokenizer
        specials = [tokenizer.pad_id, tokenizer.unk_id, tokenizer.mask_id,
                    tokenizer.sos_id, tokenizer.eos_id, tokenizer.blank_id]
        assert specials == [0, 1, 2, 3, 4, 5], (token_type, specials)


@rubric("Tokenizer")
def test_round_trip_on_edge_cases():
    for token_type, tokenizer in load_all().items():
        for text in EDGE_TEXTS:
            ids = tokenizer.encode(text)
            assert all(isinstance(i, int) and 0 <= i < tokenizer.vocab_size for i in ids)
            assert tokenizer.unk_id not in ids, (token_type, text)
            assert tokenizer.decode(ids) == text, (token_type, text, tokenizer.decode(ids))
        batch = tokenizer.encode_batch(EDGE_TEXTS)
        assert batch == [tokenizer.encode(text) for text in EDGE_TEXTS], token_type


@rubric("Tokenizer")
def test_char_tokenizer_gives_one_distinct_id_per_character():
    tokenizer = H4Tokenizer(DEFAULT_TOKEN_MAP, "char")
    text = "THE QUICK BROWN FOX JUMPS OVER THE LAZY DOG'S BACK"
    assert tokenizer.tokenize(text) == list(text)
    ids = tokenizer.encode(text)
    char_to_id = {}
    for char, token_id in zip(text, ids):
        assert char_to_id.setdefault(char, token_id) == token_id, char
    assert len(set(char_to_id.values())) == len(char_to_id) == len(set(text))
    assert not set(ids) & {0, 1, 2, 3, 4, 5}
    assert tokenizer.get_avg_chars_per_token(ids) == 1.0
    # Lower case is outside the LibriSpeech alphabet: one [UNK] per unknown character.
    assert tokenizer.encode("aB") == [tokenizer.unk_id, char_to_id["B"]]


@rubric("Tokenizer")
def test_bpe_tokens_merge_characters_and_bigger_vocab_compresses_more():
    text = "AND THE MAN SAID THAT HE WAS NOT THERE"
    ratios = []
    for token_type in ("1k", "5k", "10k"):
        tokenizer = H4Tokenizer(DEFAULT_TOKEN_MAP, token_type)
        tokens, ids = tokenizer.tokenize(text), tokenizer.encode(text)
        assert len(tokens) == len(ids) < len(text), (token_type, tokens)
        # Byte-level pieces show a space as 'Ġ'; joined back they spell the text.
        assert "".join(tokens).replace("Ġ", " ") == text
        ratios.append(tokenizer.get_avg_chars_per_token(ids))
        assert ratios[-1] == pytest.approx(len(text) / len(ids))
    assert ratios[0] <= ratios[1] <= ratios[2], ratios


@rubric("Tokenizer")
def test_decode_special_tokens_and_input_types():
    for tokenizer in load_all().values():
        ids = tokenizer.encode("HI THERE")
        framed = [tokenizer.sos_id] + ids + [tokenizer.eos_id, tokenizer.pad_id]
        assert tokenizer.decode(framed) == "[SOS]HI THERE[EOS][PAD]"
        assert tokenizer.decode(framed, skip_special_tokens=True) == "HI THERE"
        assert tokenizer.decode(torch.tensor(framed), skip_special_tokens=True) == "HI THERE"
        assert tokenizer.decode(np.array(framed), skip_special_tokens=True) == "HI THERE"
        # Special ids are left out of the chars-per-token ratio.
        assert tokenizer.get_avg_chars_per_token(framed) == pytest.approx(8 / len(ids))
        with pytest.raises(ValueError, match="1-d"):
            tokenizer.decode(torch.tensor([framed, framed]))
        with pytest.raises(ValueError, match="non-special"):
            tokenizer.get_avg_chars_per_token([tokenizer.sos_id, tokenizer.eos_id])


@rubric("Tokenizer")
def test_bad_token_type_or_file_gives_clear_errors(tmp_path):
    with pytest.raises(ValueError, match="'char', '1k', '5k', '10k'"):
        H4Tokenizer(DEFAULT_TOKEN_MAP, "2k")
    with pytest.raises(ValueError, match="token_map has no entry"):
        H4Tokenizer({"char": DEFAULT_TOKEN_MAP["char"]}, "1k")
    missing = tmp_path / "nope.json"
    with pytest.raises(FileNotFoundError, match="make tokenizers") as error:
        H4Tokenizer({"1k": str(missing)}, "1k")
    assert str(missing) in str(error.value)
    garbage = tmp_path / "garbage.json"
    garbage.write_text("{not json")
    with pytest.raises(ValueError, match="not a valid tokenizers JSON"):
        H4Tokenizer({"1k": str(garbage)}, "1k")


@rubric("Tokenizer")
def test_self_check_rejects_a_tokenizer_that_does_not_round_trip(tmp_path):
    tokenizer = train_bpe_tokenizer(fixture_texts(300), 400)
    tokenizer.decoder = None  # without its byte-level decoder, decode joins the pieces with spaces
    broken = tmp_path / "broken.json"
    tokenizer.save(str(broken))
    assert H4Tokenizer({"1k": str(broken)}, "1k", validate=False).vocab_size == 400
    with pytest.raises(ValueError, match="round-trip"):
        H4Tokenizer({"1k": str(broken)}, "1k")


@rubric("Tokenizer")
def test_builder_is_deterministic_exact_and_round_trips(tmp_path):
    texts = fixture_texts()
    first = write_all(train_all(texts), tmp_path / "first")
    second = write_all(train_all(texts), tmp_path / "second")
    for a, b in zip(first, second):
        assert a.name == b.name and a.read_bytes() == b.read_bytes(), a.name
    token_map = {kind: str(tmp_path / "first" / name)
                 for kind, (name, _) in TOKENIZER_FILES.items()}
    for token_type, (_, size) in TOKENIZER_FILES.items():
        tokenizer = H4Tokenizer(token_map, token_type)
        assert size is None or tokenizer.vocab_size == size
        assert tokenizer.sos_id == 3 and tokenizer.eos_id == 4
        assert round_trip_failures(tokenizer.tokenizer, texts + EDGE_TEXTS) == []


@rubric("Tokenizer")
def test_builder_refuses_a_corpus_too_small_for_the_vocabulary():
    with pytest.raises(ValueError, match="reached only .* of 5000 tokens"):
        train_bpe_tokenizer(fixture_texts(30), 5000)


@rubric("Tokenizer")
def test_builder_cli_reads_npy_splits_and_writes_four_files(tmp_path):
    texts = fixture_texts()
    for partition, part in (("train", texts[:800]), ("val", texts[800:900]), ("test", texts[900:])):
        (tmp_path / "data" / partition).mkdir(parents=True)
        for i, text in enumerate(part):
            array = np.array(list(text)) if i % 2 else np.array(text)  # both on-disk forms
            np.save(tmp_path / "data" / partition / f"{i:05d}.npy", array)
    build_tokenizers_main(["--data", str(tmp_path / "data"), "--out", str(tmp_path / "out"),
                           "--seed", "0"])
    written = sorted(path.name for path in (tmp_path / "out").iterdir())
    assert written == sorted(name for name, _ in TOKENIZER_FILES.values())
    tokenizer = H4Tokenizer({"5k": str(tmp_path / "out" / "tokenizer_5000.json")}, "5k")
    assert tokenizer.decode(tokenizer.encode(texts[-1])) == texts[-1]
    with pytest.raises(FileNotFoundError, match="make data"):
        build_tokenizers_main(["--data", str(tmp_path / "missing"),
                               "--out", str(tmp_path / "out2")])


@functools.lru_cache(maxsize=1)
def corpus_splits() -> tuple[str, dict[str, list[str]]]:
    """(where from, {split: transcripts}): the built data folder, else the default corpus that
    ``make data`` would write, generated in memory (a second or two)."""
    if (DATA_ROOT / ".complete").exists():
        return str(DATA_ROOT), {part: read_partition(DATA_ROOT, part) for part in SPLITS}
    splits = generated_splits(0, DEFAULT_SIZES, Provenance("test_tokenizer"))
    return "the default corpus", {part: [item.text for item in splits[part]] for part in SPLITS}


@rubric("Tokenizer")
@pytest.mark.slow
def test_committed_tokenizers_round_trip_every_transcript_of_every_split():
    """Acceptance: every transcript of every split comes back exactly from all four tokenizers."""
    source, splits = corpus_splits()
    for token_type, tokenizer in load_all().items():
        for partition, texts in splits.items():
            assert texts, (source, partition)
            failures = round_trip_failures(tokenizer.tokenizer, texts)
            assert not failures, (f"{token_type}: {len(failures)} {partition} transcripts of "
                                  f"{source} differ, e.g. {failures[0]!r}")


@rubric("Tokenizer")
@pytest.mark.slow
def test_committed_tokenizers_are_what_make_tokenizers_builds(tmp_path):
    """The committed JSONs must be current: retraining on the data gives the same bytes."""
    source, splits = corpus_splits()
    for path in write_all(train_all(splits["train"]), tmp_path):
        committed = Path(DEFAULT_TOKEN_MAP[TOKEN_TYPE_OF_FILE[path.name]])
        assert committed.read_bytes() == path.read_bytes(), (
            f"{committed} differs from a rebuild on {source}: run `make data` then "
            "`make tokenizers` and commit the four JSON files")


if __name__ == "__main__":
    run_module(__name__)
