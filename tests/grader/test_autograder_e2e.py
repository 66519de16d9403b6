# hw4p1: instructor-only
"""End-to-end tests of the Autolab autograder (autograder/, tools/make_autograde.py): the autograder
is built once per test process into a temporary folder (``make_autograde.build``), then handins
are graded as Autolab does (``make`` in a folder holding the Makefile, autograde.tar and
handin.tar), checking the scores line, the report, and that nothing changed outside the grading
folder: an honest handin with edited metrics, each attack of the threat model, the weaker sandbox
modes, broken handins, the Makefile's fallback and the autograde.tar build.

    .venv/bin/python -m pytest -q tests/grader/test_autograder_e2e.py
"""
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import time
from pathlib import Path

import pytest
import torch
import yaml


from autograder.sandboxed import landlock
from autograder.judging.isolation import sandbox, sandbox_modes, worker_folders
from autograder.judging.scoring import report, rubric
from hw4lib.data import H4Tokenizer
from hw4lib.data.tokenizer import DEFAULT_TOKEN_MAP
from hw4lib.handin_format import sample_size, transcripts_sha256
from hw4lib.model import DecoderOnlyTransformer
from tests.grader.autograder_helpers import (REPO_ROOT, TEST_FULL_MARKS_PPL, TEST_HIDDEN_CHARS,
                                             TEST_ZERO_MARKS_PPL, TINY_MODEL, ZEROS_NN,
                                             alias_bomb_config, attack_handin, autolab_make,
                                             build_autograder, built_autograder,
                                             copy_reference_mytorch, deflate_zip,
                                             direct_perplexity_char, honest_scores,
                                             make_model_handin, make_run_folder, open_folder,
                                             pack_folder, regular, run_grader, write_tar)
from tests.grader.attack_handins import (FULL_LINE, HIDDEN_PARTITION_MEMBER, MYTORCH_ZERO, STUB_NN,
                                         read_hidden_lines, replay_handin)


# ------------------------------------------------------------------------------------------------
# End to end: make in a grading folder, as Autolab does
# ------------------------------------------------------------------------------------------------

PUBLIC_PARTITION_MEMBER = "autograde/autograder/public_test/test"


def import_without_site_packages(folder: Path, modules: tuple[str, ...]) -> dict[str, str]:
    """Import ``modules`` from ``folder`` in a fresh interpreter without site-packages (so without
    torch or numpy); return {module: the file it came from}. Fails unless every module imports,
    from ``folder``, and pulls in nothing outside the standard library."""
    code = ("import importlib, json, sys\n"
            f"files = {{name: importlib.import_module(name).__file__ for name in {modules!r}}}\n"
            "assert not {'torch', 'numpy', 'yaml'} & set(sys.modules), sorted(sys.modules)\n"
            "print(json.dumps(files))\n")
    process = subprocess.run([sys.executable, "-S", "-E", "-c", code], cwd=folder,
                             capture_output=True, text=True, timeout=60)
    assert process.returncode == 0, f"{modules} do not import from {folder}: {process.stderr}"
    files = json.loads(process.stdout)
    outside = {name: file for name, file in files.items()
               if not Path(file).resolve().is_relative_to(folder.resolve())}
    assert not outside, f"imported from outside {folder}: {outside}"
    return files


def reported_perplexity(lines: list[str]) -> float:
    found = [re.search(r"perplexity on the hidden test set: ([0-9.]+)", line) for line in lines]
    values = [float(match.group(1)) for match in found if match]
    assert len(values) == 1, "\n".join(lines[-60:])
    return values[0]


