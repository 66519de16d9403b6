"""The state dict the grader loads: every tensor's name and shape, as a function of the config.

The autograder rebuilds the handed-in weights into the *reference* ``DecoderOnlyTransformer`` with
``load_state_dict(strict=True)``, so a model whose modules differ from the ones the docstrings
describe (a ``Linear`` without its bias, a ``LayerNorm`` without its weight and bias, a missing
layer) trains and evaluates fine on your machine and then scores 0. This module lets you find out
first: ``make handin``, the notebook's hand-in cell, the model's tests and the grader all compare a
state dict with ``state_dict_manifest.json`` beside this file, which lists each key and its shape
in terms of the config (``dec_layers.{i}.ffn.norm.weight: [d_model]``). The manifest is derived
from the reference model (``python -m tools.state_dict_manifest``); it holds names and shapes only.

Standard library only, so the grader can run it before it imports torch.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, Mapping, Sequence

from hw4lib.file_io import read_json

MANIFEST_FILE = Path(__file__).with_name("state_dict_manifest.json")
LAYER_INDEX = "{i}"  # stands for 0 .. num_layers-1 in a manifest key
MAX_LISTED = 20  # problems listed in an error message; the rest are counted
_DIMENSION = re.compile(r"(?:(\d+)\*)?([a-z_]+)\Z")


@dataclass(frozen=True)
class Entry:
    """One tensor of the state dict: its shape, whether it is a parameter or a buffer, and the
    module that owns it, as the docstrings name it (``FeedForwardLayer.norm (nn.LayerNorm)``)."""

    shape: tuple[int, ...]
    kind: str
    module: str


class StateDictMismatch(ValueError):
    """A state dict differs from the one the grader loads; the message names every key."""


@lru_cache(maxsize=1)
def load_manifest() -> dict[str, Any]:
    """The parsed ``state_dict_manifest.json``."""
    return read_json(MANIFEST_FILE)


def dimension(expression: str | int, sizes: Mapping[str, int]) -> int:
    """The size a manifest dimension stands for: ``5``, ``"d_model"`` or ``"3*d_model"``."""
    if isinstance(expression, int):
        return expression
    match = _DIMENSION.match(expression)
    if match is None or match.group(2) not in sizes:
        raise ValueError(f"{MANIFEST_FILE.name}: cannot read the dimension {expression!r}")
    return int(match.group(1) or 1) * sizes[match.group(2)]


def expected_entries(model_config: Mapping[str, Any], num_classes: int,
                     prefix: str = "") -> dict[str, Entry]:
    """{key: Entry} of ``DecoderOnlyTransformer(**model_config, num_classes=num_classes)``.

    ``prefix`` keeps the keys under one module and strips it, e.g. ``"dec_layers.{i}.ffn."`` gives
    the state dict of one ``FeedForwardLayer`` (then ``num_layers`` may be left out of the config).
    """
    sizes = {name: model_config[name] for name in load_manifest()["symbols"]
             if name in model_config}
    sizes["num_classes"] = num_classes
    layers = range(model_config.get("num_layers", 1))
    entries = {}
    for item in load_manifest()["entries"]:
        key = item["key"]
        if not key.startswith(prefix):
            continue
        entry = Entry(tuple(dimension(d, sizes) for d in item["shape"]), item["kind"],
                      item["module"])
        name = key[len(prefix):]
        if LAYER_INDEX in name:
            entries.update((name.replace(LAYER_INDEX, str(index)), entry) for index in layers)
        else:
            entries[name] = entry
    return entries


def problems(shapes: Mapping[str, Sequence[int]], expected: Mapping[str, Entry]) -> list[str]:
    """One line per difference between ``shapes`` ({key: shape}, e.g. of ``state_dict()``) and
    ``expected``: missing keys (with the module that should own them), unexpected keys, and
    mis-shaped tensors. Empty when they agree."""
    found = []
    for key, entry in expected.items():
        if key not in shapes:
            found.append(f"missing {key} {list(entry.shape)}: {entry.module} needs this "
                         f"{entry.kind}")
        elif tuple(shapes[key]) != entry.shape:
            found.append(f"wrong shape for {key}: expected {list(entry.shape)}, got "
                         f"{list(shapes[key])} ({entry.module})")
    found += [f"unexpected {key} {list(shapes[key])}: the reference model has no such tensor"
              for key in shapes if key not in expected]
    return found


def check_shapes(shapes: Mapping[str, Sequence[int]], model_config: Mapping[str, Any],
                 num_classes: int, what: str = "the state dict", prefix: str = "") -> None:
    """Raise StateDictMismatch listing every key where ``shapes`` differs from what the grader
    loads for this config (see :func:`expected_entries` for ``prefix``)."""
    found = problems(shapes, expected_entries(model_config, num_classes, prefix))
    if found:
        listed = "\n  ".join(found[:MAX_LISTED])
        more = f"\n  ... and {len(found) - MAX_LISTED} more" if len(found) > MAX_LISTED else ""
        raise StateDictMismatch(
            f"{what} is not the one the grader loads (into the reference model, strictly):\n"
            f"  {listed}{more}\nBuild each module exactly as its docstring lists its members "
            f"(same classes, with their default weights and biases).")


def count_elements(model_config: Mapping[str, Any], num_classes: int) -> tuple[int, int]:
    """(parameters, buffer elements) of the model, counting a tied weight once."""
    entries = expected_entries(model_config, num_classes)
    tied = set(load_manifest()["tied"][1:]) if model_config.get("weight_tying") else set()
    parameters = buffers = 0
    for key, entry in entries.items():
        size = 1
        for length in entry.shape:
            size *= length
        if entry.kind == "buffer":
            buffers += size
        elif key not in tied:
            parameters += size
    return parameters, buffers
