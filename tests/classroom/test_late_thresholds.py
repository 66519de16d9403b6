# hw4p1: instructor-only
"""The late policy's edges, pinned by value (autograder/classroom/late_policy.py): the grace period
is inclusive, a day is 24 started hours, a handin more than ``max_days`` started days late scores
0; a case on each side of each edge, a second apart.

    .venv/bin/python -m pytest -q tests/classroom/test_late_thresholds.py
"""
from datetime import datetime, timedelta

import pytest

from autograder.classroom.late_policy import Lateness, late_deduction, lateness

DUE = datetime.fromisoformat("2026-11-21T00:00:00-05:00")
POLICY = Lateness(due=DUE, grace_minutes=15, per_day=10, max_days=3)
SECOND = timedelta(seconds=1)


@pytest.mark.parametrize("late, deducted", [
    (timedelta(0), 0.0), (SECOND, 0.0), (timedelta(minutes=15) - SECOND, 0.0),
    (timedelta(minutes=15), 0.0), (timedelta(minutes=15) + SECOND, 8.0),
    (timedelta(hours=24), 8.0), (timedelta(hours=24) + SECOND, 16.0),
    (timedelta(hours=48) + SECOND, 24.0), (timedelta(hours=72), 24.0),
    (timedelta(hours=72) + SECOND, 80.0), (-timedelta(hours=5), 0.0)])
def test_each_edge_of_the_late_policy(late, deducted):
    """80 points, 10% a started day, 15 minutes' grace, at most 3 days."""
    submitted = (DUE + late).isoformat()
    hours, deduction, rule = lateness(submitted, DUE, False, 80.0, POLICY)
    assert hours == pytest.approx(max(late.total_seconds(), 0) / 3600)
    assert deduction == deducted, rule


def test_the_deduction_rounds_to_cents_and_never_passes_the_total():
    assert late_deduction(33.33, 1.0, 10, 3) == 3.33
    assert late_deduction(80.0, 24 * 11, 10, 30) == 80.0
    assert late_deduction(80.0, 24.0, 0, 3) == 0.0
    assert late_deduction(80.0, None, 10, 3) == late_deduction(80.0, 0.0, 10, 3) == 0.0
