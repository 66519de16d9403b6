"""hw4lib.versions' own readers, called for real: odd version strings, the installed lookup, and
each minimum version pinned by value (at it passes, just under it stops)."""
import platform
from importlib import metadata
from pathlib import Path

import pytest

from hw4lib import versions

REQUIREMENTS = Path(__file__).resolve().parents[2] / "requirements.txt"


def test_releases_of_odd_version_strings_compare_by_number():
    assert versions._release("2.13.0+cu130") == (2, 13, 0)
    assert versions._release("2.0.0rc1") == (2, 0, 0)
    assert versions._release("2.13.0.post1") == (2, 13, 0), "a fourth part is no other release"
    assert versions._release("1.26.4") < versions.MINIMUM["numpy"] <= versions._release("2.0")
    assert versions._release("10.1") > versions._release("9.9.9"), "compared as numbers, not text"


def test_installed_reads_the_real_metadata():
    assert versions.installed("python") == platform.python_version()
    assert versions.installed("numpy") == metadata.version("numpy")
    assert versions.installed("no-such-package-hw4p1") is None


def _installed_at(monkeypatch, **given: str) -> None:
    """``versions.installed`` answers the pins of requirements.txt (Python 3.11.9), or ``given``."""
    at_pins = {**versions.pinned(REQUIREMENTS), "python": "3.11.9", **given}
    monkeypatch.setattr(versions, "installed", at_pins.get)


@pytest.mark.parametrize("package, oldest, under", [
    ("python", "3.10.0", "3.9.18"), ("numpy", "2.0.0", "1.26.4"), ("numpy", "2.0", "1.99"),
    ("torch", "2.0.0", "1.13.1"), ("torch", "2.0", "1.99.9")])
def test_each_minimum_is_met_exactly_at_it_and_missed_just_under_it(monkeypatch, package, oldest,
                                                                      under):
    _installed_at(monkeypatch, **{package: oldest})
    notes = versions.check_versions(REQUIREMENTS)
    assert all(not note.startswith(package) or oldest in note for note in notes), notes
    _installed_at(monkeypatch, **{package: under})
    fix = {"python": "use a Python 3.10 or newer kernel", "numpy": 'pip install -q "numpy>=2"',
           "torch": 'pip install -q "torch>=2"'}[package]
    with pytest.raises(RuntimeError) as stopped:
        versions.check_versions(REQUIREMENTS)
    wanted = {"python": "3.10", "numpy": "2.0", "torch": "2.0"}[package]
    assert str(stopped.value) == (f"{package} {under}: this homework needs {package} >= {wanted}. "
                                  f"Fix: {fix}, then restart the kernel")


def test_a_release_with_a_fourth_part_is_at_its_pin(monkeypatch):
    pins = versions.pinned(REQUIREMENTS)
    _installed_at(monkeypatch, torch=pins["torch"] + ".post1")
    assert versions.check_versions(REQUIREMENTS) == []
    _installed_at(monkeypatch, numpy="9.0.0")
    assert versions.check_versions(REQUIREMENTS) == [
        f"numpy 9.0.0 here, {pins['numpy']} in requirements.txt (what the tests and the grader "
        "run): fine for the homework"]
