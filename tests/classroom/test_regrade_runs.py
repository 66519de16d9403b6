# hw4p1: instructor-only
"""The regrade's gradings, each replaced by a fake judge in this process
(autograder/classroom/regrade.py): what one grading passes on and makes of a failure, how a
finished one is recorded, the pool's zygotes and its clean-up, both stages of a Ctrl-C (a real
SIGINT, raised in a pool thread as a terminal's may land), the defaults of ``regrade`` and of the
command line, and what ``--fresh`` sets aside. Fast: no grading runs the judge.

    .venv/bin/python -m pytest -q -n 0 tests/classroom/test_regrade_runs.py
"""
import re
import signal
import threading
import time
from concurrent.futures import Future
from pathlib import Path

import pytest

from autograder.classroom import regrade
from autograder.judging.scoring import rubric
from autograder.judging.scoring.report import Status
from tests.classroom.regrade_fakes import edit_cell, fake_grader, grade_with, judge_details

GradingRun = regrade.grading_run.GradingRun
LINEAR = 2.0  # the points an ok fake grading earns, in Linear


def ok_run(seconds: float = 1.0, timed_out: bool = False) -> GradingRun:
    """An ok grading's result: LINEAR points in Linear, the judge's report, ``seconds`` long."""
    return GradingRun({**rubric.zero_scores(), "Linear": LINEAR}, judge_details(LINEAR),
                      "report\n", seconds, timed_out)


class Judge:
    """Stands in for ``grading_run.run``: records each call (its student, ``gradings``,
    ``zygote`` and flags) and answers ``answers[student](started)`` when given, else
    :func:`ok_run`."""

    def __init__(self, **answers) -> None:
        self.answers, self.calls = answers, []

    def __call__(self, grading, grader_flags="", gradings=1, started=None, zygote=None):
        student = Path(grading).read_text()
        self.calls.append({"student": student, "gradings": gradings, "zygote": zygote,
                           "flags": grader_flags})
        return self.answers[student](started) if student in self.answers else ok_run()

    def students(self) -> list[str]:
        return sorted(call["student"] for call in self.calls)


def handins_folder(tmp_path: Path, *students: str) -> Path:
    """A bulk download holding one ``<student>.tar`` (its text: the student) per student."""
    folder = tmp_path / "handins"
    folder.mkdir(exist_ok=True)
    for student in students:
        (folder / f"{student}.tar").write_text(student)
    return folder


def judged(monkeypatch, tmp_path: Path, **answers) -> Judge:
    """A :class:`Judge` grading every handin of this test."""
    judge = Judge(**answers)
    grade_with(judge, monkeypatch, tmp_path)
    return judge


