# hw4p1: instructor-only
"""Whose handin each file of a bulk download is (autograder/classroom/handins.py), part by part:
Gradescope's metadata (groups, missing or odd entries), a group's members paired up again, an
Autolab row's address, Autolab's download zip, the files and folders that are no handin, the
latest version by number, every version, and the one copy graded of several. Every expected value
is worked out by hand here.

    .venv/bin/python -m pytest -q -n 0 tests/classroom/test_handins_units.py
"""
import os
import zipfile
from datetime import datetime, timezone
from pathlib import Path

import pytest

from autograder.classroom.handins import (AUTOLAB_NAME, PLAIN_NAME, Handin, autolab_download,
                                          find_handins, gradescope_metadata, member_field,
                                          members_of, one_copy, safe_name, submitted_time)

GROUP = """submission_1:
  :submitters:
  - :name: Ann Lee
    :email: ann@x.edu
    :sid: '0042'
  - :name: [Bo, "Chen;Jr"]
    :email: bo@x.edu
  - :name: Cy
    :sid: 44
  :created_at: 2026-11-20 23:59:30 -05:00
"""


def folder_with(tmp_path: Path, name: str, content: bytes) -> Path:
    """``tmp_path/name/handin.tar`` holding ``content``."""
    (tmp_path / name).mkdir()
    (tmp_path / name / "handin.tar").write_bytes(content)
    return tmp_path / name / "handin.tar"


def test_a_row_s_name_is_safe_as_a_file_name():
    assert safe_name("Ann Lee/..x") == "Ann_Lee_..x"
    assert safe_name(".ann+1@x.edu.") == "ann+1@x.edu"
    assert safe_name("..") == "_"


def test_a_handin_built_alone_is_one_version_found():
    assert Handin("ann", Path("ann.tar")).versions_found == 1


def test_a_member_s_field_is_one_cell_of_a_joined_list():
    assert member_field(None) == ""
    assert member_field(44) == "44"
    assert member_field("  Ann \n Lee;Jr ") == "Ann Lee,Jr"
    assert member_field(["Bo", None, "Chen"]) == "Bo Chen"


def test_gradescope_s_group_keeps_every_member_in_every_field(tmp_path):
    (tmp_path / "submission_metadata.yml").write_text(GROUP)
    assert gradescope_metadata(tmp_path) == {"submission_1": {
        "name": "Ann Lee; Bo Chen,Jr; Cy", "email": "ann@x.edu; bo@x.edu; ",
        "sid": "0042; ; 44", "submitted_at": "2026-11-20T23:59:30-05:00"}}
    assert members_of(gradescope_metadata(tmp_path)["submission_1"]) == [
        {"name": "Ann Lee", "email": "ann@x.edu", "sid": "0042"},
        {"name": "Bo Chen,Jr", "email": "bo@x.edu", "sid": ""},
        {"name": "Cy", "email": "", "sid": "44"}]


def test_odd_metadata_entries_are_skipped_and_no_metadata_is_none(tmp_path, capsys):
    assert gradescope_metadata(tmp_path) == {}
    metadata = tmp_path / "submission_metadata.yml"
    metadata.write_text("submission_0: [not, a, mapping]\nsubmission_1:\n  :submitters:\n"
                        "submission_2:\n  :created_at: '2026-11-20T10:00:00+00:00'\n")
    assert gradescope_metadata(tmp_path) == {
        "submission_1": {"name": "", "email": "", "sid": "", "submitted_at": ""},
        "submission_2": {"name": "", "email": "", "sid": "",
                         "submitted_at": "2026-11-20T10:00:00+00:00"}}
    metadata.write_text("- a list\n")
    assert gradescope_metadata(tmp_path) == {}
    metadata.write_text("submission_1: [unclosed\n")
    assert gradescope_metadata(tmp_path) == {}
    assert "could not be read" in capsys.readouterr().err


def test_members_are_paired_up_field_by_field_and_an_autolab_row_s_address_is_its_email():
    assert members_of({"name": "A; B", "email": "a@x.edu", "sid": "1; 2; 3"}) == [
        {"name": "A", "email": "a@x.edu", "sid": "1"}, {"name": "B", "email": "", "sid": "2"},
        {"name": "", "email": "", "sid": "3"}]
    assert members_of({"student": "ann@x.edu", "name": "", "email": None}) == [
        {"name": "", "email": "ann@x.edu", "sid": ""}]
    assert members_of({"student": "ann@x.edu", "email": "Ann@X.edu"})[0]["email"] == "Ann@X.edu"
    assert members_of({"student": "ann", "email": ""})[0]["email"] == ""
    assert members_of({"student": "ann@x.edu", "email": "; b@x.edu", "sid": " 1 ; 2"}) == [
        {"name": "", "email": "", "sid": "1"}, {"name": "", "email": "b@x.edu", "sid": "2"}]


