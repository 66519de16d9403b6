# hw4p1: instructor-only
"""The slow-marker check (tools/slow_tests.py, ``make slow-tests``): durations read from pytest's
JUnit report, and an unmarked test over the threshold fails the check while a marked one is
skipped, on a two-test folder of its own with known sleeps."""
import textwrap

from tools import slow_tests


def test_durations_are_read_per_test_slowest_first(tmp_path):
    report = tmp_path / "junit.xml"
    report.write_text(textwrap.dedent("""\
        <?xml version="1.0" encoding="utf-8"?>
        <testsuites><testsuite name="pytest">
          <testcase classname="tests.test_fast" name="test_a" time="0.25"/>
          <testcase classname="tests.kit.test_slow" name="test_b" time="7.5"/>
          <testcase classname="tests.kit.test_slow.TestGroup" name="test_c" time="5.0"/>
        </testsuite></testsuites>"""))
    timed = slow_tests.durations(report)
    assert timed == [("tests/kit/test_slow.py::test_b", 7.5),
                     ("tests/kit/test_slow.py::TestGroup::test_c", 5.0),
                     ("tests/test_fast.py::test_a", 0.25)]
    assert slow_tests.too_slow(timed, 5.0) == [("tests/kit/test_slow.py::test_b", 7.5)]


def test_an_unmarked_slow_test_fails_the_check_and_a_marked_one_does_not(tmp_path, capsys):
    folder = tmp_path / "suite"
    folder.mkdir()
    (folder / "test_sleeps.py").write_text(textwrap.dedent("""\
        import time

        import pytest


        def test_quick():
            pass


        def test_unmarked_sleep():
            time.sleep(0.6)


        @pytest.mark.slow
        def test_marked_sleep():
            time.sleep(0.6)
        """))
    (folder / "pytest.ini").write_text("[pytest]\nmarkers =\n    slow: slow\n")
    status = slow_tests.main(["--markers", "not slow", "--threshold", "0.4", str(folder)])
    out = capsys.readouterr().out
    assert status == 1, out
    flagged = out.split("not marked slow", 1)[1]
    assert "test_unmarked_sleep" in flagged and "test_quick" not in flagged, out
    assert "test_marked_sleep" not in out, out
