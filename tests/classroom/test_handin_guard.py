# hw4p1: instructor-only
"""Tests of the per-handin guard (autograder/judging/intake/handin_guard.py) and of the judge's
static inspection under it (autograder/judging/intake/static_inspection.py, run by the judge's
unpacking step), as the regrade reads it from the judge's report: a handin whose files end the
decoding or the parsing is a flag in grades.csv, its weights still hashed, the other rows untouched.

    .venv/bin/python -m pytest -q tests/classroom/test_handin_guard.py
"""
import ast
import csv
import hashlib
import signal
import tarfile
import time
from pathlib import Path

import pytest

from autograder.classroom import regrade
from autograder.judging import grade
from autograder.judging.intake import handin_guard, static_inspection
from autograder.judging.scoring import rubric
from autograder.judging.scoring.report import GradingReport
from tests.classroom.regrade_fakes import fake_grader, judge_details
from tests.classroom.similarity_classes import POISON

REPO = Path(__file__).resolve().parents[2]


def test_any_failure_is_one_line_finding_and_the_read_is_bounded(tmp_path):
    def deep():
        return deep()

    value, finding = handin_guard.guarded("mytorch/x.py", deep)
    assert value is None and finding.startswith("mytorch/x.py could not be inspected "
                                                 "(RecursionError: maximum recursion depth")
    _, finding = handin_guard.guarded("its handin", lambda: b"\xff".decode("idna", "replace"))
    assert finding.startswith("its handin could not be inspected (UnicodeError: "), finding
    _, finding = handin_guard.guarded("f", lambda: (_ for _ in ()).throw(
        ValueError("a; b\nc" + "x" * 500)))
    assert finding == f"f could not be inspected (ValueError: a, b c{'x' * 154})", finding
    assert handin_guard.guarded("f", lambda x: x + 1, 1) == (2, "")
    with pytest.raises(KeyboardInterrupt):
        handin_guard.guarded("f", lambda: (_ for _ in ()).throw(KeyboardInterrupt()))

    (tmp_path / "big.py").write_bytes(b"x" * 11)
    assert handin_guard.read_bounded(tmp_path / "big.py", 11) == b"x" * 11
    with pytest.raises(ValueError, match="big.py is larger than 10 bytes"):
        handin_guard.read_bounded(tmp_path / "big.py", 10)


def test_the_judges_inspection_of_a_slow_mytorch_ends_at_its_limit(tmp_path, monkeypatch):
    """Three graded files whose tree walks take seconds (90,000 assignments each) end the judge's
    inspection at INSPECTION_S, or after the parse under way (a C call the timer cannot cut), with
    one finding naming the limit; the timer and SIGALRM's handler are left as they were; the
    reference mytorch under the real limit has no finding."""
    reference = {path.relative_to(REPO).as_posix(): path for path in (REPO / "mytorch").rglob("*.py")
                 if "__pycache__" not in path.parts}
    assert static_inspection.inspect_handin(reference) == ([], [])
    slow = tmp_path / "slow.py"
    slow.write_bytes(b"".join(b"a%d = 1\n" % index for index in range(90_000)))
    start = time.monotonic()
    ast.parse(slow.read_bytes())
    parse_s = time.monotonic() - start
    handler = signal.getsignal(signal.SIGALRM)
    monkeypatch.setattr(static_inspection, "INSPECTION_S", 0.5)
    files = {**reference, **{path: slow for path in ("mytorch/nn/linear.py", "mytorch/nn/activation.py",
                                                     "mytorch/nn/scaled_dot_product_attention.py")}}
    start = time.monotonic()
    found = static_inspection.inspect_handin(files)
    assert time.monotonic() - start < 0.5 + parse_s + 1.0, "the inspection outlived its limit"
    assert found == ([], ["its mytorch could not be inspected within 0.5 s"]), found
    assert signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)
    assert signal.getsignal(signal.SIGALRM) == handler


