"""The fast suite's slowest tests, measured: ``make slow-tests``.

Runs the tests ``make test-fast`` selects (the Makefile passes its marker expression) once, with
pytest's JUnit XML report, and prints the slowest of them (setup, call and teardown together,
pytest's ``junit_duration_report = total``). Exit status 1 when one of them takes longer than
``--threshold`` seconds: it belongs under ``@pytest.mark.slow`` (or should be made faster), since
``make test-fast`` skips only what is marked. Timings depend on the machine and its load: quote
them in docs/results.md with the CPU and the command.

    python -m tools.slow_tests --markers EXPR [--threshold 10] [--top 15] [--workers N] [PATH...]
"""
from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ElementTree
from pathlib import Path

DEFAULT_THRESHOLD_S = 10.0  # a load of several processes a core doubles a 5 s test: docs/results.md


def durations(junit_xml: Path) -> list[tuple[str, float]]:
    """[(pytest node id, seconds)] of every test case in a JUnit XML report, slowest first.

    A case's ``classname`` is its module's dotted path plus any class (``tests.kit.test_x`` or
    ``tests.test_x.TestY``); the node id is rebuilt as ``tests/kit/test_x.py::name``."""
    found = []
    for case in ElementTree.parse(junit_xml).getroot().iter("testcase"):
        parts = case.get("classname", "").split(".")
        module = next((i for i in range(len(parts), 0, -1) if parts[i - 1].startswith("test_")),
                      len(parts))
        node = "/".join(parts[:module]) + ".py" + "".join(f"::{p}" for p in parts[module:])
        found.append((f"{node}::{case.get('name')}", float(case.get("time", 0.0))))
    return sorted(found, key=lambda item: -item[1])


def too_slow(timed: list[tuple[str, float]], threshold_s: float) -> list[tuple[str, float]]:
    """The tests of ``timed`` over ``threshold_s`` seconds."""
    return [(node, seconds) for node, seconds in timed if seconds > threshold_s]


def measure(markers: str, paths: list[str], workers: int, junit_xml: Path) -> int:
    """Run pytest on ``paths`` under ``-m markers``, writing ``junit_xml``; pytest's exit code."""
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-m", markers,
               f"--junitxml={junit_xml}", "-o", "junit_duration_report=total", *paths]
    command += ["-n", str(workers)] if workers > 1 else ["-p", "no:xdist"]
    return subprocess.run(command, stdout=subprocess.DEVNULL).returncode


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("paths", nargs="*", default=["tests"])
    parser.add_argument("--markers", required=True, help="the fast suite's -m expression")
    parser.add_argument("--threshold", type=float, default=DEFAULT_THRESHOLD_S,
                        help="seconds over which an unmarked test fails the check")
    parser.add_argument("--top", type=int, default=15, help="how many of the slowest to list")
    parser.add_argument("--workers", type=int, default=1, help="pytest-xdist workers (1: none)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as folder:
        report = Path(folder) / "junit.xml"
        status = measure(args.markers, args.paths, args.workers, report)
        if not report.is_file():
            print(f"pytest wrote no report (exit status {status}): run it to see why",
                  file=sys.stderr)
            return 2
        timed = durations(report)
    print(f"the {min(args.top, len(timed))} slowest of {len(timed)} tests under "
          f"-m {args.markers!r} (seconds, setup + call + teardown):")
    for node, seconds in timed[:args.top]:
        print(f"{seconds:8.2f}  {node}")
    slow = too_slow(timed, args.threshold)
    if slow:
        print(f"\n{len(slow)} test(s) over {args.threshold:g} s are not marked slow: add "
              f"@pytest.mark.slow (make test still runs them) or make them faster:")
        for node, seconds in slow:
            print(f"{seconds:8.2f}  {node}")
    if status not in (0, 5):  # 5: nothing collected
        print(f"pytest exited with status {status}: some tests failed", file=sys.stderr)
    return 1 if slow or status not in (0, 5) else 0


if __name__ == "__main__":
    sys.exit(main())
