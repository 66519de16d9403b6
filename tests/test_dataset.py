"""Tests of LMDataset (hw4lib/data/lm_dataset.py) and verify_dataloader on tiny hand-made splits.

    python -m tests.test_dataset        (the notebook's "Dataset" cell runs this)
"""
import os
import random
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch
from torch.utils.data import DataLoader

from hw4lib.data import H4Tokenizer, LMDataset, verify_dataloader
from hw4lib.data.tokenizer import DEFAULT_TOKEN_MAP
from tests.failure_messages import in_case
from tests.testing_framework import rubric, run_module

RUBRIC = {"LMDataset": 0}
# Graded only through the language model's perplexity (testing_framework.py).
THROUGH_LM = ("LMDataset",)

# File name -> transcript, named as LibriSpeech utterances are. The names sort differently from
# this order on purpose, and by name ("1272-..." < "2035-..." < "251-..." < "84-...") differently
# from by number (84, 251, 1272, 2035).
TRANSCRIPTS = {
    "251-136532-0000.npy": "HELLO WORLD",  # 11 characters
    "2035-147961-0000.npy": "IT'S",  # 4
    "84-121123-0000.npy": "A",  # 1
    "1272-128104-0000.npy": "THE CAT SAT ON THE MAT",  # 22
}
SORTED_TEXTS = [TRANSCRIPTS[name] for name in sorted(TRANSCRIPTS)]


def write_split(directory: Path, transcripts: dict[str, str]) -> None:
    """Save each transcript as .npy, alternating the two on-disk forms: 1-d chars and 0-d string.

    Files are written in reverse name order and their modification times run backwards too, so
    neither the creation order nor the mtime order is the sorted order the dataset must use.
    """
    directory.mkdir(parents=True, exist_ok=True)
    names = sorted(transcripts)
    for i, name in reversed(list(enumerate(names))):
        text = transcripts[name]
        np.save(directory / name, np.array(list(text)) if i % 2 == 0 else np.array(text))
        os.utime(directory / name, (1_000_000 - i, 1_000_000 - i))


class SwappedPadTokenizer:
    """The char tokenizer with the ids of [PAD] (0) and of the letter E swapped.

    Its pad id is not 0 and 0 is a real letter, so a dataset that pads with a literal 0 or takes 0
    for the pad id writes an E where padding belongs.
    """

    def __init__(self):
        self.inner = H4Tokenizer(DEFAULT_TOKEN_MAP, "char")
        letter = self.inner.encode("E")[0]
        self.swap = {0: letter, letter: 0}
        self.pad_id, self.letter_id = letter, 0
        self.sos_id, self.eos_id, self.unk_id = self.inner.sos_id, self.inner.eos_id, self.inner.unk_id
        self.token_type, self.vocab_size = self.inner.token_type, self.inner.vocab_size

    def encode(self, text):
        return [self.swap.get(i, i) for i in self.inner.encode(text)]

    def encode_batch(self, texts):
        return [self.encode(text) for text in texts]

    def decode(self, ids, skip_special_tokens=False):
        return self.inner.decode([self.swap.get(int(i), int(i)) for i in ids], skip_special_tokens)


def make_dataset(tmp_path: Path, token_type: str = "char", subset: float = 1.0,
                 transcripts: dict[str, str] = TRANSCRIPTS, tokenizer=None) -> LMDataset:
    write_split(tmp_path / "data" / "train", transcripts)
    config = {"root": str(tmp_path / "data"), "subset": subset, "batch_size": 2, "NUM_WORKERS": 0}
    return LMDataset("train", config, tokenizer or H4Tokenizer(DEFAULT_TOKEN_MAP, token_type))


def check(got, expected, what):
    assert got == expected, f"{what}: expected {expected!r}, got {got!r}"


