# hw4p1: instructor-only
"""Softmax's hidden tests (``checks.py``: how a test is written and checked;
``mytorch_hidden.py``: every category)."""
from __future__ import annotations

import numpy as np
import torch
from numpy.random import Generator

from autograder.judging.scoring.hidden_tests.checks import (RTOL_FLOAT32, Check, hidden_test,
                                                            within, close, expect_dtype,
                                                            perturbed_forwards, fd_gradient,
                                                            assert_fd_matches, assert_unchanged)
from autograder.judging.scoring.hidden_tests.diagnosis import softmax_backward_variant
from autograder.sandboxed.wire import Program
from hw4lib.numeric_truths import RTOL_TORCH, backward_with, leaf


def softmax_truth(Z, dim, dLdA):
    tZ = leaf(Z)
    tA = torch.softmax(tZ, dim=dim)
    backward_with(tA, dLdA)
    return tA.detach().numpy(), tZ.grad.numpy()


@hidden_test("Softmax", 2)
def softmax_every_dim_against_torch_for_two_upstream_gradients(p: Program, rng: Generator) -> Check:
    """A and dLdZ over every dim of 1-d to 5-d inputs against PyTorch, with one instance per dim
    reused on every rank that has it (``dim`` must keep its given value), and two backward calls
    after each forward, with different upstream gradients (backward must leave what forward
    stored alone: ``self.A`` is checked after them); Z and each upstream gradient must come back
    unmodified."""
    pending, echoes, upstreams, layers = [], [], [], {}
    for shape in [(6,), (3, 2), (2, 5, 3), (1, 3, 2, 4), (2, 3, 1, 2, 3)]:
        Z = rng.standard_normal(shape) * 4
        z = p.array(Z)
        for dim in range(-len(shape), len(shape)):
            reused = dim in layers
            softmax = layers.setdefault(dim, p.new("Softmax", dim=dim))
            a = p.call(softmax, "forward", z)
            gradients = []
            for call in range(2):
                dLdA = rng.standard_normal(shape) * (call + 1)
                upstream = p.array(dLdA)
                gradients.append((p.call(softmax, "backward", upstream), dLdA))
                upstreams.append((p.echo(upstream), dLdA))
            cached = p.get(softmax, "A")
            pending.append((f"Z {shape}, dim {dim}", a, gradients, cached, Z, dim, reused))
            echoes.append((p.echo(z), Z))

    def check(r):
        assert_unchanged(r, echoes, "Softmax.forward's input Z")
        assert_unchanged(r, upstreams, "Softmax.backward's upstream gradient dLdA")
        for where, a, gradients, cached, Z, dim, reused in pending:
            last_axis = dim % Z.ndim == Z.ndim - 1
            with within(last_axis=last_axis, reused=reused):
                for call, (dz, dLdA) in enumerate(gradients, start=1):
                    t_a, t_dz = softmax_truth(Z, dim, dLdA)
                    if call == 1:
                        close(f"{where}: A", r[a], t_a)
                    with within(second_backward=call == 2):
                        close(f"{where}, upstream gradient #{call}: dLdZ", r[dz], t_dz,
                              explain=lambda actual: softmax_backward_variant(actual, Z, dim,
                                                                              dLdA))
                with within(second_backward=True):
                    close(f"{where}, after two backward calls: the A kept in self.A", r[cached],
                          t_a)
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
