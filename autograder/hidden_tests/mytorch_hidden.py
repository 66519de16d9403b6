# hw4p1: instructor-only
"""Hidden mytorch tests, split into what the judge computes and what the worker calls.

Each test is a function of a :class:`autograder.wire.Program`: it draws its inputs, records the
calls the worker must make on the student's ``mytorch.nn`` classes (``p.new``, ``p.call``,
``p.get``...), computes the expected values itself (PyTorch autograd in float64 on explicitly
written formulas, ``torch.nn.MultiheadAttention``), and returns a ``check(r)`` that compares the
values the worker sent back (``r[ref]``: a numpy array, or None) and raises CheckFailed with
a message saying what was checked and what differed. The judge (``autograder/judge.py``) runs the
program in the sandbox, then the check; no student code ever runs beside these truths.

Same categories and points as ``tests/test_mytorch.py``, with other shapes. The inputs are drawn
from a generator the judge seeds afresh at every grading (``secrets``), so the worker's calls
differ each time and results recorded in one grading are worthless in the next; the tolerances
hold for any draw, so a handin scores the same every time. Checks that a shortcut cannot pass:
every gradient is compared for two different upstream gradients, a second forward must replace
what the first stored, inputs must come back unmodified, masked keys must not influence the
output, and every projection's dLdW/dLdb is checked. Finite differences are taken of
the student's own forward: the judge moves each entry by +-1e-6 itself and asks the worker for
ordinary forward calls on the moved inputs (nothing but the student's outputs comes from the
student's process). They must match both the student's backward and the PyTorch gradient, and the
unperturbed forward must match PyTorch's, so no one of them can be faked alone. A query row whose keys
are all masked passes in either convention described in ``tests/numeric_checks.py``.

A failed check raises CheckFailed with a ``diagnosis.Failure`` (what was compared, how it differed,
the case's context) from which ``diagnosis.hints`` words the likely cause; checks that know their
case say so with ``within(...)``.

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

from autograder.hidden_tests.diagnosis import Failure, attention_variant
from autograder.wire import Program, Ref
from tests.numeric_checks import (PROJECTIONS, RTOL_FINITE_DIFF, RTOL_TORCH, as_tensor,
                                  difference_features, leaf, mask_with_visible_keys,
                                  padding_and_causal_masks, torch_multihead_attention,
                                  torch_parameter_grads)

FD_STEP = 1e-6  # the step of tests/numeric_checks.numerical_gradient
RTOL_FLOAT32 = 1e-5  # float32 results against float64 truths of the same float32 inputs
# float32 attention with scores in the hundreds: the scores' rounding (~1e-7 x |score|) reaches the
# gradients; 300 draws of the reference err up to 1.7e-5 x scale, a bound 30 times that holds any
# draw (the float64 copy of the case checks the values to RTOL_TORCH)
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


def tests_of(category: str) -> list[HiddenTest]:
    return [test for test in HIDDEN_TESTS if test.category == category]


# ---------------------------------------------------------------------------------------------
# Checks. Explicit tests, not `assert`, so that `python -O` cannot remove them; each looks at the
# shape before any arithmetic on a returned array, and messages never quote array values.
# ---------------------------------------------------------------------------------------------

class CheckFailed(Exception):
    """A check of a hidden test failed; the message says what was checked and what differed, the
    :class:`~autograder.hidden_tests.diagnosis.Failure` what that tells about the bug."""

    def __init__(self, message: str, failure: Failure) -> None:
        super().__init__(message)
        self.failure = failure


# The values compared, as the student's code names them; a check's name holds one of them.
QUANTITIES = ("_split_heads", "_concat_heads", "_merge_masks", "output", "dquery", "dkey",
              "dvalue", *(f"{layer}.{grad}" for layer in PROJECTIONS for grad in ("dLdW", "dLdb")),
              "dLdA", "dLdW", "dLdb", "dLdZ", "dQ", "dK", "dV", "Z", "A")
QUANTITY = re.compile(r"(?<![\w.])(" + "|".join(map(re.escape, QUANTITIES)) + r")(?![\w])")
_context: ContextVar[dict] = ContextVar("hidden_test_context", default={})


@contextmanager
def within(**context):
    """What the enclosed checks know about their case (the softmax's dim is the last axis, this is
    a second forward...), passed on to any Failure they raise."""
    token = _context.set({**_context.get(), **context})
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
    return Failure(kind, quantity, role, context=dict(_context.get()), **fields)


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
                          failure_of(name, "shape", role, features=features))


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


def attention_truth(Q, K, V, mask, d_output):
    """softmax(Q K^T / sqrt(E)) V written out in torch, -inf at masked scores: out, dQ, dK, dV."""
    tq, tk, tv = leaf(Q), leaf(K), leaf(V)
    scores = tq @ tk.transpose(-1, -2) / math.sqrt(Q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(torch.from_numpy(np.broadcast_to(mask, scores.shape).copy()),
                                    float("-inf"))
    out = torch.softmax(scores, dim=-1) @ tv
    out.backward(torch.from_numpy(d_output))
    return out.detach().numpy(), tq.grad.numpy(), tk.grad.numpy(), tv.grad.numpy()


# ---------------------------------------------------------------------------------------------
# Linear
# ---------------------------------------------------------------------------------------------

def linear_truth(W, b, A, dLdZ):
    tA, tW, tb = leaf(A), leaf(W), leaf(b)
    Z = tA @ tW.T + tb
    Z.backward(torch.from_numpy(dLdZ))
    return Z.detach().numpy(), tA.grad.numpy(), tW.grad.numpy(), tb.grad.numpy()


@hidden_test("Linear", 2)
def linear_against_torch_for_two_upstream_gradients(p: Program, rng: Generator) -> Check:
    """Z, dLdA and the stored dLdW, dLdb for batches of 1 to 4 dimensions, two upstream gradients
    each, against PyTorch; A and each upstream gradient must come back unmodified."""
    in_features, out_features = 7, 4
    pending, echoes, upstreams = [], [], []
    for batch_dims in [(3,), (1,), (2, 5), (3, 2, 2), (2, 2, 1, 3)]:
        W, b = rng.standard_normal((out_features, in_features)), rng.standard_normal(out_features)
        A = rng.standard_normal((*batch_dims, in_features))
        a = p.array(A)
        layer = p.new("Linear", in_features, out_features)
        p.call(layer, "init_weights", W, b)
        for attempt in range(2):
            dLdZ = rng.standard_normal((*batch_dims, out_features)) * (attempt + 1)
            upstream = p.array(dLdZ)
            refs = (p.call(layer, "forward", a), p.call(layer, "backward", upstream),
                    p.get(layer, "dLdW"), p.get(layer, "dLdb"))
            pending.append((f"A {A.shape}, upstream gradient #{attempt + 1}", refs,
                            linear_truth(W, b, A, dLdZ)))
            upstreams.append((p.echo(upstream), dLdZ))
        echoes.append((p.echo(a), A))

    def check(r):
        assert_unchanged(r, echoes, "Linear's input A")
        assert_unchanged(r, upstreams, "Linear.backward's upstream gradient dLdZ")
        for where, refs, truth in pending:
            assert_all_close(r, where, ("Z", "dLdA", "stored dLdW", "stored dLdb"), refs, truth)
    return check


@hidden_test("Linear", 1)
def linear_second_forward_replaces_the_first(p: Program, rng: Generator) -> Check:
    """After two forwards of different batch shapes, backward uses the second."""
    W, b = rng.standard_normal((3, 6)), rng.standard_normal(3)
    layer = p.new("Linear", 6, 3)
    p.call(layer, "init_weights", W, b)
    p.call(layer, "forward", rng.standard_normal((4, 2, 6)))
    A = rng.standard_normal((5, 6))
    p.call(layer, "forward", A)
    dLdZ = rng.standard_normal((5, 3))
    refs = (p.call(layer, "backward", dLdZ), p.get(layer, "dLdW"), p.get(layer, "dLdb"))
    truth = linear_truth(W, b, A, dLdZ)[1:]

    def check(r):
        with within(second_forward=True):
            for name, ref, expected in zip(("dLdA", "dLdW", "dLdb"), refs, truth):
                close(f"{name} after two forwards", r[ref], expected)
    return check


@hidden_test("Linear", 1)
def linear_finite_differences(p: Program, rng: Generator) -> Check:
    """dLdA, dLdW and dLdb against finite differences of the forward, on a 4-d batch."""
    W, b = rng.standard_normal((2, 3)), rng.standard_normal(2)
    A, dLdZ = rng.standard_normal((2, 2, 2, 3)), rng.standard_normal((2, 2, 2, 2))
    layer = p.new("Linear", 3, 2)
    w, bias, a = p.array(W), p.array(b), p.array(A)
    p.call(layer, "init_weights", w, bias)
    z = p.call(layer, "forward", a)
    mine = (p.call(layer, "backward", dLdZ), p.get(layer, "dLdW"), p.get(layer, "dLdb"))
    moved = p.new("Linear", 3, 2)  # loaded with each moved W or b in turn

    def with_weights(W_moved, b_moved):
        p.call(moved, "init_weights", W_moved, b_moved)
        return p.call(moved, "forward", a)

    perturbed = [perturbed_forwards(A, lambda x: p.call(layer, "forward", x)),
                 perturbed_forwards(W, lambda x: with_weights(x, bias)),
                 perturbed_forwards(b, lambda x: with_weights(w, x))]
    truth = linear_truth(W, b, A, dLdZ)

    def check(r):
        close("Z", r[z], truth[0])
        for name, ref, outputs, shape, expected in zip(("dLdA", "dLdW", "dLdb"), mine, perturbed,
                                                       (A.shape, W.shape, b.shape), truth[1:]):
            assert_fd_matches(name, r[ref], fd_gradient(r, outputs, dLdZ, shape, name), expected)
    return check


@hidden_test("Linear", 1)
def linear_float32_stays_float32(p: Program, rng: Generator) -> Check:
    """float32 weights and inputs give float32 Z, dLdA, dLdW and dLdb, equal to PyTorch's."""
    W, b, A, dLdZ = (rng.standard_normal(shape).astype(np.float32)
                     for shape in ((2, 5), (2,), (2, 3, 5), (2, 3, 2)))
    layer = p.new("Linear", 5, 2)
    p.call(layer, "init_weights", W, b)
    refs = (p.call(layer, "forward", A), p.call(layer, "backward", dLdZ), p.get(layer, "dLdW"),
            p.get(layer, "dLdb"))
    truth = linear_truth(*(x.astype(np.float64) for x in (W, b, A, dLdZ)))

    def check(r):
        for name, ref, expected in zip(("Z", "dLdA", "dLdW", "dLdb"), refs, truth):
            expect_dtype(name, r[ref], np.float32)
            close(f"float32 {name}", r[ref], expected, RTOL_FLOAT32)
    return check


