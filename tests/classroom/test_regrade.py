# hw4p1: instructor-only
"""Tests of the bulk regrade (autograder/classroom/regrade.py): both download layouts, one row per student,
faults isolated between concurrent gradings, resumable, a summary.

    .venv/bin/python -m pytest -q tests/classroom/test_regrade.py
"""
import csv
import json
import os
import platform
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from autograder.judging.scoring import rubric
from autograder.classroom import grades_csv, regrade
from autograder.judging.scoring.hidden_tests import mytorch_hidden
from autograder.judging.scoring.report import GradingReport, TestResult
from tests.grader.autograder_helpers import (TEST_FULL_MARKS_PPL, TEST_ZERO_MARKS_PPL,
                                             attack_handin, built_autograder, honest_scores,
                                             session_folder)
from tests.classroom.regrade_fakes import fake_grader, grade_with, judge_details
from tests.grader.attack_handins import MYTORCH_ZERO

REPO = Path(__file__).resolve().parents[2]
HANG = "while True:\n    pass\n"
EXHAUST_MEMORY = "_blocks = []\nwhile True:\n    _blocks.append(bytearray(256 * 2**20))\n"
FORK_BOMB = """
import os
while True:
    try:
        os.fork()
    except OSError:
        pass
"""


def test_both_download_layouts_name_each_student_once(tmp_path):
    (tmp_path / "ann@x.edu_3_handin.tar").write_bytes(b"")
    (tmp_path / "bo.tar.gz").write_bytes(b"")
    (tmp_path / "notes.txt").write_text("not a handin")
    (tmp_path / "cy").mkdir()
    (tmp_path / "cy/handin.tar").write_bytes(b"")
    (tmp_path / "di").mkdir()
    (tmp_path / "di/my-upload.zip").write_bytes(b"")
    (tmp_path / "empty").mkdir()
    found = {key: handin.path for key, handin in regrade.find_handins(tmp_path).items()}
    assert found == {"ann@x.edu": tmp_path / "ann@x.edu_3_handin.tar", "bo": tmp_path / "bo.tar.gz",
                     "cy": tmp_path / "cy/handin.tar", "di": tmp_path / "di/my-upload.zip"}, found
    (tmp_path / "bo").mkdir()  # the same student in both layouts: the newer file, with a note
    (tmp_path / "bo/handin.tar").write_bytes(b"newer")
    assert regrade.find_handins(tmp_path)["bo"].path == tmp_path / "bo/handin.tar"
    assert "graded the newest" in regrade.find_handins(tmp_path)["bo"].note


def test_autolab_versions_and_re_downloads(tmp_path):
    """Every version of a student: the highest graded by default, every one with 'all'; a
    browser's re-download of one version counts once when identical, the newer file otherwise."""
    for version in (1, 2, 10):
        (tmp_path / f"ann@x.edu_{version}_handin.tar").write_bytes(b"v%d" % version)
    (tmp_path / "ann@x.edu_10_handin (1).tar").write_bytes(b"v10")
    (tmp_path / "bo@x.edu_1_handin.tar").write_bytes(b"old")
    (tmp_path / "bo@x.edu_1_handin(1).tar").write_bytes(b"different")
    latest = regrade.find_handins(tmp_path)
    assert sorted(latest) == ["ann@x.edu", "bo@x.edu"]
    assert (latest["ann@x.edu"].version, latest["ann@x.edu"].versions_found) == ("10", 3)
    assert latest["ann@x.edu"].path.read_bytes() == b"v10" and not latest["ann@x.edu"].note
    assert "2 different files of this version" in latest["bo@x.edu"].note
    every = regrade.find_handins(tmp_path, "all")
    assert sorted(every) == ["ann@x.edu#1", "ann@x.edu#10", "ann@x.edu#2", "bo@x.edu#1"]
    with pytest.raises(SystemExit, match="--versions must be one of"):
        regrade.find_handins(tmp_path, "newest")


METADATA = """submission_101:
  :submitters:
  - :name: Ann Lee
    :sid: '0042'
    :email: ann@x.edu
  :created_at: 2026-11-20 23:59:30.123456000 -05:00
  :score: 0.0
  :status: processed
submission_102:
  :submitters:
  - :name: Bo Chen
    :sid: '0043'
    :email: bo@x.edu
  :created_at: 2026-11-21 00:10:00.000000000 -05:00
"""


def test_gradescope_rows_carry_the_submitters_metadata(tmp_path):
    (tmp_path / "submission_metadata.yml").write_text(METADATA)
    for folder in ("submission_101", "submission_102", "submission_103"):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "handin.tar").write_bytes(folder.encode())
    found = regrade.find_handins(tmp_path)
    assert sorted(found) == ["ann@x.edu", "bo@x.edu", "submission_103"], found
    ann = found["ann@x.edu"]
    assert (ann.name, ann.email, ann.sid) == ("Ann Lee", "ann@x.edu", "0042")
    assert ann.submitted_at.startswith("2026-11-20T23:59:30"), ann.submitted_at
    assert "does not list submission_103/" in found["submission_103"].note


