"""Pack ``handin.tar`` from a finished run: ``python -m hw4lib.handin [--run NAME]``.

``make handin`` calls this; ``make handin RUN=NAME`` picks a run, otherwise the complete run folder
under ``expts/`` modified last is packed (a run interrupted or still training is skipped, named). The
archive holds::

    handin/mytorch/                      your mytorch package (.py files only)
    handin/test_metrics.json             from the run folder
    handin/test_generated_results.json   from the run folder
    handin/model_arch.txt                from the run folder
    handin/config.yaml                   from the run folder
    handin/model_state_dict.pt           the best checkpoint's model_state_dict, tensors only
    handin/run_card.json                 provenance: digests, parameters, seed, epochs, metrics,
                                         the test set test_metrics.json measured and what the
                                         packed weights give on each of its transcripts

The autograder rebuilds the model from ``config.yaml`` and scores ``model_state_dict.pt`` on its own
data, so the weights must come from the same run as the config. The packer applies the grader's own
rules (``hw4lib/handin_format.py``: names and size limits; ``hw4lib.config.validate_untrusted``:
the model it agrees to build; ``hw4lib.model.state_dict_contract``: the names and shapes of the
tensors its reference model loads), so nothing is packed that the grader would refuse: the error
names the problem and says how to fix it.
"""
from __future__ import annotations

import argparse
import hashlib
import io
import json
import math
import subprocess
import sys
import tarfile
import warnings
from collections import OrderedDict
from pathlib import Path

import numpy
import torch
import yaml

from hw4lib.config import ConfigError, Training, validate_untrusted, vocab_size_of
from hw4lib.data import H4Tokenizer, LMDataset
from hw4lib.data.tokenizer import DEFAULT_TOKEN_MAP
from hw4lib.file_io import read_json, read_untrusted_json
from hw4lib.grading_numbers import (FULL_MARKS_PPL, LM_POINTS, MYTORCH_RUBRIC, ZERO_MARKS_PPL,
                                    lm_score)
from hw4lib.handin_format import (CONFIG_FILE, GENERATIONS_FILE, HANDIN_DIR, HANDIN_TAR,
                                  MAX_MEMBERS, MAX_MYTORCH_BYTES, MAX_MYTORCH_DEPTH, METRICS_FILE,
                                  MYTORCH_DIR,
                                  REPORTED_TOLERANCE, RUN_CARD_FILE, RUN_FILES, STATE_DICT_FILE,
                                  TIMING_FILE,
                                  card_perplexity, config_digest, is_mytorch_source, size_limit,
                                  transcripts_sha256)
from hw4lib.model import DecoderOnlyTransformer
from hw4lib.model.state_dict_contract import StateDictMismatch, check_shapes, count_elements
from hw4lib.trainers.base_trainer import BEST_CHECKPOINT_PATH
from hw4lib.trainers.metrics import evaluation_batch_size, transcript_losses

EXPTS_DIR = Training.model_fields["expts_dir"].default  # where runs are, unless a config moved them
REQUIRED_METRICS = ("ce_loss_token", "ce_loss_char", "perplexity_token", "perplexity_char")


class HandinError(Exception):
    """The run or the working tree cannot be packed; the message says what to fix."""


def missing_files(folder: Path) -> list[str]:
    """The files of a finished run that ``folder`` lacks: a run interrupted, or still training
    (training removes the test results it would make stale), lacks its test results."""
    return [name for name in (*RUN_FILES, BEST_CHECKPOINT_PATH) if not (folder / name).is_file()]


def find_run(expts: Path, run: str | None = None) -> Path:
    """The run folder to pack: ``expts/<run>`` (or the folder ``run``), else the complete run
    folder under ``expts`` modified last; newer incomplete ones are named and skipped."""
    if run is not None:
        folder = expts / run if (expts / run).is_dir() else Path(run)
        if not folder.is_dir():
            choices = sorted(p.name for p in expts.glob("*") if p.is_dir())
            raise HandinError(f"run {run!r} not found under {expts}/; runs there: "
                              f"{choices or 'none'}")
        return folder
    runs = [p for p in expts.iterdir() if p.is_dir()] if expts.is_dir() else []
    if not runs:
        raise HandinError(f"no run folder under {expts}/: train a model first "
                          f"(make train, or the notebook's training cells)")
    skipped = []
    for folder in sorted(runs, key=lambda p: p.stat().st_mtime, reverse=True):
        if not missing_files(folder):
            if skipped:
                print(f"skipped newer incomplete runs (interrupted or still training): "
                      f"{', '.join(skipped)}")
            return folder
        skipped.append(folder.name)
    details = "; ".join(f"{name} lacks {', '.join(missing_files(expts / name))}" for name in skipped)
    raise HandinError(f"no complete run under {expts}/ ({details}). Finish a run: training, then "
                      f"the evaluation (make train does both; in the notebook, the evaluation cells "
                      f"write test_*.json)")


