# hw4p1: instructor-only
"""The rubric runner: grouping, each test's share of its category, failures of every kind reported
with their case, an unfinished function reported once, nothing earned by a test that skips, xfails
or never ran, a crash never read as a pass, a message builder that survives any object on the
failing line, the device check."""
import importlib
import json
import os
import subprocess
import sys
import textwrap
import types
from pathlib import Path

import pytest

from hw4lib.grading_numbers import MYTORCH_RUBRIC
from tests.testing_framework import CATEGORY_ATTR, BONUS_WORK, THROUGH_LM_WORK, collect, rubric
from tools.handout_files import exclusion_reason

REPO = Path(__file__).resolve().parents[2]


def _module(rubric_points: dict, **tests) -> types.ModuleType:
    module = types.ModuleType("fake_tests")
    module.RUBRIC = rubric_points
    for name, fn in tests.items():
        fn.__module__ = module.__name__
        setattr(module, name, fn)
    return module


def _passes():
    assert 1 + 1 == 2


def run_standalone(tmp_path: Path, body: str, *args: str) -> subprocess.CompletedProcess:
    """``python -m fakepkg.test_fake ARGS`` for a test module made of ``body``, as a student runs
    a module of tests/ (the runner imported from this repository)."""
    package = tmp_path / "fakepkg"
    package.mkdir(exist_ok=True)
    (package / "__init__.py").write_text("")
    (package / "test_fake.py").write_text(
        "import pytest\nfrom tests.testing_framework import rubric, run_module\n\n"
        + textwrap.dedent(body)
        + "\n\nif __name__ == '__main__':\n    run_module(__name__)\n")
    # Without the -x that make mutation's test runs add through PYTEST_ADDOPTS (the module would
    # stop at its first failure, as make mutants wants): these tests read whole reports.
    environment = {**{key: value for key, value in os.environ.items() if key != "PYTEST_ADDOPTS"},
                   "PYTHONPATH": os.pathsep.join([str(tmp_path), str(REPO)])}
    return subprocess.run([sys.executable, "-m", "fakepkg.test_fake", *args], cwd=tmp_path,
                          env=environment, capture_output=True, text=True, timeout=120)


MIXED = """
    RUBRIC = {"Good": 5, "Bad": 7, "Free": 0, "Extra": 0, "Model": 0}
    BONUS = ("Extra",)
    THROUGH_LM = ("Model",)

    @rubric("Good")
    def test_a():
        assert 1 + 1 == 2

    @rubric("Bad")
    def test_c():
        assert 1 + 1 == 2

    @rubric("Good")
    def test_b(tmp_path, monkeypatch, capsys):
        monkeypatch.setenv("FAKE_VARIABLE", "1")
        print("captured")
        assert capsys.readouterr().out == "captured\\n"
        (tmp_path / "f.txt").write_text("x")

    @rubric("Bad")
    def test_d():
        got = [1, 2]
        assert got == [1, 3], "arithmetic is broken"

    @rubric("Free")
    def test_e():
        pytest.fail("pytest.fail is reported too")

    @rubric("Extra")
    def test_f():
        pass

    @rubric("Model")
    def test_g():
        pass

    @rubric("Model")
    def test_h():
        raise NotImplementedError("fakepkg.stub.build: return the thing")

    @rubric("Model")
    def test_i():
        raise NotImplementedError("fakepkg.stub.build: return the thing")

    @rubric("Model")
    def test_j():
        import numpy as np
        from tests.failure_messages import in_case

        x = np.zeros((2, 3), dtype=np.float32)
        with in_case("two rows", x=x, mask=None):
            x.reshape(4)
"""


def test_a_category_earns_its_points_only_when_all_its_tests_pass_with_any_fixture(tmp_path):
    run = run_standalone(tmp_path, MIXED, "--json")
    lines = run.stdout.splitlines()
    assert run.returncode == 1, f"a failure must exit with status 1 (make mutants relies on it):\n{run.stdout}{run.stderr}"
    assert json.loads(lines[-1]) == {"scores": {"Good": 5, "Bad": None, "Free": 0, "Extra": 0,
                                                "Model": 0}}, lines[-1]
    assert any("FAILED  no points here (1 of 2 tests pass)" in line for line in lines), run.stdout
    assert any("Total" in line and "not known here" in line and "Bad" in line
               for line in lines), run.stdout
    passed = [line.split()[1] for line in lines if line.startswith("  passed")]
    failed = [line.split()[1] for line in lines if line.startswith("  FAILED")]
    assert passed == ["test_a", "test_b", "test_c", "test_f", "test_g"] and \
        failed == ["test_d", "test_e", "test_h", "test_i", "test_j"], (
        f"tests run category by category, fixtures (tmp_path, monkeypatch, capsys) work:\n{run.stdout}")
    for expected in ("arithmetic is broken", "[1, 2]", "[1, 3]", "pytest.fail is reported too"):
        assert expected in run.stdout, f"the report must show {expected!r}:\n{run.stdout}"


