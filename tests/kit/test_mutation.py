# hw4p1: instructor-only
"""make mutation (tools/mutation.py) on a tiny git repository made in tmp_path: the mutants it
makes and skips, the lines the changed-lines mode picks, a planted survivor reported with its
place, its change and its tests, failing the changed-lines mode, the budget's sample, and tests
that fail unmutated.

    .venv/bin/python -m pytest -q tests/kit/test_mutation.py
"""
import subprocess
from pathlib import Path

import pytest

from tools import mutation

CONFIG = '''
[tool.mutation]
operators = ["core/ReplaceComparisonOperator_GtE_Gt", "core/NumberReplacer"]

[tool.mutation.files]
"calc.py" = ["test_calc.py"]
'''
# at_least's ">=" -> ">" survives test_calc (no case at the limit); the 3 of LIMIT is killed.
CALC = '''\
LIMIT = 3


def at_least(x, limit=LIMIT):
    return x >= limit


def scale(x):
    return x * 7  # pragma: no mutate (equivalent: the planted equivalent line)


def student(x):
    # TODO: return x plus one
    # BEGIN SOLUTION
    return x + 1
    # END SOLUTION
'''
# LIMIT is read in a subprocess only: its mutants are killed when the file on disk is the mutant.
TEST = '''\
import subprocess
import sys

from calc import at_least


def test_at_least():
    subprocess.run([sys.executable, "-c", "import calc; assert calc.LIMIT == 3"], check=True)
    assert at_least(5) and not at_least(1)
'''


def git(root: Path, *args: str) -> str:
    return subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=root,
                          check=True, capture_output=True, text=True).stdout


@pytest.fixture
def repo(tmp_path):
    """A committed repository with calc.py, its test and a [tool.mutation] table."""
    (tmp_path / "pyproject.toml").write_text(CONFIG)
    (tmp_path / "calc.py").write_text(CALC)
    (tmp_path / "test_calc.py").write_text(TEST)
    (tmp_path / "tools").mkdir()
    git(tmp_path, "init", "-q")
    git(tmp_path, "add", ".")
    git(tmp_path, "commit", "-qm", "base")
    return tmp_path


def test_pragma_and_solution_lines_are_not_mutated(repo):
    config = mutation.load_config(repo / "pyproject.toml")
    chosen, rows = mutation.select(config, ["calc.py"], None, repo)
    # NumberReplacer: 3 -> 4, 2 (line 1); 7 -> 8, 6 (line 9, marked); 1 -> 2, 0 (line 15, solution)
    assert sorted((m.line, m.after) for m in chosen) == [
        (1, "LIMIT = 2"), (1, "LIMIT = 4"), (5, "return x > limit")]
    row = rows["calc.py"]
    assert (row.mutants, row.equivalent) == (5, 2)


def test_a_pragma_without_its_reason_is_refused(repo):
    text = CALC.replace("(equivalent: the planted equivalent line)", "")
    with pytest.raises(mutation.MutationError, match=r"calc.py:9: write '# pragma: no mutate "
                                                      r"\(equivalent:"):
        mutation.excluded_lines("calc.py", text)


def test_changed_lines_are_exactly_the_added_and_edited_ones(repo):
    base = git(repo, "rev-parse", "HEAD").strip()
    lines = CALC.splitlines(keepends=True)
    lines[0] = "LIMIT = 4\n"                         # edited: line 1
    lines[4:4] = ["    # a comment\n", "    y = x\n"]  # added: lines 5 and 6
    del lines[10]                                     # deleted (old line 9): nothing to mutate
    (repo / "calc.py").write_text("".join(lines))
    (repo / "new.py").write_text("A = 1\nB = 2\n")
    git(repo, "add", "new.py")
    assert mutation.changed_lines(base, ["calc.py", "new.py", "test_calc.py"], repo) == {
        "calc.py": {1, 5, 6}, "new.py": {1, 2}}


@pytest.mark.slow
def test_a_survivor_on_a_changed_line_is_reported_and_fails_the_run(repo, capsys):
    (repo / "tools" / "mutation_base.txt").write_text(git(repo, "rev-parse", "HEAD"))
    (repo / "calc.py").write_text(CALC.replace("return x >= limit", "return limit <= x or x >= limit"))
    assert mutation.main(["--root", str(repo), "--changed", "--workers", "1"]) == 1
    out = capsys.readouterr().out
    assert "calc.py:5: return limit <= x or x >= limit  ->  return limit <= x or x > limit" in out
    assert "tests that ran: test_calc.py" in out
    row = [line.split() for line in out.splitlines() if line.startswith("calc.py ")][0]
    assert row[1:7] == ["1", "0", "1", "0", "0", "0"]  # mutants killed survived equiv timeout not-run
    # past the budget no mutant starts: reported as not run, and nothing survived among those run
    assert mutation.main(["--root", str(repo), "--changed", "--workers", "1", "--budget", "0"]) == 0
    out = capsys.readouterr().out
    assert "budget of 0s reached: 1 of 1 mutants not run" in out
    # the whole file: LIMIT's 2 mutants killed through the subprocess, line 5's survives
    assert mutation.main(["--root", str(repo), "--workers", "1", "calc.py"]) == 0
    row = [line.split() for line in capsys.readouterr().out.splitlines()
           if line.startswith("calc.py ")][0]
    assert row[1:7] == ["5", "2", "1", "2", "0", "0"]
    # tests that fail unmutated judge nothing: the file is reported and the run fails
    (repo / "test_calc.py").write_text(TEST.replace("LIMIT == 3", "LIMIT == 4"))
    assert mutation.main(["--root", str(repo), "--workers", "1", "calc.py"]) == 1
    out = capsys.readouterr().out
    assert "BASELINE FAILS  calc.py: test_calc.py::test_at_least" in out
    assert "0 mutants judged" in out
