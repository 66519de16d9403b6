# hw4p1: instructor-only
"""The math-thread rule's boundaries (autograder/judging/isolation/thread_policy.py), fast: the
idle cores exactly at the load's slack and past it, the CPUs' share below one, a cgroup quota
just over a whole CPU, the ticks that count as busy, and the lines the choice is recorded in.

    .venv/bin/python -m pytest -q tests/grader/test_thread_rule.py
"""
import dataclasses
import os

import pytest

from autograder.judging.isolation import thread_policy


@pytest.mark.parametrize("cpus, load, gradings, threads, why", [
    (2, 0.25, 1, 2, "the most measured to help (2)"),      # the slack exactly: a core idle
    (2, 0.26, 1, 1, "1 whole core(s) idle at this load"),   # just past it
    (3, 1.25, 1, 2, "the most measured to help (2)"),
    (3, 1.26, 1, 1, "1 whole core(s) idle at this load"),
    (2, 2.5, 1, 1, "0 whole core(s) idle at this load"),    # none idle: still one thread
    (1, 0.0, 2, 1, "1 CPU(s) shared by 2 grading(s)"),      # a share under one CPU: one thread
    (1, 1.0, 2, 1, "0 whole core(s) idle at this load"),    # ... counted as one, above no core
    (4, 0.0, 2, 2, "the most measured to help (2)"),
    (6, 0.0, 4, 1, "6 CPU(s) shared by 4 grading(s)"),
])
def test_the_rule_at_its_boundaries(cpus, load, gradings, threads, why):
    """Worked out by hand: idle = floor(cpus - load + 0.25), at least 0; the fewest of 2, the
    CPUs' share (at least 1) and the idle cores, at least 1; the first such term named."""
    choice = thread_policy.choose(cpus, load, gradings)
    assert (choice.threads, choice.why) == (threads, why)


@pytest.mark.parametrize("cpu_max, cpus", [("100000 100000", 1), ("100001 100000", 2),
                                           ("200000 100000", 2), ("50000 100000", 1),
                                           ("max 100000", 4), ("garbage", 4),
                                           ("1000 100000", 1)])
def test_a_cgroup_quota_caps_the_cpus_rounded_up(tmp_path, monkeypatch, cpu_max, cpus):
    """The quota over the period, rounded up (the least quota, 1 ms, is one CPU), at most this
    process's affinity of 4 CPUs; 'max' or an unreadable quota leaves the affinity."""
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1, 2, 3} if pid == 0 else {0})
    monkeypatch.setattr(thread_policy, "CGROUP_CPU_MAX", tmp_path / "cpu.max")
    (tmp_path / "cpu.max").write_text(cpu_max + "\n")
    assert thread_policy.usable_cpus() == cpus


def test_a_measured_machine_of_four_cpus(monkeypatch, tmp_path):
    """4 CPUs, 2 gradings: a share of 2, so the machine is sampled (3 busy cores of 4: one
    thread); HW4P1_GRADINGS of '2' read, a count of '0' not an override."""
    before = "cpu  0 0 0 0 0 0 0 0 0 0\ncpu0 0\ncpu1 0\ncpu2 0\ncpu3 0\n"
    after = "cpu  30 0 0 10 0 0 0 0 0 0\ncpu0 0\ncpu1 0\ncpu2 0\ncpu3 0\n"
    readings = iter([before, after])

    class Stat:
        def read_text(self):
            return next(readings)

    monkeypatch.setattr(thread_policy, "PROC_STAT", Stat())
    monkeypatch.setattr(thread_policy, "SAMPLE_S", 0.0)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1, 2, 3})
    monkeypatch.setattr(os, "getloadavg", lambda: (0.0, 0.0, 0.0))
    monkeypatch.setattr(thread_policy, "CGROUP_CPU_MAX", tmp_path / "no-cpu-max")
    choice = thread_policy.measure({thread_policy.GRADINGS_VARIABLE: "2",
                                    thread_policy.THREADS_VARIABLE: "0"})
    assert (choice.cpus, choice.gradings, choice.load, choice.threads) == (4, 2, 3.0, 1)


def test_steal_counts_as_busy_and_guest_is_not_counted_twice():
    """user nice system idle iowait irq softirq steal are the ticks; guest and guest_nice (inside
    user and nice already) are not added."""
    stat = "cpu  1 2 3 40 5 6 7 8 900 1000\ncpu0 x\n"
    assert thread_policy.cpu_ticks(stat) == (45, 72, 1)
    # 10 ticks on one CPU: 8 steal, 2 idle
    assert thread_policy.busy_between((0, 0, 1), (2, 10, 1)) == 0.8
    assert thread_policy.busy_between((0, 0, 3), (1, 3, 3)) == 2.0
    assert thread_policy.busy_between((0, 0, 1), (0, 1, 1)) == 1.0  # a single tick suffices
    assert thread_policy.busy_between((0, 0, 1), (1, 3, 1)) == 0.67  # to two decimals


def test_positive_counts_only():
    assert [thread_policy.positive(t) for t in ("1", "12", "0", "-1", "1.5", "", None)] == [
        1, 12, None, None, None, None, None]


def test_the_choice_as_recorded():
    """The feedback's line and details.json's entry, by value; the children's variables."""
    choice = thread_policy.choose(2, 0.256, 1)
    assert choice.summary() == ("1 math thread(s): 1 whole core(s) idle at this load (2 CPUs, "
                                "0.26 busy, 1 grading(s) side by side)")
    assert thread_policy.report(choice) == {"threads": 1, "cpus": 2, "load": 0.26,
                                            "gradings": 1,
                                            "why": "1 whole core(s) idle at this load"}
    with pytest.raises(dataclasses.FrozenInstanceError):  # the record details.json keeps
        choice.threads = 2
    assert thread_policy.environment(3) == {"OMP_NUM_THREADS": "3", "MKL_NUM_THREADS": "3",
                                            "OPENBLAS_NUM_THREADS": "3"}


def test_no_sample_where_the_share_is_one_cpu(monkeypatch, tmp_path):
    """3 CPUs for 2 gradings: a share of one CPU, so one thread whatever the load; the load
    average is recorded, the machine not sampled."""
    class Unread:
        def read_text(self):
            raise AssertionError("the machine was sampled")

    monkeypatch.setattr(thread_policy, "PROC_STAT", Unread())
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1, 2})
    monkeypatch.setattr(os, "getloadavg", lambda: (0.7, 0.0, 0.0))
    monkeypatch.setattr(thread_policy, "CGROUP_CPU_MAX", tmp_path / "no-cpu-max")
    choice = thread_policy.measure({thread_policy.GRADINGS_VARIABLE: "2"})
    assert (choice.load, choice.threads) == (0.7, 1)


def test_the_machine_is_sampled_over_a_fifth_of_a_second(monkeypatch):
    """busy_cores sleeps 0.2 s between its two readings (20 ticks a CPU at 100 Hz)."""
    slept = []
    monkeypatch.setattr(thread_policy.time, "sleep", slept.append)
    monkeypatch.setattr(thread_policy, "PROC_STAT", type("Stat", (), {
        "read_text": lambda self: f"cpu  {len(slept)} 0 0 0 0 0 0 0\ncpu0 0\n"})())
    assert thread_policy.busy_cores() == 1.0 and slept == [0.2]
