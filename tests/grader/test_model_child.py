# hw4p1: instructor-only
"""The model child's start (``autograder.judging.scoring.model_child``): its limits read in a
real child (no core dumps, files of at most 1 MiB, the judge's hard address-space limit and not
its cap), its environment key by key, and which way :func:`launch` starts it.

    .venv/bin/python -m pytest -q tests/grader/test_model_child.py
"""
import os
import resource
import subprocess
import sys

import pytest

from autograder.judging.isolation import processes
from autograder.judging.isolation.autograder_paths import AUTOGRADE_ROOT
from autograder.judging.scoring import model_child

MIB = 2**20
DROPPED = ("PYTHONPATH", "PYTHONSTARTUP", "PYTHONINSPECT", "PYTHONSAFEPATH", "PYTHONUSERBASE")


@pytest.mark.parametrize("size, written", [(MIB, True), (MIB + 1, False)])
def test_the_model_child_writes_files_of_at_most_1_mib(tmp_path, size, written):
    code = f"with open('out', 'wb') as out:\n    out.write(b'x' * {size})"
    run = processes.run_process([sys.executable, "-c", code], cwd=tmp_path,
                                env=model_child.child_environment(tmp_path, []), timeout=60,
                                limits=model_child.model_limits())
    assert (run.returncode == 0) is written, run.output
    assert (tmp_path / "out").stat().st_size == (size if written else MIB)


def test_the_model_child_dumps_no_core_and_has_the_judge_s_hard_address_space_limit(tmp_path):
    """A judge that capped its own address space below its hard limit (the soft limit) gives the
    model child the hard limit."""
    hard = resource.getrlimit(resource.RLIMIT_AS)[1]
    cap = 2**40 if hard == resource.RLIM_INFINITY else hard - 1
    code = (f"import resource\nresource.setrlimit(resource.RLIMIT_AS, ({cap}, {hard}))\n"
            "from autograder.judging.scoring import model_child\n"
            "print(model_child.model_limits()[resource.RLIMIT_AS])\n")
    printed = subprocess.run([sys.executable, "-c", code], cwd=AUTOGRADE_ROOT, check=True,
                             capture_output=True, text=True, timeout=60).stdout
    assert int(printed) == hard
    run = processes.run_process(
        [sys.executable, "-c", "import resource\nprint(resource.getrlimit(resource.RLIMIT_CORE))"],
        cwd=tmp_path, env=model_child.child_environment(tmp_path, []), timeout=60,
        limits=model_child.model_limits())
    assert run.output.strip() == "(0, 0)"


def test_the_child_environment_imports_the_given_paths_and_keeps_its_files_in_work(
        tmp_path, monkeypatch):
    for name in DROPPED:
        monkeypatch.setenv(name, "/judge/own")
    monkeypatch.setenv("HW4P1_KEPT", "kept")
    env = model_child.child_environment(tmp_path, [tmp_path / "a", tmp_path / "b"])
    tmp = tmp_path / "tmp"
    assert {name: env[name] for name in (*DROPPED, "HW4P1_KEPT") if name in env} == {
        "PYTHONPATH": f"{tmp_path / 'a'}:{tmp_path / 'b'}", "HW4P1_KEPT": "kept"}
    assert {name: env[name] for name in (
        "PYTHONDONTWRITEBYTECODE", "PYTHONHASHSEED", "PYTHONNOUSERSITE", "PYTHONIOENCODING",
        "TQDM_DISABLE", "WANDB_MODE", "HOME", "TMPDIR", "MPLCONFIGDIR", "XDG_CACHE_HOME",
        "TORCH_HOME", "MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_")} == {
        "PYTHONDONTWRITEBYTECODE": "1", "PYTHONHASHSEED": "0", "PYTHONNOUSERSITE": "1",
        "PYTHONIOENCODING": "utf-8", "TQDM_DISABLE": "1", "WANDB_MODE": "disabled",
        "HOME": str(tmp_path / "home"), "TMPDIR": str(tmp), "MPLCONFIGDIR": f"{tmp}/matplotlib",
        "XDG_CACHE_HOME": f"{tmp}/cache", "TORCH_HOME": f"{tmp}/torch",
        "MALLOC_MMAP_THRESHOLD_": "1073741824", "MALLOC_TRIM_THRESHOLD_": "1073741824"}
    assert os.environ["PYTHONSTARTUP"] == "/judge/own"  # the judge's own is left alone


class RecordingParked:
    """A parked child that records its one run."""

    def __init__(self):
        self.runs = []

    def run(self, *arguments):
        self.runs.append(arguments)
        return "parked run"


def test_launch_runs_the_parked_child_when_given_else_a_fresh_command(tmp_path, monkeypatch):
    """The same arguments, folder, environment, time and limits either way."""
    fresh = []
    monkeypatch.setattr(processes, "run_process",
                        lambda command, **options: fresh.append((command, options)) or "fresh")
    parked = RecordingParked()
    expected = (model_child.child_environment(tmp_path, [AUTOGRADE_ROOT]),
                model_child.model_limits())
    assert model_child.launch(["--a", "1"], tmp_path, 7.5, parked) == "parked run"
    assert parked.runs == [(["--a", "1"], AUTOGRADE_ROOT, expected[0], 7.5, expected[1])]
    assert fresh == []
    assert model_child.launch(["--a", "1"], tmp_path, 7.5, None) == "fresh"
    assert fresh == [([sys.executable, "-m", "autograder.judging.scoring.grade_model", "--a", "1"],
                      {"cwd": AUTOGRADE_ROOT, "env": expected[0], "timeout": 7.5,
                       "limits": expected[1]})]
    assert len(parked.runs) == 1


PARK = """
import threading
from autograder.judging.scoring import model_child
from autograder.judging.scoring.report import GradingReport

report = GradingReport()
model_child.park_model_child(report).close()
print(report.model_child)
stop = threading.Event()
thread = threading.Thread(target=stop.wait)
thread.start()
print(model_child.park_model_child(report), report.model_child)
stop.set()
"""


def test_the_model_child_is_forked_unless_a_thread_runs_then_started_fresh():
    printed = subprocess.run([sys.executable, "-c", PARK], cwd=AUTOGRADE_ROOT, check=True,
                             capture_output=True, text=True, timeout=120).stdout
    assert printed.splitlines() == [
        "forked from the judge",
        "None started fresh: this process had 2 threads when it forked (an OpenMP team, or "
        "another thread that a fork does not stop)"]
