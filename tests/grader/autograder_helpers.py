# hw4p1: instructor-only
"""What the autograder's test modules share: tar members and handins built for a test, the
autograder built once per test process, grading a handin with make as Autolab does, and the test
session's temporary folders (removed at its end by the autouse fixture ``remove_session_folders``,
which the conftest.py of each instructor test folder imports)."""
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
import zipfile
from pathlib import Path

import pytest
import torch
import yaml

import numpy as np

from autograder.judging.intake.safe_tar import Extraction
from autograder.judging.scoring import rubric
from hw4lib.data import H4Tokenizer
from hw4lib.data.tokenizer import DEFAULT_TOKEN_MAP
from hw4lib.model import DecoderOnlyTransformer
from hw4lib.handin import BEST_CHECKPOINT_PATH
from hw4lib.handin_format import METRICS_FILE, RUN_CARD_FILE, STATE_DICT_FILE
from tools import platform_profiles

REPO_ROOT = Path(__file__).resolve().parents[2]
TINY_MODEL = {"num_layers": 1, "d_model": 16, "num_heads": 2, "d_ff": 32, "dropout": 0.0,
              "max_len": 512, "weight_tying": False, "layer_drop_rate": 0.0}


# ------------------------------------------------------------------------------------------------
# Archives and handins
# ------------------------------------------------------------------------------------------------

def regular(name: str, data: bytes = b"x = 1\n") -> tuple[tarfile.TarInfo, bytes]:
    """A regular-file member."""
    info = tarfile.TarInfo(name)
    info.size, info.mode = len(data), 0o644
    return info, data


def write_tar(path: Path, members: list[tuple[tarfile.TarInfo, bytes | None]],
              mode: str = "w", **options) -> Path:
    with tarfile.open(path, mode, **options) as tar:
        for info, data in members:
            tar.addfile(info, io.BytesIO(data) if data is not None else None)
    return path


def tree(folder: Path) -> set[str]:
    """Every path under ``folder``, relative, symlinks included."""
    return {p.relative_to(folder).as_posix() for p in folder.rglob("*")}


def pack_folder(handin: Path, tar_path: Path, **options) -> Path:
    """``handin/`` packed as make handin does: regular files only, under handin/."""
    members = [regular(f"handin/{path.relative_to(handin).as_posix()}", path.read_bytes())
               for path in sorted(handin.rglob("*")) if path.is_file()]
    return write_tar(tar_path, members, **options)


def copy_reference_mytorch(root: Path) -> Path:
    shutil.copytree(REPO_ROOT / "mytorch", root / "mytorch",
                    ignore=shutil.ignore_patterns("__pycache__"))
    return root / "mytorch"


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


def run_files_handin(folder: Path, card: dict | None, reported: float | None) -> Extraction:
    """An extracted handin naming model_state_dict.pt (not written) and, when given, its
    run_card.json holding ``card`` and its test_metrics.json reporting ``reported`` as
    perplexity_char: what the judge's integrity checks read."""
    folder.mkdir(parents=True, exist_ok=True)
    files = {STATE_DICT_FILE: folder / STATE_DICT_FILE}
    if card is not None:
        files[RUN_CARD_FILE] = folder / RUN_CARD_FILE
        files[RUN_CARD_FILE].write_text(json.dumps(card))
    if reported is not None:
        files[METRICS_FILE] = folder / METRICS_FILE
        files[METRICS_FILE].write_text(json.dumps({"perplexity_char": reported}))
    return Extraction(files=files)


def make_run_folder(root: Path, state_dict: dict, reported_ppl: float,
                    test_lines: list[str] = ()) -> None:
    """expts/run/ with the files the trainer writes; test_metrics.json claims ``reported_ppl``
    on ``test_lines``, the run's test partition (written as make data does, ids in their order)."""
    run = root / "expts/run"
    (run / "checkpoints").mkdir(parents=True)
    config = {"name": "run", "tokenization": {"token_type": "char"}, "model": TINY_MODEL}
    if test_lines:
        (root / "data/test").mkdir(parents=True)
        for index, text in enumerate(test_lines):
            np.save(root / f"data/test/7000-{index:06d}-0000.npy", np.array(list(text), dtype="<U1"))
        config["data"] = {"root": "data", "subset": 1.0}
    (run / "config.yaml").write_text(yaml.safe_dump(config))
    (run / "model_arch.txt").write_text("DecoderOnlyTransformer(...)\n")
    metrics = {"ce_loss_token": 0.0, "ce_loss_char": 0.0, "perplexity_token": reported_ppl,
               "perplexity_char": reported_ppl, "num_chars": sum(len(t) for t in test_lines)}
    (run / "test_metrics.json").write_text(json.dumps(metrics))
    (run / "test_generated_results.json").write_text(json.dumps({"greedy": []}))
    torch.save({"model_state_dict": state_dict, "epoch": 1}, run / BEST_CHECKPOINT_PATH)


