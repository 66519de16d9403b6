"""Print what a language-model DataLoader produces, as a quick check before training."""
from __future__ import annotations

from torch.utils.data import DataLoader

from hw4lib.data.random_state import preserved_rng_states


def verify_dataloader(loader: DataLoader) -> dict:
    """Print the partition, sizes, first-batch shapes and dtypes and length statistics of a loader.

    ``loader`` must iterate over an LMDataset and yield ``(shifted, golden, lengths)`` batches
    (the dataset's ``collate_fn``). Only the first batch is drawn, so this is fast on any split.
    Drawing it (a shuffled order, the loader's seed) leaves every global random state as it was,
    so a run gives the same numbers with or without this check.

    Returns:
        the printed statistics as a dict (keys below), handy in tests and notebooks.
    """
    dataset = loader.dataset
    with preserved_rng_states():
        shifted, golden, lengths = next(iter(loader))
    stats = {
        "partition": dataset.partition,
        "num_samples": len(dataset),
        "batch_size": loader.batch_size,
        "num_batches": len(loader),
        "shifted_shape": tuple(shifted.shape),
        "golden_shape": tuple(golden.shape),
        "lengths_shape": tuple(lengths.shape),
        "dtypes": (shifted.dtype, golden.dtype, lengths.dtype),
        "batch_max_len": int(lengths.max()),
        "max_len": dataset.text_max_len,
        "total_chars": dataset.total_chars,
        "total_tokens": dataset.total_tokens,
        "avg_chars_per_token": dataset.get_avg_chars_per_token(),
    }
    rule = "=" * 60
    print(rule)
    print(f"{'DataLoader check':^60}")
    print(rule)
    print(f"Partition              : {stats['partition']}")
    print(f"Transcripts            : {stats['num_samples']}")
    print(f"Batch size / batches   : {stats['batch_size']} / {stats['num_batches']}")
    print(f"First batch shifted    : {stats['shifted_shape']} {shifted.dtype}")
    print(f"First batch golden     : {stats['golden_shape']} {golden.dtype}")
    print(f"First batch lengths    : {stats['lengths_shape']} {lengths.dtype} "
          f"(max {stats['batch_max_len']})")
    print(f"Longest sequence       : {stats['max_len']} tokens ([SOS] included)")
    print(f"Characters / targets   : {stats['total_chars']} / {stats['total_tokens']} "
          "([EOS] included)")
    print(f"Avg chars per token    : {stats['avg_chars_per_token']:.4f}")
    print(rule)
    return stats
