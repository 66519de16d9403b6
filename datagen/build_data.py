"""Build the homework's data folder: ``make data`` runs this.

    python -m datagen.build_data --out hw4_data/hw4p1_data --seed 0
    python -m datagen.build_data --out hw4_data/hw4p1_data --librispeech /path/to/LibriSpeech
    python -m datagen.build_data --out hw4_data/hw4p1_data --text book1.txt book2.txt
    python -m datagen.build_data --out hw4_data/hw4p1_data --seed 0 --if-stale   # make train

Writes ``<out>/{train,val,test}/<utterance-id>.npy`` (one transcript per file, a 1-d numpy array
of single characters), ``<out>/DATA_CARD.md`` (counts, lengths, characters, every change and
drop, n-gram baselines) and last the marker ``<out>/.complete`` (JSON: the source, the seed and,
for generated data, the fingerprint of the generator). Everything is written into a temporary
sibling folder that replaces ``<out>`` only once complete, so an interrupted build never looks
finished. With ``--if-stale`` nothing is built when ``<out>`` holds generated data of this seed
from this version of the generator, or data built from real text (never overwritten that way).

Sources:
* default: the embedded generator (``datagen.corpus``): train ~2.2 M characters, val and
  test ~100 k each, from streams seeded by ``--seed``; val and test leave out any utterance text
  of an earlier split.
* ``--librispeech PATH``: every ``*.trans.txt`` under PATH (any subsets), lines
  ``<utt-id> <TEXT>``; ``--text FILE ...``: one utterance per line. Both may be combined. The text
  is normalised to the LibriSpeech character set, then split by ``--seed`` into train/val/test;
  no text appears in two splits.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import random
import re
import shutil
import sys
import tempfile
import time
import unicodedata
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

import numpy as np
from tqdm import tqdm

from datagen.corpus import ALPHABET, GENERATOR_MODULES, MAX_CHARS, generate_chapters
from datagen.ngram import CharNgramLM
from datagen.numbers import number_words
from datagen.vocabulary import LEXICON_DIR
from hw4lib.grading_numbers import FULL_MARKS_PPL

SPLITS = ("train", "val", "test")
DEFAULT_SIZES = {"train": 2_200_000, "val": 100_000, "test": 100_000}  # characters per split
NGRAM_ORDERS = (1, 3, 5)
_ID_BASE = {"train": 1000, "val": 5000, "test": 7000}  # speaker-id range of each generated split
_APOSTROPHES = "\u2018\u2019\u02bc\u0060\u00b4\u2032"
_DASHES = "-\u2010\u2011\u2012\u2013\u2014\u2015_/"
DIGIT_RUNS = ("digit runs (0-9)", "number words")  # how the card reports spelled-out numbers
MARKER = ".complete"  # written last; what the folder was built from (JSON)


@dataclass
class Utterance:
    id: str
    text: str


@dataclass
class Provenance:
    """What the data card reports about where the text came from and what was done to it."""
    source: str
    changes: Counter = field(default_factory=Counter)   # (from, to) -> occurrences
    changed_utterances: int = 0
    drops: Counter = field(default_factory=Counter)     # reason -> utterances dropped
    examples: dict[str, list[str]] = field(default_factory=dict)  # reason -> first few ids

    def drop(self, reason: str, utterance_id: str | None = None, count: int = 1) -> None:
        self.drops[reason] += count
        if utterance_id is not None and len(self.examples.setdefault(reason, [])) < 5:
            self.examples[reason].append(utterance_id)


# ---- normalisation --------------------------------------------------------------------------


def _spell_digits(match: re.Match) -> str:
    """'1842' -> ' ONE THOUSAND EIGHT HUNDRED AND FORTY TWO '; long or 0-led runs digit by digit."""
    digits = match.group(0)
    if len(digits) <= 6 and not (len(digits) > 1 and digits.startswith("0")):
        return " " + number_words(int(digits)) + " "
    return " " + " ".join(number_words(int(d)) for d in digits) + " "


def normalise(raw: str) -> tuple[str, Counter]:
    """Map ``raw`` onto ALPHABET the way LibriSpeech transcripts look.

    Upper-cases letters (accents stripped), maps curly quotes and similar marks to an apostrophe,
    spells out digit runs as words, turns every other character into a space, then collapses
    whitespace and removes apostrophes that stand alone. Returns (text, changes) where changes
    counts each (from, to) replacement; ``to`` is '' for a removal.
    """
    changes: Counter = Counter()
    runs = len(re.findall(r"\d+", raw))
    if runs:
        changes[DIGIT_RUNS] += runs
    spelled = re.sub(r"\d+", _spell_digits, raw)
    out = []
    for char in spelled:
        if char in ALPHABET:
            out.append(char)
            continue
        if char in _APOSTROPHES:
            mapped = "'"
        elif char.isspace() or char in _DASHES:
            mapped = " "
        else:
            base = "".join(c for c in unicodedata.normalize("NFKD", char)
                           if not unicodedata.combining(c)).upper()
            mapped = base if base and all("A" <= c <= "Z" for c in base) else " "
        changes[(char, mapped)] += 1
        out.append(mapped)
    spaced = "".join(out)
    words = []
    for word in spaced.split():
        if word.strip("'"):
            words.append(word)
        else:
            changes[(word, "")] += 1
    text = " ".join(words)
    extra_spaces = spaced.count(" ") - text.count(" ")
    if extra_spaces:
        changes[(" ", "")] += extra_spaces  # runs of spaces collapsed, ends stripped
    return text, changes


def normalise_all(items: Sequence[Utterance], provenance: Provenance) -> list[Utterance]:
    """Normalise every utterance; record changes and drop (with a reason) what cannot be kept."""
    kept = []
    for item in items:
        text, changes = normalise(item.text)
        if changes:
            provenance.changes.update(changes)
            provenance.changed_utterances += 1
        if not text:
            provenance.drop("empty after normalisation", item.id)
        elif len(text) > MAX_CHARS:
            provenance.drop(f"longer than {MAX_CHARS} characters", item.id)
        else:
            kept.append(Utterance(item.id, text))
    return kept


# ---- reading real text ----------------------------------------------------------------------


def read_librispeech(root: Path) -> list[Utterance]:
    """Every line of every ``*.trans.txt`` under ``root``, as (utterance id, raw text)."""
    if not root.exists():
        raise FileNotFoundError(
            f"LibriSpeech path {root} does not exist. Pass the folder that holds the subsets "
            "(e.g. .../LibriSpeech containing train-clean-100/), as in make data LIBRISPEECH=/path")
    files = sorted(root.rglob("*.trans.txt"))
    if not files:
        raise FileNotFoundError(
            f"No *.trans.txt files under {root}. LibriSpeech keeps one per chapter, e.g. "
            "train-clean-100/103/1240/103-1240.trans.txt; point --librispeech at a folder above them.")
    items = []
    for path in files:
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
            if not line.strip():
                continue
            utterance_id, _, text = line.strip().partition(" ")
            if not re.fullmatch(r"\d+-\d+-\d+", utterance_id):
                raise ValueError(f"{path}:{number}: expected '<speaker>-<chapter>-<utterance> <TEXT>' "
                                 f"as in LibriSpeech, got {line!r}")
            items.append(Utterance(utterance_id, text))
    return items


def read_text_files(paths: Sequence[Path], provenance: Provenance) -> list[Utterance]:
    """One utterance per non-blank line; ids '<file number>-<block>-<line>' in LibriSpeech shape."""
    items = []
    for file_number, path in enumerate(paths, start=1):
        if not path.is_file():
            raise FileNotFoundError(f"--text file {path} does not exist (give plain-text files, "
                                    "one utterance per line)")
        lines = path.read_text(encoding="utf-8").splitlines()
        if not any(line.strip() for line in lines):
            raise ValueError(f"--text file {path} has no text: write one utterance per line")
        for index, line in enumerate(lines):
            utterance_id = f"{file_number:04d}-{index // 10000:06d}-{index % 10000:04d}"
            if line.strip():
                items.append(Utterance(utterance_id, line))
            else:
                provenance.drop("blank line in a --text file", utterance_id)
    return items


def split_real(items: Sequence[Utterance], seed: int, val_fraction: float,
               test_fraction: float) -> dict[str, list[Utterance]]:
    """Shuffle by ``seed`` and cut into test, val and train (at least one utterance in each)."""
    if len(items) < 3:
        raise ValueError(f"only {len(items)} usable utterances: need at least 3 to make "
                         "train, val and test splits")
    ids = [item.id for item in items]
    if len(set(ids)) != len(ids):
        duplicate = next(i for i, count in Counter(ids).items() if count > 1)
        raise ValueError(f"utterance id {duplicate} occurs twice in the input")
    order = sorted(items, key=lambda item: item.id)
    random.Random(f"hw4p1-split/{seed}").shuffle(order)
    n_test = max(1, round(len(order) * test_fraction))
    n_val = max(1, round(len(order) * val_fraction))
    if n_test + n_val >= len(order):
        raise ValueError(f"val and test fractions leave no training data from {len(order)} utterances")
    return {"test": order[:n_test], "val": order[n_test:n_test + n_val],
            "train": order[n_test + n_val:]}


def dedupe_across(splits: dict[str, list[Utterance]], provenance: Provenance) -> None:
    """Drop from val and test any text already in an earlier split (train, then val)."""
    seen = {item.text for item in splits["train"]}
    for name in ("val", "test"):
        kept = []
        for item in splits[name]:
            if item.text in seen:
                provenance.drop(f"text already in an earlier split (removed from {name})", item.id)
            else:
                kept.append(item)
        splits[name] = kept
        seen.update(item.text for item in kept)


# ---- the generated corpus -------------------------------------------------------------------


def generated_splits(seed: int, sizes: dict[str, int],
                     provenance: Provenance) -> dict[str, list[Utterance]]:
    """The default corpus: one generator stream per split, later splits avoiding earlier texts."""
    splits: dict[str, list[Utterance]] = {}
    seen: set[str] = set()
    for name in tqdm(SPLITS, desc="generating", unit="split", leave=False):
        chapters, skipped = generate_chapters(seed, sizes[name], exclude=seen, split=name)
        if skipped:
            provenance.drop(f"text already in an earlier split (skipped while generating {name})",
                            count=skipped)
        splits[name] = [
            Utterance(f"{_ID_BASE[name] + c // 10}-{c:06d}-{u:04d}", text)
            for c, chapter in enumerate(chapters) for u, text in enumerate(chapter)
        ]
        seen.update(text for chapter in chapters for text in chapter)
    return splits


# ---- statistics and the data card -----------------------------------------------------------


def _length_stats(texts: Sequence[str]) -> dict[str, float]:
    lengths = np.array([len(t) for t in texts])
    return {"utterances": len(texts), "characters": int(lengths.sum()),
            "words": sum(len(t.split()) for t in texts), "min": int(lengths.min()),
            "median": float(np.median(lengths)), "mean": float(lengths.mean()),
            "p95": float(np.percentile(lengths, 95)), "max": int(lengths.max())}


def ngram_baselines(train: Sequence[str], evaluate: dict[str, Sequence[str]]) -> dict[int, dict[str, float]]:
    """{order: {split: per-character perplexity}} of modified-KN character n-grams fit on train."""
    results = {}
    for order in tqdm(NGRAM_ORDERS, desc="n-gram baselines", unit="model", leave=False):
        model = CharNgramLM(order).fit(train)
        results[order] = {name: model.perplexity(texts) for name, texts in evaluate.items()}
    return results


def _show(char: str) -> str:
    if char in DIGIT_RUNS:
        return char
    if char == " ":
        return "space"
    if len(char) == 1 and (char.isspace() or not char.isprintable()):
        return f"U+{ord(char):04X}"
    shown = char.replace("|", "\\|").replace("`", "'")
    return f"`{shown}`" + (f" (U+{ord(char):04X})" if len(char) == 1 and ord(char) > 127 else "")


def data_card(splits: dict[str, list[Utterance]], provenance: Provenance,
              baselines: dict[int, dict[str, float]], command: str) -> str:
    """The Markdown of DATA_CARD.md (deterministic: no timings or dates)."""
    texts = {name: [item.text for item in splits[name]] for name in SPLITS}
    stats = {name: _length_stats(texts[name]) for name in SPLITS}
    lines = [
        "# hw4p1 data card", "",
        f"Source: {provenance.source}.  ",
        f"Built by: `{command}`.", "",
        f"Each file `<split>/<utterance-id>.npy` holds one transcript as a 1-d numpy array of single "
        f"characters over `{ALPHABET}` (A-Z, apostrophe, space); "
        f"`hw4lib.data.lm_dataset.load_transcript` reads it. Every utterance has at most "
        f"{MAX_CHARS} characters.", "",
        "## Splits", "",
        "| split | utterances | characters | words | min | median | mean | p95 | max |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for name in SPLITS:
        s = stats[name]
        lines.append(f"| {name} | {s['utterances']:,} | {s['characters']:,} | {s['words']:,} | {s['min']} | "
                     f"{s['median']:.0f} | {s['mean']:.1f} | {s['p95']:.0f} | {s['max']} |")
    train_words = Counter(w for t in texts["train"] for w in t.split())
    shared = {name: len(set(texts["train"]) & set(texts[name])) for name in ("val", "test")}
    lines += ["", f"Lengths are in characters. Train has {len(train_words):,} distinct words. "
              f"Utterance texts shared with train: val {shared['val']}, test {shared['test']}; "
              f"shared between val and test: {len(set(texts['val']) & set(texts['test']))}.", ""]

    edges = list(range(0, MAX_CHARS, 50)) + [MAX_CHARS + 1]  # the last bin includes the cap
    counts = {name: np.histogram([len(t) for t in texts[name]], bins=edges)[0] for name in SPLITS}
    lines += ["## Length histogram (utterances per 50-character bin)", "",
              "| characters | " + " | ".join(SPLITS) + " |", "|---|" + "---:|" * len(SPLITS)]
    for i in range(len(edges) - 1):
        row = " | ".join(f"{counts[name][i]:,}" for name in SPLITS)
        lines.append(f"| {edges[i]}-{edges[i + 1] - 1} | {row} |")

    char_counts = {name: Counter("".join(texts[name])) for name in SPLITS}
    lines += ["", "## Characters", "", "| char | " + " | ".join(SPLITS) + " | train share |",
              "|---|" + "---:|" * (len(SPLITS) + 1)]
    total_train = sum(char_counts["train"].values())
    for char in ALPHABET:
        row = " | ".join(f"{char_counts[n][char]:,}" for n in SPLITS)
        lines.append(f"| {_show(char)} | {row} | {100 * char_counts['train'][char] / total_train:.2f}% |")

    lines += ["", "## Normalisation", ""]
    if provenance.changes:
        lines += [f"{provenance.changed_utterances:,} input utterances had characters changed "
                  "(every change below, most frequent first; `to` = space means the character became "
                  "a word break, empty means removed):", "", "| from | to | count |", "|---|---|---:|"]
        for (source, target), count in sorted(provenance.changes.items(), key=lambda kv: (-kv[1], kv[0])):
            shown_target = "(removed)" if target == "" else _show(target)
            lines.append(f"| {_show(source)} | {shown_target} | {count:,} |")
    else:
        lines.append("No character was changed: every input character was already in the alphabet.")
    lines += ["", "## Dropped utterances", ""]
    if provenance.drops:
        lines += ["| reason | count | first ids |", "|---|---:|---|"]
        for reason, count in provenance.drops.items():
            ids = provenance.examples.get(reason, [])
            examples = ", ".join(ids) + (", ..." if count > len(ids) > 0 else "")
            lines.append(f"| {reason} | {count:,} | {examples or '-'} |")
    else:
        lines.append("None.")

    lines += ["", "## Character n-gram baselines", "",
              "Interpolated modified Kneser-Ney character n-grams (`datagen.ngram`), fit on train. "
              "Each utterance is predicted character by character and then its end (EOS), with "
              "per-character perplexity = exp(total NLL in nats over every target including EOS / "
              "number of characters), the same definition as the homework's metric. "
              f"The homework's pass mark is a test perplexity of at most {FULL_MARKS_PPL}.", "",
              "| order | val ppl | test ppl |", "|---:|---:|---:|"]
    for order, result in baselines.items():
        lines.append(f"| {order} | {result['val']:.3f} | {result['test']:.3f} |")
    return "\n".join(lines) + "\n"


# ---- the marker: what a data folder was built from -------------------------------------------


def generator_fingerprint() -> str:
    """sha256 of the sources that decide the generated text: the generator's modules
    (``corpus.GENERATOR_MODULES``), this file (splits, ids, sizes) and the lexicon files. Generated
    data with another fingerprint is stale."""
    digest = hashlib.sha256()
    for path in (*GENERATOR_MODULES, Path(__file__), *sorted(LEXICON_DIR.glob("*.ini"))):
        digest.update(path.name.encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


def currency(out: Path, seed: int) -> tuple[bool, str]:
    """(whether ``out`` can be used as it is for this seed, why). ``make train`` rebuilds it when not.

    Data built from real text counts as current whatever the seed: only ``make data`` replaces it.
    A marker from before fingerprints is empty; the data card then tells where the text came from.
    """
    marker = out / MARKER
    if not marker.is_file():
        return False, f"{out} has no finished build"
    try:
        built = json.loads(marker.read_text())
    except ValueError:
        built = None
    if not isinstance(built, dict):
        card = out / "DATA_CARD.md"
        if card.is_file() and "Source: the embedded generator" in card.read_text():
            return False, f"{out} was built by an older version of the generator"
        return True, f"{out} was not built by the generator; kept (`make data` replaces it)"
    if built.get("source") != "generator":
        return True, f"{out} was built from real text; kept (`make data` replaces it)"
    if built.get("seed") != seed:
        return False, f"{out} was generated with seed {built.get('seed')}, not {seed}"
    if built.get("sizes") != DEFAULT_SIZES:
        return False, f"{out} was generated with split sizes {built.get('sizes')}"
    if built.get("fingerprint") != generator_fingerprint():
        return False, f"{out} was built by another version of the generator"
    return True, f"{out} is current (seed {seed}, this version of the generator)"


# ---- writing --------------------------------------------------------------------------------


def write_split(folder: Path, items: Sequence[Utterance]) -> None:
    folder.mkdir(parents=True)
    for item in tqdm(items, desc=f"writing {folder.name}", unit="file", leave=False):
        np.save(folder / f"{item.id}.npy", np.array(list(item.text), dtype="<U1"))


def build(out: Path, seed: int = 0, librispeech: Path | None = None,
          text_files: Sequence[Path] = (), sizes: dict[str, int] | None = None,
          val_fraction: float = 0.05, test_fraction: float = 0.05,
          command: str = "python -m datagen.build_data") -> dict[int, dict[str, float]]:
    """Build the data folder ``out`` (replacing it only once complete); returns the baselines."""
    if librispeech is None and not text_files:
        provenance = Provenance(f"the embedded generator `datagen.corpus`, seed {seed}")
        sizes = sizes or DEFAULT_SIZES
        splits = generated_splits(seed, sizes, provenance)
        marker = {"source": "generator", "seed": seed, "sizes": sizes,
                  "fingerprint": generator_fingerprint()}
    else:
        parts = ([f"LibriSpeech transcripts under `{librispeech}`"] if librispeech else []) + \
                ([f"text files {', '.join(f'`{p}`' for p in text_files)}"] if text_files else [])
        provenance = Provenance(" and ".join(parts) + f", split with seed {seed}")
        marker = {"source": "real text", "seed": seed}
        items = read_librispeech(librispeech) if librispeech else []
        items += read_text_files(text_files, provenance)
        items = normalise_all(items, provenance)
        splits = split_real(items, seed, val_fraction, test_fraction)
        dedupe_across(splits, provenance)
        for name in SPLITS:
            splits[name].sort(key=lambda item: item.id)
            if not splits[name]:
                raise ValueError(f"the {name} split is empty after removing duplicates of earlier "
                                 "splits: give more text")
    texts = {name: [item.text for item in splits[name]] for name in SPLITS}
    baselines = ngram_baselines(texts["train"], {"val": texts["val"], "test": texts["test"]})

    out = out.resolve()
    out.parent.mkdir(parents=True, exist_ok=True)
    for stale in out.parent.glob(f".{out.name}.building-*"):
        shutil.rmtree(stale, ignore_errors=True)  # left by an interrupted build
    staging = Path(tempfile.mkdtemp(prefix=f".{out.name}.building-", dir=out.parent))
    staging.chmod(0o755)  # mkdtemp makes it private (0700); the data folder is for everyone
    try:
        for name in SPLITS:
            write_split(staging / name, splits[name])
        (staging / "DATA_CARD.md").write_text(data_card(splits, provenance, baselines, command))
        (staging / MARKER).write_text(json.dumps(marker, indent=1) + "\n")
        if out.exists():
            retired = Path(tempfile.mkdtemp(prefix=f".{out.name}.building-old-", dir=out.parent))
            out.rename(retired / out.name)
            staging.rename(out)
            shutil.rmtree(retired)
        else:
            staging.rename(out)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return baselines


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=Path("hw4_data/hw4p1_data"),
                        help="data folder to (re)build")
    parser.add_argument("--seed", type=int, default=0,
                        help="seeds the generator, or the train/val/test split of real text")
    parser.add_argument("--librispeech", type=Path,
                        help="a LibriSpeech folder; every *.trans.txt below it is used")
    parser.add_argument("--text", type=Path, nargs="+", default=[],
                        help="plain-text files with one utterance per line")
    parser.add_argument("--val-fraction", type=float, default=0.05,
                        help="share of real utterances for val (default 0.05)")
    parser.add_argument("--test-fraction", type=float, default=0.05,
                        help="share of real utterances for test (default 0.05)")
    parser.add_argument("--if-stale", action="store_true",
                        help="build only when --out lacks this seed's data from this version of "
                             "the generator (data built from real text is kept)")
    args = parser.parse_args(argv)
    arguments = sys.argv[1:] if argv is None else argv
    if args.if_stale:
        if args.librispeech or args.text:
            parser.error("--if-stale checks generated data; drop it to build from real text")
        current, why = currency(args.out, args.seed)
        print(why if current else f"{why}: rebuilding it")
        if current:
            return
    # the card records the command that builds these bytes, the same with or without --if-stale
    command = " ".join(["python -m datagen.build_data"] + [a for a in arguments if a != "--if-stale"])
    start = time.perf_counter()
    try:
        baselines = build(args.out, args.seed, args.librispeech, args.text,
                          val_fraction=args.val_fraction, test_fraction=args.test_fraction,
                          command=command)
    except (FileNotFoundError, ValueError) as error:
        raise SystemExit(f"build_data: {error}") from None
    scores = ", ".join(f"{order}-gram {result['test']:.2f}" for order, result in baselines.items())
    print(f"Wrote {args.out} in {time.perf_counter() - start:.1f}s (card: {args.out / 'DATA_CARD.md'}); "
          f"test perplexity of the baselines: {scores}")


if __name__ == "__main__":
    main()
