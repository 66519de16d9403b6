"""The integrity flags: facts for the course staff, each with both numbers, where a handin's files,
its run_card.json, its test_metrics.json and what the model child measured disagree. No score
depends on them, and nothing is flagged that honest work packed by make handin can show."""
from __future__ import annotations

import math

from autograder.judging.intake.safe_tar import Extraction
from hw4lib.file_io import read_untrusted_json
# REPORTED_TOLERANCE: a reported test perplexity this far (relative) from the run card's, or from
# what the weights give on the test transcripts it was measured on, is flagged for the staff.
from hw4lib.handin_format import (CONFIG_FILE, METRICS_FILE, REPORTED_TOLERANCE, RUN_CARD_FILE,
                                  STATE_DICT_FILE, card_losses, card_perplexity, finite_number)

# How many disagreeing transcripts a flag names one by one (then a count).
MAX_LISTED_TRANSCRIPTS = 5
# Whatever the run card says, a report this far (relative) below the hidden set's measurement of the
# same weights is flagged: ten honest runs measured the hidden set at most 12.4% above their own
# test_metrics.json (a test split cut to 1% to 4% of its transcripts), at most 1.4% above the whole
# public test split; twice the largest gap (docs/results.md, "Reported versus hidden perplexity").
HIDDEN_MARGIN = 0.25


def integrity_flags(handin: Extraction, lm: dict) -> list[str]:
    """Facts for the course staff, each with both numbers: where the handin disagrees with its
    run_card.json (replaced weights or config, metrics edited after packing, per-transcript losses
    that are not what the weights give on the transcripts re-measured) and where
    test_metrics.json is more than REPORTED_TOLERANCE from what the weights give on the very
    transcripts it measured (re-measured whole for an older card, else the card's per-transcript
    losses summed), and, whatever the card says, where test_metrics.json is more than
    HIDDEN_MARGIN below the hidden set's measurement. Nothing is flagged that honest work packed by
    make handin can show: a report that cannot be compared like with like is a note
    (``compare_note``), not a flag."""
    if not handin.files:
        return []
    hidden = below_hidden_set(lm)
    card = read_card(handin)
    if not isinstance(card, dict):
        return [f"no readable {RUN_CARD_FILE}: the handin was not packed by make handin", *hidden]
    flags = card_disagreements(card, lm) + hidden
    test_set = card.get("test_set") if isinstance(card.get("test_set"), dict) else {}
    where = (f"on the same {test_set.get('transcripts')} transcripts (split "
             f"{short(test_set.get('split'))}, subset {short(test_set.get('subset'))})")
    reported, compared = lm.get("reported_perplexity_char"), lm.get("compared_perplexity_char")
    sample = lm.get("compared_sample")
    if isinstance(sample, dict):
        problems = card_loss_problems(card, sample)
        flags += problems
        found = card_losses(card)
        if isinstance(reported, float) and found is not None:
            carded = card_perplexity(math.fsum(found[0]), sample["characters"])
            source = (f"these weights give {carded:.4f} {where} (the sum of {RUN_CARD_FILE}'s "
                      f"per-transcript losses; the {len(sample['indices'])} of them re-measured "
                      f"here agree)" if not problems else
                      f"{RUN_CARD_FILE}'s per-transcript losses give {carded:.4f} {where}")
            if not close(reported, carded):
                flags.append(f"{METRICS_FILE} reports a test perplexity of {reported:.4f}; "
                             f"{source}: {abs(reported - carded) / carded:.1%} apart, more than "
                             f"{REPORTED_TOLERANCE:.0%}")
    elif has_card_losses(card) and card_losses(card) is None:
        flags += card_loss_problems(card, {})  # the one fact: they are unreadable
    if sample is None and isinstance(reported, float) and isinstance(compared, float) and not close(
            reported, compared):
        flags.append(f"{METRICS_FILE} reports a test perplexity of {reported:.4f}; these weights "
                     f"give {compared:.4f} {where}: {abs(reported - compared) / compared:.1%}"
                     f" apart, more than {REPORTED_TOLERANCE:.0%}")
    return flags


def read_card(handin: Extraction):
    """The parsed run_card.json of the handin, or None."""
    path = handin.files.get(RUN_CARD_FILE)
    return read_untrusted_json(path) if path is not None else None


