"""How long LMDataset takes to load the default train split with each tokenizer, and what it holds.

The first load reads the files from disk (cold page cache on a fresh machine); the tokenizers that
follow find them cached, so the table also reports the file-reading time alone, measured last.

    .venv/bin/python -m bench bench_data      # or: make bench BENCH=bench_data
"""
import time
from pathlib import Path

from hw4lib.data import H4Tokenizer, LMDataset
from hw4lib.data.lm_dataset import load_transcript
from hw4lib.data.tokenizer import DEFAULT_TOKEN_MAP, TOKENIZER_FILES

DATA_ROOT = Path(__file__).resolve().parents[1] / "hw4_data" / "hw4p1_data"
PARTITION = "train"


def main() -> None:
    if not (DATA_ROOT / PARTITION).is_dir():
        print(f"skipped: no data at {DATA_ROOT / PARTITION}; run `make data` first")
        return
    config = {"root": str(DATA_ROOT), "subset": 1.0}
    print(f"{'tokenizer':>9} {'vocab':>6} {'load s':>7} {'transcripts':>11} {'chars':>10} "
          f"{'targets':>10} {'chars/target':>12} {'max len':>7}")
    for token_type in TOKENIZER_FILES:
        tokenizer = H4Tokenizer(DEFAULT_TOKEN_MAP, token_type)
        start = time.perf_counter()
        dataset = LMDataset(PARTITION, config, tokenizer)
        seconds = time.perf_counter() - start
        print(f"{token_type:>9} {tokenizer.vocab_size:>6} {seconds:>7.2f} {len(dataset):>11} "
              f"{dataset.total_chars:>10} {dataset.total_tokens:>10} "
              f"{dataset.get_avg_chars_per_token():>12.3f} {dataset.text_max_len:>7}")
    start = time.perf_counter()
    files = sorted((DATA_ROOT / PARTITION).glob("*.npy"))
    for path in files:
        load_transcript(path)
    print(f"reading the {len(files)} files alone (cached): {time.perf_counter() - start:.2f}s")


if __name__ == "__main__":
    main()
