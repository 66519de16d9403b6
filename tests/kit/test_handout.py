# hw4p1: instructor-only
"""Tests of the handout generator, tools/make_handout.py.

    .venv/bin/python -m pytest -q tests/kit/test_handout.py

Two kinds of tests. The generator's rules are checked on small synthetic sources and a synthetic git
repository. Then the handout of this repository is generated once per process (into a temporary
directory) and checked against the acceptance criteria, iterating over whatever solution regions and
component tests exist: it imports, each component test fails with a NotImplementedError naming the
missing piece, no reference line survives, and restoring the regions gives back the solution, which
passes a representative set of component tests.
"""
import functools
import importlib
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import textwrap
from pathlib import Path

import pytest

from tests.grader.autograder_helpers import session_folder
from tests.testing_framework import OWN_WORK, collect
from tools.handout_leaks import find_leaks
from tools.handout_files import (EXCLUDED_DIRS, EXCLUDED_FILES, INSTRUCTOR_ONLY, MAKEFILE_BEGIN,
                                 strip_instructor_targets)
from tools.handout_readme import (BONUS_FIRST, GRADING_MARKER, TASK_ORDER, TASKS_MARKER,
                                  grading_section, student_readme)
from tools.handout_regions import (HandoutError, code_units, file_regions, find_regions,
                                   replace_units, restore, restore_text, strip_markers, stub_out)
from tools.make_handout import (LEAK_SUFFIXES, REPO_ROOT, Handout, build, check_imports,
                                check_tree, main, write_tarball)

# The sections every README that make handout reads must have (it fills them in).
MARKED_SECTIONS = f"## Tasks\n{TASKS_MARKER}\n\n## Grading\n{GRADING_MARKER}\n"

# Component tests run again in the restored handout: one per package is enough to show that the
# handout plus the reference regions is a complete, working tree.
RESTORED_SAMPLE = ("test_mytorch", "test_mask_causal", "test_decoding")


def lines_of(source: str) -> list[str]:
    return textwrap.dedent(source).lstrip("\n").splitlines(keepends=True)


SAMPLE = lines_of('''
    class Attention:
        def forward(self, x):
            """Docstring stays."""
            y = x + 1
            # TODO: scale y by two,
            #   (N, T) -> (N, T)
            # BEGIN SOLUTION
            z = y * 2
            return z
            # END SOLUTION

    def helper(values):
        total = 0
        for value in values:
            # TODO: add value to total
            # BEGIN SOLUTION
            total += value
            # END SOLUTION
        return total
''')


def test_regions_become_stubs_that_name_file_function_and_todo():
    regions = find_regions(SAMPLE, "pkg/attention.py")
    assert [(r.qualname, r.todo, r.indent) for r in regions] == [
        ("Attention.forward", "scale y by two, (N, T) -> (N, T)", " " * 8),
        ("helper", "add value to total", " " * 8),
    ]
    stubbed = stub_out(SAMPLE, regions)
    text = "".join(stubbed)
    assert "BEGIN SOLUTION" not in text and "z = y * 2" not in text and "total += value" not in text
    assert "        #   (N, T) -> (N, T)\n" in stubbed  # the TODO comment is kept
    assert ('        raise NotImplementedError("pkg/attention.py: Attention.forward: scale y by '
            'two, (N, T) -> (N, T)")\n') in stubbed
    namespace: dict = {}
    exec(compile(text, "pkg/attention.py", "exec"), namespace)  # noqa: S102 - the stub must import
    with pytest.raises(NotImplementedError, match=r"^pkg/attention.py: helper: add value to "):
        namespace["helper"]([1, 2])
    assert restore(stubbed, regions) == strip_markers("x.py", "".join(SAMPLE)).splitlines(True)


