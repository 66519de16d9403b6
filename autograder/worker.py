"""The worker: replays the judge's programs on the student's ``mytorch`` inside the sandbox.

numpy and the standard library only; this is the one grader module that runs next to student code,
so nothing it sends back is trusted (the judge validates every value against its own truth). The
sandbox (``autograder/sandbox.py``) starts it as::

    python -I -S -c "<bootstrap>" --input DIR --result-fd N

with ``sys.path`` set to the runtime folder (this package's ``worker``/``wire``), a folder holding
only numpy, and the student's folder holding only ``mytorch/``. For each test folder listed in
``DIR/tests.json`` it writes one record (``wire.encode_record``) to file descriptor N.

Importing an autograd library (torch, jax, tensorflow, ...) fails with a message saying that
mytorch must be written in numpy; under bubblewrap those libraries are not even in the sandbox.
"""
from __future__ import annotations

import argparse
import importlib.abc
import json
import os
import sys
import traceback
from functools import reduce
from pathlib import Path

import numpy as np

from autograder import wire

FORBIDDEN_LIBRARIES = ("torch", "jax", "jaxlib", "tensorflow", "keras", "autograd", "mxnet",
                       "paddle", "cupy", "chainer", "theano", "flax", "mlx", "tinygrad", "numba")
NUMPY_ONLY = "mytorch must be written with numpy only"


class NumpyOnly(importlib.abc.MetaPathFinder):
    """Refuses to import the autograd and GPU array libraries, naming the rule broken."""

    def find_spec(self, fullname, path=None, target=None):
        if fullname.partition(".")[0] in FORBIDDEN_LIBRARIES:
            raise ImportError(f"{NUMPY_ONLY}: it imports {fullname}")
        return None


class StepError(Exception):
    """A step of a program failed; the message names the call and what went wrong."""


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Replay the judge's programs on mytorch.")
    parser.add_argument("--input", type=Path)
    parser.add_argument("--result-fd", type=int, required=True)
    parser.add_argument("--probe", action="store_true",
                        help="only say that the sandbox can run this worker and import numpy")
    args = parser.parse_args(argv)
    if args.probe:
        send(args.result_fd, b"ok")
        return
    sys.meta_path.insert(0, NumpyOnly())
    tests = json.loads((args.input / "tests.json").read_text())
    try:
        import mytorch.nn as nn
    except BaseException as error:  # noqa: BLE001 - whatever student code raises is reported
        message = f"importing mytorch failed: {describe(error)}"
        for test in tests:
            send(args.result_fd, wire.encode_record(test, message, {}))
        return
    for test in tests:
        send(args.result_fd, run_test(nn, args.input / test, test))


def run_test(nn, folder: Path, test: str) -> bytes:
    """Replay one program; its record (an error message when a step failed)."""
    arrays, steps, returned = wire.load_program(folder)
    env: dict[str, object] = dict(arrays)
    labels: dict[str, str] = {}
    values: dict[str, np.ndarray | None] = {}
    refused: dict[str, str] = {}
    try:
        for step in steps:
            run_step(nn, step, env, labels, values, refused)
    except StepError as error:
        return wire.encode_record(test, str(error), values, refused)
    missing = [name for name in returned if name not in values and name not in refused]
    error = f"the worker lost the values {missing}" if missing else None
    return wire.encode_record(test, error, values, refused)


