"""Tests of the version check the notebook's set-up cell runs (hw4lib/versions.py).

    python -m tests.test_versions     (or: .venv/bin/python -m pytest -q tests/test_versions.py)

The rule is tested on given versions (``versions.installed`` replaced), so these tests pass in any
environment, a hosted notebook's included; only the ``.venv`` that ``make install`` builds is
required to be at the pins.
"""
import sys
from pathlib import Path

import pytest

from hw4lib import versions
from tests.testing_framework import rubric, run_module

RUBRIC = {"Set-up": 0}
REQUIREMENTS = Path(__file__).resolve().parents[1] / "requirements.txt"


def _environment(monkeypatch, **foreign: str) -> None:
    """Make ``versions.installed`` report the pins of requirements.txt (Python 3.11.9), except the
    ``foreign`` versions given."""
    at_pins = {**versions.pinned(REQUIREMENTS), "python": "3.11.9", **foreign}
    monkeypatch.setattr(versions, "installed", lambda name: at_pins.get(name))


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
def test_an_environment_at_the_pins_passes_without_notes(monkeypatch):
    _environment(monkeypatch, torch="2.13.0+cpu")  # a local build tag is the same release
    assert versions.check_versions(REQUIREMENTS) == []


@rubric("Set-up")
def test_this_environment_passes():
    """Any environment meets the minimum versions (else check_versions raises); the one `make
    install` builds has exactly the pins, so nothing to note there (a hosted notebook's own torch
    or numpy gets notes)."""
    notes = versions.check_versions(REQUIREMENTS)
    if versions.built_by_make_install(REQUIREMENTS):
        assert notes == [], notes


@rubric("Set-up")
def test_only_the_venv_make_install_stamped_counts_as_built_by_it(tmp_path, monkeypatch):
    (tmp_path / "requirements.txt").write_text("torch==2.13.0\n")
    (tmp_path / ".venv").mkdir()
    monkeypatch.setattr(sys, "prefix", str(tmp_path / ".venv"))
    assert not versions.built_by_make_install(tmp_path / "requirements.txt")
    (tmp_path / ".venv" / ".installed-stamp").touch()
    assert versions.built_by_make_install(tmp_path / "requirements.txt")
    monkeypatch.setattr(sys, "prefix", str(tmp_path))
    assert not versions.built_by_make_install(tmp_path / "requirements.txt")


@rubric("Set-up")
def test_too_old_a_package_stops_with_the_fix(monkeypatch):
    for package, old in (("numpy", "1.26.4"), ("torch", "1.13.1"), ("python", "3.9.18")):
        with monkeypatch.context() as patch:
            _environment(patch, **{package: old})
            with pytest.raises(RuntimeError,
                               match=f"{package} {old}: this homework needs {package} >= "):
                versions.check_versions(REQUIREMENTS)


@rubric("Set-up")
def test_a_missing_package_stops_with_the_fix(monkeypatch):
    _environment(monkeypatch)
    monkeypatch.setattr(versions, "installed", lambda name, real=versions.installed:
                        None if name == "numpy" else real(name))
    with pytest.raises(RuntimeError, match="numpy is not installed: .* pip install"):
        versions.check_versions(REQUIREMENTS)


@rubric("Set-up")
def test_a_hosted_notebooks_own_torch_is_noted(monkeypatch):
    _environment(monkeypatch, torch="2.5.1+cu121")
    notes = versions.check_versions(REQUIREMENTS)
    assert len(notes) == 1 and notes[0].startswith("torch 2.5.1+cu121 here, "), notes


@rubric("Set-up")
def test_each_package_off_its_pin_gets_one_note(monkeypatch):
    """The GPU notebook of issue 48: its own torch and numpy, Python 3.12, no matplotlib."""
    _environment(monkeypatch, torch="2.11.0+cu130", numpy="2.5.2", python="3.12.3",
                 matplotlib=None)
    notes = versions.check_versions(REQUIREMENTS)
    assert [note.split(" here,")[0] for note in notes] == ["torch 2.11.0+cu130", "numpy 2.5.2"], notes


if __name__ == "__main__":
    run_module(__name__)
