# hw4p1: instructor-only
"""Tests of the Autolab autograder (autograder/, tools/make_autograde.py) against its threat model.

    python -m tests.test_autograder     (or: .venv/bin/python -m pytest -q tests/test_autograder.py)

Unit tests check the pieces on hand-built inputs: the handin extraction on archives holding every
kind of hostile member, the model grading on good and broken configs and state dicts, the child
process runner on hangs, floods and huge files. The end-to-end tests build the autograder once per
test process into a temporary folder (``make_autograde.build``), then grade handins as Autolab
does (``make`` in a folder holding the Makefile, autograde.tar and handin.tar) and check the
scores line, the report, and that nothing changed outside the grading folder.
"""
import atexit
import functools
import io
import json
import math
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

import pytest
import torch
import yaml

from autograder import grade, grade_model, rubric
from autograder.safe_tar import HandinError, extract_handin
from hw4lib.data import H4Tokenizer
from hw4lib.data.tokenizer import DEFAULT_TOKEN_MAP
from hw4lib.model import DecoderOnlyTransformer
from tests.testing_framework import rubric as rubric_category, run_module

RUBRIC = {"Handin extraction": 0, "Scoring": 0, "Model grading": 0, "Child processes": 0,
          "End to end": 0}
REPO_ROOT = Path(__file__).resolve().parents[1]
TINY_MODEL = {"num_layers": 1, "d_model": 16, "num_heads": 2, "d_ff": 32, "dropout": 0.0,
              "max_len": 512, "weight_tying": False, "layer_drop_rate": 0.0}


# ------------------------------------------------------------------------------------------------
# Archives and processes
# ------------------------------------------------------------------------------------------------

def regular(name: str, data: bytes = b"x = 1\n") -> tuple[tarfile.TarInfo, bytes]:
    """A regular-file member."""
    info = tarfile.TarInfo(name)
    info.size, info.mode = len(data), 0o644
    return info, data


def special(name: str, kind: bytes, linkname: str = "") -> tuple[tarfile.TarInfo, None]:
    """A member of another type (tarfile.SYMTYPE, LNKTYPE, CHRTYPE, BLKTYPE, FIFOTYPE)."""
    info = tarfile.TarInfo(name)
    info.type, info.linkname = kind, linkname
    return info, None


def write_tar(path: Path, members: list[tuple[tarfile.TarInfo, bytes | None]],
              mode: str = "w", **options) -> Path:
    with tarfile.open(path, mode, **options) as tar:
        for info, data in members:
            tar.addfile(info, io.BytesIO(data) if data is not None else None)
    return path


def tree(folder: Path) -> set[str]:
    """Every path under ``folder``, relative, symlinks included."""
    return {p.relative_to(folder).as_posix() for p in folder.rglob("*")}


