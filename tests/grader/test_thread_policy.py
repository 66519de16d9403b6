# hw4p1: instructor-only
"""Tests of the math threads a grading uses (autograder/judging/isolation/thread_policy.py): the
rule on given inputs, the environment of the judge's children and of the grading's make, the
regrade's --jobs, and the choice in details.json and the feedback's header.

    .venv/bin/python -m pytest -q tests/grader/test_thread_policy.py
"""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from autograder.judging import grading_run
from autograder.judging.isolation import judge_process, thread_policy
from autograder.judging.scoring import model_child, rubric
from autograder.classroom import regrade
from tests.classroom.regrade_fakes import fake_grader, grade_with, judge_details

REPO = Path(__file__).resolve().parents[2]
TORCH_THREADS = "import torch; print(torch.get_num_threads())"


def test_rule_on_given_inputs():
    """(CPUs, load average, gradings side by side) -> threads, worked out by hand: a second thread
    only with a whole core idle, never above the CPUs' share or MAX_THREADS, never below 1."""
    cases = {
        (2, 0.05, 1): 2,   # 2 idle CPUs: both
        (2, 0.3, 1): 1,    # a third of a core busy: the second thread would wait for it
        (2, 1.2, 1): 1,    # loaded by one other process
        (2, 6.0, 1): 1,    # loaded: never fewer than one
        (2, 0.0, 2): 1,    # --jobs 2 on 2 idle CPUs: one each
        (1, 0.0, 1): 1,    # an affinity of one CPU
        (16, 0.0, 1): thread_policy.MAX_THREADS,  # many idle CPUs: no more than was measured
        (16, 13.1, 1): 2,  # 2.9 idle cores: 2
        (16, 0.0, 16): 1,
    }
    assert thread_policy.MAX_THREADS == 2  # the cases above are worked out for it
    for (cpus, load, gradings), threads in cases.items():
        choice = thread_policy.choose(cpus, load, gradings)
        assert choice.threads == threads, (cpus, load, gradings, choice)
        assert (choice.cpus, choice.load, choice.gradings) == (cpus, load, gradings)
    assert "idle at this load" in thread_policy.choose(2, 1.2, 1).why
    assert "shared by 2 grading(s)" in thread_policy.choose(2, 0.0, 2).why
    assert "most measured" in thread_policy.choose(16, 0.0, 1).why


def test_measured_inputs_and_override(tmp_path, monkeypatch):
    """measure() reads the affinity (capped by a cgroup quota), the load (the load average where
    /proc/stat cannot be read) and the gradings; HW4P1_MATH_THREADS overrides the count; a
    malformed variable counts as unset."""
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1, 2, 3})
    monkeypatch.setattr(thread_policy, "PROC_STAT", tmp_path / "no-proc-stat")
    monkeypatch.setattr(os, "getloadavg", lambda: (0.0, 0.0, 0.0))
    cpu_max = tmp_path / "cpu.max"
    monkeypatch.setattr(thread_policy, "CGROUP_CPU_MAX", cpu_max)
    assert thread_policy.measure({}).cpus == 4  # no cgroup file
    cpu_max.write_text("max 100000\n")
    assert thread_policy.measure({}).cpus == 4
    cpu_max.write_text("150000 100000\n")  # docker --cpus 1.5
    assert thread_policy.measure({}).cpus == 2
    cpu_max.write_text("50000 100000\n")
    choice = thread_policy.measure({thread_policy.GRADINGS_VARIABLE: "3"})
    assert (choice.cpus, choice.gradings, choice.threads) == (1, 3, 1)
    for text in ("0", "-2", "two", ""):
        assert thread_policy.measure({thread_policy.GRADINGS_VARIABLE: text}).gradings == 1
    def no_load_average():
        raise OSError("load average unobtainable")

    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1})
    monkeypatch.setattr(os, "getloadavg", no_load_average)
    cpu_max.write_text("max 100000\n")
    assert thread_policy.measure({}).threads == 1  # an unknown load is taken as busy
    forced = thread_policy.measure({thread_policy.THREADS_VARIABLE: "3"})
    assert forced.threads == 3 and thread_policy.THREADS_VARIABLE in forced.why
    assert thread_policy.measure({thread_policy.THREADS_VARIABLE: "0"}).threads == 1


STAT = """cpu  {user} 0 {system} {idle} {iowait} 0 0 0 0 0
cpu0 0 0 0 0 0 0 0 0 0 0
cpu1 0 0 0 0 0 0 0 0 0 0
intr 0
"""


def test_busy_cores_from_two_readings_of_proc_stat(tmp_path, monkeypatch):
    """Busy cores between two /proc/stat texts, worked out by hand (idle and iowait count as
    idle, the CPUs from the cpuN lines); a reading without ticks between is refused; measure()
    uses the sampled value, not the lagging load average, and the rule gives the idle machine
    two threads."""
    def ticks(user, system, idle, iowait):
        return thread_policy.cpu_ticks(STAT.format(user=user, system=system, idle=idle,
                                                   iowait=iowait))

    assert ticks(10, 5, 100, 3) == (103, 118, 2)
    # 40 ticks pass on 2 CPUs: 20 busy (15 user, 5 system), 20 idle (18 idle, 2 iowait): 1 core
    assert thread_policy.busy_between(ticks(10, 5, 100, 3), ticks(25, 10, 118, 5)) == 1.0
    assert thread_policy.busy_between(ticks(10, 5, 100, 3), ticks(10, 5, 140, 3)) == 0.0
    with pytest.raises(ValueError):
        thread_policy.busy_between(ticks(10, 5, 100, 3), ticks(10, 5, 100, 3))
    with pytest.raises(ValueError):
        thread_policy.cpu_ticks("intr 0\n")
    readings = iter([STAT.format(user=10, system=5, idle=100, iowait=3),
                     STAT.format(user=10, system=5, idle=140, iowait=3)])

    class FakeStat:
        def read_text(self):
            return next(readings)

    monkeypatch.setattr(thread_policy, "PROC_STAT", FakeStat())
    monkeypatch.setattr(thread_policy, "SAMPLE_S", 0.0)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1})
    monkeypatch.setattr(os, "getloadavg", lambda: (1.1, 1.0, 1.0))  # the last grading's lag
    monkeypatch.setattr(thread_policy, "CGROUP_CPU_MAX", tmp_path / "no-cpu-max")
    choice = thread_policy.measure({})
    assert (choice.load, choice.threads) == (0.0, 2), choice