@pytest.fixture
def ctrl_c():
    """Python's own SIGINT handler (KeyboardInterrupt in the main thread) during the test."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)


def no_stop(process) -> None:
    raise AssertionError(f"{process} stopped while not stopping")


def grade_one(handin_path: Path, *, zygotes=None, stopping: bool = False,
              gradings: int = 1) -> GradingRun:
    """``regrade.grade_one`` of the handin at ``handin_path``, not interrupted."""
    stop = threading.Event()
    if stopping:
        stop.set()
    return regrade.grade_one(regrade.Handin(handin_path.stem, handin_path), handin_path.parent,
                             "-v", gradings, {}, threading.Event(), stop, zygotes)


class Slot:
    """Stands in for ``judge_zygote.Zygotes``: counts what it is asked, gives itself as zygote."""

    made: list = []

    def __init__(self, python, env) -> None:
        self.closed = False
        Slot.made.append(self)

    def for_this_thread(self):
        return self

    def close(self) -> None:
        self.closed = True


def test_a_grading_passes_its_slot_count_flags_and_zygote_on(tmp_path, monkeypatch):
    judge = judged(monkeypatch, tmp_path)
    slot = Slot("python", {})
    handin = handins_folder(tmp_path, "ann") / "ann.tar"
    assert grade_one(handin, zygotes=slot, gradings=3).status is Status.OK
    assert grade_one(handin).status is Status.OK
    assert judge.calls == [{"student": "ann", "gradings": 3, "zygote": slot, "flags": "-v"},
                           {"student": "ann", "gradings": 1, "zygote": None, "flags": "-v"}]


def deeper(text: str) -> None:
    raise ValueError(text)


RAISING_LINE = deeper.__code__.co_firstlineno + 1


def test_a_grading_that_raises_is_crashed_naming_the_raising_line(tmp_path, monkeypatch):
    def raises(started):
        time.sleep(0.05)
        deeper("x" * 300)

    judged(monkeypatch, tmp_path, ann=raises)
    graded = grade_one(handins_folder(tmp_path, "ann") / "ann.tar")
    assert (graded.status, graded.scores, graded.report, graded.timed_out) == (
        Status.CRASHED, rubric.zero_scores(), None, False)
    assert graded.error == (f"the grading failed: ValueError: {'x' * 200} "
                            f"({Path(__file__).name}:{RAISING_LINE})")
    assert "Traceback" in graded.output and graded.output.rstrip().endswith("x" * 300)
    assert 0.05 <= graded.seconds < 5


def test_a_judge_s_failure_is_named_and_any_other_run_kept_as_it_is(tmp_path, monkeypatch):
    judged(monkeypatch, tmp_path,
           ann=lambda started: GradingRun(rubric.zero_scores(), None,
                                          "Traceback\nKeyError: 'k'\nbye\n", 1.0, False),
           bo=lambda started: ok_run(timed_out=True),
           cy=lambda started: GradingRun(rubric.zero_scores(), None, "KeyError: 'k'\n", 1.0,
                                         False, error="the judge's report was refused"))
    folder = handins_folder(tmp_path, "ann", "bo", "cy", "di")
    ann, bo, cy, di = (grade_one(folder / f"{name}.tar") for name in ("ann", "bo", "cy", "di"))
    assert (ann.status, ann.error) == (Status.CRASHED,
                                       "the judge failed: KeyError: 'k' (see its feedback)")
    assert (bo.status, bo.error) == (Status.TIMEOUT, "")
    assert (cy.status, cy.error) == (Status.CRASHED, "the judge's report was refused")
    assert (di.status, di.error) == (Status.OK, "")


def test_a_grading_is_refused_once_interrupted_and_stopped_once_stopping(tmp_path, monkeypatch):
    stopped = []
    monkeypatch.setattr(regrade.grading_run, "stop", stopped.append)
    judge = judged(monkeypatch, tmp_path, ann=lambda started: started("process") or ok_run())
    handin = handins_folder(tmp_path, "ann") / "ann.tar"
    interrupted, processes = threading.Event(), {}
    interrupted.set()
    with pytest.raises(InterruptedError):
        regrade.grade_one(regrade.Handin("ann", handin), tmp_path, "", 1, processes, interrupted,
                          threading.Event())
    assert judge.calls == []
    assert grade_one(handin).status is Status.OK and stopped == []
    assert grade_one(handin, stopping=True).status is Status.OK and stopped == ["process"]


def test_a_message_is_cut_at_200_characters():
    assert regrade.described(OSError("o" * 200)) == f"OSError: {'o' * 200}"
    assert regrade.described(OSError("o" * 201)) == f"OSError: {'o' * 200}"
    assert regrade.described(KeyError("k")) == "KeyError: 'k'"


def recorder(tmp_path: Path, count: int = 1, progress: bool = False) -> regrade.Recorder:
    out = tmp_path / "out"
    (out / "feedback").mkdir(parents=True, exist_ok=True)
    return regrade.Recorder(out, {}, regrade.rescore.Grader("g", None), "latest", count,
                            progress)


def finished(result) -> Future:
    future = Future()
    if isinstance(result, BaseException):
        future.set_exception(result)
    else:
        future.set_result(result)
    return future


def test_an_unreadable_result_is_a_crashed_row_and_a_never_started_one_no_row(tmp_path):
    record = recorder(tmp_path)
    handin = regrade.Handin("ann", handins_folder(tmp_path, "ann") / "ann.tar")
    record(finished(InterruptedError()), "ann", handin, "sha", "")
    assert record.rows == {} and not (record.out / "grades.csv").exists() and record.bar.n == 0
    unreadable = GradingRun(rubric.zero_scores(), judge_details(LINEAR), None, 3.0, False)
    record(finished(unreadable), "ann", handin, "sha", "noted first")
    row = regrade.read_rows(record.out / "grades.csv")["ann"]
    assert (row["status"], row["total"], row["seconds"], row["handin_sha256"]) == (
        "crashed", "0", "3.0", "sha")
    assert row["notes"] == ("noted first; its result could not be read: TypeError: data must "
                            "be str, not NoneType")
    record(finished(ok_run()), "ann", handin, "sha", "")
    assert record.rows["ann"]["status"] == "ok" and record.rows["ann"]["notes"] == ""
    assert (record.out / "feedback/ann.txt").read_text() == "report\n"


def test_the_bar_counts_each_recorded_grading_and_its_rate_per_minute(tmp_path, monkeypatch,
                                                                      capsys):
    handin = regrade.Handin("ann", handins_folder(tmp_path, "ann") / "ann.tar")
    record = recorder(tmp_path, count=2, progress=True)
    monkeypatch.setattr(regrade.time, "monotonic", lambda: record.start + 0.5)
    record(finished(ok_run()), "ann", handin, "sha", "")
    assert (record.bar.n, record.bar.postfix) == (1, "per_minute=120.0")
    monkeypatch.setattr(regrade.time, "monotonic", lambda: record.start)  # a coarse clock
    record(finished(ok_run()), "ann", handin, "sha", "")
    assert (record.bar.n, record.bar.postfix) == (2, "per_minute=120000000000.0")
    monkeypatch.undo()
    record.close()
    assert "2/2" in capsys.readouterr().err
    quiet = recorder(tmp_path / "quiet", count=1, progress=False)
    quiet(finished(ok_run()), "ann", handin, "sha", "")
    quiet.close()
    assert capsys.readouterr().err == ""


@pytest.mark.parametrize("zygotes, students, allowed, forked", [
    (None, ["ann"], True, True),  # regrade's default: a zygote per slot
    (False, ["ann"], True, False), (True, [], True, False), (True, ["ann"], False, False)])
def test_zygotes_are_made_when_asked_for_needed_and_allowed(tmp_path, monkeypatch, zygotes,
                                                           students, allowed, forked):
    Slot.made = []
    monkeypatch.setattr(regrade.judge_zygote, "Zygotes", Slot)
    monkeypatch.setattr(regrade.grading_run, "zygote_can_grade", lambda source: allowed)
    judge = judged(monkeypatch, tmp_path)
    asked = {} if zygotes is None else {"zygotes": zygotes}
    regrade.regrade(handins_folder(tmp_path, *students), tmp_path / "out", fake_grader(tmp_path),
                    progress=False, **asked)
    assert len(Slot.made) == forked and all(slot.closed for slot in Slot.made)
    assert [call["zygote"] for call in judge.calls] == [
        Slot.made[0] if forked else None] * len(students)


def test_a_failure_to_record_waits_for_the_running_and_starts_no_other(tmp_path, monkeypatch):
    """ann's row cannot be written once bo and cy run in the two slots: the run stops, but only
    once they have ended; di, queued behind them, never starts."""
    both_running, ended = threading.Barrier(3), []

    def slow(started):
        both_running.wait(5)
        time.sleep(0.5)
        ended.append("slow")
        return ok_run()

    judge = judged(monkeypatch, tmp_path, bo=slow, cy=slow, di=slow)
    folder = handins_folder(tmp_path, "ann", "bo", "cy", "di")
    todo = {name: (regrade.Handin(name, folder / f"{name}.tar"), "sha", "")
            for name in ("ann", "bo", "cy", "di")}

    def record(future, key, handin, digest, note):
        both_running.wait(5)
        raise OSError("disk full")

    with pytest.raises(OSError, match="disk full"):
        regrade.grade_in_pool(todo, fake_grader(tmp_path), "", 2, False, record)
    assert judge.students() == ["ann", "bo", "cy"] and ended == ["slow", "slow"]


def test_each_finished_grading_is_recorded_once_and_forgotten():
    """drain runs in a thread of its own here: a drain that never records would spin, not
    hang the test."""
    recorded = []
    running = {finished(ok_run()): ("ann", None, "sha", ""), finished(ok_run()): ("bo", None,
                                                                                  "sha", "")}
    drains = threading.Thread(target=regrade.drain, args=(
        running, lambda future, key, *rest: recorded.append(key)), daemon=True)
    drains.start()
    drains.join(5)
    assert not drains.is_alive() and sorted(recorded) == ["ann", "bo"] and running == {}


def ctrl_c_here() -> None:
    """A terminal's Ctrl-C as the kernel may deliver it: to this thread, a pool thread."""
    signal.raise_signal(signal.SIGINT)


