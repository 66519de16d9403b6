"""Bulk regrade throughput: handins per minute with --jobs 1 and --jobs 2 on the same 8 handins,
and the memory one grading needs at its peak (every process of its tree together), to size --jobs.

    .venv/bin/python -m bench bench_regrade      # or: make bench BENCH=bench_regrade

The handins are honest (the reference mytorch and a tiny freshly initialised model), so every
grading runs every hidden test and evaluates the model: the common case of a class.
"""
from __future__ import annotations

import os
import resource
import shutil
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
from pathlib import Path

import torch
import yaml

from autograder import regrade
from bench.timing import interleaved_medians
from hw4lib.data import H4Tokenizer
from hw4lib.data.tokenizer import DEFAULT_TOKEN_MAP
from hw4lib.model import DecoderOnlyTransformer

REPO = Path(__file__).resolve().parents[1]
HANDINS = 8
JOBS = (1, 2)
REPEATS = 3  # after one warm-up run of each; a run grades all 8 handins
MODEL = {"num_layers": 2, "d_model": 64, "num_heads": 4, "d_ff": 128, "dropout": 0.0,
         "max_len": 512, "weight_tying": False, "layer_drop_rate": 0.0}


def honest_handin(folder: Path) -> Path:
    """handin.tar with the reference mytorch and a freshly initialised small model."""
    handin = folder / "handin"
    shutil.copytree(REPO / "mytorch", handin / "mytorch",
                    ignore=shutil.ignore_patterns("__pycache__"))
    tokenizer = H4Tokenizer(DEFAULT_TOKEN_MAP, "char")
    torch.manual_seed(0)
    model = DecoderOnlyTransformer(**MODEL, num_classes=tokenizer.vocab_size)
    torch.save(model.state_dict(), handin / "model_state_dict.pt")
    (handin / "config.yaml").write_text(yaml.safe_dump(
        {"tokenization": {"token_type": "char"}, "model": MODEL}))
    with tarfile.open(folder / "handin.tar", "w") as tar:
        tar.add(handin, arcname="handin")
    return folder / "handin.tar"


def tree_rss() -> int:
    """Resident bytes of every descendant of this process, together."""
    children: dict[int, list[int]] = {}
    rss: dict[int, int] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_bytes().rsplit(b")", 1)[1].split()
            pid = int(stat.parent.name)
            children.setdefault(int(fields[1]), []).append(pid)
            rss[pid] = int(fields[21]) * os.sysconf("SC_PAGE_SIZE")
        except (OSError, IndexError, ValueError):
            continue
    total, stack = 0, list(children.get(os.getpid(), []))
    while stack:
        pid = stack.pop()
        total += rss.get(pid, 0)
        stack += children.get(pid, [])
    return total


class PeakSampler:
    """The largest tree_rss() seen while it runs (sampled every 50 ms)."""

    def __init__(self) -> None:
        self.peak, self._stop = 0, threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, tree_rss())
            time.sleep(0.05)

    def __enter__(self) -> PeakSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()


def main() -> None:
    work = Path(tempfile.mkdtemp(prefix="hw4p1-bench-regrade-"))
    try:
        work.chmod(0o755)
        source = work / "autograder"  # what `make autograde` writes (tools sit above bench)
        subprocess.run([sys.executable, "-m", "tools.make_autograde", "--out", str(source)],
                       cwd=REPO, check=True, stdout=subprocess.DEVNULL)
        handins = work / "handins"
        handins.mkdir()
        first = honest_handin(work / "build")
        for index in range(HANDINS):
            shutil.copy(first, handins / f"student{index}.tar")
        outs = iter(range(10_000))

        def run(jobs: int):
            def once() -> float:  # CPU seconds of every process the gradings started
                before = resource.getrusage(resource.RUSAGE_CHILDREN)
                regrade.regrade(handins, work / f"out{next(outs)}", source, jobs, progress=False)
                after = resource.getrusage(resource.RUSAGE_CHILDREN)
                return (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
            return once

        with PeakSampler() as sampler:
            regrade.regrade(handins, work / "out-memory", source, 1, progress=False)
        timings = interleaved_medians({jobs: run(jobs) for jobs in JOBS}, REPEATS)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f"{HANDINS} honest handins (reference mytorch, a small char model), {os.cpu_count()} "
          f"CPUs, median of {REPEATS} run(s) after a warm-up")
    print(f"{'jobs':>4} {'seconds':>8} {'handins/min':>11} {'CPU s/handin':>12} {'cores busy':>10}")
    for jobs, timing in timings.items():
        print(f"{jobs:>4} {timing.wall:>8.1f} {HANDINS / timing.wall * 60:>11.1f} "
              f"{timing.result / HANDINS:>12.1f} {timing.result / timing.wall:>10.2f}")
    print(f"--jobs 2 / --jobs 1: {timings[1].wall / timings[2].wall:.2f}x handins per minute "
          f"(one grading alone keeps {timings[1].result / timings[1].wall:.2f} cores busy: its "
          f"judge and model child use every core for their torch work)")
    print(f"peak memory of one grading (its whole process tree): {sampler.peak / 2**20:,.0f} MiB; "
          f"size --jobs so that jobs x this fits in memory, and jobs <= CPUs")


if __name__ == "__main__":
    main()