def test_one_failing_handin_is_a_crashed_row_and_the_run_finishes(tmp_path, monkeypatch, capsys):
    """A grading that raises (RecursionError in clean-up), one that times out and one whose
    result cannot be read are each their student's row; the others are graded. A rerun grades
    the timeout once more (noted), then nothing; --only and --force choose what is graded."""
    handins = tmp_path / "handins"
    handins.mkdir()
    for student in ("ann", "bo", "cy", "di"):
        (handins / f"{student}_1_handin.tar").write_bytes(student.encode())
    graded = []

    def fake_run(grading, grader_flags="", gradings=1, started=None, zygote=None):
        student = Path(grading).read_text()
        graded.append(student)
        if student == "bo":
            raise RecursionError("maximum recursion depth exceeded")
        scores = {**rubric.zero_scores(), "Linear": 2.0}
        if student == "di":  # what grading_run makes of a details.json report.load refuses
            return regrade.grading_run.GradingRun(
                scores, None, "report\n", 1.0, False,
                error="the judge's report was refused: details.json: a grading report without "
                      "a version")
        return regrade.grading_run.GradingRun(scores, judge_details(2.0), "report\n", 1.0,
                                              timed_out=student == "cy")

    grade_with(fake_run, monkeypatch, tmp_path)
    out = tmp_path / "out"
    rows = regrade.regrade(handins, out, fake_grader(tmp_path), jobs=2, progress=False)
    assert {key: row["status"] for key, row in rows.items()} == {
        "ann": "ok", "bo": "crashed", "cy": "timeout", "di": "crashed"}
    assert "RecursionError: maximum recursion depth exceeded" in rows["bo"]["notes"]
    assert "report was refused: details.json: a grading report without" in rows["di"]["notes"]
    assert rows["bo"]["total"] == 0 and rows["ann"]["total"] == 2.0
    assert rows["ann"]["test:linear_forward"] == 2.0 and rows["ann"]["seconds:Linear"] == 1.5
    summary = (out / "summary.txt").read_text()
    assert "crashed: bo, di" in summary and "timeout: cy" in summary
    header = (out / "grades.csv").read_text().splitlines()[0].split(",")
    assert {"test:linear_forward", "seconds:Linear", "seconds:LanguageModel", "name", "email",
            "sid", "submitted_at", "version", "versions_graded"} <= set(header), header
    assert header.index("seconds:Linear") < header.index("seconds:LanguageModel")
    assert rows["ann"]["test_seconds:linear_forward"] == 0.25
    assert header.index("test_seconds:linear_forward") == header.index("test:linear_forward") + 1

    graded.clear()
    capsys.readouterr()
    rows = regrade.regrade(handins, out, fake_grader(tmp_path), progress=False)
    assert sorted(graded) == ["bo", "cy", "di"], graded  # the timeout once more; the crashed
    assert rows["cy"]["notes"].startswith(regrade.RETRIED_NOTE)
    log = capsys.readouterr().err  # why each handin is graded or not
    assert f"  1 {regrade.RETRIED_NOTE}: cy\n" in log and "  1 unchanged: the same handin, " \
        "grader and scoring line\n" in log, log
    assert f"  2 {regrade.rescore.CRASHED_AGAIN}: bo, di\n" in log, log
    graded.clear()
    regrade.regrade(handins, out, fake_grader(tmp_path), progress=False)
    assert sorted(graded) == ["bo", "di"], graded  # a crashed row is never kept
    graded.clear()
    regrade.regrade(handins, out, fake_grader(tmp_path), progress=False, only=["ann"],
                    force=True)
    assert graded == ["ann"]
    assert len(regrade.read_rows(out / "grades.csv")) == 4
    with pytest.raises(SystemExit, match="--only: no handin of zed"):
        regrade.regrade(handins, out, fake_grader(tmp_path), progress=False, only=["zed"])


def test_the_summary_ends_with_the_next_step_of_each_problem_present(tmp_path):
    rows = {student: {"student": student, "status": status, "total": "0", "flags": flags,
                      "notes": notes}
            for student, status, flags, notes in (
                ("ann", "ok", "", ""), ("bo", "invalid", "", ""), ("cy", "crashed", "", ""),
                ("di", "timeout", "", ""), ("ed", "timeout", "", regrade.RETRIED_NOTE),
                ("fay", "ok", "shares its weights with ann", ""))}
    steps = regrade.summarize(rows, tmp_path).split("next steps:\n")[1].splitlines()
    assert [step.split()[1] for step in steps] == ["invalid", "crashed", "timeout", "flagged",
                                                   "then:"], steps
    invalid, crashed, timeout, flagged, then = steps
    assert "`make handin`" in invalid and f"{tmp_path}/feedback/<student>.txt" in invalid
    assert "notes column" in crashed and "--only <student>" in crashed
    assert "1 not yet graded twice: run `make regrade` again" in timeout
    assert "flags column" in flagged and "unmatched.txt" in then
    alone = regrade.summarize({"ann": rows["ann"], "ed": rows["ed"]}, tmp_path)
    assert alone.endswith("next steps:\n- timeout (1): one that times out twice is the handin's: "
                          f"its {tmp_path}/feedback/<student>.txt names the part that hit its "
                          f"time limit\n- then: `make gradebook ROSTER=<Canvas's Gradebook "
                          f"export> GRADES={tmp_path}/grades.csv`, and read "
                          f"gradebook/unmatched.txt (graded students no roster row matches, "
                          f"roster rows with no handin) before importing "
                          f"gradebook/canvas_import.csv\n"), alone


