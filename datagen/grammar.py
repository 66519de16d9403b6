"""The grammar of the embedded corpus. A chapter (datagen/chapters.py) fixes a topic, a cast and a
town. An utterance then commits to a narration tense, sometimes a first-person narrator, how it
names each character, and the objects it talks about (with the adjectives it first gave them).
Later words must agree with those choices, which is the long-range structure a Transformer can
use and an n-gram cannot."""
from __future__ import annotations

import random
from dataclasses import dataclass

from datagen.chapters import Chapter, Character, branch, chance, count, pick
from datagen.numbers import ORDINALS, number_words, year_words
from datagen.vocabulary import (ADJ, ADV, ANSWER, ASK, EPITHETS, FUTURE, GIVING, HABIT,
                                INTERJECTION, MODALS, MOOD, NEAR, Noun, PAY, PLURAL_DETERMINERS,
                                RELATION, SINGULAR_DETERMINERS, SPEECH, THINK, TIME, UNITS,
                                VERBS_INTRANSITIVE, VERBS_MOTION, VERBS_PERSON, VERBS_THING, Verb,
                                WAIT, article)


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

# Relative frequencies of the sentence kinds and of the four ways of naming a character (first
# name, title and surname, both names, OLD JOHN).
_NARRATIVE_WEIGHTS = (22, 10, 7, 7, 7, 6, 6, 6, 6, 5, 5, 5, 8)
_NAME_FORM_WEIGHTS = (5, 20, 67, 8)


