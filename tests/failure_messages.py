"""What a failure message says beyond the exception itself: the kind of bug an exception shows
(shape, dtype, device, index), numpy's and torch's words translated, the line of the code under
test that raised with the shapes of the arrays it names, and the case it raised in.

The rubric runner (``testing_framework.py``) prints these messages; this module scores nothing and
imports nothing from it. Test modules name their cases with :func:`in_case`. Nothing here may
raise while explaining: any object can be on a failing line (a module, a function, None, a class,
an object whose ``repr`` raises), and an explanation that cannot be read is left out, never
allowed to stop the run.
"""
from __future__ import annotations

import linecache
import os
import re
import traceback
import types
from contextlib import contextmanager
from pathlib import Path

def is_array(value) -> bool:
    """True for an array or tensor: a value whose ``shape`` is a tuple (torch.Size is one) and
    that has a ``dtype``; False for anything else, a class or a module included (numpy's module
    has a ``shape`` function and a ``dtype`` class), and for an attribute that raises."""
    if isinstance(value, (type, types.ModuleType)):
        return False
    try:
        return isinstance(getattr(value, "shape", None), tuple) and hasattr(value, "dtype")
    except Exception:  # noqa: BLE001 - a property of the student's object that raises
        return False


def readable(value: object) -> str:
    """``str(value)``, or ``<ClassName>`` when the object's own ``__str__`` raises."""
    try:
        return str(value)
    except Exception:  # noqa: BLE001 - any object's __str__ may raise
        return f"<{type(value).__name__}>"


def shown(value) -> str:
    """How a case's input reads in a message: shape and dtype of an array, else a short repr
    (``<ClassName>`` when the object's ``repr`` raises)."""
    if is_array(value):
        return f"{tuple(value.shape)} {value.dtype}"
    try:
        text = repr(value)
    except Exception:  # noqa: BLE001 - any object's __repr__ may raise
        text = f"<{type(value).__name__}>"
    return text if len(text) <= 40 else text[:37] + "..."


# ---------------------------------------------------------------------------------------------
# What an exception of the code under test says about the bug, read from the exception itself
# ---------------------------------------------------------------------------------------------

# The kind of bug each exception shows: (kind, words its message holds), tried in order, after the
# exception's class (:func:`exception_kind`). numpy and torch word the same failure differently.
KIND_WORDS = (
    ("device", ("device", "meta tensor")),
    ("dtype", ("dtype", "scalar type", "can't be cast", "cannot cast", "casting rule",
               "result type", "without overflow", "promotion of")),
    ("index", ("boolean index", "index out of range", "out of bounds for dimension",
               "index ", "indices")),
    ("shape", ("shape", "broadcast", "core dimension", "must match the size", "elements cannot be",
               "for scalar outputs",
               "dimension out of range", "cannot reshape", "size of", "dimension", "axis")),
)
KIND_WORDING = {  # kind -> (how a message names it, what it means when nothing more is known)
    "shape": ("a shape error", "the arrays' shapes do not fit the operation"),
    "dtype": ("a dtype error", "an array or tensor of the wrong dtype"),
    "device": ("a device error", "tensors on different devices (build every tensor on its "
               "input's device: device=x.device)"),
    "index": ("an index error", "an index or a boolean mask that does not fit the indexed array"),
}
# numpy's and torch's messages that need translating: (pattern, plain words with its groups).
TRANSLATIONS = (
    (r"matmul: Input operand 1 has a mismatch in its core dimension 0.*\(size (\d+) is "
     r"different from (\d+)\)",
     "a matrix product A @ B needs A's last dimension to equal B's second to last: here {1} "
     "and {0}"),
    (r"operands could not be broadcast together with shapes ([^\n]*?)\s*$",
     "these shapes do not broadcast against each other: {0} (each dimension pair must be equal "
     "or one of them 1, counted from the right)"),
    (r"boolean index did not match indexed array along (?:axis|dimension) (\d+); size of "
     r"(?:axis|dimension) is (\d+) but size of corresponding boolean (?:axis|dimension) is (\d+)",
     "indexing with a boolean mask needs the mask's shape to equal the indexed array's leading "
     "dimensions (here the array's size {1} against the mask's {2} along dimension {0}); a mask "
     "that only broadcasts (e.g. (L, S) against (N, H, L, S)) goes through np.where or "
     "np.broadcast_to"),
    (r"result type (\w+) can't be cast to the desired output type (\w+)",
     "an in-place operation (+=, add_, an indexed assignment) writes {0} values into a {1} "
     "tensor: create that tensor with the dtype of what goes into it"),
    (r"Promotion of int\.([\w/]+)\(float\) in in-place ops",
     "an in-place {0} (+=, -=) writes float values into an integer tensor: create that tensor "
     "with the dtype of what goes into it"),
    (r"Cannot cast ufunc '(\w+)' output from dtype\('(\w+)'\) to dtype\('(\w+)'\)",
     "an in-place {0} (+=, -=, out=) writes {1} values into a {2} array: create that array "
     "with the dtype of what goes into it"),
    (r"grad can be implicitly created only for scalar outputs",
     "backward() without an argument needs a single number (a 0-d tensor, e.g. a loss reduced to "
     "its mean): reduce it first (reduction='mean', or .mean() as the docstring says)"),
    (r"a Tensor with (\d+) elements cannot be converted to Scalar",
     "a single number was expected (a 0-d tensor, e.g. a loss reduced to its mean), got a tensor "
     "of {0} elements: reduce it (reduction='mean', or .mean() / .sum() as the docstring says)"),
)
# Frames of these folders are not the code under test: the line a message names is the innermost
# one outside them (the student's, or failing that the test's own).
LIBRARY_PARTS = ("site-packages", "dist-packages", f"{os.sep}lib{os.sep}python")
GIVEN_HELPERS = ("testing_framework.py", "failure_messages.py", "numeric_checks.py",
                 "_checks.py")