def wait_until_dead(pid: int, seconds: float = 5.0) -> bool:
    """True once ``pid`` has exited (a killed orphan may stay a zombie until init reaps it)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(") ", 1)[1][:1]
        except (FileNotFoundError, ProcessLookupError):
            return True
        if state in ("Z", "X"):
            return True
        time.sleep(0.05)
    return False


# ------------------------------------------------------------------------------------------------
# Handin extraction
# ------------------------------------------------------------------------------------------------

@rubric_category("Handin extraction")
def test_expected_files_are_extracted_and_the_rest_skipped(tmp_path):
    members = [regular("handin/config.yaml", b"a: 1\n"),
               regular("handin/model_state_dict.pt", b"\0" * 10),
               regular("handin/mytorch/__init__.py"), regular("./handin/mytorch/nn/linear.py"),
               regular("handin/mytorch/nn/notes.md"), regular("handin/mytorch/nn/bad-name.py"),
               regular("handin/mytorch/nn/__pycache__/linear.cpython-311.pyc"),
               regular("handin/extra.py"), regular("handin/test_metrics.json", b"{}")]
    result = extract_handin(write_tar(tmp_path / "handin.tar", members), tmp_path / "out")
    assert set(result.files) == {"config.yaml", "model_state_dict.pt", "mytorch/__init__.py",
                                 "mytorch/nn/linear.py", "test_metrics.json"}
    assert (tmp_path / "out/config.yaml").read_bytes() == b"a: 1\n"
    assert (tmp_path / "out/mytorch/nn/linear.py").read_bytes() == b"x = 1\n"
    skipped = " ".join(result.notes)
    for name in ("notes.md", "bad-name.py", "linear.cpython-311.pyc", "extra.py"):
        assert name in skipped, (name, result.notes)
    # a handin packed without the leading handin/ folder is read the same way
    flat = write_tar(tmp_path / "flat.tar", [regular("mytorch/nn/linear.py")])
    assert set(extract_handin(flat, tmp_path / "flat").files) == {"mytorch/nn/linear.py"}


@rubric_category("Handin extraction")
def test_hostile_members_are_skipped_and_nothing_lands_outside(tmp_path):
    grading = tmp_path / "grading"
    grading.mkdir()
    members = [
        regular("/tmp/hw4p1_absolute_escape.py"),
        regular("../../../escape_three_up.py"),
        regular("handin/../../../../escape_four_up.py"),
        regular("handin/mytorch/../../../../../escape_from_mytorch.py"),
        special("handin/config.yaml", tarfile.SYMTYPE, "/etc/passwd"),
        # a directory symlink pointing out, then a file "inside" it: naive extraction writes outside
        special("handin/mytorch", tarfile.SYMTYPE, "../../.."),
        special("handin/model_state_dict.pt", tarfile.LNKTYPE, "/etc/passwd"),
        special("handin/mytorch/device.py", tarfile.CHRTYPE),
        special("handin/mytorch/block.py", tarfile.BLKTYPE),
        special("handin/mytorch/fifo.py", tarfile.FIFOTYPE),
        special("handin/mytorch/sparse.py", tarfile.GNUTYPE_SPARSE),
        regular("handin/mytorch/__init__.py", b"GOOD = 1\n"),
    ]
    archive = write_tar(grading / "handin.tar", members, format=tarfile.GNU_FORMAT)
    result = extract_handin(archive, grading / "work/handin")
    assert set(result.files) == {"mytorch/__init__.py"}, result.files
    expected_reasons = ["absolute", "'..'", "'..'", "'..'", "symbolic link", "symbolic link",
                        "hard link", "device or a fifo", "device or a fifo", "device or a fifo",
                        "not a regular file"]
    assert len(result.notes) == len(expected_reasons), result.notes
    for note, reason in zip(result.notes, expected_reasons):
        assert reason in note, (reason, note)
    assert tree(tmp_path) == {"grading", "grading/handin.tar", "grading/work",
                              "grading/work/handin", "grading/work/handin/mytorch",
                              "grading/work/handin/mytorch/__init__.py"}
    assert not (grading / "work/handin/mytorch").is_symlink()
    assert not Path("/tmp/hw4p1_absolute_escape.py").exists()


@rubric_category("Handin extraction")
def test_oversize_duplicate_and_excess_members_are_skipped(tmp_path):
    big_config = regular("handin/config.yaml", b"#" * (rubric.MAX_SMALL_FILE_BYTES + 1))
    big_source = regular("handin/mytorch/big.py", b"#" * (rubric.MAX_PY_FILE_BYTES + 1))
    first = regular("handin/mytorch/nn/linear.py", b"FIRST = 1\n")
    second = regular("handin/mytorch/nn/linear.py", b"SECOND = 1\n")
    archive = write_tar(tmp_path / "a.tar", [big_config, big_source, first, second])
    result = extract_handin(archive, tmp_path / "a")
    assert set(result.files) == {"mytorch/nn/linear.py"}
    assert (tmp_path / "a/mytorch/nn/linear.py").read_bytes() == b"FIRST = 1\n"
    assert [("limit" in note, "twice" in note) for note in result.notes] == [
        (True, False), (True, False), (False, True)]

    # A header declaring a state dict over the limit, with no data behind it: refused from the
    # header alone, before anything is read or written.
    header = tarfile.TarInfo("handin/model_state_dict.pt")
    header.size = rubric.MAX_STATE_DICT_BYTES + 1
    (tmp_path / "huge.tar").write_bytes(header.tobuf(format=tarfile.GNU_FORMAT))
    result = extract_handin(tmp_path / "huge.tar", tmp_path / "huge")
    assert not result.files and any("limit" in note for note in result.notes), result.notes
    # What a decompression bomb shows first: a header declaring more than any handin may hold.
    header = tarfile.TarInfo("handin/padding.bin")
    header.size = rubric.MAX_TAR_BYTES + 1
    (tmp_path / "bomb.tar").write_bytes(header.tobuf(format=tarfile.GNU_FORMAT))
    result = extract_handin(tmp_path / "bomb.tar", tmp_path / "bomb")
    assert not result.files and any("add up to" in note for note in result.notes), result.notes

    many = [regular(f"handin/mytorch/m{i}.py") for i in range(rubric.MAX_MEMBERS + 5)]
    result = extract_handin(write_tar(tmp_path / "many.tar", many), tmp_path / "many")
    assert len(result.files) == rubric.MAX_MEMBERS
    assert any("more than" in note for note in result.notes)


@rubric_category("Handin extraction")
def test_unusable_archives_raise_a_clear_error(tmp_path):
    (tmp_path / "garbage.tar").write_bytes(os.urandom(4096))
    (tmp_path / "empty.tar").write_bytes(b"")
    (tmp_path / "folder.tar").mkdir()
    real = write_tar(tmp_path / "real.tar", [regular("handin/config.yaml")])
    (tmp_path / "link.tar").symlink_to(real)
    for name, message in [("garbage.tar", "not a tar archive"), ("empty.tar", "not a tar archive"),
                          ("missing.tar", "no missing.tar"), ("folder.tar", "not a regular file"),
                          ("link.tar", "not a regular file")]:
        with pytest.raises(HandinError, match=message):
            extract_handin(tmp_path / name, tmp_path / f"out-{name}")
    # a compressed archive is fine
    gz = write_tar(tmp_path / "h.tar.gz", [regular("handin/config.yaml")], "w:gz")
    assert set(extract_handin(gz, tmp_path / "gz").files) == {"config.yaml"}


# ------------------------------------------------------------------------------------------------
# Scoring
# ------------------------------------------------------------------------------------------------

@rubric_category("Scoring")
def test_lm_score_curve():
    points = rubric.LM_POINTS
    assert rubric.lm_score(1.0) == rubric.lm_score(rubric.FULL_MARKS_PPL) == points
    assert rubric.lm_score(rubric.ZERO_MARKS_PPL) == rubric.lm_score(100.0) == 0
    middle = (rubric.FULL_MARKS_PPL + rubric.ZERO_MARKS_PPL) / 2
    assert rubric.lm_score(middle) == pytest.approx(points / 2, abs=0.01)
    grid = [rubric.FULL_MARKS_PPL + k * 0.01 for k in range(120)]
    scores = [rubric.lm_score(p) for p in grid]
    assert all(a >= b for a, b in zip(scores, scores[1:]))
    for bad in (math.nan, math.inf, -math.inf, "1.0", None, True):
        assert rubric.lm_score(bad) == 0, bad
    assert rubric.lm_score(3.0, full_marks_ppl=2.0, zero_marks_ppl=4.0) == pytest.approx(points / 2)
    with pytest.raises(ValueError):
        rubric.lm_score(3.0, full_marks_ppl=4.0, zero_marks_ppl=4.0)


@rubric_category("Scoring")
def test_category_score_parsing_takes_only_a_valid_last_line():
    line = '{"scores": {"Linear": 5}}'
    assert grade.parse_category_score(f"noise\n{line}\n\n", "Linear") == 5
    assert grade.parse_category_score(f"{line}\ntrailing print", "Linear") is None
    assert grade.parse_category_score(line, "Softmax") is None
    for bad in ('{"scores": {"Linear": NaN}}', '{"scores": {"Linear": true}}',
                '{"scores": {"Linear": "5"}}', '{"scores": [5]}', "[1, 2]", "", "{"):
        assert grade.parse_category_score(bad, "Linear") is None, bad


# ------------------------------------------------------------------------------------------------
# Model grading (in process, on a small hidden set)
# ------------------------------------------------------------------------------------------------

HIDDEN_LINES = ["THE CAPTAIN HOISTED THE SAIL", "IT'S A FINE DAY SAID THE MATE",
                "A GULL CRIED OVERHEAD"] * 4


def make_model_handin(folder: Path, token_type: str = "char",
                      model_config: dict | None = None) -> DecoderOnlyTransformer:
    """config.yaml and model_state_dict.pt of a freshly initialised model in ``folder``."""
    model_config = dict(model_config or TINY_MODEL)
    folder.mkdir(parents=True, exist_ok=True)
    tokenizer = H4Tokenizer(DEFAULT_TOKEN_MAP, token_type)
    torch.manual_seed(0)
    model = DecoderOnlyTransformer(**model_config, num_classes=tokenizer.vocab_size)
    torch.save(model.state_dict(), folder / "model_state_dict.pt")
    config = {"tokenization": {"token_type": token_type}, "model": model_config}
    (folder / "config.yaml").write_text(yaml.safe_dump(config))
    return model


def make_hidden_set(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / grade_model.HIDDEN_TEXT_FILE).write_text("\n".join(HIDDEN_LINES) + "\n")
    return folder


def direct_perplexity_char(model: torch.nn.Module, tokenizer: H4Tokenizer,
                           lines: list[str]) -> float:
    """exp(NLL of [tokens, EOS] given [SOS, tokens] summed over lines / characters), line by line,
    without padding, batching or the library's metric code."""
    model.eval()
    total_nll = 0.0
    with torch.no_grad():
        for text in lines:
            ids = tokenizer.encode(text)
            logits, _ = model(torch.tensor([[tokenizer.sos_id] + ids]))
            log_probs = torch.log_softmax(logits[0].double(), dim=-1)
            targets = ids + [tokenizer.eos_id]
            total_nll -= log_probs[torch.arange(len(targets)), targets].sum().item()
    return math.exp(total_nll / sum(len(text) for text in lines))