@pytest.mark.parametrize("name, student, version, suffix", [
    ("ann@x.edu_3_handin.tar.gz", "ann@x.edu", "3", ".tar.gz"),
    ("a_b_10_handin (1).tgz", "a_b", "10", ".tgz"),
    ("ann@x.edu_3_handin(2).zip", "ann@x.edu", "3", ".zip")])
def test_an_autolab_name_is_student_version_file(name, student, version, suffix):
    match = AUTOLAB_NAME.fullmatch(name)
    assert (match["student"], match["version"], match["suffix"]) == (student, version, suffix)


def test_a_plain_name_is_the_student_before_a_browser_s_copy_number():
    assert PLAIN_NAME.fullmatch("bo (1).tar.gz").group("student", "suffix") == ("bo", ".tar.gz")
    assert PLAIN_NAME.fullmatch("bo.tar").group("student", "suffix") == ("bo", ".tar")
    assert PLAIN_NAME.fullmatch("bo.tar.bz2") is None


def zip_of(path: Path, names: list[str]) -> Path:
    with zipfile.ZipFile(path, "w") as archive:
        for name in names:
            archive.writestr(zipfile.ZipInfo(name, date_time=(2026, 11, 20, 12, 0, 0)), name)
    return path


def test_autolab_s_download_is_a_zip_of_autolab_named_files_only(tmp_path):
    download = zip_of(tmp_path / "hw.zip", ["hw/", "hw/ann@x.edu_1_handin.tar"])
    assert list(autolab_download(download)) == ["ann@x.edu_1_handin.tar"]
    assert autolab_download(zip_of(tmp_path / "one.zip", ["ann@x.edu_1_handin.tar",
                                                          "notes.txt"])) is None
    assert autolab_download(zip_of(tmp_path / "empty.zip", [])) is None
    assert autolab_download(zip_of(tmp_path / "x.tar", ["ann@x.edu_1_handin.tar"])) is None
    (tmp_path / "bad.zip").write_bytes(b"not a zip")
    assert autolab_download(tmp_path / "bad.zip") is None


def test_files_and_folders_that_are_no_handin_are_skipped_and_later_ones_found(tmp_path, capsys):
    (tmp_path / "a_notes.txt").write_text("not a handin")
    (tmp_path / "a_empty").mkdir()
    (tmp_path / "a_other").mkdir()
    (tmp_path / "a_other/readme.md").write_text("no archive")
    folder_with(tmp_path, "bo", b"bo")
    (tmp_path / "cy_2_handin.tar").write_bytes(b"cy")
    (tmp_path / "di.tar").write_bytes(b"di")
    found = find_handins(tmp_path)
    assert {key: (h.path.name, h.version, h.note) for key, h in found.items()} == {
        "bo": ("handin.tar", "", ""), "cy": ("cy_2_handin.tar", "2", ""),
        "di": ("di.tar", "", "")}
    assert capsys.readouterr().err == ("skipped a_other/: no handin.tar and not exactly one tar "
                                       "or zip in it\n")
    with pytest.raises(SystemExit, match="is not a folder: give the folder of a bulk download"):
        find_handins(tmp_path / "bo/handin.tar")


def test_only_a_folder_the_metadata_does_not_list_is_noted(tmp_path):
    (tmp_path / "submission_metadata.yml").write_text(GROUP)
    folder_with(tmp_path, "submission_1", b"group")
    folder_with(tmp_path, "submission_2", b"other")
    found = find_handins(tmp_path)
    assert {key: h.note for key, h in found.items()} == {
        "ann@x.edu": "", "submission_2": "submission_metadata.yml does not list submission_2/"}
    assert found["ann@x.edu"].sid == "0042; ; 44"


def test_the_download_zip_is_no_student_and_its_times_need_the_zone(tmp_path, capsys):
    (tmp_path / "ann@x.edu_1_handin.tar").write_bytes(b"ann")
    with pytest.raises(SystemExit, match="--autolab-zone reads the submission times from "
                                         "Autolab's download zip"):
        find_handins(tmp_path, autolab_zone=timezone.utc)
    zip_of(tmp_path / "hw4p1.zip", ["ann@x.edu_1_handin.tar"])
    [(key, plain)] = find_handins(tmp_path).items()
    assert (key, plain.submitted_at, plain.note) == ("ann@x.edu", "", "")
    assert "skipped hw4p1.zip: Autolab's download zip itself" in capsys.readouterr().err
    timed = find_handins(tmp_path, autolab_zone=timezone.utc)["ann@x.edu"]
    assert timed.submitted_at == "2026-11-20T12:00:00+00:00"
    assert timed.note == "submission time approximate: the download zip's time of this file (UTC)"


def test_the_latest_version_is_the_highest_number_and_every_one_is_kept_with_all(tmp_path):
    for version in (9, 10, 0):
        (tmp_path / f"ann@x.edu_{version}_handin.tar").write_bytes(b"v%d" % version)
    latest = find_handins(tmp_path)
    assert [(key, h.version, h.versions_found) for key, h in latest.items()] == [
        ("ann@x.edu", "10", 3)]
    every = find_handins(tmp_path, "all")
    assert {key: h.version for key, h in every.items()} == {
        "ann@x.edu#0": "0", "ann@x.edu#9": "9", "ann@x.edu#10": "10"}
    with pytest.raises(SystemExit, match=r"--versions must be one of latest, all, got 'new'"):
        find_handins(tmp_path, "new")


