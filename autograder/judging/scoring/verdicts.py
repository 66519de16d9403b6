"""The judge's verdict on one test: pass or fail from the worker's record, and the feedback for a
failure, worded from the judge's own knowledge (the test, the step, the handin's files); nothing
the worker returns is quoted. ``judge.py`` converses with the worker and calls :func:`judge_test`
on each record.
"""
from __future__ import annotations

import builtins
import os
from pathlib import Path

from autograder.judging.isolation import file_trees, processes
from autograder.judging.scoring.hidden_tests.checks import CheckFailed, HiddenTest
from autograder.judging.scoring.hidden_tests.diagnosis import (KNOWN_MESSAGES, Failure,
                                                                Operand)
from autograder.judging.scoring.report import TestResult
from autograder.sandboxed import wire
from autograder.sandboxed.refusals import FORBIDDEN_LIBRARIES, MADE_AT_RUN_TIME, NUMPY_ONLY

MAX_MESSAGE_CHARS = 600
# Exception classes named in the feedback; any other class is "an exception of its own class".
KNOWN_EXCEPTIONS = frozenset(
    [name for name, value in vars(builtins).items()
     if isinstance(value, type) and issubclass(value, BaseException)]
    + ["LinAlgError", "AxisError"])
MAX_LINE = 10**6
MAX_FUNCTION_CHARS = 60
# The arguments of each method the hidden tests call, in order, and the inputs of the last forward
# whose shapes each result of a backward must have (mytorch's documented signatures).
PARAMETERS = {
    "Linear.forward": ("A",), "Linear.backward": ("dLdZ",),
    "Softmax.forward": ("Z",), "Softmax.backward": ("dLdA",),
    "ScaledDotProductAttention.forward": ("Q", "K", "V", "mask"),
    "ScaledDotProductAttention.backward": ("dLdZ",),
    "MultiHeadAttention.forward": ("query", "key", "value", "key_padding_mask", "attn_mask"),
    "MultiHeadAttention.backward": ("dLdZ",),
}
GRADIENTS = {
    "Linear.backward": (("dLdA", "A"),), "Softmax.backward": (("dLdZ", "Z"),),
    "ScaledDotProductAttention.backward": (("dQ", "Q"), ("dK", "K"), ("dV", "V")),
    "MultiHeadAttention.backward": (("dquery", "query"), ("dkey", "key"), ("dvalue", "value")),
}


def student_files(package: Path) -> frozenset[str]:
    """The handin's mytorch sources, relative to ``mytorch/``: the files feedback may name."""
    return frozenset(Path(entry.path).relative_to(package).as_posix()
                     for entry in file_trees.tree_entries(package)
                     if entry.name.endswith(".py") and entry.is_file(follow_symlinks=False))


def worker_note(run: processes.Run, timeout: float, stream_note: str) -> str:
    """Why tests may lack a result, in words."""
    if run.timed_out:
        return f"the tests were stopped at the {timeout:.0f} s time limit"
    if run.result_overflow:
        return "the worker sent more than the grader reads"
    if run.returncode != 0:
        return f"the test process ended with exit status {run.returncode}"
    return stream_note