def check_run(folder: Path) -> dict:
    """The run's config as the grader reads it; HandinError naming every file the run folder
    lacks or has in a wrong form."""
    missing = missing_files(folder)
    if missing:
        raise HandinError(f"run {folder} is incomplete, missing: {', '.join(missing)}. Finish "
                          f"training and the evaluation cells (they write test_*.json), or pick "
                          f"another run with --run NAME (make handin RUN=NAME)")
    for name in RUN_FILES:
        check_size(folder / name, name, (folder / name).stat().st_size)
    try:
        metrics = read_json(folder / METRICS_FILE)
        read_json(folder / GENERATIONS_FILE)
    except json.JSONDecodeError as error:
        raise HandinError(f"{folder}: a test_*.json file is not valid JSON: {error}") from error
    absent = [key for key in REQUIRED_METRICS if key not in metrics]
    if absent:
        raise HandinError(f"{folder / METRICS_FILE} lacks {absent}; rerun the evaluation")
    try:
        return validate_untrusted(yaml.safe_load((folder / CONFIG_FILE).read_text()))
    except (ConfigError, yaml.YAMLError) as error:
        raise HandinError(f"{folder / CONFIG_FILE} would be refused by the grader, which rebuilds "
                          f"the model from it: {error}") from error


def check_size(path: Path, name: str, size: int) -> None:
    """HandinError unless ``size`` bytes fit the grader's limit for the member ``handin/<name>``."""
    limit = size_limit(name)
    if size > limit:
        raise HandinError(f"{path} is {size / 1e6:.1f} MB, over the grader's "
                          f"{limit / 1e6:.1f} MB limit for {name}")


def extract_state_dict(checkpoint_path: Path, config: dict) -> tuple[bytes, dict]:
    """(``torch.save`` bytes of the checkpoint's ``model_state_dict``, the checkpoint's epoch,
    best_metric and config). The tensors are CPU tensors keyed by name, which
    ``torch.load(..., weights_only=True)`` accepts, with the names and shapes the grader's reference
    model has for ``config`` (the validated run config)."""
    # The checkpoint is the student's own file and holds RNG states and the config besides tensors.
    checkpoint = torch.load(checkpoint_path, map_location="cpu", weights_only=False)
    state = checkpoint.get("model_state_dict") if isinstance(checkpoint, dict) else None
    if not isinstance(state, dict) or not state:
        raise HandinError(f"{checkpoint_path} has no model_state_dict; it must be a checkpoint "
                          f"written by the trainer's save_checkpoint")
    bad = [key for key, value in state.items() if not isinstance(value, torch.Tensor)]
    if bad:
        raise HandinError(f"{checkpoint_path}: model_state_dict entries that are not tensors: "
                          f"{bad}")
    token_type = config["tokenization"]["token_type"]
    try:
        check_shapes({key: value.shape for key, value in state.items()}, config["model"],
                     vocab_size_of(token_type),
                     what=f"the model_state_dict of {checkpoint_path} ({token_type} tokenizer)")
    except StateDictMismatch as error:
        raise HandinError(f"{error}\nThe grader would score this model 0. Fix the modules "
                          f"named above (their tests: python -m tests.test_transformer_decoder_only "
                          f"and the sublayer tests), then train again.") from error
    # detach().cpu() keeps storages shared where the model shares them (tied weights stay one copy)
    tensors = OrderedDict((key, value.detach().cpu()) for key, value in state.items())
    buffer = io.BytesIO()
    torch.save(tensors, buffer)
    # what the grader will do
    torch.load(io.BytesIO(buffer.getvalue()), weights_only=True)  # pragma: no mutate (equivalent: the tensors saved just above load either way)
    return buffer.getvalue(), {key: checkpoint.get(key) for key in ("epoch", "best_metric", "config")}


