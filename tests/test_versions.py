"""Tests of the version check the notebook's set-up cell runs (hw4lib/versions.py).

    python -m tests.test_versions     (or: .venv/bin/python -m pytest -q tests/test_versions.py)
"""
from pathlib import Path

import pytest

from hw4lib import versions
from tests.testing_framework import rubric, run_module

RUBRIC = {"Set-up": 0}
REQUIREMENTS = Path(__file__).resolve().parents[1] / "requirements.txt"


@rubric("Set-up")
def test_the_pins_are_read_from_requirements(tmp_path):
    text = "# comment\ntorch==2.13.0\nnumpy == 2.4.6  # why\npytest>=9\nmatplotlib==3.11.2\n"
    (tmp_path / "requirements.txt").write_text(text)
    assert versions.pinned(tmp_path / "requirements.txt") == {
        "torch": "2.13.0", "numpy": "2.4.6", "matplotlib": "3.11.2"}
    assert versions._release("2.13.0+cpu") == (2, 13, 0) and versions._release("2.4") == (2, 4)


@rubric("Set-up")
def test_pins_of_an_included_file_are_read(tmp_path):
    (tmp_path / "grader.txt").write_text("torch==2.13.0\nnumpy==2.4.6\n")
    (tmp_path / "requirements.txt").write_text("-r grader.txt\nmatplotlib==3.11.2\n")
    assert versions.pinned(tmp_path / "requirements.txt") == {
        "torch": "2.13.0", "numpy": "2.4.6", "matplotlib": "3.11.2"}


@rubric("Set-up")
def test_this_environment_passes_without_notes():
    """`make install` builds exactly the pins: nothing to note."""
    assert versions.check_versions(REQUIREMENTS) == []


@rubric("Set-up")
@pytest.mark.parametrize("package, old", [("numpy", "1.26.4"), ("torch", "1.13.1"),
                                          ("python", "3.9.18")])
def test_too_old_a_package_stops_with_the_fix(monkeypatch, package, old):
    real = versions.installed
    monkeypatch.setattr(versions, "installed", lambda name: old if name == package else real(name))
    with pytest.raises(RuntimeError, match=f"{package} {old}: this homework needs {package} >= "):
        versions.check_versions(REQUIREMENTS)


@rubric("Set-up")
def test_a_hosted_notebooks_own_torch_is_noted(monkeypatch):
    real = versions.installed
    monkeypatch.setattr(versions, "installed",
                        lambda name: "2.5.1+cu121" if name == "torch" else real(name))
    notes = versions.check_versions(REQUIREMENTS)
    assert len(notes) == 1 and notes[0].startswith("torch 2.5.1+cu121 here, "), notes


if __name__ == "__main__":
    run_module(__name__)