def test_malformed_regions_are_errors_naming_file_and_line():
    body = "def f():\n    # TODO: do it\n"
    cases = {
        "unclosed": (body + "    # BEGIN SOLUTION\n    return 1\n", "m.py:3: .*never closed"),
        "lone end": ("def f():\n    return 1\n    # END SOLUTION\n", "m.py:3: .*without"),
        "nested": (body + "    # BEGIN SOLUTION\n    # TODO: x\n    # BEGIN SOLUTION\n",
                   "m.py:5: nested"),
        "indent": (body + "    # BEGIN SOLUTION\n    return 1\n# END SOLUTION\n",
                   "m.py:5: .*indentation"),
        "no todo": ("def f():\n    x = 1\n    # BEGIN SOLUTION\n    return x\n    # END SOLUTION\n",
                    "m.py:3: .*TODO"),
        "empty": (body + "    # BEGIN SOLUTION\n\n    # END SOLUTION\n", "m.py:3: empty"),
        "malformed": (body + "    #BEGIN SOLUTION\n", "m.py:3: malformed marker"),
        "module level": ("# TODO: x\n# BEGIN SOLUTION\nX = 1\n# END SOLUTION\n",
                         "m.py:2: .*module level"),
        "class level": ("class A:\n    # TODO: x\n    # BEGIN SOLUTION\n    X = 1\n"
                        "    # END SOLUTION\n", "m.py:3: .*class A"),
    }
    for name, (source, message) in cases.items():
        with pytest.raises(HandoutError, match=message):
            find_regions(source.splitlines(keepends=True), "m.py")
            raise AssertionError(f"case {name!r} was accepted")