@pytest.mark.slow
def test_good_handin_with_edited_metrics_is_graded_on_its_weights(tmp_path):
    from autograder.build_time.hidden_data import public_splits
    from hw4lib.handin import pack

    student = tmp_path / "student"
    copy_reference_mytorch(student)
    tokenizer = H4Tokenizer(DEFAULT_TOKEN_MAP, "char")
    torch.manual_seed(0)
    model = DecoderOnlyTransformer(**TINY_MODEL, num_classes=tokenizer.vocab_size)
    measured_set = public_splits(0)["test"][:40]  # a run with data.subset < 1 measures a prefix
    make_run_folder(student, model.state_dict(), reported_ppl=1.0, test_lines=measured_set)
    pack(student, "run", student / "handin.tar")  # the real `make handin`

    details_path = tmp_path / "grading/details.json"  # what the staff see (the regrade's CSV)
    lines, scores = run_grader(tmp_path, student / "handin.tar",
                               f"--results-json {details_path}")
    details = report.load(details_path)  # as every class tool reads it
    text = "\n".join(lines)
    for category, points in rubric.MYTORCH_RUBRIC.items():
        assert scores[category] == points, (category, text[-4000:])
    # The language model is scored on the perplexity its weights give on the hidden set, measured
    # here independently; the 1.0 the student reported changes nothing. The feedback shows it to
    # two decimals, details.json in full.
    measured = details.lm.perplexity_char
    hidden = read_hidden_lines(built_autograder() / "autograde.tar")
    direct = direct_perplexity_char(model, tokenizer, hidden)
    assert measured == pytest.approx(direct, rel=1e-5)
    assert reported_perplexity(lines) == round(measured, 2)
    assert 0 < scores["LanguageModel"] < rubric.LM_POINTS
    assert scores["LanguageModel"] == rubric.lm_score(measured, TEST_FULL_MARKS_PPL,
                                                      TEST_ZERO_MARKS_PPL)
    assert "reports 1.0000" in text
    # Autolab's scoreboard shows the measurement, never the 1.0 the handin claims
    parameters = sum(p.numel() for p in model.parameters())
    assert json.loads(lines[-1])["scoreboard"] == [round(measured, 2), parameters, "char"]
    # The weights agree with the run card make handin wrote; the 1.0 the run reports on its test
    # set is flagged for the staff against what the weights give on the hidden set (whatever the
    # card says) and on the card's very transcripts (their per-transcript losses, a sample of them
    # re-measured here). The student's feedback only says that remarks were recorded.
    compared = direct_perplexity_char(model, tokenizer, measured_set)
    assert details.status is report.Status.OK
    with tarfile.open(student / "handin.tar") as tar:  # the judge hashed the weights it graded
        weights = tar.extractfile("handin/model_state_dict.pt").read()
    assert details.weights_sha256 == hashlib.sha256(weights).hexdigest()
    assert details.flags == [
        f"test_metrics.json reports a test perplexity of 1.0000; these weights give "
        f"{measured:.2f} on the hidden test set, {measured - 1:.0%} above it (honest runs: at "
        f"most 25% above their report)",
        f"test_metrics.json reports a test perplexity of 1.0000; these weights give "
        f"{compared:.4f} on the same 40 transcripts (split 'test', subset 1.0) (the sum of "
        f"run_card.json's per-transcript losses; the {len(details.lm.compared_sample['indices'])}"
        f" of them re-measured here agree): {abs(1 - compared) / compared:.1%} apart, more than "
        f"2%"], details.flags
    assert len(details.lm.compared_sample["drawn"]) == sample_size(40)
    assert "2 remark(s)" in text and "a test perplexity of" not in text

    # The same handin with other weights, a config of another dropout and edited metrics: each
    # disagreement with run_card.json is flagged for the staff, and the score is the measurement's.
    tampered = tmp_path / "tampered"
    with tarfile.open(student / "handin.tar") as tar:
        tar.extractall(tampered, filter="data")
    torch.manual_seed(1)
    other = DecoderOnlyTransformer(**TINY_MODEL, num_classes=tokenizer.vocab_size)
    torch.save(other.state_dict(), tampered / "handin/model_state_dict.pt")
    config = yaml.safe_load((tampered / "handin/config.yaml").read_text())
    config["model"]["dropout"] = 0.25
    (tampered / "handin/config.yaml").write_text(yaml.safe_dump(config))
    (tampered / "handin/test_metrics.json").write_text('{"perplexity_char": 0.9}')
    (tmp_path / "again").mkdir()
    details_path = tmp_path / "again/grading/details.json"
    lines, scores = run_grader(tmp_path / "again", pack_folder(tampered / "handin",
                                                               tmp_path / "tampered.tar"),
                               f"--results-json {details_path}")
    flags = "\n".join(json.loads(details_path.read_text())["flags"])
    assert "model_state_dict.pt's sha256 is" in flags, flags
    assert "config.yaml's model and tokenizer digest is" in flags
    assert "test_metrics.json reports a test perplexity of 0.9000, run_card.json 1.0000" in flags
    assert ("test_metrics.json reports a test perplexity of 0.9000; run_card.json's per-transcript "
            "losses give") in flags
    assert "test transcripts re-measured here" in flags
    assert "on the hidden test set" in flags, flags
    assert "6 remark(s)" in "\n".join(lines) and "a test perplexity of" not in "\n".join(lines)
    remeasured = json.loads(details_path.read_text())["lm"]["perplexity_char"]
    assert scores["LanguageModel"] == rubric.lm_score(remeasured, TEST_FULL_MARKS_PPL,
                                                      TEST_ZERO_MARKS_PPL)
    # the secrets were deleted before student code ran
    grading = tmp_path / "grading"
    assert not (grading / "autograde.tar").exists()
    assert not (grading / "autograde/hw4lib").exists()
    assert not (grading / "autograde/autograder/hidden_set").exists()
    assert not (grading / "autograde/autograder/judging/scoring/hidden_tests").exists()
    assert (grading / "autograde").stat().st_mode & 0o077 == 0, "the extraction stays private"
    assert "secrets" not in text and "seed" not in text.lower(), "the seed is never shown"