@rubric_category("Model grading")
def test_grade_model_measures_the_handed_in_weights(tmp_path):
    hidden = make_hidden_set(tmp_path / "hidden")
    for token_type in ("char", "1k"):
        model = make_model_handin(tmp_path / token_type, token_type)
        result = grade_model.evaluate_handin(tmp_path / token_type, hidden,
                                             tmp_path / f"work-{token_type}")
        tokenizer = H4Tokenizer(DEFAULT_TOKEN_MAP, token_type)
        expected = direct_perplexity_char(model, tokenizer, HIDDEN_LINES)
        assert result["perplexity_char"] == pytest.approx(expected, rel=1e-5), token_type
        assert result["num_chars"] == sum(len(line) for line in HIDDEN_LINES)
        assert result["num_utterances"] == len(HIDDEN_LINES)


@rubric_category("Model grading")
def test_grade_model_refuses_broken_configs(tmp_path):
    hidden = make_hidden_set(tmp_path / "hidden")
    make_model_handin(tmp_path / "h")
    good = yaml.safe_load((tmp_path / "h/config.yaml").read_text())
    huge = {**TINY_MODEL, "num_layers": 48, "d_model": 4096, "num_heads": 32, "d_ff": 16384}
    cases = [
        ({**good, "tokenization": {"token_type": "50k"}}, "token_type"),
        ({**good, "tokenization": None}, "token_type"),
        ({**good, "model": {**TINY_MODEL, "activation": "relu"}}, "unknown keys"),
        ({**good, "model": {k: v for k, v in TINY_MODEL.items() if k != "d_ff"}}, "missing keys"),
        ({**good, "model": {**TINY_MODEL, "d_model": "16"}}, "model.d_model must be int"),
        ({**good, "model": {**TINY_MODEL, "num_layers": True}}, "model.num_layers must be int"),
        ({**good, "model": {**TINY_MODEL, "d_model": 10**6}}, "outside"),
        ({**good, "model": huge}, "at most"),
        ({**good, "model": {**TINY_MODEL, "num_heads": 3}}, "divisible"),
        (["not", "a", "mapping"], "mapping"),
    ]
    for config, message in cases:
        (tmp_path / "h/config.yaml").write_text(yaml.safe_dump(config))
        with pytest.raises(grade_model.GradingError, match=message):
            grade_model.evaluate_handin(tmp_path / "h", hidden, tmp_path / "work")
    (tmp_path / "h/config.yaml").write_text("model: [unclosed\n")
    with pytest.raises(grade_model.GradingError, match="not valid YAML"):
        grade_model.evaluate_handin(tmp_path / "h", hidden, tmp_path / "work")
    make_model_handin(tmp_path / "short", model_config={**TINY_MODEL, "max_len": 20})
    with pytest.raises(grade_model.GradingError, match="max_len is 20"):
        grade_model.evaluate_handin(tmp_path / "short", hidden, tmp_path / "work")