MAX_OPERANDS = 6
DOTTED_NAME = re.compile(r"(?<![\w.'\"])[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*")


def exception_kind(error: BaseException) -> str:
    """'shape', 'dtype', 'device', 'index' or '' (none of them), decided from ``error`` itself:
    its class first (IndexError, numpy's AxisError and UFuncTypeError), then its message's
    words (:data:`KIND_WORDS`), so a dtype bug raised in a device check is still a dtype bug."""
    name = type(error).__name__
    if name == "AxisError":
        return "shape"
    if "UFuncTypeError" in (cls.__name__ for cls in type(error).__mro__):
        return "dtype"
    message = readable(error).lower()
    for kind, words in KIND_WORDS:
        if any(word in message for word in words):
            return kind
    return "index" if isinstance(error, IndexError) else ""


def translated(error: BaseException) -> str:
    """``error``'s message in plain words when it is one of :data:`TRANSLATIONS`, else ''."""
    message = readable(error).strip()
    for pattern, words in TRANSLATIONS:
        found = re.search(pattern, message, re.DOTALL)
        if found:
            return words.format(*found.groups())
    return ""


def culprit(error: BaseException) -> tuple[types.FrameType, int] | None:
    """(frame, line number) of the innermost entry of ``error``'s traceback in code of this
    repository: not a library, not a given helper (the checks that raise on their caller's
    behalf); None if there is none."""
    found = None
    entry = error.__traceback__
    while entry is not None:
        filename = entry.tb_frame.f_code.co_filename
        if (not any(part in filename for part in LIBRARY_PARTS)
                and Path(filename).name not in GIVEN_HELPERS and not filename.startswith("<")):
            found = (entry.tb_frame, entry.tb_lineno)
        entry = entry.tb_next
    return found


def operands(frame: types.FrameType, line: str) -> list[str]:
    """``name shape dtype`` for each array or tensor the source ``line`` names: plain names and
    attribute chains, each as far as it holds an array (``self.W.T``; ``x`` of ``x.reshape``),
    read from ``frame`` without calling anything."""
    found = []
    for dotted in dict.fromkeys(DOTTED_NAME.findall(line.split("#")[0])):
        head, *attributes = dotted.split(".")
        scope = frame.f_locals if head in frame.f_locals else frame.f_globals
        if head not in scope:
            continue
        value, named, array = scope[head], head, None
        for attribute in [None, *attributes]:
            try:
                if attribute is not None:
                    value, named = getattr(value, attribute), f"{named}.{attribute}"
            except Exception:  # noqa: BLE001 - a property that raises
                break
            if is_array(value):
                array = f"{named} {shown(value)}"
        if array is not None and array not in found:
            found.append(array)
    return found[:MAX_OPERANDS]


