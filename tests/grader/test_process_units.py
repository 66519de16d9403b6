# hw4p1: instructor-only
"""The child-process runner's parts (autograder/judging/isolation/processes.py), fast: the head
and tail kept of an output at and past their sizes, the result pipe's cap, the rlimits a child
reads back, its cgroup joined, the lockstep dialogue, the descendants found and killed, and the
text made printable.

    .venv/bin/python -m pytest -q tests/grader/test_process_units.py
"""
import inspect
import io
import os
import resource
import statistics
import subprocess
import sys
import threading
import time

import pytest

from autograder.judging.isolation import cgroups, processes, sandbox_modes


class Chunks(io.RawIOBase):
    """A stream that gives ``pieces`` one per read."""

    def __init__(self, pieces: list[bytes]) -> None:
        self.pieces = list(pieces)

    def readable(self) -> bool:
        return True

    def read1(self, size: int = -1) -> bytes:
        return self.pieces.pop(0) if self.pieces else b""


def captured(pieces: list[bytes], head: int, tail: int) -> processes.BoundedCapture:
    capture = processes.BoundedCapture(Chunks(pieces), head, tail)
    capture.read_all()
    return capture


@pytest.mark.parametrize("pieces, head, tail, omitted", [
    ([b"0123", b"456"], b"0123", b"456", 0),           # head and tail exactly full
    ([b"01", b"23456", b"7"], b"0123", b"567", 1),     # one byte past them
    ([b"012", b"3456"], b"0123", b"456", 0),           # the head's last byte from a later read
    ([b"0123456789"], b"0123", b"789", 3),
    ([b"01"], b"01", b"", 0),
])
def test_head_and_tail_kept_at_and_past_their_sizes(pieces, head, tail, omitted):
    """A 4-byte head and a 3-byte tail: the bytes between dropped and counted."""
    capture = captured(pieces, 4, 3)
    assert (bytes(capture.head), bytes(capture.tail), capture.omitted) == (head, tail, omitted)
    assert capture.received == sum(map(len, pieces)) and capture.ended
    assert capture.data() == head + tail


def test_the_text_says_what_was_omitted():
    assert captured([b"ab\x1bcd"], 4, 3).text() == "abcd"
    assert captured([b"0123456789"], 4, 3).text() == (
        "0123\n[... 3 bytes of output omitted ...]\n789")


def test_printable_text():
    """Line breaks normalised; escapes and DEL removed; tabs and other scripts kept."""
    assert processes.printable("a\r\nb\rc\x1b[2Jd\x7fe\tf\x00é") == "a\nb\nc[2Jde\tfé"


def test_waiting_for_bytes():
    """True once the head holds the size; False when the stream ended or overflowed short of it,
    or at the deadline."""
    ended = captured([b"012"], 4, 3)
    assert ended.wait_for(3, time.monotonic() + 5)
    assert not ended.wait_for(4, time.monotonic() + 5)
    assert ended.head_bytes_between(1, 3) == b"12"
    overflowed = captured([b"0123456789"], 4, 3)
    assert not overflowed.wait_for(5, time.monotonic() + 5)
    read, write = os.pipe()
    open_stream = processes.BoundedCapture(os.fdopen(read, "rb"), 4, 3)
    reader = threading.Thread(target=open_stream.read_all)
    reader.start()
    start = time.monotonic()
    assert not open_stream.wait_for(1, start + 0.2)
    assert 0.15 < time.monotonic() - start < 5
    os.close(write)
    reader.join()


def child(code: str, tmp_path, **options) -> processes.Run:
    """Run ``code`` in a child Python, with the options of run_process."""
    options.setdefault("timeout", 30)
    options.setdefault("limits", {})
    return processes.run_process([sys.executable, "-c", code], cwd=tmp_path,
                                 env=dict(os.environ), **options)


def test_output_kept_whole_up_to_head_and_tail(tmp_path):
    """4000 bytes of head and 8000 of tail: 12000 bytes kept whole, one more omitted."""
    whole = child("import sys; sys.stdout.write('a' * 4000 + 'b' * 8000)", tmp_path)
    assert whole.output == "a" * 4000 + "b" * 8000 and whole.returncode == 0
    over = child("import sys; sys.stdout.write('a' * 4000 + 'c' + 'b' * 8000)", tmp_path)
    assert over.output == "a" * 4000 + "\n[... 1 bytes of output omitted ...]\n" + "b" * 8000


