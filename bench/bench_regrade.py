"""Bulk regrade throughput: handins per minute with --jobs 1 and --jobs 2 (each judge forked from
a zygote of its job slot, as the regrade grades; and at --jobs 2 started by make, as before the
zygote), for default-config handins and for tiny ones, the projection for a class of 400 (the
zygotes' start paid once); one default handin graded alone as
the Autolab Makefile grades it, wall and CPU seconds, phase by phase, and the math threads its
judge chose; the memory one grading needs at its peak (every process of its tree together), to
size --jobs.

    .venv/bin/python -m bench bench_regrade      # or: make bench BENCH=bench_regrade

The handins are honest and packed as make handin packs a run (the reference mytorch, the weights
the trainer's initialisation gives the model, a run card naming the whole public test split as the
set its test_metrics.json measured), so every grading runs every hidden test, evaluates the model
on the hidden set and compares it on the public split: the common case of a class, and its
dearest. The default-config handin is what most students hand in (3 layers, d_model 256, the 1k
tokenizer: 2.9 M parameters); the tiny one (2 layers, d_model 64, char) is the bench's earlier
handin, kept for comparison.
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

from autograder.judging import grading_run
from autograder.judging.isolation import file_trees, judge_zygote
from autograder.judging.scoring import grade_model, rubric
from autograder.classroom import regrade
from autograder.judging.scoring import report as grading_report
from autograder.judging.scoring.report import GradingReport
from autograder.build_time.hidden_data import public_splits
from bench.timing import interleaved_medians
from hw4lib.config import read_config, vocab_size_of
from hw4lib.data import H4Tokenizer
from hw4lib.data.tokenizer import DEFAULT_TOKEN_MAP
from hw4lib.handin import measure_card_losses
from hw4lib.handin_format import card_perplexity, config_digest, transcripts_sha256

REPO = Path(__file__).resolve().parents[1]
DATA_ROOT = "hw4_data/hw4p1_data"  # make data's, whose test split the run cards name
HANDINS = 4  # per run, of each kind (default-config, tiny)
REPEATS = 2  # after one warm-up run of each; a run grades all HANDINS handins
CLASS_SIZE = 400
DEFAULT_CONFIG = "configs/default.yaml"
TINY_MODEL = {"num_layers": 2, "d_model": 64, "num_heads": 4, "d_ff": 128, "dropout": 0.0,
         "max_len": 512, "weight_tying": False, "layer_drop_rate": 0.0}
STARTS = 5  # interpreter starts timed, median taken
ALONE = 3  # gradings of one default handin alone, timed phase by phase (median taken)
PHASE_NAMES = {"Unpacking handin.tar": "extraction of handin.tar",
               "Sandbox": "sandbox probe (the strongest mode that works)",
               "Summary": "judge's end: leftover processes, summary; make's exit",
               **{category: f"mytorch {category} (worker start + tests)"
                  for category in rubric.MYTORCH_RUBRIC}}


def honest_handin(folder: Path, model: dict, token_type: str, seed: int = 0) -> Path:
    """handin.tar with the reference mytorch, the weights the trainer's initialisation gives
    ``model`` under ``seed`` (``grade_model.initial_state``, what the grader fingerprints against)
    and the run card of a run that measured the whole public test split (seed 0's), with each
    transcript's loss as make handin records it."""
    handin = folder / "handin"
    shutil.copytree(REPO / "mytorch", handin / "mytorch",
                    ignore=shutil.ignore_patterns("__pycache__"))
    state = grade_model.initial_state(model, vocab_size_of(token_type), seed)
    torch.save(state, handin / "model_state_dict.pt")
    config = {"seed": seed, "tokenization": {"token_type": token_type}, "model": model}
    (handin / "config.yaml").write_text(yaml.safe_dump(config))
    test = public_splits(0)["test"]
    dataset = grade_model.read_partition(REPO / DATA_ROOT, H4Tokenizer(DEFAULT_TOKEN_MAP,
                                                                       token_type))
    if transcripts_sha256(dataset.transcripts) != transcripts_sha256(test):
        raise SystemExit(f"{DATA_ROOT}'s test split is not the grader's public one: make data")
    # the losses make handin records, so that the grader re-measures a sample, as for a real card
    losses = measure_card_losses(dataset, config, (handin / "model_state_dict.pt").read_bytes(),
                                 None)
    perplexity = card_perplexity(losses["total_nll"], dataset.total_chars)
    (handin / "test_metrics.json").write_text(json.dumps({"perplexity_char": perplexity}))
    (handin / "run_card.json").write_text(json.dumps({
        "state_dict_sha256": hashlib.sha256((handin / "model_state_dict.pt").read_bytes()).hexdigest(),
        "config_sha256": config_digest(config), "test_perplexity_char": perplexity,
        "test_set": {"split": "test", "subset": 1.0, "transcripts": len(test),
                     "characters": sum(map(len, test)), "sha256": transcripts_sha256(test),
                     **losses}}))
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


def timed_grading(source: Path, handin: Path) -> tuple[float, float, list[tuple[str, float]],
                                                     GradingReport]:
    """One grading as the Autolab Makefile runs it (one grading on the machine: the judge chooses
    its math threads): (wall s, CPU s of its processes, [(phase, wall s)], its report).

    The phases are the spans between the feedback's section headers (the judge flushes each as it
    starts it), the model child's span split by its own ``phase_seconds``."""
    grading = grading_run.prepare(source, handin)
    marks = [("make, judge start (interpreter, imports), build info", time.perf_counter())]
    before = children_cpu_seconds()
    with subprocess.Popen(grading_run.make_command(grading), cwd=grading,
                          env=grading_run.make_environment(), stdin=subprocess.DEVNULL,
                          stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                          errors="replace") as process:
        for line in process.stdout:
            if line.startswith("== ") and line.rstrip().endswith(" =="):
                marks.append((line.strip(" =\n"), time.perf_counter()))
    end = time.perf_counter()
    cpu = children_cpu_seconds() - before
    details = grading_report.load(grading / "details.json")
    file_trees.remove_tree(grading)
    marks.append(("", end))
    spans = [(name, later - at) for (name, at), (_, later) in zip(marks, marks[1:])]
    lm = details.lm or grading_report.LanguageModelResult(message="")
    child = lm.phase_seconds or {}
    found = []
    for name, seconds in spans:
        if name.startswith(rubric.LM_CATEGORY) and child:
            found += [("model child: interpreter start, imports, exit",
                       (lm.seconds or 0) - sum(child.values())),
                      ("model child: load config and weights", child.get("load", 0)),
                      ("model child: the hidden set", child.get("hidden", 0)),
                      ("model child: the run card's test set", child.get("compare", 0)),
                      ("judge: the rest of the model's section, removing the hidden material",
                       seconds - (lm.seconds or 0))]
        else:
            found.append((PHASE_NAMES.get(name.split(" (")[0], name), seconds))
    return end - marks[0][1], cpu, found, details


def children_cpu_seconds() -> float:
    """User and system CPU seconds of every child this process has waited for."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


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


def cpu_name() -> str:
    """The CPU's model name (/proc/cpuinfo), or '?'."""
    try:
        lines = Path("/proc/cpuinfo").read_text().splitlines()
    except OSError:
        return "?"
    return next((line.split(":", 1)[1].strip() for line in lines if line.startswith("model name")),
                "?")


def copies(handin: Path, folder: Path) -> Path:
    """``folder`` holding HANDINS copies of ``handin``, as a bulk download holds handins."""
    folder.mkdir()
    for index in range(HANDINS):
        shutil.copy(handin, folder / f"student{index}.tar")
    return folder


def throughput(source: Path, handins: Path, runs: tuple[tuple[int, bool], ...]
               ) -> dict[tuple[int, bool], object]:
    """{(jobs, zygotes): Timing} of regrading ``handins`` with each of ``runs``' job counts, the
    judges forked from zygotes or started by make, interleaved, each run into a fresh output
    folder beside ``handins`` (Timing.result: the CPU seconds of every process the run started,
    its zygotes included)."""
    outs = iter(range(10_000))

    def run(jobs: int, zygotes: bool):
        def once() -> float:
            before = children_cpu_seconds()
            out = handins.with_name(f"{handins.name}-out{next(outs)}")
            regrade.regrade(handins, out, source, jobs, progress=False, zygotes=zygotes)
            return children_cpu_seconds() - before
        return once

    return interleaved_medians({key: run(*key) for key in runs}, REPEATS)


def zygote_start() -> tuple[float, float]:
    """(wall s, CPU s) of one judge zygote's start, until it says it is ready, median of STARTS."""
    walls, cpus = [], []
    for _ in range(STARTS):
        before, start = children_cpu_seconds(), time.perf_counter()
        zygote = judge_zygote.JudgeZygote(sys.executable, grading_run.judge_environment())
        zygote.answer(judge_zygote.READY_TIMEOUT_S)
        walls.append(time.perf_counter() - start)
        zygote.close()
        cpus.append(children_cpu_seconds() - before)
    return statistics.median(walls), statistics.median(cpus)


def print_throughput(what: str, timings: dict, start: tuple[float, float]) -> None:
    """A line per run; the class of CLASS_SIZE projected from the run's rate with its zygotes'
    start (``start``: wall, CPU s of one) paid once, not once per HANDINS handins."""
    print(f"{HANDINS} {what}; median of {REPEATS} run(s) after a warm-up")
    print(f"{'jobs':>4} {'judge':>7} {'seconds':>8} {'handins/min':>11} {'CPU s/handin':>12} "
          f"{'cores busy':>10} {CLASS_SIZE:>5} handins")
    for (jobs, zygotes), timing in timings.items():
        starts_wall, starts_cpu = (start[0], jobs * start[1]) if zygotes else (0.0, 0.0)
        per_handin_wall = (timing.wall - starts_wall) / HANDINS
        class_minutes = (starts_wall + CLASS_SIZE * per_handin_wall) / 60
        print(f"{jobs:>4} {'zygote' if zygotes else 'make':>7} {timing.wall:>8.1f} "
              f"{HANDINS / timing.wall * 60:>11.1f} "
              f"{(timing.result - starts_cpu) / HANDINS:>12.1f} "
              f"{timing.result / timing.wall:>10.2f} {class_minutes:>5.0f} min")
    print(f"  (CPU s/handin leaves the zygotes' start out ({start[0]:.1f} s wall, {start[1]:.1f} "
          f"CPU s each, one per job); the {CLASS_SIZE}-handin column pays it once)")


def main() -> None:
    print(f"{os.cpu_count()} CPUs ({cpu_name()}), load average {os.getloadavg()[0]:.2f} at the "
          f"start")
    work = Path(tempfile.mkdtemp(prefix="hw4p1-bench-regrade-"))
    try:
        work.chmod(0o755)
        source = work / "autograder"  # what `make autograde` writes (tools sit above bench)
        subprocess.run([sys.executable, "-m", "tools.make_autograde", "--out", str(source)],
                       cwd=REPO, check=True, stdout=subprocess.DEVNULL)
        default = default_handin(work / "default")
        tiny = honest_handin(work / "tiny", TINY_MODEL, "char")
        alone = [timed_grading(source, default) for _ in range(ALONE)]
        with PeakSampler() as sampler:
            timed_grading(source, default)
        starts = {"python -c pass": start_seconds("pass"),
                  "python -c 'import numpy'": start_seconds("import numpy"),
                  "python -c 'import torch'": start_seconds("import torch")}
        start = zygote_start()
        default_timings = throughput(source, copies(default, work / "defaults"),
                                     ((1, True), (2, True), (2, False)))
        tiny_timings = throughput(source, copies(tiny, work / "tinies"), ((1, True), (2, True)))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print_throughput("default-config handins (configs/default.yaml's model and tokenizer, the "
                     "reference initialisation, the reference mytorch, a run card naming the "
                     "whole public test split)", default_timings, start)
    print_throughput("tiny handins (a 2-layer d_model 64 char model, otherwise the same)",
                     tiny_timings, start)
    choices = {json.dumps(details.threads, sort_keys=True) for *_, details in alone}
    print(f"one default handin graded alone as the Autolab Makefile grades it, median of {ALONE}: "
          f"{statistics.median(wall for wall, *_ in alone):.1f} s wall, "
          f"{statistics.median(cpu for _, cpu, *_ in alone):.1f} CPU s; the judge chose "
          f"{' / '.join(sorted(choices))}")
    for index, (name, _) in enumerate(alone[0][2]):
        print(f"  {statistics.median(found[index][1] for _, _, found, _ in alone):>6.2f} s  {name}")
    print("interpreter starts (the Autolab Makefile starts a judge, which imports torch and forks "
          "its model child; a sandbox probe and one worker each import numpy; the regrade forks "
          "each judge from a zygote that imported torch once):")
    for name, seconds in starts.items():
        print(f"  {seconds:>6.2f} s  {name}")
    print(f"peak memory of one default grading (its whole process tree): "
          f"{sampler.peak / 2**20:,.0f} MiB; size --jobs so that jobs x this fits in memory, and "
          f"jobs <= CPUs")


if __name__ == "__main__":
    main()