def explain(error: BaseException, expect: str = "") -> list[str]:
    """Lines that say what ``error`` shows, for its failure message: its kind (shape, dtype,
    device, index) and numpy's or torch's words translated, the line that raised with the shapes
    of the arrays it names, and ``expect`` (what the docstring promises, when the test knows it).
    [] for an exception of none of these kinds, and when reading it fails (never raises)."""
    try:
        return explanation(error, expect)
    except Exception:  # noqa: BLE001 - the failure's own message still reaches the report
        return []


def explanation(error: BaseException, expect: str) -> list[str]:
    """:func:`explain`'s lines, which may raise on an object no rule foresaw."""
    kind = exception_kind(error)
    if not kind:
        return []
    label, meaning = KIND_WORDING[kind]
    lines = [f"{label}: {translated(error) or meaning}"]
    found = culprit(error)
    if found is not None:
        frame, number = found
        source = linecache.getline(frame.f_code.co_filename, number).strip()
        names = operands(frame, source)
        lines.append(f"raised at {Path(frame.f_code.co_filename).name}:{number}: {source}"
                     + (f"\n        with {', '.join(names)}" if names else ""))
    if expect:
        lines.append(f"expected: {expect}")
    return lines


EXPLAINED = "_hw4p1_explained"  # set on an exception whose explanation is in its notes


def add_notes(error: BaseException, notes: list[str]) -> None:
    # Exception.add_note is Python 3.11+; the attribute is the same list on 3.10.
    error.__notes__ = [*getattr(error, "__notes__", []), *notes]


@contextmanager
def in_case(what: str, expect: str = "", **inputs):
    """Name the case when the code under test raises inside the block, as a failed comparison
    names it: ``with in_case("causal mask", x=x, attn_mask=mask): out = layer(x, attn_mask=mask)``.

    The exception keeps its type and message and gains notes: what kind of bug it shows and the
    line that raised, with its arrays' shapes (:func:`explain`), ``expect`` (what the docstring
    promises for this case, e.g. ``"Z of shape (2, 3, 4)"``), then ``in the case: what (x (3, 6,
    16) torch.float32, ...)``; the rubric report and pytest print them. Failed checks
    (AssertionError) name their case already, and an unfinished stub (NotImplementedError) is the
    same in every case.
    """
    try:
        yield
    except (AssertionError, NotImplementedError):
        raise
    except Exception as error:
        details = ", ".join(f"{name} {shown(value)}" for name, value in inputs.items())
        notes = [] if getattr(error, EXPLAINED, False) else explain(error, expect)
        add_notes(error, [*notes, f"in the case: {what}" + (f" ({details})" if details else "")])
        try:
            setattr(error, EXPLAINED, True)
        except AttributeError:  # an exception class with __slots__: its notes say it once anyway
            pass
        raise


def device_check_failure(error: BaseException, what: str, setting: str,
                         fix: str) -> AssertionError:
    """The failure of a device check (code run with its tensors on one device, e.g. meta) that
    raised ``error``: a dtype, shape or index bug named as such, from the exception, and only a
    device error (or one of no known kind) named as a device bug with ``fix``."""
    kind = exception_kind(error)
    if kind in ("", "device"):
        return AssertionError(f"{what} failed {setting} ({readable(error)}): {fix}")
    notes = "; ".join(explain(error))
    return AssertionError(f"{what} raised {type(error).__name__} ({readable(error)}): "
                          f"{notes}; not a device problem, the same code fails on any device")


def describe(error: BaseException) -> str:
    """One readable line or a few: the exception type, its message, and where it was raised."""
    frames = traceback.extract_tb(error.__traceback__)
    message = readable(error).strip()
    if not message:
        line = frames[-1].line if frames and frames[-1].line else ""
        message = f"this check failed: {line}" if line else "(no message)"
    where = ""
    if frames:
        last = frames[-1]
        where = f"\n      at {Path(last.filename).name}:{last.lineno} in {last.name}"
    notes = list(getattr(error, "__notes__", []))
    if not (getattr(error, EXPLAINED, False)
            or isinstance(error, (AssertionError, NotImplementedError))):
        notes = explain(error) + notes  # raised outside in_case: at the test's line, or setup
    notes = "".join(f"\n      {readable(note)}" for note in notes)
    message = message.replace("\n", "\n      ")  # keep continuation lines under the first
    return f"{type(error).__name__}: {message}{where}{notes}"