def run_card(folder: Path, config: dict, state_dict: bytes, checkpoint: dict,
             root: Path) -> dict:
    """Provenance of the packed run, for the course staff (the grader flags a handin whose files
    disagree with it; it changes no score). HandinError when the checkpoint was trained with
    another model or tokenizer than the run's config.yaml says. ``root``: the folder a relative
    ``data.root`` of the run's config is read from (where training ran)."""
    trained = checkpoint.get("config")
    try:
        trained = validate_untrusted(trained) if isinstance(trained, dict) else None
    except ConfigError:
        trained = None
    if trained is not None and config_digest(trained) != config_digest(config):
        raise HandinError(f"{folder / BEST_CHECKPOINT_PATH} was trained with another model or "
                          f"tokenizer than {folder / CONFIG_FILE} says: the grader would build the "
                          f"wrong model. Pack the run whose config.yaml trained these weights.")
    metrics = read_json(folder / METRICS_FILE)
    timing_path = folder / TIMING_FILE
    timing = read_json(timing_path) if timing_path.is_file() else {}
    raw = yaml.safe_load((folder / CONFIG_FILE).read_text())
    found = read_measured_test_set(raw, metrics, root, config["tokenization"]["token_type"])
    test_set = None
    if found is not None:
        test_set, dataset = found
        reported = metrics.get("perplexity_char")
        losses = measure_card_losses(dataset, config, state_dict,
                                 reported if isinstance(reported, float) else None)
        test_set.update(losses or {})
    return {"state_dict_sha256": hashlib.sha256(state_dict).hexdigest(),
            "config_sha256": config_digest(config),
            "parameters": count_elements(config["model"], vocab_size_of(
                config["tokenization"]["token_type"]))[0],
            "seed": raw.get("seed") if isinstance(raw, dict) else None,
            "epochs": checkpoint.get("epoch"),
            "wall_seconds": timing.get("total_seconds"),
            "val_perplexity_char": checkpoint.get("best_metric"),
            "test_perplexity_char": metrics.get("perplexity_char"),
            "test_set": test_set,
            "versions": {"python": sys.version.split()[0], "torch": torch.__version__,
                         "numpy": numpy.__version__}}


def measured_test_set(raw_config, metrics: dict, root: Path) -> dict | None:
    """What test_metrics.json measured: ``{"split", "subset", "data_seed", "transcripts",
    "characters", "sha256"}`` of the test partition the run's config names (its ``data`` section,
    read as the trainer read it), so that the grader measures the packed weights on exactly that
    set. None, with a note, when the set cannot be read again or is not the one measured (its
    character count differs from test_metrics.json's ``num_chars``)."""
    found = read_measured_test_set(raw_config, metrics, root, "char")
    return found[0] if found is not None else None


def read_measured_test_set(raw_config, metrics: dict, root: Path,
                           token_type: str) -> tuple[dict, LMDataset] | None:
    """(measured_test_set's description, the set read with the ``token_type`` tokenizer) or None,
    with a note, as measured_test_set."""
    data = raw_config.get("data") if isinstance(raw_config, dict) else None
    if not isinstance(data, dict) or not isinstance(data.get("root"), str):
        print("note: config.yaml has no data.root; the grader will not compare test_metrics.json "
              "with the packed weights")
        return None
    data_root = Path(data["root"]) if Path(data["root"]).is_absolute() else root / data["root"]
    split, subset = data.get("test_partition", "test"), data.get("subset", 1.0)
    try:
        with warnings.catch_warnings():  # the trainer warned of the tokenizer's coverage already
            warnings.simplefilter("ignore")
            dataset = LMDataset(split, {"root": str(data_root), "subset": subset},
                                H4Tokenizer(DEFAULT_TOKEN_MAP, token_type))
    except Exception as error:  # noqa: BLE001 - the student's LMDataset, or data since removed
        print(f"note: the test set of config.yaml ({data_root}/{split}, subset {subset}) could not "
              f"be read ({type(error).__name__}: {error}); the grader will not compare "
              f"test_metrics.json with the packed weights")
        return None
    if metrics.get("num_chars") != dataset.total_chars:
        print(f"note: test_metrics.json measured {metrics.get('num_chars')} characters, the test "
              f"set of config.yaml now holds {dataset.total_chars} (was the data rebuilt?); the "
              f"grader will not compare test_metrics.json with the packed weights")
        return None
    built = read_untrusted_json(data_root / ".complete")  # what `make data` built it from
    return {"split": split, "subset": subset,
            "data_seed": built.get("seed") if isinstance(built, dict) else None,
            "transcripts": len(dataset.transcripts), "characters": dataset.total_chars,
            "sha256": transcripts_sha256(dataset.transcripts)}, dataset


