"""What the judge and the worker exchange: programs of calls in, plain arrays out. numpy + stdlib.

The judge never runs student code. For each hidden test it records a :class:`Program`: objects to
build from the student's ``mytorch.nn`` classes, methods to call on them with arrays the judge drew,
attributes to read back. The worker (``autograder/worker.py``, inside the sandbox) replays the
program and streams back one :func:`encode_record` per test over a pipe: a JSON header, then the
returned values as ``.npy`` bytes. The judge decodes them with :func:`decode_records`, which never
unpickles (``np.load(allow_pickle=False)``), bounds every size, and keeps only numeric and bool
arrays. Everything the worker sends is treated as hostile data.

On disk, a program is ``<dir>/program.json`` plus one ``<dir>/<name>.npy`` per input array.
"""
from __future__ import annotations

import io
import json
import struct
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from autograder.sandbox import printable

MAX_HEADER_BYTES = 64 * 1024  # one record's JSON header
MAX_ARRAY_BYTES = 32 * 2**20  # one returned .npy
MAX_MESSAGE_CHARS = 400  # an error message from the worker, as shown in the feedback
NUMERIC_KINDS = "biuf"  # bool, signed and unsigned integers, floats: what a result may hold
_LENGTH = struct.Struct("<Q")


@dataclass(frozen=True)
class Ref:
    """A value held by the worker: an input array, an object, or a returned value."""

    name: str


@dataclass
class Program:
    """A recorded sequence of steps for the worker; build it with the methods below.

    Inputs are copied when recorded, so the judge's own arrays stay untouched whatever the student
    code does to the worker's copies.
    """

    arrays: dict[str, np.ndarray] = field(default_factory=dict)
    steps: list[dict] = field(default_factory=list)
    returned: list[str] = field(default_factory=list)  # names the worker sends back, in order

    def _new_name(self, prefix: str) -> str:
        return f"{prefix}{len(self.arrays) + len(self.steps)}"

    def array(self, x: np.ndarray) -> Ref:
        """Send ``x`` (its dtype, shape and memory order are kept) and return its Ref."""
        name = self._new_name("in")
        self.arrays[name] = np.array(x, copy=True, order="K")
        return Ref(name)

    def _arg(self, value):
        if isinstance(value, Ref):
            return {"ref": value.name}
        if isinstance(value, np.ndarray):
            return {"ref": self.array(value).name}
        if value is None or isinstance(value, (bool, int, float, str)):
            return {"lit": value}
        raise TypeError(f"cannot send {type(value).__name__} to the worker")

    def _step(self, op: str, outputs: int, **fields) -> list[Ref]:
        names = [self._new_name("r") + (f"_{i}" if outputs > 1 else "") for i in range(outputs)]
        self.steps.append({"op": op, "out": names, **fields})
        return [Ref(name) for name in names]

    def new(self, cls: str, *args, **kwargs) -> Ref:
        """``mytorch.nn.<cls>(*args, **kwargs)``, kept in the worker (never sent back)."""
        return self._step("new", 1, cls=cls, args=[self._arg(a) for a in args],
                          kwargs={k: self._arg(v) for k, v in kwargs.items()})[0]

    def call(self, obj: Ref, method: str, *args, outputs: int = 1, **kwargs):
        """``obj.method(*args, **kwargs)``, sent back: one Ref, or a tuple of ``outputs`` Refs
        when the method must return a tuple of that length."""
        refs = self._step("call", outputs, obj=obj.name, method=method,
                          args=[self._arg(a) for a in args],
                          kwargs={k: self._arg(v) for k, v in kwargs.items()})
        self.returned.extend(ref.name for ref in refs)
        return refs[0] if outputs == 1 else tuple(refs)

    def get(self, obj: Ref, path: str) -> Ref:
        """The attribute ``obj.<path>`` (dotted), sent back."""
        ref = self._step("get", 1, obj=obj.name, path=path)[0]
        self.returned.append(ref.name)
        return ref

    def echo(self, ref: Ref) -> Ref:
        """The input array ``ref`` as it is now (to check that student code left it alone)."""
        out = self._step("echo", 1, src=ref.name)[0]
        self.returned.append(out.name)
        return out

    def perturbed_outputs(self, obj: Ref, method: str, target, args: tuple, kwargs: dict,
                          step: float) -> Ref:
        """Outputs of ``obj.method(*args, **kwargs)`` with each entry of ``target`` moved by
        +step then -step in place (and restored), stacked as (2, target.size, *output.shape).

        ``target`` is an input Ref or ``(obj, "attribute.path")``. The judge turns the outputs into
        central finite differences for any upstream gradient.
        """
        target_field = ({"ref": target.name} if isinstance(target, Ref)
                        else {"obj": target[0].name, "path": target[1]})
        out = self._step("perturbed", 1, obj=obj.name, method=method, target=target_field,
                         args=[self._arg(a) for a in args],
                         kwargs={k: self._arg(v) for k, v in kwargs.items()}, step=step)[0]
        self.returned.append(out.name)
        return out

    def save(self, folder: Path) -> None:
        """Write ``program.json`` and the input arrays into ``folder`` (created)."""
        folder.mkdir(parents=True)
        for name, x in self.arrays.items():
            np.save(folder / f"{name}.npy", x, allow_pickle=False)
        (folder / "program.json").write_text(json.dumps(
            {"arrays": sorted(self.arrays), "steps": self.steps, "returned": self.returned}))


