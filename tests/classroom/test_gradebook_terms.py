# hw4p1: instructor-only
"""The gradebook's third class (in `make test-class`, marker class_fixture): a term graded in
Autolab (its download zip unpacked in place, submission times read from the zip's entries in the
server's zone, Autolab's grade import), then a second term's Gradescope export into the same OUT
(refused, then started clean with --fresh), exported again after a group was fixed and a
dropped student's submission removed, joined with a Canvas roster: a re-enrolled student handing
in term 1's very handin late, an impossible time on each side, an alias, Canvas's Test Student,
a withdrawn student, a member of two groups, a name given as a list, a 3-day extension across
the end of daylight saving time and grace days. Gradings are replaced by the points each handin
names (no training, seconds); every cell of each import is written by hand below.

    .venv/bin/python -m pytest -q -m class_fixture tests/classroom/test_gradebook_terms.py
"""
import csv
import re
import zipfile
from pathlib import Path

import pytest

from autograder.classroom import gradebook, regrade, spreadsheet
from autograder.judging.scoring import rubric
from autograder.judging.scoring.report import GradingReport
from tests.classroom.regrade_fakes import fake_grader

ZONE = "America/New_York"
# Term 1, Autolab: file name -> (the zip entry's local time, points per problem in rubric order)
TERM1 = {
    "ava@uni.edu_1_handin.tar": ((2025, 9, 24, 10, 0, 0), "5,5,20,20,30"),
    "ava@uni.edu_2_handin.tar": ((2025, 9, 26, 1, 0, 0), "5,5,20,20,40"),  # 1.02 h late
    "ben@uni.edu_1_handin.tar": ((2025, 9, 25, 20, 0, 0), "5,5,10,20,40"),
    "cruz@uni.edu_1_handin.tar": ((2025, 9, 25, 12, 0, 0), "5,0,20,20,50"),
}
TERM1_ROSTER = ("Student,ID,SIS User ID,SIS Login ID,Section\n"
                "\"Ames, Ava\",301,21001,ava@uni.edu,A\n"
                "\"Ng, Ben\",302,21002,ben@uni.edu,A\n"
                "\"Cole, Cruz\",303,21003,cruz@uni.edu,A\n")
# Autolab's import: no header; email, then each problem in rubric order (Autolab applies its own
# late policy to these raw points).
AUTOLAB_TABLE = [
    ["ava@uni.edu", "5.0", "5.0", "20.0", "20.0", "40.0"],
    ["ben@uni.edu", "5.0", "5.0", "10.0", "20.0", "40.0"],
    ["cruz@uni.edu", "5.0", "0.0", "20.0", "20.0", "50.0"],
]
TERM1_CANVAS = [["Ames, Ava", "81.0"], ["Ng, Ben", "80.0"], ["Cole, Cruz", "95.0"]]