class Utterance:
    """Writes one utterance and remembers what it has committed to so far."""

    def __init__(self, rng: random.Random, chapter: Chapter):
        self.rng = rng
        self.chapter = chapter
        self.past = chance(rng, 0.6)                  # narration tense
        self.narrator = pick(rng, chapter.cast) if chance(rng, 0.2) else None
        self.name_forms: dict[Character, str] = {}    # how each character is named here
        self.objects: list[Noun] = []                 # objects mentioned so far
        self.epithets: dict[Noun, str] = {}           # adjective an object was introduced with
        self.last: Character | None = None            # most recently named character
        others = [c for c in chapter.cast if c is not self.narrator]
        size = min(len(others), pick(rng, (2, 2, 3)))
        self.cast = [others.pop(count(rng, 0, len(others))) for _ in range(size)]  # who appears

    # ---- agreement -------------------------------------------------------------------------

    def verb(self, verb: Verb, subject: _Subject) -> str:
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

    def name(self, character: Character) -> str:
        """The character's name in the form this utterance uses for them (it rarely changes)."""
        self.last = character
        form = self.name_forms.get(character)
        if form is None or chance(self.rng, 0.15):
            form = (character.first, f"{character.title} {character.surname}",
                    f"{character.first} {character.surname}",
                    f"{pick(self.rng, EPITHETS)} {character.first}")[branch(self.rng, _NAME_FORM_WEIGHTS)]
            self.name_forms.setdefault(character, form)
        return form

    def character(self, *exclude: Character) -> Character:
        """Someone on stage in this utterance (else anyone in the chapter) not in ``exclude``."""
        cast = [c for c in self.cast if c not in exclude] or [
            c for c in self.chapter.cast if c not in exclude and c is not self.narrator]
        return pick(self.rng, cast or self.cast)

    def role(self) -> Noun:
        return pick(self.rng, self.chapter.topic.people)

    def subject(self) -> _Subject:
        """A subject: the narrator, a pronoun for the last person named, a name, or a role."""
        rng = self.rng
        kind = branch(rng, (6 if self.narrator else 0, 6 if self.last else 0, 72, 10, 6))
        if kind == 0:
            return _WE if chance(rng, 0.15) else _I
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
        if chance(rng, 0.25):
            return _Subject("THE " + role.plural, plural=True)
        return _Subject("THE " + role.sing, female=role.female)

    def person_object(self) -> str:
        kind = branch(self.rng, (10 if self.last else 0, 65, 25))
        if kind == 0:
            return self.last.object
        if kind == 1:
            return self.name(self.character(self.last))
        return "THE " + self.role().sing

    # ---- things and places -----------------------------------------------------------------

    def thing(self, verb: Verb | None = None) -> Noun:
        """A topic object (one the verb can take, if a topic verb is given): usually one already
        mentioned, else a new one."""
        allowed = self.chapter.topic.objects_of.get(verb) if verb is not None else None
        mentioned = self.objects if allowed is None else [o for o in self.objects if o in allowed]
        if mentioned and chance(self.rng, 0.5):
            return pick(self.rng, mentioned)
        noun = pick(self.rng, allowed or self.chapter.topic.things)
        if noun not in self.objects:
            self.objects.append(noun)
        return noun

    def adjective(self) -> str:
        if chance(self.rng, 0.6):
            return pick(self.rng, self.chapter.topic.adjectives)
        return pick(self.rng, ADJ)

    def described(self, noun: Noun, plural: bool) -> str:
        """The noun, with the adjective it was introduced with (or a first one) now and then."""
        word = noun.plural if plural else noun.sing
        epithet = self.epithets.get(noun)
        if epithet is None:
            kind = branch(self.rng, (55, 33, 12))  # none, one or two adjectives
            if kind == 0:
                return word
            epithet = self.adjective() if kind == 1 else f"{self.adjective()} {self.adjective()}"
            self.epithets[noun] = epithet
            return f"{epithet} {word}"
        return f"{epithet} {word}" if chance(self.rng, 0.6) else word

    def thing_phrase(self, owner: _Subject | None = None, plural: bool | None = None,
                     verb: Verb | None = None) -> str:
        """'THE TARRED ROPE', 'HER LANTERNS', 'THREE BARRELS', 'A COMPASS' ..."""
        rng = self.rng
        if plural is None:
            plural = chance(rng, 0.3)
        phrase = self.determined(self.described(self.thing(verb), plural), plural, owner)
        if chance(rng, 0.1):
            phrase += " AND " + self.determined(self.described(self.thing(verb), plural), plural, owner)
        return phrase

    def determined(self, words: str, plural: bool, owner: _Subject | None) -> str:
        """A determiner (or possessor) for an already described noun."""
        rng = self.rng
        kind = branch(rng, (20 if owner else 0, 14, 6, 6, 54))
        if kind == 0:
            return f"{owner.possessive} {words}"
        if kind == 1:
            return f"{self.name(self.character())}'S {words}"
        if kind == 2:
            return f"THE {words} OF {pick(rng, ('THE', 'THAT', 'A'))} {self.role().sing}"
        if kind == 3:
            return f"THE {words} {self.relative_clause()}"
        if plural:
            kind = branch(rng, (50, 15, 35))
            if kind == 0:
                return "THE " + words
            if kind == 1:
                return f"{number_words(pick(rng, (2, 2, 3, 3, 4, 5, 6, 7, 8, 10, 12, 20)))} {words}"
            return f"{pick(rng, PLURAL_DETERMINERS)} {words}"
        kind = branch(rng, (50, 28, 22))
        if kind == 0:
            return "THE " + words
        if kind == 1:
            return f"{article(words)} {words}"
        return f"{pick(rng, SINGULAR_DETERMINERS)} {words}"

    def relative_clause(self) -> str:
        """'WHICH JOHN HAD MENDED', 'THAT THE SAILORS HAVE FOUND' (narration tense)."""
        subject = self.subject()
        verb = self.topic_or_common_verb()
        return f"{pick(self.rng, ('WHICH', 'THAT'))} {subject.text} {self.have(subject)} {verb.participle}"

    def location(self) -> str:
        """'ON THE DECK', 'NEAR THE BARN', 'IN BRAMCHESTER' ..."""
        if chance(self.rng, 0.15):
            return f"{pick(self.rng, ('IN', 'AT', 'NEAR', 'OUTSIDE', 'BEYOND'))} {self.chapter.town}"
        place = pick(self.rng, self.chapter.topic.places)
        preposition = place.preposition if chance(self.rng, 0.5) else pick(self.rng, NEAR)
        return f"{preposition} THE {place.noun}"

    def destination(self) -> str:
        if chance(self.rng, 0.15):
            return f"{pick(self.rng, ('TO', 'TOWARDS', 'BACK TO', 'ALL THE WAY TO'))} {self.chapter.town}"
        place = pick(self.rng, self.chapter.topic.places)
        into = "INTO" if place.preposition == "IN" else "TO"
        return f"{pick(self.rng, (into, 'TO', 'TOWARDS', 'BACK TO'))} THE {place.noun}"

    def topic_or_common_verb(self) -> Verb:
        return pick(self.rng, self.chapter.topic.verbs if chance(self.rng, 0.8) else VERBS_THING)

    # ---- narrative sentences ---------------------------------------------------------------

    def narrative(self) -> str:
        kinds = (self.action, self.motion, self.description, self.there_was, self.when_clause,
                 self.thought, self.event, self.progressive, self.giving, self.numbers,
                 self.mood, self.perfect, self.social)
        return kinds[branch(self.rng, _NARRATIVE_WEIGHTS)]()

    def action(self) -> str:
        """SUBJECT VERBED OBJECT [LOCATION | ADVERB] [AND VERBED OBJECT]."""
        rng = self.rng
        subject = self.subject()
        verb = self.topic_or_common_verb()
        said = f"{pick(rng, MODALS)} {verb.base}" if chance(rng, 0.15) else self.verb(verb, subject)
        text = f"{subject.text} {said} {self.thing_phrase(subject, verb=verb)}"
        if chance(rng, 0.15):
            text = f"{pick(rng, TIME)} {text}"
        kind = branch(rng, (30, 15, 12, 43))
        if kind == 0:
            text += " " + self.location()
        elif kind == 1:
            text += " " + pick(rng, ADV)
        elif kind == 2:
            text += f" WITH {self.thing_phrase(subject)}"
        if chance(rng, 0.15):
            text += f" {pick(rng, ('FOR', 'WITH', 'BEFORE', 'WITHOUT'))} {self.person_object()}"
        if chance(rng, 0.3):
            verb = pick(rng, self.chapter.topic.verbs)
            text += f" AND {self.verb(verb, subject)} {self.thing_phrase(subject, verb=verb)}"
        return text

    def motion(self) -> str:
        rng = self.rng
        subject = self.subject()
        text = f"{subject.text} {self.verb(pick(rng, VERBS_MOTION), subject)} {self.destination()}"
        if chance(rng, 0.25):
            text += f" {pick(rng, ('WITH', 'AFTER', 'BEHIND', 'AHEAD OF'))} {self.person_object()}"
        kind = branch(rng, (40, 20, 40))
        if kind == 0:
            verb = pick(rng, self.chapter.topic.verbs)
            text += f" TO {verb.base} {self.thing_phrase(subject, verb=verb)}"
        elif kind == 1:
            text += " " + pick(rng, TIME)
        return text

    def description(self) -> str:
        """THE ROPES WERE OLD AND TARRED: the verb agrees with the subject's number."""
        rng = self.rng
        plural = chance(rng, 0.4)
        subject = _Subject("THE " + self.described(self.thing(), plural), plural=plural)
        text = f"{subject.text} {self.be(subject)}"
        kind = branch(rng, (40, 30, 30))
        if kind == 0:
            return f"{text} {self.adjective()} AND {self.adjective()}"
        if kind == 1:
            return f"{text} {pick(rng, ('VERY', 'RATHER', 'QUITE', 'TOO'))} {self.adjective()}"
        return f"{text} {self.adjective()}"

    def there_was(self) -> str:
        """THERE WERE THREE LANTERNS IN THE CABIN / THERE IS A COMPASS ON THE DECK."""
        rng = self.rng
        plural = chance(rng, 0.5)
        words = self.described(self.thing(), plural)
        phrase = (f"{number_words(pick(rng, (2, 3, 4, 5)))} {words}" if plural
                  else f"{article(words)} {words}")
        return f"THERE {self.be(_Subject('', plural=plural))} {phrase} {self.location()}"

    def when_clause(self) -> str:
        rng = self.rng
        first = self.subject()
        text = f"WHEN {first.text} {self.verb(pick(rng, VERBS_THING), first)} {self.thing_phrase(first)}"
        second = self.subject()
        text += f" {second.text} {self.verb(pick(rng, VERBS_INTRANSITIVE), second)}"
        return text + (" " + pick(rng, ADV) if chance(rng, 0.5) else "")

    def thought(self) -> str:
        rng = self.rng
        subject = self.subject()
        clause = self.action() if chance(rng, 0.5) else self.description()
        return f"{subject.text} {self.verb(pick(rng, THINK), subject)} THAT {clause}"

    def event(self) -> str:
        """A stock happening of the topic ('THE TIDE TURNED'); these are past-tense only."""
        rng = self.rng
        if not self.past:
            return self.action()
        text = pick(rng, self.chapter.topic.events)
        if chance(rng, 0.5):
            text += f" {pick(rng, ('AND', 'BUT', 'WHILE', 'AS'))} {self.action()}"
        return text

    def progressive(self) -> str:
        """SUBJECT WAS VERBING OBJECT LOCATION [WHEN SOMEONE CAME IN]."""
        rng = self.rng
        subject = self.subject()
        verb = pick(rng, self.chapter.topic.verbs)
        text = (f"{subject.text} {self.be(subject)} {verb.ing} {self.thing_phrase(subject, verb=verb)} "
                f"{self.location()}")
        if chance(rng, 0.5):
            other = self.subject()
            text += f" WHEN {other.text} {self.verb(pick(rng, VERBS_MOTION), other)} IN"
        return text

    def giving(self) -> str:
        rng = self.rng
        giver = self.subject()
        verb = self.verb(pick(rng, GIVING), giver)
        receiver = self.person_object()
        if chance(rng, 0.5):
            return f"{giver.text} {verb} {receiver} {self.thing_phrase(giver)}"
        return f"{giver.text} {verb} {self.thing_phrase(giver)} TO {receiver}"

    def numbers(self) -> str:
        rng = self.rng
        kind = branch(rng, (25, 20, 20, 35))
        if kind == 0:
            return f"IN THE YEAR {year_words(count(rng, 1600, 1900))} {self.action()}"
        if kind == 1:
            hour = number_words(count(rng, 1, 13))
            clock = pick(rng, (f"{hour} O'CLOCK", f"HALF PAST {hour}", f"A QUARTER TO {hour}"))
            subject = _Subject("IT")
            return (f"IT {self.be(subject)} {pick(rng, ('NEARLY', 'JUST', 'ALREADY', 'ABOUT'))} "
                    f"{clock} WHEN {self.motion()}")
        if kind == 2:
            who = self.character()
            subject = _Subject(self.name(who), female=who.female)
            return f"{subject.text} {self.be(subject)} {number_words(count(rng, 5, 80))} YEARS OLD"
        unit = pick(rng, UNITS)
        n = pick(rng, (1, 2, 3, 4, 5, 6, 10, 12, 20, 30, 40, 50, 100, 150, 300, 1000))
        if chance(rng, 0.4):
            n = count(rng, 2, 2000)
        amount = f"{number_words(n)} {unit.sing if n == 1 else unit.plural}"
        subject = self.subject()
        kind = branch(rng, (1, 1, 1))
        if kind == 0:
            return f"{subject.text} {self.be(subject)} {amount} FROM {self.chapter.town}"
        if kind == 1:
            return f"{subject.text} {self.verb(PAY, subject)} {amount} FOR {self.thing_phrase(subject)}"
        return f"{subject.text} {self.verb(WAIT, subject)} {amount} {self.location()}"

    def mood(self) -> str:
        rng = self.rng
        subject = self.subject()
        text = f"{subject.text} {self.be(subject)} {pick(rng, MOOD)}"
        if chance(rng, 0.5):
            text += f" {pick(rng, ('BECAUSE', 'FOR', 'SINCE'))} {self.action()}"
        return text

    def social(self) -> str:
        """SUBJECT THANKED MARY [LOCATION | ADVERB]."""
        rng = self.rng
        subject = self.subject()
        text = f"{subject.text} {self.verb(pick(rng, VERBS_PERSON), subject)} {self.person_object()}"
        kind = branch(rng, (30, 20, 50))
        if kind == 0:
            return f"{text} {self.location()}"
        return f"{text} {pick(rng, ADV)}" if kind == 1 else text

    def perfect(self) -> str:
        rng = self.rng
        subject = self.subject()
        verb = self.topic_or_common_verb()
        return (f"{subject.text} {self.have(subject)} {verb.participle} "
                f"{self.thing_phrase(subject, verb=verb)} "
                f"{pick(rng, TIME)}")

    # ---- dialogue (the quotes are in the present tense) ------------------------------------

    def dialogue(self) -> str:
        """A quoted clause with its speaker; a question gets 'ASKED' and often an answer."""
        rng = self.rng
        speaker = self.character()
        listener = self.character(speaker)
        if chance(rng, 0.45):
            question, answer = self.question(speaker, listener)
            text = self.attribute(question, speaker, pick(rng, ASK))
            if chance(rng, 0.6):
                text += " " + self.attribute(answer, listener, pick(rng, ANSWER))
            return text
        statement = self.statement(speaker, listener)
        if chance(rng, 0.2) and not statement.endswith(listener.first):
            statement += (" MY DEAR " if chance(rng, 0.3) else " ") + listener.first
        text = self.attribute(statement, speaker, pick(rng, SPEECH))
        if chance(rng, 0.15):
            text += f" TO {self.name(listener)}"
        return text

    def attribute(self, quote: str, speaker: Character, verb: Verb) -> str:
        """'<QUOTE> SAID JOHN', '<QUOTE> HE SAID' or 'JOHN SAID <QUOTE>' in narration tense."""
        rng = self.rng
        if self.last is speaker and chance(rng, 0.15):
            subject = _Subject(speaker.subject, female=speaker.female)
            pronoun = True
        else:
            subject = _Subject(self.name(speaker), female=speaker.female)
            pronoun = False
        said = self.verb(verb, subject)
        manner = " " + pick(rng, ADV) if chance(rng, 0.15) else ""
        if chance(rng, 0.25):
            return f"{subject.text} {said}{manner} {quote}"
        if pronoun:
            return f"{quote} {subject.text} {said}{manner}"
        return f"{quote} {said} {subject.text}{manner}"

    def question(self, speaker: Character, listener: Character) -> tuple[str, str]:
        """A question and a fitting answer that re-uses its object or person."""
        rng = self.rng
        verb = pick(rng, self.chapter.topic.verbs)  # drawn first so the noun suits it
        noun = self.thing(verb)
        kind = branch(rng, (30, 20, 20, 15, 15))
        if kind == 0:
            plural = chance(rng, 0.35)
            word = noun.plural if plural else noun.sing
            question = f"WHERE {'ARE' if plural else 'IS'} THE {word}"
            where = "THEY ARE" if plural else pick(rng, ("IT IS", f"THE {word} IS"))
            answer = f"{where} {self.location()}"
        elif kind == 1:
            question = f"HAVE YOU SEEN THE {noun.sing}"
            answer = pick(rng, (f"YES I SAW IT {self.location()}", f"NO I HAVE NOT SEEN THE {noun.sing}",
                                f"THE {noun.sing} IS {self.location()}"))
        elif kind == 2:
            other = self.character(speaker, listener)
            who = self.name(other)
            pronoun = other.subject
            question = f"DID {who} {verb.base} THE {noun.sing}"
            answer = pick(rng, (f"YES {pronoun} {verb.past} IT {pick(rng, TIME)}",
                                f"NO {pronoun} DID NOT", f"I THINK {pronoun} DID"))
        elif kind == 3:
            question = f"HOW MANY {noun.plural} ARE THERE {self.location()}"
            answer = f"THERE ARE {number_words(count(rng, 2, 40))} {noun.plural}"
        else:
            question = f"WHAT WILL YOU DO WITH THE {noun.sing} {self.name(listener)}"
            answer = f"I SHALL {verb.base} IT {pick(rng, FUTURE)}"
        return question, answer

    def statement(self, speaker: Character, listener: Character) -> str:
        rng = self.rng
        kind = branch(rng, (15, 15, 12, 12, 12, 8, 8, 8, 10))
        if kind == 0:
            return pick(rng, INTERJECTION) + (" " + self.name(listener) if chance(rng, 0.4) else "")
        if kind == 1:
            verb = pick(rng, self.chapter.topic.verbs)
            return f"YOU MUST {verb.base} {self.thing_phrase(_YOU, verb=verb)} {pick(rng, FUTURE)}"
        if kind == 2:
            verb = self.topic_or_common_verb()
            return f"I HAVE {verb.participle} {self.thing_phrase(_I, verb=verb)} {self.location()}"
        if kind == 3:
            who = self.character()
            verb = pick(rng, self.chapter.topic.verbs)
            return f"{self.name(who)} {verb.third} THE {self.thing(verb).plural} {pick(rng, HABIT)}"
        if kind == 4:
            plural = chance(rng, 0.4)
            return (f"THE {self.described(self.thing(), plural)} {'ARE' if plural else 'IS'} "
                    f"{pick(rng, ('VERY', 'TOO', 'QUITE', 'NOT'))} {self.adjective()}")
        if kind == 5:
            return f"COME {pick(rng, ('HERE', 'WITH ME', 'QUICKLY', 'AND SEE'))} {self.name(listener)}"
        if kind == 6:
            miles = number_words(pick(rng, (2, 3, 4, 5, 7, 10, 12, 15, 20, 30, 50)))
            return f"IT'S {miles} MILES TO {self.chapter.town}"
        if kind == 7:
            verb = pick(rng, self.chapter.topic.verbs)
            return f"WE SHALL {verb.base} {self.thing_phrase(_WE, verb=verb)} {pick(rng, FUTURE)}"
        other = self.character(speaker, listener)
        feeling = pick(rng, ("AND I TRUST", "AND I LOVE", "BUT I FEAR", "AND I PITY"))
        return f"{self.name(other)} IS MY {pick(rng, RELATION)} {feeling} {other.object}"

    # ---- headings --------------------------------------------------------------------------

    def heading(self) -> str:
        rng = self.rng
        kind = branch(rng, (75, 15, 10))
        if kind == 0:
            text = f"CHAPTER {number_words(count(rng, 1, 61))}"
        elif kind == 1:
            text = f"CHAPTER THE {pick(rng, ORDINALS)}"
        else:
            text = f"BOOK {number_words(count(rng, 1, 7))}"
        kind = branch(rng, (25, 25, 20, 15, 15))
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