def test_zero_point_categories_are_labelled_given_code_bonus_or_graded_through_the_model(tmp_path):
    run = run_standalone(tmp_path, MIXED)
    lines = run.stdout.splitlines()
    free = [line for line in lines if line.strip().startswith("Free")]
    extra = [line for line in lines if line.strip().startswith("Extra")]
    model = [line for line in lines if line.strip().startswith("Model")]
    assert free and all("given code" in line for line in free), free
    assert extra and all(BONUS_WORK in line and "given code" not in line for line in extra), extra
    assert model and all(THROUGH_LM_WORK in line and "given code" not in line
                         for line in model), model
    assert not any("given code" in line for line in lines if line.strip().startswith("Good")), lines


def test_an_exception_names_its_case_and_a_stub_is_reported_once(tmp_path):
    lines = run_standalone(tmp_path, MIXED).stdout.splitlines()
    block = [line.strip() for line in lines[lines.index("  FAILED  test_j"):][:7]]
    assert block[1].startswith("ValueError: cannot reshape") and \
        "in the case: two rows (x (2, 3) float32, mask None)" in block, block
    assert "a shape error: the arrays' shapes do not fit the operation" in block, block
    assert "raised at test_fake.py:" in "\n".join(block) and "with x (2, 3) float32" in block
    stub = lines[lines.index("  FAILED  test_h") + 1].strip()
    again = lines[lines.index("  FAILED  test_i") + 1].strip()
    assert stub == "NotImplementedError: fakepkg.stub.build: return the thing", stub
    assert again == "NotImplementedError: fakepkg.stub.build is not written yet (as above)", again


def test_device_check_rejects_a_tensor_built_without_device():
    import torch

    from tests.testing_framework import check_built_on_input_device

    check_built_on_input_device(lambda device: torch.zeros(3, device=device) + 1, "a sum")
    with pytest.raises(AssertionError, match="a tensor without device= of an input on the meta "
                       "device: the sum was built on cpu; build it on the input's device"):
        check_built_on_input_device(lambda device: torch.zeros(3), "a tensor without device=",
                                    "the sum")
    with pytest.raises(AssertionError, match="failed while torch's default device was cpu"):
        check_built_on_input_device(lambda device: torch.zeros(3, device=device) + torch.ones(3),
                                    "a mixed sum")
    # A dtype bug is named as one, though it raised in the device check.
    with pytest.raises(AssertionError, match="a dtype error: an in-place .* writes "
                       "float values into an integer tensor.*not a device problem"):
        check_built_on_input_device(
            lambda device: torch.zeros(3, dtype=torch.long, device=device).add_(
                torch.full((3,), 0.5, device=device)), "an accumulator")


DEVICE_LINES = """
import torch


def mask_of(x):
    ones = torch.ones(x.shape[1], x.shape[1], dtype=torch.bool)
    return torch.triu(ones, diagonal=1)


def mask_moved_back(x):
    return mask_of(x).to(x.device)


def table_added(x):
    return x + torch.zeros(x.shape[-1])


def mask_of_a_copy(x):
    return mask_of(x.cpu())


def lengths_moved_back(x):
    return x.cpu().sum(-1).to(x.device)


def in_float32(x):
    return x.float()
"""