@rubric_category("Model grading")
def test_grade_model_refuses_broken_state_dicts(tmp_path):
    hidden = make_hidden_set(tmp_path / "hidden")
    state = make_model_handin(tmp_path / "h").state_dict()
    weights = tmp_path / "h/model_state_dict.pt"

    class RunsCode:
        """Unpickling this would create the marker file: weights_only must refuse it."""

        def __reduce__(self):
            return (open, (str(tmp_path / "pickle_ran_code"), "w"))

    renamed = {("renamed." + k if k.startswith("norm.") else k): v for k, v in state.items()}
    nan_bias = torch.full_like(state["final_linear.bias"], math.nan)
    cases = [
        ({**state, "payload": RunsCode()}, "weights_only"),
        (renamed, "Missing key"),
        ({**state, "extra.weight": torch.zeros(1)}, "Unexpected key"),
        ({**state, "final_linear.bias": torch.zeros(7)}, "size mismatch"),
        ({"model_state_dict": state, "epoch": 3}, re.escape("model.state_dict()")),
        ([torch.zeros(2)], re.escape("model.state_dict()")),
        ({**state, "final_linear.bias": nan_bias}, "NaN"),
    ]
    for payload, message in cases:
        torch.save(payload, weights)
        with pytest.raises(grade_model.GradingError, match=message):
            grade_model.evaluate_handin(tmp_path / "h", hidden, tmp_path / "work")
    assert not (tmp_path / "pickle_ran_code").exists()
    weights.write_bytes(b"not a torch file")
    with pytest.raises(grade_model.GradingError, match="weights_only"):
        grade_model.evaluate_handin(tmp_path / "h", hidden, tmp_path / "work")


