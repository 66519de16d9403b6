# hw4p1: instructor-only
"""What a judge imports while it grades: not sympy (about 0.75 CPU s of every grading), which torch
2.13 imports the first time a tensor's ``backward`` is given a gradient; the hidden tests' truths
take their vector-Jacobian products with ``hw4lib.numeric_truths.backward_with`` instead.

The judge is the real one, started by the Autolab Makefile on an honest handin; its Python is a
wrapper that runs it as ``python -m`` would and, at the judge's own ``os._exit``, writes the names
of the modules it holds.

    .venv/bin/python -m pytest -q tests/grader/test_judge_imports.py
"""
import json
import shutil
import sys

import pytest

from autograder.judging.scoring import rubric
from tests.grader.autograder_helpers import attack_handin, autolab_make, built_autograder

# Run as the Makefile's $(PYTHON) with "-m autograder.judging.grade ...": the judge, as python -m
# runs it, whose exit (grade.exit_at_once: os._exit) first writes its sys.modules to MODULES.
PROBE = """
import json, os, runpy, sys
judge, real_exit = os.getpid(), os._exit


def exit_writing_modules(status):
    if os.getpid() == judge:  # not a child forked from the judge
        with open({modules!r}, "w") as out:
            json.dump(sorted(sys.modules), out)
    real_exit(status)


os._exit = exit_writing_modules
assert sys.argv[1] == "-m", sys.argv
sys.argv[:3] = [sys.argv[2]]
sys.path.insert(0, os.getcwd())
runpy.run_module(sys.argv[0], run_name="__main__", alter_sys=True)
"""


@pytest.mark.slow
def test_a_judge_grading_a_handin_never_imports_sympy(tmp_path):
    grading = tmp_path / "grading"
    grading.mkdir()
    for name, target in (("autograde.tar", "autograde.tar"), ("autograde-Makefile", "Makefile")):
        shutil.copy(built_autograder() / name, grading / target)
    shutil.copy(attack_handin(tmp_path / "honest", "", None), grading / "handin.tar")
    modules = tmp_path / "modules.json"
    probe = tmp_path / "probe.py"
    probe.write_text(PROBE.format(modules=str(modules)))
    wrapper = tmp_path / "python"
    wrapper.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{probe}" "$@"\n')
    wrapper.chmod(0o755)
    process = autolab_make([f"PYTHON={wrapper}", "GRADER_FLAGS="], cwd=grading, timeout=600)
    scores = json.loads(process.stdout.splitlines()[-1])["scores"]
    assert all(scores[c] == p for c, p in rubric.MYTORCH_RUBRIC.items()), process.stdout[-3000:]
    held = json.loads(modules.read_text())
    assert "autograder.judging.scoring.hidden_tests.mha_tests" in held, "the judge's own modules"
    assert "torch" in held and "sympy" not in held, [m for m in held if m.startswith("sympy")][:5]
