# hw4p1: instructor-only
"""Run HW4P1_nb.ipynb headless, top to bottom, as a student would, on the tiny config.

    .venv/bin/python -m pytest -q tests/kit/test_notebook.py

``jupyter execute`` runs the notebook in the student handout (built by ``make handout``'s own
function in a temporary directory) with every graded part written and the 0-point bonus not, in a
fresh ``python3`` kernel of this interpreter, its parameters cell replaced so it starts from a
smaller ``configs/tiny.yaml`` (a twentieth of the data) and skips the component-test cells (the
component tests run on their own in the suite). Then ``python -m hw4lib.train`` (what ``make
train`` runs) trains the same config in the same folder with ``--seed`` of the seed the notebook's
run drew (its config.yaml): the two runs' test metrics and generations must be identical, whatever
the notebook's cells look at in between. One notebook run checks both, since each costs a
training.
"""
import json
import os
import re
import subprocess
import sys
import tarfile
from pathlib import Path

import nbformat
import pytest
import yaml


REPO_ROOT = Path(__file__).resolve().parents[2]
NOTEBOOK = "HW4P1_nb.ipynb"
CHECK_CONFIG = "configs/notebook_check.yaml"  # written into the copy only
CHECK_CONFIG_TEXT = "base: tiny.yaml\nname: notebook-check\ndata: {subset: 0.05}\n"
TEST_PARAMETERS = f'CONFIG_FILE = "{CHECK_CONFIG}"\nRUN_TESTS = False\n'
RUN_FILES = ("config.yaml", "model_arch.txt", "test_metrics.json", "test_generated_results.json",
             "checkpoints/checkpoint-best-metric-model.pth",
             "checkpoints/checkpoint-last-epoch-model.pth")

CLI_RUN = "command-line"


def error_outputs(notebook) -> list[str]:
    return [f"cell {index}: {output.get('ename')}: {output.get('evalue')}"
            for index, cell in enumerate(notebook.cells) if cell.cell_type == "code"
            for output in cell.get("outputs", []) if output.get("output_type") == "error"]


def test_the_committed_notebook_is_clean_and_has_one_parameters_cell():
    committed = nbformat.read(REPO_ROOT / NOTEBOOK, as_version=4)
    assert not any(cell.get("outputs") or cell.get("execution_count")
                   for cell in committed.cells if cell.cell_type == "code"), \
        f"{NOTEBOOK} is committed with outputs: clear them (Kernel > Restart & Clear Output)"
    parameters = [cell for cell in committed.cells if "parameters" in cell.metadata.get("tags", [])]
    assert len(parameters) == 1, "the notebook needs exactly one cell tagged 'parameters'"


def test_the_colab_pip_line_installs_the_pinned_versions_of_what_it_adds():
    """Colab keeps its own numpy (the set-up cell checks it is 2 or newer); every other package
    the line installs comes at its pin in requirements.txt."""
    from hw4lib.versions import pinned

    committed = nbformat.read(REPO_ROOT / NOTEBOOK, as_version=4)
    text = "".join(cell.source for cell in committed.cells if cell.cell_type == "markdown")
    lines = re.findall(r"`!pip install -q ([^`]+)`", text)
    assert len(lines) == 1, f"expected one Colab pip line in {NOTEBOOK}, found {lines}"
    pins = pinned(REPO_ROOT / "requirements.txt")
    unpinned = [requirement for requirement in lines[0].split()
                if requirement != '"numpy>=2"'
                and pins.get(requirement.partition("==")[0].lower()) != requirement.partition("==")[2]]
    assert not unpinned, (f"the Colab pip line of {NOTEBOOK} installs {unpinned}: give each "
                          "at its pin in requirements.txt (name==version)")