def test_byte_identical_weights_and_run_time_code_are_flagged(tmp_path):
    rows = {student: {"student": student, "status": "ok", "total": "50", "weights_sha256": sha,
                      "integrity_flags": flags, "runtime_code": code}
            for student, sha, flags, code in (
                ("ann", "aa", "", ""), ("bo", "aa", "test_metrics.json reports 1, 2", ""),
                ("cy", "cc", "", "exec (mytorch/nn/linear.py:3)"), ("di", "", "", ""),
                ("ed", "", "", ""))}
    grades_csv.with_flags(rows)
    assert rows["ann"]["flags"] == (
        "shares its weights with bo (byte-identical model_state_dict.pt): one training, copied or "
        "run twice: the same code, data, seed and hardware give the same bytes, and each run "
        "draws its own seed, so honest students match only by giving the same one (the same "
        "--seed N or seed: N). Compare next the seed and wall_seconds of their run_card.json, "
        "then make similarity's share for the pair")
    assert rows["bo"]["flags"].startswith("test_metrics.json reports 1, 2; shares its weights "
                                          "with ann")
    assert rows["cy"]["flags"] == ("its mytorch builds code at run time "
                                   "(exec (mytorch/nn/linear.py:3))")
    assert rows["di"]["flags"] == rows["ed"]["flags"] == ""  # no weights read: nothing shared
    summary = regrade.summarize(rows, tmp_path)
    assert "flagged (see the flags column): ann, bo, cy" in summary


@pytest.mark.class_fixture
def test_hostile_handins_change_no_other_row_and_a_rerun_resumes(tmp_path, capsys):
    """Three honest handins among one that hangs, one that exhausts its memory and one that forks
    without end, graded two at a time: every honest row is the honest scores; the others lose
    only mytorch. A rerun grades nothing; a changed handin alone is graded again."""
    folder = session_folder("hw4p1-regrade-")
    folder.chmod(0o755)
    handins = folder / "handins"
    handins.mkdir()
    plants = {"hang": HANG, "memory": EXHAUST_MEMORY, "forks": FORK_BOMB}
    for student, init in {"honest1": "", "honest2": "", "honest3": "", **plants}.items():
        built = attack_handin(folder / "build" / student, init, None)
        if student in ("honest2", "forks"):  # Gradescope's layout
            (handins / student).mkdir()
            shutil.copy(built, handins / student / "handin.tar")
        else:  # Autolab's
            shutil.copy(built, handins / f"{student}_1_handin.tar")
    out = folder / "out"
    rows = regrade.regrade(handins, out, built_autograder(), jobs=2,
                           grader_flags="--mytorch-timeout 5", progress=False)
    honest = honest_scores()
    assert sorted(rows) == sorted(["honest1", "honest2", "honest3", *plants]), sorted(rows)
    for student, row in rows.items():
        scores = {category: float(row[category]) for category in rubric.RUBRIC}
        expected = honest if student.startswith("honest") else {**MYTORCH_ZERO,
                                                                "LanguageModel": honest["LanguageModel"]}
        assert scores == expected, (student, row)
        assert float(row["total"]) == pytest.approx(sum(expected.values()))
        last_line = (out / "feedback" / f"{student}.txt").read_text().splitlines()[-1]
        assert json.loads(last_line)["scores"] == scores, student
    statuses = {student: row["status"] for student, row in rows.items()}
    assert statuses.pop("memory") in ("ok", "timeout"), rows["memory"]  # refused, or thrashing
    assert statuses == {"honest1": "ok", "honest2": "ok", "honest3": "ok", "hang": "timeout",
                        "forks": "timeout"}
    assert all(float(rows[s]["perplexity_recomputed"]) > 1 and rows[s]["tokenizer"] == "char"
               for s in rows)
    with open(out / "grades.csv", newline="") as file:
        written = list(csv.DictReader(file))
    assert [row["student"] for row in written] == sorted(rows)
    assert (out / "summary.png").stat().st_size > 1000
    summary = (out / "summary.txt").read_text()
    assert summary.startswith("6 handins: ") and "0 invalid" in summary and "0 crashed" in summary
    assert "timeout: forks, hang" in summary

    # A rerun grades each timeout once more (the host may have been the cause), then nothing.
    timeouts = sum(row["status"] == "timeout" for row in rows.values())
    capsys.readouterr()
    regrade.regrade(handins, out, built_autograder(), jobs=2,
                    grader_flags="--mytorch-timeout 5", progress=False)
    assert (f"{6 - timeouts} already graded by this grader, {timeouts} to grade"
            in capsys.readouterr().err)
    regrade.regrade(handins, out, built_autograder(), jobs=2, progress=False)
    assert "6 already graded by this grader, 0 to grade" in capsys.readouterr().err
    shutil.copy(attack_handin(folder / "build" / "changed", "", None),
                handins / "hang_1_handin.tar")
    rows = regrade.regrade(handins, out, built_autograder(), jobs=2, progress=False)
    assert "5 already graded by this grader, 1 to grade" in capsys.readouterr().err
    assert rows["hang"]["status"] == "ok" and float(rows["hang"]["total"]) == sum(honest.values())