def test_device_check_names_the_tensor_built_elsewhere_and_its_line(tmp_path, monkeypatch):
    """Code under test (outside tests/) that returns a tensor built on the CPU, or mixes one with
    the input, is named by the line that built it, with the CPU copy it came from; a tensor built
    on the CPU and moved to the input's device passes (slow, not wrong)."""
    import torch

    from tests.testing_framework import check_built_on_input_device

    (tmp_path / "device_lines.py").write_text(DEVICE_LINES)
    monkeypatch.syspath_prepend(str(tmp_path))
    import device_lines as code

    def check(function, dtype=None):
        check_built_on_input_device(lambda device: function(
            torch.zeros(2, 4, device=device, dtype=dtype)), "the code", "the mask", dtype=dtype)

    built_by_ones = (r"the tensor made by torch.ones\(...\) at device_lines.py:6 "
                     r"\(`ones = torch.ones\(x.shape\[1\], x.shape\[1\], dtype=torch.bool\)`\)")
    with pytest.raises(AssertionError, match=r"the code of an input on the meta device: the mask "
                       rf"was built on cpu \({built_by_ones}\); build it on the input's device"):
        check(code.mask_of)
    with pytest.raises(AssertionError, match=r"the tensor made by torch.zeros\(...\) at "
                       r"device_lines.py:15 .* was built on cpu and meets a tensor on meta in "
                       r".add\(\) at device_lines.py:15"):
        check(code.table_added)
    with pytest.raises(AssertionError, match=rf"was built on cpu \({built_by_ones}\) \(from a "
                       r"copy on the CPU made by .cpu\(\) at device_lines.py:19 "):
        check(code.mask_of_a_copy)
    check(code.mask_moved_back)
    check(code.lengths_moved_back)
    with pytest.raises(AssertionError, match=r"of a torch.float64 input: the mask came back in "
                       r"torch.float32; build every tensor with the input's dtype"):
        check(code.in_float32, torch.float64)
    check(code.lengths_moved_back, torch.float64)


STUDENT_LINES = """
def project(A, W):
    Z = A @ W.T
    return Z


def loss_of(values):
    return values.abs()
"""


def test_an_exception_is_named_by_its_own_kind_with_the_shapes_at_the_raising_line(tmp_path,
                                                                                  monkeypatch):
    import numpy as np
    import torch

    from tests.failure_messages import describe, exception_kind, in_case

    (tmp_path / "student_lines.py").write_text(STUDENT_LINES)
    monkeypatch.syspath_prepend(str(tmp_path))
    from student_lines import loss_of, project

    def described(action, **case) -> str:
        try:
            with in_case("the case", **case):
                action()
        except Exception as error:  # noqa: BLE001 - what the report prints of any exception
            return describe(error)
        raise AssertionError("the action did not raise")

    A, W = np.ones((4, 3)), np.ones((5, 2))
    text = described(lambda: project(A, W), expect="Z of shape (4, 5)", A=A)
    for words in ("a shape error: a matrix product A @ B needs A's last dimension to equal B's "
                  "second to last: here 3 and 2", "raised at student_lines.py:3: Z = A @ W.T",
                  "with A (4, 3) float64, W.T (2, 5) float64",
                  "expected: Z of shape (4, 5)", "in the case: the case (A (4, 3) float64)"):
        assert words in text, (words, text)
    # Raised at the test's own line, outside in_case: a loss left unreduced.
    text = described(lambda: loss_of(torch.ones(6)).item())
    assert "a single number was expected" in text and "6 elements: reduce it" in text, text
    scores, mask = np.zeros((2, 3, 4)), np.ones((3, 4), bool)
    text = described(lambda: scores.__getitem__(mask))
    assert "an index error: indexing with a boolean mask" in text, text
    kinds = {}
    for name, action in {
            "device": lambda: torch.zeros(2, device="meta") + torch.ones(2).add_(1),
            "dtype": lambda: torch.zeros(2, dtype=torch.long).add_(torch.full((2,), 0.5)),
            "numpy dtype": lambda: np.zeros(2, np.int64).__iadd__(np.full(2, 0.5)),
            "index": lambda: torch.ones(3)[torch.tensor([5])],
            "axis": lambda: np.ones(3).sum(axis=2),
            "broadcast": lambda: np.ones((2, 3)) + np.ones((4, 3)),
            "other": lambda: {}["missing"]}.items():
        try:
            action()
        except Exception as error:  # noqa: BLE001
            kinds[name] = exception_kind(error)
    assert kinds == {"device": "device", "dtype": "dtype", "numpy dtype": "dtype",
                     "index": "index", "axis": "shape", "broadcast": "shape", "other": ""}, kinds


SKIPPING = """
    import tests.testing_framework

    RUBRIC = {"Linear": 5, "Softmax": 4}

    def student_forward():
        pytest.skip("not today")

    @rubric("Linear")
    def test_a():
        student_forward()

    @rubric("Linear")
    def test_b():
        pytest.xfail("known to be wrong")

    @rubric("Softmax")
    @pytest.mark.xfail(reason="marked")
    def test_c():
        pass

    @rubric("Softmax")
    @pytest.mark.skip(reason="by a marker")
    def test_d():
        pass
"""