# Term 2, Gradescope: folder -> (submitters (name, sid, email), created_at, points). Due
# 2026-10-30 23:59 New York (EDT), which leaves daylight saving time on 2026-11-01.
TERM2 = {
    # re-enrolled: term 1's very handin.tar, 37 h late (2 started days: -20%)
    "submission_2001": ([("Ben Ng", "41001", "ben@uni.edu")], "2026-11-01 11:59:00 -05:00",
                        "5,5,10,20,40"),
    # export A: Cruz and Dana; export B, the group fixed: Cruz alone (the same handin)
    "submission_2002": ([("Cruz Vega", "41002", "cruz.vega@uni.edu"),
                         ("Dana Wu", "41003", "dana.wu@uni.edu")], "2026-10-30 20:00:00 -04:00",
                        "5,5,20,20,45"),
    "submission_2003": ([("Dana Wu", "41003", "dana.wu@uni.edu")], "2026-10-30 18:00:00 -04:00",
                        "5,5,20,10,30"),
    # after the export, and before the assignment opened: listed, left blank
    "submission_2004": ([("Eli Ortiz", "41004", "eortiz@uni.edu")], "2099-01-01 00:00:00 -05:00",
                        "5,5,20,20,45.43"),
    "submission_2005": ([("Fay Park", "41005", "fpark@uni.edu")], "2026-09-20 10:00:00 -04:00",
                        "5,5,20,20,20"),
    # a name given as a list
    "submission_2006": ([(["Mallory", "Stone"], "41006", "mstone@uni.edu")],
                        "2026-10-30 12:00:00 -04:00", "5,5,20,20,35.43"),
    # another address, no SID: matched by the aliases file
    "submission_2007": ([("Gus Quinn", "", "gus.q@gmail.com")], "2026-10-30 13:00:00 -04:00",
                        "5,5,20,20,30"),
    # Jay in two groups: the latest (with Lee) is his, with --several-submissions latest
    "submission_2008": ([("Jay Lopez", "41010", "jlopez@uni.edu"),
                         ("Kai Mori", "41011", "kmori@uni.edu")], "2026-10-29 10:00:00 -04:00",
                        "5,5,10,10,20"),
    "submission_2009": ([("Jay Lopez", "41010", "jlopez@uni.edu"),
                         ("Lee Nash", "41012", "lnash@uni.edu")], "2026-10-30 09:00:00 -04:00",
                        "5,5,20,20,10"),
    # 3 calendar days of extension: due 2026-11-02 23:59 EST, 73 hours later; on time
    "submission_2010": ([("Max Ruiz", "41013", "mruiz@uni.edu")], "2026-11-02 23:30:00 -05:00",
                        "5,5,20,20,40"),
    # 61.02 h late, 3 started days, 2 grace days: 1 x 10%
    "submission_2011": ([("Nia Sato", "41014", "nsato@uni.edu")], "2026-11-02 12:00:00 -05:00",
                        "5,5,20,20,50"),
    # dropped the course; removed from Gradescope before export B
    "submission_2012": ([("Pat Doe", "41099", "pdoe@uni.edu")], "2026-10-30 08:00:00 -04:00",
                        "1,1,1,1,1"),
}
TERM2_ROSTER = ("\ufeffStudent,ID,SIS User ID,SIS Login ID,Section,HW4P1 (888)\n"
                "    Points Possible,,,,,100\n"
                "\"Ng, Ben\",501,41001,ben@uni.edu,S1,\n"
                "\"Vega, Cruz\",502,41002,cruz.vega@uni.edu,S1,\n"
                "\"Wu, Dana\",503,41003,dana.wu@uni.edu,S1,\n"
                "\"Ortiz, Eli\",504,41004,eortiz@uni.edu,S1,\n"
                "\"Park, Fay\",505,41005,fpark@uni.edu,S1,\n"
                "\"Stone, Mallory\",506,41006,mstone@uni.edu,S2,\n"
                "\"Quinn, Gus\",507,41007,gquinn@uni.edu,S2,\n"
                "\"Student, Test\",599,,,S2,\n"
                "\"Reyes, Hana\",508,41008,hreyes@uni.edu,S2,\n"
                "\"Kim, Ivy\",509,41009,ikim@uni.edu,S2,\n"
                "\"Lopez, Jay\",510,41010,jlopez@uni.edu,S1,\n"
                "\"Mori, Kai\",511,41011,kmori@uni.edu,S1,\n"
                "\"Nash, Lee\",512,41012,lnash@uni.edu,S1,\n"
                "\"Ruiz, Max\",513,41013,mruiz@uni.edu,S2,\n"
                "\"Sato, Nia\",514,41014,nsato@uni.edu,S2,\n")
ASSIGNMENT = "HW4P1 (888)"
TERM2_CANVAS = [
    ["Points Possible", "", "", "", "", "100"],
    ["Ng, Ben", "501", "41001", "ben@uni.edu", "S1", "64.0"],
    ["Vega, Cruz", "502", "41002", "cruz.vega@uni.edu", "S1", "95.0"],
    ["Wu, Dana", "503", "41003", "dana.wu@uni.edu", "S1", "70.0"],
    ["Ortiz, Eli", "504", "41004", "eortiz@uni.edu", "S1", ""],
    ["Park, Fay", "505", "41005", "fpark@uni.edu", "S1", ""],
    ["Stone, Mallory", "506", "41006", "mstone@uni.edu", "S2", "85.43"],
    ["Quinn, Gus", "507", "41007", "gquinn@uni.edu", "S2", "80.0"],
    ["Student, Test", "599", "", "", "S2", ""],
    ["Reyes, Hana", "508", "41008", "hreyes@uni.edu", "S2", ""],
    ["Kim, Ivy", "509", "41009", "ikim@uni.edu", "S2", "0"],
    ["Lopez, Jay", "510", "41010", "jlopez@uni.edu", "S1", "60.0"],
    ["Mori, Kai", "511", "41011", "kmori@uni.edu", "S1", "50.0"],
    ["Nash, Lee", "512", "41012", "lnash@uni.edu", "S1", "60.0"],
    ["Ruiz, Max", "513", "41013", "mruiz@uni.edu", "S2", "90.0"],
    ["Sato, Nia", "514", "41014", "nsato@uni.edu", "S2", "90.0"],
]