def test_the_likely_causes_are_listed_per_student_and_counted_for_the_class(tmp_path):
    tests = [TestResult(name, "SDPA", 1, 0, "", "", family=family)
             for name, family in (("a", "sdpa-scale"), ("b", "sdpa-scale"), ("c", ""),
                                  ("d", "linear-bias"), ("e", "not a family; =cmd"))]
    assert grades_csv.likely_causes(GradingReport(tests=tests)) == ["linear-bias", "sdpa-scale"]
    assert grades_csv.likely_causes(GradingReport()) == []
    rows = {student: {"student": student, "status": "ok", "total": "50", "likely_causes": causes}
            for student, causes in (("ann", "linear-bias sdpa-scale"), ("bob", "sdpa-scale"),
                                    ("cy", ""))}
    summary = regrade.summarize(rows, tmp_path)
    assert "likely causes of failed hidden tests (students): sdpa-scale 2, linear-bias 1" in summary
    assert "likely causes" not in regrade.summarize({"cy": rows["cy"]}, tmp_path)


def sigint_default() -> None:
    """In a regrade these tests start, before it runs: SIGINT's default disposition. A shell's
    background job (how CI may start the suite) passes SIGINT on ignored, and Python keeps it
    ignored, so the Ctrl-C these tests send would never reach the regrade."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@pytest.mark.class_fixture
def test_ctrl_c_keeps_every_finished_row_and_the_rerun_goes_on(tmp_path, capsys):
    """SIGINT once the first row is written: the run waits for the grading under way, exits 130,
    and leaves a CSV whose every row is whole; a rerun grades only the rest."""
    import os
    import signal
    import subprocess
    import sys
    import time

    folder = session_folder("hw4p1-regrade-interrupt-")
    folder.chmod(0o755)
    handins = folder / "handins"
    handins.mkdir()
    for index in range(3):
        shutil.copy(attack_handin(folder / "build" / str(index), "", None),
                    handins / f"student{index}.tar")
    out = folder / "out"
    run = subprocess.Popen([sys.executable, "-m", "autograder.classroom.regrade", str(handins), "--out",
                            str(out), "--autograder", str(built_autograder())],
                           cwd=REPO, env={**os.environ, "TQDM_DISABLE": "1"},
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                           preexec_fn=sigint_default)
    deadline = time.monotonic() + 300
    while not regrade.read_rows(out / "grades.csv") and time.monotonic() < deadline:
        time.sleep(0.2)
    run.send_signal(signal.SIGINT)
    _, stderr = run.communicate(timeout=300)
    assert run.returncode == 130, stderr[-2000:]
    assert "interrupted" in stderr, stderr[-2000:]
    kept = regrade.read_rows(out / "grades.csv")
    assert 1 <= len(kept) < 3, kept
    assert all(row["status"] == "ok" and float(row["total"]) == sum(honest_scores().values())
               for row in kept.values()), kept
    capsys.readouterr()
    rows = regrade.regrade(handins, out, built_autograder(), progress=False)
    assert f"{len(kept)} already graded by this grader, {3 - len(kept)} to grade" in \
        capsys.readouterr().err
    assert len(rows) == 3 and all(row["status"] == "ok" for row in rows.values())


# A grader whose grading sleeps as many seconds as the handin's text says, then prints a scores
# line: the regrade's own machinery, without the judge's cost.
SLEEPY_MAKEFILE = "all:\n\t@sleep $$(cat handin.tar)\n\t@echo '{\"scores\": {}}'\n"


def interrupted_regrade(tmp_path: Path, sleeps: dict[str, int], jobs: int, rows_before: int,
                        signals: int, to_a_pool_thread: bool = False
                        ) -> tuple[subprocess.CompletedProcess, dict, list]:
    """Run the regrade on handins that sleep ``sleeps`` seconds; once ``rows_before`` rows are
    written, send ``signals`` SIGINTs a second apart (``to_a_pool_thread``: to a thread of the
    regrade other than its main thread, as the kernel may choose). Returns (the run, its rows,
    what is left in its TMPDIR)."""
    source = fake_grader(tmp_path)
    (source / regrade.grading_run.MAKEFILE).write_text(SLEEPY_MAKEFILE)
    handins, temp = tmp_path / "handins", tmp_path / "tmp"
    handins.mkdir()
    temp.mkdir()
    for student, seconds in sleeps.items():
        (handins / f"{student}.tar").write_text(str(seconds))
    out = tmp_path / "out"
    run = subprocess.Popen([sys.executable, "-m", "autograder.classroom.regrade", str(handins), "--out",
                            str(out), "--autograder", str(source), "--jobs", str(jobs)],
                           cwd=REPO, env={**os.environ, "TQDM_DISABLE": "1", "TMPDIR": str(temp)},
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                           preexec_fn=sigint_default)
    deadline = time.monotonic() + 60
    while len(regrade.read_rows(out / "grades.csv")) < rows_before and time.monotonic() < deadline:
        time.sleep(0.1)
    time.sleep(0.5)
    for _ in range(signals):
        if to_a_pool_thread:
            signal_a_pool_thread(run.pid, signal.SIGINT)
        else:
            run.send_signal(signal.SIGINT)
        time.sleep(1)
    stdout, stderr = run.communicate(timeout=60)
    return (subprocess.CompletedProcess(run.args, run.returncode, stdout, stderr),
            regrade.read_rows(out / "grades.csv"), sorted(p.name for p in temp.iterdir()))


def signal_a_pool_thread(pid: int, signum: int) -> None:
    """Send ``signum`` to one thread of process ``pid`` that is not its main thread (tgkill)."""
    import ctypes

    threads = sorted(int(tid) for tid in os.listdir(f"/proc/{pid}/task") if int(tid) != pid)
    assert threads, f"process {pid} runs no thread besides its main thread"
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.syscall(SYS_TGKILL[platform.machine()], pid, threads[0], signum) != 0:
        raise OSError(ctypes.get_errno(), "tgkill failed")


SYS_TGKILL = {"x86_64": 234, "aarch64": 131}  # tgkill(2)'s number, by architecture


@pytest.mark.skipif(platform.machine() not in SYS_TGKILL, reason="tgkill's number is not known here")
def test_a_ctrl_c_the_kernel_hands_a_pool_thread_starts_no_new_grading(tmp_path):
    """The kernel may deliver the terminal's SIGINT to any thread. Sent to the pool's thread while
    b grades, it must still stop the run there: c, queued behind b, never starts."""
    run, rows, left = interrupted_regrade(tmp_path, {"a": 0, "b": 3, "c": 0}, jobs=1,
                                          rows_before=1, signals=1, to_a_pool_thread=True)
    assert run.returncode == 130, run.stderr[-2000:]
    assert sorted(rows) == ["a", "b"] and left == [], (rows, left, run.stderr[-2000:])


@pytest.mark.slow  # measured: make slow-tests, docs/results.md
def test_ctrl_c_once_finishes_the_running_gradings_twice_stops_them(tmp_path):
    """Once: the grading under way finishes and is written, none starts after it. Twice: the
    running gradings are stopped at once, their folders removed, the finished rows kept."""
    once, rows, left = interrupted_regrade(tmp_path / "once", {"a": 0, "b": 3, "c": 0}, jobs=1,
                                           rows_before=1, signals=1)
    assert once.returncode == 130, once.stderr[-2000:]
    assert sorted(rows) == ["a", "b"] and left == [], (rows, left, once.stderr[-2000:])
    start = time.monotonic()
    twice, rows, left = interrupted_regrade(tmp_path / "twice", {"a": 0, "b": 0, "c": 300,
                                                                 "d": 300}, jobs=2,
                                            rows_before=2, signals=2)
    assert twice.returncode == 130 and time.monotonic() - start < 60, twice.stderr[-2000:]
    assert "stopping the 2 running gradings" in twice.stderr, twice.stderr[-2000:]
    assert sorted(rows) == ["a", "b"] and left == [], (rows, left)


# The realistic class (tools/class_fixture.py): what each student's row must say. mytorch: the
# points of each category (missing: 0); lm: the trained model whose perplexity the weights give
# (OWN: a training of the student's own, whose points are its measured perplexity's, near what
# its run reported; None: no model graded); flags: substrings, each in a flag, each flag holding
# one (two true notes of one tampering are both kept); causes: the likely causes, exactly. Each cell is what the
# handin deserves, whoever wrote the rule.
FULL = dict(rubric.MYTORCH_RUBRIC)
# A wrong SDPA scale fails every test that calls SDPA; MHA keeps mha_helpers' 2 points (its head
# split and merge, and the refusal of uneven heads), which do not call it.
WRONG_SCALE = {"Linear": 5, "Softmax": 5, "MultiHeadAttention": 2}
OWN = "own"
CLASS_TABLE = {
    # role: (status, mytorch points, lm, flags, likely causes)
    "honest-m1": ("ok", FULL, OWN, [], []),
    "honest-m2": ("ok", FULL, "m2", ["shares its weights with swapped-weights@uni.edu"], []),
    "twin-a": ("ok", FULL, "m1", ["shares its weights with twin-b@uni.edu"], []),
    "twin-b": ("ok", FULL, "m1", ["shares its weights with twin-a@uni.edu"], []),
    "edited-metrics": ("ok", FULL, OWN, ["test_metrics.json"], []),
    "wrong-scale": ("ok", WRONG_SCALE, OWN, [], ["sdpa-scale", "uses-a-failing-class"]),
    "empty": ("invalid", {}, None, [], []),
    "run-folder": ("invalid", {}, None, [], []),
    "zip-named-tar": ("ok", FULL, OWN, [], []),
    "gzipped": ("ok", FULL, OWN, [], []),
    "independent": ("ok", FULL, OWN, [], []),
    "disguised-copy": ("ok", FULL, OWN, [], []),
    "hang": ("timeout", {"Linear": 5}, OWN, [], []),
    "prints-10mb": ("ok", FULL, OWN, [], []),
    # m1's card and metrics beside m2's weights: the weights are not the ones the card records.
    # (This class's run cards record `test_set: null`, so no transcript is re-measured;
    # tests/grader/test_run_card_sample.py grades cards whose losses are not the weights'.)
    "swapped-weights": ("ok", FULL, "m2", ["not the file make handin packed",
                                           "shares its weights with honest-m2@uni.edu"], []),
    "syntax-error": ("ok", {}, OWN, [], []),
    "stubs": ("ok", {}, OWN, [], []),
    # The worker runs only mytorch's own files: code built at run time is refused, 0 for mytorch.
    "runtime-code": ("ok", {}, OWN, ["builds code at run time (exec (mytorch/nn/linear.py:"], []),
    "deep-tree": ("ok", FULL, OWN, [], []),
    "two-versions": ("ok", FULL, OWN, [], []),
}


def check_class_row(role: str, row: dict, lm_points: dict[str, float]) -> list[str]:
    """The cells of ``row`` that differ from CLASS_TABLE's, each as 'role.column: got, wanted'."""
    status, points, model, flags, causes = CLASS_TABLE[role]
    wrong = []

    def cell(column, got, wanted):
        if got != wanted:
            wrong.append(f"{role}.{column}: {got!r}, wanted {wanted!r}")

    cell("status", row["status"], status)
    for category in rubric.MYTORCH_RUBRIC:
        cell(category, float(row[category]), float(points.get(category, 0)))
    lm = float(row[rubric.LM_CATEGORY])
    if model is None:
        cell(rubric.LM_CATEGORY, lm, 0.0)
    elif model == OWN:
        measured, reported = float(row["perplexity_recomputed"]), float(row["perplexity_reported"])
        cell(rubric.LM_CATEGORY, lm, rubric.lm_score(measured, TEST_FULL_MARKS_PPL,
                                                     TEST_ZERO_MARKS_PPL))
        if not 1 / 1.5 < measured / reported < 1.5:
            wrong.append(f"{role}.perplexity_recomputed: {measured}, its run reported {reported}")
    else:
        cell(rubric.LM_CATEGORY, lm, lm_points[model])
    wanted_total = sum(points.values()) + (lm if model else 0.0)
    cell("total", round(float(row["total"]), 2), round(wanted_total, 2))
    got_flags = [flag for flag in row["flags"].split("; ") if flag]
    if (any(not any(flag in got for got in got_flags) for flag in flags)
            or any(not any(flag in got for flag in flags) for got in got_flags)):
        wrong.append(f"{role}.flags: {got_flags}, wanted each to hold one of {flags}, each of "
                     f"which in one")
    cell("likely_causes", row["likely_causes"].split(), causes)
    for category in rubric.MYTORCH_RUBRIC:  # each answered test's seconds, within its category's
        seconds = {test.name: row.get(f"test_seconds:{test.name}")
                   for test in mytorch_hidden.tests_of(category) if f"test:{test.name}" in row}
        known = [value for value in seconds.values() if value is not None]
        if (any(not isinstance(value, float) or value < 0 for value in known)
                or any(value is None and float(row[f"test:{name}"]) > 0  # answered, so timed
                       for name, value in seconds.items())
                or sum(known) > float(row.get(f"seconds:{category}", 0)) + 0.01):
            wrong.append(f"{role}.test_seconds of {category}: {seconds}, the category's "
                         f"{row.get(f'seconds:{category}')}")
    return wrong


