# hw4p1: instructor-only
"""What the classroom tests share to run the bulk regrade (autograder/classroom/regrade.py)
without a real grading: a grader folder of the two files it requires, gradings replaced, the
judge's report of a handin, a Gradescope export graded, a TA's edit of one cell, and a slow
``tar`` with the markers it leaves. Defined here once, so that no test module imports another.
"""
import shutil
from pathlib import Path

from autograder.classroom import regrade, spreadsheet
from autograder.judging.scoring import rubric
from autograder.judging.scoring.report import GradingReport, LanguageModelResult, Status, TestResult

EXTRACT_S = 3  # seconds slow_tar's tar waits before extracting


def grade_with(fake_run, monkeypatch, tmp_path: Path) -> None:
    """Replace each grading by ``fake_run``, whose grading folder is a file holding the handin's
    text (the student's name, in these tests)."""
    def fake_prepare(source, handin, parent=None):
        marker = tmp_path / f"grading-{handin.name}"
        marker.write_text(handin.read_bytes().decode())
        return marker

    monkeypatch.setattr(regrade.grading_run, "run", fake_run)
    monkeypatch.setattr(regrade.grading_run, "prepare", fake_prepare)


def fake_grader(tmp_path: Path) -> Path:
    """A folder with the two files regrade requires (gradings are replaced in these tests)."""
    source = tmp_path / "grader"
    source.mkdir(parents=True, exist_ok=True)
    for name in (regrade.grading_run.AUTOGRADE_TAR, regrade.grading_run.MAKEFILE):
        (source / name).write_text(name)
    return source


def judge_details(total_linear: float, status: str = "ok", weights: str = "") -> GradingReport:
    """The judge's report of a handin earning ``total_linear`` of Linear's 2 points."""
    return GradingReport(
        status=Status(status), weights_sha256=weights,
        tests=[TestResult("linear_forward", "Linear", 2, total_linear, "", "",
                          family="" if total_linear == 2 else "linear-bias", seconds=0.25)],
        seconds={"Linear": 1.5, "LanguageModel": 9.25},
        lm=LanguageModelResult(message="", perplexity_char=3.5, state_dict_sha256=weights or None))


def edit_cell(csv_path: Path, student: str, column: str, value: str) -> None:
    """What a TA does in a spreadsheet: one cell typed over, the file saved."""
    header, rows = spreadsheet.read_csv(csv_path)
    for row in rows:
        if row["student"] == student:
            row[column] = value
    spreadsheet.write_csv(csv_path, header, rows)


def write_export(folder: Path, submissions: dict) -> None:
    """The Gradescope export of ``submissions`` ({submission folder: (submitters as (name, sid,
    email), created_at, the total its grading gives)}): one folder per submission, each
    handin.tar holding that total, and submission_metadata.yml."""
    lines = []
    for submission, (submitters, created, total) in submissions.items():
        (folder / submission).mkdir(parents=True)
        (folder / submission / "handin.tar").write_text(total)
        lines += [f"{submission}:", "  :submitters:"]
        for name, sid, email in submitters:
            lines += [f"  - :name: \"{name}\"", f"    :sid: '{sid}'", f"    :email: {email}"]
        lines += [f"  :created_at: {created}", "  :status: processed"]
    (folder / "submission_metadata.yml").write_text("\n".join(lines) + "\n", encoding="utf-8")


def graded_export(tmp_path: Path, monkeypatch, submissions: dict) -> Path:
    """grades.csv of the export of ``submissions`` (as ``write_export`` takes them), through the
    regrade with each grading replaced by the total its handin names (in Linear)."""

    def fake_prepare(source, handin, parent=None):
        marker = tmp_path / f"grading-{handin.parent.name}"
        marker.write_text(handin.read_text())
        return marker

    def fake_run(grading, grader_flags="", gradings=1, started=None, zygote=None):
        total = float(Path(grading).read_text())
        return regrade.grading_run.GradingRun({**rubric.zero_scores(), "Linear": total},
                                              GradingReport(), "report\n", 1.0, False)

    monkeypatch.setattr(regrade.grading_run, "prepare", fake_prepare)
    monkeypatch.setattr(regrade.grading_run, "run", fake_run)
    write_export(tmp_path / "export", submissions)
    regrade.regrade(tmp_path / "export", tmp_path / "regrade", fake_grader(tmp_path),
                    progress=False)
    return tmp_path / "regrade/grades.csv"


def slow_tar(folder: Path) -> Path:
    """A folder holding a ``tar`` that touches ``extracting-<grading folder>`` beside the grading
    folder it runs in, waits EXTRACT_S seconds, then runs the real tar."""
    folder.mkdir()
    shim = folder / "tar"
    shim.write_text(f"#!/bin/sh\ntouch \"../extracting-$(basename \"$(pwd)\")\"\n"
                    f"sleep {EXTRACT_S}\nexec {shutil.which('tar')} \"$@\"\n")
    shim.chmod(0o755)
    return folder


def markers(tmp_path: Path, kind: str) -> int:
    """How many gradings have reached ``kind`` ('extracting' or 'judging')."""
    return len(list((tmp_path / "tmp").glob(f"{kind}-*")))