def load_program(folder: Path) -> tuple[dict[str, np.ndarray], list[dict], list[str]]:
    """(input arrays, steps, returned names) of a saved program (worker side)."""
    spec = json.loads((folder / "program.json").read_text())
    arrays = {name: np.load(folder / f"{name}.npy", allow_pickle=False)
              for name in spec["arrays"]}
    return arrays, spec["steps"], spec["returned"]


def encode_record(test: str, error: str | None, values: dict[str, np.ndarray | None],
                  refused: dict[str, str] | None = None) -> bytes:
    """One test's outcome as bytes: header length, JSON header, then each array's .npy bytes.

    ``values`` maps returned names to arrays, or None when student code returned None;
    ``refused`` maps names to why their value could not be sent (not a numeric array).
    """
    blobs, sizes, nones = [], {}, []
    for name, value in values.items():
        if value is None:
            nones.append(name)
            continue
        buffer = io.BytesIO()
        np.save(buffer, value, allow_pickle=False)
        blobs.append(buffer.getvalue())
        sizes[name] = len(blobs[-1])
    header = json.dumps({"test": test, "error": error, "sizes": sizes, "none": nones,
                         "refused": refused or {}}).encode()
    return _LENGTH.pack(len(header)) + header + b"".join(blobs)


@dataclass
class Record:
    """One test's outcome as decoded by the judge. ``values`` holds only valid arrays or None;
    ``problems`` says, per name, why its value was refused (the test fails if it reads it)."""

    error: str | None
    values: dict[str, np.ndarray | None]
    problems: dict[str, str]


def decode_records(stream: bytes, expected: dict[str, list[str]]) -> tuple[dict[str, Record], str]:
    """Records for the tests named in ``expected`` ({test: names it returns}) found in ``stream``.

    Returns ({test: Record}, note): the first record of each expected test counts; anything
    malformed ends the decoding, and ``note`` says where and why ('' when the stream was clean).
    """
    records: dict[str, Record] = {}
    position = 0
    while position < len(stream):
        try:
            record, position = _decode_one(stream, position, expected)
        except (ValueError, KeyError, TypeError, struct.error, UnicodeDecodeError) as error:
            return records, f"unreadable worker output after {len(records)} results ({error})"
        if record is not None and record[0] not in records:
            records[record[0]] = record[1]
    return records, ""


def _decode_one(stream: bytes, position: int, expected: dict[str, list[str]]):
    (length,) = _LENGTH.unpack_from(stream, position)
    if length > MAX_HEADER_BYTES:
        raise ValueError(f"a header of {length} bytes")
    position += _LENGTH.size
    header = json.loads(stream[position:position + length].decode("utf-8"))
    position += length
    test, sizes, nones = header["test"], header["sizes"], header["none"]
    if not isinstance(sizes, dict) or not isinstance(nones, list):
        raise ValueError("a header without sizes")
    values: dict[str, np.ndarray | None] = {}
    problems: dict[str, str] = {}
    wanted = set(expected.get(test, ()))
    for name, size in sizes.items():
        if not isinstance(size, int) or not 0 <= size <= MAX_ARRAY_BYTES:
            raise ValueError(f"an array of {size!r} bytes")
        blob = stream[position:position + size]
        position += size
        if len(blob) != size:
            raise ValueError("a truncated array")
        if name in wanted:
            array, problem = _load_array(blob)
            if problem:
                problems[name] = problem
            else:
                values[name] = array
    for name in nones:
        if name in wanted and name not in values:
            values[name] = None
    refused = header.get("refused", {})
    if not isinstance(refused, dict):
        raise ValueError("a header with unreadable refusals")
    for name, why in refused.items():
        if name in wanted and name not in values:
            problems[name] = printable(str(why))[:MAX_MESSAGE_CHARS]
    if test not in expected:
        return None, position
    error = header["error"]
    error = None if error is None else printable(str(error))[:MAX_MESSAGE_CHARS]
    return (test, Record(error, values, problems)), position


def _load_array(blob: bytes) -> tuple[np.ndarray | None, str | None]:
    """A numeric or bool array from .npy bytes, or (None, why it was refused)."""
    try:
        array = np.load(io.BytesIO(blob), allow_pickle=False)
    except (ValueError, OSError, EOFError) as error:
        return None, f"not a plain .npy array ({printable(str(error))[:100]})"
    if not isinstance(array, np.ndarray) or array.dtype.kind not in NUMERIC_KINDS:
        return None, f"holds {getattr(array, 'dtype', type(array))}, not numbers"
    return array, None