# ---------------------------------------------------------------------------------------------
# Softmax
# ---------------------------------------------------------------------------------------------

def softmax_truth(Z, dim, dLdA):
    tZ = leaf(Z)
    tA = torch.softmax(tZ, dim=dim)
    tA.backward(torch.from_numpy(dLdA))
    return tA.detach().numpy(), tZ.grad.numpy()


@hidden_test("Softmax", 2)
def softmax_every_dim_against_torch_for_two_upstream_gradients(p: Program, rng: Generator) -> Check:
    """A and dLdZ over every dim of 1-d to 5-d inputs, two upstream gradients each, against
    PyTorch; Z and each upstream gradient must come back unmodified."""
    pending, echoes, upstreams = [], [], []
    for shape in [(6,), (3, 1), (2, 5, 3), (1, 3, 2, 4), (2, 3, 1, 2, 3)]:
        Z = rng.standard_normal(shape) * 4
        z = p.array(Z)
        for dim in range(-len(shape), len(shape)):
            softmax = p.new("Softmax", dim=dim)
            for attempt in range(2):
                dLdA = rng.standard_normal(shape) * (attempt + 1)
                upstream = p.array(dLdA)
                refs = (p.call(softmax, "forward", z), p.call(softmax, "backward", upstream))
                pending.append((f"Z {shape}, dim {dim}, upstream gradient #{attempt + 1}", refs,
                                softmax_truth(Z, dim, dLdA), dim % len(shape) == len(shape) - 1))
                upstreams.append((p.echo(upstream), dLdA))
            echoes.append((p.echo(z), Z))

    def check(r):
        assert_unchanged(r, echoes, "Softmax.forward's input Z")
        assert_unchanged(r, upstreams, "Softmax.backward's upstream gradient dLdA")
        for where, refs, truth, last_axis in pending:
            with within(last_axis=last_axis):
                assert_all_close(r, where, ("A", "dLdZ"), refs, truth)
    return check


