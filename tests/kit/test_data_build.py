# hw4p1: instructor-only
"""Tests of the embedded corpus, the data builder (``make data``) and the n-gram baselines.

    .venv/bin/python -m pytest -q tests/kit/test_data_build.py

The fixtures are tiny LibriSpeech trees and text files written into temporary folders.
"""
import hashlib
import json
import math
import re
import shutil
import time
from pathlib import Path

import numpy as np
import pytest

from datagen import build_data
from datagen.corpus import ALPHABET, MAX_CHARS, generate_chapters, generate_split
from datagen.numbers import number_words
from datagen.ngram import EOS, NUM_PREDICTED, CharNgramLM
from hw4lib.data.lm_dataset import load_transcript


ID_PATTERN = re.compile(r"\d+-\d+-\d+")
SMALL_SIZES = {"train": 20_000, "val": 4_000, "test": 4_000}

# What the generator writes: each digest is tree_digest() of the .npy files of build(out, seed,
# sizes); "card" is the sha256 of DATA_CARD.md. A change to the generator or the lexicon changes them: then rebuild the data and the
# tokenizers (make data tokenizers), draw the hidden set again, and record the new digests here.
RECORDED_SMALL = {  # SMALL_SIZES
    0: {"npy": "7c2b49f43e2d748f873b60d690758d803cd9255ce9bda6be39c2cc70111b8083",
        "card": "4f647f5942232e586dfe1de9a16cbf156414174d1ebce7943a90d822603258f2"},
    1: {"npy": "8da0b6ecb1c9e9dfe3f8fc718a8da2ebecf4e9401172a90c130e50664363e0b3",
        "card": "5ec3010222f090b2e0e191dae7f479fc96f6f2cc374cdd9b2afc1eceea388c60"},
}
RECORDED_FULL = {  # DEFAULT_SIZES, what `make data SEED=<seed>` writes
    0: {"npy": "bc0700ef4307da025e856b8551527c574b2b26fad2b9ff42982c673f3ada06b3",
        "card": "ec58287862620116f54bdf36c2d8867a9cea7c46368db664994ef1e3fbb8af78"},
    1: {"npy": "f004d6f9bca40b00b8e7dfcab61398732e20d4b4a22aef99438cb8828f5547c1",
        "card": "ff3bad0cc6d936043f6b81cb92206364263fd99c9af0ab9f47e18c3032f35bf1"},
    2: {"npy": "de9300a51afc2a818bd5e98d4d6816a9aadc0820dbac93678f8dcfbb50a78c1f",
        "card": "af55294381f4613bc6bc1786e2d42d2f2d0c4803e1bdb0358140c38d3db2db13"},
}
# sha256 of the hidden set's text as tools/make_autograde.py ships it (public seed 0).
RECORDED_HIDDEN_SET = "833830bcecac4a9a2e60225b2fbd66753f585a618fa1b2c104439745d1a81f85"


def _files(root: Path) -> dict[str, bytes]:
    """{relative path: bytes} of every file under root."""
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def tree_digest(root: Path) -> str:
    """sha256 over (relative path, sha256 of the bytes) of every .npy file under root, by path."""
    digest = hashlib.sha256()
    for path in sorted(root.rglob("*.npy")):
        digest.update(path.relative_to(root).as_posix().encode() + b"\0"
                      + hashlib.sha256(path.read_bytes()).digest())
    return digest.hexdigest()


def _check_recorded(root: Path, seed: int, recorded: dict[str, str]) -> None:
    npy, card = tree_digest(root), hashlib.sha256((root / "DATA_CARD.md").read_bytes()).hexdigest()
    assert npy == recorded["npy"], (f"seed {seed}: the .npy files differ from the recorded ones "
                                    f"(expected digest {recorded['npy']}, got {npy})")
    assert card == recorded["card"], (f"seed {seed}: DATA_CARD.md differs from the recorded one "
                                      f"(expected sha256 {recorded['card']}, got {card})")