def test_the_result_pipe_is_capped(tmp_path, monkeypatch):
    """The result pipe's bytes up to MAX_RESULT_BYTES (here 10): 10 kept whole, 11 overflow."""
    monkeypatch.setattr(processes, "MAX_RESULT_BYTES", 10)
    for size, overflow in ((10, False), (11, True)):
        pipe = os.pipe()
        run = child(f"import os, sys; os.write({pipe[1]}, b'r' * {size})", tmp_path,
                    result_pipe=pipe)
        assert (run.result, run.result_overflow) == (b"r" * 10, overflow)


def test_the_child_reads_back_its_limits_and_cgroup(tmp_path):
    """Each rlimit given is the child's soft and hard limit; the child leads a session of its
    own; the cgroup's join file gets the child's pid (a file here: the child writes '0', its own
    pid to the kernel)."""
    procs = tmp_path / "cgroup.procs"
    procs.write_bytes(b"")
    code = ("import os, resource\n"
            "print(resource.getrlimit(resource.RLIMIT_NOFILE), "
            "resource.getrlimit(resource.RLIMIT_FSIZE), os.getsid(0) == os.getpid())")
    run = child(code, tmp_path, limits={resource.RLIMIT_NOFILE: 77,
                                        resource.RLIMIT_FSIZE: 5 * 2**20},
                cgroup=cgroups.WorkerCgroup({"pids": tmp_path}))
    assert run.output.strip() == "(77, 77) (5242880, 5242880) True"  # leads its own session
    assert procs.read_bytes() == b"0"


def test_the_time_limit_ends_the_child(tmp_path):
    run = child("import time; time.sleep(30)", tmp_path, timeout=0.5)
    assert run.timed_out and run.returncode is None and 0.4 < run.seconds < 10


ECHO = """
import os, sys
request, result = int(sys.argv[1]), int(sys.argv[2])
while True:
    line = os.read(request, 100)
    if not line:
        break
    os.write(result, line.upper())
"""


def test_a_dialogue_in_lockstep(tmp_path):
    """Each request answered before the next is sent; the answers timed from the start; the
    request pipe closed when the dialogue returns (the child then ends)."""
    result_pipe, request_pipe = os.pipe(), os.pipe()
    seen = []

    def dialogue(conversation: processes.Conversation) -> None:
        for size, word in ((2, b"ab"), (5, b"cde")):
            sent = conversation.ask(word)
            arrived = conversation.wait_for(size)
            seen.append((conversation.received(size - len(word), size), sent <= arrived))

    run = processes.run_process(
        [sys.executable, "-c", ECHO, str(request_pipe[0]), str(result_pipe[1])], cwd=tmp_path,
        env=dict(os.environ), timeout=20, limits={}, result_pipe=result_pipe,
        request_pipe=request_pipe, dialogue=dialogue)
    assert seen == [(b"AB", True), (b"CDE", True)]
    assert run.result == b"ABCDE" and run.returncode == 0


def test_asking_a_child_that_no_longer_reads():
    """ask: None once the child closed its end; wait_for: the seconds since the start once the
    bytes are there, None for bytes that never come."""
    read, write = os.pipe()
    os.close(read)
    start = time.monotonic() - 3
    conversation = processes.Conversation(write, captured([b"ab"], 4, 0), start, start + 10)
    assert conversation.ask(b"x") is None
    os.close(write)
    assert 3 <= conversation.wait_for(2) < 10
    assert conversation.wait_for(3) is None


TREE = """
import subprocess, sys, time
grandchild = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
print(grandchild.pid, flush=True)
time.sleep(60)
"""


