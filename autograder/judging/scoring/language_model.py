"""Step 3 of the judge (:func:`grade_lm`): grade the language model. The model child rebuilds the
handed-in weights and measures per-character perplexity on the hidden test set (the only number
that counts); the student's own test_metrics.json is echoed beside what the same weights give on
the test transcripts its run card names."""
from __future__ import annotations

import math
import re
import secrets
import time
from pathlib import Path

from autograder.judging.isolation import parked_child, processes
from autograder.judging.scoring import model_child, report as grading_report, rubric
from autograder.judging.isolation.autograder_paths import HIDDEN_SET, PUBLIC_SET
from autograder.judging.scoring.feedback import indent, section
from autograder.judging.scoring.integrity import (card_disagreements, card_loss_problems,
                                                  has_card_losses, integrity_flags, read_card)
from autograder.judging.scoring.lm_diagnosis import lm_hint
from autograder.judging.intake.safe_tar import Extraction
from hw4lib.file_io import read_untrusted_json
from hw4lib.handin_format import (CONFIG_FILE, METRICS_FILE, REPORTED_TOLERANCE, RUN_CARD_FILE,
                                  STATE_DICT_FILE, card_losses, card_perplexity, finite_number)


def grade_lm(handin: Extraction, work: Path, thresholds: dict, timeout: float,
             scores: dict[str, float], report: grading_report.GradingReport,
             parked: parked_child.ParkedChild | None) -> None:
    """Step 3 whole: score the language model against the build's ``thresholds`` (the rubric's
    when absent) into ``scores``, then close the parked child; print its section, and record the
    result, its seconds and the integrity flags in ``report``."""
    section(f"{rubric.LM_CATEGORY} ({rubric.LM_POINTS} points)")
    started = time.monotonic()
    scores[rubric.LM_CATEGORY], lm = grade_language_model(
        handin, work, timeout,
        thresholds.get("full_marks_ppl", rubric.FULL_MARKS_PPL),
        thresholds.get("zero_marks_ppl", rubric.ZERO_MARKS_PPL), parked)
    if parked is not None:
        parked.close()
    report.lm = grading_report.LanguageModelResult(**lm)
    report.seconds[rubric.LM_CATEGORY] = round(time.monotonic() - started, 2)
    if report.lm.timed_out:
        report.status = grading_report.Status.TIMEOUT
    report.flags = integrity_flags(handin, lm)
    if report.flags:  # the facts go to the staff's channels (details.json), never to students
        print(f"  note: {len(report.flags)} remark(s) on how this handin's files match its "
              f"{RUN_CARD_FILE} are recorded for the course staff; no score depends on them")


def grade_language_model(handin: Extraction, work: Path, timeout: float,
                         full_marks_ppl: float, zero_marks_ppl: float,
                         parked: parked_child.ParkedChild | None = None) -> tuple[float, dict]:
    """Rebuild and evaluate the handed-in model in a child process; return (points, details).
    The child is ``parked`` (from :func:`autograder.judging.scoring.model_child.park_model_child`)
    when given, else a fresh one (:func:`autograder.judging.scoring.model_child.launch`).

    The student sees the perplexity to 2 decimals, the points and a likely cause; the details
    (for details.json and the staff) hold the full measurement and what it was compared with.
    """
    missing = [name for name in (CONFIG_FILE, STATE_DICT_FILE) if name not in handin.files]
    if missing:
        message = (f"the handin has no {' and no '.join(missing)}: run `make handin` after "
                   f"training")
        print(f"  {message}. 0 points")
        return 0, {"message": message}
    result_path = work / "lm" / "result.json"
    reported = self_reported_perplexity(handin)
    card = read_card(handin)
    compare, compare_note = compare_arguments(reported, card)
    arguments = ["--handin", str(work / "handin"), "--hidden-set", str(HIDDEN_SET),
                 "--out", str(result_path), *compare]
    run = model_child.launch(arguments, work, timeout, parked)
    print(indent(run.output))
    if run.timed_out:
        message = f"evaluating the model took more than the {timeout:g} s limit"
        print(f"  {message}. 0 points")
        return 0, {"message": message, "timed_out": True}
    result = read_untrusted_json(result_path)
    perplexity = result.get("perplexity_char") if isinstance(result, dict) else None
    if run.returncode != 0 or not isinstance(perplexity, float):
        error = result.get("error") if isinstance(result, dict) else None
        quoted = processes.printable(str(error))[:processes.MAX_ERROR_CHARS]
        message = (f"the model could not be evaluated: {quoted}" if error
                   else "the model could not be evaluated (see above)")
        print(f"  {message}. 0 points")
        return 0, {"message": message}
    points = rubric.lm_score(perplexity, full_marks_ppl, zero_marks_ppl)
    # Two decimals: more of the hidden set's perplexity, submission after submission, would tell
    # the hidden text's statistics.
    message = (f"per-character perplexity on the hidden test set: {perplexity:.2f} "
               f"(full marks <= {full_marks_ppl}, none >= {zero_marks_ppl}, linear in between) "
               f"-> {points}/{rubric.LM_POINTS}")
    print(f"  {message}   [{run.seconds:.1f} s]")
    compared = result.get("compared_perplexity_char")
    compared = compared if isinstance(compared, float) else None
    compare_note = compare_note or str(result.get("compare_note") or "")
    sample = result.get("compared_sample") if isinstance(result.get("compared_sample"),
                                                         dict) else None
    if sample is not None:
        compared, compare_note = sampled_comparison(card, sample)
    elif compared is not None:
        compare_note = (f"{RUN_CARD_FILE}'s per-transcript losses are not as make handin writes "
                        f"them" if has_card_losses(card) else
                        f"{RUN_CARD_FILE} has no per-transcript losses (an older make handin)"
                        ) + ": the whole test set it names was re-measured"
    report_self_reported_metrics(reported, compared, compare_note,
                                 "" if sample is None else
                                 f" (the sum of {RUN_CARD_FILE}'s losses of each transcript; "
                                 f"{len(sample['indices'])} of them re-measured here agree)")
    details = {"message": message, "perplexity_char": perplexity, "seconds": round(run.seconds, 3),
               "phase_seconds": result.get("phase_seconds"),
               "reported_perplexity_char": reported, "compared_perplexity_char": compared,
               "compare_note": compare_note, "compared_sample": sample,
               "num_parameters": result.get("num_parameters"),
               "token_type": result.get("token_type"),
               "state_dict_sha256": result.get("state_dict_sha256"),
               "config_sha256": result.get("config_sha256"),
               "weights_fingerprint": result.get("weights_fingerprint")}
    disagreements = card_disagreements(card, details)
    hint = lm_hint(perplexity, full_marks_ppl, reported, compared,
                   card.get("val_perplexity_char") if isinstance(card, dict) else None,
                   REPORTED_TOLERANCE, bool(disagreements), result.get("dropout_active"))
    if hint:
        print(indent(hint, "  likely cause: "))
    return points, {**details, "hint": hint}