def test_a_handin_without_a_version_comes_before_version_0(tmp_path):
    """Ann's Gradescope folder (no version) sorts after her Autolab file by name and has the
    later time; version 0 is still the latest."""
    (tmp_path / "submission_metadata.yml").write_text(
        "submission_9:\n  :submitters:\n  - :email: ann@x.edu\n"
        "  :created_at: 2026-11-20 10:00:00 -05:00\n")
    folder_with(tmp_path, "submission_9", b"gradescope")
    (tmp_path / "ann@x.edu_0_handin.tar").write_bytes(b"autolab")
    [(key, handin)] = find_handins(tmp_path).items()
    assert (key, handin.version, handin.versions_found) == ("ann@x.edu", "0", 2)
    assert sorted(find_handins(tmp_path, "all")) == ["ann@x.edu", "ann@x.edu#0"]


def test_a_student_leading_two_groups_gets_a_row_for_each_named_by_its_folder(tmp_path):
    lead = "  - :email: ann@x.edu\n"
    entry = "submission_{}:\n  :submitters:\n" + lead + "{}"
    (tmp_path / "submission_metadata.yml").write_text(
        entry.format(1, "") + entry.format(2, "  - :email: bo@x.edu\n")
        + "submission_3:\n  :submitters:\n  - :email: cy@x.edu\n")
    for number in (1, 2, 3):
        folder_with(tmp_path, f"submission_{number}", b"%d" % number)
    found = find_handins(tmp_path)
    assert {key: (h.path.parent.name, h.note) for key, h in found.items()} == {
        "ann@x.edu_submission_1": ("submission_1", "ann@x.edu also handed in another submission "
                                   "with other members: this row is named by its folder too"),
        "ann@x.edu_submission_2": ("submission_2", "ann@x.edu also handed in another submission "
                                   "with other members: this row is named by its folder too"),
        "cy@x.edu": ("submission_3", "")}


def test_a_group_member_dropped_or_added_is_another_submission(tmp_path):
    """The same three members in another order are one group (its later submission, led by Bo
    now); two of them are not (Ann leads it)."""
    members = ["  - :email: ann@x.edu\n", "  - :email: bo@x.edu\n", "  - :sid: '44'\n"]
    entry = "submission_{}:\n  :submitters:\n{}  :created_at: 2026-11-20 1{}:00:00 -05:00\n"
    (tmp_path / "submission_metadata.yml").write_text(
        entry.format(1, "".join(members), 0) + entry.format(2, "".join(members[::-1]), 1)
        + entry.format(3, "".join(members[:2]), 2))
    for number in (1, 2, 3):
        folder_with(tmp_path, f"submission_{number}", b"%d" % number)
    found = find_handins(tmp_path)
    assert {key: h.path.parent.name for key, h in found.items()} == {
        "bo@x.edu": "submission_2", "ann@x.edu": "submission_3"}


def copy(path: Path, content: bytes, submitted_at: str = "", mtime: int = 0) -> Handin:
    path.parent.mkdir(exist_ok=True)
    path.write_bytes(content)
    os.utime(path, (mtime, mtime))
    return Handin("ann", path, submitted_at=submitted_at)


def test_one_copy_of_several_is_the_latest_submitted_else_the_newest_file(tmp_path):
    early, late = "2026-11-20T10:00:00-05:00", "2026-11-20T09:30:00-06:00"  # late: 10:30 EST
    first = copy(tmp_path / "s1/handin.tar", b"a", late, mtime=1000)
    second = copy(tmp_path / "s2/handin.tar", b"b", early, mtime=2000)
    assert one_copy([first, second]) is first and one_copy([second, first]) is first
    assert first.note == ("2 different submissions (s2/, s1/); graded the latest submitted, s1/")
    older = copy(tmp_path / "ann_1_handin.tar", b"a", mtime=1000)
    newer = copy(tmp_path / "ann_1_handin (1).tar", b"b", early, mtime=2000)
    assert one_copy([newer, older]) is newer
    assert newer.note == ("2 different files of this version (ann_1_handin (1).tar, "
                          "ann_1_handin.tar); graded the newest, ann_1_handin (1).tar")
    same = [copy(tmp_path / f"same{n}.tar", b"x", mtime=n) for n in (1, 3, 2)]
    assert one_copy(same) is same[1] and not same[1].note
    alone = copy(tmp_path / "alone.tar", b"x")
    assert one_copy([alone]) is alone and not alone.note


def test_a_submission_time_needs_its_offset():
    utc = datetime(2026, 11, 20, 15, tzinfo=timezone.utc).timestamp()
    assert submitted_time("2026-11-20T10:00:00-05:00") == utc
    assert submitted_time("2026-11-20T10:00:00") is None
    assert submitted_time("") is None
