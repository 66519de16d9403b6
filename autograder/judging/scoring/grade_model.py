"""Measure a handed-in language model on the hidden test set with the reference code.

Run by ``autograder.judging.grade`` as a child process, from the extracted autograder (so ``hw4lib``
is the reference copy shipped in autograde.tar, never the student's)::

    python -m autograder.judging.scoring.grade_model --handin DIR --hidden-set DIR --out result.json
    \
        [--public-set DIR --compare TRANSCRIPTS SHA256 [--sample-seed SEED]]

Nothing the student wrote runs here: ``config.yaml`` is read with ``yaml.safe_load`` and checked
by ``hw4lib.config.validate_untrusted`` (exact types, the limits of ``hw4lib.handin_format``, the
parameter count on the meta device, all before anything is allocated), ``model_state_dict.pt`` is
read with ``torch.load(weights_only=True)`` (tensors only, no pickled code) and loaded strictly into
the reference ``DecoderOnlyTransformer``. The hidden set and the public test split are data roots
holding the partition ``test/`` as ``make data`` writes it (one ``.npy`` file per transcript), read
by the reference ``LMDataset`` and batched by ``hw4lib.data.batch_loader`` as in training;
``evaluate_language_model`` (the trainer's own metric) gives the perplexity.

Writes ``{"perplexity_char": ..., ...}`` to ``--out`` and exits 0, or ``{"error": "<what went wrong
and how to fix it>"}`` and exits 1.

The judge usually runs :func:`main` in a child forked from itself before it computed anything
(``autograder.judging.isolation.parked_child.ParkedChild``), which imported torch and tqdm with the
judge's environment: :func:`main` reads again what they read from it (:func:`follow_environment`).
"""
from __future__ import annotations

import argparse
import hashlib
import math
import os
import time
import zipfile
from functools import partialmethod
from pathlib import Path

import torch
import yaml
from torch.utils.data import DataLoader
from tqdm import tqdm

from autograder.judging.scoring import weights_fingerprint
from autograder.judging.isolation.autograder_paths import PUBLIC_SET
from autograder.judging.scoring.lm_diagnosis import tokenizer_hint
from autograder.judging.isolation.processes import MAX_ERROR_CHARS
from hw4lib.config import ConfigError, short_repr, validate_untrusted, vocab_size_of
from hw4lib.data import H4Tokenizer, LMDataset, batch_loader
from hw4lib.data.tokenizer import DEFAULT_TOKEN_MAP
from hw4lib.file_io import read_untrusted_json, write_json
from hw4lib.handin_format import (CONFIG_FILE, RUN_CARD_FILE, STATE_DICT_FILE, card_losses,
                                  config_digest, lowest_per_character, sample_transcripts,
                                  transcripts_sha256)
from hw4lib.model import DecoderOnlyTransformer
from hw4lib.model.state_dict_contract import StateDictMismatch, check_shapes
from hw4lib.trainers.metrics import (evaluate_language_model, evaluation_batch_size,
                                     transcript_losses)

# The seed of a config.yaml that names none (the trainer writes the seed it used into every run's
# config.yaml): the initialisation's seed for the fingerprint, which decides no score.
DEFAULT_SEED = 0
PARTITION = "test"  # the partition of the --hidden-set and --public-set data roots


