"""Measure a handed-in language model on the hidden test set with the reference code.

Run by ``autograder.grade`` as a child process, from the extracted autograder (so ``hw4lib`` is the
reference copy shipped in autograde.tar, never the student's)::

    python -m autograder.grade_model --handin DIR --hidden-set DIR --work DIR --out result.json

Nothing the student wrote runs here: ``config.yaml`` is read with ``yaml.safe_load`` and checked
key by key, ``model_state_dict.pt`` is read with ``torch.load(weights_only=True)`` (tensors only,
no pickled code) and loaded strictly into the reference ``DecoderOnlyTransformer``. The hidden
transcripts are written as ``.npy`` files under ``--work`` and read back by the reference
``LMDataset``; ``evaluate_language_model`` (the trainer's own metric) gives the perplexity.

Writes ``{"perplexity_char": ..., ...}`` to ``--out`` and exits 0, or ``{"error": "<what went wrong
and how to fix it>"}`` and exits 1.
"""
from __future__ import annotations

import argparse
import math
import reprlib
import time
import zipfile
from pathlib import Path

import numpy as np
import torch
import yaml
from torch.utils.data import DataLoader

from autograder import rubric
from hw4lib.data import H4Tokenizer, LMDataset
from hw4lib.data.tokenizer import DEFAULT_TOKEN_MAP
from hw4lib.model import DecoderOnlyTransformer
from hw4lib.trainers.base_trainer import write_json
from hw4lib.trainers.metrics import evaluate_language_model

HIDDEN_TEXT_FILE = "test.txt"  # inside the hidden-set folder: one transcript per line
HIDDEN_PARTITION = "test"
MAX_BATCH_SIZE = 32
# The largest activation of one batch stays under this many elements: the attention weights (batch
# x heads x T x T) and the widest per-position tensor (batch x T x max(d_ff, vocab)), so a model with
# many heads or a huge feed-forward on long sequences does not exhaust memory.
ACTIVATION_BUDGET = 2**26
# DecoderOnlyTransformer's keyword arguments (num_classes comes from the tokenizer) and their types.
MODEL_KEYS = {"num_layers": int, "d_model": int, "num_heads": int, "d_ff": int, "dropout": float,
              "max_len": int, "weight_tying": bool, "layer_drop_rate": float}
OPTIONAL_MODEL_KEYS = {"weight_tying", "layer_drop_rate"}
MAX_ERROR_CHARS = 2000
# Config values quoted in error messages: a YAML alias bomb expands to billions of items when
# printed in full; reprlib prints a few of each level.
SHORT = reprlib.Repr()
SHORT.maxlevel, SHORT.maxlist, SHORT.maxdict, SHORT.maxstring, SHORT.maxother = 2, 4, 4, 40, 40


class GradingError(Exception):
    """The handed-in model cannot be evaluated; the message says why and what to fix."""


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Evaluate a handed-in model on the hidden set.")
    parser.add_argument("--handin", type=Path, required=True,
                        help="folder with config.yaml and model_state_dict.pt")
    parser.add_argument("--hidden-set", type=Path, required=True,
                        help=f"folder with {HIDDEN_TEXT_FILE}")
    parser.add_argument("--work", type=Path, required=True, help="scratch folder for .npy files")
    parser.add_argument("--out", type=Path, required=True, help="where to write the result JSON")
    args = parser.parse_args(argv)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    start = time.monotonic()
    try:
        result = evaluate_handin(args.handin, args.hidden_set, args.work)
    except GradingError as error:
        message = str(error)[:MAX_ERROR_CHARS]
        print(message)
        write_json(args.out, {"error": message})
        raise SystemExit(1)
    result["seconds"] = round(time.monotonic() - start, 2)
    print(f"evaluated {result['num_parameters']:,} parameters on {result['num_chars']:,} hidden "
          f"characters ({result['token_type']} tokenizer) in {result['seconds']} s")
    write_json(args.out, result)


