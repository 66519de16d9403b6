"""What ``handin.tar`` holds and how large each part may be. Standard library only.

``make handin`` (``hw4lib/handin.py``) packs by these rules and the autograder extracts and
grades by them, so a handin the packer writes is never refused by the grader for its names, sizes
or model size. The module ships in the student handout and in every autograder bundle. It imports
nothing outside the standard library: the grading driver imports it before any student code runs,
without torch.
"""
from __future__ import annotations

import hashlib
import json
import math
import random
import re
from typing import Iterable

HANDIN_TAR = "handin.tar"                         # what students upload
# The names a handed-in archive may end with (the grader reads each kind by its content)
HANDIN_ARCHIVE_SUFFIXES = (".tar", ".tar.gz", ".tgz", ".zip")
HANDIN_DIR = "handin"                             # every member lies under handin/
MYTORCH_DIR = "mytorch"                           # the student's package, its .py files only
CONFIG_FILE = "config.yaml"                       # the run's config: the grader rebuilds the model
STATE_DICT_FILE = "model_state_dict.pt"           # torch.save(model.state_dict()): tensors only
METRICS_FILE = "test_metrics.json"                # self-reported: echoed, never counted
GENERATIONS_FILE = "test_generated_results.json"
MODEL_ARCH_FILE = "model_arch.txt"
RUN_FILES = (METRICS_FILE, GENERATIONS_FILE, MODEL_ARCH_FILE, CONFIG_FILE)  # copied from the run
RUN_CARD_FILE = "run_card.json"                   # written by make handin: provenance, for staff
TIMING_FILE = "timing.json"                       # the run's wall times (make train writes it)

# The models the grader agrees to build: each integer of the model section within its range, and
# at most MAX_PARAMETERS parameters plus buffer elements (hw4lib.config.validate_untrusted). The
# default config is far below; at the cap, evaluation takes a few minutes on 2 CPU cores, within
# the grader's time limit for the model.
MAX_PARAMETERS = 30_000_000
MODEL_LIMITS = {  # key: (smallest, largest) accepted integer value
    "num_layers": (1, 48),
    "d_model": (1, 4096),
    "num_heads": (1, 64),
    "d_ff": (1, 32768),
    "max_len": (1, 65536),
}

# Bytes. Source files are a few kB and run files a few MB: anything bigger is a stray.
MAX_PY_FILE_BYTES = 1_000_000                     # one mytorch source file
MAX_MYTORCH_BYTES = 4_000_000                     # all of mytorch/ together
MAX_RUN_FILE_BYTES = 10_000_000                   # each of RUN_FILES
MAX_STATE_DICT_BYTES = 4 * MAX_PARAMETERS + 2**24  # float32 tensors of the largest model, + zip
MAX_MEMBERS = 500
MAX_MYTORCH_DEPTH = 8  # folders below mytorch/ (the given package uses 1)
# The archive: above every member at its limit (what the packer checks), below upload limits.
MAX_TAR_BYTES = 200 * 2**20

# A perplexity this far (relative) from what the packed weights give on the same test transcripts
# is flagged for the staff: test_metrics.json's against the run card's total, and each transcript
# of the card against the grader's re-measurement (its per-character perplexity). The trainer may
# have measured on a GPU and make handin on a CPU, with the student's model code: fp32 rounding
# moves either far less.
REPORTED_TOLERANCE = 0.02
# The grader re-measures a fresh random sample of the run card's transcripts, enough of them that a
# card with SAMPLE_TAMPER_FRACTION of its transcripts' losses changed is caught with probability
# SAMPLE_DETECTION at least.
SAMPLE_TAMPER_FRACTION = 0.10
SAMPLE_DETECTION = 0.99

_MODULE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


def is_mytorch_source(name: str) -> bool:
    """True for ``mytorch/<package>/.../<module>.py`` whose every component is a module name (what
    the grader can import), at most MAX_MYTORCH_DEPTH folders below ``mytorch/``."""
    parts = name.split("/")
    if parts[0] != MYTORCH_DIR or not parts[-1].endswith(".py"):  # a lone "mytorch" is no .py
        return False
    if len(parts) - 2 > MAX_MYTORCH_DEPTH:
        return False
    return all(_MODULE_NAME.match(part) for part in parts[:-1] + [parts[-1][:-3]])  # "mytorch" is one


