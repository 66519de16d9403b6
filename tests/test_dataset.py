"""Tests of LMDataset (hw4lib/data/lm_dataset.py) and verify_dataloader on tiny hand-made splits.

    python -m tests.test_dataset        (the notebook's "Dataset" cell runs this)
"""
import random
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch
from torch.utils.data import DataLoader

from hw4lib.data import H4Tokenizer, LMDataset, verify_dataloader
from hw4lib.data.tokenizer import DEFAULT_TOKEN_MAP
from tests.testing_framework import rubric, run_module

RUBRIC = {"LMDataset": 10}

# File name -> transcript. The names sort differently from this order on purpose.
TRANSCRIPTS = {
    "b_02.npy": "HELLO WORLD",  # 11 characters
    "a_01.npy": "IT'S",  # 4
    "c_03.npy": "A",  # 1
    "a_00.npy": "THE CAT SAT ON THE MAT",  # 22
}
SORTED_TEXTS = [TRANSCRIPTS[name] for name in sorted(TRANSCRIPTS)]


def write_split(directory: Path, transcripts: dict[str, str]) -> None:
    """Save each transcript as .npy, alternating the two on-disk forms: 1-d chars and 0-d string."""
    directory.mkdir(parents=True, exist_ok=True)
    for i, (name, text) in enumerate(sorted(transcripts.items())):
        np.save(directory / name, np.array(list(text)) if i % 2 == 0 else np.array(text))


def make_dataset(tmp_path: Path, token_type: str = "char", subset: float = 1.0,
                 transcripts: dict[str, str] = TRANSCRIPTS) -> LMDataset:
    write_split(tmp_path / "data" / "train", transcripts)
    config = {"root": str(tmp_path / "data"), "subset": subset, "batch_size": 2, "NUM_WORKERS": 0}
    return LMDataset("train", config, H4Tokenizer(DEFAULT_TOKEN_MAP, token_type))


@rubric("LMDataset")
def test_special_ids_files_and_statistics_by_hand(tmp_path):
    dataset = make_dataset(tmp_path)
    assert (dataset.sos_token, dataset.eos_token, dataset.pad_token) == (3, 4, 0)
    assert [Path(f).name for f in dataset.text_files] == sorted(TRANSCRIPTS)
    assert len(dataset) == dataset.length == 4
    # Char tokenizer: one token per character, plus one [EOS] target per transcript.
    assert dataset.total_chars == 22 + 4 + 11 + 1 == 38
    assert dataset.total_tokens == 38 + 4 == 42
    assert dataset.text_max_len == 22 + 1
    assert dataset.get_avg_chars_per_token() == pytest.approx(38 / 42)


@rubric("LMDataset")
def test_shifted_and_golden_pairs_line_up(tmp_path):
    for token_type in ("char", "1k"):
        dataset = make_dataset(tmp_path / token_type, token_type)
        tokenizer = dataset.tokenizer
        for i, text in enumerate(SORTED_TEXTS):
            shifted, golden = dataset[i]
            assert shifted.dtype == golden.dtype == torch.long
            assert shifted.shape == golden.shape == (len(tokenizer.encode(text)) + 1,)
            assert shifted[0] == tokenizer.sos_id and golden[-1] == tokenizer.eos_id
            assert torch.equal(shifted[1:], golden[:-1])
            assert tokenizer.decode(golden[:-1]) == text
            assert dataset.transcripts_shifted[i] == shifted.tolist()
            assert dataset.transcripts_golden[i] == golden.tolist()


@rubric("LMDataset")
def test_statistics_with_a_bpe_tokenizer(tmp_path):
    dataset = make_dataset(tmp_path, "5k")
    token_counts = [len(dataset.tokenizer.encode(text)) for text in SORTED_TEXTS]
    assert dataset.total_chars == sum(map(len, SORTED_TEXTS))
    assert dataset.total_tokens == sum(token_counts) + len(SORTED_TEXTS)
    assert dataset.text_max_len == max(token_counts) + 1
    ratio = dataset.total_chars / dataset.total_tokens
    assert dataset.get_avg_chars_per_token() == pytest.approx(ratio)


@rubric("LMDataset")
def test_subset_takes_a_prefix_of_the_sorted_files(tmp_path):
    dataset = make_dataset(tmp_path, subset=0.5)
    assert [Path(f).name for f in dataset.text_files] == sorted(TRANSCRIPTS)[:2]
    assert len(dataset) == 2
    assert dataset.total_chars == len(SORTED_TEXTS[0]) + len(SORTED_TEXTS[1])
    with pytest.raises(ValueError, match="subset"):
        make_dataset(tmp_path, subset=0.1)  # int(0.1 * 4) = 0 files
    with pytest.raises(ValueError, match="subset"):
        make_dataset(tmp_path, subset=1.5)


