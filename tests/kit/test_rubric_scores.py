# hw4p1: instructor-only
"""The local report's scoring, called directly (``tests/testing_framework.py``'s
``RubricReport``): a category with points earns all of them when every one of its tests ran and
passed, and None (no local points) when one failed or did not run; a 0-point category scores 0
either way; the summary's numbers (earned/worth, tests passing of all, the total) and words; a run
that pytest ended early fails every category. The pytest hooks fed pytest's own report kinds: a
skip, an xfail or a passing xfail earns nothing; a failure is worded from its exception, a stub
once; each category announced once with its count; ``collect``'s refusals; the --json line
written where the report goes. The device check: one CPU copy named, a CPU scalar allowed, a meta
tensor read as zeros.

    .venv/bin/python -m pytest -q tests/kit/test_rubric_scores.py
"""
import io

import pytest

from tests.testing_framework import (BONUS_WORK, GIVEN_CODE, THROUGH_LM_WORK, RubricReport,
                                     label)


def case_a():
    """A stand-in test function (only its name is read)."""


def case_b():
    """A stand-in test function."""


def case_c():
    """A stand-in test function."""


def case_d():
    """A stand-in test function."""


def report_of(rubric: dict, own_work: dict | None = None) -> tuple[RubricReport, io.StringIO]:
    """A report over Linear (2.5 points: case_a, case_b), Data (0 points: case_c) and
    Optimizer (0 points: case_d)."""
    grouped = {"Linear": [case_a, case_b], "Data": [case_c], "Optimizer": [case_d]}
    out = io.StringIO()
    return RubricReport(grouped, rubric, own_work or {}, out), out


POINTS = {"Linear": 2.5, "Data": 0, "Optimizer": 0}


def finished(report: RubricReport, failing: dict[str, str], exit_code=pytest.ExitCode.OK,
             ran=("case_a", "case_b", "case_c", "case_d")) -> dict:
    """Record ``ran`` as run, ``failing`` ({test: category}) as failed, end the run."""
    for name in ran:
        report.ran.add(name)
    for name, category in failing.items():
        report.failures[name] = "differs"
        report.failed.add(category)
    report.stopped(exit_code)
    report.summary()
    return report.scores


def test_every_test_passing_earns_every_point():
    report, out = report_of(POINTS, {"Data": "THROUGH_LM"})
    assert finished(report, {}) == {"Linear": 2.5, "Data": 0, "Optimizer": 0}
    lines = out.getvalue().splitlines()
    assert f"  {'Linear':<40s} PASSED  2.5/2.5" in lines
    assert f"  {'Data':<40s} PASSED  {THROUGH_LM_WORK}" in lines
    assert f"  {'Optimizer':<40s} PASSED  {GIVEN_CODE}" in lines
    assert f"  {'Total':<40s}         2.5/2.5" in lines


@pytest.mark.parametrize("failing", ["case_a", "case_b"])
def test_one_failing_test_leaves_its_category_without_local_points(failing):
    report, out = report_of(POINTS)
    assert finished(report, {failing: "Linear"}) == {"Linear": None, "Data": 0, "Optimizer": 0}
    text = out.getvalue()
    assert f"  {'Linear':<40s} FAILED  no points here (1 of 2 tests pass)" in text
    assert "not known here: Autolab's hidden tests give Linear partial points of their own" in text
    assert "2.5/2.5" not in text


def test_a_failing_zero_point_category_scores_zero_and_says_so():
    report, out = report_of(POINTS, {"Optimizer": "BONUS"})
    assert finished(report, {"case_c": "Data", "case_d": "Optimizer"}) == {
        "Linear": 2.5, "Data": 0, "Optimizer": 0}
    text = out.getvalue()
    assert (f"  {'Data':<40s} FAILED  given code that should pass unchanged: see the failure "
            f"above") in text
    assert f"  {'Optimizer':<40s} FAILED  {BONUS_WORK}" in text
    assert f"  {'Total':<40s}         2.5/2.5" in text