class GradingError(Exception):
    """The handed-in model cannot be evaluated; the message says why and what to fix."""


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Evaluate a handed-in model on the hidden set.")
    parser.add_argument("--handin", type=Path, required=True,
                        help=f"folder with {CONFIG_FILE} and {STATE_DICT_FILE}")
    parser.add_argument("--hidden-set", type=Path, required=True,
                        help=f"data root whose partition {PARTITION}/ holds the hidden set")
    parser.add_argument("--public-set", type=Path,
                        help=f"data root whose partition {PARTITION}/ holds the public test split")
    parser.add_argument("--compare", nargs=2, metavar=("TRANSCRIPTS", "SHA256"),
                        help="also measure the model on the first TRANSCRIPTS transcripts of "
                             "--public-set if their transcripts_sha256 is SHA256 (the test set "
                             "the handin's test_metrics.json measured, as its run card names it)")
    parser.add_argument("--sample-seed", type=int,
                        help="with --compare: measure only the transcripts this seed draws "
                             "(hw4lib.handin_format.sample_transcripts), one by one")
    parser.add_argument("--out", type=Path, required=True, help="where to write the result JSON")
    args = parser.parse_args(argv)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    if (args.compare is None) != (args.public_set is None) or (
            args.compare is not None and not args.compare[0].isdigit()):
        parser.error("--compare TRANSCRIPTS SHA256 (TRANSCRIPTS a count) goes with --public-set")
    if args.sample_seed is not None and args.compare is None:
        parser.error("--sample-seed goes with --compare")
    compare = ((args.public_set, int(args.compare[0]), args.compare[1], args.sample_seed)
               if args.compare else None)
    follow_environment()
    start = time.monotonic()
    try:
        result = evaluate_handin(args.handin, args.hidden_set, compare)
    except GradingError as error:
        message = str(error)[:MAX_ERROR_CHARS]
        print(message)
        write_json(args.out, {"error": message})
        raise SystemExit(1) from None
    result["seconds"] = round(time.monotonic() - start, 2)
    print(f"evaluated {result['num_parameters']:,} parameters ({result['token_type']} tokenizer) "
          f"in {result['seconds']} s")
    write_json(args.out, result)


def follow_environment() -> None:
    """What torch and tqdm read from the environment when imported, taken from this process's
    environment now (a forked child imported them with its parent's): the torch threads
    ``OMP_NUM_THREADS`` asks for, and no progress bar under ``TQDM_DISABLE`` (a bar would print
    the hidden set's size into the feedback)."""
    threads = os.environ.get("OMP_NUM_THREADS", "")
    if threads.isdigit() and int(threads) > 0 and int(threads) != torch.get_num_threads():
        torch.set_num_threads(int(threads))
    if os.environ.get("TQDM_DISABLE"):  # tqdm's own rule: any value but "" disables
        tqdm.__init__ = partialmethod(tqdm.__init__, disable=True)


def evaluate_handin(handin: Path, hidden_set: Path, compare: tuple | None = None,
                    probe_set: Path = PUBLIC_SET) -> dict:
    """Rebuild the model of ``handin``; return evaluate_language_model's metrics on the hidden set.

    Its ``weights_fingerprint`` carries what the model computes on the probe batch of
    ``probe_set`` (a data root, the public test split) when that folder exists
    (``weights_fingerprint.probe_outputs``).

    With ``compare`` = (public set folder, transcripts, sha256[, sample seed]): also what
    compare_with_report measures on the first ``transcripts`` transcripts of the public test
    split, which is what the handin's test_metrics.json measured when their
    ``transcripts_sha256`` is ``sha256``: ``compared_perplexity_char`` (no seed) or
    ``compared_sample`` (the seed's sample, one by one); otherwise ``compare_note`` says why
    nothing was compared.

    Raises GradingError naming the problem when the handin cannot be evaluated.
    """
    started = time.monotonic()
    torch.manual_seed(0)  # pragma: no mutate (equivalent: only the model's initialisation draws after it, and the handin's weights replace it)
    config, seed = load_config(handin / CONFIG_FILE)
    token_type = config["tokenization"]["token_type"]
    tokenizer = H4Tokenizer(DEFAULT_TOKEN_MAP, token_type)
    model_config = config["model"]
    state_dict = load_state_dict(handin / STATE_DICT_FILE)
    try:
        check_shapes({key: value.shape for key, value in state_dict.items()}, model_config,
                     tokenizer.vocab_size, what=f"model_state_dict.pt ({token_type} tokenizer, "
                                                f"vocab_size {tokenizer.vocab_size})")
    except StateDictMismatch as error:
        fit = tokenizer_hint(token_type, {key: tuple(value.shape) for key, value in
                                          state_dict.items()},
                             {name: vocab_size_of(name) for name in DEFAULT_TOKEN_MAP})
        raise GradingError(f"{error} `make handin` refuses such a model: pack with it."
                           + (f" Likely cause: {fit}." if fit else "")) from error
    model = DecoderOnlyTransformer(**model_config, num_classes=tokenizer.vocab_size)
    try:
        model.load_state_dict(state_dict, strict=True)  # pragma: no mutate (equivalent: check_shapes refused any other key or shape)
    except RuntimeError as error:
        raise GradingError(
            f"model_state_dict.pt does not fit the model config.yaml describes "
            f"({token_type} tokenizer, vocab_size {tokenizer.vocab_size}): {error}. Hand in the "
            f"config.yaml of the run the weights come from (`make handin`)") from error

    outputs = (weights_fingerprint.probe_outputs(model, read_partition(probe_set, tokenizer))
               if (probe_set / PARTITION).is_dir() else None)
    fingerprint = weights_fingerprint.fingerprint(
        state_dict, initial_state(model_config, tokenizer.vocab_size, seed), outputs)
    loaded = time.monotonic()
    metrics, num_utterances = measure(model, model_config, read_partition(hidden_set, tokenizer))
    measured = time.monotonic()
    if not math.isfinite(metrics["perplexity_char"]):
        raise GradingError(f"the model's perplexity is {metrics['perplexity_char']} (NaN or "
                           f"infinite weights or logits)")
    if compare is not None:
        card = read_untrusted_json(handin / RUN_CARD_FILE)
        metrics.update(compare_with_report(model, model_config, tokenizer, *compare,
                                           card_nll=(card_losses(card) or (None,))[0]))
    # what each step cost (bench/bench_regrade.py reports them)
    phases = {"load": loaded - started, "hidden": measured - loaded,
              "compare": time.monotonic() - measured}
    return {**metrics, "phase_seconds": {name: round(value, 3) for name, value in phases.items()}, "token_type": token_type, "num_utterances": num_utterances,
            "num_parameters": sum(p.numel() for p in model.parameters()),
            "dropout_active": model_config["dropout"] > 0 or model_config["layer_drop_rate"] > 0,
            "state_dict_sha256": hashlib.sha256((handin / STATE_DICT_FILE).read_bytes()).hexdigest(),
            "config_sha256": config_digest(config), "weights_fingerprint": fingerprint}