@rubric_category("Model grading")
def test_parameter_estimate_matches_the_built_model():
    wider = {**TINY_MODEL, "num_layers": 3, "d_model": 24, "num_heads": 4, "d_ff": 40}
    for tied in (False, True):
        for config in (TINY_MODEL, wider):
            config = {**config, "weight_tying": tied}
            model = DecoderOnlyTransformer(**config, num_classes=37)
            built = sum(p.numel() for p in model.parameters())
            assert grade_model.estimate_parameters(config, 37) == (
                built + model.positional_encoding.pe.numel()), (config, tied)


# ------------------------------------------------------------------------------------------------
# Child processes
# ------------------------------------------------------------------------------------------------

def python_child(code: str, tmp_path: Path, timeout: float, **kwargs) -> grade.ChildRun:
    return grade.run_child([sys.executable, "-c", code], cwd=tmp_path, env=dict(os.environ),
                           timeout=timeout, **kwargs)


@rubric_category("Child processes")
def test_child_over_its_time_limit_is_killed_with_its_children(tmp_path):
    code = ("import subprocess, sys, time\n"
            "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)'])\n"
            "open('grandchild.pid', 'w').write(str(child.pid))\n"
            "print('started', flush=True)\n"
            "while True: time.sleep(0.1)\n")
    run = python_child(code, tmp_path, timeout=3)
    assert run.timed_out and "started" in run.output
    assert wait_until_dead(int((tmp_path / "grandchild.pid").read_text())), \
        "the grandchild outlived the time limit"


@rubric_category("Child processes")
def test_child_output_flood_is_bounded_and_keeps_the_last_line(tmp_path):
    code = ("import sys\n"
            "for i in range(200_000): sys.stdout.write('spam ' * 20 + '\\x1b[2J\\r\\n')\n"
            "print('{\"scores\": {\"Linear\": 5}}')\n")
    run = python_child(code, tmp_path, timeout=60)
    assert run.returncode == 0
    assert len(run.output) < rubric.OUTPUT_HEAD_BYTES + rubric.OUTPUT_TAIL_BYTES + 200
    assert "bytes of output omitted" in run.output and "\x1b" not in run.output
    assert grade.parse_category_score(run.output, "Linear") == 5
    run = python_child("import os; os.write(1, b'partial line'); os._exit(3)", tmp_path, timeout=60)
    assert run.returncode == 3 and run.output == "partial line"


@rubric_category("Child processes")
def test_child_cannot_write_huge_files(tmp_path):
    code = "open('big.bin', 'wb').write(b'0' * (4 * 2**20))"
    run = python_child(code, tmp_path, timeout=60, max_file_bytes=2**20)
    assert run.returncode != 0
    assert (tmp_path / "big.bin").stat().st_size <= 2**20