@rubric("LMDataset")
def test_special_ids_files_and_statistics_by_hand(tmp_path):
    dataset = make_dataset(tmp_path)
    check((dataset.sos_token, dataset.eos_token, dataset.pad_token), (3, 4, 0),
          "(sos_token, eos_token, pad_token) of the char tokenizer")
    check([Path(f).name for f in dataset.text_files], sorted(TRANSCRIPTS),
          "text_files: the .npy files sorted by name")
    check((len(dataset), dataset.length), (4, 4), "(len(dataset), dataset.length)")
    # Char tokenizer: one token per character, plus one [EOS] target per transcript.
    check(dataset.total_chars, 22 + 4 + 11 + 1, "total_chars")
    check(dataset.total_tokens, 38 + 4, "total_tokens (tokens + one [EOS] per transcript)")
    check(dataset.text_max_len, 22 + 1, "text_max_len (the longest shifted sequence)")
    assert dataset.get_avg_chars_per_token() == pytest.approx(38 / 42), (
        f"get_avg_chars_per_token: expected 38/42, got {dataset.get_avg_chars_per_token()}"
    )

    swapped = SwappedPadTokenizer()
    dataset = make_dataset(tmp_path / "swapped", tokenizer=swapped)
    check((dataset.sos_token, dataset.eos_token, dataset.pad_token),
          (swapped.sos_id, swapped.eos_id, swapped.pad_id),
          "(sos_token, eos_token, pad_token) of a tokenizer whose pad id is not 0: take them "
          "from the tokenizer")


@rubric("LMDataset")
def test_shifted_and_golden_pairs_line_up(tmp_path):
    for token_type in ("char", "1k"):
        dataset = make_dataset(tmp_path / token_type, token_type)
        tokenizer = dataset.tokenizer
        for i, text in enumerate(SORTED_TEXTS):
            where = f"{token_type} tokenizer, dataset[{i}] ({text!r})"
            with in_case(where):
                shifted, golden = dataset[i]
            check((shifted.dtype, golden.dtype), (torch.long, torch.long), f"{where}: dtypes of (shifted, golden)")
            length = len(tokenizer.encode(text)) + 1
            check((tuple(shifted.shape), tuple(golden.shape)), ((length,), (length,)),
                  f"{where}: shapes of (shifted, golden)")
            check((int(shifted[0]), int(golden[-1])), (tokenizer.sos_id, tokenizer.eos_id),
                  f"{where}: (shifted[0], golden[-1]) must be ([SOS], [EOS])")
            check(shifted[1:].tolist(), golden[:-1].tolist(), f"{where}: shifted[1:] must equal golden[:-1]")
            check(tokenizer.decode(golden[:-1]), text, f"{where}: golden[:-1] decoded")
            check(dataset.transcripts_shifted[i], shifted.tolist(), f"{where}: transcripts_shifted[{i}]")
            check(dataset.transcripts_golden[i], golden.tolist(), f"{where}: transcripts_golden[{i}]")


@rubric("LMDataset")
def test_statistics_with_a_bpe_tokenizer(tmp_path):
    dataset = make_dataset(tmp_path, "5k")
    token_counts = [len(dataset.tokenizer.encode(text)) for text in SORTED_TEXTS]
    check(dataset.total_chars, sum(map(len, SORTED_TEXTS)), "5k tokenizer: total_chars")
    check(dataset.total_tokens, sum(token_counts) + len(SORTED_TEXTS), "5k tokenizer: total_tokens")
    check(dataset.text_max_len, max(token_counts) + 1, "5k tokenizer: text_max_len")
    ratio = dataset.total_chars / dataset.total_tokens
    assert dataset.get_avg_chars_per_token() == pytest.approx(ratio), (
        f"get_avg_chars_per_token: expected {ratio}, got {dataset.get_avg_chars_per_token()}"
    )