@hidden_test("Softmax", 1.5)
def softmax_finite_differences(p: Program, rng: Generator) -> Check:
    """dLdZ against finite differences of the forward, over dims 0, -2 and 2."""
    Z, dLdA = rng.standard_normal((3, 2, 4)), rng.standard_normal((3, 2, 4))
    z = p.array(Z)
    pending = []
    for dim in (0, -2, 2):
        softmax = p.new("Softmax", dim=dim)
        a = p.call(softmax, "forward", z)
        mine = p.call(softmax, "backward", dLdA)
        perturbed = perturbed_forwards(Z, lambda x: p.call(softmax, "forward", x))
        pending.append((dim, a, mine, perturbed, softmax_truth(Z, dim, dLdA)))

    def check(r):
        for dim, a, mine, perturbed, (t_a, t_dz) in pending:
            name = f"over dim {dim}: dLdZ"
            with within(last_axis=dim % Z.ndim == Z.ndim - 1):
                close(f"over dim {dim}: A", r[a], t_a)
                assert_fd_matches(name, r[mine], fd_gradient(r, perturbed, dLdA, Z.shape, name),
                                  t_dz)
    return check


@hidden_test("Softmax", 1.5)
def softmax_extreme_logits(p: Program, rng: Generator) -> Check:
    """Logits of +-1000 and 1e4, in float64 and float32 (a non-contiguous input too): finite,
    dtype kept, equal to PyTorch's."""
    Z = np.stack([rng.uniform(-1200, 1200, 8), rng.uniform(1000, 1005, 8),
                  rng.uniform(-1005, -1000, 8), np.full(8, 1e4)])
    pending = []
    for dtype, rtol in ((np.float64, RTOL_TORCH), (np.float32, RTOL_FLOAT32)):
        dLdA = rng.standard_normal(Z.shape)
        softmax = p.new("Softmax", dim=1)
        a = p.call(softmax, "forward", Z.T.astype(dtype).T)  # Fortran order survives the .npy
        dz = p.call(softmax, "backward", dLdA.astype(dtype))
        truth = softmax_truth(Z.astype(dtype).astype(np.float64), 1,
                              dLdA.astype(dtype).astype(np.float64))
        pending.append((np.dtype(dtype), rtol, a, dz, truth))

    @within(last_axis=True)
    def check(r):
        for dtype, rtol, a, dz, (t_a, t_dz) in pending:
            expect_dtype("A", r[a], dtype)
            close(f"{dtype.name} softmax A of huge logits", r[a], t_a, rtol)
            expect_dtype("dLdZ", r[dz], dtype)
            close(f"{dtype.name} gradient dLdZ of huge logits", r[dz], t_dz, rtol)
    return check


# ---------------------------------------------------------------------------------------------
# ScaledDotProductAttention
# ---------------------------------------------------------------------------------------------

def check_attention(r, where: str, refs, truth, names=("output", "dQ", "dK", "dV"),
                    inputs: tuple | None = None) -> None:
    """The attention's values against ``truth``; with its ``inputs`` (Q, K, V, mask), a wrong
    output is matched against the common wrong formulas."""
    if inputs is not None and names[0] == "output":
        close(f"{where}: output", r[refs[0]], truth[0],
              explain=lambda actual: attention_variant(actual, *inputs))
    assert_all_close(r, where, names, refs, truth)


