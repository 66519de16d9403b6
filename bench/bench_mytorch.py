"""mytorch attention vs PyTorch on the CPU: time of forward + backward, float32.

Each case runs mytorch and PyTorch alternately in the same process, so both see the same machine
load, and reports the fastest of a few rounds per side (the least disturbed measurement on a
shared computer) and the ratio mytorch / torch. The peak memory mytorch allocates during one
forward + backward is measured separately with tracemalloc, which sees numpy's allocations.

Both libraries use their default thread counts. When other jobs keep every core busy, OpenBLAS's
spinning threads slow numpy far more than PyTorch, so the ratios are only meaningful at a low
load average (printed first); ``OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1`` compares one thread
against one thread.

    make bench BENCH=bench_mytorch
"""
import os
import time
import tracemalloc
from typing import Callable

import numpy as np
import torch

from mytorch.nn import MultiHeadAttention, ScaledDotProductAttention

ROUNDS = 5
# (N, H, L = S, head_dim); the MHA cases use embed_dim = H * head_dim.
CASES = [(8, 8, 256, 64), (4, 8, 512, 64)]


def best_times(run_mytorch: Callable[[], None],
               run_torch: Callable[[], None]) -> tuple[float, float]:
    """Fastest of ROUNDS alternating runs of each, after one warm-up run of each."""
    run_mytorch()
    run_torch()
    mine, theirs = [], []
    for _ in range(ROUNDS):
        for run, times in ((run_mytorch, mine), (run_torch, theirs)):
            start = time.perf_counter()
            run()
            times.append(time.perf_counter() - start)
    return min(mine), min(theirs)


def peak_megabytes(run: Callable[[], None]) -> float:
    """Peak memory numpy allocates during run(), in MB."""
    tracemalloc.start()
    run()
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return peak / 2**20


def causal_mask(length: int) -> np.ndarray:
    """(L, L) bool, True above the diagonal: query i may not attend to keys after i."""
    return np.triu(np.ones((length, length), dtype=bool), k=1)


def sdpa_runners(N: int, H: int, L: int, head_dim: int):
    rng = np.random.default_rng(0)
    Q, K, V, grad = (rng.standard_normal((N, H, L, head_dim), dtype=np.float32) for _ in range(4))
    mask = causal_mask(L)
    attention = ScaledDotProductAttention()

    def run_mytorch():
        attention.forward(Q, K, V, mask)
        attention.backward(grad)

    tq, tk, tv = (torch.from_numpy(x).requires_grad_() for x in (Q, K, V))
    t_grad, t_allowed = torch.from_numpy(grad), torch.from_numpy(~mask)  # torch: True = attend

    def run_torch():
        tq.grad = tk.grad = tv.grad = None
        out = torch.nn.functional.scaled_dot_product_attention(tq, tk, tv, attn_mask=t_allowed)
        out.backward(t_grad)

    return run_mytorch, run_torch


def mha_runners(N: int, H: int, L: int, head_dim: int):
    E = H * head_dim
    torch.manual_seed(0)
    reference = torch.nn.MultiheadAttention(E, H, batch_first=True)
    mha = MultiHeadAttention(E, H)
    Wq, Wk, Wv = (w.detach().numpy() for w in reference.in_proj_weight.chunk(3))
    bq, bk, bv = (b.detach().numpy() for b in reference.in_proj_bias.chunk(3))
    mha.init_weights(Wq, bq, Wk, bk, Wv, bv, reference.out_proj.weight.detach().numpy(),
                     reference.out_proj.bias.detach().numpy())
    rng = np.random.default_rng(0)
    query, key, value, grad = (rng.standard_normal((N, L, E), dtype=np.float32) for _ in range(4))
    mask = causal_mask(L)

    def run_mytorch():
        mha.forward(query, key, value, attn_mask=mask)
        mha.backward(grad)

    tq, tk, tv = (torch.from_numpy(x).requires_grad_() for x in (query, key, value))
    t_grad, t_mask = torch.from_numpy(grad), torch.from_numpy(mask)  # MHA: True = ignore

    def run_torch():
        reference.zero_grad()
        tq.grad = tk.grad = tv.grad = None
        out, _ = reference(tq, tk, tv, attn_mask=t_mask, need_weights=False)
        out.backward(t_grad)

    return run_mytorch, run_torch


def main() -> None:
    print(f"float32, causal mask, forward + backward, best of {ROUNDS} alternating rounds; "
          f"torch threads {torch.get_num_threads()}, OPENBLAS_NUM_THREADS "
          f"{os.environ.get('OPENBLAS_NUM_THREADS', 'unset')}; load average "
          f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    print(f"{'module':<6} {'N':>3} {'H':>3} {'L=S':>5} {'E':>5} {'mytorch s':>10} {'torch s':>9} "
          f"{'ratio':>6} {'mytorch peak MB':>16}")
    for name, make_runners in (("SDPA", sdpa_runners), ("MHA", mha_runners)):
        for N, H, L, head_dim in CASES:
            run_mytorch, run_torch = make_runners(N, H, L, head_dim)
            mine, theirs = best_times(run_mytorch, run_torch)
            E = head_dim if name == "SDPA" else H * head_dim
            print(f"{name:<6} {N:>3} {H:>3} {L:>5} {E:>5} {mine:>10.3f} {theirs:>9.3f} "
                  f"{mine / theirs:>6.2f} {peak_megabytes(run_mytorch):>16.0f}", flush=True)


if __name__ == "__main__":
    main()