@rubric("LMDataset")
def test_collate_fn_pads_with_the_pad_id_and_returns_true_lengths(tmp_path):
    dataset = make_dataset(tmp_path)
    items = [dataset[i] for i in (3, 0, 1)]  # lengths 2, 23, 5
    shifted, golden, lengths = dataset.collate_fn(items)
    assert shifted.shape == golden.shape == (3, 23)
    assert shifted.dtype == golden.dtype == lengths.dtype == torch.long
    assert lengths.tolist() == [2, 23, 5]
    for row, (item_shifted, item_golden) in enumerate(items):
        n = len(item_shifted)
        assert torch.equal(shifted[row, :n], item_shifted)
        assert torch.equal(golden[row, :n], item_golden)
        assert (shifted[row, n:] == dataset.pad_token).all()
        assert (golden[row, n:] == dataset.pad_token).all()


@rubric("LMDataset")
def test_dataloader_batches_cover_every_target(tmp_path):
    dataset = make_dataset(tmp_path)
    loader = DataLoader(dataset, batch_size=3, shuffle=False, collate_fn=dataset.collate_fn)
    batches = list(loader)
    assert len(batches) == 2
    assert sum(int(lengths.sum()) for _, _, lengths in batches) == dataset.total_tokens
    stats = verify_dataloader(loader)
    assert stats["partition"] == "train" and stats["num_batches"] == 2 and stats["num_samples"] == 4
    assert stats["shifted_shape"] == stats["golden_shape"] == (3, 23)
    assert stats["max_len"] == 23
    assert stats["avg_chars_per_token"] == pytest.approx(38 / 42)


@rubric("LMDataset")
def test_sample_prompts_deterministic_and_leaves_global_rng_alone(tmp_path):
    dataset = make_dataset(tmp_path)
    states = (torch.random.get_rng_state(), random.getstate(), np.random.get_state())
    prompts, originals = dataset.sample_prompts(num_samples=2, prompt_length=3, seed=7)
    again, _ = dataset.sample_prompts(num_samples=2, prompt_length=3, seed=7)
    assert torch.equal(prompts, again)
    assert torch.equal(torch.random.get_rng_state(), states[0])
    assert random.getstate() == states[1]
    after = np.random.get_state()
    assert after[0] == states[2][0] and np.array_equal(after[1], states[2][1])
    assert after[2:] == states[2][2:]

    assert prompts.shape == (2, 4) and prompts.dtype == torch.long
    assert (prompts[:, 0] == dataset.sos_token).all()
    for prompt, original in zip(prompts, originals):
        i = dataset.transcripts_golden.index(original.tolist())
        assert prompt.tolist() == dataset.transcripts_shifted[i][:4]
        assert len(original) - 1 > 3  # only transcripts longer than the prompt are drawn
    # Only two transcripts ("HELLO WORLD", "THE CAT ...") have more than 4 characters.
    drawn = {tuple(dataset.sample_prompts(1, 4, seed=seed)[0][0].tolist()) for seed in range(10)}
    assert drawn == {tuple(dataset.transcripts_shifted[i][:5]) for i in (0, 2)}
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
    assert str(missing_root) in str(error.value)
    (tmp_path / "data" / "train").mkdir(parents=True)
    with pytest.raises(FileNotFoundError, match="make data") as error:
        LMDataset("val", {"root": str(tmp_path / "data"), "subset": 1.0}, tokenizer)
    assert str(tmp_path / "data" / "val") in str(error.value)
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
    assert len(dataset) == 4
    assert any("Ignoring 1 files" in m and "notes.txt" in m for m in messages), messages
    lower = {"x.npy": "Hi THeRe"}
    dataset, messages = warnings_of(lambda: make_dataset(tmp_path / "lower", transcripts=lower))
    assert dataset.unk_count == 3
    assert any("3 tokens" in message and "[UNK]" in message for message in messages), messages
    # Byte-level BPE represents any text: no [UNK], no warning.
    dataset, messages = warnings_of(
        lambda: make_dataset(tmp_path / "bpe", token_type="1k", transcripts=lower))
    assert dataset.unk_count == 0 and not messages, messages


if __name__ == "__main__":
    run_module(__name__)