def test_a_test_that_skips_or_xfails_earns_nothing(tmp_path):
    """pytest.skip() or pytest.xfail() in the code under test, or a skip/xfail marker (an xfail
    that passes included), is a failed test: no points, exit status 1, the reason shown."""
    run = run_standalone(tmp_path, SKIPPING, "--json")
    lines = run.stdout.splitlines()
    assert run.returncode == 1, f"a skip must fail the module:\n{run.stdout}{run.stderr}"
    assert json.loads(lines[-1]) == {"scores": {"Linear": None, "Softmax": None}}, lines[-1]
    failed = [line.split()[1] for line in lines if line.startswith("  FAILED")]
    assert failed == ["test_a", "test_b", "test_c", "test_d"], run.stdout
    for reason in ("skipped (not today)", "xfail (known to be wrong)", "xfail (marked)",
                   "skipped (by a marker)"):
        assert reason in run.stdout, (reason, run.stdout)
    assert "PASSED" not in run.stdout, run.stdout


CRASHING = """
    import tests.testing_framework

    RUBRIC = {"Linear": 5, "Bonus": 0}
    BONUS = ("Bonus",)

    @rubric("Linear")
    def test_a():
        pass

    @rubric("Bonus")
    def test_b():
        def broken(report):
            raise TypeError("the report's own code broke")

        tests.testing_framework.skip_reason = broken  # the next skip crashes the report
        pytest.skip("crash the report")

    @rubric("Bonus")
    def test_c():
        pass
"""
STOPPING = """
    RUBRIC = {"Bonus": 0}
    BONUS = ("Bonus",)

    @rubric("Bonus")
    def test_a():
        pass

    @rubric("Bonus")
    def test_b():
        pytest.exit("the student's code ends the session")

    @rubric("Bonus")
    def test_c():
        pass
"""


@pytest.mark.parametrize("body", [CRASHING, STOPPING], ids=["internal-error", "pytest-exit"])
def test_a_run_that_stops_early_never_reads_as_a_pass(tmp_path, body):
    """An INTERNALERROR (the report's own code raising) or pytest.exit() in the code under test:
    the tests it left unrun earn nothing, every category fails, the module exits 1."""
    run = run_standalone(tmp_path, body, "--json")
    summary = run.stdout[run.stdout.index("Summary"):]
    assert run.returncode == 1, f"a crash must exit non-zero:\n{run.stdout}{run.stderr}"
    assert "PASSED" not in summary and "The run stopped before its end" in run.stdout, run.stdout
    assert "  FAILED  test_c\n      did not run" in run.stdout, run.stdout
    if body is CRASHING:
        assert "INTERNALERROR" in run.stderr and "the report's own code broke" in run.stderr
        assert json.loads(run.stdout.splitlines()[-1]) == {"scores": {"Linear": None,
                                                                      "Bonus": 0}}


class ReprRaises:
    def __repr__(self):
        raise RuntimeError("no repr")


class ShapeRaises:
    dtype = "float32"

    @property
    def shape(self):
        raise RuntimeError("no shape")


class ShapeIsAFunction:
    dtype = "float32"

    def shape(self):
        return (2, 3)


# (failing line, what its names hold (extra globals), operands the message must name)
ODD_LINES = [
    ("Z = np.exp(A) @ W", {}, ["A (2, 3) float64", "W (4, 5) float64"]),
    ("Z = np.ndarray.sum(A) @ np.float64", {}, ["A (2, 3) float64"]),
    ("Z = torch.ones(2) @ W", {}, ["W (4, 5) float64"]),
    ("Z = helper(A) @ helper", {"helper": lambda a: a}, ["A (2, 3) float64"]),
    ("Z = nothing @ A", {"nothing": None}, ["A (2, 3) float64"]),
    ("Z = Box.scale @ A", {"Box": type("Box", (), {"shape": (1,), "dtype": "x", "scale": 2})},
     ["A (2, 3) float64"]),
    ("Z = odd @ weird @ fn @ A", {"odd": ReprRaises(), "weird": ShapeRaises(),
                                   "fn": ShapeIsAFunction()}, ["A (2, 3) float64"]),
    ("Z = math.pi @ os.sep @ A.T.shape @ A.T", {}, ["A.T (3, 2) float64"]),
    ("Z = s.shape @ A", {"s": __import__("torch").Size([2, 3])}, ["A (2, 3) float64"]),
    ("Z = t @ W", {"t": __import__("torch").ones(3, 2)}, ["t (3, 2) torch.float32",
                                                        "W (4, 5) float64"]),
]