def measure_card_losses(dataset: LMDataset, config: dict, state_dict: bytes,
                    reported: float | None) -> dict | None:
    """``{"transcript_nll": [nats], "transcript_tokens": [targets], "total_nll": their sum}`` of
    the packed weights on each transcript of ``dataset`` (in its order), measured here on the CPU
    in float32 with the run's model code, so that the grader can re-measure any of them and
    compare one by one. None, with a note, when the model cannot be evaluated here (the grader
    then re-measures the whole set). A note, not a refusal, when the total is more than
    REPORTED_TOLERANCE from test_metrics.json's ``reported`` perplexity: the grader will flag it.
    """
    model_config = config["model"]
    vocab_size = vocab_size_of(config["tokenization"]["token_type"])
    print(f"measuring the packed weights on the {len(dataset)} test transcripts, one loss each "
          f"for the run card (the grader re-measures a sample of them)")
    try:
        with torch.random.fork_rng(devices=[]):
            model = DecoderOnlyTransformer(**model_config, num_classes=vocab_size)
        model.load_state_dict(torch.load(io.BytesIO(state_dict), weights_only=True), strict=True)  # pragma: no mutate (equivalent: check_shapes matched these tensors to this model)
        width = max(model_config["d_ff"], model_config["d_model"], vocab_size)
        batch_size = evaluation_batch_size(dataset.text_max_len, model_config["num_heads"], width)
        nll = transcript_losses(model, dataset, range(len(dataset)), batch_size, "cpu")
    except Exception as error:  # noqa: BLE001 - the student's model code
        print(f"note: the packed weights could not be evaluated on the test set here "
              f"({type(error).__name__}: {error}); the run card records no per-transcript losses "
              f"and the grader re-measures the whole test set")
        return None
    total = math.fsum(nll)
    measured = card_perplexity(total, dataset.total_chars)
    if reported is not None and not abs(reported - measured) <= REPORTED_TOLERANCE * measured:
        print(f"note: test_metrics.json reports a test perplexity of {reported:.4f}; the packed "
              f"weights give {measured:.4f} on the same transcripts. The grader flags this for "
              f"the staff: was test_metrics.json measured on other weights than the best "
              f"checkpoint (the last epoch's?), or in training mode?")
    return {"transcript_nll": nll, "transcript_tokens": [len(golden) for golden in
                                                         dataset.transcripts_golden],
            "total_nll": total}


def mytorch_files(root: Path) -> list[Path]:
    """The .py files of ``root/mytorch`` the grader imports, sorted; HandinError if one is too big
    or all of them are. Others (caches, names that are not module names) are skipped, with a note.
    """
    package = root / MYTORCH_DIR
    if not (package / "__init__.py").is_file():
        raise HandinError(f"{package}/__init__.py not found: run make handin from the repository "
                          f"root (or pass --root)")
    files, total = [], 0
    for path in sorted(p for p in package.rglob("*.py") if "__pycache__" not in p.parts):
        name = path.relative_to(root).as_posix()
        if not is_mytorch_source(name):
            print(f"skipped {name}: not a module name (or more than {MAX_MYTORCH_DEPTH} folders "
                  f"deep), the grader would not import it")
            continue
        size = path.stat().st_size
        check_size(path, name, size)
        files.append(path)
        total += size
    if total > MAX_MYTORCH_BYTES:
        raise HandinError(f"{package} holds {total / 1e6:.1f} MB of .py files, over the grader's "
                          f"{MAX_MYTORCH_BYTES / 1e6:.1f} MB limit for {MYTORCH_DIR}/")
    return files