# ------------------------------------------------------------------------------------------------
# Attacks: each builds a malicious handin, grades it through make, and checks the exact scores
# ------------------------------------------------------------------------------------------------

# Values no numeric check may accept: NaN, strings, a 256 MiB array, Python objects.
BAD_VALUES_NN = """
import numpy as np
class _Bad:
    value = None
    def __init__(self, *args, **kwargs): pass
    def __getattr__(self, name):
        return lambda *args, **kwargs: self.value
class Linear(_Bad): value = np.full((2, 2), np.nan)
class Softmax(_Bad): value = np.array(["a", "b"])
class ScaledDotProductAttention(_Bad): value = np.zeros(2**25)
class MultiHeadAttention(_Bad): value = [object(), object()]
"""
ATTACKS = {  # name: (code run when mytorch is imported, mytorch.nn, grader flags)
    "forged_line_then_os_exit": (f"import os\nprint({FULL_LINE!r}, flush=True)\nos._exit(0)\n",
                                 STUB_NN, ""),
    "forged_line_from_atexit": (f"import atexit\natexit.register(print, {FULL_LINE!r})\n",
                                STUB_NN, ""),
    "kill_the_grader_through_proc": (f"""
import os, signal
pid = os.getpid()
for _ in range(30):
    try:
        pid = int(open(f"/proc/{{pid}}/stat").read().rsplit(")", 1)[1].split()[1])
    except (OSError, ValueError):
        break
    if pid <= 0:
        break
    for fd in (1, 2):
        try:
            with open(f"/proc/{{pid}}/fd/{{fd}}", "w") as out:
                out.write({FULL_LINE!r} + "\\n")
        except OSError:
            pass
    for sig in (signal.SIGSTOP, signal.SIGKILL):
        try:
            os.kill(pid, sig)
        except OSError:
            pass
try:
    os.kill(-1, signal.SIGKILL)
except OSError:
    pass
""", STUB_NN, ""),
    "setsid_double_fork_survivor": (f"""
import os
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        os.execv("/bin/sh", ["sh", "-c", "sleep 7.25; echo '{FULL_LINE}'"])
    os._exit(0)
""", STUB_NN, ""),
    "patch_the_harness": ("""
import sys, numpy as np
np.array_equal = np.allclose = lambda *args, **kwargs: True
np.testing.assert_allclose = lambda *args, **kwargs: None
main = sys.modules.get("__main__")
for name in list(vars(main)) if main else []:
    if callable(getattr(main, name)):
        setattr(main, name, lambda *args, **kwargs: None)
worker = sys.modules.get("autograder.sandboxed.worker")
if worker is not None:
    worker.run_test = lambda nn, folder, test: worker.wire.encode_record(test, None, {})
""", ZEROS_NN, ""),
    "torch_instead_of_numpy": ("import torch\n", None, ""),
    "fork_bomb": ("""
import os, time
for _ in range(7):
    try:
        os.fork()
    except OSError:
        pass
while True:
    time.sleep(1)
""", STUB_NN, "--mytorch-timeout 4"),
    "flood_then_hang": ("""
import sys
for _ in range(100_000):
    sys.stdout.write("flood " * 40 + "\\x1b[31m\\n")
while True:
    pass
""", STUB_NN, "--mytorch-timeout 4"),
    "values_that_are_not_arrays": ("", BAD_VALUES_NN, ""),
}