# ------------------------------------------------------------------------------------------------
# End to end: make in a grading folder, as Autolab does
# ------------------------------------------------------------------------------------------------

# Wide thresholds, so that an untrained tiny model earns partial credit and the end-to-end tests
# see the score follow the measured perplexity (the default line gives such a model 0).
TEST_FULL_MARKS_PPL, TEST_ZERO_MARKS_PPL = 2.0, 1000.0
TEST_HIDDEN_CHARS = 20_000  # a quarter of the default: the test measures the model twice
HIDDEN_SET_MEMBER = "autograde/autograder/hidden_set/test.txt"


def build_autograder(out: Path) -> dict:
    from tools import make_autograde

    return make_autograde.build(out, hidden_chars=TEST_HIDDEN_CHARS,
                                full_marks_ppl=TEST_FULL_MARKS_PPL,
                                zero_marks_ppl=TEST_ZERO_MARKS_PPL)


@functools.lru_cache(maxsize=None)
def built_autograder() -> Path:
    """A folder with autograde.tar and autograde-Makefile, built once per test process."""
    out = Path(tempfile.mkdtemp(prefix="hw4p1-autograde-"))
    atexit.register(shutil.rmtree, out, ignore_errors=True)
    build_autograder(out)
    return out


def read_hidden_lines(autograde_tar: Path) -> list[str]:
    with tarfile.open(autograde_tar) as tar:
        return tar.extractfile(HIDDEN_SET_MEMBER).read().decode("utf-8").splitlines()


def run_grader(tmp_path: Path, handin: Path | None,
               grader_flags: str = "") -> tuple[list[str], dict]:
    """Grade ``handin`` with make in ``tmp_path/grading``; return (output lines, scores).

    Checks that the last line is the scores line with every category in range, and that nothing
    outside the grading folder was created, deleted or modified.
    """
    grading = tmp_path / "grading"
    grading.mkdir()
    shutil.copy(built_autograder() / "autograde.tar", grading / "autograde.tar")
    shutil.copy(built_autograder() / "autograde-Makefile", grading / "Makefile")
    if handin is not None:
        shutil.copy(handin, grading / "handin.tar")

    def outside() -> dict[str, int]:
        return {path: (tmp_path / path).lstat().st_mtime_ns for path in tree(tmp_path)
                if path.split("/")[0] != "grading"}

    before = outside()
    process = autolab_make([f"PYTHON={sys.executable}", f"GRADER_FLAGS={grader_flags}"],
                           cwd=grading, timeout=900)
    lines = process.stdout.splitlines()
    assert process.returncode == 0, process.stdout[-3000:] + process.stderr[-3000:]
    scores = json.loads(lines[-1])["scores"]
    assert list(scores) == list(rubric.RUBRIC), scores
    assert all(0 <= scores[c] <= rubric.RUBRIC[c] for c in scores), scores
    after = outside()
    assert after == before, f"changed outside the grading folder: {set(after) ^ set(before)}"
    return lines, scores


def autolab_make(args: list[str], cwd: Path, timeout: float) -> subprocess.CompletedProcess:
    """Run `make` as Autolab does: a top-level make, even when these tests run under `make test`
    (an inherited MAKELEVEL would make GNU make print "Leaving directory" after the scores line)."""
    env = {k: v for k, v in os.environ.items() if k not in ("MAKELEVEL", "MAKEFLAGS", "MFLAGS")}
    return subprocess.run(["make", *args], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=timeout)


def copy_reference_mytorch(root: Path) -> Path:
    shutil.copytree(REPO_ROOT / "mytorch", root / "mytorch",
                    ignore=shutil.ignore_patterns("__pycache__"))
    return root / "mytorch"


def make_run_folder(root: Path, state_dict: dict, reported_ppl: float) -> None:
    """expts/run/ with the files the trainer writes; test_metrics.json claims ``reported_ppl``."""
    run = root / "expts/run"
    (run / "checkpoints").mkdir(parents=True)
    config = {"name": "run", "tokenization": {"token_type": "char"}, "model": TINY_MODEL}
    (run / "config.yaml").write_text(yaml.safe_dump(config))
    (run / "model_arch.txt").write_text("DecoderOnlyTransformer(...)\n")
    metrics = {"ce_loss_token": 0.0, "ce_loss_char": 0.0, "perplexity_token": reported_ppl,
               "perplexity_char": reported_ppl}
    (run / "test_metrics.json").write_text(json.dumps(metrics))
    (run / "test_generated_results.json").write_text(json.dumps({"greedy": []}))
    torch.save({"model_state_dict": state_dict, "epoch": 1},
               run / "checkpoints/checkpoint-best-metric-model.pth")