def alias_bomb_config() -> str:
    """A config.yaml of a few hundred bytes whose model.num_layers expands to 9**9 strings."""
    levels = ['a0: &a0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    levels += [f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 9) + "]" for i in range(1, 9)]
    model = ", ".join(f"{k}: *a8" if k == "num_layers" else f"{k}: {v}"
                      for k, v in TINY_MODEL.items())
    return "\n".join(levels) + f"\ntokenization: {{token_type: char}}\nmodel: {{{model}}}\n"


def deflate_zip(path: Path) -> None:
    """Rewrite the zip at ``path`` with every entry deflated (torch.save stores them)."""
    with zipfile.ZipFile(path) as source:
        entries = [(info.filename, source.read(info)) for info in source.infolist()]
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as sink:
        for name, data in entries:
            sink.writestr(name, data)


# A mytorch that returns zeros everywhere, for harness-patching attacks.
ZEROS_NN = """
import numpy as np
class _Zeros:
    def __init__(self, *args, **kwargs): pass
    def __getattr__(self, name):
        return lambda *args, **kwargs: (np.zeros(1),) * 3
Linear = Softmax = ScaledDotProductAttention = MultiHeadAttention = _Zeros
"""


def attack_handin(folder: Path, init_code: str, nn_code: str | None, nn_append: str = "") -> Path:
    """handin.tar: the tiny model, and the reference mytorch (or ``nn_code`` as mytorch.nn) with
    ``init_code`` run at its import and ``nn_append`` at the end of mytorch.nn's."""
    handin = folder / "handin"
    make_model_handin(handin)
    package = copy_reference_mytorch(handin)
    if nn_code is not None:
        shutil.rmtree(package / "nn")
        (package / "nn").mkdir()
        (package / "nn/__init__.py").write_text(nn_code)
    if nn_append:
        (package / "nn/__init__.py").write_text((package / "nn/__init__.py").read_text() + nn_append)
    (package / "__init__.py").write_text(init_code + (package / "__init__.py").read_text())
    return pack_folder(handin, folder / "handin.tar")


def direct_nll(model: torch.nn.Module, tokenizer: H4Tokenizer, lines: list[str]) -> list[float]:
    """Each line's NLL of [tokens, EOS] given [SOS, tokens], line by line in float64, without
    padding, batching or the library's metric code."""
    model.eval()
    losses = []
    with torch.no_grad():
        for text in lines:
            ids = tokenizer.encode(text)
            logits, _ = model(torch.tensor([[tokenizer.sos_id] + ids]))
            log_probs = torch.log_softmax(logits[0].double(), dim=-1)
            targets = ids + [tokenizer.eos_id]
            losses.append(-log_probs[torch.arange(len(targets)), targets].sum().item())
    return losses


def direct_perplexity_char(model: torch.nn.Module, tokenizer: H4Tokenizer,
                           lines: list[str]) -> float:
    """exp(:func:`direct_nll` summed over lines / characters)."""
    return math.exp(sum(direct_nll(model, tokenizer, lines)) / sum(len(text) for text in lines))


# ------------------------------------------------------------------------------------------------
# Session folders
# ------------------------------------------------------------------------------------------------

SESSION_FOLDERS: list[Path] = []  # removed when the test session ends
_REMOVAL_ARMED = False  # True while remove_session_folders is set up


def session_folder(prefix: str) -> Path:
    """A temporary folder that lives until the end of the test session.

    Raises RuntimeError where no ``remove_session_folders`` fixture is set up (a test folder whose
    conftest.py does not import it): its folders would outlive the session and fill the disk."""
    if not _REMOVAL_ARMED:
        raise RuntimeError("session_folder() in a test that no remove_session_folders fixture "
                           "covers: its folders would never be removed; import "
                           "tests.grader.autograder_helpers.remove_session_folders in the "
                           "conftest.py of the test's folder")
    folder = Path(tempfile.mkdtemp(prefix=prefix))
    SESSION_FOLDERS.append(folder)
    return folder


@pytest.fixture(scope="session", autouse=True)
def remove_session_folders():
    """Remove the session's folders at its end (atexit handlers do not run in xdist workers)."""
    global _REMOVAL_ARMED
    _REMOVAL_ARMED = True
    yield
    _REMOVAL_ARMED = False
    for folder in SESSION_FOLDERS:
        shutil.rmtree(folder, ignore_errors=True)
    SESSION_FOLDERS.clear()


def open_folder(prefix: str) -> Path:
    """A session folder every sandbox uid can traverse (pytest's tmp_path is 0700 to root, which
    setpriv's fresh uid cannot enter: the grader would fall back to a weaker mode there)."""
    folder = session_folder(prefix)
    folder.chmod(0o755)
    return folder


# ------------------------------------------------------------------------------------------------
# Grading with make in a grading folder, as Autolab does
# ------------------------------------------------------------------------------------------------

# Wide thresholds, so that an untrained tiny model earns partial credit and the end-to-end tests
# see the score follow the measured perplexity (the default line gives such a model 0).
TEST_FULL_MARKS_PPL, TEST_ZERO_MARKS_PPL = 2.0, 1000.0
TEST_HIDDEN_CHARS = 20_000  # a quarter of the default: the test measures the model twice


def build_autograder(out: Path) -> dict:
    from tools import make_autograde

    return make_autograde.build(out, hidden_chars=TEST_HIDDEN_CHARS,
                                full_marks_ppl=TEST_FULL_MARKS_PPL,
                                zero_marks_ppl=TEST_ZERO_MARKS_PPL)


@functools.lru_cache(maxsize=None)
def built_autograder() -> Path:
    """A folder with autograde.tar and autograde-Makefile, built once per test process."""
    out = session_folder("hw4p1-autograde-")
    build_autograder(out)
    return out


def run_grader(tmp_path: Path, handin: Path | None, grader_flags: str = "",
               peak_memory: list | None = None, environment: dict | None = None,
               profile: str = "host", python: str = sys.executable) -> tuple[list[str], dict]:
    """Grade ``handin`` with make in ``tmp_path/grading``; return (output lines, scores).

    Checks that the last line is the scores line with every category in range, and that nothing
    outside the grading folder was created, deleted or modified. ``peak_memory`` (a list) receives
    the largest resident set, in bytes, of any process of the grading. ``profile``: the emulated
    platform make runs in (``tools/platform_profiles.py``; a non-root one owns the grading folder,
    and ``tmp_path`` must let it through). ``python``: the Makefile's $(PYTHON).
    """
    grading = tmp_path / "grading"
    grading.mkdir()
    shutil.copy(built_autograder() / "autograde.tar", grading / "autograde.tar")
    shutil.copy(built_autograder() / "autograde-Makefile", grading / "Makefile")
    if handin is not None:
        shutil.copy(handin, grading / "handin.tar")
    if profile in platform_profiles.NON_ROOT:
        for path in [grading, *grading.rglob("*")]:
            os.chown(path, platform_profiles.PROFILE_UID, platform_profiles.PROFILE_UID)

    def outside() -> dict[str, int]:
        return {path: (tmp_path / path).lstat().st_mtime_ns for path in tree(tmp_path)
                if path.split("/")[0] != "grading"}

    before = outside()
    process = autolab_make([f"PYTHON={python}", f"GRADER_FLAGS={grader_flags}"],
                           cwd=grading, timeout=900, environment=environment, profile=profile)
    lines = process.stdout.splitlines()
    assert process.returncode == 0, process.stdout[-3000:] + process.stderr[-3000:]
    if peak_memory is not None:
        peak_memory.append(int(re.findall(r"PEAK_RSS_KIB (\d+)", process.stderr)[-1]) * 1024)
    scores = json.loads(lines[-1])["scores"]
    assert list(scores) == list(rubric.RUBRIC), scores
    assert all(0 <= scores[c] <= rubric.RUBRIC[c] for c in scores), scores
    after = outside()
    assert after == before, f"changed outside the grading folder: {set(after) ^ set(before)}"
    return lines, scores


def autolab_make(args: list[str], cwd: Path, timeout: float, environment: dict | None = None,
                 profile: str = "host") -> subprocess.CompletedProcess:
    """Run `make` as Autolab does: a top-level make, even when these tests run under `make test`
    (an inherited MAKELEVEL would make GNU make print "Leaving directory" after the scores line).
    ``environment`` adds variables to the grading environment; ``profile`` is the emulated
    platform (``tools/platform_profiles.py``)."""
    env = {k: v for k, v in os.environ.items() if k not in ("MAKELEVEL", "MAKEFLAGS", "MFLAGS")}
    if profile in platform_profiles.NON_ROOT:
        env["HOME"] = str(cwd)
    env.update(environment or {})
    # A small wrapper reports the peak memory of every process make waited for, on stderr.
    wrapper = ("import resource, subprocess, sys\n"
               "code = subprocess.run(sys.argv[1:]).returncode\n"
               "peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss\n"
               "sys.stderr.write(f'PEAK_RSS_KIB {peak}\\n')\n"
               "sys.exit(code)\n")
    command = [sys.executable, "-c", wrapper, "make", *args]
    return subprocess.run(platform_profiles.launcher(profile, command), cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=timeout)


@functools.lru_cache(maxsize=None)
def honest_scores() -> dict:
    """Scores of the honest tiny handin (reference mytorch), graded once per test process."""
    folder = session_folder("hw4p1-honest-")
    _, scores = run_grader(folder, attack_handin(folder, "", None))
    assert all(scores[c] == p for c, p in rubric.MYTORCH_RUBRIC.items()), scores
    assert 0 < scores["LanguageModel"] < rubric.LM_POINTS, scores
    return scores