def survivors(marker: str) -> list[int]:
    """Live processes whose command line contains ``marker``."""
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            if marker.encode() in cmdline.read_bytes() and not _is_zombie(cmdline.parent):
                found.append(int(cmdline.parent.name))
        except OSError:
            pass
    return found


def _is_zombie(proc: Path) -> bool:
    try:
        return (proc / "stat").read_text().rsplit(") ", 1)[1][:1] in "ZX"
    except OSError:
        return True


SKIPS_ALLOWED = "HW4P1_ALLOW_SECURITY_SKIPS"  # set to 1 to let the attack tests skip


def require_isolation() -> str:
    """The sandbox mode the grader picks on this machine (probed in a folder its uid can reach,
    as the grading folders of these tests are). When that is 'none' (unisolated: the attacks
    would hit the test run itself) the test FAILS, naming what to install, unless
    HW4P1_ALLOW_SECURITY_SKIPS=1 lets it skip: a security test never skips unnoticed."""
    probe = open_folder("hw4p1-probe-")
    chosen, notes = sandbox.choose(worker_folders.worker_layout(probe),
                                   sandbox.python_executable())
    shutil.rmtree(probe)
    mode = chosen.mode.name if chosen is not None else None
    if mode == "none":
        message = (f"no sandbox mode isolates student code here ({notes}); install bubblewrap or "
                   f"run as root (setpriv)")
        if os.environ.get(SKIPS_ALLOWED) != "1":
            pytest.fail(f"{message}; or set {SKIPS_ALLOWED}=1 to skip the attack tests")
        pytest.skip(message)
    return mode


@pytest.mark.slow
@pytest.mark.parametrize("attack", list(ATTACKS))
def test_attack_on_mytorch_scores_zero_there_and_keeps_the_rest(attack):
    require_isolation()
    folder = open_folder(f"hw4p1-attack-{attack}-")
    init_code, nn_code, flags = ATTACKS[attack]
    lines, scores = run_grader(folder, attack_handin(folder, init_code, nn_code), flags)
    text = "\n".join(lines)
    expected = {**MYTORCH_ZERO, "LanguageModel": honest_scores()["LanguageModel"]}
    assert scores == expected, f"{attack}: expected {expected}, got {scores}\n{text[-4000:]}"
    assert "The autograder itself failed" not in text, text[-4000:]
    assert lines.count(FULL_LINE) == 0, "a forged scores line reached the grader's output"
    assert len(text.encode()) < 200_000, "the student's output reached the grader's unbounded"
    assert "\x1b" not in text
    if attack == "torch_instead_of_numpy":
        assert "mytorch must be written with numpy only: it imports torch" in text
    if attack == "setsid_double_fork_survivor":
        time.sleep(0.5)
        assert not survivors("sleep 7.25"), "a detached process outlived the grading"
    if attack == "fork_bomb":
        assert "time limit" in text


@pytest.mark.slow
def test_snooping_and_writing_outside_the_sandbox_change_nothing():
    """Honest code that also prints what it can find of the grader and writes where it should
    not: full marks for the code, no secret in the output, nothing written."""
    require_isolation()
    tmp_path = open_folder("hw4p1-snoop-")
    grading = tmp_path / "grading"
    targets = [grading / "autograde/resource.py",
               grading / "autograde/autograder/judging/scoring/rubric.py",
               grading / "work/sandbox/runtime/autograder/sandboxed/wire.py", grading / "Makefile",
               tmp_path / "outside.txt", Path("/tmp/hw4p1-written-by-student.txt"),
               Path("autograde/resource.py"), Path("../autograde/resource.py")]
    snoop = f"""
import os, time
import numpy as np
start = time.time()
for top in ("/", os.path.expanduser("~"), {str(grading)!r}, "/proc/1/root", "..", "../.."):
    for folder, _, files in os.walk(top):
        if time.time() - start > 3:
            break
        for name in files:
            path = os.path.join(folder, name)
            try:
                if name in ("mytorch_hidden.py", "grade.py", "build_info.json"):
                    print(open(path).read()[:3000])
                elif name.endswith(".npy") and "hidden_set" in folder:  # a hidden transcript
                    print("".join(np.load(path).tolist()))
            except (OSError, ValueError):
                pass
for target in {[str(t) for t in targets]!r}:
    try:
        with open(target, "a") as out:
            out.write("import os\\n")
    except OSError:
        pass
"""
    lines, scores = run_grader(tmp_path, attack_handin(tmp_path, snoop, None))
    text = "\n".join(lines)
    assert scores == honest_scores(), text[-4000:]
    assert "def sdpa_against_explicit_torch_formula" not in text, "the hidden tests leaked"
    hidden_line = read_hidden_lines(built_autograder() / "autograde.tar")[0]
    assert hidden_line not in text, "the hidden set leaked"
    assert not (grading / "autograde/resource.py").exists()
    assert "import os" not in (grading / "Makefile").read_text()
    assert not Path("/tmp/hw4p1-written-by-student.txt").exists()
    assert not (tmp_path / "outside.txt").exists()


