"""A chapter of the embedded corpus (its topic, its cast of named characters, its town), and the
four helpers every random decision of the corpus goes through, so that the sampling is easy to
follow (and to score)."""
from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Sequence

from datagen.vocabulary import (FEMALE, FEMALE_ENDINGS, MALE, MALE_ENDINGS, NAME_MIDDLES,
                                NAME_ROOTS, SURNAME_HEAD, SURNAME_MIDDLE, SURNAME_TAIL,
                                TITLE_FEMALE, TITLE_MALE, TOPICS, TOWN_TAIL, Topic)


def pick(rng: random.Random, items: Sequence):
    """One item, uniformly."""
    return items[int(rng.random() * len(items))]


def chance(rng: random.Random, p: float) -> bool:
    """True with probability p."""
    return rng.random() < p


def branch(rng: random.Random, weights: Sequence[float]) -> int:
    """An index i drawn with probability weights[i] / sum(weights)."""
    target = rng.random() * sum(weights)
    for index, weight in enumerate(weights):
        target -= weight
        if target < 0:
            return index
    return len(weights) - 1


def count(rng: random.Random, low: int, high: int) -> int:
    """An int in [low, high), uniformly."""
    return low + int(rng.random() * (high - low))


@dataclass(frozen=True)
class Character:
    first: str
    surname: str
    female: bool
    title: str

    @property
    def subject(self) -> str:
        return "SHE" if self.female else "HE"

    @property
    def object(self) -> str:
        return "HER" if self.female else "HIM"


@dataclass(frozen=True)
class Chapter:
    topic: Topic
    cast: tuple[Character, ...]
    town: str


def _first_name(rng: random.Random, female: bool) -> str:
    """A first name: a common one, or an invented one whose ending tells the gender (ORLANDA)."""
    if chance(rng, 0.2):
        return pick(rng, FEMALE if female else MALE)
    middle = pick(rng, NAME_MIDDLES)
    return pick(rng, NAME_ROOTS) + middle + pick(rng, FEMALE_ENDINGS if female else MALE_ENDINGS)


def _new_character(rng: random.Random, taken: Sequence[str]) -> Character:
    female = chance(rng, 0.5)
    first = _first_name(rng, female)
    while first in taken:
        first = _first_name(rng, female)
    surname = pick(rng, SURNAME_HEAD) + pick(rng, SURNAME_MIDDLE) + pick(rng, SURNAME_TAIL)
    title = pick(rng, TITLE_FEMALE if female else TITLE_MALE)
    return Character(first, surname, female, title)


def new_chapter(rng: random.Random) -> Chapter:
    cast: list[Character] = []
    for _ in range(pick(rng, (3, 3, 4, 4, 5))):  # >= 3: a narrator still leaves two to talk
        cast.append(_new_character(rng, [c.first for c in cast]))
    town = pick(rng, SURNAME_HEAD) + pick(rng, TOWN_TAIL)
    return Chapter(pick(rng, TOPICS), tuple(cast), town)
