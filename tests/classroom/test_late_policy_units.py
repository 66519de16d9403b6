# hw4p1: instructor-only
"""The late policy's functions one by one (autograder/classroom/late_policy.py), each edge pinned
by value with a case on each side: a submission time exactly at the export or the opening, a
section's own numbers read from its file, grace days of 0, each rule's words and numbers (the
started days, the grace days used, the days charged), a policy given only its deadline. Every
expected value is worked out by hand here.

    .venv/bin/python -m pytest -q -n 0 tests/classroom/test_late_policy_units.py
"""
from dataclasses import FrozenInstanceError
from datetime import datetime, timedelta

import pytest

from autograder.classroom.gradebook import Join, summary_text
from autograder.classroom.late_policy import (Lateness, Section, impossible_time, late_deduction,
                                             lateness, read_grace_days, read_sections)
from tests.classroom.csv_text import written

DUE = datetime.fromisoformat("2026-11-21T00:00:00-05:00")
SECOND = timedelta(seconds=1)
ROSTER = [{"Student": "Lee, Ann", "SIS User ID": "0042", "SIS Login ID": "ann@x.edu",
           "Section": "A"},
          {"Student": "Chen, Bo", "SIS User ID": "0043", "SIS Login ID": "bo@x.edu",
           "Section": "B"},
          {"Student": "Ono, Ed", "SIS User ID": "0046", "SIS Login ID": "ed@x.edu",
           "Section": ""}]


def at(delta: timedelta) -> str:
    """The ISO time ``delta`` after DUE."""
    return (DUE + delta).isoformat()


def test_a_section_is_frozen_and_says_section_before_a_bare_name():
    section = Section("B", DUE)
    assert (section.name, section.due, section.per_day) == ("B", DUE, None)
    assert section.label == "section B"
    assert Section("Section B", DUE).label == "Section B"
    with pytest.raises(FrozenInstanceError):
        section.due = DUE + SECOND  # shared by every student of the section


def test_a_section_replaces_only_the_numbers_it_gives():
    course = Lateness(due=DUE, grace_minutes=15, per_day=10, max_days=3,
                      sections={1: Section("B", DUE + timedelta(days=1), per_day=20)},
                      extensions={2: DUE + timedelta(hours=5)})
    deadline, whose, own = course.of_student(1)
    assert (deadline, whose) == (DUE + timedelta(days=1), "section B deadline")
    assert (own.per_day, own.grace_minutes, own.max_days) == (20, 15, 3)
    assert course.of_student(2) == (DUE + timedelta(hours=5), "extension", course)
    assert course.of_student(0) == (DUE, "", course)


@pytest.mark.parametrize("submitted, why", [
    (at(timedelta(hours=1)), ""), (at(timedelta(hours=1) + SECOND), "after the export"),
    (at(-timedelta(hours=1)), ""), (at(-timedelta(hours=1) - SECOND), "before the assignment"),
    ("", ""), ("yesterday", "")])
def test_an_impossible_time_is_one_second_past_the_export_or_before_the_opening(submitted, why):
    policy = Lateness(due=DUE, opened=DUE - timedelta(hours=1), exported=DUE + timedelta(hours=1))
    found = impossible_time(submitted, policy)
    assert (why in found) if why else found == ""
    if why == "after the export":
        assert found == (f"submitted at {submitted}, after the export "
                         f"({(DUE + timedelta(hours=1)).isoformat()}): not a time a handin "
                         f"can have")


def test_without_an_export_time_now_is_the_latest_and_there_is_no_opening():
    assert impossible_time("2999-01-01T00:00:00+00:00", Lateness()).endswith(
        ", now): not a time a handin can have")
    assert impossible_time("2000-01-01T00:00:00+00:00", Lateness()) == ""


def test_a_sections_file_gives_each_section_its_own_deadline_and_numbers(tmp_path):
    path = written(tmp_path, "section,due,late_penalty_per_day,late_max_days\n"
                             "a,2026-11-22T00:00:00-05:00,20,\n"
                             "B,2026-11-23T00:00:00-05:00,,2\n")
    found = read_sections(path, ROSTER, None)
    assert sorted(found) == [0, 1]
    assert found[0] == Section("a", DUE + timedelta(days=1), None, 20.0, None)
    assert found[1] == Section("B", DUE + timedelta(days=2), None, None, 2.0)
    just_the_two = written(tmp_path, "section,due\nA,2026-11-22T00:00:00-05:00\n")
    assert read_sections(just_the_two, ROSTER, None)[0].due == DUE + timedelta(days=1)


@pytest.mark.parametrize("text, refusal", [
    ("section\nA\n", "the columns section and due (and, where a section's policy differs, "
                     "grace_minutes, late_penalty_per_day, late_max_days); it has section"),
    ("", "; it has none"),
    ("section,due\nA,2026-11-22T00:00:00-05:00\na,2026-11-23T00:00:00-05:00\n",
     "file.csv line 3: section 'a' is given twice: keep one line"),
    ("section,due\nA,2026-11-22T00:00:00-05:00\nC,2026-11-23T00:00:00-05:00\n",
     "file.csv line 3: no roster row is in section 'C' (the roster's Section column has A, B)"),
    ("section,due,grace_minutes\nA,2026-11-22T00:00:00-05:00,ten\n",
     "file.csv line 2: grace_minutes 'ten' is not a number")])
