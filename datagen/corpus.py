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

The words live in data files beside this module: ``lexicon/topics.ini`` (one section per topic)
and ``lexicon/words.ini`` (the words every topic shares); this module holds the grammar.

Public API
----------
``generate_split(seed, num_chars, exclude=(), split="hidden") -> list[str]``
    Utterances totalling at least ``num_chars`` characters. The autograder draws a hidden test set
    with a secret ``seed`` and ``exclude`` = the train texts.
``generate_chapters(seed, num_chars, exclude=(), split="hidden") -> (chapters, skipped)``
    The same utterances grouped by chapter, and how many were skipped for being in ``exclude``
    (the data builder uses both for LibriSpeech-style ids and for the data card).
``number_words(n)``, ``ALPHABET``, ``MAX_CHARS``
    Numbers spelled out as LibriSpeech does; the character set; the per-utterance length cap.
"""
from __future__ import annotations

import configparser
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Sequence

ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZ' "
MAX_CHARS = 500  # no utterance is longer, so a model's max_len of 512 tokens always suffices


# --------------------------------------------------------------------------------------------
# Numbers spelled out the way LibriSpeech transcribes them ("THREE HUNDRED AND TWELVE").
# --------------------------------------------------------------------------------------------

_ONES = ("ZERO ONE TWO THREE FOUR FIVE SIX SEVEN EIGHT NINE TEN ELEVEN TWELVE THIRTEEN "
         "FOURTEEN FIFTEEN SIXTEEN SEVENTEEN EIGHTEEN NINETEEN").split()
_TENS = "_ _ TWENTY THIRTY FORTY FIFTY SIXTY SEVENTY EIGHTY NINETY".split()
_ORDINALS = ("FIRST SECOND THIRD FOURTH FIFTH SIXTH SEVENTH EIGHTH NINTH TENTH ELEVENTH "
             "TWELFTH").split()


def number_words(n: int) -> str:
    """Spell a whole number 0 <= n < 1_000_000 in words, British style ('ONE HUNDRED AND TEN')."""
    if not 0 <= n < 1_000_000:
        raise ValueError(f"number_words expects 0 <= n < 1000000, got {n}")
    if n < 20:
        return _ONES[n]
    if n < 100:
        tens, ones = divmod(n, 10)
        return _TENS[tens] + ("" if ones == 0 else " " + _ONES[ones])
    if n < 1000:
        hundreds, rest = divmod(n, 100)
        return _ONES[hundreds] + " HUNDRED" + ("" if rest == 0 else " AND " + number_words(rest))
    thousands, rest = divmod(n, 1000)
    head = number_words(thousands) + " THOUSAND"
    if rest == 0:
        return head
    return head + (" AND " if rest < 100 else " ") + number_words(rest)


def year_words(year: int) -> str:
    """Spell a year 1100..1999 as read aloud: 1842 -> 'EIGHTEEN FORTY TWO', 1800 -> 'EIGHTEEN HUNDRED'."""
    century, rest = divmod(year, 100)
    if rest == 0:
        return number_words(century) + " HUNDRED"
    if rest < 10:
        return number_words(century) + " O " + number_words(rest)
    return number_words(century) + " " + number_words(rest)


# --------------------------------------------------------------------------------------------
# Morphology: regular English spelling rules, with irregular forms given in the lexicon.
# --------------------------------------------------------------------------------------------

_VOWELS = "AEIOU"


def _plural(noun: str) -> str:
    head, of, tail = noun.partition(" OF ")
    if of:  # SONG OF THE ROAD -> SONGS OF THE ROAD
        return _plural(head) + of + tail
    if noun.endswith(("S", "SH", "CH", "X", "Z")):
        return noun + "ES"
    if noun.endswith("Y") and noun[-2] not in _VOWELS:
        return noun[:-1] + "IES"
    return noun + "S"


def _third_person(verb: str) -> str:
    if verb.endswith(("S", "SH", "CH", "X", "Z", "O")):
        return verb + "ES"
    if verb.endswith("Y") and verb[-2] not in _VOWELS:
        return verb[:-1] + "IES"
    return verb + "S"


def _regular_past(verb: str) -> str:
    if verb.endswith("E"):
        return verb + "D"
    if verb.endswith("Y") and verb[-2] not in _VOWELS:
        return verb[:-1] + "IED"
    return verb + "ED"


def _present_participle(verb: str, past: str) -> str:
    if verb.endswith("IE"):
        return verb[:-2] + "YING"
    doubled = past.endswith("ED") and len(past) > len(verb) + 2 and past[-3] == past[-4]
    if doubled:  # STOP/STOPPED -> STOPPING, as the lexicon spelled out the doubling
        return past[:-2] + "ING"
    if verb.endswith("E") and not verb.endswith(("EE", "OE", "YE")):
        return verb[:-1] + "ING"
    return verb + "ING"


@dataclass(frozen=True)
class _Noun:
    sing: str
    plural: str
    female: bool = False


@dataclass(frozen=True)
class _Verb:
    base: str
    third: str
    past: str
    participle: str
    ing: str


@dataclass(frozen=True)
class _Place:
    noun: str
    preposition: str


@dataclass(frozen=True)
class _Topic:
    people: tuple[_Noun, ...]
    things: tuple[_Noun, ...]
    places: tuple[_Place, ...]
    verbs: tuple[_Verb, ...]
    adjectives: tuple[str, ...]
    events: tuple[str, ...]
    objects_of: dict[_Verb, tuple[_Noun, ...]]  # the things each topic verb takes as object


def _words(entry: str) -> str:
    return entry.replace("_", " ")


def _parse_nouns(spec: str) -> tuple[_Noun, ...]:
    nouns = []
    for entry in spec.split():
        female = entry.startswith("+")
        entry = entry.lstrip("+")
        sing, _, plural = entry.partition("/")
        nouns.append(_Noun(_words(sing), _words(plural) if plural else _plural(_words(sing)), female))
    return tuple(nouns)


def _parse_verbs(spec: str) -> tuple[_Verb, ...]:
    verbs = []
    for entry in spec.upper().split():
        parts = [_words(p) for p in entry.split("/")]
        base = parts[0]
        past = parts[1] if len(parts) > 1 else _regular_past(base)
        participle = parts[2] if len(parts) > 2 else past
        head, _, tail = base.partition(" ")  # BREAK IN -> BREAKS IN
        suffix = " " + tail if tail else ""
        third = ("HAS" if head == "HAVE" else _third_person(head)) + suffix
        if tail and len(parts) == 1:
            past = _regular_past(head) + suffix
            participle = past
        verbs.append(_Verb(base, third, past, participle,
                           _present_participle(head, past.split(" ")[0]) + suffix))
    return tuple(verbs)


def _parse_places(spec: str) -> tuple[_Place, ...]:
    places = []
    for entry in spec.split():
        noun, _, preposition = entry.partition(":")
        places.append(_Place(_words(noun), preposition))
    return tuple(places)


def _phrases(spec: str) -> tuple[str, ...]:
    return tuple(" ".join(p.split()) for p in spec.split("|"))  # a phrase may span lines


def _plain(spec: str) -> tuple[str, ...]:
    return tuple(_words(w) for w in spec.split())


OBJECTS_PER_VERB = 8


def _topic(spec: dict[str, str], lexicon_rng: random.Random) -> _Topic:
    """Parse one topic; each of its verbs takes a fixed set of its things as objects.

    The sets are drawn once from a fixed seed, the same for every corpus seed: they are part of
    the language (collocations such as MEND THE NET), not of one sample of it.
    """
    things = _parse_nouns(spec["things"])
    verbs = _parse_verbs(spec["verbs"])
    objects_of = {verb: tuple(lexicon_rng.sample(things, OBJECTS_PER_VERB)) for verb in verbs}
    return _Topic(_parse_nouns(spec["people"]), things, _parse_places(spec["places"]), verbs,
                  _plain(spec["adjectives"]), _phrases(spec["events"]), objects_of)


# --------------------------------------------------------------------------------------------
# The lexicon files. The sets of objects each topic verb takes are drawn once from a fixed seed.
# --------------------------------------------------------------------------------------------

LEXICON_DIR = Path(__file__).resolve().parent / "lexicon"
_TOPIC_FIELDS = ("people", "things", "places", "verbs", "adjectives", "events")


def _read_lexicon(name: str) -> dict[str, dict[str, str]]:
    """{section: {key: text}} of ``lexicon/<name>``, in file order (the order the draws use)."""
    parser = configparser.ConfigParser(delimiters=("=",), comment_prefixes=("#",),
                                       interpolation=None, empty_lines_in_values=False)
    with open(LEXICON_DIR / name, encoding="utf-8") as file:
        parser.read_file(file)
    return {section: dict(parser[section]) for section in parser.sections()}


def _topics() -> tuple[_Topic, ...]:
    sections = _read_lexicon("topics.ini")
    for name, spec in sections.items():
        if tuple(spec) != _TOPIC_FIELDS:
            raise ValueError(f"{LEXICON_DIR / 'topics.ini'}: topic [{name}] has keys {tuple(spec)}; "
                             f"each topic needs exactly {_TOPIC_FIELDS}, in that order")
    lexicon_rng = random.Random("hw4p1-lexicon")
    return tuple(_topic(spec, lexicon_rng) for spec in sections.values())


_SHARED = _read_lexicon("words.ini")


def _shared(section: str, key: str) -> str:
    """One list of ``lexicon/words.ini``; a ValueError naming the file if it is missing."""
    try:
        return _SHARED[section][key]
    except KeyError:
        raise ValueError(f"{LEXICON_DIR / 'words.ini'} has no '{key} = ...' in [{section}]") from None


def _syllables(spec: str) -> tuple[str, ...]:
    return tuple(s.strip("_") for s in spec.split())  # "_" alone: no syllable


_TOPICS = _topics()
_ADJ = _plain(_shared("describing", "adjectives"))
_MOOD = _plain(_shared("describing", "moods"))
_ADV = _plain(_shared("describing", "adverbs"))
_EPITHETS = _phrases(_shared("describing", "epithets"))
_TIME = _phrases(_shared("time", "past"))
_FUTURE = _phrases(_shared("time", "future"))
_HABIT = _phrases(_shared("time", "habits"))
_VERBS_THING = _parse_verbs(_shared("verbs", "thing"))
_VERBS_PERSON = _parse_verbs(_shared("verbs", "person"))
_VERBS_INTRANSITIVE = _parse_verbs(_shared("verbs", "intransitive"))
_VERBS_MOTION = _parse_verbs(_shared("verbs", "motion"))
_SPEECH = _parse_verbs(_shared("verbs", "speech"))
_ASK = _parse_verbs(_shared("verbs", "question"))
_THINK = _parse_verbs(_shared("verbs", "think"))
_GIVING = _parse_verbs(_shared("verbs", "giving"))
_ANSWER = _parse_verbs(_shared("verbs", "answer"))
_MODALS = _phrases(_shared("verbs", "modals"))
_PAY, _WAIT = _parse_verbs("PAY/PAID/PAID WAIT")  # the two verbs the numbers sentences need
_SINGULAR_DETERMINERS = _phrases(_shared("phrases", "singular_determiners"))
_PLURAL_DETERMINERS = _phrases(_shared("phrases", "plural_determiners"))
_NEAR = _phrases(_shared("phrases", "near"))
_CONNECTIVE = _phrases(_shared("phrases", "connectives"))
_INTERJECTION = _phrases(_shared("phrases", "interjections"))
_UNITS = _parse_nouns(_shared("phrases", "units"))
_MALE = tuple(_shared("names", "male").split())
_FEMALE = tuple(_shared("names", "female").split())
_NAME_ROOTS = tuple(_shared("names", "roots").split())
_NAME_MIDDLES = _syllables(_shared("names", "middles"))
_FEMALE_ENDINGS = tuple(_shared("names", "female_endings").split())
_MALE_ENDINGS = tuple(_shared("names", "male_endings").split())
_SURNAME_HEAD = tuple(_shared("names", "surname_heads").split())
_SURNAME_MIDDLE = _syllables(_shared("names", "surname_middles"))
_SURNAME_TAIL = tuple(_shared("names", "surname_tails").split())
_TOWN_TAIL = tuple(_shared("names", "town_tails").split())
_TITLE_MALE = _phrases(_shared("names", "titles_male"))
_TITLE_FEMALE = _phrases(_shared("names", "titles_female"))
_RELATION = tuple(_shared("names", "relations").split())




def _article(word: str) -> str:
    """'A' or 'AN' before ``word`` (by sound for the few words that need it)."""
    if word.startswith(("HOUR", "HONEST", "HONOUR", "HEIR")):
        return "AN"
    if word.startswith(("UNI", "USE", "USU", "EU", "ONE")):
        return "A"
    return "AN" if word[0] in _VOWELS else "A"


# --------------------------------------------------------------------------------------------
# Grammar. A chapter fixes a topic, a cast and a town. An utterance then commits to a narration
# tense, sometimes a first-person narrator, how it names each character, and the objects it talks
# about (with the adjectives it first gave them). Later words must agree with those choices,
# which is the long-range structure a Transformer can use and an n-gram cannot. Every random
# decision goes through the four helpers below, so the sampling is easy to follow (and to score).
# --------------------------------------------------------------------------------------------


def _pick(rng: random.Random, items: Sequence):
    """One item, uniformly."""
    return items[int(rng.random() * len(items))]


def _chance(rng: random.Random, p: float) -> bool:
    """True with probability p."""
    return rng.random() < p


def _branch(rng: random.Random, weights: Sequence[float]) -> int:
    """An index i drawn with probability weights[i] / sum(weights)."""
    target = rng.random() * sum(weights)
    for index, weight in enumerate(weights):
        target -= weight
        if target < 0:
            return index
    return len(weights) - 1


def _count(rng: random.Random, low: int, high: int) -> int:
    """An int in [low, high), uniformly."""
    return low + int(rng.random() * (high - low))


@dataclass(frozen=True)
class _Character:
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
class _Chapter:
    topic: _Topic
    cast: tuple[_Character, ...]
    town: str


def _first_name(rng: random.Random, female: bool) -> str:
    """A first name: a common one, or an invented one whose ending tells the gender (ORLANDA)."""
    if _chance(rng, 0.2):
        return _pick(rng, _FEMALE if female else _MALE)
    middle = _pick(rng, _NAME_MIDDLES)
    return _pick(rng, _NAME_ROOTS) + middle + _pick(rng, _FEMALE_ENDINGS if female else _MALE_ENDINGS)


def _new_character(rng: random.Random, taken: Sequence[str]) -> _Character:
    female = _chance(rng, 0.5)
    first = _first_name(rng, female)
    while first in taken:
        first = _first_name(rng, female)
    surname = _pick(rng, _SURNAME_HEAD) + _pick(rng, _SURNAME_MIDDLE) + _pick(rng, _SURNAME_TAIL)
    title = _pick(rng, _TITLE_FEMALE if female else _TITLE_MALE)
    return _Character(first, surname, female, title)


def _new_chapter(rng: random.Random) -> _Chapter:
    cast: list[_Character] = []
    for _ in range(_pick(rng, (3, 3, 4, 4, 5))):  # >= 3: a narrator still leaves two to talk
        cast.append(_new_character(rng, [c.first for c in cast]))
    town = _pick(rng, _SURNAME_HEAD) + _pick(rng, _TOWN_TAIL)
    return _Chapter(_pick(rng, _TOPICS), tuple(cast), town)


@dataclass(frozen=True)
class _Subject:
    """A sentence subject and what the rest of the sentence must agree with."""
    text: str
    plural: bool = False
    person: int = 3
    female: bool = False

    @property
    def possessive(self) -> str:
        if self.person == 1:
            return "OUR" if self.plural else "MY"
        if self.person == 2:
            return "YOUR"
        if self.plural:
            return "THEIR"
        return "HER" if self.female else "HIS"


_I = _Subject("I", person=1)
_WE = _Subject("WE", plural=True, person=1)
_YOU = _Subject("YOU", person=2)

# Relative frequencies of the sentence kinds, of utterance lengths (in sentences), and of the
# four ways of naming a character (first name, title and surname, both names, OLD JOHN).
_NARRATIVE_WEIGHTS = (22, 10, 7, 7, 7, 6, 6, 6, 6, 5, 5, 5, 8)
_SENTENCE_COUNTS = (1, 2, 3, 4, 5, 6, 7)
_SENTENCE_WEIGHTS = (20, 24, 20, 14, 10, 7, 5)
_NAME_FORM_WEIGHTS = (5, 20, 67, 8)


class _Utterance:
    """Writes one utterance and remembers what it has committed to so far."""

    def __init__(self, rng: random.Random, chapter: _Chapter):
        self.rng = rng
        self.chapter = chapter
        self.past = _chance(rng, 0.6)                  # narration tense
        self.narrator = _pick(rng, chapter.cast) if _chance(rng, 0.2) else None
        self.name_forms: dict[_Character, str] = {}    # how each character is named here
        self.objects: list[_Noun] = []                 # objects mentioned so far
        self.epithets: dict[_Noun, str] = {}           # adjective an object was introduced with
        self.last: _Character | None = None            # most recently named character
        others = [c for c in chapter.cast if c is not self.narrator]
        size = min(len(others), _pick(rng, (2, 2, 3)))
        self.cast = [others.pop(_count(rng, 0, len(others))) for _ in range(size)]  # who appears

    # ---- agreement -------------------------------------------------------------------------

    def verb(self, verb: _Verb, subject: _Subject) -> str:
        """The narration-tense form of ``verb`` agreeing with ``subject``."""
        if self.past:
            return verb.past
        return verb.third if subject.person == 3 and not subject.plural else verb.base

    def be(self, subject: _Subject) -> str:
        if self.past:
            return "WERE" if subject.plural or subject.person == 2 else "WAS"
        if subject.person == 1 and not subject.plural:
            return "AM"
        return "ARE" if subject.plural or subject.person == 2 else "IS"

    def have(self, subject: _Subject) -> str:
        if self.past:
            return "HAD"
        return "HAS" if subject.person == 3 and not subject.plural else "HAVE"

    # ---- people ----------------------------------------------------------------------------

    def name(self, character: _Character) -> str:
        """The character's name in the form this utterance uses for them (it rarely changes)."""
        self.last = character
        form = self.name_forms.get(character)
        if form is None or _chance(self.rng, 0.15):
            form = (character.first, f"{character.title} {character.surname}",
                    f"{character.first} {character.surname}",
                    f"{_pick(self.rng, _EPITHETS)} {character.first}")[_branch(self.rng, _NAME_FORM_WEIGHTS)]
            self.name_forms.setdefault(character, form)
        return form

    def character(self, *exclude: _Character) -> _Character:
        """Someone on stage in this utterance (else anyone in the chapter) not in ``exclude``."""
        cast = [c for c in self.cast if c not in exclude] or [
            c for c in self.chapter.cast if c not in exclude and c is not self.narrator]
        return _pick(self.rng, cast or self.cast)

    def role(self) -> _Noun:
        return _pick(self.rng, self.chapter.topic.people)

    def subject(self) -> _Subject:
        """A subject: the narrator, a pronoun for the last person named, a name, or a role."""
        rng = self.rng
        kind = _branch(rng, (6 if self.narrator else 0, 6 if self.last else 0, 72, 10, 6))
        if kind == 0:
            return _WE if _chance(rng, 0.15) else _I
        if kind == 1:
            return _Subject(self.last.subject, female=self.last.female)
        if kind == 2:
            who = self.character()
            return _Subject(self.name(who), female=who.female)
        if kind == 3:  # JOHN AND MARY: a plural subject made of two names
            first = self.character()
            return _Subject(f"{self.name(first)} AND {self.name(self.character(first))}",
                            plural=True)
        role = self.role()
        if _chance(rng, 0.25):
            return _Subject("THE " + role.plural, plural=True)
        return _Subject("THE " + role.sing, female=role.female)

    def person_object(self) -> str:
        kind = _branch(self.rng, (10 if self.last else 0, 65, 25))
        if kind == 0:
            return self.last.object
        if kind == 1:
            return self.name(self.character(self.last))
        return "THE " + self.role().sing

    # ---- things and places -----------------------------------------------------------------

    def thing(self, verb: _Verb | None = None) -> _Noun:
        """A topic object (one the verb can take, if a topic verb is given): usually one already
        mentioned, else a new one."""
        allowed = self.chapter.topic.objects_of.get(verb) if verb is not None else None
        mentioned = self.objects if allowed is None else [o for o in self.objects if o in allowed]
        if mentioned and _chance(self.rng, 0.5):
            return _pick(self.rng, mentioned)
        noun = _pick(self.rng, allowed or self.chapter.topic.things)
        if noun not in self.objects:
            self.objects.append(noun)
        return noun

    def adjective(self) -> str:
        if _chance(self.rng, 0.6):
            return _pick(self.rng, self.chapter.topic.adjectives)
        return _pick(self.rng, _ADJ)

    def described(self, noun: _Noun, plural: bool) -> str:
        """The noun, with the adjective it was introduced with (or a first one) now and then."""
        word = noun.plural if plural else noun.sing
        epithet = self.epithets.get(noun)
        if epithet is None:
            kind = _branch(self.rng, (55, 33, 12))  # none, one or two adjectives
            if kind == 0:
                return word
            epithet = self.adjective() if kind == 1 else f"{self.adjective()} {self.adjective()}"
            self.epithets[noun] = epithet
            return f"{epithet} {word}"
        return f"{epithet} {word}" if _chance(self.rng, 0.6) else word

    def thing_phrase(self, owner: _Subject | None = None, plural: bool | None = None,
                     verb: _Verb | None = None) -> str:
        """'THE TARRED ROPE', 'HER LANTERNS', 'THREE BARRELS', 'A COMPASS' ..."""
        rng = self.rng
        if plural is None:
            plural = _chance(rng, 0.3)
        phrase = self.determined(self.described(self.thing(verb), plural), plural, owner)
        if _chance(rng, 0.1):
            phrase += " AND " + self.determined(self.described(self.thing(verb), plural), plural, owner)
        return phrase

    def determined(self, words: str, plural: bool, owner: _Subject | None) -> str:
        """A determiner (or possessor) for an already described noun."""
        rng = self.rng
        kind = _branch(rng, (20 if owner else 0, 14, 6, 6, 54))
        if kind == 0:
            return f"{owner.possessive} {words}"
        if kind == 1:
            return f"{self.name(self.character())}'S {words}"
        if kind == 2:
            return f"THE {words} OF {_pick(rng, ('THE', 'THAT', 'A'))} {self.role().sing}"
        if kind == 3:
            return f"THE {words} {self.relative_clause()}"
        if plural:
            kind = _branch(rng, (50, 15, 35))
            if kind == 0:
                return "THE " + words
            if kind == 1:
                return f"{number_words(_pick(rng, (2, 2, 3, 3, 4, 5, 6, 7, 8, 10, 12, 20)))} {words}"
            return f"{_pick(rng, _PLURAL_DETERMINERS)} {words}"
        kind = _branch(rng, (50, 28, 22))
        if kind == 0:
            return "THE " + words
        if kind == 1:
            return f"{_article(words)} {words}"
        return f"{_pick(rng, _SINGULAR_DETERMINERS)} {words}"

    def relative_clause(self) -> str:
        """'WHICH JOHN HAD MENDED', 'THAT THE SAILORS HAVE FOUND' (narration tense)."""
        subject = self.subject()
        verb = self.topic_or_common_verb()
        return f"{_pick(self.rng, ('WHICH', 'THAT'))} {subject.text} {self.have(subject)} {verb.participle}"

    def location(self) -> str:
        """'ON THE DECK', 'NEAR THE BARN', 'IN BRAMCHESTER' ..."""
        if _chance(self.rng, 0.15):
            return f"{_pick(self.rng, ('IN', 'AT', 'NEAR', 'OUTSIDE', 'BEYOND'))} {self.chapter.town}"
        place = _pick(self.rng, self.chapter.topic.places)
        preposition = place.preposition if _chance(self.rng, 0.5) else _pick(self.rng, _NEAR)
        return f"{preposition} THE {place.noun}"

    def destination(self) -> str:
        if _chance(self.rng, 0.15):
            return f"{_pick(self.rng, ('TO', 'TOWARDS', 'BACK TO', 'ALL THE WAY TO'))} {self.chapter.town}"
        place = _pick(self.rng, self.chapter.topic.places)
        into = "INTO" if place.preposition == "IN" else "TO"
        return f"{_pick(self.rng, (into, 'TO', 'TOWARDS', 'BACK TO'))} THE {place.noun}"

    def topic_or_common_verb(self) -> _Verb:
        return _pick(self.rng, self.chapter.topic.verbs if _chance(self.rng, 0.8) else _VERBS_THING)

    # ---- narrative sentences ---------------------------------------------------------------

    def narrative(self) -> str:
        kinds = (self.action, self.motion, self.description, self.there_was, self.when_clause,
                 self.thought, self.event, self.progressive, self.giving, self.numbers,
                 self.mood, self.perfect, self.social)
        return kinds[_branch(self.rng, _NARRATIVE_WEIGHTS)]()

    def action(self) -> str:
        """SUBJECT VERBED OBJECT [LOCATION | ADVERB] [AND VERBED OBJECT]."""
        rng = self.rng
        subject = self.subject()
        verb = self.topic_or_common_verb()
        said = f"{_pick(rng, _MODALS)} {verb.base}" if _chance(rng, 0.15) else self.verb(verb, subject)
        text = f"{subject.text} {said} {self.thing_phrase(subject, verb=verb)}"
        if _chance(rng, 0.15):
            text = f"{_pick(rng, _TIME)} {text}"
        kind = _branch(rng, (30, 15, 12, 43))
        if kind == 0:
            text += " " + self.location()
        elif kind == 1:
            text += " " + _pick(rng, _ADV)
        elif kind == 2:
            text += f" WITH {self.thing_phrase(subject)}"
        if _chance(rng, 0.15):
            text += f" {_pick(rng, ('FOR', 'WITH', 'BEFORE', 'WITHOUT'))} {self.person_object()}"
        if _chance(rng, 0.3):
            verb = _pick(rng, self.chapter.topic.verbs)
            text += f" AND {self.verb(verb, subject)} {self.thing_phrase(subject, verb=verb)}"
        return text

    def motion(self) -> str:
        rng = self.rng
        subject = self.subject()
        text = f"{subject.text} {self.verb(_pick(rng, _VERBS_MOTION), subject)} {self.destination()}"
        if _chance(rng, 0.25):
            text += f" {_pick(rng, ('WITH', 'AFTER', 'BEHIND', 'AHEAD OF'))} {self.person_object()}"
        kind = _branch(rng, (40, 20, 40))
        if kind == 0:
            verb = _pick(rng, self.chapter.topic.verbs)
            text += f" TO {verb.base} {self.thing_phrase(subject, verb=verb)}"
        elif kind == 1:
            text += " " + _pick(rng, _TIME)
        return text

    def description(self) -> str:
        """THE ROPES WERE OLD AND TARRED: the verb agrees with the subject's number."""
        rng = self.rng
        plural = _chance(rng, 0.4)
        subject = _Subject("THE " + self.described(self.thing(), plural), plural=plural)
        text = f"{subject.text} {self.be(subject)}"
        kind = _branch(rng, (40, 30, 30))
        if kind == 0:
            return f"{text} {self.adjective()} AND {self.adjective()}"
        if kind == 1:
            return f"{text} {_pick(rng, ('VERY', 'RATHER', 'QUITE', 'TOO'))} {self.adjective()}"
        return f"{text} {self.adjective()}"

    def there_was(self) -> str:
        """THERE WERE THREE LANTERNS IN THE CABIN / THERE IS A COMPASS ON THE DECK."""
        rng = self.rng
        plural = _chance(rng, 0.5)
        words = self.described(self.thing(), plural)
        phrase = (f"{number_words(_pick(rng, (2, 3, 4, 5)))} {words}" if plural
                  else f"{_article(words)} {words}")
        return f"THERE {self.be(_Subject('', plural=plural))} {phrase} {self.location()}"

    def when_clause(self) -> str:
        rng = self.rng
        first = self.subject()
        text = f"WHEN {first.text} {self.verb(_pick(rng, _VERBS_THING), first)} {self.thing_phrase(first)}"
        second = self.subject()
        text += f" {second.text} {self.verb(_pick(rng, _VERBS_INTRANSITIVE), second)}"
        return text + (" " + _pick(rng, _ADV) if _chance(rng, 0.5) else "")

    def thought(self) -> str:
        rng = self.rng
        subject = self.subject()
        clause = self.action() if _chance(rng, 0.5) else self.description()
        return f"{subject.text} {self.verb(_pick(rng, _THINK), subject)} THAT {clause}"

    def event(self) -> str:
        """A stock happening of the topic ('THE TIDE TURNED'); these are past-tense only."""
        rng = self.rng
        if not self.past:
            return self.action()
        text = _pick(rng, self.chapter.topic.events)
        if _chance(rng, 0.5):
            text += f" {_pick(rng, ('AND', 'BUT', 'WHILE', 'AS'))} {self.action()}"
        return text

    def progressive(self) -> str:
        """SUBJECT WAS VERBING OBJECT LOCATION [WHEN SOMEONE CAME IN]."""
        rng = self.rng
        subject = self.subject()
        verb = _pick(rng, self.chapter.topic.verbs)
        text = (f"{subject.text} {self.be(subject)} {verb.ing} {self.thing_phrase(subject, verb=verb)} "
                f"{self.location()}")
        if _chance(rng, 0.5):
            other = self.subject()
            text += f" WHEN {other.text} {self.verb(_pick(rng, _VERBS_MOTION), other)} IN"
        return text

    def giving(self) -> str:
        rng = self.rng
        giver = self.subject()
        verb = self.verb(_pick(rng, _GIVING), giver)
        receiver = self.person_object()
        if _chance(rng, 0.5):
            return f"{giver.text} {verb} {receiver} {self.thing_phrase(giver)}"
        return f"{giver.text} {verb} {self.thing_phrase(giver)} TO {receiver}"

    def numbers(self) -> str:
        rng = self.rng
        kind = _branch(rng, (25, 20, 20, 35))
        if kind == 0:
            return f"IN THE YEAR {year_words(_count(rng, 1600, 1900))} {self.action()}"
        if kind == 1:
            hour = number_words(_count(rng, 1, 13))
            clock = _pick(rng, (f"{hour} O'CLOCK", f"HALF PAST {hour}", f"A QUARTER TO {hour}"))
            subject = _Subject("IT")
            return (f"IT {self.be(subject)} {_pick(rng, ('NEARLY', 'JUST', 'ALREADY', 'ABOUT'))} "
                    f"{clock} WHEN {self.motion()}")
        if kind == 2:
            who = self.character()
            subject = _Subject(self.name(who), female=who.female)
            return f"{subject.text} {self.be(subject)} {number_words(_count(rng, 5, 80))} YEARS OLD"
        unit = _pick(rng, _UNITS)
        n = _pick(rng, (1, 2, 3, 4, 5, 6, 10, 12, 20, 30, 40, 50, 100, 150, 300, 1000))
        if _chance(rng, 0.4):
            n = _count(rng, 2, 2000)
        amount = f"{number_words(n)} {unit.sing if n == 1 else unit.plural}"
        subject = self.subject()
        kind = _branch(rng, (1, 1, 1))
        if kind == 0:
            return f"{subject.text} {self.be(subject)} {amount} FROM {self.chapter.town}"
        if kind == 1:
            return f"{subject.text} {self.verb(_PAY, subject)} {amount} FOR {self.thing_phrase(subject)}"
        return f"{subject.text} {self.verb(_WAIT, subject)} {amount} {self.location()}"

    def mood(self) -> str:
        rng = self.rng
        subject = self.subject()
        text = f"{subject.text} {self.be(subject)} {_pick(rng, _MOOD)}"
        if _chance(rng, 0.5):
            text += f" {_pick(rng, ('BECAUSE', 'FOR', 'SINCE'))} {self.action()}"
        return text

    def social(self) -> str:
        """SUBJECT THANKED MARY [LOCATION | ADVERB]."""
        rng = self.rng
        subject = self.subject()
        text = f"{subject.text} {self.verb(_pick(rng, _VERBS_PERSON), subject)} {self.person_object()}"
        kind = _branch(rng, (30, 20, 50))
        if kind == 0:
            return f"{text} {self.location()}"
        return f"{text} {_pick(rng, _ADV)}" if kind == 1 else text

    def perfect(self) -> str:
        rng = self.rng
        subject = self.subject()
        verb = self.topic_or_common_verb()
        return (f"{subject.text} {self.have(subject)} {verb.participle} "
                f"{self.thing_phrase(subject, verb=verb)} "
                f"{_pick(rng, _TIME)}")

    # ---- dialogue (the quotes are in the present tense) ------------------------------------

    def dialogue(self) -> str:
        """A quoted clause with its speaker; a question gets 'ASKED' and often an answer."""
        rng = self.rng
        speaker = self.character()
        listener = self.character(speaker)
        if _chance(rng, 0.45):
            question, answer = self.question(speaker, listener)
            text = self.attribute(question, speaker, _pick(rng, _ASK))
            if _chance(rng, 0.6):
                text += " " + self.attribute(answer, listener, _pick(rng, _ANSWER))
            return text
        statement = self.statement(speaker, listener)
        if _chance(rng, 0.2) and not statement.endswith(listener.first):
            statement += (" MY DEAR " if _chance(rng, 0.3) else " ") + listener.first
        text = self.attribute(statement, speaker, _pick(rng, _SPEECH))
        if _chance(rng, 0.15):
            text += f" TO {self.name(listener)}"
        return text

    def attribute(self, quote: str, speaker: _Character, verb: _Verb) -> str:
        """'<QUOTE> SAID JOHN', '<QUOTE> HE SAID' or 'JOHN SAID <QUOTE>' in narration tense."""
        rng = self.rng
        if self.last is speaker and _chance(rng, 0.15):
            subject = _Subject(speaker.subject, female=speaker.female)
            pronoun = True
        else:
            subject = _Subject(self.name(speaker), female=speaker.female)
            pronoun = False
        said = self.verb(verb, subject)
        manner = " " + _pick(rng, _ADV) if _chance(rng, 0.15) else ""
        if _chance(rng, 0.25):
            return f"{subject.text} {said}{manner} {quote}"
        if pronoun:
            return f"{quote} {subject.text} {said}{manner}"
        return f"{quote} {said} {subject.text}{manner}"

    def question(self, speaker: _Character, listener: _Character) -> tuple[str, str]:
        """A question and a fitting answer that re-uses its object or person."""
        rng = self.rng
        verb = _pick(rng, self.chapter.topic.verbs)  # drawn first so the noun suits it
        noun = self.thing(verb)
        kind = _branch(rng, (30, 20, 20, 15, 15))
        if kind == 0:
            plural = _chance(rng, 0.35)
            word = noun.plural if plural else noun.sing
            question = f"WHERE {'ARE' if plural else 'IS'} THE {word}"
            where = "THEY ARE" if plural else _pick(rng, ("IT IS", f"THE {word} IS"))
            answer = f"{where} {self.location()}"
        elif kind == 1:
            question = f"HAVE YOU SEEN THE {noun.sing}"
            answer = _pick(rng, (f"YES I SAW IT {self.location()}", f"NO I HAVE NOT SEEN THE {noun.sing}",
                                 f"THE {noun.sing} IS {self.location()}"))
        elif kind == 2:
            other = self.character(speaker, listener)
            who = self.name(other)
            pronoun = other.subject
            question = f"DID {who} {verb.base} THE {noun.sing}"
            answer = _pick(rng, (f"YES {pronoun} {verb.past} IT {_pick(rng, _TIME)}",
                                 f"NO {pronoun} DID NOT", f"I THINK {pronoun} DID"))
        elif kind == 3:
            question = f"HOW MANY {noun.plural} ARE THERE {self.location()}"
            answer = f"THERE ARE {number_words(_count(rng, 2, 40))} {noun.plural}"
        else:
            question = f"WHAT WILL YOU DO WITH THE {noun.sing} {self.name(listener)}"
            answer = f"I SHALL {verb.base} IT {_pick(rng, _FUTURE)}"
        return question, answer

    def statement(self, speaker: _Character, listener: _Character) -> str:
        rng = self.rng
        kind = _branch(rng, (15, 15, 12, 12, 12, 8, 8, 8, 10))
        if kind == 0:
            return _pick(rng, _INTERJECTION) + (" " + self.name(listener) if _chance(rng, 0.4) else "")
        if kind == 1:
            verb = _pick(rng, self.chapter.topic.verbs)
            return f"YOU MUST {verb.base} {self.thing_phrase(_YOU, verb=verb)} {_pick(rng, _FUTURE)}"
        if kind == 2:
            verb = self.topic_or_common_verb()
            return f"I HAVE {verb.participle} {self.thing_phrase(_I, verb=verb)} {self.location()}"
        if kind == 3:
            who = self.character()
            verb = _pick(rng, self.chapter.topic.verbs)
            return f"{self.name(who)} {verb.third} THE {self.thing(verb).plural} {_pick(rng, _HABIT)}"
        if kind == 4:
            plural = _chance(rng, 0.4)
            return (f"THE {self.described(self.thing(), plural)} {'ARE' if plural else 'IS'} "
                    f"{_pick(rng, ('VERY', 'TOO', 'QUITE', 'NOT'))} {self.adjective()}")
        if kind == 5:
            return f"COME {_pick(rng, ('HERE', 'WITH ME', 'QUICKLY', 'AND SEE'))} {self.name(listener)}"
        if kind == 6:
            miles = number_words(_pick(rng, (2, 3, 4, 5, 7, 10, 12, 15, 20, 30, 50)))
            return f"IT'S {miles} MILES TO {self.chapter.town}"
        if kind == 7:
            verb = _pick(rng, self.chapter.topic.verbs)
            return f"WE SHALL {verb.base} {self.thing_phrase(_WE, verb=verb)} {_pick(rng, _FUTURE)}"
        other = self.character(speaker, listener)
        feeling = _pick(rng, ("AND I TRUST", "AND I LOVE", "BUT I FEAR", "AND I PITY"))
        return f"{self.name(other)} IS MY {_pick(rng, _RELATION)} {feeling} {other.object}"

    # ---- headings --------------------------------------------------------------------------

    def heading(self) -> str:
        rng = self.rng
        kind = _branch(rng, (75, 15, 10))
        if kind == 0:
            text = f"CHAPTER {number_words(_count(rng, 1, 61))}"
        elif kind == 1:
            text = f"CHAPTER THE {_pick(rng, _ORDINALS)}"
        else:
            text = f"BOOK {number_words(_count(rng, 1, 7))}"
        kind = _branch(rng, (25, 25, 20, 15, 15))
        if kind == 0:
            return text
        noun = self.thing()
        if kind == 1:
            return f"{text} THE {self.adjective()} {noun.sing}"
        if kind == 2:
            return f"{text} {self.name(self.character())}'S {noun.sing}"
        if kind == 3:
            return f"{text} THE {noun.sing} AND THE {self.thing().sing}"
        return f"{text} HOW {self.name(self.character())} CAME TO {self.chapter.town}"


def _utterance(rng: random.Random, chapter: _Chapter, first: bool) -> str:
    """One utterance of a chapter, at most MAX_CHARS characters (whole sentences are dropped)."""
    writer = _Utterance(rng, chapter)
    if first and _chance(rng, 0.5):
        return writer.heading()
    dialogue_share = _pick(rng, (0.0, 0.2, 0.5, 0.8))
    sentences: list[str] = []
    length = -1
    for _ in range(_SENTENCE_COUNTS[_branch(rng, _SENTENCE_WEIGHTS)]):
        sentence = writer.dialogue() if _chance(rng, dialogue_share) else writer.narrative()
        if sentences and _chance(rng, 0.3):
            sentence = f"{_pick(rng, _CONNECTIVE)} {sentence}"
        if length + 1 + len(sentence) > MAX_CHARS:
            break
        sentences.append(sentence)
        length += 1 + len(sentence)
    return " ".join(sentences) if sentences else _pick(rng, _INTERJECTION)


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
        chapter = _new_chapter(rng)
        kept = []
        for index in range(_count(rng, 8, 40)):
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