class Waits:
    """Counts the main thread's waits for a grading (the real ``wait`` of regrade.py, called);
    ``begun`` is set once the first began."""

    def __init__(self, monkeypatch) -> None:
        self.count, self.begun, self.real = 0, threading.Event(), regrade.wait
        monkeypatch.setattr(regrade, "wait", self)

    def __call__(self, *args, **kwargs):
        self.count += 1
        self.begun.set()
        return self.real(*args, **kwargs)


def test_ctrl_c_once_starts_no_other_grading_and_records_the_running(tmp_path, monkeypatch,
                                                                     capsys, ctrl_c):
    waits = Waits(monkeypatch)

    def interrupted(started):
        waits.begun.wait(5)
        ctrl_c_here()
        time.sleep(0.3)
        return ok_run()

    judge = judged(monkeypatch, tmp_path, ann=interrupted)
    out = tmp_path / "out"
    with pytest.raises(KeyboardInterrupt):
        regrade.regrade(handins_folder(tmp_path, "ann", "bo", "cy"), out, fake_grader(tmp_path),
                        progress=False)
    assert judge.students() == ["ann"]
    assert list(regrade.read_rows(out / "grades.csv")) == ["ann"]
    assert (f"interrupted: 2 not started; waiting for the 1 running (Ctrl-C again to stop them); "
            f"{out / 'grades.csv'} holds every finished row") in capsys.readouterr().err


