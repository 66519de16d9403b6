"""Honest independent trainings, for the shared-weights tolerance and the hidden-set margin.

    python -m tools.honest_weights        (prints the tables of docs/results.md, "Shared weights"
                                           and "Reported versus hidden perplexity")

Small trainings of the class fixture's model size (``tools.class_fixture.SMALL``): different
seeds, different data subsets, and (the dangerous case: most students keep the default seed) the
same seed with other hyperparameters. Each is packed by ``make handin``'s own code; the handins
are cached under ``$HW4P1_CACHE`` (default ``~/.cache/hw4p1``) keyed by the sha256 of what they
are made from (the class fixture's inputs and TRAININGS), so only the first call trains. Each
training also records the state dict its model had when built, so the reference initialisation
the fingerprint removes is checked against the one training used.
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

from tools.class_fixture import CACHE, REPO, SMALL, inputs_digest

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

    folder = FOLDER / hashlib.sha256(f"{inputs_digest()} {TRAININGS}".encode()).hexdigest()[:16]
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


def one_ulp(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """``state`` with the first value of its first tensor moved to the next float up."""
    first = next(key for key, value in state.items() if value.is_floating_point())
    moved = {**state, first: state[first].clone()}
    moved[first].view(-1)[0] = torch.nextafter(moved[first].view(-1)[0], torch.tensor(math.inf))
    return moved


def rescaled(state: dict[str, torch.Tensor], factor: float = 4.0) -> dict[str, torch.Tensor]:
    """``state`` computing the same function: the final LayerNorm's weight and bias times
    ``factor``, the final linear layer's weight divided by it."""
    out = dict(state)
    for key in ("norm.weight", "norm.bias"):
        out[key] = state[key] * factor
    out["final_linear.weight"] = state["final_linear.weight"] / factor
    return out


def permuted(state: dict[str, torch.Tensor], num_heads: int, seed: int = 0
             ) -> dict[str, torch.Tensor]:
    """``state`` (a DecoderOnlyTransformer's) computing the same function: the residual basis, each
    layer's feed-forward units and the dimensions within each head permuted (at random from
    ``seed``), every tensor moved accordingly."""
    generator = torch.Generator().manual_seed(seed)
    d_model = state["norm.weight"].numel()
    basis = torch.randperm(d_model, generator=generator)
    head = d_model // num_heads
    out = {}
    for key, value in state.items():
        if key.endswith(("norm.weight", "norm.bias")):
            value = value[basis]
        elif key in ("target_embedding.weight", "final_linear.weight", "positional_encoding.pe"):
            value = value[..., basis]
        out[key] = value
    for key in [key for key in state if key.endswith("mha.in_proj_weight")]:
        layer = key.removesuffix("in_proj_weight")
        within = torch.cat([index * head + torch.randperm(head, generator=generator)
                            for index in range(num_heads)])  # queries and keys alike
        values = torch.cat([index * head + torch.randperm(head, generator=generator)
                            for index in range(num_heads)])
        rows = torch.cat([within, d_model + within, 2 * d_model + values])
        out[key] = state[key][rows][:, basis]
        out[layer + "in_proj_bias"] = state[layer + "in_proj_bias"][rows]
        out[layer + "out_proj.weight"] = state[layer + "out_proj.weight"][basis][:, values]
        out[layer + "out_proj.bias"] = state[layer + "out_proj.bias"][basis]
    for key in [key for key in state if key.endswith("ffn.ffn.0.weight")]:
        layer = key.removesuffix("0.weight")
        units = torch.randperm(state[key].shape[0], generator=generator)
        out[key] = state[key][units][:, basis]
        out[layer + "0.bias"] = state[layer + "0.bias"][units]
        out[layer + "3.weight"] = state[layer + "3.weight"][basis][:, units]
        out[layer + "3.bias"] = state[layer + "3.bias"][basis]
    return out


NOISE_SCALES = (0.01, 0.02, 0.05, 0.2, 1.0, 8.0)


def copies(state: dict[str, torch.Tensor], initial: dict[str, torch.Tensor],
           noise_scales: tuple[float, ...] = NOISE_SCALES, num_heads: int | None = None
           ) -> dict[str, dict[str, torch.Tensor]]:
    """{label: state dict} of a classmate's copies of ``state``: one value moved by one ulp, every
    tensor rescaled, a rescaling that computes the same function, noise of each scale (times the
    norm of what each tensor learned) and, given the model's ``num_heads``, that rescaling with
    every tensor permuted (:func:`permuted`)."""
    return {"one ulp": one_ulp(state),
            "every tensor x 3": {key: value * 3 for key, value in state.items()},
            "final norm x 4, final_linear.weight / 4": rescaled(state),
            **({"rescaled and permuted": permuted(rescaled(state), num_heads)}
               if num_heads else {}),
            **{f"noise {scale}": noised(state, initial, scale) for scale in noise_scales}}


