"""What the judge and the worker exchange: programs of calls in, plain arrays out. numpy + stdlib.

The judge never runs student code. For each hidden test it records a :class:`Program`: objects to
build from the student's ``mytorch.nn`` classes, methods to call on them with arrays the judge drew,
attributes to read back. The worker (``autograder/sandboxed/worker.py``, inside the sandbox) replays
the program and streams back one :func:`encode_record` per test over a pipe: a JSON header, then the
returned values as ``.npy`` bytes. The judge decodes them with :func:`decode_records`, which never
unpickles (``np.load(allow_pickle=False)``), bounds every size, and keeps only numeric and bool
arrays. The judge asks for one test at a time (a line with its name on the worker's request pipe,
once the program is on disk) and waits for that test's whole record before it writes the next
program: :func:`framing_size` and :func:`record_extent` find a record's end from its first bytes.
Everything the worker sends is treated as hostile data: a failure comes back as a few typed fields
(:data:`ERROR_FIELDS`), which the judge words itself, never as text to echo.

On disk, a program is two files: ``<dir>/program.json`` (the steps, and each input array's offset
and byte count in the other file, dtype, shape and memory order) and ``<dir>/arrays.bin``, every
input array's raw bytes one after another (one file: a grading writes thousands of arrays, and
each file costs its creation and the worker's opening under Landlock). The worker reads them
without ``np.load``, whose ``.npy`` header parser compiles text (``ast``), which the worker refuses.
"""
from __future__ import annotations

import codecs
import io
import json
import math
import re
import struct
import tokenize
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

MAX_HEADER_BYTES = 64 * 1024  # one record's JSON header
MAX_ARRAY_BYTES = 32 * 2**20  # one returned .npy
PROGRAM_FILE, ARRAYS_FILE = "program.json", "arrays.bin"  # a saved program's two files
NUMERIC_KINDS = "biuf"  # bool, signed and unsigned integers, floats: what a result may hold
_LENGTH = struct.Struct("<Q")
LENGTH_BYTES = _LENGTH.size  # the prefix that gives a record's header size
# A failure as the worker reports it: kind ('raised', 'numpy only', 'not a tuple', ...), the index
# of the step that failed (-1: importing mytorch), the exception's class name, the mytorch file
# (relative to mytorch/), line and function it passed last, the forbidden module, the tuple length
# expected, a TypeError's message.
ERROR_FIELDS = {"kind": str, "step": int, "type": str, "file": str, "line": int, "function": str,
                "module": str, "count": int, "message": str}
MAX_FIELD_CHARS = 200
MAX_SOURCE_BYTES = 1 << 20  # read of a mytorch file for the line that raised
MAX_CODE_CHARS = 200  # of that line
# The operands of the line that raised, as the worker found them in the raising frame: one row of
# OPERAND_ROW integers per name of :func:`line_operands` (in its order), flattened into the error's
# "operands" field: [kind, dtype, ndim, *dims], kind an index into OPERAND_KINDS, dtype one into
# OPERAND_DTYPES, the first MAX_OPERAND_DIMS dims (zeros past ndim; none past MAX_OPERAND_DIMS);
# for a Python int, its absolute value and 1 if it is negative in the first two dims.
# Integers only: the judge names each operand from the line it reads itself.
MAX_OPERANDS = 6
MAX_OPERAND_DIMS = 8
OPERAND_ROW = 3 + MAX_OPERAND_DIMS
MAX_OPERAND_INT = 2**40  # a larger dim or int is sent as this
OPERAND_KINDS = ("absent", "array", "scalar", "None", "other")
OPERAND_DTYPES = ("other", "bool", "int8", "int16", "int32", "int64", "uint8", "uint16",
                  "uint32", "uint64", "float16", "float32", "float64", "complex64", "complex128",
                  "int", "float")  # the last two: Python's own scalars
# A plain or dotted name on a line of code (``dLdZ``, ``self.W.T``, ``np.sum``), its string
# literals and comment removed first; one followed by '=' (not '==') is assigned, not read.
DOTTED_NAME = re.compile(r"(?<![\w.])[A-Za-z_]\w*+(?:\s*\.\s*[A-Za-z_]\w*+)*")
ASSIGNED = re.compile(r"\s*=(?!=)")
STRING_LITERAL = re.compile(r"[A-Za-z]{0,2}(\'\'\'|\"\"\"|'|\")(?:\\.|(?!\1).)*(?:\1|$)")
NOT_OPERANDS = frozenset(("and", "or", "not", "in", "is", "if", "else", "for", "lambda", "None",
                          "True", "False", "return", "raise", "assert", "del", "yield", "await",
                          "from", "with", "as", "elif", "while", "def", "class", "import",
                          "global", "nonlocal", "np", "numpy", "math", "self", "super"))