def test_a_first_ctrl_c_lets_no_grading_start_and_stops_none(tmp_path, capsys):
    stages = regrade.Stages()
    with pytest.raises(KeyboardInterrupt):
        regrade.interrupt({}, None, stages, tmp_path / "grades.csv")
    assert stages.interrupted.is_set() and not stages.stopping.is_set()
    assert "interrupted: 0 not started; waiting for the 0 running" in capsys.readouterr().err


class Process:
    """Stands in for a grading's judge process: :meth:`ended` once stopped (or after 5 s)."""

    def __init__(self) -> None:
        self.stopped = threading.Event()

    def ended(self) -> GradingRun:
        self.stopped.wait(5)
        return ok_run()


def test_ctrl_c_twice_stops_the_running_gradings_and_records_none(tmp_path, monkeypatch, capsys,
                                                                  ctrl_c):
    processes, waits = {"ann": Process(), "bo": Process()}, Waits(monkeypatch)

    def twice(started):
        started(processes["ann"])
        waits.begun.wait(5)
        ctrl_c_here()
        time.sleep(0.5)
        ctrl_c_here()
        return processes["ann"].ended()

    def runs(started):
        started(processes["bo"])
        return processes["bo"].ended()

    monkeypatch.setattr(regrade.grading_run, "stop", lambda process: process.stopped.set())
    judge = judged(monkeypatch, tmp_path, ann=twice, bo=runs)
    out = tmp_path / "out"
    with pytest.raises(KeyboardInterrupt):
        regrade.regrade(handins_folder(tmp_path, "ann", "bo", "cy"), out, fake_grader(tmp_path),
                        jobs=2, progress=False)
    assert judge.students() == ["ann", "bo"]
    assert all(process.stopped.is_set() for process in processes.values())
    assert regrade.read_rows(out / "grades.csv") == {}
    assert ("stopping the 2 running gradings and removing their folders; every finished row is "
            "kept") in capsys.readouterr().err