@pytest.mark.slow
@pytest.mark.long
def test_bad_side_files_cost_only_their_own_category(tmp_path):
    """test_metrics.json bombs change nothing; a YAML alias bomb and a deflated .pt cost only the
    language model, with a bounded message."""
    honest = honest_scores()
    cases = {}
    folder = tmp_path / "metrics"
    handin = folder / "handin"
    make_model_handin(handin)
    copy_reference_mytorch(handin)
    (handin / "test_metrics.json").write_text(
        '{"perplexity_char": 1' + "0" * 400 + ', "nested": ' + "[" * 100_000 + "]" * 100_000 + "}")
    cases["metrics"] = (pack_folder(handin, folder / "handin.tar"), honest, None)
    folder = tmp_path / "yaml"
    handin = folder / "handin"
    make_model_handin(handin)
    copy_reference_mytorch(handin)
    (handin / "config.yaml").write_text(alias_bomb_config())
    cases["yaml"] = (pack_folder(handin, folder / "handin.tar"),
                     {**honest, "LanguageModel": 0},
                     "model.num_layers': input should be a valid integer")
    folder = tmp_path / "deflated"
    handin = folder / "handin"
    make_model_handin(handin)
    copy_reference_mytorch(handin)
    deflate_zip(handin / "model_state_dict.pt")
    cases["deflated"] = (pack_folder(handin, folder / "handin.tar"),
                         {**honest, "LanguageModel": 0}, "compressed entries")
    for name, (tar_path, expected, message) in cases.items():
        lines, scores = run_grader(tar_path.parent, tar_path)
        text = "\n".join(lines)
        assert scores == expected, f"{name}: expected {expected}, got {scores}\n{text[-3000:]}"
        assert "The autograder itself failed" not in text and len(text) < 100_000, text[-3000:]
        if message:
            assert message in text, (name, text[-3000:])


@pytest.mark.slow
def test_replaying_an_earlier_gradings_results_scores_zero(tmp_path):
    """A mytorch whose classes all raise NotImplementedError, which writes the worker's result
    stream of an earlier grading of the reference mytorch straight to the result fd: the inputs
    are drawn afresh, so the recorded values match nothing."""
    lines, scores = run_grader(tmp_path, replay_handin(tmp_path))
    text = "\n".join(lines)
    expected = {**MYTORCH_ZERO, "LanguageModel": honest_scores()["LanguageModel"]}
    assert scores == expected, f"replay: expected {expected}, got {scores}\n{text[-4000:]}"