def test_a_module_without_points_prints_no_total():
    report, out = report_of({"Linear": 0, "Data": 0, "Optimizer": 0})
    assert finished(report, {}) == {"Linear": 0, "Data": 0, "Optimizer": 0}
    assert "Total" not in out.getvalue()


def test_a_test_that_did_not_run_fails_every_category():
    report, out = report_of(POINTS)
    scores = finished(report, {}, ran=("case_a", "case_c", "case_d"))
    assert scores == {"Linear": None, "Data": 0, "Optimizer": 0}
    assert report.failed == {"Linear", "Data", "Optimizer"}
    assert report.failures == {"case_b": "did not run: pytest ended the run early (exit code 0: "
                                         "OK; its own message is above)"}
    assert f"  {'Linear':<40s} FAILED  no points here (1 of 2 tests pass)" in out.getvalue()


@pytest.mark.parametrize("exit_code, stops", [(pytest.ExitCode.OK, False),
                                              (pytest.ExitCode.TESTS_FAILED, False),
                                              (pytest.ExitCode.INTERRUPTED, True),
                                              (pytest.ExitCode.INTERNAL_ERROR, True)])
def test_a_run_pytest_ended_abnormally_fails_every_category(exit_code, stops):
    report, out = report_of(POINTS)
    scores = finished(report, {}, exit_code=exit_code)
    assert scores["Linear"] == (None if stops else 2.5)
    assert ("The run stopped before its end" in out.getvalue()) is stops


def test_the_tests_passing_count_only_those_that_ran_and_passed():
    report, _ = report_of(POINTS)
    assert report.passed("Linear") == (0, 2)
    report.ran.update({"case_a", "case_b"})
    assert report.passed("Linear") == (2, 2)
    report.failures["case_b"] = "differs"
    assert report.passed("Linear") == (1, 2)


@pytest.mark.parametrize("points, kind, words", [
    (2.5, None, "2.5 points when all its tests pass"),
    (0, None, f"0 points here, {GIVEN_CODE}"),
    (0, "BONUS", f"0 points here, {BONUS_WORK}"),
    (0, "THROUGH_LM", f"0 points here, {THROUGH_LM_WORK}"),
])
def test_a_category_is_announced_with_its_worth(points, kind, words):
    assert label(points, kind) == words


# ---------------------------------------------------------------- the report's pytest hooks

def outcome_of(report_object):
    """What pytest's hookwrapper receives: ``get_result()`` gives the test's report."""
    return type("Outcome", (), {"get_result": lambda self: report_object})()


def made_report(report: RubricReport, name: str, *, skipped=False, failed=False, wasxfail=None,
                longrepr=None, error=None) -> None:
    """Run the report's makereport hook on a test ``name`` pytest reported as given."""
    test_report = type("TestReport", (), {})()
    test_report.skipped, test_report.failed, test_report.longrepr = skipped, failed, longrepr
    test_report.longreprtext = str(longrepr)
    if wasxfail is not None:
        test_report.wasxfail = wasxfail
    excinfo = type("ExcInfo", (), {"value": error})() if error is not None else None
    item, call = type("Item", (), {"name": name})(), type("Call", (), {"excinfo": excinfo})()
    hook = report.pytest_runtest_makereport(item, call)
    next(hook)
    with pytest.raises(StopIteration):
        hook.send(outcome_of(test_report))


def logged(report: RubricReport, name: str) -> None:
    report.pytest_runtest_logstart(f"tests/test_x.py::{name}", None)
    report.pytest_runtest_logfinish(f"tests/test_x.py::{name}", None)


