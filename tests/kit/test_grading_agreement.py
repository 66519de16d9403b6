# hw4p1: instructor-only
"""What students are told and what the built grader awards agree: thresholds given to ``make
handout`` reach its README's Grading section and its copy of ``hw4lib/grading_numbers.py``, and
``make autograde`` refuses to build a grader that the built handout does not describe, naming the
command that rebuilds both.

    .venv/bin/python -m pytest -q tests/kit/test_grading_agreement.py
"""
import json
import subprocess
import tarfile
from pathlib import Path

import pytest

from autograder.judging.scoring import rubric
from autograder.classroom import rescore
from tools import make_autograde, make_handout
from tools.handout_readme import grading_section, stated_numbers, with_thresholds
from tools.handout_regions import HandoutError

REPO = Path(__file__).resolve().parents[2]
NUMBERS = (REPO / rescore.NUMBERS_MODULE).read_text()
FULL, ZERO = 3.25, 5.5  # neither is the shipped threshold


def test_the_handout_s_numbers_module_states_the_thresholds_it_is_given():
    module = with_thresholds(NUMBERS, FULL, ZERO)
    assert stated_numbers(module) == {"rubric": rubric.RUBRIC, "full_marks_ppl": FULL,
                                      "zero_marks_ppl": ZERO}
    assert f"FULL_MARKS_PPL = {FULL}\n" in module and f"ZERO_MARKS_PPL = {ZERO}\n" in module
    assert module.count("\n") == NUMBERS.count("\n")  # only the two lines change
    assert with_thresholds(NUMBERS, rubric.FULL_MARKS_PPL, rubric.ZERO_MARKS_PPL) == NUMBERS
    section = grading_section(FULL, ZERO)
    assert f"at most {FULL} (the pass mark), none at {ZERO} or more" in section, section
    with pytest.raises(HandoutError, match="on one line"):
        with_thresholds(NUMBERS + f"FULL_MARKS_PPL = {rubric.FULL_MARKS_PPL}\n", FULL, ZERO)


def test_make_autograde_refuses_what_the_handout_does_not_state(tmp_path):
    """Beside a handout stating FULL and ZERO, or without one (then what make handout would
    state), a grader of other thresholds is refused with the command that builds both."""
    handout = tmp_path / "dist" / "handout"
    (handout / rescore.NUMBERS_MODULE).parent.mkdir(parents=True)
    (handout / rescore.NUMBERS_MODULE).write_text(with_thresholds(NUMBERS, FULL, ZERO))
    assert make_autograde.handout_disagreement(handout, FULL, ZERO) == ""
    refused = make_autograde.handout_disagreement(handout, rubric.FULL_MARKS_PPL, ZERO)
    assert f"full_marks_ppl {FULL} there, {rubric.FULL_MARKS_PPL} here" in refused, refused
    assert (f"`make handout autograde ARGS='--full-marks-ppl {rubric.FULL_MARKS_PPL} "
            f"--zero-marks-ppl {ZERO}'`") in refused, refused
    alone = tmp_path / "alone" / "handout"
    assert make_autograde.handout_disagreement(alone, rubric.FULL_MARKS_PPL,
                                               rubric.ZERO_MARKS_PPL) == ""
    assert "what `make handout` writes" in make_autograde.handout_disagreement(alone, FULL, ZERO)
    with pytest.raises(SystemExit, match="make handout autograde"):
        make_autograde.main(["--out", str(tmp_path / "dist"), "--hidden-chars", "1000"])
    assert not (tmp_path / "dist" / "autograde.tar").exists()


def test_make_passes_args_to_both_builders():
    """``make handout autograde ARGS=...`` (the command the refusal names) gives both builders the
    thresholds: ARGS is not dropped."""
    args = "--full-marks-ppl 7.0 --zero-marks-ppl 9.0"
    dry = subprocess.run(["make", "-n", "--no-print-directory", "handout", "autograde",
                          f"ARGS={args}"], cwd=REPO, capture_output=True, text=True,
                         check=True).stdout
    for tool in ("make_handout", "make_autograde"):
        assert f"-m tools.{tool} {args}\n" in dry, dry


@pytest.mark.slow  # builds the handout of the repository and a small grader
def test_a_handout_and_a_grader_built_with_other_thresholds_agree(tmp_path, capsys):
    dist = tmp_path / "dist"
    thresholds = ["--full-marks-ppl", str(FULL), "--zero-marks-ppl", str(ZERO)]
    make_handout.main(["--out", str(dist / "handout"), "--no-tar", "--no-import-check",
                       *thresholds])
    make_autograde.main(["--out", str(dist), "--hidden-chars", "1000", *thresholds])
    with tarfile.open(dist / "autograde.tar") as tar:
        info = json.loads(tar.extractfile("autograde/build_info.json").read())
    readme = (dist / "handout" / "README.md").read_text()
    told = stated_numbers((dist / "handout" / rescore.NUMBERS_MODULE).read_text())
    assert told == {"rubric": info["rubric"], **info["lm_thresholds"]} == {
        "rubric": rubric.RUBRIC, "full_marks_ppl": FULL, "zero_marks_ppl": ZERO}, (told, info)
    assert grading_section(FULL, ZERO) in readme
    assert f"at most {rubric.FULL_MARKS_PPL} (" not in readme
    assert make_handout.stale_grader(dist / "handout") == ""
    (dist / "handout" / rescore.NUMBERS_MODULE).write_text(NUMBERS)  # as a default build states
    stale = make_handout.stale_grader(dist / "handout")
    assert f"--full-marks-ppl {rubric.FULL_MARKS_PPL}" in stale, stale