def replace_gradings(tmp_path: Path, monkeypatch) -> list[str]:
    """Each grading gives the points its handin names (rubric order); returns the handins
    graded, in order."""
    graded = []

    def fake_prepare(source, handin, parent=None):
        marker = tmp_path / f"grading-{len(graded)}"
        marker.write_text(handin.read_text())
        graded.append(handin.name if handin.name != "handin.tar" else handin.parent.name)
        return marker

    def fake_run(grading, grader_flags="", gradings=1, started=None, zygote=None):
        points = map(float, Path(grading).read_text().split(","))
        return regrade.grading_run.GradingRun(dict(zip(rubric.RUBRIC, points)), GradingReport(),
                                              "report\n", 1.0, False)

    monkeypatch.setattr(regrade.grading_run, "prepare", fake_prepare)
    monkeypatch.setattr(regrade.grading_run, "run", fake_run)
    return graded


def write_autolab(folder: Path) -> None:
    """Autolab's "Download all submissions" zip, unpacked in place beside itself."""
    folder.mkdir(parents=True)
    with zipfile.ZipFile(folder / "hw4p1_handins.zip", "w") as archive:
        for name, (stamp, points) in TERM1.items():
            archive.writestr(zipfile.ZipInfo(name, date_time=stamp), points)
            (folder / name).write_text(points)


def write_gradescope(folder: Path, fixed: bool) -> None:
    """Gradescope's export; ``fixed``: export B (Dana out of Cruz's group, Pat removed)."""
    lines = []
    for submission, (submitters, created, points) in TERM2.items():
        if fixed and submission == "submission_2012":
            continue
        if fixed and submission == "submission_2002":
            submitters = submitters[:1]
        (folder / submission).mkdir(parents=True)
        (folder / submission / "handin.tar").write_text(points)
        lines += [f"{submission}:", "  :submitters:"]
        for name, sid, email in submitters:
            shown = f"[{', '.join(name)}]" if isinstance(name, list) else f"\"{name}\""
            lines += [f"  - :name: {shown}", f"    :sid: '{sid}'", f"    :email: {email}"]
        lines += [f"  :created_at: {created}", "  :status: processed"]
    (folder / "submission_metadata.yml").write_text("\n".join(lines) + "\n", encoding="utf-8")


def read_import(path: Path) -> list[list[str]]:
    with open(path, newline="", encoding="utf-8") as file:
        return list(csv.reader(file))


def differences(table: list[list[str]], written: list[list[str]]) -> list[str]:
    """Every cell of ``written`` that differs from ``table``, named."""
    wrong = [f"row {index} ({want[0]}), column {column}: {got!r}, wanted {cell!r}"
             for index, (want, row) in enumerate(zip(table, written), start=1)
             for column, (cell, got) in enumerate(zip(want, row)) if got != cell]
    if len(table) != len(written) or any(len(a) != len(b) for a, b in zip(table, written)):
        wrong.append(f"{len(written)} rows of {[len(row) for row in written]} cells, wanted "
                     f"{len(table)} of {[len(row) for row in table]}")
    return wrong


