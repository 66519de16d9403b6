"""Bulk regrade throughput: handins per minute with --jobs 1 and --jobs 2 on the same 8 handins,
the projection for a class of 400, what each phase of one grading costs, and the memory one
grading needs at its peak (every process of its tree together), to size --jobs.

    .venv/bin/python -m bench bench_regrade      # or: make bench BENCH=bench_regrade

The handins are honest and packed as make handin packs a default-config run (the reference mytorch,
a small freshly initialised char model, a run card naming the whole public test split as the set
its test_metrics.json measured), so every grading runs every hidden test, evaluates the model on
the hidden set and compares it on the public split: the common case of a class, and its dearest.
"""
from __future__ import annotations

import hashlib
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
from pathlib import Path

import torch
import yaml

from autograder import grade_model, grading_run, regrade, rubric
from autograder.hidden_data import public_splits
from bench.timing import interleaved_medians
from hw4lib.config import read_config, vocab_size_of
from hw4lib.handin_format import config_digest, transcripts_sha256

REPO = Path(__file__).resolve().parents[1]
HANDINS = 8
JOBS = (1, 2)
REPEATS = 3  # after one warm-up run of each; a run grades all 8 handins
CLASS_SIZE = 400
DEFAULT_CONFIG = "configs/default.yaml"
TINY_MODEL = {"num_layers": 2, "d_model": 64, "num_heads": 4, "d_ff": 128, "dropout": 0.0,
         "max_len": 512, "weight_tying": False, "layer_drop_rate": 0.0}
STARTS = 5  # interpreter starts timed, median taken


def honest_handin(folder: Path, model: dict, token_type: str, seed: int = 0) -> Path:
    """handin.tar with the reference mytorch, the weights the trainer's initialisation gives
    ``model`` under ``seed`` (``grade_model.initial_state``, what the grader fingerprints against)
    and the run card of a run that measured the whole public test split (seed 0's)."""
    handin = folder / "handin"
    shutil.copytree(REPO / "mytorch", handin / "mytorch",
                    ignore=shutil.ignore_patterns("__pycache__"))
    state = grade_model.initial_state(model, vocab_size_of(token_type), seed)
    torch.save(state, handin / "model_state_dict.pt")
    config = {"seed": seed, "tokenization": {"token_type": token_type}, "model": model}
    (handin / "config.yaml").write_text(yaml.safe_dump(config))
    test = public_splits(0)["test"]
    (handin / "test_metrics.json").write_text(json.dumps({"perplexity_char": 30.0}))
    (handin / "run_card.json").write_text(json.dumps({
        "state_dict_sha256": hashlib.sha256((handin / "model_state_dict.pt").read_bytes()).hexdigest(),
        "config_sha256": config_digest(config), "test_perplexity_char": 30.0,
        "test_set": {"split": "test", "subset": 1.0, "transcripts": len(test),
                     "characters": sum(map(len, test)), "sha256": transcripts_sha256(test)}}))
    with tarfile.open(folder / "handin.tar", "w") as tar:
        tar.add(handin, arcname="handin")
    return folder / "handin.tar"


def default_handin(folder: Path) -> Path:
    """:func:`honest_handin` of ``configs/default.yaml``'s model and tokenizer (what most students
    hand in: 3 layers, d_model 256, the 1k tokenizer)."""
    config = read_config(REPO / DEFAULT_CONFIG)
    return honest_handin(folder, config["model"], config["tokenization"]["token_type"],
                         config["seed"])


def start_seconds(code: str) -> float:
    """Median wall seconds of ``python -c code`` (an interpreter start and its imports)."""
    times = []
    for _ in range(STARTS):
        start = time.perf_counter()
        subprocess.run([sys.executable, "-c", code], check=True)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def phases(source: Path, handin: Path) -> tuple[float, dict[str, float]]:
    """(wall seconds, {phase: seconds}) of one grading alone, from its details.json."""
    start = time.perf_counter()
    graded = grading_run.run(grading_run.prepare(source, handin), threads=os.cpu_count())
    wall = time.perf_counter() - start
    lm = graded.details.get("lm") or {}
    child = lm.get("phase_seconds") or {}
    found = {"model child: interpreter, imports, exit": lm.get("seconds", 0) - sum(child.values()),
             "model child: load config and weights": child.get("load", 0),
             "model child: evaluate the hidden set": child.get("hidden", 0),
             "model child: evaluate the run card's test set": child.get("compare", 0)}
    for category in rubric.MYTORCH_RUBRIC:
        found[f"mytorch {category} (worker start + tests)"] = graded.details["seconds"][category]
    found["make, judge start, extraction, sandbox choice, clean-up"] = wall - sum(found.values())
    return wall, found


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
        one = phases(source, first)
        starts = {"python -c pass": start_seconds("pass"),
                  "python -c 'import numpy'": start_seconds("import numpy"),
                  "python -c 'import torch'": start_seconds("import torch")}
        timings = interleaved_medians({jobs: run(jobs) for jobs in JOBS}, REPEATS)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f"{HANDINS} honest handins (reference mytorch, a small char model compared on the whole "
          f"public test split), {os.cpu_count()} CPUs, median of {REPEATS} run(s) after a warm-up")
    print(f"{'jobs':>4} {'seconds':>8} {'handins/min':>11} {'CPU s/handin':>12} {'cores busy':>10} "
          f"{CLASS_SIZE:>5} handins")
    for jobs, timing in timings.items():
        per_minute = HANDINS / timing.wall * 60
        print(f"{jobs:>4} {timing.wall:>8.1f} {per_minute:>11.1f} "
              f"{timing.result / HANDINS:>12.1f} {timing.result / timing.wall:>10.2f} "
              f"{CLASS_SIZE / per_minute:>5.0f} min")
    print(f"--jobs 2 / --jobs 1: {timings[1].wall / timings[2].wall:.2f}x handins per minute")
    wall, found = one
    print(f"one grading alone ({os.cpu_count()} math threads): {wall:.1f} s wall")
    for name, seconds in found.items():
        print(f"  {seconds:>6.2f} s  {name}")
    print("interpreter starts (a grading starts a judge and a model child, each importing torch, "
          "and sandbox probes and one worker per mytorch category, each importing numpy):")
    for name, seconds in starts.items():
        print(f"  {seconds:>6.2f} s  {name}")
    print(f"peak memory of one grading (its whole process tree): {sampler.peak / 2**20:,.0f} MiB; "
          f"size --jobs so that jobs x this fits in memory, and jobs <= CPUs")


if __name__ == "__main__":
    main()
