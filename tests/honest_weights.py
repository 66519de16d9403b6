# hw4p1: instructor-only
"""Honest independent trainings, for the shared-weights tolerance and the hidden-set margin.

    python -m tests.honest_weights        (prints the tables of docs/results.md, "Shared weights"
                                           and "Reported versus hidden perplexity")

Small trainings of the class fixture's model size (``tests.class_fixture.SMALL``): different
seeds, different data subsets, and (the dangerous case: most students keep the default seed) the
same seed with other hyperparameters. Each is packed by ``make handin``'s own code; the handins
are cached under ``$HW4P1_CACHE`` (default ``~/.cache/hw4p1``) keyed by the sha256 of what they
are made from, so only the first call trains. Each training also records the state dict its model
had when built, so the reference initialisation the fingerprint subtracts is checked against the
one training used.
"""
from __future__ import annotations

import hashlib
import json
import math
import shutil
import tarfile
import tempfile
from pathlib import Path

import torch

from tests.class_fixture import CACHE, REPO, SMALL, inputs_digest

FOLDER = CACHE.parent / "honest-weights"
# name: (seed, overrides of SMALL)
TRAININGS = {
    "s11": (11, {"data.subset": 0.04}),
    "s22": (22, {"data.subset": 0.02}),
    "s0": (0, {"data.subset": 0.04}),
    "s0-lr": (0, {"data.subset": 0.04, "optimizer.lr": 0.001}),
    "s0-subset": (0, {"data.subset": 0.03}),
    "s0-2epochs": (0, {"data.subset": 0.04, "training.epochs": 2}),
    "s0-batch": (0, {"data.subset": 0.04, "data.batch_size": 16}),
    "s0-wd": (0, {"data.subset": 0.04, "optimizer.weight_decay": 0.1,
                  "scheduler.name": "constant"}),
    "s3-subset": (3, {"data.subset": 0.01}),
    "s0-char": (0, {"data.subset": 0.04, "tokenization.token_type": "char"}),
}


def build() -> Path:
    """The folder holding ``<name>/handin.tar`` and ``<name>/initial.pt`` for each of TRAININGS
    (cached)."""
    from hw4lib import train as training
    from hw4lib.handin import pack

    folder = FOLDER / hashlib.sha256(f"{inputs_digest()} {Path(__file__).read_text()}".encode()
                                     ).hexdigest()[:16]
    if (folder / ".complete").is_file():
        return folder
    FOLDER.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="building-", dir=FOLDER))
    built = training.build_model
    try:
        for name, (seed, overrides) in TRAININGS.items():
            initial = {}

            def recording(*args, **kwargs):
                model = built(*args, **kwargs)
                initial.update({key: value.clone() for key, value in model.state_dict().items()})
                return model

            training.build_model = recording
            root = work / "build" / name
            run = training.run(REPO / "configs/tiny.yaml", seed=seed, run_name=name,
                               overrides={**SMALL, **overrides,
                                          "training.expts_dir": str(root / "expts")})
            shutil.copytree(REPO / "mytorch", root / "mytorch",
                            ignore=shutil.ignore_patterns("__pycache__"))
            (work / "class" / name).mkdir(parents=True)
            pack(root, run.name, work / "class" / name / "handin.tar")
            torch.save(initial, work / "class" / name / "initial.pt")
        (work / "class" / ".complete").write_text("")
        if not folder.exists():
            (work / "class").rename(folder)
    finally:
        training.build_model = built
        shutil.rmtree(work, ignore_errors=True)
    return folder


def members(handin: Path) -> dict[str, bytes]:
    """{member name: bytes} of a handin.tar."""
    with tarfile.open(handin) as tar:
        return {member.name: tar.extractfile(member).read() for member in tar.getmembers()
                if member.isfile()}


def handin_folder(handin: Path, out: Path) -> Path:
    """``out`` holding the handin's files (as the grader extracts them: handin/ stripped)."""
    for name, data in members(handin).items():
        target = out / name.removeprefix("handin/")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
    return out


def noised(state: dict[str, torch.Tensor], initial: dict[str, torch.Tensor], scale: float,
           seed: int = 1) -> dict[str, torch.Tensor]:
    """``state`` with Gaussian noise added to each trained tensor, of ``scale`` times the norm of
    what it learned (its distance from ``initial``)."""
    generator = torch.Generator().manual_seed(seed)
    out = {}
    for key, value in state.items():
        learned = float((value - initial[key]).norm())
        noise = torch.randn(value.shape, generator=generator, dtype=value.dtype)
        out[key] = value + scale * learned * noise / math.sqrt(max(value.numel(), 1))
    return out