NOT_AN_ARRAY = "not a numeric array"
UNREADABLE = "unreadable worker output"
# PEP 263's declaration, and the blank or comment line 1 that lets line 2 declare, as the standard
# library's tokenize matches them (its pattern, on bytes). tokenize.detect_encoding itself would
# not do inside the sandbox: it looks the name up in the codec registry, which code run before can
# extend (codecs.register), and reads tokenize's module globals at each call, which student code
# can replace; these compiled patterns are bound once, before any student code runs.
CODING_LINE = re.compile(tokenize.cookie_re.pattern.encode("ascii"), re.ASCII)
BLANK_OR_COMMENT = tokenize.blank_re
UTF8_BOM = codecs.BOM_UTF8


def declared_encoding_reader() -> Callable[[bytes], str | None]:
    """A function: source bytes -> the encoding their PEP 263 declaration names (line 1, or line
    2 after a comment or blank line 1), as Python reads it, or None when there is none. Every name
    it uses is bound now, in its closure (no global, no builtin): the worker's audit hook makes
    its own before student code runs, which can then change neither this module nor builtins
    under it."""
    coding, blank, bom = CODING_LINE.match, BLANK_OR_COMMENT.match, UTF8_BOM
    strip_bom, lines_of, to_text = bytes.removeprefix, bytes.splitlines, bytes.decode

    def declared(source: bytes) -> str | None:
        first, second = (lines_of(strip_bom(source, bom)) + [b"", b""])[:2]
        match = coding(first) or (blank(first) and coding(second))
        return to_text(match.group(1), "ascii") if match else None

    return declared


declared_encoding = declared_encoding_reader()


def is_native_utf8(encoding: str) -> bool:
    """Whether Python's tokenizer reads a file declaring ``encoding`` as UTF-8 itself ('utf-8',
    'UTF_8', 'utf-8-unix', ...), without a codec lookup that code run before could redirect
    (``codecs.register``): the same test as CPython's ``get_normal_name`` on ``str`` only."""
    normal = str.replace(str.lower(encoding[:12]), "_", "-")  # pragma: no mutate (equivalent: any cut of 6 or more characters gives the same answer)
    return normal == "utf-8" or str.startswith(normal, "utf-8-")


# The worker's frames (judge side: judge.ChildConversation): one worker serves every category,
# each in a child process of its own, and relays what each child writes, framed, so that a child
# that dies half-way through a record costs only its category: a frame is a kind and a payload
# length (FRAME), then the payload. RESULT: bytes of the child's records, as they come;
# OUTPUT_HEAD, OUTPUT_TAIL: the head and tail of what it printed, once it ended; ENDED (last):
# ENDED_PAYLOAD, its exit status (minus the signal that killed it), the printed bytes omitted
# between head and tail, and whether a process it started outlived it (holding its pipes).
FRAME = struct.Struct("<cI")
FRAME_BYTES = FRAME.size
RESULT, OUTPUT_HEAD, OUTPUT_TAIL, ENDED = b"R", b"H", b"T", b"E"
ENDED_PAYLOAD = struct.Struct("<iQ?")
MAX_FRAME_BYTES = 2**20


def frame(kind: bytes, payload: bytes) -> bytes:
    """One frame: ``kind`` (one of RESULT, OUTPUT_HEAD, OUTPUT_TAIL, ENDED), then ``payload``
    (at most MAX_FRAME_BYTES)."""
    return FRAME.pack(kind, len(payload)) + payload