def test_a_sections_file_that_cannot_be_right_is_refused_naming_the_line(tmp_path, text, refusal):
    with pytest.raises(SystemExit, match=refusal.replace("(", r"\(").replace(")", r"\)")):
        read_sections(written(tmp_path, text), ROSTER, None)


def test_a_section_of_a_roster_without_sections_names_nothing(tmp_path):
    roster = [{**row, "Section": ""} for row in ROSTER]
    with pytest.raises(SystemExit, match=r"the roster's Section column has nothing\)"):
        read_sections(written(tmp_path, "section,due\nA,2026-11-22T00:00:00-05:00\n"), roster,
                      None)


def test_grace_days_of_zero_are_kept_and_below_zero_refused(tmp_path):
    path = written(tmp_path, "student,grace_days\n0042,0\nbo@x.edu,2\n")
    assert read_grace_days(path, ROSTER) == {0: 0, 1: 2}
    with pytest.raises(SystemExit, match="line 3: grace_days '-1' is not a whole number"):
        read_grace_days(written(tmp_path, "student,grace_days\n0042,1\n0043,-1\n"), ROSTER)


def test_whose_deadline_is_said_after_it():
    submitted = at(timedelta(hours=2))
    policy = Lateness(due=DUE)
    for extended, said in [(True, " (extension)"), ("section B deadline",
                                                    " (section B deadline)"),
                           (False, ""), ("", "")]:
        assert lateness(submitted, DUE, extended, 80.0, policy)[2].endswith(
            f"due {DUE.isoformat()}{said}): no --late-penalty-per-day: no deduction")


def test_a_time_unknown_is_neither_late_nor_deducted():
    policy = Lateness(due=DUE, per_day=10)
    assert lateness("", DUE, False, 80.0, policy) == (
        None, 0.0, "time unknown: the download has no submission time; imported without a "
                   "late deduction")
    assert lateness("soon", DUE, False, 80.0, policy)[:2] == (None, 0.0)
    assert lateness(at(SECOND), None, False, 80.0, policy) == (
        None, 0.0, "not checked (no --due)")


@pytest.mark.parametrize("late, grace_days, per_day, deducted, rule", [
    (timedelta(hours=24), 0, 10, 8.0, "(1 started day, due {due}): 1 x 10% of the total"),
    (timedelta(hours=24) + SECOND, 0, 10, 16.0,
     "(2 started days, due {due}): 2 x 10% of the total"),
    (timedelta(hours=48) + SECOND, 1, 10, 16.0,
     "(3 started days, 1 grace day used of 1, due {due}): 2 x 10% of the total"),
    (timedelta(hours=30), 2, 10, 0.0,
     "(2 started days, 2 grace days used of 2, due {due}): covered by grace days: no deduction"),
    (timedelta(hours=30), 5, 10, 0.0,
     "(2 started days, 2 grace days used of 5, due {due}): covered by grace days: no deduction"),
    (timedelta(hours=24), 0, 1, 0.8, "(1 started day, due {due}): 1 x 1% of the total"),
    (timedelta(hours=24), 0, 0, 0.0,
     "(1 started day, due {due}): no --late-penalty-per-day: no deduction"),
    (timedelta(hours=96) + SECOND, 4, 10, 80.0,
     "(5 started days, 4 grace days used of 4, due {due}): more than 4 days late: scores 0")])
def test_each_rule_says_its_started_days_grace_days_and_charge(late, grace_days, per_day,
                                                               deducted, rule):
    """80 points, ``per_day`` percent a started day, at most 4 days, no grace period."""
    policy = Lateness(due=DUE, per_day=per_day, max_days=4)
    hours, deduction, said = lateness(at(late), DUE, False, 80.0, policy, grace_days)
    assert hours == late.total_seconds() / 3600
    assert deduction == deducted
    assert said == f"{hours:.2f} h late " + rule.format(due=DUE.isoformat())


def test_a_policy_given_only_its_deadline_has_no_grace_period_and_no_penalty(tmp_path):
    policy = Lateness(due=DUE)
    hours, deduction, rule = lateness(at(30 * SECOND), DUE, False, 80.0, policy)
    assert (hours * 3600, deduction) == (pytest.approx(30), 0.0)
    assert rule.endswith(": no --late-penalty-per-day: no deduction")
    assert lateness(at(timedelta(days=40)), DUE, False, 80.0, policy)[1] == 0.0
    summary = summary_text(Join([], [], [], [], [], []), policy, tmp_path)
    assert f"lateness from {DUE.isoformat()} (0 extensions, 0-minute grace)" in summary


def test_a_negative_penalty_per_day_deducts_nothing():
    assert late_deduction(80.0, 24.0, -0.5, 3) == 0.0
    assert late_deduction(80.0, 24.0, 0.0, 3) == 0.0
