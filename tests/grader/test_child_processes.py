# hw4p1: instructor-only
"""Tests of the child process runner (autograder/judging/isolation/processes.py): hangs with
detached children, output floods, huge files, and the judge's own address space limit.

    .venv/bin/python -m pytest -q tests/grader/test_child_processes.py
"""
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from autograder.judging.isolation import processes, sandbox_modes
from tests.grader.autograder_helpers import REPO_ROOT


def wait_until_dead(pid: int, seconds: float = 5.0) -> bool:
    """True once ``pid`` has exited (a killed orphan may stay a zombie until init reaps it)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(") ", 1)[1][:1]
        except (FileNotFoundError, ProcessLookupError):
            return True
        if state in ("Z", "X"):
            return True
        time.sleep(0.05)
    return False


def python_child(code: str, tmp_path: Path, timeout: float,
                 limits: dict | None = None) -> processes.Run:
    return processes.run_process([sys.executable, "-c", code], cwd=tmp_path,
                                 env=dict(os.environ), timeout=timeout, limits=limits or {})


def test_child_over_its_time_limit_is_killed_with_its_detached_children(tmp_path):
    processes.become_subreaper()  # as the grader does: detached descendants stay its own
    code = ("import os, subprocess, sys, time\n"
            "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)'],\n"
            "                         start_new_session=True)\n"
            "open('grandchild.pid', 'w').write(str(child.pid))\n"
            "print('started', flush=True)\n"
            "while True: time.sleep(0.1)\n")
    run = python_child(code, tmp_path, timeout=3)
    assert run.timed_out and "started" in run.output, run
    assert wait_until_dead(int((tmp_path / "grandchild.pid").read_text())), \
        "the detached grandchild outlived the time limit"


def test_child_output_flood_is_bounded_and_escapes_removed(tmp_path):
    code = ("import sys\n"
            "for i in range(200_000): sys.stdout.write('spam ' * 20 + '\\x1b[2J\\r\\n')\n"
            "print('last line')\n")
    run = python_child(code, tmp_path, timeout=60)
    assert run.returncode == 0
    assert len(run.output) < processes.OUTPUT_HEAD_BYTES + processes.OUTPUT_TAIL_BYTES + 200
    assert "bytes of output omitted" in run.output and "\x1b" not in run.output
    assert run.output.rstrip().endswith("last line")


def test_child_cannot_write_huge_files(tmp_path):
    import resource

    code = "open('big.bin', 'wb').write(b'0' * (4 * 2**20))"
    run = python_child(code, tmp_path, timeout=60, limits={resource.RLIMIT_FSIZE: 2**20})
    assert run.returncode != 0
    assert (tmp_path / "big.bin").stat().st_size <= 2**20


def test_the_judge_runs_under_an_address_space_limit(tmp_path):
    from autograder.judging.isolation import judge_process

    code = ("import resource\n"
            "from autograder.judging import grade\n"
            "from autograder.judging.isolation import judge_process\n"
            "from autograder.judging.scoring import model_child\n"
            "judge_process.limit_address_space()\n"
            "print(resource.getrlimit(resource.RLIMIT_AS)[0], flush=True)\n"
            "print(resource.getrlimit(resource.RLIMIT_AS)[1] in "
            "model_child.model_limits().values())\n"
            "try:\n"
            "    block = bytearray(judge_process.judge_address_space())\n"
            "except MemoryError:\n"
            "    print('refused')\n")
    run = subprocess.run([sys.executable, "-c", code], cwd=REPO_ROOT, capture_output=True,
                         text=True, timeout=120)
    limit, model_unlimited, refused = run.stdout.split()
    physical = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    assert int(limit) == judge_process.judge_address_space() <= physical, run.stdout
    assert model_unlimited == "True" and refused == "refused", run.stdout + run.stderr


THREADS_AS = """
import ctypes, os, sys, threading
ctypes.CDLL(None).prctl(15, ctypes.c_char_p(b"\\xff\\xfe("), 0, 0, 0)  # a name that is not UTF-8
os.setgid(int(sys.argv[1])); os.setuid(int(sys.argv[1]))
for _ in range(int(sys.argv[2])):
    threading.Thread(target=threading.Event().wait, daemon=True).start()
print("ready", flush=True)
sys.stdin.read()
"""


@pytest.mark.skipif(os.geteuid() != 0, reason="needs a root judge (to start tasks as another uid)")
def test_uid_tasks_counts_every_thread_of_that_uid_only():
    """Its main thread and 6 more, in a process whose name is not UTF-8 (a scan reads any name)."""
    uid = sandbox_modes.grading_uid()  # a uid no process runs as
    assert processes.uid_tasks(uid) == 0
    child = subprocess.Popen([sys.executable, "-c", THREADS_AS, str(uid), "6"],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline().strip() == "ready"
        assert processes.uid_tasks(uid) == 7  # its main thread and its 6
    finally:
        child.stdin.close()
        child.wait(timeout=30)
    assert processes.uid_tasks(uid) == 0