def run_step(nn, step: dict, env: dict, labels: dict, values: dict, refused: dict) -> None:
    """Run one step, storing what it produces in ``env`` and what is sent back in ``values``.

    A result that is not a numeric array (``init_weights`` returning ``self``, say) is kept in
    ``env`` and only noted in ``refused``: it fails a test only if the test reads it.
    """
    op, out = step["op"], step["out"]
    label = describe_step(step, labels)
    try:
        if op == "new":
            env[out[0]] = getattr(nn, step["cls"])(*resolve(step["args"], env),
                                                   **resolve_kwargs(step["kwargs"], env))
            labels[out[0]] = step["cls"]
            return
        if op == "call":
            result = call(env, step)
            results = [result] if len(out) == 1 else unpack(result, len(out))
        elif op == "get":
            results = [reduce(getattr, step["path"].split("."), env[step["obj"]])]
        elif op == "echo":
            results = [env[step["src"]]]
        elif op == "perturbed":
            results = [perturbed_outputs(env, step)]
        else:
            raise StepError(f"unknown step {op!r}")
    except StepError as error:
        raise StepError(f"{label}: {error}") from None
    except BaseException as error:  # noqa: BLE001 - SystemExit and friends included
        raise StepError(f"{label} raised {describe(error)}") from None
    for name, result in zip(out, results):
        env[name] = result
        try:
            values[name] = env[name] = as_plain_array(result)
        except StepError as error:
            refused[name] = f"{label} {error}"


def call(env: dict, step: dict):
    method = getattr(env[step["obj"]], step["method"])
    return method(*resolve(step["args"], env), **resolve_kwargs(step["kwargs"], env))


def unpack(result, count: int) -> list:
    if not isinstance(result, (tuple, list)) or len(result) != count:
        raise StepError(f"must return a tuple of {count} arrays, returned "
                        f"{type(result).__name__}")
    return list(result)


def perturbed_outputs(env: dict, step: dict) -> np.ndarray:
    """(2, size, *out.shape): outputs with each target entry at +step, then at -step."""
    target = step["target"]
    x = (env[target["ref"]] if "ref" in target
         else reduce(getattr, target["path"].split("."), env[target["obj"]]))
    if not isinstance(x, np.ndarray) or x.dtype != np.float64:
        raise StepError(f"the array to perturb is {type(x).__name__} "
                        f"{getattr(x, 'dtype', '')}, not float64")
    outputs = [[], []]
    for index in np.ndindex(x.shape):
        original = x[index]
        for sign, bucket in ((1, outputs[0]), (-1, outputs[1])):
            x[index] = original + sign * step["step"]
            bucket.append(as_plain_array(call(env, step)).astype(np.float64))
        x[index] = original
    shapes = {y.shape for bucket in outputs for y in bucket}
    if len(shapes) > 1:
        raise StepError(f"outputs changed shape between calls: {sorted(shapes)}")
    return np.stack([np.stack(bucket) for bucket in outputs])


def as_plain_array(value):
    """A copy of ``value`` as a numeric or bool numpy array; None stays None."""
    if value is None:
        return None
    try:
        array = np.array(value, copy=True)
    except Exception as error:  # noqa: BLE001 - arbitrary objects
        raise StepError(f"returned {type(value).__name__}, not an array ({describe(error)})")
    if array.dtype.kind not in wire.NUMERIC_KINDS:
        raise StepError(f"returned {type(value).__name__} of dtype {array.dtype}, not a numeric "
                        f"array")
    return array


def resolve(args: list[dict], env: dict) -> list:
    return [env[a["ref"]] if "ref" in a else a["lit"] for a in args]


def resolve_kwargs(kwargs: dict, env: dict) -> dict:
    return dict(zip(kwargs, resolve(list(kwargs.values()), env)))


def describe_step(step: dict, labels: dict) -> str:
    """What the step calls, in the student's terms: ``MultiHeadAttention.backward``."""
    if step["op"] == "new":
        return f"{step['cls']}(...)"
    if step["op"] in ("call", "perturbed"):
        return f"{labels.get(step['obj'], '?')}.{step['method']}"
    if step["op"] == "get":
        return f"reading {labels.get(step['obj'], '?')}.{step['path']}"
    return "reading an input back"


def describe(error: BaseException) -> str:
    """``Type: message`` and the innermost frame of student code, bounded."""
    frames = [f for f in traceback.extract_tb(error.__traceback__) if "mytorch" in f.filename]
    where = (f" (at {frames[-1].filename.rpartition('mytorch')[2].lstrip('/')}:{frames[-1].lineno})"
             if frames else "")
    text = f"{type(error).__name__}: {error}"[:wire.MAX_MESSAGE_CHARS - len(where)]
    return text + where


def send(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


if __name__ == "__main__":
    main()
