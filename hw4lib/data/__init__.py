"""Data for hw4p1: the tokenizers, the language-modelling dataset and a DataLoader check."""
from hw4lib.data.length_buckets import LengthBucketBatchSampler, batch_loader
from hw4lib.data.lm_dataset import LMDataset
from hw4lib.data.tokenizer import H4Tokenizer
from hw4lib.data.verify_dataloader import verify_dataloader

__all__ = ["H4Tokenizer", "LMDataset", "LengthBucketBatchSampler", "batch_loader",
           "verify_dataloader"]