def test_descendants_found_and_killed():
    """A child and its grandchild are this process's descendants; both killed and reaped."""
    tree = subprocess.Popen([sys.executable, "-c", TREE], stdout=subprocess.PIPE)
    grandchild = int(tree.stdout.readline())
    found = processes.descendants(os.getpid())
    assert {tree.pid, grandchild} <= set(found)
    assert found.index(tree.pid) < found.index(grandchild)  # by generation
    assert processes.descendants(tree.pid) == [grandchild]
    spared = processes.kill_descendants(tree.pid)
    assert spared == 1 and tree.poll() is None
    assert processes.kill_descendants(spare=frozenset(p for p in found if p != tree.pid)) == 1
    with pytest.raises(ChildProcessError):  # killed and reaped: no zombie left
        os.waitpid(tree.pid, os.WNOHANG)


def test_becoming_a_subreaper(monkeypatch):
    """True where prctl works (Linux); False where the C library cannot be loaded."""
    assert processes.become_subreaper()

    def no_libc(*args, **kwargs):
        raise OSError("no C library")

    monkeypatch.setattr(processes.ctypes, "CDLL", no_libc)
    assert processes.become_subreaper() is False


def test_the_result_pipe_holds_64_mib(tmp_path):
    """64 MiB of result kept whole; one byte more overflows."""
    for size, overflow in ((64 * 2**20, False), (64 * 2**20 + 1, True)):
        pipe = os.pipe()
        code = (f"import os\nview = memoryview(b'r' * {size})\n"
                f"while view: view = view[os.write({pipe[1]}, view):]")
        run = child(code, tmp_path, result_pipe=pipe)
        assert (len(run.result), run.result_overflow) == (64 * 2**20, overflow)


def test_a_run_is_not_overflowed_unless_said_and_timed_out_without_status():
    assert processes.Run(0, 0.1, "").result_overflow is False
    assert processes.Run(None, 0.1, "").timed_out and not processes.Run(-9, 0.1, "").timed_out


def test_no_task_of_a_uid_no_process_runs_as():
    assert processes.uid_tasks(sandbox_modes.grading_uid()) == 0
    assert processes.uid_tasks(os.getuid()) >= threading.active_count()


def test_the_kill_rounds_go_on_until_the_deadline_while_a_descendant_survives(monkeypatch):
    """A descendant that outlives every SIGKILL (here, one os.kill never reaches) is tried again
    every 20 ms until ``seconds`` have passed; one that dies ends the rounds at once."""
    tried = []
    monkeypatch.setattr(processes, "descendants", lambda root: [2**22 + 7])
    monkeypatch.setattr(processes, "_is_zombie", lambda pid: False)
    monkeypatch.setattr(processes.os, "kill", lambda pid, sig: tried.append(time.monotonic()))
    start = time.monotonic()
    killed = processes.kill_descendants(seconds=1.0)
    assert 1.0 <= time.monotonic() - start < 5.0
    assert killed == len(tried) and len(tried) >= 5  # 50 rounds of 20 ms, fewer on a busy core
    gaps = [later - earlier for earlier, later in zip(tried, tried[1:])]
    assert min(gaps) > 0.015 and statistics.median(gaps) < 0.2, gaps
    assert inspect.signature(processes.kill_descendants).parameters["seconds"].default == 10.0


def test_reaping_takes_every_ended_child_whatever_its_session():
    """A child in a session (and process group) of its own is reaped too: waitpid(-1, ...)."""
    children = [subprocess.Popen([sys.executable, "-c", "pass"], start_new_session=new)
                for new in (True, False)]
    for each in children:
        while not processes._is_zombie(each.pid):
            time.sleep(0.01)
    processes._reap()
    for each in children:
        with pytest.raises(ChildProcessError):
            os.waitpid(each.pid, os.WNOHANG)
        each.returncode = 0  # reaped here: Popen must not wait for it


@pytest.mark.skipif(os.geteuid() != 0, reason="needs a root judge (to run a task as another uid)")
def test_a_task_counts_for_its_real_uid_not_its_effective_one():
    """RLIMIT_NPROC counts tasks by real uid: a task with real uid U and effective uid 0 is U's."""
    uid = 54_321
    code = (f"import os, sys, time\nos.setresuid({uid}, 0, 0)\nprint('up', flush=True)\n"
            "time.sleep(60)")
    task = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        assert task.stdout.readline() == "up\n"
        assert processes.uid_tasks(uid) == 1
    finally:
        task.kill()
        task.wait()
    assert processes.uid_tasks(uid) == 0