def card_disagreements(card, lm: dict) -> list[str]:
    """Facts where the handin's files differ from the run_card.json make handin wrote, each with
    both values: the weights, the config, the metrics. A handin with none is consistent."""
    if not isinstance(card, dict):
        return []
    found = []
    for key, name, what in (("state_dict_sha256", STATE_DICT_FILE, "sha256"),
                            ("config_sha256", CONFIG_FILE, "model and tokenizer digest")):
        if lm.get(key) and card.get(key) != lm[key]:
            found.append(f"{name}'s {what} is {short(lm[key])}, {RUN_CARD_FILE} records "
                         f"{short(card.get(key))}: not the file make handin packed")
    reported, carded = lm.get("reported_perplexity_char"), finite_number(
        card.get("test_perplexity_char"))
    if reported is not None and carded is not None and not close(reported, carded):
        found.append(f"{METRICS_FILE} reports a test perplexity of {reported:.4f}, {RUN_CARD_FILE} "
                     f"{carded:.4f}: the metrics changed after packing")
    return found


def has_card_losses(card) -> bool:
    """True when the card's test_set carries any of the per-transcript fields make handin writes
    (well formed or not)."""
    test_set = card.get("test_set") if isinstance(card, dict) else None
    return isinstance(test_set, dict) and any(
        key in test_set for key in ("transcript_nll", "transcript_tokens", "total_nll"))


def card_loss_problems(card, sample: dict) -> list[str]:
    """Facts, each with both numbers, where the card's per-transcript losses are not what the
    weights give: unreadable, not adding up to their total, or a re-measured transcript of the
    child's ``sample`` more than REPORTED_TOLERANCE apart in per-character perplexity (or with
    another token count). [] when they agree."""
    found = card_losses(card)
    if found is None:
        return [f"{RUN_CARD_FILE}'s per-transcript losses are not one finite non-negative loss and "
                f"one token count per transcript it counts: not as make handin writes them"]
    nll, tokens, total = found
    problems = []
    if abs(math.fsum(nll) - total) > 1e-9 * max(1.0, abs(total)):
        problems.append(f"{RUN_CARD_FILE}'s per-transcript losses add up to "
                        f"{math.fsum(nll):.6g} nats, its total_nll is {total:.6g} (make handin "
                        f"writes their sum)")
    disagree = []
    for index, name, measured, count, chars in zip(sample["indices"], sample["names"],
                                                   sample["nll"], sample["tokens"],
                                                   sample["chars"]):
        gap = (nll[index] - measured) / max(chars, 1)  # an empty transcript still has its [EOS]
        apart = abs(math.expm1(gap)) if gap < 700 else math.inf
        if apart > REPORTED_TOLERANCE or tokens[index] != count:
            disagree.append(f"#{index} {name}: {nll[index]:.6g} nats over {tokens[index]} tokens "
                            f"in {RUN_CARD_FILE}, these weights {measured:.6g} over {count} "
                            f"({apart:.1%} apart in per-character perplexity)")
    if disagree:
        listed = "; ".join(disagree[:MAX_LISTED_TRANSCRIPTS])
        more = len(disagree) - MAX_LISTED_TRANSCRIPTS
        problems.append(f"{len(disagree)} of the {len(sample['indices'])} test transcripts "
                        f"re-measured here (a fresh random sample of {len(sample['drawn'])} of the "
                        f"{sample['transcripts']} {RUN_CARD_FILE} records, seed {sample['seed']}, "
                        f"and the {len(sample['lowest'])} whose recorded loss per character is "
                        f"lowest) disagree with it by more than {REPORTED_TOLERANCE:.0%}: {listed}"
                        + (f"; and {more} more" if more > 0 else ""))
    return problems


def below_hidden_set(lm: dict) -> list[str]:
    """[the fact] when test_metrics.json reports a perplexity more than HIDDEN_MARGIN below what
    the same weights give on the hidden set, whatever the run card says; else []. The hidden-set
    number keeps the two decimals the student's feedback shows."""
    reported, measured = lm.get("reported_perplexity_char"), lm.get("perplexity_char")
    if not (isinstance(reported, float) and isinstance(measured, float) and reported > 0
            and measured > reported * (1 + HIDDEN_MARGIN)):
        return []
    return [f"{METRICS_FILE} reports a test perplexity of {reported:.4f}; these weights give "
            f"{measured:.2f} on the hidden test set, {measured / reported - 1:.0%} above it "
            f"(honest runs: at most {HIDDEN_MARGIN:.0%} above their report)"]


def close(reported: float, measured: float) -> bool:
    """Within REPORTED_TOLERANCE (relative to ``measured``)."""
    return abs(reported - measured) <= REPORTED_TOLERANCE * abs(measured)


def short(value) -> str:
    """A value from the handin, quoted short (it could be anything)."""
    text = repr(value)
    return text if len(text) <= 20 else text[:17] + "..."