def check_the_run_matches_the_command_line(root: Path) -> None:
    """The notebook's one run folder is complete, its handin packed, and ``python -m
    hw4lib.train`` (what ``make train`` runs) trains the same config with ``--seed`` of the seed
    the notebook's run drew and recorded to the same metrics and generations, whatever the
    notebook's cells looked at in between."""
    runs = [p for p in (root / "expts").iterdir() if p.is_dir()]
    assert len(runs) == 1, f"expected one run folder, found {runs}"
    missing = [name for name in RUN_FILES if not (runs[0] / name).is_file()]
    assert not missing, f"the run folder lacks {missing}"
    with tarfile.open(root / "handin.tar") as tar:
        names = set(tar.getnames())
    assert {"handin/model_state_dict.pt", "handin/config.yaml", "handin/mytorch/__init__.py"} <= names

    seed = yaml.safe_load((runs[0] / "config.yaml").read_text())["seed"]  # drawn for that run
    subprocess.run([sys.executable, "-m", "hw4lib.train", "--config", CHECK_CONFIG, "--seed",
                    str(seed), "--run-name", CLI_RUN], cwd=root, check=True, capture_output=True,
                   env={**os.environ, "WANDB_MODE": "disabled"})
    for name in ("test_metrics.json", "test_generated_results.json"):
        notebook_result = json.loads((runs[0] / name).read_text())
        cli_result = json.loads((root / "expts" / CLI_RUN / name).read_text())
        assert notebook_result == cli_result, (
            f"{name}: the notebook and python -m hw4lib.train (make train) trained the same config "
            f"and seed differently:\nnotebook {notebook_result}\ncommand line {cli_result}")


def handout_with_the_graded_parts(target: Path) -> None:
    """The student handout in ``target`` with every graded part written (the reference's files of
    the task list up to the bonus) and the 0-point bonus left unwritten, as most students hand it
    in; the data is this repository's, linked."""
    from tools.handout_readme import BONUS_FIRST, TASK_ORDER
    from tools.make_handout import build

    build(REPO_ROOT, target)
    graded = list(TASK_ORDER)[:list(TASK_ORDER).index(BONUS_FIRST)]
    for name in graded:
        (target / name).write_bytes((REPO_ROOT / name).read_bytes())
    data = REPO_ROOT / "hw4_data" / "hw4p1_data"
    if data.is_dir():
        (target / "hw4_data" / "hw4p1_data").symlink_to(data.resolve())


@pytest.mark.slow
@pytest.mark.long
def test_the_handout_notebook_runs_to_the_end_with_the_bonus_unwritten(tmp_path):
    """``jupyter execute`` on the handout with only the graded parts written: exit 0, the bonus's
    message in its own cells, no warning in any cell, progress bars drawn a few times each."""
    handout = tmp_path / "handout"
    handout_with_the_graded_parts(handout)
    (handout / CHECK_CONFIG).write_text(CHECK_CONFIG_TEXT)
    notebook = nbformat.read(handout / NOTEBOOK, as_version=4)
    next(c for c in notebook.cells if "parameters" in c.metadata.get("tags", [])).source = \
        TEST_PARAMETERS
    nbformat.write(notebook, handout / NOTEBOOK)
    run = subprocess.run([str(Path(sys.executable).with_name("jupyter")), "execute", "--inplace",
                          "--kernel_name=python3", NOTEBOOK], cwd=handout, capture_output=True,
                         text=True, timeout=1800, env={**os.environ, "WANDB_MODE": "disabled"})
    assert run.returncode == 0, f"jupyter execute failed:\n{run.stdout[-3000:]}{run.stderr[-3000:]}"
    executed = nbformat.read(handout / NOTEBOOK, as_version=4)
    assert not error_outputs(executed), error_outputs(executed)
    texts = {index: "".join(output.get("text", "") for output in cell.get("outputs", []))
             for index, cell in enumerate(executed.cells) if cell.cell_type == "code"}
    warned = {index: text for index, text in texts.items() if "Warning" in text}
    assert not warned, f"cells print warnings: {warned}"
    unwritten = [index for index, text in texts.items()
                 if "bonus: the numpy model: not written yet" in text]
    assert unwritten and all("mytorch" in texts[i] and "Traceback" not in texts[i]
                             for i in unwritten), {i: texts[i] for i in unwritten}
    redraws = {index: len(re.findall(r"\r(?!\n)", text)) for index, text in texts.items()}
    frames = {index: count for index, count in redraws.items() if count > 20}
    assert not frames, f"progress bars flood the saved notebook (redraws per cell): {frames}"
    check_the_run_matches_the_command_line(handout)
