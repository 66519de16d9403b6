"""hw4lib.versions' own readers, called for real: odd version strings and the installed lookup."""
import sys
from importlib import metadata

from hw4lib import versions


def test_releases_of_odd_version_strings_compare_by_number():
    assert versions._release("2.13.0+cu130") == (2, 13, 0)
    assert versions._release("2.0.0rc1") == (2, 0, 0)
    assert versions._release("1.26.4") < versions.MINIMUM["numpy"] <= versions._release("2.0")
    assert versions._release("10.1") > versions._release("9.9.9"), "compared as numbers, not text"


def test_installed_reads_the_real_metadata():
    assert versions.installed("python") == ".".join(map(str, sys.version_info[:3]))
    assert versions.installed("numpy") == metadata.version("numpy")
    assert versions.installed("no-such-package-hw4p1") is None
