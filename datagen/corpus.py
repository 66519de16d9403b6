"""The embedded default corpus: synthetic audiobook transcripts in the LibriSpeech character set.

The homework trains on LibriSpeech transcripts, but nothing here may download, so this module
writes its own: upper-case A-Z, apostrophe and space, one utterance per string, at most
``MAX_CHARS`` characters each. Every string is a deterministic function of a seed.

The text is narrative and dialogue from imaginary novels. Each chapter has a topic (the sea, a
farm, a court of law, ... 30 in all) that selects most of its nouns, verbs and adjectives, and a
cast of named characters. Within an utterance, characters are named and named again in the same
form, objects come back with the adjective they were introduced with, pronouns follow the gender
of the person last named, verbs agree with their subjects and the utterance's tense, each verb
takes its own set of objects, and answers re-use what the question asked about. A character
n-gram sees only the last few letters, so it cannot know what the utterance has committed to; a
Transformer reading the whole utterance can: the n-gram baselines on ``DATA_CARD.md`` (after
``make data``) stay above the homework's pass mark (``FULL_MARKS_PPL`` in
``hw4lib/grading_numbers.py``), which the default Transformer passes.

The words live in data files (``lexicon/topics.ini``, one section per topic, and
``lexicon/words.ini``, the words every topic shares) that ``vocabulary.py`` reads with the spelling
rules; ``numbers.py`` spells numbers out; ``chapters.py`` draws a chapter's topic, cast and town
(and holds the sampling helpers); ``grammar.py`` writes the sentences of an utterance; this module
draws the chapters, cuts each utterance to ``MAX_CHARS`` and names the splits' random streams.

Public API
----------
``generate_split(seed, num_chars, exclude=(), split="hidden") -> list[str]``
    Utterances totalling at least ``num_chars`` characters. The autograder draws a hidden test set
    with a secret ``seed`` and ``exclude`` = the train texts.
``generate_chapters(seed, num_chars, exclude=(), split="hidden") -> (chapters, skipped)``
    The same utterances grouped by chapter, and how many were skipped for being in ``exclude``
    (the data builder uses both for LibriSpeech-style ids and for the data card).
``ALPHABET``, ``MAX_CHARS``, ``GENERATOR_MODULES``
    The character set; the per-utterance length cap; the modules whose code decides the text.
"""
from __future__ import annotations

import random
from pathlib import Path
from typing import Iterable

from datagen.chapters import Chapter, branch, chance, count, new_chapter, pick
from datagen.grammar import Utterance
from datagen.vocabulary import CONNECTIVE, INTERJECTION

ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZ' "
MAX_CHARS = 500  # no utterance is longer, so a model's max_len of 512 tokens always suffices
# The modules whose code decides the generated text (datagen/build_data.py fingerprints them).
GENERATOR_MODULES = tuple(Path(__file__).with_name(f"{name}.py")
                          for name in ("corpus", "grammar", "chapters", "vocabulary", "numbers"))
# Relative frequencies of utterance lengths, in sentences.
_SENTENCE_COUNTS = (1, 2, 3, 4, 5, 6, 7)
_SENTENCE_WEIGHTS = (20, 24, 20, 14, 10, 7, 5)


def _utterance(rng: random.Random, chapter: Chapter, first: bool) -> str:
    """One utterance of a chapter, at most MAX_CHARS characters (whole sentences are dropped)."""
    writer = Utterance(rng, chapter)
    if first and chance(rng, 0.5):
        return writer.heading()
    dialogue_share = pick(rng, (0.0, 0.2, 0.5, 0.8))
    sentences: list[str] = []
    length = -1
    for _ in range(_SENTENCE_COUNTS[branch(rng, _SENTENCE_WEIGHTS)]):
        sentence = writer.dialogue() if chance(rng, dialogue_share) else writer.narrative()
        if sentences and chance(rng, 0.3):
            sentence = f"{pick(rng, CONNECTIVE)} {sentence}"
        if length + 1 + len(sentence) > MAX_CHARS:
            break
        sentences.append(sentence)
        length += 1 + len(sentence)
    return " ".join(sentences) if sentences else pick(rng, INTERJECTION)


def _rng(seed: int, split: str) -> random.Random:
    # Seeding with a string hashes it with SHA-512: stable across runs, PYTHONHASHSEED, machines.
    return random.Random(f"hw4p1-corpus/{split}/{int(seed)}")


def generate_chapters(seed: int, num_chars: int, exclude: Iterable[str] = (),
                      split: str = "hidden") -> tuple[list[list[str]], int]:
    """Utterances grouped by chapter, totalling at least ``num_chars`` characters.

    Args:
        seed: any int; with ``split`` it fully determines the output.
        num_chars: stop once the kept utterances have this many characters (spaces included).
        exclude: utterance texts never to return (e.g. the train split when drawing a test set).
            Excluding does not shift the random stream: the result is the unexcluded one with
            those utterances left out (and more appended to reach ``num_chars``).
        split: a name mixed into the seed so the splits of one seed are independent streams.

    Returns:
        (chapters, skipped): each chapter a non-empty list of utterance strings over ALPHABET,
        and how many generated utterances were left out because they were in ``exclude``.
    """
    if num_chars < 0:
        raise ValueError(f"num_chars must be >= 0, got {num_chars}")
    exclude = exclude if isinstance(exclude, (set, frozenset, dict)) else set(exclude)
    rng = _rng(seed, split)
    chapters: list[list[str]] = []
    total = skipped = 0
    while total < num_chars:
        chapter = new_chapter(rng)
        kept = []
        for index in range(count(rng, 8, 40)):
            text = _utterance(rng, chapter, first=index == 0)
            if text in exclude:
                skipped += 1
                continue
            kept.append(text)
            total += len(text)
            if total >= num_chars:
                break
        if kept:
            chapters.append(kept)
    return chapters, skipped


def generate_split(seed: int, num_chars: int, exclude: Iterable[str] = (),
                   split: str = "hidden") -> list[str]:
    """Utterances totalling at least ``num_chars`` characters, none of them in ``exclude``.

    Deterministic in (seed, split). The default data build uses split="train"/"val"/"test";
    the autograder calls ``generate_split(secret_seed, 100_000, exclude=train_texts)`` for a
    fresh test set from the same distribution (the "hidden" stream differs from the public
    test split even for the same seed).
    """
    chapters, _ = generate_chapters(seed, num_chars, exclude, split)
    return [text for chapter in chapters for text in chapter]

