# hw4p1: instructor-only
"""Real LibriSpeech transcripts end to end, as an instructor switching the course to them would.

Run: ``.venv/bin/python -m pytest -q tests/kit/test_librispeech_e2e.py`` (marked slow). It writes a
tree in LibriSpeech's layout (``<subset>/<speaker>/<chapter>/<speaker>-<chapter>.trans.txt``) with
20 utterances, builds it with ``make data LIBRISPEECH=... DATA_DIR=...`` into a temporary folder (18
train, 1 val, 1 test), then runs ``python -m hw4lib.train`` with the tiny config on it: once with
the tiny config's generation settings, which the one-transcript test split cannot meet (the run must
stop before training, with a clear error), and once with one prompt per strategy, which must train
two epochs and leave a complete run folder even though the validation split cannot give the three
per-epoch samples.
"""
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml


REPO = Path(__file__).resolve().parents[2]

# Four chapters of two speakers, five utterances each, in LibriSpeech's upper-case style.
CHAPTERS = {
    ("1272", "128104"): [
        "THE OLD MILLER WALKED SLOWLY DOWN THE LANE TOWARDS THE RIVER WHERE THE WATER RAN COLD AND CLEAR",
        "HE HAD NOT SPOKEN TO HIS BROTHER SINCE THE SPRING AND HE WONDERED WHETHER THE QUARREL WOULD EVER END",
        "AT THE BRIDGE HE STOPPED AND LOOKED BACK AT THE HOUSE ON THE HILL WITH ITS LITTLE GARDEN OF ROSES",
        "IT WAS THERE THAT HIS MOTHER HAD TAUGHT HIM TO READ BY THE LIGHT OF A SINGLE CANDLE",
        "NOBODY IN THE VILLAGE REMEMBERED HER NAME NOW BUT HE SAID IT ALOUD TO THE WIND",
    ],
    ("1272", "135031"): [
        "THE CAPTAIN'S ORDERS WERE READ TO THE CREW BEFORE THE SHIP LEFT THE HARBOUR AT DAWN",
        "FOR THREE DAYS THE SEA WAS CALM AND THE SAILORS SANG AS THEY MENDED THE NETS",
        "ON THE FOURTH DAY A GREY CLOUD ROSE IN THE WEST AND THE GULLS FLEW LOW OVER THE DECK",
        "THE MATE SAID THAT HE HAD SEEN SUCH A SKY ONCE BEFORE AND HE DID NOT LIKE IT",
        "BY NIGHTFALL THE WIND WAS HOWLING IN THE RIGGING AND THE WAVES BROKE OVER THE BOW",
    ],
    ("2035", "147961"): [
        "MISS HARTLEY OPENED THE LETTER WITH TREMBLING FINGERS AND READ IT TWICE BEFORE SHE UNDERSTOOD",
        "HER COUSIN WAS COMING FROM LONDON ON THE EVENING TRAIN AND WOULD STAY UNTIL CHRISTMAS",
        "SHE RAN TO THE KITCHEN TO TELL THE COOK THAT THERE MUST BE A FIRE IN THE BLUE ROOM",
        "THE COOK SHOOK HER HEAD AND SAID THAT THE CHIMNEY HAD NOT BEEN SWEPT FOR A YEAR",
        "THEN IT MUST BE SWEPT TODAY SAID MISS HARTLEY AND SHE WOULD HEAR NO MORE ABOUT IT",
    ],
    ("2035", "152373"): [
        "THE JUDGE LISTENED TO THE WITNESS WITHOUT MOVING AND THE ROOM GREW VERY STILL",
        "WHEN THE YOUNG MAN HAD FINISHED HIS STORY THE JUDGE ASKED HIM WHERE HE HAD BEEN THAT NIGHT",
        "I WAS AT HOME WITH MY FATHER HE ANSWERED AND MY FATHER WILL SAY THE SAME",
        "BUT YOUR FATHER IS NOT HERE SAID THE JUDGE AND THE CROWD BEGAN TO MURMUR",
        "THE LAWYER ROSE AND ASKED FOR ONE MORE DAY TO BRING THE OLD MAN BEFORE THE COURT",
    ],
}

RUN_FILES = ("config.yaml", "model_arch.txt", "lr_schedule.png", "timing.json", "test_metrics.json",
             "test_generated_results.json", "metrics/epoch_001.json", "metrics/epoch_002.json",
             "metrics/history.json", "metrics/loss.png", "metrics/perplexity.png",
             "attn/train_last_layer_epoch001.png", "attn/train_last_layer_epoch002.png",
             "text/val_greedy_epoch001.json", "text/val_greedy_epoch002.json",
             "checkpoints/checkpoint-best-metric-model.pth", "checkpoints/checkpoint-last-epoch-model.pth")