def _split_texts(root: Path) -> dict[str, dict[str, str]]:
    """{split: {utterance id: text}} of a built data folder."""
    return {split: {p.stem: load_transcript(p) for p in sorted((root / split).glob("*.npy"))}
            for split in build_data.SPLITS}


def _write_librispeech(root: Path, chapters: dict[str, list[str]]) -> None:
    """A LibriSpeech-shaped tree: <subset>/<speaker>/<chapter>/<speaker>-<chapter>.trans.txt."""
    for key, lines in chapters.items():
        subset, speaker, chapter = key.split("/")
        folder = root / subset / speaker / chapter
        folder.mkdir(parents=True)
        body = "".join(f"{speaker}-{chapter}-{i:04d} {line}\n" for i, line in enumerate(lines))
        (folder / f"{speaker}-{chapter}.trans.txt").write_text(body, encoding="utf-8")


# ---- corpus ---------------------------------------------------------------------------------


def test_generator_is_deterministic_and_in_the_character_set():
    first = generate_split(0, 30_000, split="train")
    assert first == generate_split(0, 30_000, split="train"), "same seed gave different text"
    assert first != generate_split(1, 30_000, split="train"), "different seeds gave the same text"
    assert first != generate_split(0, 30_000, split="test"), "the split name must change the stream"
    assert sum(map(len, first)) >= 30_000
    for text in first:
        assert text and set(text) <= set(ALPHABET), f"character outside the alphabet in {text!r}"
        assert len(text) <= MAX_CHARS, f"{len(text)} characters > cap {MAX_CHARS}"
        assert text == " ".join(text.split()), f"stray spaces in {text!r}"


def test_generate_split_excludes_without_shifting_the_stream():
    full = generate_split(3, 20_000)
    banned = set(full[:40:3])
    kept = generate_split(3, 20_000, exclude=banned)
    assert not banned & set(kept)
    expected = [t for t in full if t not in banned]
    assert kept[:len(expected) - 5] == expected[:len(expected) - 5]
    chapters, skipped = generate_chapters(3, 20_000, exclude=banned)
    assert skipped >= len(banned) and [t for c in chapters for t in c] == kept


def test_number_words_and_full_corpus_size():
    assert number_words(0) == "ZERO"
    assert number_words(342) == "THREE HUNDRED AND FORTY TWO"
    assert number_words(1005) == "ONE THOUSAND AND FIVE"
    assert number_words(21_300) == "TWENTY ONE THOUSAND THREE HUNDRED"
    start = time.perf_counter()
    provenance = build_data.Provenance("test")
    splits = build_data.generated_splits(0, build_data.DEFAULT_SIZES, provenance)
    seconds = time.perf_counter() - start
    texts = {name: [u.text for u in items] for name, items in splits.items()}
    chars = {name: sum(map(len, t)) for name, t in texts.items()}
    assert chars["train"] >= 2_000_000, chars
    for name in ("val", "test"):
        assert 100_000 <= chars[name] < 100_000 + MAX_CHARS, chars
    assert not set(texts["train"]) & set(texts["val"])
    assert not (set(texts["train"]) | set(texts["val"])) & set(texts["test"])
    word_types = {w for t in texts["train"] for w in t.split()}
    assert len(word_types) >= 4000, f"only {len(word_types)} word types: too few for a 10k BPE"
    lengths = [len(t) for t in texts["train"]]
    assert min(lengths) < 30 and max(lengths) > 400, "lengths should spread like LibriSpeech's"
    print(f"      default corpus: {chars} characters, {len(word_types)} word types, {seconds:.1f}s")


def test_load_transcript_reads_both_stored_forms(tmp_path):
    text = "IT'S A FINE DAY"
    np.save(tmp_path / "chars.npy", np.array(list(text)))
    np.save(tmp_path / "string.npy", np.array(text))
    assert load_transcript(tmp_path / "chars.npy") == text
    assert load_transcript(tmp_path / "string.npy") == text
    np.save(tmp_path / "matrix.npy", np.array([list("AB"), list("CD")]))
    with pytest.raises(ValueError, match="1-d"):
        load_transcript(tmp_path / "matrix.npy")


