"""Batches of transcripts of similar length: LengthBucketBatchSampler, and batch_loader, the
DataLoader the trainer and the grader share."""
from __future__ import annotations

import math

import torch
from torch.utils.data import DataLoader, Sampler


class LengthBucketBatchSampler(Sampler[list[int]]):
    """Batches of transcripts of similar length, in a random order every epoch.

    Random batches pad every sequence to the longest of the batch; with transcripts of 10 to 500
    characters that wastes more than half of the compute. Each epoch this sampler shuffles the
    dataset, cuts it into pools of ``batch_size * pool_batches`` transcripts, sorts each pool by
    length, cuts the pools into batches and shuffles the batches. Every draw comes from torch's
    global RNG, which checkpoints save, so a resumed run replays the same batches.

    Args:
        lengths: the length of each transcript (any monotone proxy works).
        batch_size: transcripts per batch (the last batch of a pool may be smaller).
        shuffle: False gives fixed batches sorted by length (for evaluation).
        pool_batches: how many batches' worth of transcripts are sorted together.
    """

    def __init__(self, lengths: list[int], batch_size: int, shuffle: bool = True, pool_batches: int = 50):
        self.lengths = torch.as_tensor(lengths)
        self.batch_size, self.shuffle, self.pool_batches = batch_size, shuffle, pool_batches

    def __len__(self) -> int:
        pool = self.batch_size * self.pool_batches
        full_pools, rest = divmod(len(self.lengths), pool)
        return full_pools * self.pool_batches + math.ceil(rest / self.batch_size)

    def __iter__(self):
        count = len(self.lengths)
        order = torch.randperm(count) if self.shuffle else torch.arange(count)
        pool_size = self.batch_size * self.pool_batches if self.shuffle else count
        batches = []
        for start in range(0, count, pool_size):
            pool = order[start:start + pool_size]
            pool = pool[torch.argsort(self.lengths[pool], stable=True)]
            batches += [pool[k:k + self.batch_size].tolist() for k in range(0, len(pool), self.batch_size)]
        if self.shuffle:
            batches = [batches[i] for i in torch.randperm(len(batches)).tolist()]
        return iter(batches)


def batch_loader(dataset, batch_size: int, shuffle: bool, bucket_by_length: bool = True,
                 num_workers: int = 0) -> DataLoader:
    """A DataLoader over ``dataset`` in batches of ``batch_size`` transcripts.

    With ``bucket_by_length`` the batches group transcripts of similar length (see
    LengthBucketBatchSampler); the metrics do not depend on how batches are formed. The shuffle
    order is drawn from torch's global RNG, which checkpoints save and restore, so a resumed run
    sees the same batches as an uninterrupted one.
    """
    common = dict(collate_fn=dataset.collate_fn, num_workers=num_workers)
    if bucket_by_length:
        lengths = [len(golden) for golden in dataset.transcripts_golden]
        sampler = LengthBucketBatchSampler(lengths, batch_size, shuffle=shuffle)
        return DataLoader(dataset, batch_sampler=sampler, **common)
    return DataLoader(dataset, batch_size=batch_size, shuffle=shuffle, **common)