@hidden_test("ScaledDotProductAttention", 8)
def sdpa_against_explicit_torch_formula(p: Program, rng: Generator) -> Check:
    """Output, dQ, dK and dV for batches of 1 to 4 dimensions, broadcast masks and two upstream
    gradients, against softmax(QK^T/sqrt(E))V in PyTorch; Q, K, V and each upstream gradient must
    come back unmodified."""
    cases = [  # (N, ..., H), L, S, E, Ev, mask shape
        ((3, 2), 5, 4, 6, 3, None),
        ((2, 4), 3, 8, 4, 5, (3, 8)),
        ((2, 3, 2), 4, 5, 3, 6, (2, 1, 2, 4, 5)),
        ((2, 2), 7, 3, 5, 2, (2, 2, 7, 3)),
        ((3,), 2, 6, 4, 4, (3, 1, 6)),
        ((1, 1, 1, 2), 3, 4, 2, 3, (4,)),
    ]
    pending, echoes, upstreams = [], [], []
    for batch, L, S, E, Ev, mask_shape in cases:
        Q, K, V = (rng.standard_normal((*batch, n, d)) for n, d in ((L, E), (S, E), (S, Ev)))
        qkv = [p.array(x) for x in (Q, K, V)]
        mask = None if mask_shape is None else mask_with_visible_keys(rng, mask_shape, 0.6)
        attention = p.new("ScaledDotProductAttention")
        for attempt in range(2):
            d_output = rng.standard_normal((*batch, L, Ev)) * (attempt + 1)
            upstream = p.array(d_output)
            out = p.call(attention, "forward", *qkv, mask)
            grads = p.call(attention, "backward", upstream, outputs=3)
            upstreams.append((p.echo(upstream), d_output))
            where = (f"Q {Q.shape}, K {K.shape}, V {V.shape}, mask {mask_shape}, "
                     f"upstream #{attempt + 1}")
            pending.append((where, (out, *grads), attention_truth(Q, K, V, mask, d_output),
                            (Q, K, V, mask)))
        echoes += [(p.echo(ref), x) for ref, x in zip(qkv, (Q, K, V))]

    def check(r):
        assert_unchanged(r, echoes, "Q, K or V")
        assert_unchanged(r, upstreams, "ScaledDotProductAttention.backward's upstream gradient")
        for where, refs, truth, inputs in pending:
            with within(masked=inputs[3] is not None):
                check_attention(r, where, refs, truth, inputs=inputs)
    return check


@hidden_test("ScaledDotProductAttention", 3)
def sdpa_second_forward_replaces_the_first(p: Program, rng: Generator) -> Check:
    """After two forwards of different shapes, backward uses the second."""
    attention = p.new("ScaledDotProductAttention")
    p.call(attention, "forward", *(rng.standard_normal((2, 3, 4)) for _ in range(3)),
           mask_with_visible_keys(rng, (3, 3), 0.5))
    Q, K, V = (rng.standard_normal(shape) for shape in ((2, 2, 5), (2, 6, 5), (2, 6, 3)))
    mask = mask_with_visible_keys(rng, (2, 2, 6), 0.5)
    p.call(attention, "forward", Q, K, V, mask)
    d_output = rng.standard_normal((2, 2, 3))
    grads = p.call(attention, "backward", d_output, outputs=3)
    truth = attention_truth(Q, K, V, mask, d_output)[1:]

    def check(r):
        with within(second_forward=True):
            check_attention(r, "after two forwards", grads, truth, names=("dQ", "dK", "dV"))
    return check


@hidden_test("ScaledDotProductAttention", 3)
def sdpa_masked_keys_have_no_influence(p: Program, rng: Generator) -> Check:
    """Changing the keys and values at masked positions leaves the output unchanged (and equal to
    PyTorch's)."""
    Q, K, V = (rng.standard_normal(shape) for shape in ((2, 3, 4, 5), (2, 3, 6, 5), (2, 3, 6, 2)))
    hidden_keys = [[4, 5], [0, 1, 2]]  # per sequence n, the keys nobody may attend to
    mask = np.zeros((2, 1, 1, 6), dtype=bool)
    for n, keys in enumerate(hidden_keys):
        mask[n, ..., keys] = True
    attention = p.new("ScaledDotProductAttention")
    out = p.call(attention, "forward", Q, K, V, mask)
    K2, V2 = K.copy(), V.copy()
    for n, keys in enumerate(hidden_keys):
        K2[n, :, keys] = rng.standard_normal(K2[n, :, keys].shape) * 100
        V2[n, :, keys] = 1e3
    out2 = p.call(attention, "forward", Q, K2, V2, mask)
    truth = attention_truth(Q, K, V, mask, np.zeros((2, 3, 4, 2)))[0]

    def check(r):
        with within(masked=True):
            close("output", r[out], truth,
                  explain=lambda actual: attention_variant(actual, Q, K, V, mask))
            close("output with other keys and values where masked", r[out2], truth)
    return check


@hidden_test("ScaledDotProductAttention", 3)
def sdpa_finite_differences(p: Program, rng: Generator) -> Check:
    """dQ, dK and dV against finite differences of the forward, with a mask."""
    Q, K, V = (rng.standard_normal(shape) for shape in ((2, 2, 3), (2, 3, 3), (2, 3, 2)))
    d_output = rng.standard_normal((2, 2, 2))
    mask = mask_with_visible_keys(rng, (2, 2, 3), 0.4)
    attention = p.new("ScaledDotProductAttention")
    qkv, held_mask = [p.array(x) for x in (Q, K, V)], p.array(mask)
    out = p.call(attention, "forward", *qkv, held_mask)
    mine = p.call(attention, "backward", d_output, outputs=3)

    def moving(position: int) -> Callable[[np.ndarray], Ref]:
        return lambda x: p.call(attention, "forward",
                                *(x if i == position else ref for i, ref in enumerate(qkv)),
                                held_mask)

    perturbed = [perturbed_forwards(x, moving(i)) for i, x in enumerate((Q, K, V))]
    truth = attention_truth(Q, K, V, mask, d_output)

    def check(r):
        with within(masked=True):
            check_attention(r, "unperturbed", (out,), truth, names=("output",),
                            inputs=(Q, K, V, mask))
        for name, ref, outputs, x, expected in zip(("dQ", "dK", "dV"), mine, perturbed,
                                                   (Q, K, V), truth[1:]):
            assert_fd_matches(name, r[ref], fd_gradient(r, outputs, d_output, x.shape, name),
                              expected)
    return check


def assert_finite_of_dtype(r, dtype, refs: dict) -> None:
    for name, ref in refs.items():
        expect_dtype(name, r[ref], dtype)
        expect(np.all(np.isfinite(r[ref])),
               f"{name} has NaN or inf with a fully masked query row", "nonfinite")


