"""Tests the Autolab grader runs on a student's mytorch (instructor-only: not in the handout)."""
