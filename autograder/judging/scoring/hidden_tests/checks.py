# hw4p1: instructor-only
"""What every hidden mytorch test shares: the registry, the checks and the finite differences.

A hidden test is a function of a :class:`autograder.sandboxed.wire.Program`: it draws its inputs,
records the calls the worker must make on the student's ``mytorch.nn`` classes (``p.new``,
``p.call``, ``p.get``...), computes the expected values itself (PyTorch autograd in float64 on
explicitly written formulas, ``torch.nn.MultiheadAttention``), and returns a ``check(r)`` that
compares the values the worker sent back (``r[ref]``: a numpy array, or None) and raises CheckFailed
with a message saying what was checked and what differed. The judge
(``autograder/judging/scoring/judge.py``) runs the program in the sandbox, then the check; no
student code ever runs beside these truths.

A failed check raises CheckFailed with a ``diagnosis.Failure`` (what was compared, in which role,
how it differed, the case's context) from which ``diagnosis.hints`` words the likely cause; checks
that know their case say so with ``within(...)``. Finite differences are taken of the student's
own forward: the judge moves each entry by +-FD_STEP itself (:func:`perturbed_forwards`) and asks
the worker for ordinary forward calls on the moved inputs, so nothing but the student's outputs
comes from the student's process.

Each test carries its share of the category's points (``@hidden_test(category, points)``); a
category scores the sum of the shares of the tests that pass.
"""
from __future__ import annotations

import math
import re
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Callable

import numpy as np
import torch
from numpy.random import Generator

from autograder.judging.scoring.hidden_tests.diagnosis import Failure
from autograder.sandboxed.wire import Program, Ref
from hw4lib.numeric_truths import (PROJECTIONS, RTOL_FINITE_DIFF, RTOL_TORCH,
                                   difference_features)

FD_STEP = 1e-6  # the step of tests/numeric_checks.numerical_gradient
RTOL_FLOAT32 = 1e-5  # float32 results against float64 truths of the same float32 inputs
# float32 attention with scores in the hundreds: the scores' rounding (float32's epsilon times
# |score|) reaches the gradients, so the bound is looser, well above the reference's error on any
# draw (test_fresh_inputs_give_the_same_score_every_time grades the reference on fresh draws); the
# float64 copy of the case checks the values to RTOL_TORCH
RTOL_FLOAT32_BIG_SCORES = 5e-4

Check = Callable[[dict], None]  # check(r): r maps each Ref the worker sent back to its value
Build = Callable[[Program, Generator], Check]


@dataclass(frozen=True)
class HiddenTest:
    """One hidden test: its category, its share of the category's points, what it checks.

    ``build(program, rng)`` draws the test's inputs from ``rng`` (a fresh seed each grading),
    records the worker's calls in ``program`` and returns the check of the values sent back.
    """

    name: str
    category: str
    points: float
    summary: str  # what is checked, in a sentence (the feedback shows it)
    build: Build


HIDDEN_TESTS: list[HiddenTest] = []


def hidden_test(category: str, points: float):
    """Register a test function as a hidden test worth ``points`` of ``category``."""
    def register(build: Build) -> Build:
        summary = " ".join((build.__doc__ or "").split())
        HIDDEN_TESTS.append(HiddenTest(build.__name__, category, points, summary, build))
        return build
    return register


# ---------------------------------------------------------------------------------------------
# Checks. Explicit tests, not `assert`, so that `python -O` cannot remove them; each looks at the
# shape before any arithmetic on a returned array, and messages never quote array values.
# ---------------------------------------------------------------------------------------------

class CheckFailed(Exception):
    """A check of a hidden test failed; the message says what was checked and what differed, the
    :class:`~autograder.judging.scoring.hidden_tests.diagnosis.Failure` what that tells about the
    bug."""

    def __init__(self, message: str, failure: Failure) -> None:
        super().__init__(message)
        self.failure = failure


# The values compared, as the student's code names them; a check's name holds one of them.
QUANTITIES = ("_split_heads", "_concat_heads", "_merge_masks", "output", "dquery", "dkey",
              "dvalue", *(f"{layer}.{grad}" for layer in PROJECTIONS for grad in ("dLdW", "dLdb")),
              "dLdA", "dLdW", "dLdb", "dLdZ", "dQ", "dK", "dV", "Z", "A")
QUANTITY = re.compile(r"(?<![\w.])(" + "|".join(map(re.escape, QUANTITIES)) + r")(?![\w])")
_context: ContextVar[dict] = ContextVar("hidden_test_context")


@contextmanager
def within(**context):
    """What the enclosed checks know about their case (the softmax's dim is the last axis, this is
    a second forward...), passed on to any Failure they raise."""
    token = _context.set({**_context.get({}), **context})
    try:
        yield
    finally:
        _context.reset(token)


def failure_of(name: str, kind: str, role: str = "truth", **fields) -> Failure:
    """The Failure of the check called ``name`` in ``role`` (one of ``diagnosis.ROLES``: what it
    compared): its quantity is the first one the name's last ': '-separated part mentions (the
    earlier parts say where)."""
    quantity = next((found.group(1) for part in reversed(name.split(": "))
                     if (found := QUANTITY.search(part))), "")
    context = {**_context.get({}), **fields.pop("context", {})}
    return Failure(kind, quantity, role, context=context, **fields)


def expect(condition, message: str, kind: str = "value", role: str = "truth") -> None:
    if not condition:
        raise CheckFailed(message, failure_of(message, kind, role))