def reported_perplexity(lines: list[str]) -> float:
    found = [re.search(r"perplexity on the hidden test set: ([0-9.]+)", line) for line in lines]
    values = [float(match.group(1)) for match in found if match]
    assert len(values) == 1, "\n".join(lines[-60:])
    return values[0]


@pytest.mark.slow
@rubric_category("End to end")
def test_good_handin_with_edited_metrics_is_graded_on_its_weights(tmp_path):
    from hw4lib.utils.handin import pack

    student = tmp_path / "student"
    copy_reference_mytorch(student)
    tokenizer = H4Tokenizer(DEFAULT_TOKEN_MAP, "char")
    torch.manual_seed(0)
    model = DecoderOnlyTransformer(**TINY_MODEL, num_classes=tokenizer.vocab_size)
    make_run_folder(student, model.state_dict(), reported_ppl=1.0)
    pack(student, "run", student / "handin.tar")  # the real `make handin`

    lines, scores = run_grader(tmp_path, student / "handin.tar")
    text = "\n".join(lines)
    for category, points in rubric.MYTORCH_RUBRIC.items():
        assert scores[category] == points, (category, text[-4000:])
    # The language model is scored on the perplexity its weights give on the hidden set, measured
    # here independently; the 1.0 the student reported changes nothing.
    measured = reported_perplexity(lines)
    hidden = read_hidden_lines(built_autograder() / "autograde.tar")
    assert measured == pytest.approx(direct_perplexity_char(model, tokenizer, hidden), rel=1e-5)
    assert 0 < scores["LanguageModel"] < rubric.LM_POINTS
    assert scores["LanguageModel"] == rubric.lm_score(measured, TEST_FULL_MARKS_PPL,
                                                      TEST_ZERO_MARKS_PPL)
    assert "reports 1.0000" in text
    # the secrets were deleted before student code ran
    grading = tmp_path / "grading"
    assert not (grading / "autograde.tar").exists()
    assert not (grading / "autograde/hw4lib").exists()
    assert not (grading / "autograde/autograder/hidden_set").exists()


def sabotaged_mytorch(root: Path) -> None:
    """The reference mytorch, misbehaving differently in each category's process."""
    package = copy_reference_mytorch(root)
    sabotage = """
import atexit, subprocess, sys, time
if "Linear" in sys.argv:
    raise RuntimeError("a student bug at import time")
if "Softmax" in sys.argv:
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    open("sleeper.pid", "w").write(str(sleeper.pid))
    while True:
        time.sleep(0.1)
if "ScaledDotProductAttention" in sys.argv:
    for _ in range(100_000):
        print("flood " * 50 + "\\x1b[31m")
if "MultiHeadAttention" in sys.argv:
    atexit.register(print, "a print after the scores line")
"""
    with open(package / "__init__.py", "a") as init:
        init.write(sabotage)