# ---- default build --------------------------------------------------------------------------


def test_default_build_layout_card_and_marker(tmp_path):
    out = tmp_path / "hw4p1_data"
    build_data.build(out, seed=0, sizes=SMALL_SIZES)
    assert (out / ".complete").is_file() and (out / "DATA_CARD.md").is_file()
    assert out.stat().st_mode & 0o755 == 0o755, "the data folder must be readable by everyone"
    assert not list(tmp_path.glob(".*building*")), "the staging folder was left behind"
    texts = _split_texts(out)
    for split in build_data.SPLITS:
        files = sorted((out / split).glob("*.npy"))
        assert files, f"no files in {split}"
        assert all(ID_PATTERN.fullmatch(p.stem) for p in files), files[0].stem
        array = np.load(files[0])
        assert array.ndim == 1 and array.dtype == np.dtype("<U1"), (array.shape, array.dtype)
        assert sum(map(len, texts[split].values())) >= SMALL_SIZES[split]
    assert not set(texts["train"].values()) & set(texts["test"].values())
    card = (out / "DATA_CARD.md").read_text()
    for heading in ("## Splits", "## Length histogram", "## Characters", "## Normalisation",
                    "## Dropped utterances", "## Character n-gram baselines"):
        assert heading in card, f"card lacks {heading}"
    rows = re.findall(r"^\| (\d) \| ([\d.]+) \| ([\d.]+) \|$", card, flags=re.M)
    assert [int(r[0]) for r in rows] == list(build_data.NGRAM_ORDERS)
    test_ppl = [float(r[2]) for r in rows]
    assert test_ppl[0] > test_ppl[1] > test_ppl[2] > 1, test_ppl


def test_default_build_is_byte_identical_per_seed(tmp_path):
    build_data.build(tmp_path / "a", seed=5, sizes=SMALL_SIZES)
    build_data.build(tmp_path / "b", seed=5, sizes=SMALL_SIZES)
    build_data.build(tmp_path / "c", seed=6, sizes=SMALL_SIZES)
    a, b, c = (_files(tmp_path / name) for name in "abc")
    assert a == b, "the same seed gave different files"
    shared = set(a) & set(c)
    assert any(a[name] != c[name] for name in shared if name.endswith(".npy")), \
        "a different seed gave the same transcripts"


def test_default_build_matches_the_recorded_digests(tmp_path):
    for seed, recorded in RECORDED_SMALL.items():
        build_data.build(tmp_path / str(seed), seed=seed, sizes=SMALL_SIZES)
        _check_recorded(tmp_path / str(seed), seed, recorded)


@pytest.mark.slow
@pytest.mark.long
def test_full_builds_and_hidden_set_match_the_recorded_digests(tmp_path):
    """What make data writes for seeds 0-2 and the autograder's hidden set, byte for byte."""
    for seed, recorded in RECORDED_FULL.items():
        build_data.build(tmp_path / str(seed), seed=seed)
        _check_recorded(tmp_path / str(seed), seed, recorded)
        shutil.rmtree(tmp_path / str(seed))
    from autograder.build_time.hidden_data import build_hidden_transcripts
    text = "\n".join(build_hidden_transcripts(public_seed=0)) + "\n"
    got = hashlib.sha256(text.encode("utf-8")).hexdigest()
    assert got == RECORDED_HIDDEN_SET, f"hidden set: expected sha256 {RECORDED_HIDDEN_SET}, got {got}"