def test_a_ctrl_c_on_a_pool_thread_is_acted_on_within_a_wake_and_the_wait_sleeps(monkeypatch,
                                                                                ctrl_c):
    """The main thread sleeps in its wait (a few wake-ups, not a busy loop) and acts on a Ctrl-C
    the kernel handed a pool thread within a wake-up (0.2 s), well before a second."""
    waits, sent = Waits(monkeypatch), []

    def later() -> None:
        time.sleep(0.1)
        sent.append(time.monotonic())
        ctrl_c_here()

    threading.Thread(target=later).start()
    with pytest.raises(KeyboardInterrupt):
        regrade.drain({Future(): ("ann", None, "sha", "")}, record=None)
    assert time.monotonic() - sent[0] < 0.7 and waits.count <= 3, (time.monotonic() - sent[0],
                                                                   waits.count)


BAR = re.compile(r"\d/\d \[")  # tqdm's "2/2 [00:00<00:00, ..." on standard error


def test_a_run_by_default_grades_one_at_a_time_with_a_bar_and_a_rerun_keeps_the_graded(
        tmp_path, monkeypatch, capsys):
    monkeypatch.delenv("TQDM_DISABLE", raising=False)
    judge = judged(monkeypatch, tmp_path)
    handins, out = handins_folder(tmp_path, "ann", "bo"), tmp_path / "terms/fall/out"
    regrade.regrade(handins, out, fake_grader(tmp_path))
    log = capsys.readouterr().err
    assert "2 handins, 0 already graded by this grader, 2 to grade with --jobs 1:\n" in log
    assert BAR.search(log) and [call["gradings"] for call in judge.calls] == [1, 1]
    (handins / "cy.tar").write_text("cy")
    rows = regrade.regrade(handins, out, fake_grader(tmp_path))
    assert "3 handins, 2 already graded by this grader, 1 to grade with --jobs 1:\n" in \
        capsys.readouterr().err
    assert judge.students() == ["ann", "bo", "cy"] and list(out.glob("replaced-*")) == []
    assert {key: float(row["total"]) for key, row in rows.items()} == {
        key: LINEAR for key in ("ann", "bo", "cy")}
    with pytest.raises(SystemExit, match="--jobs must be at least 1, got 0"):
        regrade.regrade(handins, out, fake_grader(tmp_path), jobs=0)
    assert len(judge.calls) == 3


def test_a_timeout_is_graded_once_more_noted_then_kept(tmp_path, monkeypatch):
    judge = judged(monkeypatch, tmp_path, bo=lambda started: ok_run(timed_out=True))
    handins, out = handins_folder(tmp_path, "ann", "bo"), tmp_path / "out"
    for _ in range(3):
        regrade.regrade(handins, out, fake_grader(tmp_path), progress=False)
    row = regrade.read_rows(out / "grades.csv")["bo"]
    assert judge.students() == ["ann", "bo", "bo"]
    assert (row["status"], row["notes"]) == ("timeout", regrade.RETRIED_NOTE)


