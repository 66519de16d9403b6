"""The hidden test set of the language model: drawn at build time, never shipped as a seed.

``tools/make_autograde.py`` calls :func:`build_hidden_transcripts` and ships only the transcripts it
returns, as the partition of ``.npy`` files ``make data`` would write (:func:`hidden_utterances`
names them); this file (with ``HIDDEN_SEED``) stays in the instructors' repository. Change the
seed to draw a new hidden set for a new semester.
"""
from __future__ import annotations

import functools

from datagen import build_data
from datagen.corpus import generate_split

HIDDEN_SEED = 7_310_925_468_113
HIDDEN_SPLIT = "hidden"  # the corpus stream name; the public data uses "train", "val" and "test"
HIDDEN_NUM_CHARS = 80_000


@functools.lru_cache(maxsize=2)
def public_utterances(public_seed: int) -> dict[str, list[build_data.Utterance]]:
    """{split: utterances} of the public train, val and test splits that
    ``make data SEED=public_seed`` writes from the embedded corpus, with the same ids
    (regenerated, not read from disk)."""
    provenance = build_data.Provenance(source="the public splits, regenerated")
    return build_data.generated_splits(public_seed, build_data.DEFAULT_SIZES, provenance)


def public_splits(public_seed: int) -> dict[str, list[str]]:
    """{split: transcripts} of :func:`public_utterances`."""
    return {name: [utterance.text for utterance in split]
            for name, split in public_utterances(public_seed).items()}


def public_transcripts(public_seed: int) -> set[str]:
    """Every transcript of the public splits (the hidden set excludes them)."""
    return {text for split in public_splits(public_seed).values() for text in split}


def build_hidden_transcripts(public_seed: int = 0, num_chars: int = HIDDEN_NUM_CHARS) -> list[str]:
    """At least ``num_chars`` characters of transcripts from the public data's distribution, none of
    which occurs in any public split. Deterministic."""
    if num_chars <= 0:
        raise ValueError(f"num_chars must be positive, got {num_chars}")
    return generate_split(HIDDEN_SEED, num_chars, exclude=public_transcripts(public_seed),
                          split=HIDDEN_SPLIT)


def hidden_utterances(transcripts: list[str]) -> list[build_data.Utterance]:
    """``transcripts`` with the ids ``hidden-0``, ``hidden-1``, ... zero-padded to one width, so
    that a partition of them lists (sorted by name, as ``LMDataset`` reads it) in their order."""
    width = len(str(len(transcripts)))
    return [build_data.Utterance(f"hidden-{index:0{width}d}", text)
            for index, text in enumerate(transcripts)]