def test_marker_records_the_source_and_if_stale_rebuilds_only_stale_data(tmp_path, monkeypatch,
                                                                        capsys):
    monkeypatch.setattr(build_data, "DEFAULT_SIZES", SMALL_SIZES)  # main() builds these sizes
    out = tmp_path / "data"
    sentinel = out / "train" / "sentinel.npy"  # survives exactly when the folder is kept

    def if_stale(seed: int) -> bool:
        """Run `--if-stale`; True when it rebuilt the folder."""
        build_data.main(["--out", str(out), "--seed", str(seed), "--if-stale"])
        rebuilt = not sentinel.exists()
        sentinel.write_bytes(b"")
        return rebuilt

    assert if_stale(4), "a missing folder must be built"
    marker = json.loads((out / build_data.MARKER).read_text())
    assert marker == {"source": "generator", "seed": 4, "sizes": SMALL_SIZES,
                      "fingerprint": build_data.generator_fingerprint()}, marker
    assert "--if-stale" not in (out / "DATA_CARD.md").read_text(), "the card must name make data's command"
    assert not if_stale(4), "current data was rebuilt"
    assert "is current" in capsys.readouterr().out
    assert if_stale(5), "data of another seed was kept"
    (out / build_data.MARKER).write_text(json.dumps({**marker, "seed": 5, "fingerprint": "old"}))
    assert if_stale(5), "data of another version of the generator was kept"
    (out / build_data.MARKER).write_text("")  # as builds before the fingerprint left it
    assert if_stale(5), "generated data with a marker from before fingerprints was kept"

    lexicon = tmp_path / "lexicon"
    shutil.copytree(build_data.LEXICON_DIR, lexicon)
    words = lexicon / "words.ini"
    words.write_text(words.read_text().replace("JOHN WILLIAM", "JOHN WILFRED"))
    before = build_data.generator_fingerprint()
    monkeypatch.setattr(build_data, "LEXICON_DIR", lexicon)
    assert build_data.generator_fingerprint() != before, "a lexicon edit must change the fingerprint"


def test_if_stale_never_replaces_data_built_from_real_text(tmp_path, capsys):
    root = tmp_path / "LibriSpeech"
    _write_librispeech(root, {"train-clean-100/1/2": [f"UTTERANCE {number_words(i)}" for i in range(60)]})
    out = tmp_path / "data"
    build_data.build(out, seed=0, librispeech=root)
    assert json.loads((out / build_data.MARKER).read_text()) == {"source": "real text", "seed": 0}
    before = _files(out)
    for marker in (None, ""):  # this build's marker, then an empty one as older builds left it
        if marker is not None:
            (out / build_data.MARKER).write_text(marker)
            before = _files(out)
        build_data.main(["--out", str(out), "--seed", "3", "--if-stale"])
        assert _files(out) == before, "--if-stale replaced data built from LibriSpeech"
        assert "kept" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        build_data.main(["--out", str(out), "--librispeech", str(root), "--if-stale"])
    assert "--if-stale checks generated data" in capsys.readouterr().err


def test_rebuild_replaces_the_folder_atomically(tmp_path):
    out = tmp_path / "data"
    build_data.build(out, seed=1, sizes=SMALL_SIZES)
    (out / "train" / "stale.npy").write_bytes(b"old")
    (tmp_path / ".data.building-leftover").mkdir()  # as an interrupted build leaves it
    build_data.build(out, seed=1, sizes=SMALL_SIZES)
    assert not (out / "train" / "stale.npy").exists()
    assert not list(tmp_path.glob(".*building*")) and (out / ".complete").exists()


# ---- real text ------------------------------------------------------------------------------

LIBRISPEECH_CHAPTERS = {
    "train-clean-100/103/1240": ["CHAPTER ONE MISSUS RACHEL LYNDE IS SURPRISED",
                                 "the mayflowers were out",          # lower case
                                 "SHE DIDN\u2019T KNOW",             # curly apostrophe
                                 "-- !",                             # empty after normalising
                                 "A" * (MAX_CHARS + 1)]              # over the cap
                                + [f"LINE NUMBER {number_words(i)} OF THE FIRST BOOK" for i in range(20)],
    "dev-clean/84/121123": [f"ANOTHER LINE {number_words(i)} FROM THE DEV SET" for i in range(20)]
                           + ["CHAPTER ONE MISSUS RACHEL LYNDE IS SURPRISED"],  # repeats a train text
}