@pytest.mark.slow
@pytest.mark.class_fixture
def test_a_realistic_class_gets_every_cell_of_its_table(tmp_path, capsys):
    """The class fixture's Autolab download graded two at a time: every student's status, points,
    flags and likely causes are CLASS_TABLE's; the highest version is graded; a rerun grades the
    timeout once more, the next rerun nothing; the same handins in Gradescope's layout carry the
    metadata; the gradebook and the similarity report read the same class."""
    from autograder.classroom import gradebook, similarity
    from tools.class_fixture import build

    fixture = build()
    out = tmp_path / "out"
    rows = regrade.regrade(fixture / "autolab", out, built_autograder(), jobs=2,
                           grader_flags="--mytorch-timeout 5", progress=False)
    by_role = {key.split("@")[0]: row for key, row in rows.items()}
    assert sorted(by_role) == sorted(CLASS_TABLE)
    lm_points = {}
    for model, role in (("m1", "twin-a"), ("m2", "honest-m2")):  # the LM's points are its measured
        row = by_role[role]  # perplexity's, near what the run measured on its own test split
        points = lm_points[model] = float(row[rubric.LM_CATEGORY])
        assert points == rubric.lm_score(float(row["perplexity_recomputed"]),
                                         TEST_FULL_MARKS_PPL, TEST_ZERO_MARKS_PPL), row
        assert 1 / 1.5 < float(row["perplexity_recomputed"]) / float(row["perplexity_reported"]) \
            < 1.5, row
    wrong = [cell for role, row in by_role.items() for cell in check_class_row(role, row, lm_points)]
    two = by_role["two-versions"]
    assert (two["version"], two["versions_found"], two["versions_graded"]) == ("2", 2, "latest")
    for role in ("empty", "run-folder"):
        feedback = (out / "feedback" / f"{role}@uni.edu.txt").read_text()
        assert "make handin" in feedback and "Not a complete handin" in feedback, role
    summary = (out / "summary.txt").read_text()
    assert "invalid: empty@uni.edu, run-folder@uni.edu" in summary and "timeout: hang@" in summary

    capsys.readouterr()  # a rerun grades only the timeout, once more, and says so
    rerun = regrade.regrade(fixture / "autolab", out, built_autograder(), jobs=2,
                            grader_flags="--mytorch-timeout 5", progress=False)
    assert "19 already graded by this grader, 1 to grade" in capsys.readouterr().err
    assert rerun["hang@uni.edu"]["notes"].startswith(regrade.RETRIED_NOTE), rerun["hang@uni.edu"]
    regrade.regrade(fixture / "autolab", out, built_autograder(), jobs=2, progress=False)
    assert "20 already graded by this grader, 0 to grade" in capsys.readouterr().err

    gradescope = regrade.regrade(fixture / "gradescope", tmp_path / "gradescope",
                                 built_autograder(), jobs=2, progress=False,
                                 only=["honest-m1@uni.edu", "empty@uni.edu"])
    for key, row in gradescope.items():
        assert (row["status"], row["total"]) == (rows[key]["status"], rows[key]["total"]), key
        assert row["name"] and row["sid"].startswith("9") and row["submitted_at"], row

    roster = tmp_path / "roster.csv"
    roster.write_text("Student,ID,SIS User ID,SIS Login ID,Section\n"
                      + "".join(f"{role},{index},x{index},{role}@uni.edu,S1\n"
                                for index, role in enumerate(sorted(CLASS_TABLE)))
                      + "Nobody,999,x999,nobody@uni.edu,S1\n")
    gradebook.main([str(roster), "--grades", str(out / "grades.csv"), "--out",
                    str(tmp_path / "gradebook")])
    with open(tmp_path / "gradebook/canvas_import.csv", newline="") as file:
        imported = {row["Student"]: row for row in csv.DictReader(file)}
    assert all(imported[role]["HW4P1"] == "" if by_role[role]["status"] == "crashed"
               else float(imported[role]["HW4P1"]) == float(by_role[role]["total"])
               for role in CLASS_TABLE), imported
    assert imported["Nobody"]["HW4P1"] == ""

    documents, runtime, findings = similarity.class_documents(fixture / "autolab")
    assert {student.split("@")[0] for student in runtime} == {"runtime-code"}, runtime
    assert findings == {}, findings  # no graded class moved, every handin inspected
    pairs = similarity.compare(documents, similarity.handout_document(handout_tree(tmp_path)),
                               tmp_path / "similarity")
    copy = [row for row in pairs if {row["student_a"], row["student_b"]}
            == {"independent@uni.edu", "disguised-copy@uni.edu"}]
    assert copy and copy[0]["flagged"], copy
    assert not any(row["flagged"] for row in pairs if "independent@uni.edu" in
                   (row["student_a"], row["student_b"]) and row is not copy[0])
    assert not wrong, "cells that differ from CLASS_TABLE:\n  " + "\n  ".join(wrong)