def compare_arguments(reported: float | None, card) -> tuple[list[str], str]:
    """(the model child's arguments that also measure the test set the run card names, "") or
    ([], why nothing is compared). The card comes from the handin: only a positive count and a
    sha256 in hex reach the child's command line. A card that records each transcript's loss
    gets a fresh seed (``secrets``) on every call: the child measures only the transcripts it
    draws; an older card, the whole set."""
    test_set = card.get("test_set") if isinstance(card, dict) else None
    if reported is None:
        return [], f"{METRICS_FILE} has no usable perplexity_char"
    if not (isinstance(test_set, dict) and type(test_set.get("transcripts")) is int
            and test_set["transcripts"] > 0 and isinstance(test_set.get("sha256"), str)
            and re.fullmatch(r"[0-9a-f]{64}", test_set["sha256"])):
        return [], f"{RUN_CARD_FILE} does not name the test set {METRICS_FILE} measured"
    if not PUBLIC_SET.is_dir():
        return [], "this autograder has no copy of the public test split"
    sample = ["--sample-seed", str(secrets.randbits(63))] if card_losses(card) is not None else []
    return ["--public-set", str(PUBLIC_SET), "--compare", str(test_set["transcripts"]),
            test_set["sha256"], *sample], ""


def sampled_comparison(card, sample: dict) -> tuple[float | None, str]:
    """(the perplexity the card's per-transcript losses give on the set the child verified, "")
    when they add up to the card's total and every transcript the child re-measured agrees with
    them; else (None, why they are not what these weights give)."""
    problems = card_loss_problems(card, sample)
    if problems:
        return None, (f"{RUN_CARD_FILE}'s per-transcript losses disagree with these weights "
                      f"(the staff have the details)")
    nll, _, _ = card_losses(card)
    return card_perplexity(math.fsum(nll), sample["characters"]), ""


def self_reported_perplexity(handin: Extraction) -> float | None:
    """The perplexity_char of the handin's own test_metrics.json, when usable."""
    path = handin.files.get(METRICS_FILE)
    reported = read_untrusted_json(path) if path is not None else None
    value = reported.get("perplexity_char") if isinstance(reported, dict) else None
    return finite_number(value)


def report_self_reported_metrics(reported: float | None, compared: float | None,
                                 note: str, how: str = "") -> None:
    """Echo the student's own test_metrics.json next to what the weights give on the same test
    transcripts (the public split's, not the hidden set's; ``how``: how that was known, after the
    number); it never counts."""
    if reported is None:
        print("  (no usable perplexity_char in test_metrics.json; only the measurement above counts)")
        return
    measured = (f"; these weights give {compared:.4f} on the same transcripts{how}"
                if compared is not None else f"; not compared with these weights: {note}")
    print(f"  (your test_metrics.json reports {reported:.4f}{measured}; only the measurement above "
          f"counts)")