@pytest.mark.parametrize("how", [
    {"skipped": True, "longrepr": ("f.py", 3, "Skipped: not today")},
    {"skipped": True, "wasxfail": "known to be wrong"},
    {"skipped": False, "wasxfail": ""},  # an xfail that passed
])
def test_a_test_that_skips_or_xfails_earns_nothing(how):
    report, out = report_of(POINTS)
    made_report(report, "case_a", **how)
    for name in ("case_a", "case_b", "case_c", "case_d"):
        logged(report, name)
    assert finished(report, {}) == {"Linear": None, "Data": 0, "Optimizer": 0}
    assert "a test that does not run to its end earns no points" in report.failures["case_a"]
    assert f"  {'Linear':<40s} FAILED  no points here (1 of 2 tests pass)" in out.getvalue()


def test_a_failure_is_worded_from_its_exception_and_a_stub_once():
    report, out = report_of(POINTS)
    for name in ("case_a", "case_b"):
        try:
            raise NotImplementedError("mytorch.linear.forward: TODO write it")
        except NotImplementedError as error:
            made_report(report, name, failed=True, longrepr="pytest's text", error=error)
        logged(report, name)
    made_report(report, "case_c", failed=True, longrepr="pytest's own words")
    logged(report, "case_c")
    text = out.getvalue()
    assert "mytorch.linear.forward: TODO write it" in report.failures["case_a"]
    assert "NotImplementedError: mytorch.linear.forward is not written yet (as above)" in text
    assert report.failures["case_c"] == "pytest's own words"
    assert report.failed == {"Linear", "Data"}


def test_each_category_is_announced_once_with_its_count_and_its_verdict():
    report, out = report_of(POINTS)
    made_report(report, "case_b", failed=True, longrepr="differs", error=AssertionError("no"))
    for name in ("case_a", "case_b", "case_c"):
        logged(report, name)
    lines = out.getvalue().splitlines()
    assert lines[0] == "-" * 72
    assert lines[1] == "Linear (2.5 points when all its tests pass, 2 tests)"
    assert lines.count("Linear (2.5 points when all its tests pass, 2 tests)") == 1
    assert "Data (0 points here, given code: no action needed, 1 tests)" in lines
    assert "  => Linear: FAILED" in lines and "  => Data: PASSED" in lines
    times = [float(line.rsplit("(", 1)[1].rstrip("s)")) for line in lines
             if line.startswith("  passed")]
    assert len(times) == 2 and all(0 <= seconds < 60 for seconds in times), lines


@pytest.mark.parametrize("report_fields, reason", [
    ({"wasxfail": "why"}, "why"), ({"wasxfail": ""}, "no reason given"),
    ({"longrepr": ("f.py", 3, "Skipped: later")}, "later"),
    ({"longrepr": ("f.py", 3)}, "('f.py', 3)"), ({"longrepr": "Skipped: "}, "no reason given"),
])
def test_a_skip_is_reported_with_its_reason(report_fields, reason):
    from tests.testing_framework import skip_reason

    assert skip_reason(type("TestReport", (), report_fields)()) == reason


def module_of(**names) -> object:
    """A module named ``m`` holding ``names``; functions of this file become its own."""
    import types

    module = types.ModuleType("m")
    for name, value in names.items():
        if getattr(value, "__module__", None) == __name__:
            value.__module__ = "m"
        setattr(module, name, value)
    return module


def tagged(category: str, line: int = 0):
    """A test function tagged ``category``."""
    from tests.testing_framework import rubric

    def test():
        """A stand-in."""

    test.__code__ = test.__code__.replace(co_firstlineno=100 + line)
    return rubric(category)(test)