def pack(root: Path, run: str | None = None, out: Path | None = None) -> list[tuple[str, int]]:
    """Write ``out`` (default ``root/handin.tar``) from the chosen run of ``root/expts``.

    Returns [(name in the archive, size in bytes)]. The archive is written to a temporary name and
    renamed, so a failed pack never leaves a half-written handin.tar.
    """
    folder = find_run(root / EXPTS_DIR, run)
    config = check_run(folder)
    members: list[tuple[str, bytes]] = [
        (path.relative_to(root).as_posix(), path.read_bytes()) for path in mytorch_files(root)
    ]
    members += [(name, (folder / name).read_bytes()) for name in RUN_FILES]
    state_dict, checkpoint = extract_state_dict(folder / BEST_CHECKPOINT_PATH, config)
    check_size(folder / BEST_CHECKPOINT_PATH, STATE_DICT_FILE, len(state_dict))
    members.append((STATE_DICT_FILE, state_dict))
    card = run_card(folder, config, state_dict, checkpoint, root)
    members.append((RUN_CARD_FILE, json.dumps(card, indent=1, default=str).encode()))  # pragma: no mutate (equivalent: the grader parses the card; its indentation is not read)
    members = [(f"{HANDIN_DIR}/{name}", data) for name, data in members]
    if len(members) > MAX_MEMBERS:
        raise HandinError(f"the handin would hold {len(members)} files, over the grader's limit "
                          f"of {MAX_MEMBERS}: remove stray .py files from {MYTORCH_DIR}/")
    out = out or root / HANDIN_TAR
    partial = out.with_name(out.name + ".partial")
    with tarfile.open(partial, "w") as tar:
        for name, data in members:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            info.mode = 0o644
            tar.addfile(info, io.BytesIO(data))
    partial.replace(out)
    print(f"packed run {folder} into {out}:")
    for name, data in members:
        print(f"  {len(data):>12,d} B  {name}")
    print(f"  {out.stat().st_size:>12,d} B  total")
    print(grade_outlook(read_json(folder / METRICS_FILE), local_mytorch_points(root)))
    return [(name, len(data)) for name, data in members]


def local_mytorch_points(root: Path) -> dict[str, float] | None:
    """{category: points} that ``python -m tests.test_mytorch --json`` reports in ``root`` (the
    local tests), or None when they could not run there."""
    try:
        run = subprocess.run([sys.executable, "-m", "tests.test_mytorch", "--json"], cwd=root,
                             capture_output=True,
                             text=True, timeout=600)  # pragma: no mutate (equivalent: json reads bytes too; no test waits 10 minutes)
        scores = json.loads(run.stdout.strip().splitlines()[-1])["scores"]
    except (OSError, subprocess.TimeoutExpired, IndexError, KeyError, ValueError):
        return None
    return scores if set(scores) == set(MYTORCH_RUBRIC) else None


def grade_outlook(metrics: dict, mytorch: dict[str, float] | None) -> str:
    """What this run would earn if the grader's hidden sets gave the numbers measured here:
    the language model's points for the public test set's perplexity (``metrics``, the run's
    test_metrics.json; the grader's own curve, ``lm_score``) and the local mytorch points
    (``mytorch``: {category: points, None for a category with a failing test}; None when the
    local tests did not run)."""
    perplexity = metrics.get("perplexity_char")
    lm = lm_score(perplexity)
    total_points = LM_POINTS + sum(MYTORCH_RUBRIC.values())
    lines = ["expected grade (an estimate: the grader scores your model on its own hidden test set "
             "and your mytorch with its own hidden tests; those decide):",
             f"  language model: test perplexity per character {perplexity:.4f} on the public test "
             f"set; pass mark {FULL_MARKS_PPL:g} ({LM_POINTS:g} points), 0 points at "
             f"{ZERO_MARKS_PPL:g} or above: {lm:g}/{LM_POINTS:g}"]
    if mytorch is None:
        lines.append("  mytorch: not measured (python -m tests.test_mytorch did not run here)")
        return "\n".join(lines)
    failing = [category for category, points in mytorch.items() if points is None]
    earned = round(sum(points for points in mytorch.values() if points is not None), 2)
    passing = sum(MYTORCH_RUBRIC[c] for c in mytorch if c not in failing)
    lines.append(f"  mytorch (python -m tests.test_mytorch): {earned:g}/{passing:g} from the "
                 f"categories whose local tests all pass"
                 + (f"; {', '.join(failing)} fail them: the hidden tests give those partial "
                    f"points of their own" if failing else ""))
    lines.append(f"  total: {round(lm + earned, 2):g}/{total_points:g}"
                 + (f" plus what the hidden tests give {', '.join(failing)}" if failing else ""))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Pack handin.tar from a finished run.")
    parser.add_argument("--run", help="run folder name under expts/ (default: the latest)")
    parser.add_argument("--root", type=Path, default=Path.cwd(),
                        help="repository root holding expts/ and mytorch/ (default: .)")
    parser.add_argument("--out", type=Path, help="archive path (default: <root>/handin.tar)")
    args = parser.parse_args(argv)
    try:
        pack(args.root, args.run, args.out)
    except HandinError as error:
        sys.exit(f"handin: nothing packed: {error}")


if __name__ == "__main__":
    main()