def frame_header(data: bytes) -> tuple[bytes, int]:
    """(kind, payload length) of the frame whose first FRAME_BYTES are ``data``; ValueError for
    an unknown kind or a payload over MAX_FRAME_BYTES."""
    kind, length = FRAME.unpack(data)
    if kind not in (RESULT, OUTPUT_HEAD, OUTPUT_TAIL, ENDED) or length > MAX_FRAME_BYTES:
        raise ValueError(f"a frame of kind {kind!r} and {length} bytes")
    return kind, length


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
        (ref,) = self._step("new", 1, cls=cls, args=[self._arg(a) for a in args],
                            kwargs={k: self._arg(v) for k, v in kwargs.items()})
        return ref

    def new_refused(self, cls: str, *args, error: str = "ValueError") -> Ref:
        """Whether ``mytorch.nn.<cls>(*args)`` raises ``error`` (that class or a subclass), sent
        back as a bool array (True: refused); the worker keeps no object. Any other exception
        fails the step as a step that raised does."""
        (ref,) = self._step("new", 1, cls=cls, args=[self._arg(a) for a in args], kwargs={},
                            refuse=error)
        self.returned.append(ref.name)
        return ref

    def call(self, obj: Ref, method: str, *args, outputs: int = 1, **kwargs):
        """``obj.method(*args, **kwargs)``, sent back: one Ref, or a tuple of ``outputs`` Refs
        when the method must return a tuple of that length."""
        refs = self._step("call", outputs, obj=obj.name, method=method,
                          args=[self._arg(a) for a in args],
                          kwargs={k: self._arg(v) for k, v in kwargs.items()})
        self.returned.extend(ref.name for ref in refs)
        if outputs != 1:
            return tuple(refs)
        (ref,) = refs
        return ref

    def get(self, obj: Ref, path: str) -> Ref:
        """The attribute ``obj.<path>`` (dotted), sent back."""
        (ref,) = self._step("get", 1, obj=obj.name, path=path)
        self.returned.append(ref.name)
        return ref

    def echo(self, ref: Ref) -> Ref:
        """The input array ``ref`` as it is now (to check that student code left it alone)."""
        (out,) = self._step("echo", 1, src=ref.name)
        self.returned.append(out.name)
        return out

    def save(self, folder: Path) -> None:
        """Write ``program.json`` and ``arrays.bin`` (the input arrays, numeric or bool) into
        ``folder`` (created)."""
        folder.mkdir(parents=True)
        layouts, blobs, offset = {}, [], 0
        for name, x in self.arrays.items():
            if x.dtype.kind not in NUMERIC_KINDS:
                raise TypeError(f"cannot send a {x.dtype} array to the worker")
            order = "F" if x.flags.f_contiguous and not x.flags.c_contiguous else "C"
            blobs.append(x.tobytes(order=order))
            layouts[name] = {"offset": offset, "bytes": len(blobs[-1]), "dtype": x.dtype.str,
                             "shape": list(x.shape), "order": order}
            offset += len(blobs[-1])
        (folder / ARRAYS_FILE).write_bytes(b"".join(blobs))
        (folder / PROGRAM_FILE).write_text(json.dumps(
            {"arrays": layouts, "steps": self.steps, "returned": self.returned}))