def sdpa_fully_masked_case(p: Program, Q, K, V, mask, d_output, rtol: float,
                           where: str) -> Check:
    """``tests/numeric_checks.check_sdpa_fully_masked`` split into calls and truths: either
    convention for the fully masked rows, every dtype kept, everything else exact."""
    scores_shape = (*Q.shape[:-1], K.shape[-2])
    full = np.broadcast_to(mask, scores_shape).all(axis=-1)
    truth_mask = np.broadcast_to(mask, scores_shape).copy()
    truth_mask[full] = False  # any allowed key will do: these rows get no upstream gradient
    d_zeroed = d_output * ~full[..., None]
    t_out, t_dQ, t_dK, t_dV = attention_truth(*(x.astype(np.float64) for x in (Q, K, V)),
                                              truth_mask, d_zeroed.astype(np.float64))
    t_out = np.where(full[..., None], V.astype(np.float64).mean(axis=-2, keepdims=True), t_out)
    uniform_share = np.sum(d_output * full[..., None], axis=-2, keepdims=True) / K.shape[-2]
    attention = p.new("ScaledDotProductAttention")
    out = p.call(attention, "forward", Q, K, V, mask)
    first = p.call(attention, "backward", d_output, outputs=3)
    p.call(attention, "forward", Q, K, V, mask)
    second = p.call(attention, "backward", d_zeroed, outputs=3)

    @within(fully_masked=True)
    def check(r):
        assert_finite_of_dtype(r, Q.dtype, {"output": out})
        close(f"{where}: output (fully masked rows: mean of V over the keys)", r[out],
              t_out, rtol)
        assert_finite_of_dtype(r, Q.dtype, dict(zip(("dQ", "dK", "dV"), first)))
        dQ = r[first[0]]
        expect_shape(f"{where}: dQ", dQ, t_dQ.shape)
        close(f"{where}: dQ of the rows with an allowed key", dQ[~full], t_dQ[~full], rtol)
        close(f"{where}: dV (a fully masked row adds d_output_row / S to every key)",
              r[first[2]], t_dV + uniform_share, rtol)
        assert_finite_of_dtype(r, Q.dtype, dict(zip(("dQ", "dK", "dV"), second)))
        for name, ref, expected in zip(("dQ", "dK", "dV"), second, (t_dQ, t_dK, t_dV)):
            close(f"{where}, d_output 0 on the fully masked rows: {name}", r[ref],
                  expected, rtol)
    return check


@hidden_test("ScaledDotProductAttention", 3)
def sdpa_fully_masked_rows_in_float32_and_float64(p: Program, rng: Generator) -> Check:
    """Query rows whose keys are all masked: the output is the mean of V, gradients agree with
    either accepted convention, finite, in float32 and float64, with scores in the hundreds and at
    unit scale."""
    cases = []  # (Q, K, V, mask, d_output, where, float32 tolerance)
    Q, K = rng.standard_normal((3, 4, 2)) * 20, rng.standard_normal((3, 5, 2)) * 20
    mask = mask_with_visible_keys(rng, (3, 4, 5), 0.5)
    mask[2, 3] = True
    cases.append((Q, K, rng.standard_normal((3, 5, 3)), mask, rng.standard_normal((3, 4, 3)),
                  "scores in the hundreds, query 3 of sequence 2", RTOL_FLOAT32_BIG_SCORES))
    # At unit scale a masked key would weigh as much as an allowed one if its score were not
    # removed: with scores in the hundreds, that can go unnoticed for some draws.
    Q, K = rng.standard_normal((2, 3, 4)), rng.standard_normal((2, 5, 4))
    mask = mask_with_visible_keys(rng, (2, 3, 5), 0.5)
    mask[0, 0] = [True, True, False, False, False]  # partly masked whatever the draw
    mask[1, 2] = True
    cases.append((Q, K, rng.standard_normal((2, 5, 3)), mask, rng.standard_normal((2, 3, 3)),
                  "unit scale, query 2 of sequence 1", RTOL_FLOAT32))
    Q, K = rng.standard_normal((2, 3, 2, 4)), rng.standard_normal((2, 3, 6, 4))
    mask = np.zeros((2, 1, 1, 6), dtype=bool)
    mask[1] = True  # every key of sequence 1 is padding: all its rows, in every head
    cases.append((Q, K, rng.standard_normal((2, 3, 6, 2)), mask, rng.standard_normal((2, 3, 2, 2)),
                  "sequence 1 all padding", RTOL_FLOAT32))
    checks = [sdpa_fully_masked_case(p, *(x.astype(dtype) for x in (Q, K, V)), mask,
                                     d_output.astype(dtype), rtol,
                                     f"{description}, {np.dtype(dtype).name}")
              for Q, K, V, mask, d_output, description, rtol_float32 in cases
              for dtype, rtol in ((np.float64, RTOL_TORCH), (np.float32, rtol_float32))]

    def check(r):
        for one in checks:
            one(r)
    return check


# ---------------------------------------------------------------------------------------------
# MultiHeadAttention
# ---------------------------------------------------------------------------------------------

def weights_for(rng: np.random.Generator, E: int) -> list[np.ndarray]:
    """[Wq, bq, Wk, bk, Wv, bv, Wo, bo], the order of MultiHeadAttention.init_weights."""
    return [x for _ in range(4) for x in (rng.uniform(-1, 1, (E, E)) / math.sqrt(E),
                                           rng.uniform(-0.3, 0.3, E))]


def padded_masks(rng: Generator, N: int, L: int, S: int) -> tuple[np.ndarray, np.ndarray]:
    """``padding_and_causal_masks`` with the last sequence's last key padded whenever N > 1, so
    that a padding mask applied to the wrong axis changes the result at every draw."""
    padding, causal = padding_and_causal_masks(rng, N, L, S)
    if N > 1:
        padding[-1, -1] = True
    return padding, causal


