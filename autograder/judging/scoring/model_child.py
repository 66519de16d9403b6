"""The model child (``autograder.judging.scoring.grade_model``), the process that rebuilds the
handed-in weights with the reference code: forked early from the judge and parked, or started fresh;
its environment and its limits."""
from __future__ import annotations

import os
import sys
from pathlib import Path

from autograder.judging.isolation import parked_child, processes
from autograder.judging.scoring import report as grading_report
from autograder.judging.isolation.autograder_paths import AUTOGRADE_ROOT

MODEL_FILE_BYTES = 2**20  # the model child writes only its result JSON
MODEL_CHILD_MODULE = "autograder.judging.scoring.grade_model"  # its main(argv) is the model child
# glibc's malloc serves blocks above its mmap threshold (at most 32 MiB by default) with a fresh
# mmap and unmaps them when freed, so each of the model child's batches would page-fault and zero
# its attention scores again (up to grade_model.ACTIVATION_BUDGET float32s, 256 MiB). Above that
# size, freed blocks stay in the heap and the next batch reuses them; the values computed are the
# same (torch aligns every tensor to 64 bytes wherever its memory comes from).
MALLOC_REUSE_BYTES = 2**30


def park_model_child(report: grading_report.GradingReport) -> parked_child.ParkedChild | None:
    """The model child, forked now from this process (which has imported torch for the hidden
    tests and run no torch computation yet) and waiting for its arguments; None when forking is
    not safe here, and ``report.model_child`` says why (the model child is then started
    fresh, as a command)."""
    try:
        child = parked_child.ParkedChild(MODEL_CHILD_MODULE, "main")
    except parked_child.ForkRefused as refusal:
        report.model_child = f"started fresh: {refusal}"
        return None
    report.model_child = "forked from the judge"
    return child


def launch(arguments: list[str], work: Path, timeout: float,
           parked: parked_child.ParkedChild | None) -> processes.Run:
    """Run the model child on ``arguments`` for at most ``timeout`` seconds: ``parked`` (from
    :func:`park_model_child`) when given, else a fresh ``python -m`` of MODEL_CHILD_MODULE with the
    same arguments, environment, folder and limits."""
    environment = child_environment(work, [AUTOGRADE_ROOT])
    if parked is not None:
        return parked.run(arguments, AUTOGRADE_ROOT, environment, timeout, model_limits())
    return processes.run_process([sys.executable, "-m", MODEL_CHILD_MODULE, *arguments],
                                 cwd=AUTOGRADE_ROOT, env=environment, timeout=timeout,
                                 limits=model_limits())


def child_environment(work: Path, python_path: list[Path]) -> dict[str, str]:
    """A child's environment: ``python_path`` importable first, caches and temp files in work/,
    the math threads :func:`autograder.judging.isolation.judge_process.use_threads` chose (it set
    them in this process's environment)."""
    env = {key: value for key, value in os.environ.items()
           if key not in ("PYTHONPATH", "PYTHONSTARTUP", "PYTHONINSPECT", "PYTHONSAFEPATH",
                          "PYTHONUSERBASE")}
    tmp = work / "tmp"
    env.update({
        "PYTHONPATH": os.pathsep.join(str(path) for path in python_path),
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONHASHSEED": "0",
        "PYTHONNOUSERSITE": "1",
        "PYTHONIOENCODING": "utf-8",
        "TQDM_DISABLE": "1",
        "WANDB_MODE": "disabled",
        "HOME": str(work / "home"),
        "TMPDIR": str(tmp),
        "MPLCONFIGDIR": str(tmp / "matplotlib"),
        "XDG_CACHE_HOME": str(tmp / "cache"),
        "TORCH_HOME": str(tmp / "torch"),
        "MALLOC_MMAP_THRESHOLD_": str(MALLOC_REUSE_BYTES),
        "MALLOC_TRIM_THRESHOLD_": str(MALLOC_REUSE_BYTES),
    })
    return env


def model_limits() -> dict[int, int]:
    """Limits of the model child: no core dumps, no big files. Its memory is bounded by the checks
    on the config and the state dict it does before allocating anything."""
    import resource

    return {resource.RLIMIT_CORE: 0, resource.RLIMIT_FSIZE: MODEL_FILE_BYTES,
            resource.RLIMIT_AS: resource.getrlimit(resource.RLIMIT_AS)[1]}  # not the judge's cap