@rubric("LMDataset")
def test_subset_takes_a_prefix_of_the_sorted_files(tmp_path):
    # int(0.7 * 4) = 2 files: truncated, not rounded (3).
    dataset = make_dataset(tmp_path, subset=0.7)
    check([Path(f).name for f in dataset.text_files], sorted(TRANSCRIPTS)[:2],
          "subset=0.7 of 4 files: the first int(0.7 * 4) = 2 files in sorted order")
    check(len(dataset), 2, "len(dataset) with subset=0.7 of 4 files")
    check(dataset.total_chars, len(SORTED_TEXTS[0]) + len(SORTED_TEXTS[1]), "total_chars of the subset")
    with pytest.raises(ValueError, match="subset"):
        make_dataset(tmp_path, subset=0.2)  # int(0.2 * 4) = 0 files
    with pytest.raises(ValueError, match="subset"):
        make_dataset(tmp_path, subset=1.5)


@rubric("LMDataset")
def test_collate_fn_pads_with_the_pad_id_and_returns_true_lengths(tmp_path):
    for tokenizer in (None, SwappedPadTokenizer()):
        dataset = make_dataset(tmp_path / str(tokenizer is None), tokenizer=tokenizer)
        pad = dataset.tokenizer.pad_id
        items = [dataset[i] for i in (3, 0, 1)]  # lengths 2, 23, 5
        shifted, golden, lengths = dataset.collate_fn(items)
        check((tuple(shifted.shape), tuple(golden.shape)), ((3, 23), (3, 23)),
              "collate_fn: shapes of (padded_shifted, padded_golden), (N, T_max)")
        check((shifted.dtype, golden.dtype, lengths.dtype), (torch.long,) * 3, "collate_fn: dtypes")
        check(lengths.tolist(), [2, 23, 5], "collate_fn: lengths, the unpadded lengths")
        for row, (item_shifted, item_golden) in enumerate(items):
            n = len(item_shifted)
            check(shifted[row, :n].tolist(), item_shifted.tolist(), f"padded_shifted[{row}, :{n}]")
            check(golden[row, :n].tolist(), item_golden.tolist(), f"padded_golden[{row}, :{n}]")
            check(shifted[row, n:].tolist(), [pad] * (23 - n),
                  f"padded_shifted[{row}, {n}:] must be the tokenizer's pad id {pad}")
            check(golden[row, n:].tolist(), [pad] * (23 - n),
                  f"padded_golden[{row}, {n}:] must be the tokenizer's pad id {pad}")


@rubric("LMDataset")
def test_dataloader_batches_cover_every_target(tmp_path):
    dataset = make_dataset(tmp_path)
    loader = DataLoader(dataset, batch_size=3, shuffle=False, collate_fn=dataset.collate_fn)
    batches = list(loader)
    check(len(batches), 2, "batches of 3 from 4 transcripts")
    check(sum(int(lengths.sum()) for _, _, lengths in batches), dataset.total_tokens,
          "the lengths of all batches must sum to total_tokens")
    stats = verify_dataloader(loader)
    check((stats["partition"], stats["num_batches"], stats["num_samples"]), ("train", 2, 4),
          "verify_dataloader: (partition, num_batches, num_samples)")
    check((stats["shifted_shape"], stats["golden_shape"]), ((3, 23), (3, 23)),
          "verify_dataloader: first batch shapes")
    check(stats["max_len"], 23, "verify_dataloader: max_len")
    assert stats["avg_chars_per_token"] == pytest.approx(38 / 42), (
        f"verify_dataloader: avg_chars_per_token expected 38/42, got {stats['avg_chars_per_token']}"
    )