def new_mha(p: Program, weights: list[np.ndarray], num_heads: int) -> Ref:
    mha = p.new("MultiHeadAttention", weights[0].shape[0], num_heads)
    p.call(mha, "init_weights", *weights)
    return mha


def projection_grads(p: Program, mha: Ref) -> list[Ref]:
    """Refs of [q_proj.dLdW, q_proj.dLdb, ..., out_proj.dLdb]: torch_parameter_grads' order."""
    return [p.get(mha, f"{layer}.{param}") for layer in PROJECTIONS for param in ("dLdW", "dLdb")]


def parameter_names(layers=PROJECTIONS) -> list[str]:
    return [f"{layer}.{param}" for layer in layers for param in ("dLdW", "dLdb")]


def mha_torch_truth(weights, num_heads, query, key, value, padding, causal, d_output):
    """PyTorch's module: output, [dquery, dkey, dvalue], parameter gradients."""
    reference = torch_multihead_attention(weights, num_heads)
    inputs = [leaf(x) for x in (query, key, value)]
    t_out, _ = reference(*inputs, key_padding_mask=as_tensor(padding),
                         attn_mask=as_tensor(causal), need_weights=False)
    t_out.backward(torch.from_numpy(d_output))
    return (t_out.detach().numpy(), [x.grad.numpy() for x in inputs],
            torch_parameter_grads(reference))


def mha_against_torch(p: Program, mha: Ref, weights, num_heads, inputs: list[Ref], arrays,
                      padding, causal, d_output, where: str) -> Check:
    """``check_mha_against_torch`` split: forward and backward on the worker, PyTorch here; the
    upstream gradient must come back unmodified."""
    out = p.call(mha, "forward", *inputs, key_padding_mask=padding, attn_mask=causal)
    upstream = p.array(d_output)
    d_inputs = p.call(mha, "backward", upstream, outputs=3)
    echo = p.echo(upstream)
    params = projection_grads(p, mha)
    t_out, t_inputs, t_params = mha_torch_truth(weights, num_heads, *arrays, padding, causal,
                                                d_output)

    def check(r):
        assert_unchanged(r, [(echo, d_output)],
                         "MultiHeadAttention.backward's upstream gradient d_output")
        close(f"{where}: output", r[out], t_out)
        for name, ref, expected in zip(("dquery", "dkey", "dvalue"), d_inputs, t_inputs):
            close(f"{where}: {name}", r[ref], expected)
        for name, ref, expected in zip(parameter_names(), params, t_params):
            close(f"{where}: {name}", r[ref], expected)
    return check


@hidden_test("MultiHeadAttention", 6)
def mha_cross_attention_against_torch_for_two_upstream_gradients(p: Program,
                                                                  rng: Generator) -> Check:
    """Output, input gradients and every projection's dLdW, dLdb against
    torch.nn.MultiheadAttention, with no mask, padding, causal and both masks, two upstream
    gradients each; query, key, value and each upstream gradient must come back unmodified."""
    checks, echoes = [], []
    for N, L, S, E, H in [(2, 6, 4, 8, 4), (3, 3, 9, 6, 1), (1, 5, 5, 10, 5)]:
        weights = weights_for(rng, E)
        padding, causal = padded_masks(rng, N, L, S)
        for case, (pad, cau) in {"no mask": (None, None), "padding": (padding, None),
                                 "causal": (None, causal), "both": (padding, causal)}.items():
            mha = new_mha(p, weights, H)
            arrays = [rng.standard_normal((N, T, E)) for T in (L, S, S)]
            inputs = [p.array(x) for x in arrays]
            for attempt in range(2):
                d_output = rng.standard_normal((N, L, E)) * (attempt + 1)
                where = f"N={N} L={L} S={S} E={E} H={H}, {case}, upstream #{attempt + 1}"
                checks.append(mha_against_torch(p, mha, weights, H, inputs, arrays, pad, cau,
                                                d_output, where))
            echoes += [(p.echo(ref), x) for ref, x in zip(inputs, arrays)]

    def check(r):
        assert_unchanged(r, echoes, "query, key or value")
        for one in checks:
            one(r)
    return check


@hidden_test("MultiHeadAttention", 3)
def mha_self_attention_with_one_array_for_query_key_value(p: Program, rng: Generator) -> Check:
    """One array passed as query, key and value: the output and dquery + dkey + dvalue against
    PyTorch, and float32 weights and inputs keep float32."""
    N, T, E, H = 3, 5, 12, 3
    weights = weights_for(rng, E)
    x = rng.standard_normal((N, T, E))
    padding, causal = padded_masks(rng, N, T, T)
    mha = new_mha(p, weights, H)
    d_output = rng.standard_normal((N, T, E))
    xs = p.array(x)
    out = p.call(mha, "forward", xs, xs, xs, key_padding_mask=padding, attn_mask=causal)
    grads = p.call(mha, "backward", d_output, outputs=3)
    tx = leaf(x)
    reference = torch_multihead_attention(weights, H)
    out_t, _ = reference(tx, tx, tx, key_padding_mask=as_tensor(padding),
                         attn_mask=as_tensor(causal), need_weights=False)
    out_t.backward(torch.from_numpy(d_output))
    mha32 = new_mha(p, [w.astype(np.float32) for w in weights], H)
    x32 = p.array(x.astype(np.float32))
    out32 = p.call(mha32, "forward", x32, x32, x32, key_padding_mask=padding, attn_mask=causal)
    grads32 = p.call(mha32, "backward", d_output.astype(np.float32), outputs=3)

    def check(r):
        close("self-attention output", r[out], out_t)
        for name, ref in zip(("dquery", "dkey", "dvalue"), grads):
            expect_shape(f"self-attention {name}", r[ref], x.shape)  # before adding them up
        close("self-attention dquery + dkey + dvalue", sum(r[g] for g in grads), tx.grad)
        for name, ref in zip(("output", "dquery", "dkey", "dvalue"), (out32, *grads32)):
            expect_dtype(f"float32 self-attention: {name}", r[ref], np.float32)
        close("float32 self-attention output", r[out32], out_t, RTOL_FLOAT32)
    return check


