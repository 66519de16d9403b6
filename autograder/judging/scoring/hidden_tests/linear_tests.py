# hw4p1: instructor-only
"""Linear's hidden tests (``checks.py``: how a test is written and checked;
``mytorch_hidden.py``: every category)."""
from __future__ import annotations

import numpy as np
from numpy.random import Generator

from autograder.judging.scoring.hidden_tests.checks import (RTOL_FLOAT32, Check, hidden_test,
                                                            within, close, expect_dtype,
                                                            perturbed_forwards, fd_gradient,
                                                            assert_fd_matches, assert_all_close,
                                                            assert_unchanged)
from autograder.sandboxed.wire import Program
from hw4lib.numeric_truths import backward_with, leaf


def linear_truth(W, b, A, dLdZ):
    tA, tW, tb = leaf(A), leaf(W), leaf(b)
    Z = tA @ tW.T + tb
    backward_with(Z, dLdZ)
    return Z.detach().numpy(), tA.grad.numpy(), tW.grad.numpy(), tb.grad.numpy()


@hidden_test("Linear", 2)
def linear_against_torch_for_two_upstream_gradients(p: Program, rng: Generator) -> Check:
    """Z, dLdA and the stored dLdW, dLdb for batches of 1 to 4 dimensions, one output feature and
    one input feature, two upstream gradients each, against PyTorch; A and each upstream gradient
    must come back unmodified."""
    pending, echoes, upstreams = [], [], []
    for batch_dims, (in_features, out_features) in [
            ((3,), (7, 4)), ((1,), (7, 4)), ((2, 5), (7, 4)), ((3, 2, 2), (7, 4)),
            ((2, 2, 1, 3), (7, 4)), ((3, 2), (4, 1)), ((2,), (1, 3))]:  # one feature out, in
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
            pending.append((f"Linear({in_features}, {out_features}), A {A.shape}, upstream "
                            f"gradient #{attempt + 1}", refs,
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