def test_librispeech_build_normalises_reports_and_splits(tmp_path):
    root = tmp_path / "LibriSpeech"
    _write_librispeech(root, LIBRISPEECH_CHAPTERS)
    out = tmp_path / "data"
    build_data.build(out, seed=0, librispeech=root, val_fraction=0.2, test_fraction=0.2)
    texts = _split_texts(out)
    all_ids = [i for split in texts.values() for i in split]
    assert len(all_ids) == len(set(all_ids)) and all(texts.values())
    merged = {i: t for split in texts.values() for i, t in split.items()}
    assert merged["103-1240-0001"] == "THE MAYFLOWERS WERE OUT"
    assert merged["103-1240-0002"] == "SHE DIDN'T KNOW"
    assert "103-1240-0003" not in merged and "103-1240-0004" not in merged
    for a, b in (("train", "val"), ("train", "test"), ("val", "test")):
        assert not set(texts[a].values()) & set(texts[b].values()), f"{a} and {b} share a text"
    card = (out / "DATA_CARD.md").read_text()
    assert re.search(r"\| `\u2019` \(U\+2019\) \| `'` \| 1 \|", card), "curly apostrophe not reported"
    assert re.search(r"\| `t` \| `T` \| 2 \|", card), "upper-casing not reported"
    assert re.search(r"\| `!` \| space \| 1 \|", card), "punctuation removal not reported"
    assert re.search(r"\| space \| \(removed\) \| 4 \|", card), "collapsed spaces not reported"  # "-- !"
    assert re.search(r"\| empty after normalisation \| 1 \| 103-1240-0003 \|", card)
    assert re.search(rf"\| longer than {MAX_CHARS} characters \| 1 \| 103-1240-0004 \|", card)
    assert len(merged) + 2 + card.count("text already in an earlier split") >= 46


def test_real_split_depends_on_the_seed_only(tmp_path):
    root = tmp_path / "LibriSpeech"
    _write_librispeech(root, {"train-clean-100/1/2": [f"UTTERANCE {number_words(i)}" for i in range(60)]})
    for name, seed in (("a", 0), ("b", 0), ("c", 1)):
        build_data.build(tmp_path / name, seed=seed, librispeech=root)
    a, b, c = (_files(tmp_path / name) for name in "abc")
    assert a == b
    assert sorted(n for n in a if n.startswith("test")) != sorted(n for n in c if n.startswith("test"))


def test_text_files_build_and_normalise(tmp_path):
    lines = [f"Line {i}: \u201cWell,\u201d said Anne\u2014\u2019twas caf\u00e9 time." for i in range(30)]
    lines[3] = ""
    lines[4] = "the same line"
    lines[5] = "THE SAME LINE"
    book = tmp_path / "book.txt"
    book.write_text("\n".join(lines) + "\n", encoding="utf-8")
    out = tmp_path / "data"
    build_data.build(out, seed=2, text_files=[book], val_fraction=0.3, test_fraction=0.3)
    merged = {i: t for split in _split_texts(out).values() for i, t in split.items()}
    assert merged["0001-000000-0000"] == "LINE ZERO WELL SAID ANNE 'TWAS CAFE TIME"
    assert merged["0001-000000-0012"] == "LINE TWELVE WELL SAID ANNE 'TWAS CAFE TIME"
    assert "0001-000000-0003" not in merged
    card = (out / "DATA_CARD.md").read_text()
    assert re.search(r"\| blank line in a --text file \| 1 \| 0001-000000-0003 \|", card)
    assert re.search(r"\| `\u00e9` \(U\+00E9\) \| `E` \| 27 \|", card)  # 30 lines, 3 without it
    assert re.search(r"\| digit runs \(0-9\) \| number words \| 27 \|", card)
    same = [i for i in ("0001-000000-0004", "0001-000000-0005") if i in merged]
    assert len(same) == 1 or "text already in an earlier split" not in card