def judge_test(test: HiddenTest, record: wire.Record | None, check, note: str,
               steps: list[dict], files: frozenset[str],
               timed_out: str = "",
               package: Path | None = None,
               arrays: dict | None = None) -> tuple[TestResult, Failure | None]:
    """Pass or fail one test from the worker's record (``steps``: the test's program); with the
    result, what the failure tells about the bug (None when the test passed). ``timed_out``
    ("after 60 s"): this test was running when the worker was stopped. ``package``: the handin's
    ``mytorch/`` folder, whose line that raised the judge reads itself for the hint (with the
    shapes the worker found its names to hold). ``arrays``: the program's inputs, whose shapes a
    hint on a step that raised names.

    The kind of failure comes first: not written yet, does not import or parse, timed out, raised;
    only a test whose values came back is compared (and only then can a hint name a bug family).
    """
    def result(message: str, failure: Failure | None = None) -> tuple[TestResult, Failure | None]:
        points = 0.0 if message else float(test.points)
        return (TestResult(test.name, test.category, float(test.points), points, test.summary,
                           message[:MAX_MESSAGE_CHARS]),
                (failure or Failure("stopped")) if message else None)

    if record is None:
        if timed_out:
            return result(f"timed out: this test was still running when the tests were stopped "
                          f"{timed_out}", Failure("timeout"))
        return result(f"no result: {note or 'the test process stopped before this test'}")
    if record.error is not None:
        message = describe_failure(record.error, steps, files)
        kind = failure_kind(record.error)
        if kind not in ("raised", "not written"):
            return result(message, Failure(kind) if kind == "import" else None)
        if kind == "raised":
            earlier = wrong_before_the_raise(check, record)
            if earlier is not None:
                return result(f"{message}; before it, {earlier}", earlier.failure)
        code = source_line(package, files, record.error)
        return result(message, raised_failure(record.error, steps, code, arrays or {}))
    try:
        check(Values(record.values, record.problems))
    except CheckFailed as error:
        return result(str(error) or "a check failed", error.failure)
    except KeyError:
        return result("a value the test needs was not returned")
    except Exception as error:  # noqa: BLE001 - any other surprise fails the test, never passes it
        return result(f"the values returned could not be compared ({type(error).__name__})")
    return result("")


def raised_failure(error: dict, steps: list[dict], code: str, arrays: dict) -> Failure:
    """What a step that raised tells the hints: the step, the exception's class, the line that
    raised (``code``, the judge's own reading), what its names held, the step's input arrays'
    shapes (``arrays``: the program's inputs) and a TypeError's message when it is one of
    ``diagnosis.KNOWN_MESSAGES`` (Python's or numpy's words; any other is dropped). Its kind is
    "not written" for the handout's stubs, else "raised"."""
    index = error.get("step", len(steps))  # none named: outside the steps, importing mytorch
    step = wire.step_label(steps, index)
    call = call_step(steps, index)
    given = call_inputs(call, step, arrays) if call is not None else {}
    operands = (line_operands(code, error), step_operands(steps, index, arrays))
    message = str(error.get("message", ""))
    kind = "not written" if failure_kind(error) == "not written" else "raised"
    return Failure(kind, step.rpartition(".")[2], step=step,
                   exception=str(error.get("type", "")), code=code,
                   operands="; ".join(filter(None, operands)), held=held_operands(code, error),
                   given={name: x.shape for name, x in given.items()},
                   earlier=previous_call_inputs(steps, index, arrays),
                   message=message if KNOWN_MESSAGES.fullmatch(message) else "")


def call_step(steps: list[dict], index: int) -> dict | None:
    """Step ``index`` of ``steps`` when it is a call of a method; None for any other step and for
    an index outside the steps (importing mytorch)."""
    step = steps[index] if index in range(len(steps)) else None
    return step if step is not None and step.get("op") == "call" else None


def previous_call_inputs(steps: list[dict], index: int, arrays: dict) -> dict:
    """{parameter: its shape} of the array inputs of the last call before step ``index`` of the
    same method on the same object; {} when there is none (or ``index`` is not a call)."""
    if call_step(steps, index) is None:
        return {}
    same = [i for i in range(index) if steps[i].get("op") == "call"
            and steps[i].get("obj") == steps[index].get("obj")
            and steps[i].get("method") == steps[index].get("method")]
    if not same:
        return {}
    # the same method of the same object: the step's own label
    inputs = call_inputs(steps[same[-1]], wire.step_label(steps, index), arrays)
    return {name: x.shape for name, x in inputs.items()}


def shape_of(value) -> str:
    """``(2, 3) float64`` for an array, '' for anything else (None, a literal)."""
    shape, dtype = getattr(value, "shape", None), getattr(value, "dtype", None)
    return f"{tuple(shape)} {dtype}" if isinstance(shape, tuple) and dtype is not None else ""


def call_inputs(step: dict, label: str, arrays: dict) -> dict:
    """{parameter: its array} of a call ``step`` of ``label`` (``Class.method``), for the
    arguments that are the judge's own input arrays (``arrays``; nothing the worker returned)."""
    names = PARAMETERS.get(label, ())
    given = [*zip(names, step.get("args", [])), *step.get("kwargs", {}).items()]
    found = {}
    for name, argument in given:
        ref = argument.get("ref") if isinstance(argument, dict) else None
        if isinstance(ref, str) and shape_of(arrays.get(ref)):
            found[name] = arrays[ref]
    return found