def handin(folder: Path, members: dict[str, bytes]) -> None:
    """``folder``'s handin.tar holding ``members`` under handin/."""
    folder.mkdir(parents=True)
    with tarfile.open(folder / "handin.tar", "w") as tar:
        for name, data in members.items():
            path = folder / "build" / "handin" / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)
            tar.add(path, arcname=f"handin/{name}")


@pytest.mark.slow
def test_a_poisoned_handin_is_a_flag_and_its_shared_weights_still_are(tmp_path, monkeypatch):
    """Three handins graded by the regrade's own loop (the judge replaced by its unpacking step,
    which extracts, hashes the weights and inspects): one whose never-imported files end the
    decoding and the parsing, one that moved its graded classes into another module, one honest,
    the first two sharing their weights. The poisoned and moved ones are flagged with their
    findings (never a note alone); both shared weights are flagged; the honest row has no flag."""
    reference = {path.relative_to(REPO).as_posix(): path.read_bytes()
                 for path in sorted((REPO / "mytorch").rglob("*.py"))
                 if "__pycache__" not in path.parts}
    weights = b"PK weights of one student"
    handins = tmp_path / "handins"
    handin(handins / "poisoned", {**reference, **POISON, "model_state_dict.pt": weights})
    handin(handins / "moved", {**reference, "mytorch/nn/lin_impl.py":
                               reference["mytorch/nn/linear.py"],
                               "mytorch/nn/linear.py": b"from .lin_impl import Linear\n",
                               "model_state_dict.pt": weights})
    handin(handins / "honest", {**reference, "model_state_dict.pt": b"PK weights of another"})

    digest = hashlib.sha256(weights).hexdigest()

    def fake_run(grading, grader_flags="", gradings=1, started=None, zygote=None):
        unpacked = GradingReport()
        grade.unpack(Path(grading), tmp_path / "work" / Path(grading).parent.name, unpacked)
        report = judge_details(2.0, weights=unpacked.weights_sha256)
        report.runtime_code, report.static_findings = (unpacked.runtime_code,
                                                       unpacked.static_findings)
        return regrade.grading_run.GradingRun({**rubric.zero_scores(), "Linear": 2.0}, report,
                                              "report\n", 1.0, False)

    monkeypatch.setattr(regrade.grading_run, "run", fake_run)
    monkeypatch.setattr(regrade.grading_run, "prepare", lambda source, handin, parent=None: handin)
    regrade.regrade(handins, tmp_path / "out", fake_grader(tmp_path), progress=False)
    with open(tmp_path / "out/grades.csv", newline="") as file:
        rows = {row["student"]: row for row in csv.DictReader(file)}
    assert rows["poisoned"]["weights_sha256"] == rows["moved"]["weights_sha256"] == digest
    flags = {student: row["flags"].split("; ") for student, row in rows.items()}
    for path, error in (("notes.py", "declares the source encoding 'idna'"),
                        ("deep.py", "could not be inspected (RecursionError"),
                        ("unary.py", "could not be inspected (MemoryError")):
        assert any(flag.startswith(f"mytorch/nn/{path} {error}")
                   for flag in flags["poisoned"]), flags["poisoned"]
    assert flags["moved"][0] == ("mytorch/nn/linear.py defines no graded class of its own "
                                 "(Linear is defined in mytorch/nn/lin_impl.py)"), flags["moved"]
    for student, partner in (("poisoned", "moved"), ("moved", "poisoned")):
        assert any(flag.startswith(f"shares its weights with {partner} (byte-identical "
                                   f"model_state_dict.pt): one training, copied or run twice")
                   for flag in flags[student]), flags[student]
    assert rows["honest"]["flags"] == "" and rows["honest"]["notes"] == "", rows["honest"]
    assert "flagged (see the flags column): moved, poisoned" in \
        (tmp_path / "out/summary.txt").read_text()