@hidden_test("MultiHeadAttention", 3)
def mha_second_forward_replaces_the_first(p: Program, rng: Generator) -> Check:
    """After a forward of other shapes, a masked forward and backward match PyTorch."""
    E, H = 6, 2
    weights = weights_for(rng, E)
    mha = new_mha(p, weights, H)
    p.call(mha, "forward", *(rng.standard_normal((4, 7, E)) for _ in range(3)))
    arrays = [rng.standard_normal((2, T, E)) for T in (3, 5, 5)]
    padding, causal = padded_masks(rng, 2, 3, 5)
    check = mha_against_torch(p, mha, weights, H, [p.array(x) for x in arrays], arrays, padding,
                              causal, rng.standard_normal((2, 3, E)),
                              "after a forward of other shapes")
    return within(second_forward=True)(check)


def mha_case(rng: np.random.Generator, N: int, L: int, S: int, E: int, H: int):
    """(weights, [query, key, value]) drawn as ``tests/numeric_checks.random_mha_case``."""
    weights = weights_for(rng, E)
    return weights, [rng.standard_normal((N, T, E)) for T in (L, S, S)]


def mha_perturbed(p: Program, weights: list[np.ndarray], num_heads: int, arrays,
                  inputs: list[Ref], masks: dict) -> list[list[Ref]]:
    """:func:`perturbed_forwards` for query, key, value and every projection's W and b, in the
    order of ``tests/numeric_checks.mha_finite_differences``: a MultiHeadAttention holding
    ``weights`` runs the moved inputs, another is loaded with each moved weight in turn."""
    mha = new_mha(p, weights, num_heads)
    moved = p.new("MultiHeadAttention", weights[0].shape[0], num_heads)
    held = [p.array(w) for w in weights]
    masks = {name: None if mask is None else p.array(mask) for name, mask in masks.items()}

    def moving_input(position: int) -> Callable[[np.ndarray], Ref]:
        return lambda x: p.call(mha, "forward",
                                *(x if i == position else ref for i, ref in enumerate(inputs)),
                                **masks)

    def moving_weight(position: int) -> Callable[[np.ndarray], Ref]:
        def forward(w: np.ndarray) -> Ref:
            p.call(moved, "init_weights",
                   *(w if i == position else ref for i, ref in enumerate(held)))
            return p.call(moved, "forward", *inputs, **masks)
        return forward

    return ([perturbed_forwards(x, moving_input(i)) for i, x in enumerate(arrays)]
            + [perturbed_forwards(w, moving_weight(i)) for i, w in enumerate(weights)])


def target_shapes(arrays, E: int) -> list[tuple]:
    return [x.shape for x in arrays] + [shape for _ in PROJECTIONS for shape in ((E, E), (E,))]


@hidden_test("MultiHeadAttention", 3)
def mha_finite_differences(p: Program, rng: Generator) -> Check:
    """Input gradients and every projection's dLdW, dLdb against finite differences of the
    forward, with padding and causal masks."""
    N, L, S, E, H = 2, 2, 3, 4, 2
    weights, arrays = mha_case(rng, N, L, S, E, H)
    padding = np.array([[False, False, True], [False, True, True]])
    causal = np.array([[False, True, False], [False, False, True]])  # every query sees key 0
    d_output = rng.standard_normal((N, L, E))
    mha = new_mha(p, weights, H)
    inputs = [p.array(x) for x in arrays]
    masks = {"key_padding_mask": padding, "attn_mask": causal}
    out = p.call(mha, "forward", *inputs, **masks)
    mine = list(p.call(mha, "backward", d_output, outputs=3)) + projection_grads(p, mha)
    perturbed = mha_perturbed(p, weights, H, arrays, inputs, masks)
    t_out, t_inputs, t_params = mha_torch_truth(weights, H, *arrays, padding, causal, d_output)
    names = ["dquery", "dkey", "dvalue"] + parameter_names()

    def check(r):
        close("output", r[out], t_out)
        for name, ref, outputs, shape, truth in zip(names, mine, perturbed,
                                                    target_shapes(arrays, E), t_inputs + t_params):
            assert_fd_matches(name, r[ref], fd_gradient(r, outputs, d_output, shape, name), truth)
    return check


def explicit_mha_truth(weights, num_heads, query, key, value, padding, causal, d_output):
    """MultiHeadAttention written out in torch, fully masked rows attending uniformly with
    constant scores (what finite differences of such a forward measure): output, [dquery, dkey,
    dvalue], parameter gradients in torch_parameter_grads' order."""
    params = [leaf(w) for w in weights]
    Wq, bq, Wk, bk, Wv, bv, Wo, bo = params
    inputs = [leaf(x) for x in (query, key, value)]
    N, L, E = query.shape
    S, d = key.shape[1], E // num_heads

    def heads(x, W, b):
        return (x @ W.T + b).reshape(N, -1, num_heads, d).transpose(1, 2)

    q, k, v = heads(inputs[0], Wq, bq), heads(inputs[1], Wk, bk), heads(inputs[2], Wv, bv)
    mask = torch.from_numpy(np.broadcast_to(padding[:, None, None, :] | causal[None, None],
                                            (N, num_heads, L, S)).copy())
    scores = (q @ k.transpose(-1, -2) / math.sqrt(d)).masked_fill(mask, float("-inf"))
    scores = scores.masked_fill(mask.all(-1, keepdim=True), 0.0)
    attended = (torch.softmax(scores, dim=-1) @ v).transpose(1, 2).reshape(N, L, E)
    out = attended @ Wo.T + bo
    out.backward(torch.from_numpy(d_output))
    return (out.detach().numpy(), [x.grad.numpy() for x in inputs],
            [w.grad.numpy() for w in params])