@pytest.mark.class_fixture
def test_an_autolab_term_then_a_second_term_in_the_same_out(tmp_path, monkeypatch, capsys):
    graded = replace_gradings(tmp_path, monkeypatch)
    grader, out = fake_grader(tmp_path), tmp_path / "regrade"

    # Term 1: Autolab, times from the zip in the server's zone; the zip is no student's.
    write_autolab(tmp_path / "autolab")
    regrade.main([str(tmp_path / "autolab"), "--out", str(out), "--autograder", str(grader),
                  "--autolab-zone", ZONE])
    err = capsys.readouterr().err
    assert "skipped hw4p1_handins.zip: Autolab's download zip itself" in err, err
    rows = regrade.read_rows(out / "grades.csv")
    assert sorted(rows) == ["ava@uni.edu", "ben@uni.edu", "cruz@uni.edu"]
    assert (rows["ava@uni.edu"]["version"], rows["ava@uni.edu"]["submitted_at"]) == (
        "2", "2025-09-26T01:00:00-04:00")
    assert "submission time approximate: the download zip's time" in rows["ava@uni.edu"]["notes"]
    (tmp_path / "autolab/hw4p1_handins.zip").rename(tmp_path / "zip")
    with pytest.raises(SystemExit, match="--autolab-zone reads the submission times from"):
        regrade.main([str(tmp_path / "autolab"), "--out", str(tmp_path / "x"), "--autograder",
                      str(grader), "--autolab-zone", ZONE])
    (tmp_path / "zip").rename(tmp_path / "autolab/hw4p1_handins.zip")

    # An Autolab-only course: Autolab's import, without a roster.
    gradebook.main(["--grades", str(out / "grades.csv"), "--out", str(tmp_path / "autolab_gb")])
    wrong = differences(AUTOLAB_TABLE, read_import(tmp_path / "autolab_gb/autolab_import.csv"))
    assert not wrong, "\n".join(wrong)
    assert not (tmp_path / "autolab_gb/canvas_import.csv").exists()
    # The same term in a Canvas course: Ava's zip time is 1.02 h late.
    (tmp_path / "roster1.csv").write_text(TERM1_ROSTER)
    gradebook.main([str(tmp_path / "roster1.csv"), "--grades", str(out / "grades.csv"), "--out",
                    str(tmp_path / "gb1"), "--due", "2025-09-25T23:59", "--timezone", ZONE,
                    "--late-penalty-per-day", "10", "--exported", "2025-10-01T00:00:00-04:00"])
    written = [[row[0], row[5]] for row in read_import(tmp_path / "gb1/canvas_import.csv")[1:]]
    assert written == TERM1_CANVAS
    assert read_import(tmp_path / "gb1/autolab_import.csv") == AUTOLAB_TABLE  # beside it
    capsys.readouterr()

    # Term 2 into the same OUT: refused (2 of term 1's 3 students are not in it), then --fresh.
    write_gradescope(tmp_path / "export_a", fixed=False)
    with pytest.raises(SystemExit, match=r"2 of the 3 students graded in .* are not in this "
                                         r"download: it holds another download's grading"):
        regrade.main([str(tmp_path / "export_a"), "--out", str(out), "--autograder",
                      str(grader)])
    del graded[:]
    regrade.main([str(tmp_path / "export_a"), "--out", str(out), "--autograder", str(grader),
                  "--fresh"])
    assert len(graded) == len(TERM2)  # all graded again, term 1's handin of Ben's too
    assert [path.name for path in out.glob("replaced-*/grades.csv")] == ["grades.csv"]
    rows = regrade.read_rows(out / "grades.csv")
    ben = rows["ben@uni.edu"]
    assert (ben["sid"], ben["version"], ben["submitted_at"]) == (
        "41001", "", "2026-11-01T11:59:00-05:00")
    assert rows["mstone@uni.edu"]["name"] == "Mallory Stone"

    # Export B: the group fixed, Pat removed. Nothing is graded again, every row's metadata is
    # the new export's, and Pat's row leaves the table, listed.
    write_gradescope(tmp_path / "export_b", fixed=True)
    del graded[:]
    capsys.readouterr()
    regrade.main([str(tmp_path / "export_b"), "--out", str(out), "--autograder", str(grader)])
    err = capsys.readouterr().err
    assert graded == [] and "11 handins, 11 already graded by this grader" in err, err
    assert "1 rows left grades.csv, their handins are not in this download" in err
    assert err.count("pdoe@uni.edu") == 1
    rows = regrade.read_rows(out / "grades.csv")
    assert "pdoe@uni.edu" not in rows
    assert (rows["cruz.vega@uni.edu"]["name"], rows["cruz.vega@uni.edu"]["email"]) == (
        "Cruz Vega", "cruz.vega@uni.edu")

    (tmp_path / "roster2.csv").write_text(TERM2_ROSTER, encoding="utf-8")
    (tmp_path / "aliases.csv").write_text("address,student\nGus.Q@gmail.com,41007\n")
    (tmp_path / "extensions.csv").write_text("student,days\nmruiz@uni.edu,3\n")
    (tmp_path / "grace.csv").write_text("student,grace_days\n41014,2\n41001,0\n")
    gb = tmp_path / "gb2"
    gradebook.main([str(tmp_path / "roster2.csv"), "--grades", str(out / "grades.csv"),
                    "--out", str(gb), "--assignment", ASSIGNMENT, "--due", "2026-10-30T23:59",
                    "--timezone", ZONE, "--late-penalty-per-day", "10", "--extensions",
                    str(tmp_path / "extensions.csv"), "--days-grace", str(tmp_path / "grace.csv"),
                    "--opened", "2026-10-01T00:00", "--exported", "2026-11-10T12:00",
                    "--aliases", str(tmp_path / "aliases.csv"), "--inactive", "41008",
                    "--missing", "zero", "--several-submissions", "latest"])
    written = read_import(gb / "canvas_import.csv")
    assert written[0] == ["Student", "ID", "SIS User ID", "SIS Login ID", "Section", ASSIGNMENT]
    wrong = differences(TERM2_CANVAS, written[1:])
    assert not wrong, "cells that differ from TERM2_CANVAS:\n  " + "\n  ".join(wrong)

    report = {row["Student"]: row for row in spreadsheet.read_csv(gb / "gradebook.csv")[1]}
    assert report["Quinn, Gus"]["matched_by"] == "alias gus.q@gmail.com"
    assert report["Ruiz, Max"]["due"] == "2026-11-02T23:59:00-05:00"
    assert report["Sato, Nia"]["late_rule"] == (
        "61.02 h late (3 started days, 2 grace days used of 2, due 2026-10-30T23:59:00-04:00): "
        "1 x 10% of the total")
    assert report["Ng, Ben"]["late_rule"] == (
        "37.00 h late (2 started days, due 2026-10-30T23:59:00-04:00): 2 x 10% of the total")
    assert report["Lopez, Jay"]["matched_by"] == (
        "SID 41010 (the latest of 2 submissions, --several-submissions latest)")
    unmatched = (gb / "unmatched.txt").read_text(encoding="utf-8")
    for line in (
            "left out of --missing zero, imported blank (2):\n"
            "  Student, Test (SIS User ID -, SIS Login ID -): Canvas's Test Student\n"
            "  Reyes, Hana (SIS User ID 41008, SIS Login ID hreyes@uni.edu): an inactive "
            "enrollment (--inactive)\n",
            "submission times that cannot be right, left blank for the staff (2):\n"
            "  Ortiz, Eli (SIS User ID 41004, SIS Login ID eortiz@uni.edu): eortiz@uni.edu: "
            "submitted at 2099-01-01T00:00:00-05:00, after the export "
            "(2026-11-10T12:00:00-05:00): not a time a handin can have\n"
            "  Park, Fay (SIS User ID 41005, SIS Login ID fpark@uni.edu): fpark@uni.edu: "
            "submitted at 2026-09-20T10:00:00-04:00, before the assignment opened "
            "(2026-10-01T00:00:00-04:00, --opened)\n",
            "on the roster, with no handin (1):\n  Kim, Ivy (SIS User ID 41009",
            "reached by several submissions, the latest imported (--several-submissions latest)"
            " (1):\n  Lopez, Jay (SIS User ID 41010, SIS Login ID jlopez@uni.edu): "
            "jlopez@uni.edu_submission_2008 at 2026-10-29T10:00:00-04:00, "
            "jlopez@uni.edu_submission_2009 at 2026-10-30T09:00:00-04:00\n"):
        assert line in unmatched, (line, unmatched)
    # every list with an entry says what fixes it
    lists = re.split(r"\n(?=\S)", unmatched.strip())
    assert len(lists) == 9, lists
    for block in (block for block in lists if block.split("\n")[0].endswith("):")):
        count = int(re.search(r"\((\d+)\):$", block.split("\n")[0])[1])
        assert count == 0 or "\n  next: " in block, block
    summary = (gb / "summary.txt").read_text(encoding="utf-8")
    assert summary.startswith(
        "15 roster rows: 12 reached by one grade row, 11 with a score to import; 0 conflicts "
        "(imported for neither), 1 with no handin, 2 left out (Canvas's Test Student, "
        "--inactive), 0 crashed; 0 grade members reach no roster "
        "row\n"), summary
    assert "  2 submission times cannot be right" in summary and "Autolab" not in summary