def write_librispeech_tree(root: Path) -> Path:
    """Write CHAPTERS under ``root/LibriSpeech/dev-clean`` in LibriSpeech's layout; return ``root/LibriSpeech``."""
    for (speaker, chapter), lines in CHAPTERS.items():
        folder = root / "LibriSpeech" / "dev-clean" / speaker / chapter
        folder.mkdir(parents=True)
        (folder / f"{speaker}-{chapter}.trans.txt").write_text(
            "".join(f"{speaker}-{chapter}-{index:04d} {line}\n" for index, line in enumerate(lines)))
    return root / "LibriSpeech"


def _command(args: list[str], what: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "WANDB_MODE": "disabled"}
    result = subprocess.run(args, cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    print(f"$ {' '.join(args)}  ({what})\n{result.stdout}{result.stderr}")
    return result


def _train(config: dict, path: Path) -> subprocess.CompletedProcess:
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return _command([sys.executable, "-m", "hw4lib.train", "--config", str(path), "--run-name", "libri"],
                    "train the tiny config")


@pytest.mark.slow
def test_librispeech_tree_builds_and_trains_the_tiny_config(tmp_path):
    tree = write_librispeech_tree(tmp_path / "corpus")
    data = tmp_path / "data"
    built = _command(["make", "--no-print-directory", "data", f"LIBRISPEECH={tree}", f"DATA_DIR={data}"],
                     "build the data")
    assert built.returncode == 0, f"make data failed with code {built.returncode}:\n{built.stderr[-2000:]}"
    counts = {split: len(list((data / split).glob("*.npy"))) for split in ("train", "val", "test")}
    assert counts == {"train": 18, "val": 1, "test": 1}, f"expected 18/1/1 transcripts, got {counts}"
    assert (data / ".complete").is_file() and (data / "DATA_CARD.md").is_file(), \
        f"expected .complete and DATA_CARD.md in {data}, got {sorted(p.name for p in data.iterdir())}"

    from tests.tiny_config import tiny_yaml

    config = tiny_yaml()
    # One transcript in val: the tiny config's subset (0.1) would keep none of it.
    config["data"].update(root=str(data), subset=1.0)
    config["training"].update(expts_dir=str(tmp_path / "expts"), progress_bar=False, num_threads=1)

    refused = _train(config, tmp_path / "too_many_prompts.yaml")
    assert refused.returncode == 1, f"expected exit code 1 for 4 prompts from 1 test transcript, got {refused.returncode}"
    assert "error: config section 'generation." in refused.stderr and "cannot draw 4 prompts" in refused.stderr, \
        f"expected an error naming the generation settings, got:\n{refused.stderr[-2000:]}"
    assert not (tmp_path / "expts").exists(), "the generation check must stop the run before its folder exists"

    config["generation"]["num_samples"] = 1
    trained = _train(config, tmp_path / "one_prompt.yaml")
    assert trained.returncode == 0, f"training failed with code {trained.returncode}:\n{trained.stderr[-3000:]}"
    notes = [line for line in trained.stdout.splitlines() if line.startswith("note:")]
    assert notes == ["note: the val split gives 1 of the 3 prompts for the samples after each epoch; "
                     "training goes on with those"], f"expected one note about the samples, got {notes}"
    assert "epoch 2/2" in trained.stdout, f"expected two epochs, got:\n{trained.stdout}"

    root = tmp_path / "expts" / "libri"
    missing = [name for name in RUN_FILES if not (root / name).is_file()]
    assert not missing, f"the run folder {root} lacks {missing}"
    metrics = json.loads((root / "test_metrics.json").read_text())
    assert all(math.isfinite(metrics[key]) for key in ("ce_loss_char", "perplexity_char")), \
        f"expected finite test metrics, got {metrics}"
    generations = json.loads((root / "test_generated_results.json").read_text())
    assert {name: len(samples) for name, samples in generations.items()} == {"greedy": 1, "beam": 1, "sample": 1}, \
        f"expected one test generation per strategy, got {generations}"
    samples = json.loads((root / "text" / "val_greedy_epoch002.json").read_text())
    val_text = "".join(np.load(next((data / "val").glob("*.npy"))).tolist())
    assert len(samples) == 1 and samples[0]["original"] == val_text, \
        f"expected one sample of the val transcript {val_text!r}, got {samples}"