def test_no_sample_where_the_count_does_not_depend_on_the_load(monkeypatch, tmp_path):
    """One grading per CPU (the regrade's --jobs 2 on 2 CPUs), or a count set by the variable:
    measure() takes no sample (it would only cost SAMPLE_S) and records the load average."""
    class NoStat:
        def read_text(self):
            raise AssertionError("the machine was sampled")

    monkeypatch.setattr(thread_policy, "PROC_STAT", NoStat())
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1})
    monkeypatch.setattr(os, "getloadavg", lambda: (0.4, 1.0, 1.0))
    monkeypatch.setattr(thread_policy, "CGROUP_CPU_MAX", tmp_path / "no-cpu-max")
    shared = thread_policy.measure({thread_policy.GRADINGS_VARIABLE: "2"})
    assert (shared.load, shared.threads) == (0.4, 1), shared
    forced = thread_policy.measure({thread_policy.THREADS_VARIABLE: "2"})
    assert (forced.load, forced.threads) == (0.4, 2), forced
    with pytest.raises(AssertionError, match="sampled"):  # one grading on 2 CPUs: sampled
        thread_policy.measure({})


def test_the_model_child_runs_with_the_chosen_count(tmp_path, monkeypatch):
    """After the judge applied a choice, a child started with its environment (the model child's)
    has torch on that many threads, whatever the judge's own environment said before."""
    import torch

    for name in thread_policy.THREAD_VARIABLES:
        monkeypatch.setenv(name, "2")  # what the judge was started with; restored after the test
    monkeypatch.setattr(torch, "set_num_threads", lambda n: None)  # the test process keeps its own
    choice = thread_policy.ThreadChoice(1, 2, 1.5, 1, "given")
    entry = judge_process.use_threads(choice)
    assert entry == {"threads": 1, "cpus": 2, "load": 1.5, "gradings": 1, "why": "given"}
    env = model_child.child_environment(tmp_path, [REPO])
    assert {name: env[name] for name in thread_policy.THREAD_VARIABLES} == dict.fromkeys(
        thread_policy.THREAD_VARIABLES, "1")
    child = subprocess.run([sys.executable, "-c", TORCH_THREADS], env=env, cwd=tmp_path,
                           capture_output=True, text=True, check=True)
    assert child.stdout.strip() == "1", child.stdout


def test_details_json_and_header_name_the_choice(tmp_path):
    """The judge's details.json records the count and the rule's inputs, and its first line (the
    feedback's header) states them; here the judge stops at once (not a built autograder)."""
    out = tmp_path / "details.json"
    env = {**os.environ, thread_policy.GRADINGS_VARIABLE: "2", thread_policy.THREADS_VARIABLE: "3"}
    run = subprocess.run([sys.executable, "-m", "autograder.judging.grade", str(tmp_path / "none.tar"),
                          "--work", str(tmp_path / "work"), "--results-json", str(out)],
                         cwd=REPO, env=env, capture_output=True, text=True, timeout=120)
    details = json.loads(out.read_text())
    assert details["threads"]["threads"] == 3 and details["threads"]["gradings"] == 2
    assert details["threads"]["cpus"] == thread_policy.usable_cpus()
    assert isinstance(details["threads"]["load"], float) and details["threads"]["why"]
    assert run.stdout.splitlines()[0].startswith("hw4p1 autograder: 3 math thread(s): set by "
                                                 f"{thread_policy.THREADS_VARIABLE}"), run.stdout


def test_the_grading_and_the_regrade_pass_the_gradings_side_by_side(tmp_path, monkeypatch):
    """grading_run.run gives make (and so the judge) the number of gradings side by side; the
    regrade gives its --jobs."""
    grading = tmp_path / "grading"
    grading.mkdir()
    (grading / "Makefile").write_text(f"all:\n\t@echo gradings=$${thread_policy.GRADINGS_VARIABLE}"
                                      f"\n")
    assert "gradings=2" in grading_run.run(grading, gradings=2).output
    grading.mkdir()
    (grading / "Makefile").write_text(f"all:\n\t@echo gradings=$${thread_policy.GRADINGS_VARIABLE}"
                                      f"\n")
    assert "gradings=1" in grading_run.run(grading).output

    seen = []

    def fake_run(grading, grader_flags="", gradings=1, started=None, zygote=None):
        seen.append(gradings)
        return grading_run.GradingRun({**rubric.zero_scores(), "Linear": 2.0}, judge_details(2.0),
                                      "report\n", 1.0, timed_out=False)

    grade_with(fake_run, monkeypatch, tmp_path)
    handins = tmp_path / "handins"
    handins.mkdir()
    for student in ("ann", "bo", "cy"):
        (handins / f"{student}_1_handin.tar").write_bytes(student.encode())
    for jobs in (2, 1):
        seen.clear()
        regrade.regrade(handins, tmp_path / f"out{jobs}", fake_grader(tmp_path), jobs=jobs,
                        progress=False)
        assert seen == [jobs] * 3, (jobs, seen)
