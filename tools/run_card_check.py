"""Measure the run card's sampled check: fp32 reproducibility of each transcript's loss, and the
seconds the grader saves by re-measuring a sample instead of the whole test set.

    .venv/bin/python -m tools.run_card_check [--handin TAR ...] [--repeats 2]

For each model (the default config freshly initialised, and each ``--handin``'s trained weights),
each public test transcript's summed NLL (``hw4lib.trainers.metrics.transcript_losses``) is
measured in float32 several ways: as the grader batches (``evaluation_batch_size``, 1 math
thread), one transcript at a time, with 2 math threads, and in float64 (the exact value, to fp32
rounding's scale). It prints the largest gap, over the transcripts, of each way from the grader's
in per-character perplexity (what ``autograder.judging.grade`` holds within ``REPORTED_TOLERANCE``); for
each trained handin, the fewest transcripts a forged card must change to report a perplexity 5%,
10% or 25% lower and the chance the random draw catches it (with and without the re-measuring of
the lowest losses per character);
for trained handins of one tokenizer, how many transcripts of the first one's card the others'
weights give more than REPORTED_TOLERANCE apart (a swap of weights); then the seconds of
``grade_model.compare_with_report`` on the default model, the whole set (an older run card)
against the sample of a fresh seed and the lowest losses per character (a card with
per-transcript losses, its own), interleaved.
Data: ``hw4_data/hw4p1_data`` as ``make data`` builds it.
"""
from __future__ import annotations

import argparse
import copy
import io
import itertools
import math
import secrets
import tarfile
import time
import warnings
from pathlib import Path

import torch
import yaml

from autograder.judging.scoring import grade_model
from hw4lib.data import H4Tokenizer
from hw4lib.data.tokenizer import DEFAULT_TOKEN_MAP
from hw4lib.handin_format import (CONFIG_FILE, HANDIN_DIR, REPORTED_TOLERANCE, STATE_DICT_FILE,
                                  detection_probability, sample_size, transcripts_sha256)
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


def reproducibility(label: str, config: dict, model: DecoderOnlyTransformer
                    ) -> tuple[list[float], list[int]]:
    """Print the largest per-transcript gaps; return (the grader's losses, characters) of each
    public test transcript."""
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
    return graded, chars


def concentrated_tampers(label: str, losses: list[float], chars: list[int]) -> None:
    """Print the fewest transcripts a forged card must change to report a perplexity 5%, 10% or
    25% lower, and how often a grading's random draw catches that. The grader also re-measures
    the transcripts whose recorded loss per character is lowest (lowest_per_character): a forgery
    that stays out of them lowers each transcript at most to the loss per character of the last
    of them (the largest such cuts first); without that rule, to 0."""
    n, k = len(losses), sample_size(len(losses))
    floor = sorted(loss / c for loss, c in zip(losses, chars))[max(sample_size(n) // 2 - 1, 0)]
    for rule, cuts in (("without the lowest-per-character rule", losses),
                       ("with it", [max(0.0, loss - floor * c) for loss, c in zip(losses, chars)])):
        ordered = sorted(cuts, reverse=True)
        for drop in (0.05, 0.10, 0.25):
            needed = -math.log(1 - drop) * sum(chars)
            reach = list(itertools.accumulate(ordered))
            count = next((t + 1 for t, total in enumerate(reach) if total >= needed), None)
            found = ("impossible" if count is None else
                     f"{count} transcripts ({count / n:.1%}), caught with probability "
                     f"{detection_probability(n, count, k):.4f}")
            print(f"{label}: {rule}: {drop:.0%} lower: {found}")


def swapped_weights(labels: list[str], losses: list[list[float]], chars: list[int]) -> None:
    """Print how many transcripts of the first model's card the other models' weights give more
    than REPORTED_TOLERANCE apart, and how often the sample catches such a swap."""
    n, k = len(chars), sample_size(len(chars))
    for label, other in zip(labels[1:], losses[1:]):
        apart = sum(abs(math.expm1((a - b) / c)) > REPORTED_TOLERANCE
                    for a, b, c in zip(losses[0], other, chars))
        print(f"{labels[0]}'s card beside {label}'s weights: {apart} of {n} transcripts apart, "
              f"caught with probability {detection_probability(n, apart, k):.6f}")


def seconds_saved(config: dict, model: DecoderOnlyTransformer, card_nll: list[float],
                  repeats: int) -> None:
    torch.set_num_threads(1)
    tokenizer = H4Tokenizer(DEFAULT_TOKEN_MAP, config["tokenization"]["token_type"])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        public = grade_model.read_partition(DATA_ROOT, tokenizer)
    count, digest = len(public), transcripts_sha256(public.transcripts)
    drawn_and_lowest = sample_size(count) + sample_size(count) // 2
    times: dict[str, list[float]] = {"whole set": [],
                                     f"sample (at most {drawn_and_lowest})": []}
    for _ in range(repeats):
        for name, seed in zip(times, (None, secrets.randbits(63))):
            start = time.perf_counter()
            result = grade_model.compare_with_report(model, config["model"], tokenizer, DATA_ROOT,
                                                     count, digest, seed, card_nll)
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
    trained = {}
    for label, config, model in (default, *map(handin_model, args.handin)):
        losses, chars = reproducibility(label, config, model)
        if label == default[0]:
            default_losses = losses
        else:
            concentrated_tampers(label, losses, chars)
            trained.setdefault(config["tokenization"]["token_type"], []).append((label, losses))
    for same_tokenizer in trained.values():
        if len(same_tokenizer) > 1:
            swapped_weights(*map(list, zip(*same_tokenizer)), chars)
    seconds_saved(default[1], default[2], default_losses, args.repeats)


if __name__ == "__main__":
    main()