@pytest.mark.slow
def test_pythonoptimize_in_the_grading_environment_changes_nothing(tmp_path):
    """PYTHONOPTIMIZE=1 set where make runs: the Makefile unexports it, and the checks are not
    asserts anyway; a mytorch returning zeros earns nothing."""
    lines, scores = run_grader(tmp_path, attack_handin(tmp_path, "", ZEROS_NN),
                               environment={"PYTHONOPTIMIZE": "1"})
    expected = {**MYTORCH_ZERO, "LanguageModel": honest_scores()["LanguageModel"]}
    assert scores == expected, "\n".join(lines)[-4000:]
    assert "refuses to run" not in "\n".join(lines), "the Makefile must clear PYTHONOPTIMIZE"


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["setpriv", "unshare", "none"])
def test_weaker_sandbox_modes_still_grade_and_hold(tmp_path, mode):
    """Each fallback mode, forced: the grader-killing attack still scores 0 for mytorch and the
    honest model keeps its points; 'none' grades honest code and warns. A root judge refuses
    unshare (the worker would be host root inside), so as root that case grades in the laptop
    profile, as an unprivileged user (tools/platform_profiles.py)."""
    profile = "laptop" if mode == "unshare" and os.geteuid() == 0 else "host"
    reason = None if profile == "laptop" else sandbox_modes.MODES[mode].unavailable()
    if reason is not None:
        pytest.skip(f"{mode} cannot run here: {reason}")
    init_code, nn_code, _ = ATTACKS["kill_the_grader_through_proc"]
    if mode == "none":
        init_code, nn_code = "", None  # unisolated, the attack would kill the test's own make
    folder = open_folder(f"hw4p1-{mode}-")
    lines, scores = run_grader(folder, attack_handin(tmp_path, init_code, nn_code),
                               f"--sandbox {mode}", profile=profile)
    text = "\n".join(lines)
    if "does not work here, so student code was not run" in text:
        assert scores == {**MYTORCH_ZERO, "LanguageModel": honest_scores()["LanguageModel"]}
        pytest.skip(f"{mode} is installed but does not work here: "
                    f"{[line for line in lines if 'not used' in line]}")
    if mode == "none":
        isolation = ("confined by its Landlock layer only" if landlock.abi_version()
                     else "WARNING: student code ran UNISOLATED")
        assert scores == honest_scores() and isolation in text, text[-3000:]
    else:
        expected = {**MYTORCH_ZERO, "LanguageModel": honest_scores()["LanguageModel"]}
        assert scores == expected, f"{mode}: {scores}\n{text[-3000:]}"
        assert sandbox_modes.MODES[mode].summary in text


# ------------------------------------------------------------------------------------------------
# Broken handins, the Makefile's fallback, the autograde.tar build
# ------------------------------------------------------------------------------------------------

@pytest.mark.slow  # measured: make slow-tests, docs/results.md
def test_garbage_missing_incomplete_and_slow_handins_score_zero(tmp_path):
    (tmp_path / "garbage.tar").write_bytes(b"this is not a tar file\n" * 100)
    metrics_only = write_tar(tmp_path / "metrics_only.tar",
                             [regular("handin/test_metrics.json", b'{"perplexity_char": 1.0}')])
    make_model_handin(tmp_path / "model")
    model_only = write_tar(tmp_path / "model_only.tar", [
        regular(f"handin/{name}", (tmp_path / "model" / name).read_bytes())
        for name in ("config.yaml", "model_state_dict.pt")])
    # (handin, grader flags, messages expected in the report)
    cases = [(tmp_path / "garbage.tar", "", ["not a tar archive"]),
             (None, "", ["no handin.tar"]),
             (metrics_only, "", ["no config.yaml and no model_state_dict.pt", "no mytorch/"]),
             (model_only, "--model-timeout 0.01", ["more than the 0.01 s limit", "no mytorch/"])]
    for index, (handin, flags, messages) in enumerate(cases):
        folder = tmp_path / f"case{index}"
        folder.mkdir()
        lines, scores = run_grader(folder, handin, flags)
        assert scores == rubric.zero_scores(), (handin, scores)
        for message in messages:
            assert message in "\n".join(lines), (message, lines)


def test_makefile_prints_zeros_when_the_driver_cannot_start(tmp_path):
    shutil.copy(built_autograder() / "autograde-Makefile", tmp_path / "Makefile")
    (tmp_path / "autograde.tar").write_bytes(b"broken")
    process = autolab_make([f"PYTHON={sys.executable}"], cwd=tmp_path, timeout=60)
    assert json.loads(process.stdout.splitlines()[-1]) == {"scores": rubric.zero_scores()}


def test_autograde_tar_ships_the_shared_handin_format(tmp_path):
    """The extraction, the rubric and the handin rules they share import from the archive alone,
    before (and without) anything outside the standard library."""
    with tarfile.open(built_autograder() / "autograde.tar") as tar:
        tar.extractall(tmp_path, filter="data")
    files = import_without_site_packages(tmp_path / "autograde", (
        "hw4lib.handin_format", "autograder.judging.scoring.rubric",
        "autograder.judging.intake.safe_tar"))
    assert Path(files["hw4lib.handin_format"]).read_bytes() == (
        REPO_ROOT / "hw4lib/handin_format.py").read_bytes(), (
        f"expected the archive to ship hw4lib/handin_format.py unchanged, got a different "
        f"{files['hw4lib.handin_format']}")