def handout_tree(tmp_path: Path) -> Path:
    """The handout's mytorch (its regions stubbed), as similarity's boilerplate."""
    from tools.class_fixture import stubs

    handout = tmp_path / "handout"
    for path, text in stubs().items():
        (handout / path).parent.mkdir(parents=True, exist_ok=True)
        (handout / path).write_text(text)
    return handout


def test_a_kept_row_says_what_the_current_download_says_and_another_term_is_refused(
        tmp_path, monkeypatch, capsys):
    """Gradings are reused when the handin is unchanged, but the metadata is the new export's
    (a group fixed, a time corrected); a student no longer in the download leaves the table,
    listed; a download where most of OUT's students are gone is refused, or started clean with
    --fresh (OUT's files moved aside)."""
    graded = []

    def fake_run(grading, grader_flags="", gradings=1, started=None, zygote=None):
        graded.append(Path(grading).read_text())
        return regrade.grading_run.GradingRun({**rubric.zero_scores(), "Linear": 1.0},
                                              GradingReport(), "report\n", 1.0, False)

    grade_with(fake_run, monkeypatch, tmp_path)
    entry = "submission_{}:\n  :submitters:\n{}  :created_at: {}\n"
    ann = "  - :name: Ann\n    :sid: '1'\n    :email: ann@x.edu\n"
    bo = "  - :name: Bo\n    :sid: '2'\n    :email: bo@x.edu\n"
    cy = "  - :name: [Cy, Diaz]\n    :sid: '3'\n    :email: cy@x.edu\n"

    def export(folder: Path, metadata: str) -> Path:
        for number in (1, 2, 3)[:metadata.count("submission_")]:
            (folder / f"submission_{number}").mkdir(parents=True)
            (folder / f"submission_{number}/handin.tar").write_text(f"handin {number}")
        (folder / "submission_metadata.yml").write_text(metadata)
        return folder

    first = export(tmp_path / "a", entry.format(1, ann + bo, "2026-11-20 10:00:00 -05:00")
                   + entry.format(2, cy, "2026-11-20 11:00:00 -05:00")
                   + entry.format(3, bo, "2026-11-20 09:00:00 -05:00"))
    out, grader = tmp_path / "out", fake_grader(tmp_path)
    regrade.regrade(first, out, grader, progress=False)
    assert regrade.read_rows(out / "grades.csv")["cy@x.edu"]["name"] == "Cy Diaz"
    fixed = export(tmp_path / "b", entry.format(1, ann, "2026-11-20 10:30:00 -05:00")
                   + entry.format(2, cy, "2026-11-20 11:00:00 -05:00"))
    graded.clear()
    capsys.readouterr()
    regrade.regrade(fixed, out, grader, progress=False)
    err = capsys.readouterr().err
    assert graded == [] and "1 rows left grades.csv" in err and ": bo@x.edu\n" in err, err
    rows = regrade.read_rows(out / "grades.csv")
    assert sorted(rows) == ["ann@x.edu", "cy@x.edu"]
    assert (rows["ann@x.edu"]["name"], rows["ann@x.edu"]["email"],
            rows["ann@x.edu"]["submitted_at"]) == ("Ann", "ann@x.edu", "2026-11-20T10:30:00-05:00")

    other = export(tmp_path / "c", entry.format(1, "  - :name: Eve\n    :sid: '9'\n    :email: "
                                                   "eve@x.edu\n", "2026-11-21 10:00:00 -05:00"))
    with pytest.raises(SystemExit, match=r"2 of the 2 students graded in .* are not in this "
                                         r"download.*--fresh to start clean"):
        regrade.regrade(other, out, grader, progress=False)
    regrade.regrade(other, out, grader, progress=False, fresh=True)
    assert sorted(regrade.read_rows(out / "grades.csv")) == ["eve@x.edu"]
    [moved] = out.glob("replaced-*")
    assert sorted(regrade.read_rows(moved / "grades.csv")) == ["ann@x.edu", "cy@x.edu"]


