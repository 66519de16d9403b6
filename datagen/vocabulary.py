"""The embedded corpus's words: regular English spelling rules (plurals, verb forms) with the
irregular forms given in the lexicon, and the word lists read from the lexicon files beside this
module (``lexicon/topics.ini``, one section per topic; ``lexicon/words.ini``, the words every
topic shares)."""
from __future__ import annotations

import configparser
import random
from dataclasses import dataclass
from pathlib import Path


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
class Noun:
    sing: str
    plural: str
    female: bool = False


@dataclass(frozen=True)
class Verb:
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
class Topic:
    people: tuple[Noun, ...]
    things: tuple[Noun, ...]
    places: tuple[_Place, ...]
    verbs: tuple[Verb, ...]
    adjectives: tuple[str, ...]
    events: tuple[str, ...]
    objects_of: dict[Verb, tuple[Noun, ...]]  # the things each topic verb takes as object


def _words(entry: str) -> str:
    return entry.replace("_", " ")


def _parse_nouns(spec: str) -> tuple[Noun, ...]:
    nouns = []
    for entry in spec.split():
        female = entry.startswith("+")
        entry = entry.lstrip("+")
        sing, _, plural = entry.partition("/")
        nouns.append(Noun(_words(sing), _words(plural) if plural else _plural(_words(sing)), female))
    return tuple(nouns)


def _parse_verbs(spec: str) -> tuple[Verb, ...]:
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
        verbs.append(Verb(base, third, past, participle,
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


def _topic(spec: dict[str, str], lexicon_rng: random.Random) -> Topic:
    """Parse one topic; each of its verbs takes a fixed set of its things as objects.

    The sets are drawn once from a fixed seed, the same for every corpus seed: they are part of
    the language (collocations such as MEND THE NET), not of one sample of it.
    """
    things = _parse_nouns(spec["things"])
    verbs = _parse_verbs(spec["verbs"])
    objects_of = {verb: tuple(lexicon_rng.sample(things, OBJECTS_PER_VERB)) for verb in verbs}
    return Topic(_parse_nouns(spec["people"]), things, _parse_places(spec["places"]), verbs,
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


def _topics() -> tuple[Topic, ...]:
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


TOPICS = _topics()
ADJ = _plain(_shared("describing", "adjectives"))
MOOD = _plain(_shared("describing", "moods"))
ADV = _plain(_shared("describing", "adverbs"))
EPITHETS = _phrases(_shared("describing", "epithets"))
TIME = _phrases(_shared("time", "past"))
FUTURE = _phrases(_shared("time", "future"))
HABIT = _phrases(_shared("time", "habits"))
VERBS_THING = _parse_verbs(_shared("verbs", "thing"))
VERBS_PERSON = _parse_verbs(_shared("verbs", "person"))
VERBS_INTRANSITIVE = _parse_verbs(_shared("verbs", "intransitive"))
VERBS_MOTION = _parse_verbs(_shared("verbs", "motion"))
SPEECH = _parse_verbs(_shared("verbs", "speech"))
ASK = _parse_verbs(_shared("verbs", "question"))
THINK = _parse_verbs(_shared("verbs", "think"))
GIVING = _parse_verbs(_shared("verbs", "giving"))
ANSWER = _parse_verbs(_shared("verbs", "answer"))
MODALS = _phrases(_shared("verbs", "modals"))
PAY, WAIT = _parse_verbs("PAY/PAID/PAID WAIT")  # the two verbs the numbers sentences need
SINGULAR_DETERMINERS = _phrases(_shared("phrases", "singular_determiners"))
PLURAL_DETERMINERS = _phrases(_shared("phrases", "plural_determiners"))
NEAR = _phrases(_shared("phrases", "near"))
CONNECTIVE = _phrases(_shared("phrases", "connectives"))
INTERJECTION = _phrases(_shared("phrases", "interjections"))
UNITS = _parse_nouns(_shared("phrases", "units"))
MALE = tuple(_shared("names", "male").split())
FEMALE = tuple(_shared("names", "female").split())
NAME_ROOTS = tuple(_shared("names", "roots").split())
NAME_MIDDLES = _syllables(_shared("names", "middles"))
FEMALE_ENDINGS = tuple(_shared("names", "female_endings").split())
MALE_ENDINGS = tuple(_shared("names", "male_endings").split())
SURNAME_HEAD = tuple(_shared("names", "surname_heads").split())
SURNAME_MIDDLE = _syllables(_shared("names", "surname_middles"))
SURNAME_TAIL = tuple(_shared("names", "surname_tails").split())
TOWN_TAIL = tuple(_shared("names", "town_tails").split())
TITLE_MALE = _phrases(_shared("names", "titles_male"))
TITLE_FEMALE = _phrases(_shared("names", "titles_female"))
RELATION = tuple(_shared("names", "relations").split())


def article(word: str) -> str:
    """'A' or 'AN' before ``word`` (by sound for the few words that need it)."""
    if word.startswith(("HOUR", "HONEST", "HONOUR", "HEIR")):
        return "AN"
    if word.startswith(("UNI", "USE", "USU", "EU", "ONE")):
        return "A"
    return "AN" if word[0] in _VOWELS else "A"