@pytest.mark.slow
def test_build_is_reproducible_and_keeps_the_seed_out(tmp_path):
    from autograder.build_time import hidden_data

    infos = [build_autograder(tmp_path / name) for name in ("first", "second")]
    first, second = (tmp_path / "first/autograde.tar", tmp_path / "second/autograde.tar")
    assert infos[0] == infos[1] and first.read_bytes() == second.read_bytes()
    with tarfile.open(first) as tar:
        names = tar.getnames()
        shipped = b"".join(tar.extractfile(m).read() for m in tar.getmembers() if m.isfile())
    assert str(hidden_data.HIDDEN_SEED).encode() not in shipped
    assert not [name for name in names if name.endswith(("hidden_data.py", "README.md"))
                or name.startswith("autograde/mytorch")]
    for needed in ("autograde/autograder/judging/grade.py", "autograde/autograder/sandboxed/worker.py",
                   "autograde/hw4lib/numeric_truths.py",
                   "autograde/hw4lib/data/tokenizer_jsons/tokenizer_char.json",
                   "autograde/autograder/judging/scoring/hidden_tests/mytorch_hidden.py",
                   "autograde/build_info.json"):
        assert needed in names, needed
    lines = read_hidden_lines(first)
    assert transcripts_sha256(lines) == infos[0]["hidden_set_sha256"]
    assert sum(map(len, lines)) == infos[0]["hidden_chars"] >= TEST_HIDDEN_CHARS
    assert infos[0]["lm_thresholds"] == {"full_marks_ppl": TEST_FULL_MARKS_PPL,
                                         "zero_marks_ppl": TEST_ZERO_MARKS_PPL}
    assert not set(lines) & hidden_data.public_transcripts(infos[0]["public_seed"])
    # The public test split ships as the very files `make data` writes for it
    from datagen import build_data

    build_data.build(tmp_path / "data", seed=infos[0]["public_seed"])
    with tarfile.open(first) as tar:
        shipped = {Path(m.name).name: tar.extractfile(m).read() for m in tar.getmembers()
                   if m.name.startswith(PUBLIC_PARTITION_MEMBER + "/")}
    made = {path.name: path.read_bytes() for path in (tmp_path / "data/test").glob("*.npy")}
    assert shipped == made, f"{len(shipped)} files shipped, {len(made)} written by make data"


# The rooms of autograder/ that grade a handin and ship (autograder/__init__.py), named here apart
# from the build's own list, so that a build shipping another room fails.
GRADING_ROOMS = ("sandboxed", "judging")


@pytest.mark.slow
def test_the_shipped_grader_is_its_two_rooms_and_no_other_file_holds_hidden_text():
    """autograde.tar's grader code is autograder/__init__.py and every source of the grading rooms,
    byte for byte; nothing of the class tools or the build-time secrets; and no shipped file but the
    hidden partition holds a hidden transcript."""
    archive = built_autograder() / "autograde.tar"
    with tarfile.open(archive) as tar:
        files = {m.name: tar.extractfile(m).read() for m in tar.getmembers() if m.isfile()}
    grader = {name.removeprefix("autograde/"): data for name, data in files.items()
              if name.startswith("autograde/autograder/") and name.endswith(".py")}
    sources = [path for room in GRADING_ROOMS
               for path in (REPO_ROOT / "autograder" / room).rglob("*.py")
               if "__pycache__" not in path.parts]
    expected = {"autograder/__init__.py",
                *(path.relative_to(REPO_ROOT).as_posix() for path in sources)}
    assert set(grader) == expected, f"shipped but in no grading room: {set(grader) - expected}; " \
                                    f"in a grading room but not shipped: {expected - set(grader)}"
    assert [path for path in expected if grader[path] != (REPO_ROOT / path).read_bytes()] == []
    hidden = [line.encode() for line in read_hidden_lines(archive) if len(line) >= 20]
    assert len(hidden) > 10, "the hidden set's transcripts could not be read back"
    elsewhere = [name for name, data in files.items()
                 if not name.startswith(HIDDEN_PARTITION_MEMBER + "/")
                 and any(line in data for line in hidden)]
    assert not elsewhere, f"files outside the hidden partition hold hidden transcripts: {elsewhere}"