def measure(work: Path, noise_scales: tuple[float, ...] = NOISE_SCALES) -> dict:
    """Every training graded by the model child's own function (``grade_model.evaluate_handin``)
    on the hidden set ``make autograde`` draws and on the whole public test split, probed on it:
    ``{"runs": {name: {seed, overrides, initialisation_reproduced, reported, public, hidden}},
    "honest": {(name, name): distance} (pairs of one architecture), "outputs": {(name, name):
    output distance} (pairs probed alike), "copies": {(name, label): (distance to the original,
    hidden-set perplexity, output distance)}}``."""
    import yaml

    from autograder.judging.scoring import grade_model, weights_fingerprint as wf
    from autograder.build_time.hidden_data import build_hidden_transcripts, hidden_utterances
    from datagen.build_data import write_split
    from hw4lib.data import H4Tokenizer
    from hw4lib.data.tokenizer import DEFAULT_TOKEN_MAP
    from hw4lib.handin_format import METRICS_FILE, transcripts_sha256

    folder = build()
    hidden = work / "hidden"
    write_split(hidden / grade_model.PARTITION, hidden_utterances(build_hidden_transcripts()))
    public = REPO / "hw4_data/hw4p1_data"
    public_lines = grade_model.read_partition(public,
                                              H4Tokenizer(DEFAULT_TOKEN_MAP, "char")).transcripts
    runs, prints, probes = {}, {}, {}
    for name, (seed, overrides) in TRAININGS.items():
        handin = handin_folder(folder / name / "handin.tar", work / name)
        result = grade_model.evaluate_handin(
            handin, hidden, (public, len(public_lines), transcripts_sha256(public_lines)),
            probe_set=public)
        prints[name] = wf.decode(result["weights_fingerprint"])
        probes[name] = wf.decode_outputs(result["weights_fingerprint"])
        config = yaml.safe_load((handin / "config.yaml").read_text())
        recorded = torch.load(folder / name / "initial.pt", weights_only=True)
        rebuilt = grade_model.initial_state(config["model"],
                                            recorded["final_linear.weight"].shape[0], seed)
        runs[name] = {"seed": seed, "overrides": overrides,
                      "initialisation_reproduced": all(torch.equal(recorded[key], rebuilt[key])
                                                       for key in recorded),
                      "reported": json.loads((handin / METRICS_FILE).read_text())[
                          "perplexity_char"],
                      "public": result["compared_perplexity_char"],
                      "hidden": result["perplexity_char"]}
    names = list(TRAININGS)
    honest = {(first, second): wf.distance(prints[first][1], prints[second][1])
              for index, first in enumerate(names) for second in names[index + 1:]
              if prints[first][0] == prints[second][0]}
    outputs = {(first, second): wf.output_distance(probes[first][1], probes[second][1])
               for index, first in enumerate(names) for second in names[index + 1:]
               if probes[first][0] == probes[second][0]}
    copied = {}
    for name in names:
        state = torch.load(work / name / "model_state_dict.pt", weights_only=True)
        initial = torch.load(folder / name / "initial.pt", weights_only=True)
        heads = yaml.safe_load((work / name / "config.yaml").read_text())["model"]["num_heads"]
        for label, variant in copies(state, initial, noise_scales, heads).items():
            copy = work / f"{name}-copy"
            shutil.copytree(work / name, copy, dirs_exist_ok=True)
            torch.save(variant, copy / "model_state_dict.pt")
            result = grade_model.evaluate_handin(copy, hidden, probe_set=public)
            copied[name, label] = (wf.distance(prints[name][1],
                                               wf.decode(result["weights_fingerprint"])[1]),
                                   result["perplexity_char"],
                                   wf.output_distance(probes[name][1], wf.decode_outputs(
                                       result["weights_fingerprint"])[1]))
    return {"runs": runs, "honest": honest, "outputs": outputs, "copies": copied}


def main() -> None:
    """Print the tables of docs/results.md."""
    work = Path(tempfile.mkdtemp(prefix="hw4p1-honest-weights-"))
    try:
        measured = measure(work)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print("| training | seed | changes to the class fixture's model | initialisation reproduced "
          "| test_metrics.json | public test split | hidden set | hidden / reported | "
          "hidden / public |")
    print("|---|---|---|---|---|---|---|---|---|")
    for name, run in measured["runs"].items():
        print(f"| {name} | {run['seed']} | {run['overrides']} | "
              f"{run['initialisation_reproduced']} | {run['reported']:.4f} | {run['public']:.4f} "
              f"| {run['hidden']:.4f} | {run['hidden'] / run['reported']:.4f} | "
              f"{run['hidden'] / run['public']:.4f} |")
    print("\n| honest pair | distance |\n|---|---|")
    for (first, second), gap in sorted(measured["honest"].items(), key=lambda item: item[1]):
        print(f"| {first} / {second} | {gap:.4f} |")
    print("\n| honest pair | output distance (nats per token) |\n|---|---|")
    for (first, second), gap in sorted(measured["outputs"].items(), key=lambda item: item[1]):
        print(f"| {first} / {second} | {gap:.4f} |")
    print("\n| training | copy | distance to the original | output distance | hidden-set "
          "perplexity (original's) |")
    print("|---|---|---|---|---|")
    for (name, label), (gap, perplexity, output) in measured["copies"].items():
        print(f"| {name} | {label} | {gap:.4f} | {output:.2e} | {perplexity:.4f} "
              f"({measured['runs'][name]['hidden']:.4f}) |")


if __name__ == "__main__":
    main()
