# hw4p1: instructor-only
"""A small trainer on a few transcripts, for the library tests of training: a one-layer model, the
real character tokenizer, ``LMDataset`` and ``LMTrainer``, data written to a temporary folder."""
from pathlib import Path

import numpy as np
import torch

from tests.tiny_config import tiny_config, tiny_yaml

TRAIN_TEXTS = ["THE CAT SAT ON THE MAT", "A DOG RAN IN THE PARK", "SHE SAID IT WAS LATE",
               "WE WALKED HOME TOGETHER", "THE RAIN FELL ALL NIGHT", "HE OPENED THE OLD DOOR"]


def write_split(folder: Path, texts: list[str]) -> None:
    folder.mkdir(parents=True)
    for index, text in enumerate(texts):
        np.save(folder / f"1000-000000-{index:04d}.npy", np.array(list(text), dtype="<U1"))


def char_tokenizer():
    from hw4lib.data import H4Tokenizer

    token_map = tiny_yaml()["tokenization"]["token_map"]
    return H4Tokenizer(token_map, "char")


def small_trainer(tmp_path, val_texts, run_name="run", **training):
    """An LMTrainer of a one-layer model, and loaders over TRAIN_TEXTS and ``val_texts`` (char tokens)."""
    from torch.utils.data import DataLoader

    from hw4lib.data import LMDataset
    from hw4lib.model import DecoderOnlyTransformer
    from hw4lib.trainers import LMTrainer

    root = tmp_path / "data"
    write_split(root / "train", TRAIN_TEXTS)
    write_split(root / "val", val_texts)
    tokenizer = char_tokenizer()
    loaders = []
    for split in ("train", "val"):
        dataset = LMDataset(split, {"root": str(root), "subset": 1.0}, tokenizer)
        loaders.append(DataLoader(dataset, batch_size=4, collate_fn=dataset.collate_fn))
    torch.manual_seed(0)
    model = DecoderOnlyTransformer(num_layers=1, d_model=16, num_heads=2, d_ff=32, dropout=0.0,
                                   max_len=64, num_classes=tokenizer.vocab_size)
    config = tiny_config(tmp_path, {"samples_every": 1, **training}, scheduler={"name": "constant"},
                         generation={"num_samples": 4, "prompt_length": 8, "max_length": 24, "greedy": {}})
    trainer = LMTrainer(model, tokenizer, config, run_name, None, device="cpu")
    trainer.optimizer = torch.optim.AdamW(trainer.model.parameters(), lr=1e-3)
    # The PNGs are not under test here and matplotlib is most of the time: skip drawing them.
    trainer._plot_curves = trainer._save_attention_plot = lambda *args: None
    return trainer, loaders
