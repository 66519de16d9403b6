"""What the student reads: the feedback's sections, quoted text, the handin's notes (cut the same
way on every channel), the extraction's summary, what an incomplete handin lacks, and the scores'
summary."""
from __future__ import annotations

from autograder.judging.scoring import rubric
from autograder.judging.intake.safe_tar import Extraction
from hw4lib.handin_format import (CONFIG_FILE, HANDIN_DIR, HANDIN_TAR, MYTORCH_DIR,
                                  STATE_DICT_FILE, is_mytorch_source)

# Every channel (Autolab's feedback, --results-json, Gradescope's results.json, the regrade's
# feedback files) shows the handin notes through summarised(): the first MAX_NOTES, each cut to
# MAX_NOTE_CHARS, then a count, so that no handin, however many odd members it holds, makes a
# report much larger than an honest one (the tests hold every channel under 1 MiB).
MAX_NOTES = 12
MAX_NOTE_CHARS = 400


def section(title: str) -> None:
    print(f"\n== {title} ==", flush=True)  # pragma: no mutate (equivalent: flushing orders the text with a child's, never changes it)


def indent(text: str, prefix: str = "    | ") -> str:
    """Text from elsewhere (child output, messages), each line prefixed so that it cannot be
    mistaken for the grader's own lines."""
    if not text.strip():
        return prefix + "(no output)"
    return "\n".join(prefix + line for line in text.rstrip("\n").splitlines())


def summarised(notes: list[str]) -> list[str]:
    """The notes every channel shows: the first MAX_NOTES (each at most MAX_NOTE_CHARS), then one
    line counting the rest."""
    shown = [note if len(note) <= MAX_NOTE_CHARS else note[:MAX_NOTE_CHARS - 3] + "..."
             for note in notes[:MAX_NOTES]]
    if len(notes) > MAX_NOTES:
        shown.append(f"... and {len(notes) - MAX_NOTES} more notes like these: the archive should "
                     f"hold only what `make handin` packs")
    return shown


def report_extraction(handin: Extraction) -> None:
    mytorch = sorted(name for name in handin.files if is_mytorch_source(name))
    others = sorted(name for name in handin.files if not is_mytorch_source(name))
    print(f"  extracted {len(mytorch)} mytorch files and: {', '.join(others) or 'nothing else'}")
    for note in summarised(handin.notes):
        print(f"  note: {note}")


def gradable_problem(handin: Extraction) -> str:
    """What a handin lacks to be graded in full, what it held instead and how to pack it; '' when
    it has a mytorch and a model."""
    missing = ([] if any(is_mytorch_source(name) for name in handin.files)
               else [f"{MYTORCH_DIR}/ .py files"])
    missing += [name for name in (CONFIG_FILE, STATE_DICT_FILE) if name not in handin.files]
    if not missing:
        return ""
    skipped = sum("; skipped" in note for note in handin.notes)
    found = (f"{len(handin.files)} files the grader uses ({', '.join(sorted(handin.files)[:5])}"
             f"{', ...' if len(handin.files) > 5 else ''})" if handin.files else "no file the "
             "grader uses")
    if skipped:
        found += f" and {skipped} it skipped (see the notes above)"
    return (f"Not a complete handin: it has no {', no '.join(missing)}; it holds {found}. Run "
            f"`make handin` after training and hand in the {HANDIN_TAR} it writes, unchanged: it "
            f"holds {HANDIN_DIR}/{MYTORCH_DIR}/, {HANDIN_DIR}/{CONFIG_FILE} and "
            f"{HANDIN_DIR}/{STATE_DICT_FILE} (a tar of the run folder, or of files outside "
            f"{HANDIN_DIR}/, is not a handin).")


def print_summary(scores: dict[str, float]) -> None:
    section("Summary")
    for category, points in rubric.RUBRIC.items():
        print(f"  {category:<28s} {scores[category]:>6g}/{points}")
    total = round(sum(scores.values()), 2)
    print(f"  {'Total':<28s} {total:>6g}/{sum(rubric.RUBRIC.values())}", flush=True)  # pragma: no mutate (equivalent: flushing orders the text with a child's, never changes it)