@hidden_test("MultiHeadAttention", 3)
def mha_fully_masked_rows(p: Program, rng: Generator) -> Check:
    """Query rows whose keys are all masked: the output is out_proj(mean of v_proj(value)),
    gradients agree with finite differences in either accepted convention, all finite."""
    N, L, S, E, H = 3, 3, 4, 6, 3
    weights, arrays = mha_case(rng, N, L, S, E, H)
    padding = np.array([[False] * 4, [False, False, True, True], [False, True, True, True]])
    causal = np.zeros((L, S), dtype=bool)
    causal[1, :2] = True  # query 1 sees no key of sequence 1 or 2
    causal[2, 0] = True  # query 2 sees no key of sequence 2
    d_output = rng.standard_normal((N, L, E))
    where = "query 1 of sequences 1 and 2, query 2 of sequence 2"
    full = (padding[:, None, :] | causal[None]).all(axis=-1)  # (N, L)
    mha = new_mha(p, weights, H)
    inputs = [p.array(x) for x in arrays]
    masks = {"key_padding_mask": padding, "attn_mask": causal}
    perturbed = mha_perturbed(p, weights, H, arrays, inputs, masks)
    rounds = []
    for label, upstream in (("d_output", d_output),
                            ("d_output 0 on the fully masked rows", d_output * ~full[..., None])):
        out = p.call(mha, "forward", *inputs, **masks)
        mine = list(p.call(mha, "backward", upstream, outputs=3)) + projection_grads(p, mha)
        rounds.append((label, upstream, out, mine,
                       explicit_mha_truth(weights, H, *arrays, padding, causal, upstream)))
    names = ["dquery", "dkey", "dvalue"] + parameter_names()
    shared = {"dvalue"} | set(parameter_names(("v_proj", "out_proj")))

    @within(fully_masked=True)
    def check(r):
        for number, (label, upstream, out, mine, (t_out, t_inputs, t_params)) in enumerate(rounds):
            assert_finite_of_dtype(r, np.float64, {"output": out})
            close(f"{where}, {label}: output (fully masked rows: out_proj(mean of "
                  f"v_proj(value)))", r[out], t_out)
            assert_finite_of_dtype(r, np.float64, dict(zip(names[:3], mine[:3])))
            for name, ref, pert, shape, truth in zip(names, mine, perturbed,
                                                     target_shapes(arrays, E),
                                                     t_inputs + t_params):
                fd = fd_gradient(r, pert, upstream, shape, name)
                close(f"finite differences of your forward in {name} (against PyTorch)",
                      fd, truth, RTOL_FINITE_DIFF, role="forward")
                if number == 1 or name in shared:
                    close(f"{where}, {label}: {name}", r[ref], fd, RTOL_FINITE_DIFF,
                          role="backward-vs-forward")
                elif name == "dquery":
                    expect_shape(f"{where}, {label}: dquery", r[ref], fd.shape,
                                 role="backward-vs-forward")
                    close(f"{where}, {label}: dquery of the rows with an allowed key",
                          r[ref][~full], fd[~full], RTOL_FINITE_DIFF, role="backward-vs-forward")
    return check


@hidden_test("MultiHeadAttention", 2)
def mha_helpers(p: Program, rng: Generator) -> Check:
    """_split_heads, _concat_heads and _merge_masks on their own."""
    N, T, E, H, L, S = 3, 4, 12, 4, 2, 5
    mha = p.new("MultiHeadAttention", E, H)
    x = rng.standard_normal((N, T, E))
    heads = p.call(mha, "_split_heads", x)
    expected = np.stack([x[:, :, h * (E // H):(h + 1) * (E // H)] for h in range(H)], axis=1)
    round_trip = p.call(mha, "_concat_heads", heads)
    concat = p.call(mha, "_concat_heads", expected.copy())
    padding, causal = rng.random((N, S)) < 0.4, rng.random((L, S)) < 0.4
    full = (N, H, L, S)
    by_key = np.broadcast_to(padding[:, None, None, :], full)
    by_query = np.broadcast_to(causal, full)
    merges = []
    for masks, args, truth in (("both", (padding, causal), by_key | by_query),
                               ("padding", (padding, None), by_key),
                               ("attention", (None, causal), by_query)):
        label = "_merge_masks(" + ", ".join("None" if a is None else "mask" for a in args) + ")"
        merges.append((label, masks, p.call(mha, "_merge_masks", *args), truth))
    nothing = p.call(mha, "_merge_masks", None, None)

    def check(r):
        close("_split_heads", r[heads], expected, 0.0)
        close("_concat_heads(_split_heads(x))", r[round_trip], x, 0.0)
        close("_concat_heads", r[concat], x, 0.0)
        for label, masks, ref, truth in merges:
            with within(masks=masks):
                merged = r[ref]
                expect(merged is not None, f"{label} returned None", "missing")
                try:
                    same = np.array_equal(np.broadcast_to(merged, full), truth)
                except ValueError:
                    same = False
                expect(same, f"{label}: expected a mask broadcastable to {full} equal to the "
                             f"union", "mask")
        expect(r[nothing] is None or not np.any(r[nothing]),
               "_merge_masks(None, None) must mask nothing")
    return check
