"""Replaying one of the judge's programs on the student's ``mytorch`` (the worker's category
processes call :func:`run_test` for each test): its record, or the typed fields of the step that
failed (``wire.encode_record``), never text the student code wrote.

numpy and the standard library only, like the rest of ``autograder/sandboxed/``.
"""
from __future__ import annotations

import os
import types
from functools import reduce
from pathlib import Path

import numpy as np

from autograder.sandboxed import wire
from autograder.sandboxed.refusals import CodeAtRunTime, ForbiddenImport

MAX_CHAINED_ERRORS = 20  # how far a failure's causes are searched for a forbidden import


class StepError(Exception):
    """A step of a program failed; ``fields`` say how (``wire.encode_record``'s error)."""

    def __init__(self, **fields) -> None:
        super().__init__(fields.get("kind", "failed"))
        self.fields = fields


def run_test(nn, folder: Path, test: str) -> bytes:
    """Replay one program; its record (with the failure's fields when a step failed)."""
    arrays, steps, returned = wire.load_program(folder)
    env: dict[str, object] = dict(arrays)
    values: dict[str, np.ndarray | None] = {}
    refused: list[str] = []
    for index, step in enumerate(steps):
        try:
            run_step(nn, step, env, values, refused)
        except StepError as error:
            return wire.encode_record(test, {**error.fields, "step": index}, values, refused)
    missing = [name for name in returned if name not in values and name not in refused]
    return wire.encode_record(test, {"kind": "lost"} if missing else None, values, refused)


def run_step(nn, step: dict, env: dict, values: dict, refused: list) -> None:
    """Run one step, storing what it produces in ``env`` and what is sent back in ``values``.

    A result that is not a numeric array (``init_weights`` returning ``self``, say) is kept in
    ``env`` and only listed in ``refused``: it fails a test only if the test reads it.
    """
    op, out = step["op"], step["out"]
    try:
        if op == "new":
            def build():
                return getattr(nn, step["cls"])(*resolve(step["args"], env),
                                                **resolve_kwargs(step["kwargs"], env))
            if "refuse" not in step:
                env[out[0]] = build()
                return
            results = [refuses(build, step["refuse"])]
        elif op == "call":
            result = call(env, step)
            results = [result] if len(out) == 1 else unpack(result, len(out))
        elif op == "get":
            results = [reduce(getattr, step["path"].split("."), env[step["obj"]])]
        elif op == "echo":
            results = [env[step["src"]]]
        else:
            raise StepError(kind="unknown step")
    except StepError:
        raise
    except BaseException as error:  # noqa: BLE001 - SystemExit and friends included
        raise StepError(**describe(error)) from None
    for name, result in zip(out, results):
        env[name] = result
        try:
            values[name] = env[name] = as_plain_array(result)
        except StepError:
            refused.append(name)


def refuses(build, error: str) -> bool:
    """True when ``build()`` raises ``error`` (the name of its class or of a base class), False
    when it returns; any other exception goes on (the step fails as one that raised)."""
    try:
        build()
    except Exception as raised:  # every other class is raised again
        if error in (cls.__name__ for cls in type(raised).__mro__):
            return True
        raise
    return False


def call(env: dict, step: dict):
    method = getattr(env[step["obj"]], step["method"])
    return method(*resolve(step["args"], env), **resolve_kwargs(step["kwargs"], env))


def unpack(result, count: int) -> list:
    if not isinstance(result, (tuple, list)) or len(result) != count:
        raise StepError(kind="not a tuple", count=count)
    return list(result)


def as_plain_array(value):
    """A copy of ``value`` as a numeric or bool numpy array; None stays None."""
    if value is None:
        return None
    try:
        array = np.array(value, copy=True)
    except Exception:  # noqa: BLE001 - arbitrary objects
        raise StepError(kind="not an array") from None
    if array.dtype.kind not in wire.NUMERIC_KINDS:
        raise StepError(kind="not an array")
    return array


def resolve(args: list[dict], env: dict) -> list:
    return [env[a["ref"]] if "ref" in a else a["lit"] for a in args]


def resolve_kwargs(kwargs: dict, env: dict) -> dict:
    return dict(zip(kwargs, resolve(list(kwargs.values()), env)))


def describe(error: BaseException) -> dict:
    """The fields of a failure of student code: the exception's class (and a TypeError's
    message) and the innermost line of mytorch it passed through, or the forbidden library it
    tried to import."""
    cause = error
    for _ in range(MAX_CHAINED_ERRORS):  # student code can chain exceptions in a cycle
        if cause is None:
            break
        if isinstance(cause, ForbiddenImport):
            return {"kind": "numpy only", "module": cause.module}
        if isinstance(cause, CodeAtRunTime):
            return {"kind": "code at run time", "file": cause.file, "line": cause.line}
        cause = cause.__cause__ or cause.__context__
    fields = {"kind": "raised", "type": type(error).__name__}
    if type(error) is TypeError and error.args and type(error.args[0]) is str:
        # Python's or numpy's words for a float size; an exact TypeError runs no student method
        # here, and the judge quotes only the messages it knows (diagnosis.KNOWN_MESSAGES)
        fields["message"] = error.args[0][:wire.MAX_FIELD_CHARS]
    found = raising_frame(error)
    if found is not None:
        frame, line = found
        fields.update(file=mytorch_path(frame.f_code.co_filename), line=line or 0,
                      function=frame.f_code.co_name, operands=operand_fields(frame, line or 0))
    # A file that does not parse is named by the error itself: the traceback's last mytorch frame
    # is the import statement of the file that imported it.
    if (isinstance(error, SyntaxError) and isinstance(error.filename, str)
            and "mytorch" in error.filename):
        fields.update(file=mytorch_path(error.filename), line=error.lineno or 0)
        fields.pop("function", None)
        fields.pop("operands", None)
    return fields


