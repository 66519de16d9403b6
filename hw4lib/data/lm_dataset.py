"""LMDataset: transcripts as (input, target) token sequences for next-token prediction.

Each transcript "HI THERE" with tokens [t1, ..., tn] becomes a pair of equally long sequences

    shifted (model input):  [SOS] t1 t2 ... tn
    golden  (targets):      t1    t2 ... tn [EOS]

so position i of the input must predict position i of the target: ``shifted[1:] == golden[:-1]``.

Statistics (what the trainer's per-character perplexity relies on):

* ``total_chars``: characters of all transcripts (``sum(len(text))``, spaces included). It is the
  denominator of the per-character perplexity, exp(total NLL of every target incl. [EOS] /
  total_chars).
* ``total_tokens``: number of prediction targets, i.e. the tokens of all transcripts **plus one
  [EOS] per transcript** (``sum(len(golden))``).
* ``get_avg_chars_per_token()`` = total_chars / total_tokens, so per-char loss = per-token loss
  / avg chars per token exactly. Because [EOS] counts, the char tokenizer gives slightly below 1.
* ``text_max_len``: length of the longest shifted (= golden) sequence, [SOS] included.
"""
from __future__ import annotations

import random
import warnings
from os import PathLike
from pathlib import Path

import numpy as np
import torch
from torch.nn.utils.rnn import pad_sequence
from torch.utils.data import Dataset
from tqdm import tqdm

from hw4lib.data._checks import (check_dataset_config, check_listing, check_prompt_request,
                                  check_subset_kept)
from hw4lib.data.tokenizer import H4Tokenizer, resolve_repo_path


def load_transcript(path: str | PathLike) -> str:
    """Text of one ``.npy`` transcript, stored either as a 1-d array of single characters or as a
    0-d string array (both forms occur in the course's data)."""
    array = np.load(path, allow_pickle=False)
    if array.ndim > 1:
        raise ValueError(f"{path}: expected a 1-d array of characters or a 0-d string, "
                         f"got shape {array.shape}")
    return "".join(array.tolist()) if array.ndim == 1 else str(array.item())


def partition_dir(root: str | Path, partition: str) -> Path:
    """``root/partition`` as a Path; FileNotFoundError naming what is missing and the fix."""
    root = resolve_repo_path(root)
    if not root.is_dir():
        raise FileNotFoundError(
            f"Data root {root} not found. Run `make data` to build the dataset."
        )
    directory = root / partition
    if not directory.is_dir():
        found = sorted(p.name for p in root.iterdir() if p.is_dir())
        raise FileNotFoundError(
            f"Partition directory {directory} not found (partitions under {root}: {found}). "
            "Run `make data` to build the dataset."
        )
    return directory


