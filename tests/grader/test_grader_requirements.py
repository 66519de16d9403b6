# hw4p1: instructor-only
"""The grading image installs requirements-grader.txt alone: every package that any module
grading can import (followed from the judge's, the model child's and the worker's modules through
autograde.tar, imports inside functions included) is pinned there, and requirements.txt, which
builds the students' and the staff's environment, includes it.

    .venv/bin/python -m pytest -q tests/grader/test_grader_requirements.py
"""
from __future__ import annotations

import ast
import sys
import tarfile
from importlib import metadata
from pathlib import Path

from hw4lib import versions
from tests.grader.autograder_helpers import built_autograder
from tools import make_autograde

REPO_ROOT = Path(__file__).resolve().parents[2]
# What grading starts: the judge (Autolab's Makefile and Gradescope's run_autograder call it), the
# model child and the worker with the hidden tests.
ENTRY_MODULES = ("autograder.judging.grade", "autograder.judging.scoring.grade_model",
                 "autograder.sandboxed.worker",
                 "autograder.judging.scoring.hidden_tests.mytorch_hidden")


# Imports inside functions that grading never calls, with what they serve: the model child imports
# hw4lib.trainers for evaluate_language_model, whose package also holds the training loop.
LAZY_OUTSIDE_GRADING = {
    ("hw4lib.trainers.base_trainer", "matplotlib"): "a training run's curves and attention maps",
    ("hw4lib.trainers.base_trainer", "wandb"): "a training run's optional wandb logging",
    ("hw4lib.utils.create_lr_scheduler", "matplotlib"): "plot_lr_schedule, for the notebook",
}
# Packages that are not installed: the student's mytorch, which the handin brings.
HANDED_IN = {"mytorch"}


def imported_names(source: str, module: str, is_package: bool) -> dict[str, bool]:
    """{module name: imported at module level (not only inside a function)} for every import of
    ``source``, at any depth of its code (relative ones resolved)."""
    package = module if is_package else module.rpartition(".")[0]
    names: dict[str, bool] = {}

    def visit(node: ast.AST, in_function: bool) -> None:
        found = []
        if isinstance(node, ast.Import):
            found = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                base = f"{parent}.{base}" if base else parent
            found = [base, *(f"{base}.{alias.name}" for alias in node.names)]
        for name in found:
            names[name] = names.get(name, False) or not in_function
        inside = in_function or isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
        for child in ast.iter_child_nodes(node):
            visit(child, inside)

    visit(ast.parse(source), False)
    return names


def third_party_of_grading(root: Path) -> dict[tuple[str, str], bool]:
    """{(shipped module, top-level third-party module it imports): at module level}, over the
    import closure of ENTRY_MODULES among the .py files under ``root`` (an extracted
    autograde.tar), first-party imports followed wherever they are written."""
    def file_of(name: str) -> tuple[Path, bool] | None:
        path = root.joinpath(*name.split("."))
        if (path / "__init__.py").is_file():
            return path / "__init__.py", True
        return (path.with_suffix(".py"), False) if path.with_suffix(".py").is_file() else None

    seen, todo, outside = set(), list(ENTRY_MODULES), {}
    while todo:
        module = todo.pop()
        found = file_of(module)
        if module in seen or found is None:
            continue
        seen.add(module)
        for name, module_level in imported_names(found[0].read_text(encoding="utf-8"), module,
                                                 found[1]).items():
            parts = name.split(".")
            if (root / parts[0]).is_dir():
                todo.extend(".".join(parts[:end]) for end in range(1, len(parts) + 1))
            elif parts[0] not in sys.stdlib_module_names | HANDED_IN | {"__future__"}:
                key = (module, parts[0])
                outside[key] = outside.get(key, False) or module_level
    assert len(seen) > 20, f"the closure found only {sorted(seen)}: is the archive laid out as expected?"
    return outside


def test_every_package_grading_imports_is_pinned_in_the_grader_requirements(tmp_path):
    with tarfile.open(built_autograder() / "autograde.tar") as tar:
        tar.extractall(tmp_path, filter="data")
    pins = versions.pinned(REPO_ROOT / make_autograde.GRADER_REQUIREMENTS)
    distributions = metadata.packages_distributions()
    found = third_party_of_grading(tmp_path / "autograde")
    for (module, top), module_level in sorted(found.items()):
        names = {name.lower().replace("_", "-") for name in distributions.get(top, [top])}
        if names & set(pins):
            continue
        assert (module, top) in LAZY_OUTSIDE_GRADING and not module_level, (
            f"{module} imports {top} (distribution {sorted(names)}), which "
            f"{make_autograde.GRADER_REQUIREMENTS} does not pin: the grading image would not have "
            "it. Pin it there, or keep it out of what grading imports")
    unused = set(LAZY_OUTSIDE_GRADING) - set(found)
    assert not unused, f"LAZY_OUTSIDE_GRADING names imports that are gone: {sorted(unused)}"


def test_the_grader_requirements_are_part_of_the_full_environment():
    everything = versions.pinned(REPO_ROOT / "requirements.txt")
    grader = versions.pinned(REPO_ROOT / make_autograde.GRADER_REQUIREMENTS)
    assert grader.items() <= everything.items()
    assert {"matplotlib", "wandb", "pytest", "copydetect"}.isdisjoint(grader), (
        "the grading image installs only what grading needs")


def test_the_closure_sees_imports_inside_functions_and_relative_ones(tmp_path):
    """A package imported only inside a function of a module the judge imports is found."""
    for name, text in {"autograder/__init__.py": "", "hw4lib/__init__.py": "",
                       "autograder/judging/grade.py": "from . import helper\nimport hw4lib.late\n",
                       "autograder/judging/helper.py": "def plot():\n    import matplotlib\n",
                       "hw4lib/late.py": "def f():\n    from wandb import init\n",
                       "autograder/judging/scoring/grade_model.py": "import numpy\n",
                       "autograder/sandboxed/worker.py": "import json\n"}.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    for index in range(20):  # the closure's sanity floor
        (tmp_path / f"autograder/judging/m{index}.py").write_text("")
    (tmp_path / "autograder/judging/grade.py").write_text(
        "from . import helper\nimport hw4lib.late\n" + "".join(
            f"from autograder.judging import m{index}\n" for index in range(20)))
    found = third_party_of_grading(tmp_path)
    assert found == {("autograder.judging.helper", "matplotlib"): False, ("hw4lib.late", "wandb"): False,
                     ("autograder.judging.scoring.grade_model", "numpy"): True}, found
