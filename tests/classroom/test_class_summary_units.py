# hw4p1: instructor-only
"""A regrade's summary (autograder/classroom/class_summary.py) from rows written here: the counts
of each status, the mean, min and max of the totals, the students named under each problem, the
next steps' paths, and summary.png's size in pixels, bins and whole-student y axis. Every expected
value is worked out by hand here.

    .venv/bin/python -m pytest -q -n 0 tests/classroom/test_class_summary_units.py
"""
import struct

import matplotlib.figure
import pytest

from autograder.classroom.class_summary import summarize
from autograder.classroom.grades_csv import RETRIED_NOTE
from autograder.judging.scoring import rubric

MAXIMUM = sum(rubric.RUBRIC.values())


def row(status: str, total: float, **cells) -> dict:
    return {"status": status, "total": str(total), **cells}


def test_the_counts_and_the_totals_are_those_of_the_rows(tmp_path):
    rows = {"ann": row("ok", 90), "bo": row("ok", 40.5), "cy": row("invalid", 0),
            "di": row("timeout", 12.25)}
    text = summarize(rows, tmp_path)
    lines = text.splitlines()
    assert lines[0] == "4 handins: 2 ok, 1 invalid, 1 timeout, 0 crashed"
    assert lines[1] == f"total: mean 35.69, min 0, max 90 (of {MAXIMUM})"  # 142.75 / 4
    assert lines[2:4] == ["invalid: cy", "timeout: di"]
    assert (tmp_path / "summary.txt").read_text(encoding="utf-8") == text
    steps = text.split("next steps:\n")[1].splitlines()
    assert [step.split()[1] for step in steps] == ["invalid", "timeout", "then:"]


def test_each_problem_names_its_students_and_the_staff_s_columns(tmp_path):
    rows = {"ed": row("crashed", 0), "al": row("crashed", 0), "fay": row("ok", 70, flags="x"),
            "gus": row("ok", 60, adjustments="+5"), "hal": row("ok", 50)}
    text = summarize(rows, tmp_path)
    steps = text.split("next steps:\n")[1].splitlines()
    assert [step.split()[1] for step in steps] == ["crashed", "flagged", "then:"]
    lines = text.split("next steps:")[0].splitlines()
    assert lines[2:] == [
        "crashed: al, ed", "flagged (see the flags column): fay",
        "adjusted by the staff (adjustments.csv; the adjusted_total column): gus"]


def test_the_next_steps_name_the_files_of_this_regrade(tmp_path):
    rows = {"cy": row("crashed", 0), "di": row("timeout", 0), "fay": row("ok", 1, flags="x"),
            "ed": row("timeout", 0, notes=f"x; {RETRIED_NOTE}")}
    steps = summarize(rows, tmp_path).split("next steps:\n")[1]
    assert f"notes column of {tmp_path}/grades.csv, the whole output in {tmp_path}/feedback/" \
           f"<student>.txt" in steps
    assert ("- timeout (2): 1 not yet graded twice: run `make regrade` again, which grades each "
            "timeout once more (the host may have been the cause); one that times out twice is "
            f"the handin's: its {tmp_path}/feedback/<student>.txt names") in steps
    assert f"read the flags column of {tmp_path}/grades.csv (each flag" in steps
    assert f"GRADES={tmp_path}/grades.csv`" in steps


@pytest.fixture
def drawn(monkeypatch) -> list:
    """The figures summarize saves, seen as they are saved."""
    figures = []
    save = matplotlib.figure.Figure.savefig

    def recording(figure, *args, **kwargs):
        figures.append(figure)
        return save(figure, *args, **kwargs)

    monkeypatch.setattr(matplotlib.figure.Figure, "savefig", recording)
    return figures


def test_the_histogram_has_20_bins_from_0_to_the_maximum_and_counts_whole_students(tmp_path,
                                                                                  drawn):
    width = MAXIMUM / 20
    totals = [0, width * 0.99, width, MAXIMUM]  # bins 1, 1, 2 and the last (closed) one
    summarize({f"s{i}": row("ok", total) for i, total in enumerate(totals)}, tmp_path)
    [axis] = drawn[0].axes
    heights = [bar.get_height() for bar in axis.patches]
    assert len(heights) == 20
    assert heights[:2] == [2, 1] and heights[-1] == 1 and sum(heights) == 4
    assert [bar.get_x() for bar in axis.patches[:2]] == pytest.approx([0, width])
    assert all(tick == int(tick) for tick in axis.get_yticks())
    with open(tmp_path / "summary.png", "rb") as png:  # IHDR: width, height after 16 bytes
        assert struct.unpack(">II", png.read(24)[16:24]) == (720, 420)  # 6 x 3.5 in at 120 dpi
    assert axis.get_title() == "4 ok"