def size_limit(name: str) -> int | None:
    """Bytes allowed to the member ``handin/<name>``; None for a file the grader does not use."""
    if name == STATE_DICT_FILE:
        return MAX_STATE_DICT_BYTES
    if name in RUN_FILES or name == RUN_CARD_FILE:
        return MAX_RUN_FILE_BYTES
    if is_mytorch_source(name):
        return MAX_PY_FILE_BYTES
    return None


def config_digest(config: dict) -> str:
    """sha256 of what the weights depend on in a validated config (the model section and the
    tokenizer): equal for the config a run trained with and the config.yaml handed in with it."""
    tokenization = config.get("tokenization") if isinstance(config.get("tokenization"), dict) else {}
    text = json.dumps({"model": config.get("model"), "token_type": tokenization.get("token_type")},
                      sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def transcripts_sha256(transcripts: Iterable[str]) -> str:
    """sha256 of ``transcripts`` in order, each followed by a newline: names the exact test set a
    perplexity was measured on (the run card records it; the grader finds the same set by it)."""
    digest = hashlib.sha256()
    for text in transcripts:
        digest.update(text.encode("utf-8") + b"\n")
    return digest.hexdigest()


def detection_probability(transcripts: int, tampered: int, sampled: int) -> float:
    """The probability that ``sampled`` transcripts drawn without replacement from ``transcripts``
    include at least one of ``tampered`` (hypergeometric: 1 - C(n - t, k) / C(n, k))."""
    return 1 - math.comb(transcripts - tampered, sampled) / math.comb(transcripts, sampled)


def sample_size(transcripts: int) -> int:
    """The fewest transcripts to re-measure among ``transcripts`` so that a tamper of
    SAMPLE_TAMPER_FRACTION of them (at least one) is caught with probability SAMPLE_DETECTION."""
    tampered = math.ceil(SAMPLE_TAMPER_FRACTION * transcripts)  # 1 or more for 1 or more
    return next(k for k in range(1, transcripts + 1)
                if detection_probability(transcripts, tampered, k) >= SAMPLE_DETECTION)


def sample_transcripts(transcripts: int, seed: int) -> list[int]:
    """The sorted indices, among ``transcripts``, of the sample_size(transcripts) transcripts that
    ``seed`` draws (the grader draws a fresh seed for every grading)."""
    return sorted(random.Random(seed).sample(range(transcripts), sample_size(transcripts)))


def lowest_per_character(losses: list[float], characters: list[int]) -> list[int]:
    """The sorted indices of the sample_size(len(losses)) // 2 transcripts whose loss per
    character is lowest (ties by index): the grader re-measures them besides its random sample,
    so a card cannot lower its total much by setting a few long transcripts' losses near 0."""
    order = sorted(range(len(losses)), key=lambda i: (losses[i] / max(characters[i], 1), i))
    return sorted(order[:sample_size(len(losses)) // 2])


def card_losses(card) -> tuple[list[float], list[int], float] | None:
    """(each transcript's NLL in nats, its token count, the recorded total) as make handin writes
    them in the run card's ``test_set``: one finite non-negative number and one positive int per
    transcript it counts; None otherwise (an older card has none)."""
    test_set = card.get("test_set") if isinstance(card, dict) else None
    if not isinstance(test_set, dict):
        return None
    count, nll = test_set.get("transcripts"), test_set.get("transcript_nll")
    tokens, total = test_set.get("transcript_tokens"), finite_number(test_set.get("total_nll"))
    if not (type(count) is int and isinstance(nll, list) and isinstance(tokens, list)
            and len(nll) == len(tokens) == count and total is not None):
        return None
    values = [finite_number(value) for value in nll]
    if any(value is None or value < 0 for value in values) or not all(
            type(value) is int and value > 0 for value in tokens):
        return None
    return values, tokens, total


def finite_number(value) -> float | None:
    """``value`` as a float when it is a finite int or float (not a bool), else None."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    try:
        value = float(value)  # a 400-digit integer does not fit
    except OverflowError:
        return None
    return value if math.isfinite(value) else None


def card_perplexity(total_nll: float, characters: int) -> float:
    """Per-character perplexity from summed NLL (nats) over ``characters``: exp(total / chars), inf
    when that overflows."""
    exponent = total_nll / characters
    return math.exp(exponent) if exponent < 700 else math.inf
