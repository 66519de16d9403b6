"""Derive ``hw4lib/model/state_dict_manifest.json`` from the reference model.

    python -m tools.state_dict_manifest           # rewrite the manifest
    python -m tools.state_dict_manifest --check   # exit 1 if the committed one is stale

The reference ``DecoderOnlyTransformer`` is built (on the meta device) at two configs whose sizes
are all distinct; each dimension of each tensor is matched to the one config symbol (times a small
factor) that explains it in both, and every layer's keys are folded into one ``dec_layers.{i}``
entry. ``make handout`` runs the check, so the manifest students get always describes the model
the grader builds.
"""
from __future__ import annotations

import argparse
import json
import sys

import torch
from torch import nn

from hw4lib.model import DecoderOnlyTransformer
from hw4lib.model.state_dict_contract import LAYER_INDEX, MANIFEST_FILE

SYMBOLS = ("d_model", "d_ff", "num_heads", "max_len", "num_classes")
FACTORS = (1, 2, 3, 4)
# Two configs with pairwise distinct sizes (and factors of them), so each dimension has one reading.
PROBES = (
    {"num_layers": 2, "d_model": 12, "num_heads": 2, "d_ff": 40, "max_len": 17, "num_classes": 29},
    {"num_layers": 2, "d_model": 30, "num_heads": 5, "d_ff": 44, "max_len": 19, "num_classes": 31},
)
LAYERS_PREFIX = "dec_layers."


def build(probe: dict, weight_tying: bool = False) -> DecoderOnlyTransformer:
    with torch.device("meta"):
        return DecoderOnlyTransformer(**probe, dropout=0.0, weight_tying=weight_tying)


def read_dimension(sizes: list[int]) -> str | int:
    """The symbol expression ("d_model", "3*d_model") or constant that gives ``sizes`` (one size
    per probe) in every probe; ValueError if none or several do."""
    readings = [symbol if factor == 1 else f"{factor}*{symbol}"
                for symbol in SYMBOLS for factor in FACTORS
                if all(size == factor * probe[symbol] for size, probe in zip(sizes, PROBES))]
    if len(set(sizes)) == 1 and not readings:
        return sizes[0]
    if len(readings) != 1:
        raise ValueError(f"sizes {sizes} over the probes have readings {readings}: choose probe "
                         f"sizes that tell the symbols apart")
    return readings[0]


def owner(model: nn.Module, key: str) -> str:
    """``Class.member (nn.Type)`` of the module holding ``key``, named from the nearest enclosing
    module of this repository, as the docstrings name it (``SelfAttentionLayer.mha.out_proj``;
    a container's entry becomes an index: ``FeedForwardLayer.ffn[0]``)."""
    path = key.rsplit(".", 1)[0].split(".")
    modules = [model]
    for name in path:
        modules.append(getattr(modules[-1], name))
    member, depth = "", len(path)
    while depth > 0:
        name = path[depth - 1]
        member = (f"[{name}]" if name.isdigit() else f".{name}") + member
        depth -= 1
        if not is_torch_module(modules[depth]):
            break
    held = type(modules[-1])
    return (f"{type(modules[depth]).__name__}{member} "
            f"({'nn.' if is_torch_module(modules[-1]) else ''}{held.__name__})")


def is_torch_module(module: nn.Module) -> bool:
    return type(module).__module__.startswith("torch.")


def fold_layer(key: str) -> str:
    """``dec_layers.3.ffn.norm.weight`` -> ``dec_layers.{i}.ffn.norm.weight``."""
    if not key.startswith(LAYERS_PREFIX):
        return key
    index, rest = key[len(LAYERS_PREFIX):].split(".", 1)
    return f"{LAYERS_PREFIX}{LAYER_INDEX}.{rest}" if index.isdigit() else key


def derive() -> dict:
    """The manifest of the reference model (see the module docstring)."""
    models = [build(probe) for probe in PROBES]
    states = [model.state_dict(keep_vars=True) for model in models]
    if states[0].keys() != states[1].keys():
        raise ValueError("the probes' state dicts have different keys")
    buffers = {name for name, _ in models[0].named_buffers()}
    entries = {}
    for key in states[0]:
        shapes = [tuple(state[key].shape) for state in states]
        entry = {"key": fold_layer(key),
                 "shape": [read_dimension(list(sizes)) for sizes in zip(*shapes)],
                 "kind": "buffer" if key in buffers else "parameter",
                 "module": owner(models[0], key)}
        if entries.setdefault(entry["key"], entry) != entry:
            raise ValueError(f"layers differ at {key}: {entry} vs {entries[entry['key']]}")
    tied_model = build(PROBES[0], weight_tying=True)
    shared: dict[int, list[str]] = {}
    for key, tensor in tied_model.state_dict(keep_vars=True).items():
        shared.setdefault(id(tensor), []).append(key)
    tied = [keys for keys in shared.values() if len(keys) > 1]
    if len(tied) != 1:
        raise ValueError(f"weight tying should share exactly one tensor, found {tied}")
    return {"about": "Names and shapes of DecoderOnlyTransformer.state_dict(); written by "
                     "python -m tools.state_dict_manifest, do not edit",
            "symbols": ["num_layers", *SYMBOLS],
            "entries": list(entries.values()),
            "tied": tied[0]}


def render(manifest: dict) -> str:
    """One entry per line, so a diff of the manifest reads as the model's change."""
    lines = [f"  {json.dumps(entry)}" for entry in manifest["entries"]]
    head = {key: value for key, value in manifest.items() if key != "entries"}
    body = json.dumps(head, indent=1)[:-2]
    return body + ',\n "entries": [\n' + ",\n".join(lines) + "\n ]\n}\n"


def stale() -> bool:
    """True when the committed manifest is not the derivation of the reference model."""
    return not MANIFEST_FILE.is_file() or MANIFEST_FILE.read_text() != render(derive())


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true",
                        help="only check that the committed manifest is up to date")
    args = parser.parse_args(argv)
    if args.check:
        if stale():
            sys.exit(f"{MANIFEST_FILE} is stale: run python -m tools.state_dict_manifest")
        print(f"{MANIFEST_FILE} is up to date")
        return
    MANIFEST_FILE.write_text(render(derive()))
    print(f"wrote {MANIFEST_FILE}")


if __name__ == "__main__":
    main()