def load_config(path: Path) -> tuple[dict, int]:
    """(config.yaml checked by validate_untrusted: {"tokenization": {"token_type"}, "model"},
    its seed: the top-level ``seed`` when it is an int the trainer accepts, else the default's)."""
    try:
        config = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (yaml.YAMLError, UnicodeDecodeError) as error:
        raise GradingError(f"config.yaml is not valid YAML: {error}") from error
    try:
        validated = validate_untrusted(config)
    except ConfigError as error:
        raise GradingError(f"config.yaml: {error}") from error
    seed = config.get("seed")
    return validated, seed if type(seed) is int and seed in range(2**63) else DEFAULT_SEED


def initial_state(model_config: dict, vocab_size: int, seed: int) -> dict[str, torch.Tensor]:
    """The state dict the reference model has when the trainer builds it under ``seed`` (its
    initialisation: the trainer seeds, then builds the model), the global RNG left as it was."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return DecoderOnlyTransformer(**model_config, num_classes=vocab_size).state_dict()


def load_state_dict(path: Path) -> dict:
    """The tensors of model_state_dict.pt; anything torch.load's weights_only mode refuses fails.

    torch.save writes a zip of stored (uncompressed) entries; a compressed entry could inflate to
    far more than the file's size, so it is refused before torch reads anything.
    """
    check_stored_zip(path)
    try:
        state_dict = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as error:  # unpickling errors come in many types
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
        raise GradingError(f"model_state_dict.pt holds compressed entries "
                           f"({short_repr(compressed)}); the grader reads only what torch.save "
                           f"writes (stored entries)")


def compare_with_report(model: DecoderOnlyTransformer, model_config: dict, tokenizer: H4Tokenizer,
                        public_set: Path, count: int, digest: str, seed: int | None = None,
                        card_nll: list[float] | None = None) -> dict:
    """What the weights give on the first ``count`` public test transcripts when they are the set
    the run card names (``digest``), else ``{"compare_note": why not}``.

    With ``seed`` (a run card holding each transcript's loss, ``card_nll``): ``{"compared_sample":
    {"seed", "transcripts": count, "characters": of the count transcripts, "drawn", "lowest",
    "indices", "names", "nll" (nats), "tokens", "chars"}}``, the lists over ``indices``: the
    transcripts ``sample_transcripts(count, seed)`` draws (``drawn``) and the ones whose
    ``card_nll`` per character is lowest (``lowest``), which alone are measured. Without (an older
    card): ``{"compared_perplexity_char": ...}`` of the whole set, which costs what the handin's own
    evaluation did."""
    public = read_partition(public_set, tokenizer)
    if not 0 < count <= len(public) or transcripts_sha256(public.transcripts[:count]) != digest:
        return {"compare_note": f"the test set the run card names ({count} transcripts) is not the "
                                f"start of the public test split: it was measured on other data "
                                f"(data built by another `make data SEED=...`, or from other text?)"}
    too_long = {"compare_note": "a transcript of that test set is longer than the model's max_len"}
    if seed is not None:
        if max(len(shifted) for shifted in public.transcripts_shifted[:count]) > model.max_len:
            return too_long
        drawn = sample_transcripts(count, seed)
        lowest = (lowest_per_character(card_nll, [len(text) for text in public.transcripts[:count]])
                  if card_nll is not None and len(card_nll) == count else [])
        indices = sorted(set(drawn) | set(lowest))
        width = max(model_config["d_ff"], model_config["d_model"], tokenizer.vocab_size)
        batch_size = evaluation_batch_size(public.text_max_len, model_config["num_heads"], width)
        return {"compared_sample": {
            "seed": seed, "transcripts": count, "drawn": drawn, "lowest": lowest,
            "characters": sum(len(text) for text in public.transcripts[:count]),
            "indices": indices, "names": [public.text_files[i].stem for i in indices],
            "nll": transcript_losses(model, public, indices, batch_size, torch.device("cpu")),
            "tokens": [len(public.transcripts_golden[i]) for i in indices],
            "chars": [len(public.transcripts[i]) for i in indices]}}
    public = first_transcripts(public, count)
    try:
        compared, _ = measure(model, model_config, public)
    except GradingError:
        return too_long
    return {"compared_perplexity_char": compared["perplexity_char"]}


def read_partition(root: Path, tokenizer: H4Tokenizer) -> LMDataset:
    """The reference LMDataset of the partition ``root/PARTITION``, as the trainer reads its test
    split."""
    return LMDataset(PARTITION, {"root": str(root), "subset": 1.0}, tokenizer)


def first_transcripts(dataset: LMDataset, count: int) -> LMDataset:
    """The LMDataset of the first ``count`` (at most ``len(dataset)``) transcripts of
    ``dataset``'s partition. LMDataset keeps the first ``int(subset * files)`` files: half a file
    of margin keeps exactly ``count`` whatever the rounding of ``subset``."""
    subset = min(1.0, (count + 0.5) / len(dataset))
    return LMDataset(dataset.partition, {**dataset.config, "subset": subset}, dataset.tokenizer)


def measure(model: DecoderOnlyTransformer, model_config: dict,
            dataset: LMDataset) -> tuple[dict, int]:
    """(evaluate_language_model's metrics, transcripts) of ``model`` on ``dataset``;
    GradingError when one transcript is longer than the model's max_len."""
    if dataset.text_max_len > model.max_len:  # its length is the hidden set's: never shown
        raise GradingError(f"the model's max_len is {model.max_len}, shorter than some hidden test "
                           f"transcripts with the {dataset.tokenizer.token_type} tokenizer: train "
                           f"with a larger model.max_len (the default config's is enough)")
    width = max(model_config["d_ff"], model_config["d_model"], dataset.tokenizer.vocab_size)
    loader = evaluation_loader(dataset, model_config["num_heads"], width)
    return evaluate_language_model(model, loader, torch.device("cpu")), len(dataset)


def evaluation_loader(dataset: LMDataset, num_heads: int, width: int) -> DataLoader:
    """The training code's length-bucketed loader, in a fixed order, with batches small enough that
    the longest transcript's attention weights (``num_heads`` heads) and per-position tensors
    (``width`` features) stay within metrics.ACTIVATION_BUDGET.

    The metric is a sum over transcripts, so neither the order nor the batching changes it.
    """
    return batch_loader(dataset, evaluation_batch_size(dataset.text_max_len, num_heads, width),
                        shuffle=False)


if __name__ == "__main__":
    main()
