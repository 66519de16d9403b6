# hw4p1: instructor-only
"""Finite differences take nothing from the student's process but its outputs.

The judge moves each entry of an input or weight itself and asks the sandboxed worker for ordinary
forward calls; every finite-difference test also checks the unperturbed forward against PyTorch.
A mytorch that rewires the worker's side of the finite differences to an honest forward, beside a
wrong forward of its own, gets no point for them. The same attack is a row of
``tests/platforms/test_platform_profiles.py``'s table.

    .venv/bin/python -m pytest -q tests/grader/test_judge_fd.py
"""
import shutil
from pathlib import Path

from autograder.judging.scoring.hidden_tests import linear_tests
from tools import hint_report
from tests.grader.attack_handins import DOUBLED_LINEAR_NN, FAIR_LINEAR_POINTS, FD_GAMING_INIT

SEED = 11


def fd_gaming_tree(folder: Path) -> Path:
    """The reference mytorch with the wrong Linear and the finite-difference hook."""
    tree = folder / "mytorch"
    shutil.copytree(hint_report.REPO_ROOT / "mytorch", tree,
                    ignore=shutil.ignore_patterns("__pycache__"))
    (tree / "__init__.py").write_text(FD_GAMING_INIT + (tree / "__init__.py").read_text())
    (tree / "nn" / "__init__.py").write_text((tree / "nn" / "__init__.py").read_text()
                                             + DOUBLED_LINEAR_NN)
    return tree


def test_a_wrong_forward_gets_no_finite_difference_point_whatever_its_hooks(tmp_path):
    graded = hint_report.judge_tree(fd_gaming_tree(tmp_path), SEED)
    results = {r.name: r for r in graded.runs["Linear"].results}
    assert sum(r.points for r in results.values()) == FAIR_LINEAR_POINTS, {
        name: (r.points, r.message) for name, r in results.items()}
    fd = results[linear_tests.linear_finite_differences.__name__]
    assert not fd.passed and fd.message.startswith("Z:"), fd.message