class LMDataset(Dataset):
    """Language-modelling dataset over the ``.npy`` transcripts of one partition.

    Args:
        partition: sub-directory of ``config['root']``, e.g. ``'train'``, ``'val'``, ``'test'``.
        config: dict with ``root`` (dataset directory) and ``subset`` (fraction in (0, 1] of the
            partition's files to use: the first ``int(subset * n)`` files in sorted order).
        tokenizer: the H4Tokenizer that turns text into ids.

    Attributes:
        text_files: sorted list of the ``.npy`` Paths used (after ``subset``).
        transcripts: the raw text of each file.
        transcripts_shifted: list of int lists, ``[SOS] + tokens`` per transcript.
        transcripts_golden: list of int lists, ``tokens + [EOS]`` per transcript.
        sos_token, eos_token, pad_token: special ids taken from the tokenizer.
        total_chars, total_tokens, text_max_len: see the module docstring.
        length: number of transcripts.
    """

    def __init__(self, partition: str, config: dict, tokenizer: H4Tokenizer):
        self.partition = partition
        self.config = config
        self.tokenizer = tokenizer
        subset = check_dataset_config(config)
        text_dir = partition_dir(config["root"], partition)

        # TODO: store the tokenizer's [EOS], [SOS], [PAD] ids in eos_token, sos_token, pad_token
        # BEGIN SOLUTION
        self.eos_token = tokenizer.eos_id
        self.sos_token = tokenizer.sos_id
        self.pad_token = tokenizer.pad_id
        # END SOLUTION

        # TODO: self.text_files = the partition's .npy files (text_dir), sorted by name
        # BEGIN SOLUTION
        self.text_files = sorted(text_dir.glob("*.npy"))
        # END SOLUTION
        check_listing(text_dir, self.text_files)

        # TODO: keep only the first int(subset * len(self.text_files)) files
        # BEGIN SOLUTION
        self.text_files = self.text_files[: int(subset * len(self.text_files))]
        # END SOLUTION
        check_subset_kept(self.text_files, subset, text_dir)

        # TODO: self.transcripts = load_transcript(f) of every file (loop over tqdm(...) for a
        #       progress bar); token_ids = tokenizer.encode_batch(self.transcripts), int lists
        # BEGIN SOLUTION
        files = tqdm(self.text_files, desc=f"Loading {partition}")
        self.transcripts = [load_transcript(path) for path in files]
        token_ids = tokenizer.encode_batch(self.transcripts)
        # END SOLUTION
        self.total_chars = sum(len(text) for text in self.transcripts)
        self.unk_count = sum(ids.count(tokenizer.unk_id) for ids in token_ids)
        if self.unk_count:
            warnings.warn(
                f"{self.unk_count} tokens of partition {partition!r} are [UNK]: its text has "
                f"characters the {tokenizer.token_type!r} tokenizer cannot represent; rebuild "
                "the tokenizers on this data with `make tokenizers`",
                stacklevel=2,
            )

        # TODO: per transcript, transcripts_shifted gets [SOS] + ids, transcripts_golden ids + [EOS]
        # BEGIN SOLUTION
        self.transcripts_shifted = [[self.sos_token] + ids for ids in token_ids]
        self.transcripts_golden = [ids + [self.eos_token] for ids in token_ids]
        # END SOLUTION
        self.total_tokens = sum(len(golden) for golden in self.transcripts_golden)
        self.text_max_len = max(len(shifted) for shifted in self.transcripts_shifted)
        self.length = len(self.transcripts_shifted)

    def __len__(self) -> int:
        """Number of transcripts."""
        # TODO: return the number of transcripts
        # BEGIN SOLUTION
        return self.length
        # END SOLUTION

    def __getitem__(self, idx: int) -> tuple[torch.Tensor, torch.Tensor]:
        """``(shifted, golden)`` of transcript ``idx``: two int64 tensors of the same shape (T,)."""
        # TODO: return the shifted and golden sequences of transcript idx as torch.LongTensor
        # BEGIN SOLUTION
        shifted = torch.tensor(self.transcripts_shifted[idx], dtype=torch.long)
        golden = torch.tensor(self.transcripts_golden[idx], dtype=torch.long)
        return shifted, golden
        # END SOLUTION

    def collate_fn(self, batch: list[tuple[torch.Tensor, torch.Tensor]]
                   ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Pad a list of ``(shifted, golden)`` pairs into one batch.

        Args:
            batch: N pairs of int64 tensors, pair i of shape (T_i,).

        Returns:
            padded_shifted: (N, T) int64, T = max T_i, padded on the right with ``pad_token``.
            padded_golden: (N, T) int64, padded the same way.
            lengths: (N,) int64, the true lengths T_i.

        Hint: ``torch.nn.utils.rnn.pad_sequence(..., batch_first=True, padding_value=...)``.
        """
        if not batch:
            raise ValueError("collate_fn got an empty batch")
        # TODO: pad shifted and golden with pad_token to (N, T); lengths (N,) = the true lengths
        # BEGIN SOLUTION
        shifted, golden = zip(*batch)
        lengths = torch.tensor([len(seq) for seq in shifted], dtype=torch.long)
        padded_shifted = pad_sequence(shifted, batch_first=True, padding_value=self.pad_token)
        padded_golden = pad_sequence(golden, batch_first=True, padding_value=self.pad_token)
        return padded_shifted, padded_golden, lengths
        # END SOLUTION

    def get_avg_chars_per_token(self) -> float:
        """``total_chars / total_tokens``: the factor from per-token to per-character loss."""
        return self.total_chars / self.total_tokens

    def sample_prompts(self, num_samples: int, prompt_length: int,
                       seed: int | None = None) -> tuple[torch.Tensor, list[torch.Tensor]]:
        """Draw distinct transcripts and cut a generation prompt from the start of each.

        Only transcripts with more than ``prompt_length`` tokens are drawn, so each has something
        left to continue. The draw uses its own ``random.Random(seed)``: the same seed gives the
        same prompts, and the global Python, numpy and torch random states are left untouched.

        Returns:
            prompts: (num_samples, prompt_length + 1) int64, ``[SOS]`` then the first
                ``prompt_length`` tokens of each drawn transcript.
            originals: num_samples int64 tensors, the drawn transcripts' full golden sequences
                (all tokens then ``[EOS]``), in the same order as ``prompts``.
        """
        check_prompt_request(num_samples, prompt_length)
        eligible = [i for i, golden in enumerate(self.transcripts_golden)
                    if len(golden) - 1 > prompt_length]
        if len(eligible) < num_samples:
            raise ValueError(
                f"Only {len(eligible)} of the {self.length} {self.partition!r} transcripts have "
                f"more than {prompt_length} tokens (longest: {self.text_max_len - 1}); cannot "
                f"draw {num_samples} prompts. Use a shorter prompt_length or fewer samples."
            )
        chosen = random.Random(seed).sample(eligible, num_samples)
        prompts = torch.tensor([self.transcripts_shifted[i][: prompt_length + 1] for i in chosen],
                               dtype=torch.long)
        originals = [torch.tensor(self.transcripts_golden[i], dtype=torch.long) for i in chosen]
        return prompts, originals
