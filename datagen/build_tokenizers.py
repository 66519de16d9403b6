"""Train the four homework tokenizers on the training split and write their JSON files.

    python -m datagen.build_tokenizers --data hw4_data/hw4p1_data --seed 0   # = make tokenizers

Writes ``tokenizer_char.json``, ``tokenizer_1000.json``, ``tokenizer_5000.json`` and
``tokenizer_10000.json`` to ``hw4lib/data/tokenizer_jsons/`` (or ``--out``):

* char: one id per character. Its alphabet is the LibriSpeech one (A-Z, apostrophe, space) plus
  any other character of the training text, in code-point order after the special tokens.
* 1000 / 5000 / 10000: byte-level BPE (GPT-2 style) with exactly that many ids. The 256 byte
  symbols are all in the base vocabulary, so any text encodes without [UNK], and the byte-level
  decoder gives back the text exactly, spaces included (no prefix space is added).

Every tokenizer starts with the special tokens ``[PAD] [UNK] [MASK] [SOS] [EOS] [BLANK]`` at ids
0..5. Training is deterministic (BPE ties are broken by pair id, not by chance), so the same data
gives byte-identical files; ``--seed`` is accepted for the repository's convention and changes
nothing. After training, every tokenizer must round-trip every transcript of every split found
under ``--data``, or the script fails without writing anything.
"""
from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Sequence

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

from datagen.corpus import ALPHABET
from hw4lib.data.lm_dataset import load_transcript, partition_dir
from hw4lib.data.tokenizer import SPECIAL_TOKENS, TOKENIZER_DIR, TOKENIZER_FILES

def read_partition(root: str | Path, partition: str) -> list[str]:
    """The transcripts of ``root/partition``, in sorted file order."""
    return [load_transcript(path) for path in sorted(partition_dir(root, partition).glob("*.npy"))]


def train_char_tokenizer(texts: Sequence[str]) -> Tokenizer:
    """A character tokenizer: special tokens, then every character of LibriSpeech and of ``texts``.

    It is a BPE model without merges, so each character is one token and characters outside the
    alphabet become [UNK]; the Fuse decoder joins the characters back without separators.
    """
    alphabet = sorted(set(ALPHABET).union(*map(set, texts)))
    vocab = {token: i for i, token in enumerate(SPECIAL_TOKENS)}
    vocab.update({char: len(SPECIAL_TOKENS) + i for i, char in enumerate(alphabet)})
    tokenizer = Tokenizer(models.BPE(vocab=vocab, merges=[], unk_token="[UNK]"))
    tokenizer.add_special_tokens(list(SPECIAL_TOKENS))
    tokenizer.decoder = decoders.Fuse()
    return tokenizer


def train_bpe_tokenizer(texts: Sequence[str], vocab_size: int) -> Tokenizer:
    """A byte-level BPE tokenizer with exactly ``vocab_size`` ids, special tokens included.

    Raises ValueError when ``texts`` has too few distinct words for that many merges.
    """
    tokenizer = Tokenizer(models.BPE(unk_token="[UNK]"))
    # No prefix space: "HI THERE" -> "HI", "ĠTHERE", and decoding maps each byte back exactly.
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=list(SPECIAL_TOKENS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator(texts, trainer=trainer, length=len(texts))
    reached = tokenizer.get_vocab_size()
    if reached != vocab_size:
        word_types = len({word for text in texts for word in text.split()})
        raise ValueError(
            f"BPE training reached only {reached} of {vocab_size} tokens: the training text has "
            f"too few distinct words ({word_types} word types) to learn {vocab_size} tokens. "
            "Build a larger corpus (make data) before training the tokenizers."
        )
    return tokenizer


def train_all(texts: Sequence[str]) -> dict[str, Tokenizer]:
    """{token_type: trained tokenizer} for every entry of TOKENIZER_FILES, trained on ``texts``."""
    if not texts:
        raise ValueError("No training text: the training split is empty")
    tokenizers = {}
    for token_type, (_, size) in TOKENIZER_FILES.items():
        if size is None:
            tokenizers[token_type] = train_char_tokenizer(texts)
        else:
            tokenizers[token_type] = train_bpe_tokenizer(texts, size)
    return tokenizers


def round_trip_failures(tokenizer: Tokenizer, texts: Sequence[str]) -> list[str]:
    """The texts that ``tokenizer`` does not give back exactly after encode then decode."""
    encodings = tokenizer.encode_batch(list(texts), add_special_tokens=False)
    decoded = tokenizer.decode_batch([enc.ids for enc in encodings], skip_special_tokens=False)
    return [text for text, back in zip(texts, decoded) if text != back]


def write_all(tokenizers: dict[str, Tokenizer], out_dir: Path) -> list[Path]:
    """Save each tokenizer as pretty-printed JSON under its file name; return the paths."""
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = []
    for token_type, tokenizer in tokenizers.items():
        path = out_dir / TOKENIZER_FILES[token_type][0]
        tokenizer.save(str(path), pretty=True)
        paths.append(path)
    return paths


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--data", type=Path, default=Path("hw4_data/hw4p1_data"),
                        help="dataset root with train/ (and val/, test/ for the round-trip check)")
    parser.add_argument("--out", type=Path, default=TOKENIZER_DIR,
                        help="where to write the JSON files")
    parser.add_argument("--seed", type=int, default=0,
                        help="accepted by convention; training is deterministic")
    args = parser.parse_args(argv)

    start = time.perf_counter()
    train_texts = read_partition(args.data, "train")
    check_texts = {"train": train_texts}
    for partition in ("val", "test"):
        if (args.data / partition).is_dir():
            check_texts[partition] = read_partition(args.data, partition)
    tokenizers = train_all(train_texts)

    for token_type, tokenizer in tokenizers.items():
        for partition, texts in check_texts.items():
            failures = round_trip_failures(tokenizer, texts)
            if failures:
                raise SystemExit(
                    f"tokenizer {token_type} does not round-trip {len(failures)} {partition} "
                    f"transcripts, e.g. {failures[0]!r}; nothing was written"
                )
    paths = write_all(tokenizers, args.out)

    print(f"Read, trained on {len(train_texts)} train transcripts and checked the round trip on "
          f"{', '.join(check_texts)} in {time.perf_counter() - start:.1f}s")
    for (token_type, tokenizer), path in zip(tokenizers.items(), paths):
        ids = [enc.ids for enc in tokenizer.encode_batch(train_texts, add_special_tokens=False)]
        chars_per_token = sum(map(len, train_texts)) / sum(map(len, ids))
        print(f"  {token_type:>4}: vocab {tokenizer.get_vocab_size():>5}, "
              f"{chars_per_token:.2f} chars/token on train -> {path}")


if __name__ == "__main__":
    main()