def evaluate_handin(handin: Path, hidden_set: Path, work: Path) -> dict:
    """Rebuild the model of ``handin``; return evaluate_language_model's metrics on the hidden set.

    Raises GradingError naming the problem when the handin cannot be evaluated.
    """
    torch.manual_seed(0)
    config = load_config(handin / "config.yaml")
    token_type = config["tokenization"]["token_type"]
    tokenizer = H4Tokenizer(DEFAULT_TOKEN_MAP, token_type)
    model_config = config["model"]
    estimate = estimate_parameters(model_config, tokenizer.vocab_size)
    if estimate > rubric.MAX_PARAMETERS:
        raise GradingError(f"config.yaml describes a model of about {estimate:,} parameters; "
                           f"the grader builds at most {rubric.MAX_PARAMETERS:,}")
    state_dict = load_state_dict(handin / "model_state_dict.pt")
    try:
        model = DecoderOnlyTransformer(**model_config, num_classes=tokenizer.vocab_size)
    except (TypeError, ValueError) as error:
        raise GradingError(f"config.yaml's model section is not valid: {error}") from error
    try:
        model.load_state_dict(state_dict, strict=True)
    except RuntimeError as error:
        raise GradingError(
            f"model_state_dict.pt does not fit the model config.yaml describes "
            f"({token_type} tokenizer, vocab_size {tokenizer.vocab_size}): {error}. Hand in the "
            f"config.yaml of the run the weights come from (`make handin`)") from error

    data_config = {"root": str(write_hidden_set(hidden_set, work)), "subset": 1.0}
    dataset = LMDataset(HIDDEN_PARTITION, data_config, tokenizer)
    if dataset.text_max_len > model.max_len:
        raise GradingError(f"the longest hidden test transcript is {dataset.text_max_len} tokens "
                           f"with the {token_type} tokenizer, but the model's max_len is "
                           f"{model.max_len}")
    width = max(model_config["d_ff"], model_config["d_model"], tokenizer.vocab_size)
    loader = length_sorted_loader(dataset, model_config["num_heads"], width)
    metrics = evaluate_language_model(model, loader, torch.device("cpu"))
    if not math.isfinite(metrics["perplexity_char"]):
        raise GradingError(f"the model's perplexity is {metrics['perplexity_char']} (NaN or "
                           f"infinite weights or logits)")
    return {**metrics, "token_type": token_type, "num_utterances": len(dataset),
            "num_parameters": sum(p.numel() for p in model.parameters())}


def load_config(path: Path) -> dict:
    """config.yaml as a dict whose tokenization.token_type and model section are checked."""
    try:
        config = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (yaml.YAMLError, UnicodeDecodeError) as error:
        raise GradingError(f"config.yaml is not valid YAML: {error}") from error
    if not isinstance(config, dict):
        raise GradingError("config.yaml must be a mapping with 'tokenization' and 'model' sections")
    tokenization = config.get("tokenization")
    token_type = tokenization.get("token_type") if isinstance(tokenization, dict) else None
    if not isinstance(token_type, str) or token_type not in DEFAULT_TOKEN_MAP:
        raise GradingError(f"config.yaml's tokenization.token_type is {SHORT.repr(token_type)}; "
                           f"it must "
                           f"be one of {list(DEFAULT_TOKEN_MAP)}")
    check_model_config(config.get("model"))
    return config


def check_model_config(model_config) -> None:
    """Raise GradingError unless ``model_config`` holds sane DecoderOnlyTransformer arguments."""
    if not isinstance(model_config, dict):
        raise GradingError("config.yaml has no 'model' mapping (DecoderOnlyTransformer's "
                           "arguments)")
    unknown = sorted(set(model_config) - set(MODEL_KEYS))
    missing = sorted(set(MODEL_KEYS) - OPTIONAL_MODEL_KEYS - set(model_config))
    if unknown or missing:
        raise GradingError(f"config.yaml's model section: unknown keys {unknown}, missing keys "
                           f"{missing}; it takes exactly {list(MODEL_KEYS)}")
    for key, kind in MODEL_KEYS.items():
        value = model_config.get(key)
        if value is None and key in OPTIONAL_MODEL_KEYS:
            continue
        if kind is float:
            valid = isinstance(value, (int, float)) and not isinstance(value, bool)
        else:
            valid = isinstance(value, kind) and (kind is bool or not isinstance(value, bool))
        if not valid:
            raise GradingError(f"config.yaml: model.{key} must be {kind.__name__}, got {SHORT.repr(value)}")
    for key, (low, high) in rubric.MODEL_LIMITS.items():
        if not low <= model_config[key] <= high:
            raise GradingError(f"config.yaml: model.{key} = {model_config[key]} is outside "
                               f"[{low}, {high}]")