def expect_shape(name: str, actual, shape: tuple, expected=None, role: str = "truth") -> None:
    """``actual`` is an array of ``shape`` (a value the worker sent back, or None); ``expected``,
    when given, lets a failure say what the wrong shape holds (else only whether it holds as
    many values)."""
    expect(actual is not None, f"{name}: got None (was it computed and stored?)", "missing", role)
    if actual.shape != tuple(shape):
        if expected is not None:
            features = difference_features(actual, expected)
        else:
            features = frozenset({"reshaped"} if actual.size == math.prod(shape) else ())
        raise CheckFailed(f"{name}: expected shape {tuple(shape)}, got {actual.shape}",
                          failure_of(name, "shape", role, features=features,
                                     context={"shapes": (tuple(shape), actual.shape)}))


def close(name: str, actual, expected, rtol: float = RTOL_TORCH,
          explain: Callable[[np.ndarray], str] | None = None, role: str = "truth") -> None:
    """Shapes equal, ``actual`` finite, and max|actual - expected| <= rtol * max(max|expected|, 1)
    (the criterion of ``tests/numeric_checks.assert_close``). ``explain(actual)``, when given,
    names the wrong formula that gives such values (a Failure's ``variant``); ``role``: what
    was compared (``diagnosis.ROLES``)."""
    if isinstance(expected, torch.Tensor):
        expected = expected.detach().numpy()
    expected = np.asarray(expected, dtype=np.float64)
    expect_shape(name, actual, expected.shape, expected, role)
    if not np.all(np.isfinite(actual)):
        raise CheckFailed(f"{name}: contains NaN or inf", failure_of(name, "nonfinite", role))
    error = float(np.max(np.abs(actual.astype(np.float64) - expected), initial=0.0))
    scale = max(float(np.max(np.abs(expected), initial=0.0)), 1.0)
    if error > rtol * scale:
        raise CheckFailed(f"{name}: max abs error {error:.3e} exceeds {rtol:.0e} x {scale:.3g} "
                          f"(shape {expected.shape})",
                          failure_of(name, "value", role,
                                     features=difference_features(actual, expected),
                                     variant=explain(actual) if explain else ""))


def expect_dtype(name: str, actual, dtype) -> None:
    dtype = np.dtype(dtype)
    expect(actual is not None and actual.dtype == dtype,
           f"{name}: {dtype.name} in, got {None if actual is None else actual.dtype}", "dtype")


def perturbed_forwards(x: np.ndarray, forward: Callable[[np.ndarray], Ref]) -> list[Ref]:
    """The worker's outputs of ``forward(moved)`` (ordinary forward steps it records) for each copy
    of ``x`` with one entry moved by +FD_STEP, then by -FD_STEP, entry after entry: the judge moves
    the entries itself, so finite differences need nothing but the student's outputs."""
    refs = []
    for index in np.ndindex(x.shape):
        for sign in (1, -1):
            moved = x.copy()
            moved[index] = x[index] + sign * FD_STEP
            refs.append(forward(moved))
    return refs


def fd_gradient(r, outputs: list[Ref], upstream: np.ndarray, shape: tuple,
                name: str) -> np.ndarray:
    """Central differences of sum(output * upstream) for an array of ``shape``, from the outputs
    of :func:`perturbed_forwards` (each must be shaped like ``upstream``)."""
    losses = []
    for ref in outputs:
        out = r[ref]
        expect_shape(f"{name}: your forward's output on a perturbed input", out, upstream.shape,
                     role="forward")
        losses.append(float(np.sum(out.astype(np.float64) * upstream)))
    pairs = np.array(losses).reshape(-1, 2)
    return ((pairs[:, 0] - pairs[:, 1]) / (2 * FD_STEP)).reshape(shape)


def assert_fd_matches(name: str, mine, fd: np.ndarray, truth) -> None:
    """The finite differences of the student's forward against the PyTorch gradient (is the
    forward right?), then the student's gradient against them (a forward faked to agree with a
    wrong backward fails the first)."""
    close(f"finite differences of your forward in {name} (against PyTorch)", fd, truth,
          RTOL_FINITE_DIFF, role="forward")
    close(f"{name} (against finite differences of your forward)", mine, fd, RTOL_FINITE_DIFF,
          role="backward-vs-forward")


def assert_all_close(r, where: str, names, refs, truths, rtol: float = RTOL_TORCH) -> None:
    """Each returned value ``r[ref]`` against its truth, named ``where: name`` in the message."""
    for name, ref, expected in zip(names, refs, truths):
        close(f"{where}: {name}", r[ref], expected, rtol)


def assert_unchanged(r: dict, echoes: list[tuple[Ref, np.ndarray]], what: str) -> None:
    """Each echoed array the worker sent back equals what the judge gave (checked before any value
    computed from it, so an in-place change is named as such). Echoes of a program that stopped
    early are checked as far as they came back."""
    returned = [(ref, given) for ref, given in echoes if ref.name in r or ref.name in r.problems]
    expect(all(np.array_equal(r[ref], given) for ref, given in returned),
           f"{what} was changed in place", "modified")


def assert_finite_of_dtype(r, dtype, refs: dict) -> None:
    for name, ref in refs.items():
        expect_dtype(name, r[ref], dtype)
        expect(np.all(np.isfinite(r[ref])),
               f"{name} has NaN or inf with a fully masked query row", "nonfinite")