def test_fresh_sets_aside_a_hand_edited_grades_csv_and_the_feedback_folder(tmp_path, monkeypatch):
    judge = judged(monkeypatch, tmp_path)
    handins, out = handins_folder(tmp_path, "ann", "bo"), tmp_path / "out"
    regrade.regrade(handins, out, fake_grader(tmp_path), progress=False)
    (out / "feedback/zed.txt").write_text("a former student's report")
    edit_cell(out / "grades.csv", "ann", "Linear", "1.0")
    with pytest.raises(SystemExit, match="Linear for ann was edited by hand"):
        regrade.regrade(handins, out, fake_grader(tmp_path), progress=False)
    rows = regrade.regrade(handins, out, fake_grader(tmp_path), progress=False, fresh=True)
    assert judge.students() == ["ann", "ann", "bo", "bo"] and rows["ann"]["Linear"] == LINEAR
    (moved,) = out.glob("replaced-*")
    assert sorted(path.name for path in (out / "feedback").iterdir()) == ["ann.txt", "bo.txt"]
    assert (moved / "feedback/zed.txt").exists()
    assert regrade.read_rows(moved / "grades.csv")["ann"]["Linear"] == "1.0"


def command(tmp_path: Path, *options: str) -> None:
    """``python -m autograder.classroom.regrade`` of tmp_path's handins into tmp_path/out."""
    regrade.main([str(tmp_path / "handins"), "--out", str(tmp_path / "out"), "--autograder",
                  str(fake_grader(tmp_path)), *options])


def test_the_command_line_grades_one_at_a_time_and_passes_each_option_on(tmp_path, monkeypatch,
                                                                         capsys):
    judge = judged(monkeypatch, tmp_path)
    handins_folder(tmp_path, "ann", "bo")
    monkeypatch.setenv("TQDM_DISABLE", "1")
    command(tmp_path)
    log = capsys.readouterr().err
    assert "to grade with --jobs 1:" in log and not BAR.search(log)
    assert [call["gradings"] for call in judge.calls] == [1, 1]
    monkeypatch.delenv("TQDM_DISABLE")
    command(tmp_path, "--only", "bo", "--force", "--jobs", "2", "--grader-flags=-x")
    assert BAR.search(capsys.readouterr().err)
    assert judge.calls[2:] == [{"student": "bo", "gradings": 2, "zygote": None, "flags": "-x"}]
    (tmp_path / "out/feedback/zed.txt").write_text("a former student's report")
    command(tmp_path, "--fresh", "--versions", "all")
    assert judge.students() == ["ann", "ann", "bo", "bo", "bo"]
    assert {row["versions_graded"] for row in regrade.read_rows(
        tmp_path / "out/grades.csv").values()} == {"all"}
    assert sorted(path.name for path in (tmp_path / "out/feedback").iterdir()) == [
        "ann.txt", "bo.txt"]


def test_rescore_only_takes_no_handins_and_a_run_needs_them(tmp_path, monkeypatch, capsys):
    rescored = []
    monkeypatch.setattr(regrade.rescore, "rescore_class",
                        lambda out, source: rescored.append((out, source)))
    regrade.main(["--rescore-only", "--out", "o", "--autograder", "g"])
    assert rescored == [(Path("o"), Path("g"))]
    with pytest.raises(SystemExit) as refused:
        regrade.main(["handins", "--rescore-only"])
    assert refused.value.code == 2 and ("--rescore-only grades nothing: leave out the handins' "
                                        "folder") in capsys.readouterr().err
    with pytest.raises(SystemExit) as refused:
        regrade.main([])
    assert refused.value.code == 2 and ("give the bulk download's folder (make regrade "
                                        "HANDINS=<folder>)") in capsys.readouterr().err
    assert len(rescored) == 1


def test_a_ctrl_c_ends_the_command_with_status_130(tmp_path, monkeypatch, ctrl_c):
    waits = Waits(monkeypatch)

    def interrupted(started):
        waits.begun.wait(5)
        ctrl_c_here()
        return ok_run()

    judged(monkeypatch, tmp_path, ann=interrupted)
    handins_folder(tmp_path, "ann", "bo")
    with pytest.raises(SystemExit) as ended:
        command(tmp_path)
    assert ended.value.code == 130