def test_collect_groups_tagged_tests_in_line_order_and_refuses_typos():
    from tests.testing_framework import collect

    first, second = tagged("A", 1), tagged("A", 2)
    module = module_of(RUBRIC={"A": 1, "B": 0}, test_z=first, test_y=second, test_b=tagged("B"),
                       helper=tagged("A"), test_untagged=lambda: None)
    assert collect(module) == {"A": [first, second], "B": [module.test_b]}
    borrowed = tagged("B")
    borrowed.__module__ = "elsewhere"
    with pytest.raises(ValueError, match=r"RUBRIC categories without tests in m: \['B'\]"):
        collect(module_of(RUBRIC={"A": 1, "B": 0}, test_a=tagged("A"), test_b=borrowed))
    with pytest.raises(ValueError, match="tagged 'C', which is not in RUBRIC"):
        collect(module_of(RUBRIC={"A": 1}, test_a=tagged("A"), test_c=tagged("C")))
    for rubric_points in (None, {}, [("A", 1)]):
        with pytest.raises(ValueError, match="must define RUBRIC"):
            collect(module_of(RUBRIC=rubric_points, test_a=tagged("A")))
    for kind in ("BONUS", "THROUGH_LM"):
        with pytest.raises(ValueError, match=f"{kind} in m names \\['A'\\]: each must be"):
            collect(module_of(RUBRIC={"A": 1, "B": 0}, test_a=tagged("A"), test_b=tagged("B"),
                              **{kind: ("A",)}))
        collect(module_of(RUBRIC={"A": 1, "B": 0}, test_a=tagged("A"), test_b=tagged("B"),
                          **{kind: ("B",)}))


def test_a_device_failure_names_only_the_first_copy_made_on_the_cpu():
    """Two ``.cpu()`` copies of a meta input: the message names the first, once."""
    import torch

    from tests.testing_framework import check_built_on_input_device

    def build(device):
        x = torch.ones(2, 3, device=device)
        return x.cpu() + x.cpu()

    with pytest.raises(AssertionError) as failure:
        check_built_on_input_device(build, "the sum")
    assert str(failure.value).count("from a copy on the CPU made by") == 1, failure.value


def test_the_json_scores_line_goes_where_the_report_goes(tmp_path, capsys):
    """run_module(out=...) prints the rubric report and its --json line there, not to stdout."""
    import importlib.util
    import sys

    from tests.testing_framework import run_module

    path = tmp_path / "json_target_module.py"
    path.write_text("from tests.testing_framework import rubric\nRUBRIC = {'Linear': 5}\n\n"
                    "@rubric('Linear')\ndef test_a():\n    assert True\n")
    spec = importlib.util.spec_from_file_location("json_target_module", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules["json_target_module"] = module
    try:
        spec.loader.exec_module(module)
        out = io.StringIO()
        assert run_module("json_target_module", ["--json"], out=out) == {"Linear": 5}
    finally:
        del sys.modules["json_target_module"]
    assert out.getvalue().splitlines()[-1] == '{"scores": {"Linear": 5}}'
    assert '"scores"' not in capsys.readouterr().out


def test_reading_a_meta_tensor_reads_zeros():
    import torch

    from tests.testing_framework import meta_reads_zeros

    meta = torch.ones(2, device="meta")
    with meta_reads_zeros():
        assert (bool(meta[0]), int(meta[0]), meta[0].item(), meta.tolist()) == (False, 0, 0, [0, 0])
    with pytest.raises(RuntimeError):
        bool(meta[0])


def test_a_cpu_scalar_may_meet_the_input(tmp_path):
    """torch lets a 0-dim CPU tensor meet a tensor on any device: code outside the tests (a
    student's file) that scales its input by ``torch.tensor(2.0)`` passes the device check."""
    import importlib.util

    import torch

    from tests.testing_framework import check_built_on_input_device

    path = tmp_path / "scaling_code.py"
    path.write_text("import torch\n\n\ndef scale(x):\n    return x * torch.tensor(2.0)\n")
    spec = importlib.util.spec_from_file_location("scaling_code", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    check_built_on_input_device(lambda device: module.scale(torch.ones(2, 3, device=device)),
                                "scale")


def test_each_tensor_of_a_tuple_result_is_checked():
    import torch

    from tests.testing_framework import check_built_on_input_device

    check_built_on_input_device(lambda device: (torch.ones(2, device=device),
                                                torch.zeros(3, device=device)), "a pair")
    with pytest.raises(AssertionError, match="a pair of an input on the meta device: the result "
                                             "was built on cpu"):
        check_built_on_input_device(lambda device: (torch.ones(2, device=device),
                                                    torch.zeros(3)), "a pair")