def estimate_parameters(model_config: dict, vocab_size: int) -> int:
    """Parameters plus positional-table entries of the model, counted from the config alone."""
    d, d_ff = model_config["d_model"], model_config["d_ff"]
    attention = 4 * d * d + 4 * d             # fused q/k/v and output projections with biases
    feed_forward = 2 * d * d_ff + d_ff + d
    norms = 4 * d
    per_layer = attention + feed_forward + norms
    output = vocab_size if model_config.get("weight_tying") else vocab_size * d + vocab_size
    return (model_config["num_layers"] * per_layer + vocab_size * d + output + 2 * d
            + model_config["max_len"] * d)


def load_state_dict(path: Path) -> dict:
    """The tensors of model_state_dict.pt; anything torch.load's weights_only mode refuses fails.

    torch.save writes a zip of stored (uncompressed) entries; a compressed entry could inflate to
    far more than the file's size, so it is refused before torch reads anything.
    """
    check_stored_zip(path)
    try:
        state_dict = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as error:  # noqa: BLE001 - unpickling errors come in many types
        raise GradingError(
            f"model_state_dict.pt could not be loaded with torch.load(weights_only=True): "
            f"{type(error).__name__}: {error}. Save it with torch.save(model.state_dict(), path) "
            f"(`make handin` does)") from error
    if not isinstance(state_dict, dict) or not all(
            isinstance(key, str) and isinstance(value, torch.Tensor)
            for key, value in state_dict.items()):
        raise GradingError("model_state_dict.pt must hold model.state_dict(): a mapping of names "
                           "to tensors, not a checkpoint or a whole model")
    return state_dict


def check_stored_zip(path: Path) -> None:
    """Raise GradingError unless ``path`` is a zip whose entries are all stored, not compressed."""
    try:
        with zipfile.ZipFile(path) as archive:
            compressed = [info.filename for info in archive.infolist()
                          if info.compress_type != zipfile.ZIP_STORED]
    except (zipfile.BadZipFile, OSError, ValueError) as error:
        raise GradingError(f"model_state_dict.pt is not the zip file torch.save writes ({error}); "
                           f"save it with torch.save(model.state_dict(), path)") from error
    if compressed:
        raise GradingError(f"model_state_dict.pt holds compressed entries ({SHORT.repr(compressed)})"
                           f"; the grader reads only what torch.save writes (stored entries)")


def write_hidden_set(hidden_set: Path, work: Path) -> Path:
    """Write each hidden transcript as ``<work>/data/test/hidden-NNNNN.npy``; return the root."""
    lines = (hidden_set / HIDDEN_TEXT_FILE).read_text(encoding="utf-8").splitlines()
    partition = work / "data" / HIDDEN_PARTITION
    partition.mkdir(parents=True, exist_ok=True)
    for index, text in enumerate(lines):
        np.save(partition / f"hidden-{index:05d}.npy", np.array(list(text), dtype="<U1"))
    return work / "data"


def length_sorted_loader(dataset: LMDataset, num_heads: int, width: int) -> DataLoader:
    """Batches of similar lengths (little padding), each within ACTIVATION_BUDGET for attention
    weights of ``num_heads`` heads and per-position tensors of ``width`` features.

    The metric is a sum over transcripts, so neither the order nor the batching changes it.
    """
    order = sorted(range(len(dataset)), key=lambda i: len(dataset.transcripts_shifted[i]))
    batches: list[list[int]] = [[]]
    for index in order:
        length = len(dataset.transcripts_shifted[index])  # the longest so far: sorted order
        if batches[-1] and (len(batches[-1]) == MAX_BATCH_SIZE
                            or (len(batches[-1]) + 1) * length * max(num_heads * length, width)
                            > ACTIVATION_BUDGET):
            batches.append([])
        batches[-1].append(index)
    return DataLoader(dataset, batch_sampler=batches, collate_fn=dataset.collate_fn)


if __name__ == "__main__":
    main()