def step_operands(steps: list[dict], index: int, arrays: dict) -> str:
    """What the step ``index`` that raised was given, as the hidden inputs had it: each array
    argument's shape and dtype, and for a backward the shape each gradient must have (that of
    the input of the object's last forward it belongs to); '' when the step is not a call of
    :data:`PARAMETERS`. Shapes only, never a value."""
    if call_step(steps, index) is None:
        return ""
    label = wire.step_label(steps, index)
    inputs = call_inputs(steps[index], label, arrays)
    parts = [f"{label} was given " + ", ".join(f"{name} {shape_of(x)}"
                                                for name, x in inputs.items())] if inputs else []
    forwards = [i for i in range(index) if steps[i].get("op") == "call"
                and steps[i].get("obj") == steps[index].get("obj")
                and steps[i].get("method") == "forward"]
    if label in GRADIENTS and forwards:
        forward = call_inputs(steps[forwards[-1]], f"{label.rpartition('.')[0]}.forward", arrays)
        parts += [f"{gradient} must be shaped like {source}, {tuple(forward[source].shape)}"
                  for gradient, source in GRADIENTS[label] if source in forward]
    return "; ".join(parts)


def source_line(package: Path | None, files: frozenset[str], error: dict) -> str:
    """The line of the handin's mytorch that raised (the worker names its file and number), read
    by the judge from the handin itself (``wire.line_of``: as the worker read it); '' when the
    file is not one of the handin's ``files`` or the line is not there. Only the hints read it."""
    file, line = error.get("file"), error.get("line")
    if package is None or file not in files or not isinstance(line, int) or line >= MAX_LINE:
        return ""  # a line before the first is '' by wire.line_of
    try:  # a regular file when listed; never follow a link or wait on a pipe put there since
        descriptor = os.open(package / file, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        with os.fdopen(descriptor, "rb") as source:
            return wire.line_of(source.read(wire.MAX_SOURCE_BYTES), line)
    except OSError:
        return ""


def line_operands(code: str, error: dict) -> str:
    """``at `dA = dLdZ @ self.W`: dLdZ (4, 3, 5) float64, self.W (5, 7) float64``: the line that
    raised (``code``, the judge's own reading; its code only, ``wire.code_only``: no string
    literal or comment of the student's is quoted) with what the worker found each of its names
    (``wire.line_operands``) to hold, from the error's "operands" integers; '' when they do not
    fit the line or name no array, scalar or None. The worker's numbers are the handin's word:
    a handin that lies misleads only its own hint."""
    shown = [f"{name} {operand_text(held)}"
             for name, held in held_operands(code, error).items() if operand_text(held)]
    if not shown:
        return ""
    quoted = " ".join(processes.printable(wire.code_only(code)).split()).replace("`", "'")
    return f"at `{quoted}`: {', '.join(shown)}"


def held_operands(code: str, error: dict) -> dict[str, Operand]:
    """{name: what it held} for each name of the line that raised (``wire.line_operands`` of
    the judge's own reading ``code``), from the error's "operands" integers; {} when they do not
    fit the line. An array of more than ``wire.MAX_OPERAND_DIMS`` dimensions has no shape."""
    names = wire.line_operands(code)
    rows = wire.operand_rows(error.get("operands", []), len(names)) if names else None
    held = {}
    for name, row in zip(names, rows or []):
        kind, dtype, ndim = wire.OPERAND_KINDS[row[0]], wire.OPERAND_DTYPES[row[1]], row[2]
        if kind == "array":
            shape = tuple(row[3:3 + ndim]) if ndim <= wire.MAX_OPERAND_DIMS else ()
            held[name] = Operand(kind, dtype, shape, ndim)
        elif kind == "scalar" and dtype == "int":
            held[name] = Operand(kind, dtype, value=-row[3] if row[4] else row[3])
        else:
            held[name] = Operand(kind, dtype)
    return held


def operand_text(held: Operand) -> str:
    """How one operand reads: ``(4, 3) float64``, ``an array of 12 dimensions, float64``,
    ``= -1`` (a Python int), ``a Python float``, ``a float32 scalar``, ``None``; '' for a name
    not found or an object that is none of these."""
    dtype = "of another dtype" if held.dtype == "other" else held.dtype
    if held.kind == "array":
        return (f"an array of {held.ndim} dimensions, {dtype}" if held.ndim != len(held.shape)
                else f"{held.shape} {dtype}")
    if held.kind == "scalar" and held.dtype == "int":
        return f"= {held.value}"
    if held.kind == "scalar":
        return "a Python float" if held.dtype == "float" else f"a {dtype} scalar"
    return "None" if held.kind == "None" else ""


def wrong_before_the_raise(check, record: wire.Record) -> CheckFailed | None:
    """The first check that fails on the values a program returned before one of its steps
    raised, or None. A wrong value there is the likelier cause: a forward pass that skipped a
    layer makes its backward raise before any gradient is compared."""
    try:
        check(Values(record.values, record.problems))
    except CheckFailed as error:
        return None if error.failure.kind == "missing" else error
    except Exception:  # noqa: BLE001 - a value the check needs was not returned: nothing to add
        return None
    return None


PARSE_ERRORS = ("SyntaxError", "IndentationError", "TabError")


def failure_kind(error: dict) -> str:
    """What a failure the worker reported is, first: "not written" (NotImplementedError, the
    handout's stubs), "import" (importing mytorch failed), "raised" (a step raised), or the
    worker's own kind ("numpy only", "not a tuple", ...)."""
    kind = error.get("kind")
    if kind != "raised":
        return str(kind)
    if error.get("type") == "NotImplementedError":
        return "not written"
    step = error.get("step")  # none named, or outside the steps (-1): importing mytorch
    return "import" if step is None or step < 0 else "raised"


def describe_failure(error: dict, steps: list[dict], files: frozenset[str]) -> str:
    """The feedback for a failure the worker reported, worded from the judge's own knowledge; the
    kind of failure first."""
    kind = error.get("kind")
    where = wire.step_label(steps, error.get("step", len(steps)))
    if kind == "numpy only":
        module = error.get("module")
        return f"{NUMPY_ONLY}: it imports {module if module in FORBIDDEN_LIBRARIES else 'one'}"
    file, line, function = error.get("file"), error.get("line"), error.get("function")
    known = file in files and isinstance(line, int) and 0 < line < MAX_LINE
    if kind == "code at run time":  # the worker names no function for it: the file and line only
        return f"{where}: {MADE_AT_RUN_TIME}" + (f" (at mytorch/{file}:{line})" if known else "")
    named = (isinstance(function, str) and function.isidentifier()
             and len(function) <= MAX_FUNCTION_CHARS)
    in_function = f", in {function}" if named else ""
    at = f" (at mytorch/{file}:{line}{in_function})" if known else ""
    if kind == "raised":
        name = error.get("type")
        what = name if name in KNOWN_EXCEPTIONS else "an exception of its own class"
        if failure_kind(error) == "not written":
            return f"not written yet: {where} raised {what}{at}"
        if name in PARSE_ERRORS and where == "importing mytorch":
            return (f"mytorch does not parse: {what} in mytorch/{file} line {line}" if known
                    else f"mytorch does not parse: {what}")
        if where == "importing mytorch":
            return f"mytorch does not import: {what}{at}"
        return f"{where} raised {what}{at}"
    if kind == "not a tuple" and isinstance(error.get("count"), int):
        return f"{where} must return a tuple of {error['count']} arrays"
    if kind == "lost":
        return "the test process lost values the test needs"
    return f"{where} failed"


class Values(dict):
    """The worker's returned values, looked up by the Refs the test recorded; reading a value that
    was refused (not a numeric array) fails the test with the reason."""

    def __init__(self, values: dict, problems: dict[str, str]) -> None:
        super().__init__(values)
        self.problems = problems

    def __getitem__(self, ref: wire.Ref):
        if ref.name in self.problems:
            raise CheckFailed(f"a value is {self.problems[ref.name]}", Failure("missing"))
        return super().__getitem__(ref.name)
