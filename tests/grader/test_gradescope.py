# hw4p1: instructor-only
"""Tests of the Gradescope packaging (dist/gradescope.zip, autograder/judging/gradescope.py).

    .venv/bin/python -m pytest -q tests/grader/test_gradescope.py

The zip built by ``make_autograde.build`` is unpacked into a fake ``AUTOGRADER_ROOT`` (source/,
submission/handin.tar, results/) and its ``run_autograder`` is run as Gradescope would; results.json
is checked against Gradescope's specification (required keys and types, per-test scores adding up
to the score) and against the Autolab run of the same handin.
"""
import json
import os
import tarfile
import zipfile

import pytest

from autograder.judging import gradescope
from autograder.judging.scoring import rubric
from tests.grader.autograder_helpers import (TEST_FULL_MARKS_PPL, TEST_ZERO_MARKS_PPL,
                                             attack_handin, built_autograder,
                                             copy_reference_mytorch, honest_scores,
                                             make_model_handin, pack_folder,
                                             run_grader)
from tests.grader.test_autograder_e2e import ATTACKS, import_without_site_packages
from tests.grader.attack_handins import (MYTORCH_ZERO, SNOOP_INIT, category_totals, check_spec,
                                         read_hidden_lines, run_autograder, unpack_root)


def test_zip_holds_gradescopes_entry_points_and_the_judge():
    with zipfile.ZipFile(built_autograder() / "gradescope.zip") as archive:
        infos = {info.filename: info for info in archive.infolist()}
        setup = archive.read("setup.sh").decode()
        run = archive.read("run_autograder").decode()
    for name in ("setup.sh", "run_autograder", "requirements-grader.txt", "autograde.tar",
                 "autograde-Makefile", "autograder/judging/gradescope.py",
                 "autograder/judging/scoring/rubric.py",
                 "hw4lib/handin_format.py"):
        assert name in infos, f"{name} missing from gradescope.zip: {sorted(infos)}"
    for name in ("setup.sh", "run_autograder"):
        assert infos[name].external_attr >> 16 & 0o111, f"{name} is not executable"
    assert "bubblewrap" in setup and "-r /autograder/source/requirements-grader.txt" in setup
    assert "requirements.txt" not in infos, "the grading image installs grading's packages only"
    assert "AUTOGRADER_ROOT" in run and "results.json" in run


def test_adapter_and_its_autograde_tar_import_without_site_packages(tmp_path):
    """The adapter runs on the zip's files alone; the grader inside is the Autolab archive, shared
    handin rules (hw4lib/handin_format.py) included, which import without site-packages too."""
    source = unpack_root(tmp_path, None) / "source"
    import_without_site_packages(source, ("autograder.judging.gradescope",
                                          "autograder.judging.scoring.rubric",
                                          "hw4lib.handin_format"))
    inner = (source / "autograde.tar").read_bytes()
    assert inner == (built_autograder() / "autograde.tar").read_bytes(), (
        "gradescope.zip must carry the Autolab autograde.tar unchanged")
    with tarfile.open(source / "autograde.tar") as tar:
        tar.extractall(tmp_path / "inner", filter="data")
    import_without_site_packages(tmp_path / "inner/autograde",
                                 ("hw4lib.handin_format", "autograder.judging.intake.safe_tar"))


@pytest.mark.slow  # measured: make slow-tests, docs/results.md
def test_results_are_always_valid_json_even_without_a_submission(tmp_path):
    garbage = tmp_path / "garbage.tar"
    garbage.write_bytes(b"not a tar at all\n" * 50)
    for name, handin in (("garbage", garbage), ("nothing", None)):
        folder = tmp_path / name
        folder.mkdir()
        results = run_autograder(unpack_root(folder, handin))
        check_spec(results)
        assert results["score"] == 0.0, (name, results["score"])
    assert "No handin.tar was found" in results["output"]
    payload = gradescope.failure_results("broken")
    check_spec(payload)