@pytest.mark.parametrize("line, names, expected", ODD_LINES, ids=[row[0] for row in ODD_LINES])
def test_the_message_builder_survives_any_object_on_the_failing_line(tmp_path, line, names,
                                                                     expected):
    """Modules (np, torch, math), functions, None, classes, objects whose repr or shape raises:
    the failing line is quoted with the arrays it names, nothing else, and the builder never
    raises (it once took numpy's module for an array and stopped pytest with INTERNALERROR)."""
    import math
    import os

    import numpy as np
    import torch

    from tests.failure_messages import describe, explain, in_case, operands, shown
    source = tmp_path / "student_line.py"
    source.write_text(f"import sys\n\n\ndef run(A, W):\n    try:\n        {line}\n"
                      f"    except Exception as error:\n        return sys._getframe(), error\n"
                      f"    return sys._getframe(), None\n")
    namespace = {"np": np, "torch": torch, "math": math, "os": os, **names}
    exec(compile(source.read_text(), str(source), "exec"), namespace)  # noqa: S102 - our text
    frame, error = namespace["run"](np.ones((2, 3)), np.ones((4, 5)))
    assert operands(frame, line) == expected, (line, operands(frame, line))
    if error is not None:
        for text in (describe(error), *explain(error)):
            assert isinstance(text, str)
    odd = {"odd": ReprRaises(), "weird": ShapeRaises(), "module": np, "none": None,
           "cls": ReprRaises, "fn": len, "function_shape": ShapeIsAFunction()}
    with pytest.raises(ValueError) as raised:
        with in_case("odd inputs", A=np.ones((2, 3)), **odd):
            np.ones((2, 3)).reshape(4)
    text = describe(raised.value)
    assert "in the case: odd inputs (A (2, 3) float64, odd <ReprRaises>, weird <" in text, text
    assert "module <module 'numpy'" in text and "none None" in text, text
    assert shown(np.ones(2)) == "(2,) float64" and shown(np).startswith("<module 'numpy'")


def test_one_category_can_be_run_and_a_broken_module_fails_cleanly(tmp_path):
    run = run_standalone(tmp_path, MIXED, "--category", "Good", "--json")
    assert run.returncode == 0 and json.loads(run.stdout.splitlines()[-1]) == {"scores": {"Good": 5}}, (
        f"--category Good runs only that category:\n{run.stdout}{run.stderr}")
    broken = run_standalone(tmp_path, 'RUBRIC = {"Good": 5}\n\n@rubric("Good")\ndef test_a():\n'
                                      '    from not_a_module import thing\n')
    assert broken.returncode == 1 and "ModuleNotFoundError" in broken.stdout, (
        f"an import error inside a test fails that test:\n{broken.stdout}{broken.stderr}")


def test_unknown_or_empty_category_is_an_error():
    with pytest.raises(ValueError, match="not in RUBRIC"):
        collect(_module({"Good": 5}, test_a=rubric("Typo")(_passes)))
    with pytest.raises(ValueError, match="without tests"):
        collect(_module({"Good": 5, "Empty": 3}, test_a=rubric("Good")(_passes)))


def test_only_the_categories_a_grader_scores_carry_points():
    """Points only where the autograder awards the same ones (test_mytorch's categories, from
    hw4lib/grading_numbers.py); every other module's categories are worth 0, and THROUGH_LM and
    BONUS name 0-point categories only."""
    for path in sorted((REPO / "tests").glob("test_*.py")):
        module = importlib.import_module(f"tests.{path.stem}")
        collect(module)  # refuses THROUGH_LM or BONUS naming a category with points
        scored = {c: p for c, p in module.RUBRIC.items() if p}
        assert scored == (MYTORCH_RUBRIC if path.stem == "test_mytorch" else {}), path.stem
    fake = _module({"Model": 3}, test_a=rubric("Model")(_passes))
    fake.THROUGH_LM = ("Model",)
    with pytest.raises(ValueError, match="THROUGH_LM in fake_tests names"):
        collect(fake)


def rubric_misplaced(module: types.ModuleType, shipped: bool) -> str | None:
    """Why ``module`` breaks "a rubric in the modules the handout ships, none elsewhere", or None:
    a shipped module needs a RUBRIC whose categories its tests fill (``collect``); an
    instructor-only one has no RUBRIC, no tagged test and no ``run_module`` entry point."""
    if shipped:
        try:
            collect(module)
        except ValueError as error:
            return str(error)
        return None
    tagged = [name for name, value in vars(module).items()
              if name.startswith("test_") and hasattr(value, CATEGORY_ATTR)]
    if hasattr(module, "RUBRIC") or tagged or "run_module" in vars(module):
        return (f"{module.__name__} is instructor-only but carries a rubric (RUBRIC, tagged "
                f"tests {tagged}, or run_module): remove it, pytest runs the module")
    return None