def test_notebook_cells_are_stubbed_and_outputs_cleared():
    cell = ("!echo set-up\n"
            "def step(x):\n    # TODO: double x\n    # BEGIN SOLUTION\n    return 2 * x\n"
            "    # END SOLUTION\n")
    notebook = {"cells": [{"cell_type": "markdown", "metadata": {}, "source": ["# Title"]},
                          {"cell_type": "code", "metadata": {}, "execution_count": 3,
                           "outputs": [{"output_type": "stream", "name": "stdout", "text": "4"}],
                           "source": cell.splitlines(keepends=True)}],
               "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    text = json.dumps(notebook)
    [region] = file_regions("nb.ipynb", text)
    assert (region.cell, region.qualname, region.message) == (2, "step",
                                                              "nb.ipynb, cell 2: step: double x")
    units = {2: stub_out(code_units("nb.ipynb", text)[2], [region])}
    handout = replace_units("nb.ipynb", text, units, clear_outputs=True)
    code_cell = json.loads(handout)["cells"][1]
    assert code_cell["outputs"] == [] and code_cell["execution_count"] is None
    assert "return 2 * x" not in handout and "NotImplementedError" in handout
    assert code_units("nb.ipynb", restore_text("nb.ipynb", handout, [region])) == \
        code_units("nb.ipynb", strip_markers("nb.ipynb", text))


def test_makefile_loses_instructor_targets():
    makefile = ("test:\n\tpytest\n\n" + MAKEFILE_BEGIN + "\nhandout:\n\tpython -m tools.x\n"
                "# END INSTRUCTOR TARGETS\n\nclean:\n\trm -rf dist\n")
    assert strip_instructor_targets(makefile) == "test:\n\tpytest\n\nclean:\n\trm -rf dist\n"
    with pytest.raises(HandoutError, match="Makefile"):
        strip_instructor_targets(makefile.replace("# END INSTRUCTOR TARGETS\n", ""))
    phony = ".PHONY: test handout clean\n" + makefile
    assert strip_instructor_targets(phony).splitlines()[0] == ".PHONY: test clean", (
        f"the dropped targets must leave .PHONY too, got {strip_instructor_targets(phony).splitlines()[0]!r}"
    )
    continued = ".PHONY: test handout \\\n\thandout clean\n" + makefile
    assert strip_instructor_targets(continued).splitlines()[:2] == [".PHONY: test clean", "test:"], (
        "a .PHONY line continued with a backslash must lose the dropped targets on every line, got "
        f"{strip_instructor_targets(continued).splitlines()[:2]!r}"
    )


def test_readme_task_section_is_replaced_by_the_generated_list():
    regions = find_regions(SAMPLE, "mytorch/nn/ops.py")
    readme = ("# Title\n\nIntro.\n\n## Grading\n" + GRADING_MARKER + "\nhow instructors grade\n\n"
              "## Your tasks, in order\n\n" + TASKS_MARKER + "\n"
              "Instructors: see docs/.\n### Details\nmore for instructors\n\n## Testing\nrun it\n")
    got = student_readme(readme, regions, {"test_ops"})
    assert got.startswith(f"# Title\n\nIntro.\n\n{grading_section()}\n## Your tasks, in order\n"), (
        f"the text before the task list must stay, the grading be generated: {got[:80]!r}")
    assert got.endswith("\n## Testing\nrun it\n"), f"the sections after the task list must stay: {got[-80:]!r}"
    for text in ("docs/", "more for instructors", "how instructors grade", TASKS_MARKER,
                 GRADING_MARKER):
        assert text not in got, f"the placeholder's {text!r} must not reach the handout:\n{got}"
    for region in regions:
        assert f"`{region.qualname}`: {region.todo}" in got, f"{region.qualname} missing from:\n{got}"
    assert got.count("## Your tasks, in order") == 1, f"expected one task-list heading, got:\n{got}"
    last = student_readme(readme.split("## Testing")[0], regions, set())
    assert last.endswith(f": {regions[-1].todo}\n"), f"a last section must end the README: {last[-80:]!r}"
    for broken, why in ((readme.replace(TASKS_MARKER, ""), "exactly once"),
                        (readme.replace(GRADING_MARKER, ""), "exactly once"),
                        (readme + TASKS_MARKER + "\n", "exactly once"),
                        (TASKS_MARKER + "\n" + readme.replace(TASKS_MARKER, ""), "heading")):
        with pytest.raises(HandoutError, match=why):
            student_readme(broken, regions, set())


def git_repo(root: Path, files: dict[str, str], untracked: dict[str, str]) -> None:
    for path, content in {**files, **untracked}.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(content)
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    subprocess.run(["git", "-C", str(root), "add", *files], check=True)


def test_build_on_a_synthetic_repository(tmp_path):
    region = ("def f():\n    # TODO: return one\n    # BEGIN SOLUTION\n    return 1\n"
              "    # END SOLUTION\n")
    repo = tmp_path / "repo"
    git_repo(repo, files={
        "README.md": f"# Course\n\nIntro.\n\n{MARKED_SECTIONS}how to grade\n",
        "Makefile": f"test:\n\tpytest\n{MAKEFILE_BEGIN}\nhandout:\n\tx\n# END INSTRUCTOR TARGETS\n",
        "DEVELOPERS.md": "internal\n",
        "mytorch/__init__.py": "",
        "mytorch/nn/ops.py": region,
        "tests/test_ops.py": "from mytorch.nn.ops import f\n",
        "tests/test_secret.py": f"{INSTRUCTOR_ONLY}\nprint('hidden')\n",
        "tools/make.py": "print('tool')\n",
        "autograder/judging/grade.py": "print('grade')\n",
        ".ci/run": "make test\n",
    }, untracked={"mytorch/stray.py": "leak = 1\n", "notes.txt": "private\n"})
    out = tmp_path / "dist" / "handout"
    handout = main(["--repo", str(repo), "--out", str(out)])
    assert handout.files == ["Makefile", "README.md", "mytorch/__init__.py", "mytorch/nn/ops.py",
                             "tests/test_ops.py"]
    assert sorted(p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file()) == \
        handout.files
    assert "handout:" not in (out / "Makefile").read_text()
    readme = (out / "README.md").read_text()
    assert "how to grade" not in readme
    assert "`mytorch/nn/ops.py`" in readme and "`f`: return one" in readme
    with tarfile.open(out.with_name("handout.tar.gz")) as tar:
        assert sorted(tar.getnames()) == [f"hw4p1/{p}" for p in handout.files]
    again = tmp_path / "again.tar.gz"
    write_tarball(handout, again)
    assert again.read_bytes() == out.with_name("handout.tar.gz").read_bytes()  # reproducible
    with pytest.raises(HandoutError, match="not empty"):
        build(repo, out)


LEAKY_REGION = """\
def step(x, finished, scores, token_scores):
    # TODO: add the token scores of unfinished rows, then append
    # BEGIN SOLUTION
    scores = torch.where(finished, scores, scores + token_scores)
    x = torch.cat([x, token_scores.unsqueeze(1)], dim=1)
    return x, scores
    # END SOLUTION
"""
# The same two statements, renamed and re-spaced, in given code, a test, a notebook and the README.
LEAKS = {
    "mytorch/nn/given.py": "def sample(s, done, total, t):\n    total = torch.where( done, total, total + t )\n"
                           "    s = torch.cat([s, t.unsqueeze(1)], dim = 1)\n",
    "tests/test_ops.py": "# hint: acc = torch.where(f, acc, acc + ts)\n"
                         "#       seq = torch.cat([seq, ts.unsqueeze(1)], dim=1)\n",
    "README.md": "## Tasks\nDo `sc = torch.where(fin, sc, sc + d)`; `y = torch.cat([y, d.unsqueeze(1)], dim=1)`.\n",
    "notebook.ipynb": json.dumps({"cells": [{"cell_type": "code", "metadata": {}, "outputs": [],
                                             "execution_count": None, "source": [
        "a = torch.where(b, a, a + c)\n", "z = torch.cat([z, c.unsqueeze(1)], dim=1)\n"]}],
        "metadata": {}, "nbformat": 4, "nbformat_minor": 5}),
}


def test_a_planted_leak_is_refused_naming_region_and_place(tmp_path):
    clean = {"README.md": f"# Course\n\n{MARKED_SECTIONS}", "mytorch/__init__.py": "",
             "mytorch/nn/ops.py": LEAKY_REGION,
             "tests/test_ops.py": "from mytorch.nn.ops import step\n"}
    repo = tmp_path / "clean"
    git_repo(repo, files=clean, untracked={})
    main(["--repo", str(repo), "--out", str(tmp_path / "clean-out"), "--no-tar", "--no-import-check"])
    for path, leak in LEAKS.items():
        repo = tmp_path / path.replace("/", "-")
        text = leak if path != "README.md" else clean["README.md"].replace("## Tasks", leak + "## Tasks")
        git_repo(repo, files={**clean, path: text if path != "tests/test_ops.py"
                              else clean[path] + text}, untracked={})
        with pytest.raises(SystemExit) as refusal:
            main(["--repo", str(repo), "--out", str(tmp_path / f"out-{repo.name}"), "--no-tar",
                  "--no-import-check"])
        message = str(refusal.value)
        assert f"  {path}" in message and "gives away the solution of mytorch/nn/ops.py:3" in message, (
            f"a renamed copy of the region in {path} must be refused, naming both; got: {message}")


def test_a_mention_of_what_students_do_not_get_is_refused(tmp_path):
    """The handout stands alone: a shipped file that cites an instructor-only file or folder, or
    an instructor-only make target, stops the build naming both; `make test` beside an instructor
    `make test-platforms` target is not such a mention."""
    makefile = ("test:\n\tpytest\n\n" + MAKEFILE_BEGIN + "\ntest-platforms:\n\tpytest -m p\n"
                "bench:\n\tpython -m bench\n# END INSTRUCTOR TARGETS\n")
    clean = {"README.md": f"# Course\n\n{MARKED_SECTIONS}", "Makefile": makefile,
             "mytorch/__init__.py": "", "mytorch/nn/ops.py": "# run `make test` first\n",
             "docs/results.md": "numbers\n", "tools/x.py": ""}
    repo = tmp_path / "clean"
    git_repo(repo, files=clean, untracked={})
    main(["--repo", str(repo), "--out", str(tmp_path / "clean-out"), "--no-tar", "--no-import-check"])
    for mention, named in (("see docs/results.md", "docs/"), ("`make bench` times it", "make bench"),
                           ("python -m tools.x (tools/x.py)", "tools/")):
        repo = tmp_path / named.replace("/", "").replace(" ", "-")
        git_repo(repo, files={**clean, "mytorch/nn/ops.py": f"# {mention}\n"}, untracked={})
        with pytest.raises(SystemExit) as refusal:
            main(["--repo", str(repo), "--out", str(tmp_path / f"out-{repo.name}"), "--no-tar",
                  "--no-import-check"])
        message = str(refusal.value)
        assert f"mytorch/nn/ops.py mentions {named}, which students do not get" in message, message


def test_the_handout_gives_no_region_away():
    handout = repo_handout()
    texts = {path: (handout.out / path).read_text(errors="replace") for path in handout.files
             if Path(path).suffix in LEAK_SUFFIXES}
    leaks = find_leaks(handout.regions, texts)
    assert not leaks, "solution code outside its region:\n" + "\n".join(map(str, leaks))


# ----------------------------------------------------------------------------------------------
# The handout of this repository


@functools.lru_cache(maxsize=None)
def repo_handout() -> Handout:
    """This repository's handout, generated once per process into a temporary directory."""
    parent = session_folder("hw4p1-handout-")
    handout = build(REPO_ROOT, parent / "handout")
    check_tree(handout)
    return handout


def component_tests(handout: Handout) -> list[str]:
    """Test modules that check student code: those the notebook runs and those of TASK_ORDER,
    that exist in the handout."""
    names = {name for names in TASK_ORDER.values() for name in names}
    notebook = handout.out / "HW4P1_nb.ipynb"
    if notebook.is_file():
        names |= set(re.findall(r"-m tests\.(test_\w+)", notebook.read_text()))
    return sorted(n for n in names if (handout.out / "tests" / f"{n}.py").is_file())


DRIVER = """
import importlib, io, json, sys
from tests.testing_framework import collect, run_tests
results = {}
for name in sys.argv[2:]:
    try:
        module = importlib.import_module("tests." + name)
        grouped = collect(module)
    except BaseException as error:
        results[name] = {"<import>": [type(error).__name__, str(error), None]}
        continue
    report = run_tests(module, grouped, dict(module.RUBRIC), out=io.StringIO())
    results[name] = {}
    for test in sorted(report.ran):
        error = report.errors.get(test)
        cause = error and (error.__cause__ or error.__context__)
        results[name][test] = error and [type(error).__name__, str(error),
                                         cause and f"{type(cause).__name__}: {cause}"]
        if error is None and test in report.failures:
            results[name][test] = ["Failure", report.failures[test], None]
with open(sys.argv[1], "w") as file:
    json.dump(results, file)
"""


def run_tests_in(root: Path, modules: list[str], tmp_path: Path) -> dict[str, dict]:
    """{module: {test: None if passed else [exception type, message, exception it was raised
    while handling or None]}} from running ``modules``' rubric tests in one fresh interpreter with
    ``root`` as working directory."""
    report = tmp_path / "report.json"
    env = dict(os.environ, WANDB_MODE="disabled", PYTHONDONTWRITEBYTECODE="1", OMP_NUM_THREADS="1",
               PYTHONPATH=str(root))
    result = subprocess.run([sys.executable, "-c", DRIVER, str(report), *modules], cwd=root,
                            env=env, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0 and report.is_file(), result.stdout + result.stderr
    return json.loads(report.read_text())


def test_handout_leaves_out_instructor_files():
    handout = repo_handout()
    assert handout.regions, "no solution regions found in the repository"
    for path in handout.files:
        assert not path.startswith(EXCLUDED_DIRS) and path not in EXCLUDED_FILES, path
        assert "__pycache__" not in path and not path.endswith(".pyc"), path
        if path.endswith(".py"):
            first = (handout.out / path).read_text().split("\n", 1)[0]
            assert first.strip() != INSTRUCTOR_ONLY, path
    assert Path(__file__).relative_to(REPO_ROOT).as_posix() not in handout.files
    if "Makefile" in handout.files:
        assert MAKEFILE_BEGIN not in (handout.out / "Makefile").read_text()
    on_disk = sorted(p.relative_to(handout.out).as_posix()
                     for p in handout.out.rglob("*") if p.is_file())
    assert on_disk == handout.files


def test_the_readme_has_one_task_list_generated_from_the_regions():
    handout = repo_handout()
    readme = (handout.out / "README.md").read_text()
    assert readme.count("## Your tasks, in order") == 1 and TASKS_MARKER not in readme, (
        "the handout README must hold the generated task list once, in place of the placeholder")
    assert grading_section() in readme and GRADING_MARKER not in readme, (
        "the handout README must hold the generated grading section, in place of the placeholder")
    missing = [r.where for r in handout.regions
               if f"`{r.qualname or 'top-level code'}`: {r.todo}" not in readme]
    assert not missing, f"the handout README's task list lacks the regions at {missing}"
    order = list(TASK_ORDER)
    if BONUS_FIRST in {r.path for r in handout.regions}:
        bonus = readme.index("**Bonus (0 points)**")
        before = order[:order.index(BONUS_FIRST)]
        assert all(readme.index(f"`{path}`\n") < bonus < readme.index(f"`{BONUS_FIRST}`\n")
                   for path in before), "the bonus note must sit between the main tasks and the bonus"
    source = (REPO_ROOT / "README.md").read_text()
    assert source.count(TASKS_MARKER) == 1, f"README.md must hold {TASKS_MARKER!r} once"
    tables = [line for line in source.splitlines() if line.lstrip().startswith("|")
              and ("tests.test_" in line or any(path in line for path in TASK_ORDER))]
    assert not tables, ("README.md must not list the tasks by hand (make handout generates the "
                        f"list): found the table rows {tables[:3]}")


def plain_text(path: str, text: str) -> str:
    """What a reader sees in a file: for a notebook, its cells' sources rather than JSON."""
    if not path.endswith(".ipynb"):
        return text
    return "".join("".join(cell["source"]) for cell in json.loads(text)["cells"])


def test_no_reference_line_survives_in_the_handout():
    handout = repo_handout()
    outside, inside = [], set()
    for path in handout.files:
        text = (REPO_ROOT / path).read_text(errors="replace")
        regions = [r for r in handout.regions if r.path == path]
        if not regions:
            outside.append(plain_text(path, text))
            continue
        outside += [r.todo for r in regions]  # the README's task list joins TODO comment lines
        if path.endswith(".ipynb"):  # markdown cells are outside every region
            outside += ["".join(c["source"]) for c in json.loads(text)["cells"]
                        if c["cell_type"] != "code"]
        for cell, lines in code_units(path, text).items():
            spans = [(r.begin, r.end) for r in regions if r.cell == cell]
            for number, line in enumerate(lines, start=1):
                if any(b <= number <= e for b, e in spans):
                    inside.add(line.strip())
                else:
                    outside.append(line)
    outside_text = "".join(outside)
    # a line is evidence of a leak if it is substantial and nothing outside the regions has it
    telltale = sorted(line for line in inside if len(line) >= 16 and not line.startswith("#")
                      and line not in outside_text)
    assert telltale, "no reference line is distinctive enough to test"
    for path in handout.files:
        text = plain_text(path, (handout.out / path).read_text(errors="replace"))
        leaked = [line for line in telltale if line in text]
        assert not leaked, f"{path} contains reference code: {leaked[:3]}"


# Paths the handout's text may name although they are built, not shipped.
GENERATED = ("hw4_data/hw4p1_data", "expts/", "handin.tar", "handin/")


def code_spans(text: str) -> list[str]:
    """The inline code, fenced code blocks, link targets and image sources of markdown text."""
    fenced = re.findall(r"```[a-z]*\n(.*?)```", text, flags=re.S)
    rest = re.sub(r"```[a-z]*\n.*?```", "", text, flags=re.S)
    links = re.findall(r"\]\(([^)\s]+)\)", rest) + re.findall(r'src=\\?"([^"\\]+)', rest)
    return fenced + re.findall(r"`([^`\n]+)`", rest) + links


def named_in(text: str, top_level: set[str]) -> tuple[set[str], set[str], set[str]]:
    """(make targets, python -m modules, repository paths) that ``text`` names in its code."""
    targets, modules, paths = set(), set(), set()
    for span in code_spans(text):
        targets |= set(re.findall(r"(?:^|[\s!])make ([a-z][a-z-]*)", span, flags=re.M))
        modules |= set(re.findall(r"(?:python3?|sys\.executable\}) -m ([A-Za-z_][\w.]*)(?![<\w.])", span))
        for word in re.findall(r"[\w./-]+", span):
            word = word.rstrip(".")
            if "/" in word and word.split("/")[0] in top_level and not word.startswith(GENERATED):
                paths.add(word)
    return targets, modules, paths


def test_everything_the_handout_names_exists():
    import importlib.util

    handout = repo_handout()
    top_level = {path.split("/")[0] for path in handout.excluded} | {
        path.split("/")[0] for path in handout.files}
    makefile = (handout.out / "Makefile").read_text()
    defined = set(re.findall(r"^([a-z][a-z-]*):", makefile, flags=re.M))
    for name in ("README.md", "HW4P1_nb.ipynb"):
        text = (handout.out / name).read_text()
        if name.endswith(".ipynb"):
            text = "\n".join("".join(cell["source"]) if cell["cell_type"] == "markdown"
                             else "```\n" + "".join(cell["source"]) + "\n```"
                             for cell in json.loads(text)["cells"])
        targets, modules, paths = named_in(text, top_level)
        missing = sorted(targets - defined)
        assert not missing, f"the handout's {name} names `make {missing[0]}`, which its Makefile lacks: {missing}"
        for module in sorted(modules):
            local = module.replace(".", "/")
            shipped = any((handout.out / candidate).exists() for candidate in
                          (local + ".py", local + "/__main__.py", local + "/__init__.py"))
            if module.split(".")[0] in top_level:
                assert shipped, f"the handout's {name} names `python -m {module}`, which it does not ship"
            else:
                assert importlib.util.find_spec(module.split(".")[0]), (
                    f"the handout's {name} names `python -m {module}`: neither shipped nor installed"
                )
        missing = sorted(path for path in paths if not (handout.out / path).exists())
        assert not missing, f"the handout's {name} names paths it does not ship: {missing}"


@pytest.mark.slow
def test_handout_imports_cleanly():
    check_imports(repo_handout().out)


@pytest.mark.slow
def test_component_tests_fail_with_not_implemented_naming_the_piece(tmp_path):
    handout = repo_handout()
    modules = component_tests(handout)
    assert modules, "no component test module found in the handout"
    messages = {region.message for region in handout.regions}
    results = run_tests_in(handout.out, modules, tmp_path)
    for module, outcomes in results.items():
        failures = {test: error for test, error in outcomes.items() if error is not None}
        assert failures, f"{module}: every test passes on the handout, so none tests student code"
        for test, (kind, message, during) in failures.items():
            assert kind == "NotImplementedError", (
                f"{module}.{test} failed with {kind}: {message}"
                + (f" (raised while handling {during})" if during else ""))
            assert message in messages, f"{module}.{test}: stub message {message!r} is unknown"
    mislabelled = [problem for module, outcomes in results.items()
                   for problem in given_code_mislabelled(module, outcomes)]
    assert not mislabelled, "\n".join(mislabelled)


def given_code_mislabelled(module_name: str, outcomes: dict) -> list[str]:
    """What breaks the rule that a test passes on the untouched handout exactly when its category
    is labelled given code (worth 0 points, in neither THROUGH_LM nor BONUS): a test that passes on
    the stubs tests given code, and one that fails on them needs the student's code."""
    module = importlib.import_module(f"tests.{module_name}")
    own = {category for kind in OWN_WORK for category in getattr(module, kind, ())}
    problems = []
    for category, tests in collect(module).items():
        given = not module.RUBRIC[category] and category not in own
        for test in (fn.__name__ for fn in tests if fn.__name__ in outcomes):
            passes = outcomes[test] is None
            if passes and not given:
                problems.append(
                    f"{module_name}.{test} passes on the untouched handout, so it tests given "
                    f"code, but its category {category!r} is the student's work: move it to a "
                    "0-point category of given code, or make it call the student's code")
            elif given and not passes:
                problems.append(
                    f"{module_name}.{test} fails on the untouched handout, so it needs the "
                    f"student's code, but its category {category!r} is labelled given code: "
                    "list the category in the module's THROUGH_LM or BONUS")
    return problems


@pytest.mark.slow
def test_restored_handout_is_the_solution_and_passes(tmp_path):
    handout = repo_handout()
    restored = tmp_path / "restored"
    shutil.copytree(handout.out, restored)
    for path in sorted({r.path for r in handout.regions}):
        regions = [r for r in handout.regions if r.path == path]
        text = restore_text(path, (restored / path).read_text(), regions)
        (restored / path).write_text(text)
        source = strip_markers(path, (REPO_ROOT / path).read_text())
        assert code_units(path, text) == code_units(path, source), path
    modules = [m for m in RESTORED_SAMPLE if m in component_tests(handout)]
    results = run_tests_in(restored, modules, tmp_path)
    failed = {f"{module}.{test}": error for module, outcomes in results.items()
              for test, error in outcomes.items() if error is not None}
    assert not failed, f"the restored handout fails: {failed}"