def load_program(folder: Path) -> tuple[dict[str, np.ndarray], list[dict], list[str]]:
    """(input arrays, steps, returned names) of a saved program (worker side); each array
    writable, with the dtype, shape and memory order it was saved with. ValueError naming the
    array when its bytes do not lie inside ``arrays.bin`` or do not fill its dtype and shape."""
    spec = json.loads((folder / PROGRAM_FILE).read_text())
    data = (folder / ARRAYS_FILE).read_bytes()
    arrays = {}
    for name, layout in spec["arrays"].items():
        dtype, shape, order = np.dtype(layout["dtype"]), layout["shape"], layout["order"]
        offset, size = layout["offset"], layout["bytes"]
        if not (type(offset) is int and type(size) is int and 0 <= offset <= offset + size
                <= len(data)):
            raise ValueError(f"array {name}: bytes {offset!r} to {offset!r} + {size!r} are not "
                             f"inside {ARRAYS_FILE} ({len(data)} bytes): it was not written by "
                             "Program.save")
        if (dtype.kind not in NUMERIC_KINDS or order not in ("C", "F")
                or size != dtype.itemsize * math.prod(shape)):
            raise ValueError(f"array {name}: {size} bytes are no {dtype} array of shape {shape} "
                             f"in order {order!r}: it was not written by Program.save")
        flat = np.frombuffer(data, dtype=dtype, count=size // dtype.itemsize, offset=offset)
        arrays[name] = np.array(flat.reshape(shape, order=order), copy=True, order=order)
    return arrays, spec["steps"], spec["returned"]


def encode_record(test: str, error: dict | None, values: dict[str, np.ndarray | None],
                  refused: list[str] = ()) -> bytes:
    """One test's outcome as bytes: header length, JSON header, then each array's .npy bytes.

    ``error`` is None or the failure's fields (:data:`ERROR_FIELDS`); ``values`` maps returned
    names to arrays, or None when student code returned None; ``refused`` names the values that
    could not be sent (not numeric arrays).
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
                         "refused": list(refused)}).encode()
    return _LENGTH.pack(len(header)) + header + b"".join(blobs)


@dataclass
class Record:
    """One test's outcome as decoded by the judge. ``error`` holds the failure's fields that have
    the type :data:`ERROR_FIELDS` gives them; ``values`` holds only valid arrays or None;
    ``problems`` says, per name, why its value was refused (the test fails if it reads it)."""

    error: dict | None
    values: dict[str, np.ndarray | None]
    problems: dict[str, str]


def decode_records(stream: bytes, expected: dict[str, list[str]]) -> tuple[dict[str, Record], str]:
    """Records for the tests named in ``expected`` ({test: names it returns}) found in ``stream``.

    Returns ({test: Record}, note): the first record of each expected test counts; anything
    malformed (a header nested too deep, NaN sizes, wrong types, truncated bytes, ...) ends the
    decoding, and ``note`` says where and why, in at most MAX_FIELD_CHARS characters ('' when the
    stream was clean). Never raises: a hostile stream costs only the tests it has not answered.
    """
    records: dict[str, Record] = {}
    position = 0
    while position < len(stream):
        try:
            record, position = _decode_one(stream, position, expected)
        except Exception as error:  # noqa: BLE001 - any surprise in hostile bytes is unreadable
            return records, unreadable(len(records), error)
        if record is not None and record[0] not in records:
            records[record[0]] = record[1]
    return records, ""


def unreadable(results: int, error: Exception) -> str:
    """The note for a stream that became unreadable after ``results`` records, at most
    MAX_FIELD_CHARS characters of the error's own words."""
    why = f"{type(error).__name__}: {error}"[:MAX_FIELD_CHARS]
    return f"{UNREADABLE} after {results} results ({why})"


def framing_size(prefix: bytes) -> int:
    """The bytes of a record's length prefix and header, from its first LENGTH_BYTES (ValueError
    for a header over MAX_HEADER_BYTES)."""
    (length,) = _LENGTH.unpack_from(prefix)
    if length > MAX_HEADER_BYTES:
        raise ValueError(f"a header of {length} bytes")
    return _LENGTH.size + length


def record_extent(framing: bytes) -> tuple[object, int]:
    """(the test it names, its size in bytes) of the record whose length prefix and header
    (:func:`framing_size` bytes) are ``framing``; any error :func:`decode_records` would note for
    a malformed header."""
    header, position = _header(framing, 0)
    return header["test"], position + sum(header["sizes"].values())


def _header(stream: bytes, position: int) -> tuple[dict, int]:
    """The header of the record at ``position`` (its types checked) and the offset past it."""
    length = framing_size(stream[position:position + _LENGTH.size]) - _LENGTH.size
    position += _LENGTH.size
    header = json.loads(stream[position:position + length].decode("utf-8"))
    sizes, nones = header["sizes"], header["none"]
    if not isinstance(sizes, dict) or not isinstance(nones, list):
        raise ValueError("a header without sizes")
    for size in sizes.values():
        if not isinstance(size, int) or not 0 <= size <= MAX_ARRAY_BYTES:
            raise ValueError(f"an array of {size!r} bytes")
    return header, position + length


def _decode_one(stream: bytes, position: int, expected: dict[str, list[str]]):
    header, position = _header(stream, position)
    test, sizes, nones = header["test"], header["sizes"], header["none"]
    values: dict[str, np.ndarray | None] = {}
    problems: dict[str, str] = {}
    wanted = set(expected.get(test, ()))
    for name, size in sizes.items():
        blob = stream[position:position + size]
        position += size
        if len(blob) != size:
            raise ValueError("a truncated array")
        if name in wanted:
            array, problem = load_array(blob)
            if problem:
                problems[name] = problem
            else:
                values[name] = array
    for name in nones:
        if name in wanted and name not in values:
            values[name] = None
    refused = header.get("refused", [])
    if not isinstance(refused, list):
        raise ValueError("a header with unreadable refusals")
    for name in refused:
        if name in wanted and name not in values:
            problems[name] = NOT_AN_ARRAY
    if test not in expected:
        return None, position
    return (test, Record(error_fields(header["error"]), values, problems)), position


def error_fields(error) -> dict | None:
    """The fields of a reported failure that have their expected type and a bounded size, and
    its "operands" when they are at most MAX_OPERANDS rows of integers in [0, MAX_OPERAND_INT]."""
    if error is None:
        return None
    if not isinstance(error, dict):
        return {"kind": "unreadable"}
    fields = {key: value for key, value in error.items()
              if key in ERROR_FIELDS and type(value) is ERROR_FIELDS[key]
              and (not isinstance(value, str) or len(value) <= MAX_FIELD_CHARS)}
    operands = error.get("operands")
    if (type(operands) is list and len(operands) <= MAX_OPERANDS * OPERAND_ROW
            and all(type(x) is int and 0 <= x <= MAX_OPERAND_INT for x in operands)):
        fields["operands"] = operands
    return fields


def load_array(blob: bytes) -> tuple[np.ndarray | None, str | None]:
    """A numeric or bool array from .npy bytes, or (None, why it was refused, in fixed words)."""
    try:
        array = np.load(io.BytesIO(blob), allow_pickle=False)
    except (ValueError, EOFError,
            OSError):  # pragma: no mutate (equivalent: np.load raises no OSError from bytes in memory without pickles)
        return None, "not a plain .npy array"
    if not isinstance(array, np.ndarray) or array.dtype.kind not in NUMERIC_KINDS:
        return None, NOT_AN_ARRAY
    return array, None


def step_label(steps: list[dict], index: int) -> str:
    """What step ``index`` of a program calls, in the student's terms:
    ``MultiHeadAttention.backward``; ``importing mytorch`` for index -1."""
    if not 0 <= index < len(steps):
        return "importing mytorch"
    classes = {name: step["cls"] for step in steps[:index] if step["op"] == "new"
               for name in step["out"]}
    step = steps[index]
    if step["op"] == "new":
        return f"{step['cls']}(...)"
    if step["op"] == "call":
        return f"{classes.get(step['obj'], '?')}.{step['method']}"
    if step["op"] == "get":
        return f"reading {classes.get(step['obj'], '?')}.{step['path']}"
    return "reading an input back"


def line_of(source: bytes, line: int) -> str:
    """Line ``line`` (from 1) of a file's first MAX_SOURCE_BYTES, decoded as UTF-8 (errors
    replaced), stripped and cut to MAX_CODE_CHARS; '' when there is no such line. The worker and
    the judge read the line that raised with it, so both find the same :func:`line_operands`."""
    lines = source[:MAX_SOURCE_BYTES].splitlines()
    if not 0 < line <= len(lines):
        return ""
    return lines[line - 1].decode("utf-8", "replace").strip()[:MAX_CODE_CHARS]


def code_only(code: str) -> str:
    """One line of code with each string literal (its prefix included; one left open runs to the
    end of the line) replaced by ``"..."`` and its trailing comment dropped, stripped and cut to
    MAX_CODE_CHARS: what a hint quotes of a handin's line (its code, never the student's prose),
    and where :func:`line_operands` finds the names."""
    return STRING_LITERAL.sub('"..."', code).split("#")[0].strip()[:MAX_CODE_CHARS]


def line_operands(code: str) -> list[str]:
    """The values a line of code names (in its :func:`code_only` text), in order, each once, at
    most MAX_OPERANDS: a plain name (``dLdZ``), or ``self.<attribute>`` (``self.W`` of
    ``self.W.T``); a called name's last part is left out (``x`` of ``x.reshape(...)``, nothing of
    ``len(x)``), and so are keywords, keyword arguments, names assigned (``dA`` of ``dA = ...``),
    ``self`` alone and the usual modules (``np``)."""
    text = code_only(code)
    found: list[str] = []
    for match in DOTTED_NAME.finditer(text):
        if ASSIGNED.match(text, match.end()):
            continue
        parts = re.sub(r"\s", "", match.group()).split(".")
        if text[match.end():].lstrip().startswith("("):
            parts = parts[:-1]
        name = ".".join(parts[:2]) if parts[:1] == ["self"] else ".".join(parts[:1])
        if name and name not in NOT_OPERANDS and name not in found:
            found.append(name)
    return found[:MAX_OPERANDS]


def operand_rows(flat: list[int], count: int) -> list[list[int]] | None:
    """The rows of an error's "operands" field, or None unless it holds exactly ``count`` rows of
    OPERAND_ROW integers whose kind and dtype are known indices."""
    if len(flat) != count * OPERAND_ROW:
        return None
    rows = [flat[i:i + OPERAND_ROW] for i in range(0, len(flat), OPERAND_ROW)]
    if not all(0 <= row[0] < len(OPERAND_KINDS) and 0 <= row[1] < len(OPERAND_DTYPES)
               for row in rows):
        return None
    return rows