@pytest.mark.slow
@rubric_category("End to end")
def test_hostile_handin_gets_zeros_where_due_and_nothing_escapes(tmp_path):
    student = tmp_path / "student"
    sabotaged_mytorch(student)
    vocab_size = H4Tokenizer(DEFAULT_TOKEN_MAP, "char").vocab_size
    model = DecoderOnlyTransformer(**TINY_MODEL, num_classes=vocab_size)

    class RunsCode:
        def __reduce__(self):
            return (open, (str(tmp_path / "pickle_ran_code"), "w"))

    weights = io.BytesIO()
    torch.save({**model.state_dict(), "payload": RunsCode()}, weights)
    config = yaml.safe_dump({"tokenization": {"token_type": "char"}, "model": TINY_MODEL})
    members = [regular(f"handin/{path.relative_to(student).as_posix()}", path.read_bytes())
               for path in sorted((student / "mytorch").rglob("*.py"))]
    members += [
        regular("handin/config.yaml", config.encode()),
        regular("handin/model_state_dict.pt", weights.getvalue()),
        regular("handin/test_metrics.json", b'{"perplexity_char": 1.0}'),
        regular("/tmp/hw4p1_escape_absolute.txt"),
        regular("../../../escaped_three_up.py"),
        regular("handin/../../../../escaped_four_up.py"),
        special("handin/model_arch.txt", tarfile.SYMTYPE, "/etc/passwd"),
        special("handin/test_generated_results.json", tarfile.LNKTYPE, "/etc/passwd"),
        special("handin/mytorch/fifo.py", tarfile.FIFOTYPE),
        special("handin/mytorch/device.py", tarfile.CHRTYPE),
    ]
    handin = write_tar(tmp_path / "handin.tar", members)

    lines, scores = run_grader(tmp_path, handin, grader_flags="--mytorch-timeout 20")
    text = "\n".join(lines)
    assert scores == {"Linear": 0, "Softmax": 0, "ScaledDotProductAttention": 20,
                      "MultiHeadAttention": 0, "LanguageModel": 0}, text[-6000:]
    assert "weights_only" in text and not (tmp_path / "pickle_ran_code").exists()
    assert "a student bug at import time" in text
    assert "stopped at the 20 s time limit" in text
    assert "bytes of output omitted" in text and "\x1b" not in text
    assert len(text.encode()) < 100_000, "the student's flood reached the grader's output"
    assert "printed no scores line last" in text
    for reason in ("absolute", "'..'", "symbolic link", "hard link", "device or a fifo"):
        assert reason in text, reason
    assert not Path("/tmp/hw4p1_escape_absolute.txt").exists()
    assert not [path for path in tree(tmp_path) if "escape" in path]
    sleeper = int((tmp_path / "grading/work/handin/sleeper.pid").read_text())
    assert wait_until_dead(sleeper), "a process started by student code outlived its time limit"


@rubric_category("End to end")
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
             (model_only, "--model-timeout 1", ["more than the 1 s limit", "no mytorch/"])]
    for index, (handin, flags, messages) in enumerate(cases):
        folder = tmp_path / f"case{index}"
        folder.mkdir()
        lines, scores = run_grader(folder, handin, flags)
        assert scores == rubric.zero_scores(), (handin, scores)
        for message in messages:
            assert message in "\n".join(lines), (message, lines)


@rubric_category("End to end")
def test_makefile_prints_zeros_when_the_driver_cannot_start(tmp_path):
    shutil.copy(built_autograder() / "autograde-Makefile", tmp_path / "Makefile")
    (tmp_path / "autograde.tar").write_bytes(b"broken")
    process = autolab_make([f"PYTHON={sys.executable}"], cwd=tmp_path, timeout=60)
    assert json.loads(process.stdout.splitlines()[-1]) == {"scores": rubric.zero_scores()}


@pytest.mark.slow
@rubric_category("End to end")
def test_build_is_reproducible_and_keeps_the_seed_out(tmp_path):
    from autograder import hidden_data

    infos = [build_autograder(tmp_path / name) for name in ("first", "second")]
    first, second = (tmp_path / "first/autograde.tar", tmp_path / "second/autograde.tar")
    assert infos[0] == infos[1] and first.read_bytes() == second.read_bytes()
    with tarfile.open(first) as tar:
        names = tar.getnames()
        shipped = b"".join(tar.extractfile(m).read() for m in tar.getmembers() if m.isfile())
    assert str(hidden_data.HIDDEN_SEED).encode() not in shipped
    assert not [name for name in names if name.endswith(("hidden_data.py", "README.md"))
                or name.startswith("autograde/mytorch")]
    for needed in ("autograde/autograder/grade.py", "autograde/tests/testing_framework.py",
                   "autograde/tests/numeric_checks.py",
                   "autograde/hw4lib/data/tokenizer_jsons/tokenizer_char.json",
                   "autograde/autograder/hidden_tests/test_mytorch_hidden.py",
                   "autograde/build_info.json", HIDDEN_SET_MEMBER):
        assert needed in names, needed
    lines = read_hidden_lines(first)
    assert sum(map(len, lines)) == infos[0]["hidden_chars"] >= TEST_HIDDEN_CHARS
    assert infos[0]["lm_thresholds"] == {"full_marks_ppl": TEST_FULL_MARKS_PPL,
                                         "zero_marks_ppl": TEST_ZERO_MARKS_PPL}
    assert not set(lines) & hidden_data.public_transcripts(infos[0]["public_seed"])


if __name__ == "__main__":
    run_module(__name__)