def raising_frame(error: BaseException) -> tuple[types.FrameType, int] | None:
    """(frame, line number) of the innermost line of mytorch that ``error``'s traceback passed
    through, or None. The given checks (``mytorch/nn/_checks.py``) raise on the student's behalf:
    their caller is named instead, when there is one."""
    entries = []
    entry = error.__traceback__
    while entry is not None:
        if "mytorch" in entry.tb_frame.f_code.co_filename:
            entries.append((entry.tb_frame, entry.tb_lineno))
        entry = entry.tb_next
    entries = [e for e in entries if not is_given_helper(e[0].f_code.co_filename)] or entries
    return entries[-1] if entries else None


def operand_fields(frame: types.FrameType, line: int) -> list[int]:
    """The error's "operands" field: a row (``wire.OPERAND_ROW`` integers) for each name of the
    line ``line`` of ``frame``'s file (``wire.line_operands``): the kind, dtype and shape of the
    value it held in ``frame``. Only plain locals and entries of an object's instance ``__dict__``
    are read, and only ``type(x) is np.ndarray``, Python and numpy scalars and None are told apart:
    no getattr on a student's object, so no property, ``__getattr__`` or ``__eq__`` of theirs runs
    here. [] when the line cannot be read."""
    try:
        with open(frame.f_code.co_filename, "rb") as source:
            code = wire.line_of(source.read(wire.MAX_SOURCE_BYTES), line)
        local = frame.f_locals
    except Exception:  # noqa: BLE001 - the file went away, or locals that cannot be read
        return []
    rows: list[int] = []
    for name in wire.line_operands(code):
        head, _, attribute = name.partition(".")
        value = entry_of(local, head)
        if attribute and value is not ABSENT:
            value = entry_of(instance_dict(value), attribute)
        rows += operand_row(value)
    return rows


ABSENT = object()  # a name that is not a local, or an attribute that is not in the instance dict
MRO, NAMESPACE = type.__dict__["__mro__"], type.__dict__["__dict__"]  # no metaclass can hook them
ARRAY = np.ndarray
PYTHON_SCALARS = {bool: "bool", int: "int", float: "float"}
NUMPY_SCALARS = (np.bool_, np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32,
                 np.uint64, np.float16, np.float32, np.float64, np.complex64, np.complex128)
DTYPE_NAMES = {(np.dtype(t).kind, np.dtype(t).itemsize): np.dtype(t).name for t in NUMPY_SCALARS}


def entry_of(mapping, key: str):
    """``mapping[key]`` for a dict (or a class's mapping proxy) and a str key, else ABSENT; found
    by comparing exact ``str`` keys, never by hash: a key of the student's could run code."""
    if type(mapping) is not dict and type(mapping) is not types.MappingProxyType:
        return ABSENT
    for name, value in mapping.items():
        if type(name) is str and name == key:
            return value
    return ABSENT


def instance_dict(obj):
    """``obj``'s instance ``__dict__`` when its class keeps one the usual way (the C descriptor
    Python gives a class), else ABSENT; read without ``getattr`` on ``obj`` or its class."""
    for klass in MRO.__get__(type(obj)):
        descriptor = entry_of(NAMESPACE.__get__(klass), "__dict__")
        if descriptor is not ABSENT:
            if type(descriptor) is not types.GetSetDescriptorType:
                return ABSENT
            try:
                return descriptor.__get__(obj)
            except TypeError:  # a descriptor of another class
                return ABSENT
    return ABSENT


def operand_row(value) -> list[int]:
    """One row of ``wire.OPERAND_ROW`` integers for a value: [kind, dtype, ndim, *dims]."""
    kind, dtype, shape = "other", "other", ()
    if value is ABSENT or value is None:
        kind = "absent" if value is ABSENT else "None"
    elif type(value) is ARRAY or any(type(value) is t for t in NUMPY_SCALARS):
        kind = "array" if type(value) is ARRAY else "scalar"
        dtype = DTYPE_NAMES.get((value.dtype.kind, value.dtype.itemsize), "other")
        shape = value.shape
    elif any(type(value) is t for t in PYTHON_SCALARS):
        kind, dtype = "scalar", PYTHON_SCALARS[type(value)]
        if dtype == "int":  # a size, mostly: its value, and whether it is negative, in the dims
            return [wire.OPERAND_KINDS.index(kind), wire.OPERAND_DTYPES.index(dtype), 0,
                    min(abs(value), wire.MAX_OPERAND_INT), int(value < 0),
                    *[0] * (wire.MAX_OPERAND_DIMS - 2)]
    dims = [min(int(d), wire.MAX_OPERAND_INT) for d in shape][:wire.MAX_OPERAND_DIMS]
    dims = dims if len(shape) <= wire.MAX_OPERAND_DIMS else []
    dims += [0] * (wire.MAX_OPERAND_DIMS - len(dims))
    return [wire.OPERAND_KINDS.index(kind), wire.OPERAND_DTYPES.index(dtype),
            min(len(shape), wire.MAX_OPERAND_INT), *dims]


def is_given_helper(filename: str) -> bool:
    """A private module of the package (``_checks.py``, ``_state_dict.py``): given code."""
    name = os.path.basename(filename)
    return name.startswith("_") and not name.startswith("__")


def mytorch_path(filename: str) -> str:
    """``filename`` relative to the handin's ``mytorch/`` folder."""
    return filename.rpartition("mytorch")[2].lstrip("/")