def test_bad_inputs_give_errors_that_name_the_path(tmp_path):
    missing = tmp_path / "nowhere"
    with pytest.raises(SystemExit, match="nowhere.*does not exist"):
        build_data.main(["--out", str(tmp_path / "d"), "--librispeech", str(missing)])
    (tmp_path / "empty_tree").mkdir()
    with pytest.raises(SystemExit, match=r"No \*\.trans\.txt files under .*empty_tree"):
        build_data.main(["--out", str(tmp_path / "d"), "--librispeech", str(tmp_path / "empty_tree")])
    blank = tmp_path / "blank.txt"
    blank.write_text("\n  \n")
    with pytest.raises(SystemExit, match="blank.txt has no text"):
        build_data.main(["--out", str(tmp_path / "d"), "--text", str(blank)])
    bad_tree = tmp_path / "bad"
    (bad_tree / "x").mkdir(parents=True)
    (bad_tree / "x" / "1-2.trans.txt").write_text("NOT AN ID LINE\n")
    with pytest.raises(SystemExit, match=r"1-2\.trans\.txt:1"):
        build_data.main(["--out", str(tmp_path / "d"), "--librispeech", str(bad_tree)])
    assert not (tmp_path / "d").exists(), "a failed build must not leave a data folder"


# ---- n-gram baselines -----------------------------------------------------------------------


def test_ngram_matches_a_hand_computed_bigram():
    # Train "AB" and "AA" with a bigram. Padded: BOS A B EOS, BOS A A EOS.
    # Bigram counts: (BOS,A)=2, (A,B)=(A,A)=(A,EOS)=(B,EOS)=1. Too few counts for the modified-KN
    # estimate, so the discounts fall back to D1=0.5, D2=D3+=0.75.
    # Unigram continuation counts (distinct left contexts): A=2 {BOS,A}, B=1 {A}, EOS=2 {A,B};
    # total 5, back-off mass (0.75+0.5+0.75)/5 = 0.4 spread uniformly over the 29 symbols.
    # Context A has total 3 with three singletons: back-off mass 3*0.5/3 = 0.5.
    model = CharNgramLM(2).fit(["AB", "AA"])
    p_unigram_b = (1 - 0.5) / 5 + 0.4 / NUM_PREDICTED
    probs = model.next_probs("A")
    assert math.isclose(probs[ALPHABET.index("B")], (1 - 0.5) / 3 + 0.5 * p_unigram_b, rel_tol=1e-12)
    p_unigram_c = 0.4 / NUM_PREDICTED
    assert math.isclose(probs[ALPHABET.index("C")], 0.5 * p_unigram_c, rel_tol=1e-12)
    # Context B (total 1, one singleton EOS): P(EOS|B) = 0.5/1 + 0.5 * P_uni(EOS).
    p_unigram_eos = (2 - 0.75) / 5 + 0.4 / NUM_PREDICTED
    assert math.isclose(model.next_probs("AB")[EOS], 0.5 + 0.5 * p_unigram_eos, rel_tol=1e-12)


def test_ngram_distributions_sum_to_one_and_perplexity_counts_eos():
    train = generate_split(0, 40_000, split="train")
    test = generate_split(0, 3_000, split="test")
    for order in (1, 3, 5):
        model = CharNgramLM(order).fit(train)
        for context in ("", "T", "THE SAI", "QQQXZ'", test[0][:40]):
            probs = model.next_probs(context)
            assert probs.shape == (NUM_PREDICTED,) and (probs > 0).all()
            assert math.isclose(probs.sum(), 1.0, rel_tol=1e-9), (order, context, probs.sum())
        # The vectorised score equals the chain rule over next_probs, EOS included.
        text = test[1]
        nll = -sum(math.log(model.next_probs(text[:i])[ALPHABET.index(c)]) for i, c in enumerate(text))
        nll -= math.log(model.next_probs(text)[EOS])
        total, chars = model.total_nll([text])
        assert chars == len(text) and math.isclose(total, nll, rel_tol=1e-9)
        assert math.isclose(model.perplexity([text]), math.exp(nll / len(text)), rel_tol=1e-9)
    with pytest.raises(ValueError, match="outside the alphabet"):
        model.perplexity(["lower case"])