def test_only_the_modules_the_handout_ships_carry_a_rubric():
    """Students' modules (tests/test_*.py, shipped) carry the rubric ``python -m tests.test_x``
    reports; the instructor's (tests/<folder>/test_*.py, not shipped) are plain pytest modules."""
    found = {}
    for path in sorted((REPO / "tests").rglob("test_*.py")):
        relative = path.relative_to(REPO)
        shipped = exclusion_reason(relative.as_posix(), REPO) is None
        assert shipped == (len(relative.parts) == 2), f"{relative}: ships only at tests/'s top"
        module = importlib.import_module(".".join(relative.with_suffix("").parts))
        found[relative.as_posix()] = rubric_misplaced(module, shipped)
    assert len(found) > 40 and {"tests/test_mytorch.py", "tests/kit/test_handout.py"} <= set(found)
    assert not any(found.values()), [problem for problem in found.values() if problem]

    def untagged():  # a fresh function each time: rubric() tags the function object itself
        return None

    rubric_only = _module({"Model": 0}, test_a=rubric("Model")(untagged))
    assert rubric_misplaced(rubric_only, shipped=True) is None
    assert "instructor-only" in rubric_misplaced(rubric_only, shipped=False)
    plain = types.ModuleType("plain_tests")
    plain.test_a = lambda: None
    assert "without tests" in rubric_misplaced(_module({"Model": 0}, test_a=lambda: None), True)
    assert rubric_misplaced(_module({}, test_a=lambda: None), shipped=False) is not None
    assert rubric_misplaced(plain, shipped=False) is None


def test_mutant_runner_matches_whole_lines_at_any_indentation():
    from tools.mutants import CatalogueError, Mutant, locate, load_catalogue, mutate

    source = "def f(x):\n    if x:\n        y = x + 1\n        return y\n    z = x + 1\n    return z\n"
    block = Mutant("m", "f.py", "y = x + 1\nreturn y\n", "y = x - 1\nreturn y\n", "tests.test_x", "bug", "c")
    assert len(locate(source, block)) == 1, f"a two-line find must match once, got {locate(source, block)}"
    expected = source.replace("        y = x + 1", "        y = x - 1")
    assert mutate(source, block) == expected, f"expected\n{expected}\ngot\n{mutate(source, block)}"
    line = Mutant("m", "f.py", "x + 1\n", "x\n", "tests.test_x", "bug", "c")
    assert len(locate(source, line)) == 0, "a whole-line find must not match the end of a longer line"
    fragment = Mutant("m", "f.py", "x + 1", "x", "tests.test_x", "bug", "c")
    assert len(locate(source, fragment)) == 2, "a fragment (no final newline) matches anywhere"

    def catalogue(tmp, text):
        path = tmp / "c.yaml"
        path.write_text(text)
        return load_catalogue([path])

    import tempfile
    from pathlib import Path

    with tempfile.TemporaryDirectory() as tmp:
        entry = "- {id: a-b, file: f.py, find: x, replace: y, test: tests.test_x, bug: z}\n"
        assert [m.id for m in catalogue(Path(tmp), entry)] == ["a-b"], "a valid entry must load"
        for bad, why in ((entry * 2, "already used"), (entry.replace("a-b", "A_b"), "kebab-case"),
                         (entry.replace(", bug: z", ""), "must have the keys"),
                         (entry.replace("tests.test_x", "test_x"), "tests.test_x")):
            with pytest.raises(CatalogueError, match=why):
                catalogue(Path(tmp), bad)


def test_every_catalogue_entry_still_applies_to_the_tree():
    """A change that moves or rewrites a mutant's find text fails here, naming the entry, instead
    of only at the end of make mutants."""
    from tools.mutants import CATALOGUE_DIR, applicability_problem, load_catalogue

    mutants = load_catalogue(sorted(CATALOGUE_DIR.glob("*.yaml")))
    stale = {mutant.id: problem for mutant in mutants
             if (problem := applicability_problem(mutant)) is not None}
    assert mutants and not stale, (f"update these entries of tools/mutant_catalogue/ to the code "
                                   f"they mutate: {stale}")

