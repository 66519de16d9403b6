"""Measure the run card's sampled check: fp32 reproducibility of each transcript's loss, and the
seconds the grader saves by re-measuring a sample instead of the whole test set.

    .venv/bin/python -m tools.run_card_check [--handin TAR ...] [--repeats 2]

For each model (the default config freshly initialised, and each ``--handin``'s trained weights),
each public test transcript's summed NLL (``hw4lib.trainers.metrics.transcript_losses``) is
measured in float32 several ways: as the grader batches (``evaluation_batch_size``, 1 math
thread), one transcript at a time, with 2 math threads, and in float64 (the exact value, to fp32
rounding's scale). It prints the largest gap, over the transcripts, of each way from the grader's
in per-character perplexity (what ``autograder.grade`` holds within ``REPORTED_TOLERANCE``), then
the seconds of ``grade_model.compare_with_report`` on the default model, the whole set (an older
run card) against the sample of a fresh seed (a card with per-transcript losses), interleaved.
Data: ``hw4_data/hw4p1_data`` as ``make data`` builds it.
"""
from __future__ import annotations

import argparse
import copy
import io
import math
import secrets
import tarfile
import time
import warnings
from pathlib import Path

import torch
import yaml

from autograder import grade_model
from hw4lib.data import H4Tokenizer
from hw4lib.data.tokenizer import DEFAULT_TOKEN_MAP
from hw4lib.handin_format import (CONFIG_FILE, HANDIN_DIR, STATE_DICT_FILE, sample_size,
                                  transcripts_sha256)
from hw4lib.model import DecoderOnlyTransformer
from hw4lib.trainers.metrics import evaluation_batch_size, transcript_losses

DATA_ROOT = Path("hw4_data/hw4p1_data")
DEFAULT_CONFIG = Path("configs/default.yaml")


def default_model() -> tuple[str, dict, DecoderOnlyTransformer]:
    """(label, config, the default config's model freshly initialised under seed 0)."""
    config = yaml.safe_load(DEFAULT_CONFIG.read_text())
    tokenizer = H4Tokenizer(DEFAULT_TOKEN_MAP, config["tokenization"]["token_type"])
    torch.manual_seed(0)
    model = DecoderOnlyTransformer(**config["model"], num_classes=tokenizer.vocab_size)
    return "default config, fresh", config, model


def handin_model(path: Path) -> tuple[str, dict, DecoderOnlyTransformer]:
    """(label, config, the model of handin.tar ``path``)."""
    with tarfile.open(path) as tar:
        read = {name: tar.extractfile(f"{HANDIN_DIR}/{name}").read()
                for name in (CONFIG_FILE, STATE_DICT_FILE)}
    config = yaml.safe_load(read[CONFIG_FILE])
    tokenizer = H4Tokenizer(DEFAULT_TOKEN_MAP, config["tokenization"]["token_type"])
    model = DecoderOnlyTransformer(**config["model"], num_classes=tokenizer.vocab_size)
    model.load_state_dict(torch.load(io.BytesIO(read[STATE_DICT_FILE]), weights_only=True))
    return f"{path.parent.name} ({config['tokenization']['token_type']})", config, model


def largest_gap(losses: list[float], reference: list[float], chars: list[int]) -> float:
    """max over transcripts of |exp((loss - reference) / chars) - 1|."""
    return max(abs(math.expm1((a - b) / c)) for a, b, c in zip(losses, reference, chars))


def reproducibility(label: str, config: dict, model: DecoderOnlyTransformer) -> None:
    tokenizer = H4Tokenizer(DEFAULT_TOKEN_MAP, config["tokenization"]["token_type"])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        public = grade_model.read_partition(DATA_ROOT, tokenizer)
    everything = list(range(len(public)))
    chars = [len(text) for text in public.transcripts]
    width = max(config["model"]["d_ff"], config["model"]["d_model"], tokenizer.vocab_size)
    batch = evaluation_batch_size(public.text_max_len, config["model"]["num_heads"], width)
    torch.set_num_threads(1)
    graded = transcript_losses(model, public, everything, batch, "cpu")
    ways = {"one transcript at a time": transcript_losses(model, public, everything, 1, "cpu")}
    torch.set_num_threads(2)
    ways["2 math threads"] = transcript_losses(model, public, everything, batch, "cpu")
    torch.set_num_threads(1)
    ways["float64 (exact to fp32's scale)"] = transcript_losses(
        copy.deepcopy(model).double(), public, everything, batch, "cpu")
    for way, losses in ways.items():
        print(f"{label}: {way}: largest per-transcript gap {largest_gap(losses, graded, chars):.2e}"
              f" (per-character perplexity, relative; {len(public)} transcripts, batch {batch})")


def seconds_saved(config: dict, model: DecoderOnlyTransformer, repeats: int) -> None:
    torch.set_num_threads(1)
    tokenizer = H4Tokenizer(DEFAULT_TOKEN_MAP, config["tokenization"]["token_type"])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        public = grade_model.read_partition(DATA_ROOT, tokenizer)
    count, digest = len(public), transcripts_sha256(public.transcripts)
    times: dict[str, list[float]] = {"whole set": [], f"sample of {sample_size(count)}": []}
    for _ in range(repeats):
        for name, seed in zip(times, (None, secrets.randbits(63))):
            start = time.perf_counter()
            result = grade_model.compare_with_report(model, config["model"], tokenizer, DATA_ROOT,
                                                     count, digest, seed)
            times[name].append(time.perf_counter() - start)
            assert "compare_note" not in result, result
    for name, values in times.items():
        print(f"compare_with_report, default model, {count} transcripts, {name}: "
              f"{', '.join(f'{value:.2f}' for value in values)} s (1 math thread)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--handin", type=Path, nargs="*", default=[],
                        help="handin.tar files of trained runs to measure too")
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args()
    default = default_model()
    for label, config, model in (default, *map(handin_model, args.handin)):
        reproducibility(label, config, model)
    seconds_saved(default[1], default[2], args.repeats)


if __name__ == "__main__":
    main()
