"""Replaying one of the judge's programs on the student's ``mytorch`` (the worker's category
processes call :func:`run_test` for each test): its record, or the typed fields of the step that
failed (``wire.encode_record``), never text the student code wrote.

numpy and the standard library only, like the rest of ``autograder/sandboxed/``.
"""
from __future__ import annotations

import os
import traceback
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
            env[out[0]] = getattr(nn, step["cls"])(*resolve(step["args"], env),
                                                   **resolve_kwargs(step["kwargs"], env))
            return
        if op == "call":
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
    """The fields of a failure of student code: the exception's class and the innermost line of
    mytorch it passed through, or the forbidden library it tried to import."""
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
    frames = [f for f in traceback.extract_tb(error.__traceback__) if "mytorch" in f.filename]
    # The given checks (mytorch/nn/_checks.py) raise on the student's behalf: name their caller.
    frames = [f for f in frames if not is_given_helper(f.filename)] or frames
    if frames:
        fields.update(file=mytorch_path(frames[-1].filename), line=frames[-1].lineno or 0,
                      function=frames[-1].name)
    # A file that does not parse is named by the error itself: the traceback's last mytorch frame
    # is the import statement of the file that imported it.
    if (isinstance(error, SyntaxError) and isinstance(error.filename, str)
            and "mytorch" in error.filename):
        fields.update(file=mytorch_path(error.filename), line=error.lineno or 0)
        fields.pop("function", None)
    return fields


def is_given_helper(filename: str) -> bool:
    """A private module of the package (``_checks.py``, ``_state_dict.py``): given code."""
    name = os.path.basename(filename)
    return name.startswith("_") and not name.startswith("__")


def mytorch_path(filename: str) -> str:
    """``filename`` relative to the handin's ``mytorch/`` folder."""
    return filename.rpartition("mytorch")[2].lstrip("/")