def rescaled(state: dict[str, torch.Tensor], factor: float = 4.0) -> dict[str, torch.Tensor]:
    """``state`` computing the same function: the final LayerNorm's weight and bias times
    ``factor``, the final linear layer's weight divided by it."""
    out = dict(state)
    for key in ("norm.weight", "norm.bias"):
        out[key] = state[key] * factor
    out["final_linear.weight"] = state["final_linear.weight"] / factor
    return out


def main() -> None:
    """Print the distances of every honest pair, of perturbed copies, and the perplexity gaps."""
    import numpy as np
    import yaml

    from autograder import grade_model, weights_fingerprint as wf
    from autograder.hidden_data import build_hidden_transcripts, hidden_utterances
    from datagen.build_data import write_split
    from hw4lib.data import H4Tokenizer
    from hw4lib.data.tokenizer import DEFAULT_TOKEN_MAP
    from hw4lib.handin_format import METRICS_FILE, transcripts_sha256

    folder = build()
    work = Path(tempfile.mkdtemp(prefix="hw4p1-honest-weights-"))
    try:
        hidden = work / "hidden"
        write_split(hidden / "test", hidden_utterances(build_hidden_transcripts()))
        public = REPO / "hw4_data/hw4p1_data"
        public_lines = grade_model.read_partition(
            public, H4Tokenizer(DEFAULT_TOKEN_MAP, "char")).transcripts
        prints = {}
        print("| training | seed | overrides | initialisation reproduced | test_metrics.json | "
              "public test split | hidden set | hidden / reported | hidden / public |")
        print("|---|---|---|---|---|---|---|---|---|")
        for name, (seed, overrides) in TRAININGS.items():
            handin = handin_folder(folder / name / "handin.tar", work / name)
            result = grade_model.evaluate_handin(
                handin, hidden, (public, len(public_lines), transcripts_sha256(public_lines)))
            prints[name] = result["weights_fingerprint"]
            config = yaml.safe_load((handin / "config.yaml").read_text())
            recorded = torch.load(folder / name / "initial.pt", weights_only=True)
            rebuilt = grade_model.initial_state(config["model"], recorded["final_linear.weight"]
                                                .shape[0], seed)
            same = all(torch.equal(recorded[key], rebuilt[key]) for key in recorded)
            reported = json.loads((handin / METRICS_FILE).read_text())["perplexity_char"]
            hidden_ppl, public_ppl = result["perplexity_char"], result["compared_perplexity_char"]
            print(f"| {name} | {seed} | {overrides} | {same} | {reported:.4f} | "
                  f"{public_ppl:.4f} | {hidden_ppl:.4f} | {hidden_ppl / reported:.4f} | "
                  f"{hidden_ppl / public_ppl:.4f} |")
        names = list(TRAININGS)
        print("\nhonest pairs (distance):")
        decoded = {name: wf.decode(text)[1] for name, text in prints.items()}
        architectures = {name: wf.decode(text)[0] for name, text in prints.items()}
        honest = []
        for index, first in enumerate(names):
            for second in names[index + 1:]:
                if architectures[first] != architectures[second]:
                    continue
                gap = wf.distance(decoded[first], decoded[second])
                honest.append(gap)
                print(f"  {first} / {second}: {gap:.4f}")
        print(f"  smallest {min(honest):.4f}, median {float(np.median(honest)):.4f}")
        print("\ncopies of each training (distance to the original; hidden-set perplexity):")
        for name in names:
            handin = work / name
            state = torch.load(handin / "model_state_dict.pt", weights_only=True)
            initial = torch.load(folder / name / "initial.pt", weights_only=True)
            first = next(key for key, value in state.items() if value.is_floating_point())
            ulp = {**state, first: state[first].clone()}
            ulp[first].view(-1)[0] = torch.nextafter(ulp[first].view(-1)[0],
                                                     torch.tensor(math.inf))
            variants = {"one ulp": ulp, "every tensor x 3": {k: v * 3 for k, v in state.items()},
                        "final norm x 4, final_linear.weight / 4": rescaled(state),
                        **{f"noise {scale}": noised(state, initial, scale)
                           for scale in (0.01, 0.02, 0.05, 0.2, 1.0, 8.0)}}
            for label, variant in variants.items():
                copy = work / f"{name}-copy"
                shutil.copytree(handin, copy, dirs_exist_ok=True)
                torch.save(variant, copy / "model_state_dict.pt")
                result = grade_model.evaluate_handin(copy, hidden)
                gap = wf.distance(decoded[name], wf.decode(result["weights_fingerprint"])[1])
                print(f"  {name} {label}: {gap:.4f}; {result['perplexity_char']:.4f}")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