def test_autolab_s_download_zip_is_no_student_and_gives_approximate_times(tmp_path):
    """The zip unpacked in place is skipped (it was taken for a student); with the server's
    zone its entry times become submission times, with the offset of that date (EDT, EST)."""
    import zipfile

    stamps = {"ann@x.edu_1_handin.tar": (2026, 10, 31, 23, 0, 0),
              "bo@x.edu_1_handin.tar": (2026, 11, 2, 9, 30, 0)}
    with zipfile.ZipFile(tmp_path / "hw4p1.zip", "w") as archive:
        for name, stamp in stamps.items():
            archive.writestr(zipfile.ZipInfo(name, date_time=stamp), name)
            (tmp_path / name).write_text(name)
    plain = regrade.find_handins(tmp_path)
    assert sorted(plain) == ["ann@x.edu", "bo@x.edu"] and plain["ann@x.edu"].submitted_at == ""
    zone = regrade.time_zone("America/New_York")
    timed = regrade.find_handins(tmp_path, autolab_zone=zone)
    assert timed["ann@x.edu"].submitted_at == "2026-10-31T23:00:00-04:00"
    assert timed["bo@x.edu"].submitted_at == "2026-11-02T09:30:00-05:00"
    assert "approximate" in timed["bo@x.edu"].note