@rubric("LMDataset")
def test_sample_prompts_deterministic_and_leaves_global_rng_alone(tmp_path):
    dataset = make_dataset(tmp_path)
    states = (torch.random.get_rng_state(), random.getstate(), np.random.get_state())
    prompts, originals = dataset.sample_prompts(num_samples=2, prompt_length=3, seed=7)
    again, _ = dataset.sample_prompts(num_samples=2, prompt_length=3, seed=7)
    assert torch.equal(prompts, again), f"the same seed must give the same prompts: {prompts} vs {again}"
    assert torch.equal(torch.random.get_rng_state(), states[0]), "sample_prompts changed torch's global RNG"
    assert random.getstate() == states[1], "sample_prompts changed Python's global RNG"
    after = np.random.get_state()
    assert after[0] == states[2][0] and np.array_equal(after[1], states[2][1]) and after[2:] == states[2][2:], (
        "sample_prompts changed numpy's global RNG"
    )

    check((tuple(prompts.shape), prompts.dtype), ((2, 4), torch.long), "prompts: (shape, dtype)")
    check(prompts[:, 0].tolist(), [dataset.sos_token] * 2, "prompts[:, 0] must be [SOS]")
    for prompt, original in zip(prompts, originals):
        i = dataset.transcripts_golden.index(original.tolist())
        check(prompt.tolist(), dataset.transcripts_shifted[i][:4], f"the prompt cut from transcript {i}")
        assert len(original) - 1 > 3, f"only transcripts longer than the prompt may be drawn, got {original}"
    # Only two transcripts ("HELLO WORLD", "THE CAT ...") have more than 4 characters.
    drawn = {tuple(dataset.sample_prompts(1, 4, seed=seed)[0][0].tolist()) for seed in range(10)}
    check(drawn, {tuple(dataset.transcripts_shifted[i][:5]) for i in (0, 2)},
          "prompts drawn over 10 seeds (only two transcripts are long enough)")
    with pytest.raises(ValueError, match="more than 30 tokens"):
        dataset.sample_prompts(1, 30, seed=0)
    with pytest.raises(ValueError, match="cannot draw 3"):
        dataset.sample_prompts(3, 4, seed=0)


@rubric("LMDataset")
def test_missing_or_empty_data_gives_clear_errors(tmp_path):
    tokenizer = H4Tokenizer(DEFAULT_TOKEN_MAP, "char")
    missing_root = tmp_path / "no_such_root"
    with pytest.raises(FileNotFoundError, match="make data") as error:
        LMDataset("train", {"root": str(missing_root), "subset": 1.0}, tokenizer)
    assert str(missing_root) in str(error.value), f"the error must name {missing_root}: {error.value}"
    (tmp_path / "data" / "train").mkdir(parents=True)
    with pytest.raises(FileNotFoundError, match="make data") as error:
        LMDataset("val", {"root": str(tmp_path / "data"), "subset": 1.0}, tokenizer)
    assert str(tmp_path / "data" / "val") in str(error.value), f"the error must name the missing partition: {error.value}"
    with pytest.raises(ValueError, match="No .npy"):
        LMDataset("train", {"root": str(tmp_path / "data"), "subset": 1.0}, tokenizer)


def warnings_of(build):
    """Call ``build()``; return its result and the messages of the warnings it emitted."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = build()
    return result, [str(warning.message) for warning in caught]


@rubric("LMDataset")
def test_stray_files_and_unknown_characters_are_reported(tmp_path):
    (tmp_path / "data" / "train").mkdir(parents=True)
    (tmp_path / "data" / "train" / "notes.txt").write_text("not a transcript")
    dataset, messages = warnings_of(lambda: make_dataset(tmp_path))
    check(len(dataset), 4, "len(dataset) with a stray notes.txt beside the 4 .npy files")
    assert any("Ignoring 1 files" in m and "notes.txt" in m for m in messages), (
        f"expected a warning naming notes.txt, got {messages}"
    )
    lower = {"x.npy": "Hi THeRe"}
    dataset, messages = warnings_of(lambda: make_dataset(tmp_path / "lower", transcripts=lower))
    check(dataset.unk_count, 3, "unk_count of 'Hi THeRe' with the char tokenizer")
    assert any("3 tokens" in message and "[UNK]" in message for message in messages), (
        f"expected a warning about 3 [UNK] tokens, got {messages}"
    )
    # Byte-level BPE represents any text: no [UNK], no warning.
    dataset, messages = warnings_of(
        lambda: make_dataset(tmp_path / "bpe", token_type="1k", transcripts=lower))
    assert dataset.unk_count == 0 and not messages, (
        f"the 1k tokenizer has no [UNK] here: expected no warning, got unk_count {dataset.unk_count}, {messages}"
    )


if __name__ == "__main__":
    run_module(__name__)