@pytest.mark.slow
def test_honest_broken_and_hostile_handins_match_the_autolab_scores(tmp_path):
    """For the same handin, Gradescope's per-category totals equal the Autolab run's scores; the
    hidden tests are hidden until the due date and carry their shares."""
    honest = attack_handin(tmp_path / "honest", "", None)
    parameters = sum(p.numel() for p in make_model_handin(tmp_path / "count").parameters())
    model_only = tmp_path / "model_only"
    make_model_handin(model_only / "handin")
    init_code, nn_code, _ = ATTACKS["forged_line_then_os_exit"]
    cases = {"honest": (honest, honest_scores()),
             "broken": (pack_folder(model_only / "handin", model_only / "handin.tar"),
                        {**MYTORCH_ZERO, "LanguageModel": honest_scores()["LanguageModel"]}),
             "forged": (attack_handin(tmp_path / "forged", init_code, nn_code),
                        {**MYTORCH_ZERO, "LanguageModel": honest_scores()["LanguageModel"]})}
    for name, (handin, autolab) in cases.items():
        folder = tmp_path / f"gs-{name}"
        folder.mkdir()
        results = run_autograder(unpack_root(folder, handin))
        check_spec(results)
        assert category_totals(results) == autolab, (name, category_totals(results), autolab)
        assert results["score"] == pytest.approx(sum(autolab.values())), name
        hidden = [t for t in results["tests"] if not t["name"].startswith("LanguageModel")]
        assert len(hidden) > len(rubric.MYTORCH_RUBRIC), f"{name}: one test per hidden test"
        assert {t["visibility"] for t in hidden} == {"after_due_date"}, name
        if name == "honest":
            assert all(t["status"] == "passed" for t in hidden)
        else:
            assert all(t["score"] == 0 and "What differed" in t["output"] for t in hidden), name
        # the leaderboard: the judge's own measurement, ascending perplexity first
        board = {entry["name"]: entry for entry in results["leaderboard"]}
        perplexity = board["Perplexity (hidden set)"]
        assert perplexity["order"] == "asc" and perplexity["value"] > 1.0, results["leaderboard"]
        assert rubric.lm_score(perplexity["value"], TEST_FULL_MARKS_PPL, TEST_ZERO_MARKS_PPL) \
            == pytest.approx(autolab["LanguageModel"], abs=0.01)
        assert board["Parameters"]["value"] == parameters and board["Tokenizer"]["value"] == "char"
        # the visible output: category totals, never a hidden test's details
        assert "Total" in results["output"] and "What differed" not in results["output"], name
        assert not any(t["output"].split("\n")[-1] in results["output"] for t in hidden
                       if "What differed" in t["output"]), name


@pytest.mark.slow
def test_a_failed_hidden_test_shows_the_likely_cause_on_both_platforms(tmp_path):
    """A mytorch whose Linear forgets the bias: Autolab's output and Gradescope's per-test output
    give that family's hint under every failed Linear test, point every failed MultiHeadAttention
    test (whose projections are Linears) to Linear, and say nothing under passed tests."""
    handin = tmp_path / "handin"
    make_model_handin(handin)
    linear = copy_reference_mytorch(handin) / "nn" / "linear.py"
    linear.write_text(linear.read_text().replace("Z += self.b\n", "Z += 0.0\n"))
    tar = pack_folder(handin, tmp_path / "handin.tar")
    hints = {"Linear": "Z is off by the same vector in every row",
             "MultiHeadAttention": "MultiHeadAttention calls your Linear, which fails its own"}
    (tmp_path / "autolab").mkdir()
    lines, scores = run_grader(tmp_path / "autolab", tar)
    assert scores["Linear"] < rubric.MYTORCH_RUBRIC["Linear"], scores
    causes = [line for line in lines if "likely cause:" in line]
    assert causes and all(any(hint in line for hint in hints.values()) for line in causes), causes
    (tmp_path / "gs").mkdir()
    results = run_autograder(unpack_root(tmp_path / "gs", tar))
    failed = [t for t in results["tests"] if t["status"] == "failed"
              and t["tags"][0] in rubric.MYTORCH_RUBRIC]
    assert {t["tags"][0] for t in failed} == set(hints), failed
    assert all(f"Likely cause: {hints[t['tags'][0]]}" in t["output"] for t in failed), failed
    assert not any("Likely cause" in t["output"] for t in results["tests"]
                   if t["status"] == "passed")


@pytest.mark.slow
def test_hidden_material_is_unreadable_and_nothing_the_worker_prints_is_shown(tmp_path):
    """A mytorch that looks for source/autograde.tar (0644 as Gradescope unpacks it), the grading
    folder's copy and its extraction, in every sandbox mode this machine offers (setpriv is what
    Gradescope's containers give): it finds nothing and keeps full marks; what it prints reaches
    neither results.json nor the feedback; source/autograde.tar is gone after grading."""
    from autograder.judging.isolation import sandbox_modes
    from tests.grader.autograder_helpers import session_folder

    hidden = read_hidden_lines(built_autograder() / "autograde.tar")
    modes = [""] + (["--sandbox setpriv"] if os.geteuid() == 0 and "setpriv" in sandbox_modes.MODES
                    else [])
    for flags in modes:
        folder = session_folder("hw4p1-gs-snoop-")
        folder.chmod(0o755)  # like /autograder: every user may traverse it
        root_source = folder / "autograder/source/autograde.tar"
        handin = attack_handin(folder, f"SOURCE_TAR = {str(root_source)!r}\n{SNOOP_INIT}", None)
        root = unpack_root(folder, handin)
        assert root_source.is_file() and root_source.stat().st_mode & 0o004
        results = run_autograder(root, *(["--grader-flags", flags] if flags else []))
        check_spec(results)
        text = json.dumps(results)
        assert category_totals(results) == honest_scores(), (flags, category_totals(results))
        assert "LEAKED" not in text and "SNOOPED_NOTHING" not in text, flags
        assert not any(line in text for line in hidden if len(line) > 20), flags
        assert not root_source.exists(), "source/autograde.tar must be deleted once copied"
