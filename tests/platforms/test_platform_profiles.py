# hw4p1: instructor-only
"""The sandbox review's attack table, each row through the real Autolab Makefile (and Gradescope's
run_autograder where the row is Gradescope's), in each emulated platform profile
(``tools/platform_profiles.py``: host, gradescope, autolab, laptop).

    make test-platforms     (as root; prints the attacks x profiles table at the end)

Every attack is written to give itself away: where it gets through, it breaks its own mytorch (or
the honest grading beside it), so the exact scores say whether each layer held. An attack held
scores what the test expects (the honest scores, or mytorch 0 where its mytorch does no work),
leaves nothing hidden in the output and other gradings untouched.
"""
import io
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tarfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Callable, NamedTuple

import pytest

import torch
import yaml

from autograder.sandboxed import landlock
from autograder.judging.isolation import sandbox
from autograder.judging import gradescope
from autograder.judging.scoring import (grade_model, report as grading_report, rubric,
                                        weights_fingerprint)
from hw4lib.data import H4Tokenizer
from hw4lib.data.tokenizer import DEFAULT_TOKEN_MAP
from hw4lib.handin_format import CONFIG_FILE, METRICS_FILE, RUN_CARD_FILE, STATE_DICT_FILE
from hw4lib.model import DecoderOnlyTransformer
from tools import platform_profiles
from tools.platform_profiles import PROFILES
from tests.grader.autograder_helpers import (REPO_ROOT, TINY_MODEL, ZEROS_NN, attack_handin,
                                             built_autograder, copy_reference_mytorch,
                                             honest_scores, make_model_handin, open_folder,
                                             pack_folder, run_grader, write_tar)
from tools.honest_weights import noised, one_ulp, permuted, rescaled
from tests.classroom.similarity_classes import (FAMILIES, class_folder, family_problems,
                                                family_trees, handout_folder, moved_class,
                                                moved_copies_problems, poison, poison_problems,
                                                poisoned_class, poisoned_class_problems)
from tests.classroom.similarity_disguises import ROW_VICTIMS, ROWS, disguise_problems, disguised_class
from tests.grader.attack_handins import (DOORS, DOUBLED_LINEAR_NN, FAIR_LINEAR_POINTS,
                                         FD_GAMING_INIT, FULL_LINE, MYTORCH_ZERO, SLEEP_S,
                                         SLOW_FIRST_FORWARD_NN, SNOOP_INIT, TRICKS, UTF7_SOURCE,
                                         ZERO_LINEAR_NN, category_totals, check_spec,
                                         deep_mytorch_member, door_mytorch, long_name_members,
                                         read_hidden_lines, replay_handin, run_autograder,
                                         unpack_root, zip_directory_bomb)

CHAR_VOCAB = H4Tokenizer(DEFAULT_TOKEN_MAP, "char").vocab_size
pytestmark = [pytest.mark.platforms,
              pytest.mark.skipif(os.geteuid() != 0, reason="the profiles are set up as root"),
              pytest.mark.skipif(not landlock.abi_version(), reason="no Landlock on this kernel")]
TABLE = os.environ.get("HW4P1_PROFILE_TABLE")
# The mode the judge must choose in each profile: bubblewrap where user namespaces work, a fresh
# uid where the judge is root without them, the worker's own layers alone otherwise.
EXPECTED_MODE = {"host": "bwrap", "gradescope": "setpriv", "autolab": "none", "laptop": "bwrap"}
MODE_PHRASES = {"bwrap": "bubblewrap sandbox", "setpriv": "fresh unprivileged uid",
                "unshare": "unprivileged namespaces", "none": "plain child process"}

# ------------------------------------------------------------------------------------------------
# The emulation itself
# ------------------------------------------------------------------------------------------------

PROBE = """
import os, shutil, subprocess
status = dict(line.split(":\\t", 1) for line in open("/proc/self/status").read().splitlines()
              if ":\\t" in line)
bwrap = shutil.which("bwrap") is not None and subprocess.run(
    ["bwrap", "--unshare-all", "--ro-bind", "/", "/", "true"], capture_output=True).returncode == 0
try:
    os.mkdir("/sys/fs/cgroup/pids/hw4p1-profile-probe")
    os.rmdir("/sys/fs/cgroup/pids/hw4p1-profile-probe")
    cgroup = True
except OSError:
    cgroup = False
print(os.geteuid(), int(status["CapEff"], 16) >> 21 & 1, status["Seccomp"].strip(), bwrap, cgroup)
"""
EXPECTED_PROBE = {  # uid, CAP_SYS_ADMIN, seccomp mode, bubblewrap works, a cgroup can be made
    "host": f"0 1 0 True {Path('/sys/fs/cgroup/pids').is_dir()}",
    "gradescope": "0 0 2 False False",
    "autolab": f"{platform_profiles.PROFILE_UID} 0 2 False False",
    "laptop": f"{platform_profiles.PROFILE_UID} 0 0 True False",
}


@pytest.mark.parametrize("profile", PROFILES)
def test_each_profile_is_what_it_emulates(profile):
    if EXPECTED_PROBE[profile].split()[3] == "True" and shutil.which("bwrap") is None:
        pytest.skip(f"the {profile} profile needs bubblewrap (bwrap), not installed here")
    run = subprocess.run(platform_profiles.launcher(profile, [sys.executable, "-c", PROBE]),
                         capture_output=True, text=True, timeout=60, cwd="/")
    assert run.returncode == 0, run.stderr[-2000:]
    assert run.stdout.split() == EXPECTED_PROBE[profile].split(), (profile, run.stdout)


# ------------------------------------------------------------------------------------------------
# Gradings in a profile
# ------------------------------------------------------------------------------------------------

def profile_folder(profile: str, name: str) -> Path:
    """A folder every profile's user may traverse (the gradings' own folders stay private)."""
    return open_folder(f"hw4p1-{profile}-{name}-")


def mode_used(text: str) -> str:
    found = [mode for mode, phrase in MODE_PHRASES.items() if phrase in text]
    return found[0] if len(found) == 1 else f"unclear: {found}"


def cell(scores: dict, text: str, held: bool, whose: str = "", peak: int | None = None,
         report: int | None = None) -> str:
    """One cell of the table: the observed scores (``whose``: of which grading), the mode, and
    whether the attack was held; with the grading's peak memory and its largest report channel
    when given (bytes)."""
    mytorch = sum(scores[c] for c in rubric.MYTORCH_RUBRIC)
    sizes = ("" if peak is None else f", peak {peak / 2**30:.2f} GiB") + (
        "" if report is None else f", report {report / 2**10:.0f} KiB")
    return (f"{'held' if held else 'GOT THROUGH'}: {whose}mytorch {mytorch:g}/"
            f"{sum(rubric.MYTORCH_RUBRIC.values())}, LM {scores['LanguageModel']:g} "
            f"({mode_used(text)}{sizes})")


@pytest.mark.parametrize("profile", PROFILES)
def test_the_honest_handin_scores_alike_in_every_profile(profile):
    folder = profile_folder(profile, "honest")
    lines, scores = run_grader(folder, attack_handin(folder, "", None), profile=profile)
    text = "\n".join(lines)
    platform_profiles.record(TABLE, profile, "00 honest handin (baseline)",
                             cell(scores, text, scores == honest_scores()))
    assert scores == honest_scores(), (profile, scores, text[-3000:])
    assert mode_used(text) == EXPECTED_MODE[profile], (profile, text[-3000:])
    assert "layers: Landlock ABI" in text and "a seccomp filter" in text, text[-3000:]


BUSY_USER = """
import sys, threading
for _ in range(int(sys.argv[1])):
    threading.Thread(target=threading.Event().wait, daemon=True).start()
print("ready", flush=True)
sys.stdin.read()
"""


@pytest.mark.parametrize("profile", platform_profiles.NON_ROOT)
def test_the_honest_handin_scores_alike_beside_the_users_own_tasks(profile):
    """A non-root grader runs as a user with tasks of its own (a TA's desktop, other gradings):
    with 2 x Limits.processes threads of that user's running, the honest handin scores exactly as
    alone (the worker's RLIMIT_NPROC, counted per uid, must leave room above them)."""
    folder = profile_folder(profile, "busy-user")
    busy = subprocess.Popen(platform_profiles.launcher(profile, [
        sys.executable, "-c", BUSY_USER, str(2 * sandbox.Limits.processes)]),
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd="/")
    try:
        assert busy.stdout.readline().strip() == "ready"
        lines, scores = run_grader(folder, attack_handin(folder, "", None), profile=profile)
    finally:
        busy.stdin.close()
        busy.wait(timeout=60)
    assert scores == honest_scores(), (profile, scores, "\n".join(lines)[-3000:])


# ------------------------------------------------------------------------------------------------
# The attacks: (what the handin does, the scores it must get, grader flags, environment)
# ------------------------------------------------------------------------------------------------

FORGE_AND_REPLACE = f"""
import os, subprocess
print({FULL_LINE!r}, flush=True)
for _target in ("/usr/bin/unshare", "/usr/bin/setpriv", "/usr/bin/bwrap", "/usr/bin/make"):
    try:
        open(_target, "ab").close()  # opening to write is the escape; nothing is written
    except OSError:
        continue
    raise SystemExit(f"{{_target}} can be written")
for _command in (["/usr/bin/unshare", "--map-root-user", "true"], ["/usr/bin/unshare", "-U", "true"]):
    try:
        if subprocess.run(_command, capture_output=True).returncode == 0:
            raise SystemExit("a user namespace was created")
    except OSError:
        pass
"""
SNOOP_HIDDEN = """
import glob, os
_patterns = ["autograde.tar", "*/autograde.tar", "autograde/autograder/hidden_set/*/*",
             "*/autograde/autograder/hidden_set/*/*",
             "autograde/autograder/judging/scoring/hidden_tests/*.py",
             "*/autograde/autograder/judging/scoring/hidden_tests/*.py", "*/source/autograde.tar"]
_paths = [p for pattern in _patterns for p in glob.glob("/tmp/hw4p1-*/" + pattern)]
_pid = os.getpid()
for _ in range(12):  # the judge's memory and environment, up the parent chain
    try:
        _pid = int(open(f"/proc/{_pid}/stat").read().rsplit(")", 1)[1].split()[1])
    except (OSError, ValueError, IndexError):
        break
    if _pid <= 1:
        break
    _paths += [f"/proc/{_pid}/mem", f"/proc/{_pid}/environ"]
for _path in _paths:
    try:
        with open(_path, "rb") as _file:
            _data = _file.read(4096)
    except OSError:
        continue
    raise ImportError(f"LEAKED {_path}")
"""
BAD_PROCESS_NAMES = """
import ctypes, os, time
_libc = ctypes.CDLL(None)
_libc.prctl(15, ctypes.c_char_p(b"\\xff\\xfe"), 0, 0, 0)  # PR_SET_NAME on the worker itself
try:
    if os.fork() == 0:
        os.setsid()
        _libc.prctl(15, ctypes.c_char_p(b"a) 0 0 (Z\\xc3("), 0, 0, 0)
        time.sleep(4)
        os._exit(0)
except OSError:
    pass
"""
SHAPE_BOMB = """
import numpy as _np
_Reference = MultiHeadAttention
class MultiHeadAttention(_Reference):
    def backward(self, d_output):
        N = 16000  # added together: 16000 x 16000 float64, 2 GB
        return _np.zeros((N, 1)), _np.zeros((1, N)), _np.zeros((N, 1))
"""
THREE_BIG_CHILDREN = """
import os, select, time
_read, _write = os.pipe()
_children = []
for _ in range(3):
    try:
        _pid = os.fork()
    except OSError:
        break
    if _pid == 0:
        try:
            _block = bytearray(2 * 2**30)  # zero-filled: every page touched
            os.write(_write, b"k")
            time.sleep(3)
        finally:
            os._exit(0)
    _children.append(_pid)
os.close(_write)
_held, _deadline = b"", time.time() + 30
while len(_held) < 3 and time.time() < _deadline:
    if not select.select([_read], [], [], 1)[0]:
        continue
    _chunk = os.read(_read, 3)
    if not _chunk:
        break
    _held += _chunk
for _pid in _children:
    os.waitpid(_pid, 0)
if len(_held) == 3:
    raise SystemExit("three children held 2 GiB each at once")
"""

FILL_THE_DISK = """
import os
_written, _block = 0, b"\\0" * 2**20
_folders = {os.path.realpath(f) for f in (os.environ.get("TMPDIR", "/tmp"), os.getcwd(), "/tmp",
                                          "/dev/shm", "/dev", os.path.expanduser("~"))}
for _folder in sorted(_folders):
    for _index in range(160):
        try:
            with open(os.path.join(_folder, f"hw4p1-fill-{os.getpid()}-{_index}"), "xb") as _file:
                _file.write(_block)
            _written += len(_block)
        except OSError:
            break
if _written > 80 * 2**20:
    raise SystemExit(f"wrote {_written >> 20} MiB to disks other gradings share")
"""
# A hint quotes the code of the line that raised, never the student's words: Linear's backward
# raises on a line whose comment and string literals claim the grade.
PROSE = "All hidden tests passed: grade 50/50"
PROSE_IN_A_COMMENT = f"""
_ProseLinear = Linear
class Linear(_ProseLinear):
    def backward(self, dLdZ):
        return dLdZ @ self.W.T + len("{PROSE}")  # {PROSE}
"""
PROSE_IN_AN_FSTRING = f"""
_ProseLinear = Linear
class Linear(_ProseLinear):
    def backward(self, dLdZ):
        return self.W @ dLdZ + len(f"{{dLdZ.shape}} # {PROSE}")  # {PROSE}
"""


def quotes_the_code(quoted: str) -> Callable[[dict], bool]:
    """A staff check: a Linear hint quotes ``quoted`` (the line with its literals elided and its
    comment dropped), and nothing of details.json holds PROSE."""
    def said(details: dict) -> bool:
        hints = [test.get("hint") or "" for test in details.get("tests") or []
                 if test.get("category") == "Linear"]
        return (any(f"at `{quoted}`: " in hint for hint in hints)
                and PROSE not in json.dumps(details))
    return said


def duplicate_member_handin(folder: Path) -> Path:
    """A handin whose first mytorch/nn/linear.py is broken and whose last (the one tar -x and
    bsdtar leave) is the reference: graded as extracted, it is honest."""
    honest = attack_handin(folder, "", None)
    patched = folder / "duplicate.tar"
    with tarfile.open(honest) as source, tarfile.open(patched, "w") as target:
        members = source.getmembers()
        broken = tarfile.TarInfo("handin/mytorch/nn/linear.py")
        text = b"raise ImportError('the first copy')\n"
        broken.size = len(text)
        target.addfile(broken, io.BytesIO(text))
        for member in members:
            target.addfile(member, source.extractfile(member))
    return patched


def utf7_handin(folder: Path) -> Path:
    """mytorch/nn/linear.py, the reference's code, stored in UTF-7 under its coding declaration:
    Python runs it, while a reader (or a diff, or the similarity check) that reads UTF-8 sees
    something else. Graded as Python reads it, mytorch scores full marks."""
    handin = attack_handin(folder, "", None)
    linear = folder / "handin/mytorch/nn/linear.py"
    linear.write_bytes((UTF7_SOURCE.splitlines()[0] + "\n" + linear.read_text()).encode("utf-7"))
    return pack_folder(folder / "handin", handin)


def door_handin(folder: Path, door: str = "blob") -> Path:
    """Every mytorch file the reference's own code as a zlib blob, run through ``door`` (one of
    attack_handins.DOORS)."""
    handin = attack_handin(folder, "", None)
    shutil.rmtree(folder / "handin/mytorch")
    door_mytorch(folder / "handin", DOORS[door])
    return pack_folder(folder / "handin", handin)


def with_members(folder: Path, extra: list) -> Path:
    """The honest handin with ``extra`` members after its own."""
    honest = attack_handin(folder, "", None)
    with tarfile.open(honest) as source:
        members = [(member, source.extractfile(member).read()) for member in source.getmembers()]
    return write_tar(folder / "extra.tar", members + extra, format=tarfile.GNU_FORMAT)


NESTED_OUTPUT = """
import os, sys
_tests = os.listdir(sys.argv[sys.argv.index("--input") + 1])  # the first test's program
if any(name.startswith("linear") for name in _tests):  # Linear's worker only
    _header = ("[" * 32_000 + "]" * 32_000).encode()
    os.write(int(sys.argv[sys.argv.index("--result-fd") + 1]),
             len(_header).to_bytes(8, "little") + _header)
"""


def bwrap_elsewhere(folder: Path) -> dict:
    """A PATH whose first folder holds a copy of bubblewrap (outside the worker's /usr/bin:/bin)."""
    elsewhere = folder / "opt-bin"
    elsewhere.mkdir()
    elsewhere.chmod(0o755)
    if shutil.which("bwrap"):
        shutil.copy2(shutil.which("bwrap"), elsewhere / "bwrap")
    return {"PATH": f"{elsewhere}:{os.environ['PATH']}"}


HONEST, MYTORCH_0, NOTHING, LINEAR_0 = "honest", "mytorch 0", "all 0", "Linear 0"
MAX_REPORT_BYTES = 2**20  # every channel of every row's report
SYSTEM_PROGRAMS = [path for path in ("/usr/bin/unshare", "/usr/bin/setpriv", "/usr/bin/make",
                                     "/usr/bin/bwrap") if Path(path).exists()]
JUDGE_PEAK = int(1.5 * 2**30)  # no grader process grows beyond this (the judge's arithmetic)


class Attack(NamedTuple):
    build: Callable[[Path], Path]  # folder -> handin.tar
    expected: str | dict  # HONEST, MYTORCH_0, "<category> below honest", or the exact
    # scores of the categories that differ from the honest ones
    environment: dict | str | None = None  # "bwrap-elsewhere": a PATH built in the test's folder
    peak: int = JUDGE_PEAK  # the largest resident set any one process of the grading may reach
    # What the staff's channels must say (details.json -> held or not), for attacks on them
    staff: Callable[[dict], bool] | None = None


# A classmate's handin: the tiny model's weights with a config naming seed 5, so that all of them
# is what training learned from seed 5's initialisation (and the scores stay the honest ones).
CLASSMATE_SEED = 5


def classmate_state() -> dict:
    """The classmate's state dict (the tiny model built under seed 0, as make_model_handin)."""
    torch.manual_seed(0)
    return DecoderOnlyTransformer(**TINY_MODEL, num_classes=CHAR_VOCAB).state_dict()


def classmate_copy(change: Callable[[dict], dict]) -> Callable[[Path], Path]:
    """A handin builder: the reference mytorch and the classmate's weights after ``change``, with
    the classmate's config."""
    def build(folder: Path) -> Path:
        handin = folder / "handin"
        make_model_handin(handin)
        copy_reference_mytorch(handin)
        torch.save(change(classmate_state()), handin / STATE_DICT_FILE)
        config = yaml.safe_load((handin / CONFIG_FILE).read_text())
        (handin / CONFIG_FILE).write_text(yaml.safe_dump({**config, "seed": CLASSMATE_SEED}))
        return pack_folder(handin, folder / "handin.tar")
    return build


def shares_the_classmates_weights(details: dict) -> bool:
    """The fingerprint the judge reported is within TOLERANCE of the classmate's."""
    fingerprint = (details.get("lm") or {}).get("weights_fingerprint")
    initial = grade_model.initial_state(TINY_MODEL, CHAR_VOCAB, CLASSMATE_SEED)
    theirs = weights_fingerprint.fingerprint(classmate_state(), initial)
    return isinstance(fingerprint, str) and bool(
        weights_fingerprint.shared_weights({"classmate": theirs, "handin": fingerprint}))


def computes_the_classmates_function(details: dict) -> bool:
    """The fingerprint the judge reported carries probe outputs within OUTPUT_TOLERANCE of what
    the classmate's model computes on the public test split (``make data``'s, which the built
    autograder holds)."""
    fingerprint = (details.get("lm") or {}).get("weights_fingerprint")
    model = DecoderOnlyTransformer(**TINY_MODEL, num_classes=CHAR_VOCAB)
    model.load_state_dict(classmate_state())
    probe = grade_model.read_partition(REPO_ROOT / "hw4_data/hw4p1_data",
                                       H4Tokenizer(DEFAULT_TOKEN_MAP, "char"))
    theirs = weights_fingerprint.fingerprint(
        classmate_state(), grade_model.initial_state(TINY_MODEL, CHAR_VOCAB, CLASSMATE_SEED),
        weights_fingerprint.probe_outputs(model, probe))
    return isinstance(fingerprint, str) and bool(
        weights_fingerprint.same_outputs({"classmate": theirs, "handin": fingerprint}))


def heads_rescaled(state: dict, factor: float = 2.0) -> dict:
    """``state`` computing the same function: each attention layer's queries times ``factor``,
    its keys divided by it."""
    out = dict(state)
    for key in [key for key in state if key.endswith(("in_proj_weight", "in_proj_bias"))]:
        d_model = state[key].shape[0] // 3
        scale = torch.ones(3 * d_model, *([1] * (state[key].dim() - 1)), dtype=state[key].dtype)
        scale[:d_model], scale[d_model:2 * d_model] = factor, 1 / factor
        out[key] = state[key] * scale
    return out


def lying_report_handin(folder: Path) -> Path:
    """The honest tiny handin with a test_metrics.json reporting a perplexity of 1.5 (the model
    gives tens on any text) and a run card naming a test set that is nowhere."""
    handin = folder / "handin"
    make_model_handin(handin)
    copy_reference_mytorch(handin)
    (handin / METRICS_FILE).write_text(json.dumps({"perplexity_char": 1.5}))
    (handin / RUN_CARD_FILE).write_text(json.dumps({"test_perplexity_char": 1.5, "test_set": {
        "split": "test", "subset": 0.1, "transcripts": 45, "characters": 9876,
        "sha256": "0" * 64}}))
    return pack_folder(handin, folder / "handin.tar")


def flags_the_lying_report(details: dict) -> bool:
    return any(flag.startswith(f"{METRICS_FILE} reports a test perplexity of 1.5000; these "
                               f"weights give ") and "on the hidden test set" in flag
               for flag in details.get("flags") or [])


def no_card_lying_report_handin(folder: Path) -> Path:
    """The honest tiny handin reporting a perplexity of 1.5, without a run card at all."""
    handin = folder / "handin.tar"
    lying_report_handin(folder)
    (folder / "handin" / RUN_CARD_FILE).unlink()
    return pack_folder(folder / "handin", handin)


def linear_seconds(details: dict) -> dict[str, float | None]:
    """{Linear's hidden test: its seconds in details.json}, in the order the judge runs them."""
    return {test["name"]: test.get("seconds") for test in details.get("tests") or []
            if test.get("category") == "Linear"}


def slow_test_keeps_its_seconds(details: dict) -> bool:
    """The first Linear test, whose forward slept, shows the sleep; no other test does."""
    seconds = list(linear_seconds(details).values())
    return (len(seconds) > 1 and all(isinstance(value, float) for value in seconds)
            and seconds[0] >= SLEEP_S and all(value < SLEEP_S for value in seconds[1:]))


ATTACKS = {  # the review's table, by row
    "01 host root replaces unshare, forges the scores line": Attack(
        lambda folder: attack_handin(folder, FORGE_AND_REPLACE, None), HONEST),
    "02 reads the hidden set, tests and judge memory": Attack(
        lambda folder: attack_handin(folder, SNOOP_HIDDEN, None), HONEST),
    "04 replays a recorded result stream": Attack(replay_handin, MYTORCH_0),
    "05 names its processes with non-UTF-8 bytes": Attack(
        lambda folder: attack_handin(folder, BAD_PROCESS_NAMES, None), HONEST),
    "07 backward returns (N,1) and (1,N) arrays": Attack(
        lambda folder: attack_handin(folder, "", None, nn_append=SHAPE_BOMB),
        "MultiHeadAttention below honest"),
    # One child of 2 GiB may run; the scores show whether all three ever held theirs at once.
    "08 three children of 2 GiB": Attack(
        lambda folder: attack_handin(folder, THREE_BIG_CHILDREN, None), HONEST, peak=5 * 2**30 // 2),
    "09 duplicate member, the broken copy first": Attack(duplicate_member_handin, HONEST),
    "10 PYTHONOPTIMIZE=1 with a zero stub": Attack(
        lambda folder: attack_handin(folder, "", ZEROS_NN), MYTORCH_0, {"PYTHONOPTIMIZE": "1"}),
    "11 bubblewrap outside the worker's PATH": Attack(
        lambda folder: attack_handin(folder, "", None), HONEST, "bwrap-elsewhere"),
    "13 fills the disk with temp files": Attack(
        lambda folder: attack_handin(folder, FILL_THE_DISK, None), HONEST),
    "12 a Linear of zeros in the right dtype": Attack(
        lambda folder: attack_handin(folder, "", ZERO_LINEAR_NN), MYTORCH_0),
    # The grader trusts nothing computed, parsed or sized from inside the handin.
    "14 mytorch source under a utf-7 coding declaration": Attack(utf7_handin, MYTORCH_0),
    "15 mytorch files that exec zlib blobs of themselves": Attack(door_handin, MYTORCH_0),
    "16 470 members with 60,000-character names": Attack(
        lambda folder: with_members(folder, long_name_members(470, 60_000)), HONEST),
    "17 a mytorch file 1,500 folders deep": Attack(
        lambda folder: with_members(folder, [deep_mytorch_member(1500)]), HONEST),
    "18 a zip named handin.tar declaring 4.2 M entries": Attack(
        lambda folder: zip_directory_bomb(folder / "handin.tar", 4_200_000), NOTHING),
    "19 Linear's worker sends a header nested 32,000 deep": Attack(
        lambda folder: attack_handin(folder, NESTED_OUTPUT, None), LINEAR_0),
    "20 finite differences of an honest forward beside a wrong one": Attack(
        lambda folder: attack_handin(folder, FD_GAMING_INIT, None, nn_append=DOUBLED_LINEAR_NN),
        {"Linear": FAIR_LINEAR_POINTS}),
    # Staff channels: the judge's model child fingerprints what the weights learned, and flags a
    # report far below the hidden set whatever the card says.
    "21 a classmate's weights, one value moved by one ulp": Attack(
        classmate_copy(one_ulp), HONEST, staff=shares_the_classmates_weights),
    "22 a classmate's weights, final norm x 4 and final layer / 4": Attack(
        classmate_copy(rescaled), HONEST, staff=shares_the_classmates_weights),
    "23 a classmate's weights with 1% noise": Attack(
        classmate_copy(lambda state: noised(state, grade_model.initial_state(
            TINY_MODEL, CHAR_VOCAB, CLASSMATE_SEED), 0.01)), HONEST,
        staff=shares_the_classmates_weights),
    "24 reports a perplexity of 1.5, its card's test set nowhere": Attack(
        lying_report_handin, HONEST, staff=flags_the_lying_report),
    # Code made at run time, each door of the worker's closed list (autograder/sandboxed/refusals.py): a
    # mytorch whose files hide the reference's code behind a door scores full marks if it opens.
    "25 mytorch compiled by ast.parse with PyCF_ONLY_AST 0, run as functions": Attack(
        lambda folder: door_handin(folder, "ast flags"), MYTORCH_0),
    "26 mytorch run by a SourceFileLoader whose get_data is a blob": Attack(
        lambda folder: door_handin(folder, "loader"), MYTORCH_0),
    "27 mytorch as pickles that reduce to marshal.loads": Attack(
        lambda folder: door_handin(folder, "pickle"), MYTORCH_0),
    # 32 variants over every family (text, trees, codecs, generators, code objects, functions,
    # marshal, pickle, loaders, native libraries, programs, gc): one that gets through stops the
    # mytorch (a file through a codec of its own is tried where the handin's file was graded).
    "28 honest mytorch beside 32 ways to make or run code": Attack(
        lambda folder: attack_handin(folder, TRICKS, None), HONEST),
    # The seconds of each hidden test are the judge's: a request, then its answer (Lockstep).
    "29 Linear's first forward sleeps 3 s": Attack(
        lambda folder: attack_handin(folder, "", None, nn_append=SLOW_FIRST_FORWARD_NN), HONEST,
        staff=slow_test_keeps_its_seconds),
    "30 reports a perplexity of 1.5 and hands in no run card": Attack(
        no_card_lying_report_handin, HONEST, staff=flags_the_lying_report),
    # Weights compared by what they compute: reparametrised copies that move every tensor.
    "34 a classmate's weights, residual basis, FF units and head dims permuted": Attack(
        classmate_copy(lambda state: permuted(state, TINY_MODEL["num_heads"])), HONEST,
        staff=computes_the_classmates_function),
    "35 a classmate's weights permuted by another draw, final norm x 4, final layer / 4": Attack(
        classmate_copy(lambda state: permuted(rescaled(state), TINY_MODEL["num_heads"], seed=7)),
        HONEST, staff=computes_the_classmates_function),
    "36 a classmate's weights, queries x 2 and keys / 2, then permuted": Attack(
        classmate_copy(lambda state: permuted(heads_rescaled(state), TINY_MODEL["num_heads"],
                                              seed=3)), HONEST,
        staff=computes_the_classmates_function),
    # The hint quotes the raising line's code: string literals as "...", no comment.
    "64 Linear raises on a line claiming the grade in a string and a comment": Attack(
        lambda folder: attack_handin(folder, "", None, nn_append=PROSE_IN_A_COMMENT),
        "Linear below honest", staff=quotes_the_code('return dLdZ @ self.W.T + len("...")')),
    "65 Linear raises on a line claiming the grade in an f-string after a '#'": Attack(
        lambda folder: attack_handin(folder, "", None, nn_append=PROSE_IN_AN_FSTRING),
        "Linear below honest", staff=quotes_the_code('return self.W @ dLdZ + len("...")')),
}


def expected_scores(kind: str | dict, scores: dict) -> bool:
    honest = honest_scores()
    if isinstance(kind, dict):
        return scores == {**honest, **kind}
    if kind == HONEST:
        return scores == honest
    if kind == MYTORCH_0:
        return scores == {**MYTORCH_ZERO, "LanguageModel": honest["LanguageModel"]}
    if kind == NOTHING:
        return not any(scores.values())
    if kind == LINEAR_0:
        return scores == {**honest, "Linear": 0}
    below = kind.removesuffix(" below honest")
    others = {c: s for c, s in scores.items() if c != below}
    return (scores[below] < honest[below]
            and others == {c: s for c, s in honest.items() if c != below})


# Rows decided in the judge, with nothing a profile changes (the uid, capabilities, seccomp filter,
# mounts, bubblewrap, cgroups) reaching the attack's code, run in the host profile only (the table
# says "not run" in the others); each was run once in all four, its cells identical but the mode
# and peak memory (docs/results.md, "rows no profile changes run once"). What else a profile
# could change, the grading of the honest handin beside each, is
# test_the_honest_handin_scores_alike_in_every_profile's.
# - 09, 16, 17, 18, the archive's attacks: met by the judge (autograder/judging/intake/safe_tar.py,
#   plain_tar.py) before it chooses a sandbox; 14, a file under a utf-7 coding declaration:
#   dropped there too (judge.refuse_foreign_encodings), so the worker never sees it.
# - 10, PYTHONOPTIMIZE: the Makefile unexports it, the judge refuses -O, and every mode gives the
#   worker the same fixed environment (sandbox_modes.Mode.environment); the stub's zeros are
#   scored as 12's are.
# - 07, 12, 19, 20, 29, the judge's verdicts on what the worker returns: shapes checked before
#   arithmetic, values against the judge's own truths, finite differences of the forwards the
#   judge asks for, the wire's reader refusing a header nested 32,000 deep, a test's seconds
#   timed by the judge (Lockstep). Their code in the worker is numpy arithmetic, a sys.modules
#   lookup, a sleep, a listing of its own input folder and a write to its result pipe: what an
#   honest worker does in every mode.
# - 21 to 24, 30, 34 to 36, the staff's channels: computed by the judge from what the model child
#   (which runs no student code) measured.
# Rows 15 and 25 to 28 stay in all four: the worker's audit hook decides them by paths (mytorch's,
#   the standard library's, numpy's: laid out by each mode) and by reading the files back, and
#   the profile decides which folders the worker sees and may write.
JUDGE_SIDE = ("07", "09", "10", "12", "14", "16", "17", "18", "19", "20", "21", "22", "23", "24",
              "29", "30", "34", "35", "36")
CASES = [(attack, profile) for attack in ATTACKS for profile in PROFILES
         if profile == "host" or attack.split()[0] not in JUDGE_SIDE]


def test_judge_side_names_only_rows_of_the_table():
    """A JUDGE_SIDE entry that names no row would leave the row it meant in every profile."""
    assert set(JUDGE_SIDE) <= {attack.split()[0] for attack in ATTACKS}, JUDGE_SIDE


@pytest.mark.parametrize("attack, profile", CASES)
def test_attack_is_held_in_each_profile(attack, profile):
    build, expected, environment, peak_limit, staff = ATTACKS[attack]
    folder = profile_folder(profile, attack.split()[0])
    if environment == "bwrap-elsewhere":
        environment = bwrap_elsewhere(folder)
    peak = []
    programs = {path: Path(path).stat().st_mtime_ns for path in SYSTEM_PROGRAMS}
    details_path = folder / "grading" / "details.json"
    lines, scores = run_grader(folder, build(folder), f"--results-json {details_path}",
                               peak_memory=peak, environment=environment, profile=profile)
    text = "\n".join(lines)
    hidden = [line for line in read_hidden_lines(built_autograder() / "autograde.tar")
              if len(line) > 20]
    report = report_sizes(text, details_path, scores)
    oracle = hidden_perplexity_digits(text, details_path)
    told = staff is None or staff(json.loads(details_path.read_text(encoding="utf-8")))
    held = (expected_scores(expected, scores) and told and FULL_LINE not in lines and not oracle
            and not any(line in text for line in hidden) and peak[0] < peak_limit
            and "The autograder itself failed" not in text and PROSE not in text
            and max(report.values()) < MAX_REPORT_BYTES)
    platform_profiles.record(TABLE, profile, attack,
                             cell(scores, text, held, peak=peak[0], report=max(report.values())))
    assert max(report.values()) < MAX_REPORT_BYTES, report
    assert expected_scores(expected, scores), (attack, profile, scores, text[-3000:])
    assert told, f"the staff's channels do not say it: {details_path.read_text()[:3000]}"
    assert FULL_LINE not in lines, "a forged scores line reached the grader's output"
    assert "The autograder itself failed" not in text, text[-3000:]
    assert PROSE not in text, "the feedback quotes the student's words"
    assert not any(line in text for line in hidden), "the hidden set leaked into the feedback"
    assert not oracle, f"the feedback gives the hidden-set perplexity beyond 2 decimals: {oracle}"
    assert peak[0] < peak_limit, f"a grader process used {peak[0] / 2**30:.1f} GiB"
    if expected != NOTHING:  # with nothing to grade, no sandbox is chosen
        assert mode_used(text) == EXPECTED_MODE[profile], (profile, text[-3000:])
    assert programs == {path: Path(path).stat().st_mtime_ns for path in SYSTEM_PROGRAMS}


def hidden_perplexity_digits(text: str, details_path: Path) -> list[str]:
    """The numbers of the student's feedback ``text`` that give the hidden-set perplexity (which
    details.json, a staff channel, keeps in full) to more than 2 decimals: with many submissions,
    such digits would be a slow oracle of the hidden text."""
    details = json.loads(details_path.read_text(encoding="utf-8")) if details_path.exists() else {}
    perplexity = (details.get("lm") or {}).get("perplexity_char")
    if not isinstance(perplexity, float):
        return []
    return [number for number in re.findall(r"\d+\.\d{3,}", text)
            if abs(float(number) - perplexity) < 0.005]


def report_sizes(text: str, details_path: Path, scores: dict) -> dict[str, int]:
    """Bytes of each channel of a grading's report: Autolab's feedback (also the regrade's
    feedback file), --results-json, and the results.json Gradescope's adapter makes of them."""
    details_text = details_path.read_text(encoding="utf-8") if details_path.exists() else "{}"
    details = (grading_report.load(details_path) if details_path.exists()
               else grading_report.GradingReport(status=grading_report.Status.CRASHED))
    payload = gradescope.results_payload(
        scores, details, gradescope.visible_summary(scores, details, True, "visible"), "visible")
    return {"feedback": len(text.encode()), "details.json": len(details_text.encode()),
            "results.json": len(json.dumps(payload, indent=1).encode())}


# ------------------------------------------------------------------------------------------------
# Gradescope's own entry point, and two gradings at once
# ------------------------------------------------------------------------------------------------

def test_gradescope_run_autograder_keeps_the_hidden_set_in_its_profile():
    """Rows 2 and 3 on Gradescope's entry point, in its profile: source/autograde.tar (0644 as
    Gradescope unpacks it) and every other copy stay out of reach; results.json shows nothing
    hidden."""
    folder = profile_folder("gradescope", "run-autograder")
    root_source = folder / "autograder/source/autograde.tar"
    handin = attack_handin(folder, f"SOURCE_TAR = {str(root_source)!r}\n{SNOOP_INIT}{SNOOP_HIDDEN}",
                           None)
    root = unpack_root(folder, handin)
    results = run_autograder(root, profile="gradescope")
    check_spec(results)
    text = json.dumps(results)
    hidden = read_hidden_lines(built_autograder() / "autograde.tar")
    held = (category_totals(results) == honest_scores() and "LEAKED" not in text
            and not any(line in text for line in hidden if len(line) > 20))
    platform_profiles.record(TABLE, "gradescope", "03 run_autograder: hidden set in results.json",
                             f"{'held' if held else 'GOT THROUGH'}: score {results['score']:g}")
    assert category_totals(results) == honest_scores(), category_totals(results)
    assert "LEAKED" not in text and "SNOOPED_NOTHING" not in text
    assert not any(line in text for line in hidden if len(line) > 20)
    assert not root_source.exists(), "source/autograde.tar must be deleted once copied"


HOSTILE_NEIGHBOUR = """
import ctypes, os, signal, threading, time
_libc = ctypes.CDLL(None, use_errno=True)
_threads = []
try:  # the per-uid task count a concurrent grading of the same uid needs
    for _ in range(256):
        _threads.append(threading.Thread(target=time.sleep, args=(10,), daemon=True))
        _threads[-1].start()
except (RuntimeError, OSError):
    pass
_end = time.time() + 10
while time.time() < _end:
    try:
        _pids = [int(name) for name in os.listdir("/proc") if name.isdigit()]
    except OSError:
        _pids = []
    for _pid in _pids + [-1]:
        if _pid == os.getpid():
            continue
        for _signal in (signal.SIGSTOP, signal.SIGKILL):
            try:
                os.kill(_pid, _signal)
            except OSError:
                pass
        if _pid > 0:
            _libc.ptrace(16, _pid, None, None)  # PTRACE_ATTACH
    for _folder, _dirs, _files in os.walk(NEIGHBOUR):
        for _name in _files:
            try:
                with open(os.path.join(_folder, _name), "r+b") as _file:
                    _file.write(b"\\0")
            except OSError:
                pass
    time.sleep(0.05)
"""


@pytest.mark.parametrize("profile", PROFILES)
def test_a_hostile_grading_leaves_a_concurrent_honest_one_alone(profile):
    """Row 6: two gradings at once on one host; the hostile one signals and traces every process
    it can name, uses up its uid's task count and writes into the other's folder for its whole
    run. The honest one scores exactly its honest scores."""
    folder = profile_folder(profile, "concurrent")
    honest_folder, hostile_folder = folder / "honest", folder / "hostile"
    for path in (honest_folder, hostile_folder):
        path.mkdir()
        path.chmod(0o755)
    hostile = attack_handin(hostile_folder,
                            f"NEIGHBOUR = {str(honest_folder)!r}\n{HOSTILE_NEIGHBOUR}", None)
    honest = attack_handin(honest_folder, "", None)
    built_autograder()  # once, before the threads that use it
    with ThreadPoolExecutor(2) as pool:
        hostile_run = pool.submit(run_grader, hostile_folder, hostile, profile=profile)
        honest_run = pool.submit(run_grader, honest_folder, honest, profile=profile)
        (honest_lines, honest_got), (_, hostile_got) = honest_run.result(), hostile_run.result()
    platform_profiles.record(TABLE, profile, "06 a hostile grading beside an honest one",
                             cell(honest_got, "\n".join(honest_lines),
                                  honest_got == honest_scores(), whose="honest one "))
    assert honest_got == honest_scores(), ("\n".join(honest_lines))[-3000:]
    assert all(hostile_got[c] <= honest_scores()[c] for c in rubric.RUBRIC), hostile_got


def similarity_in_profile(profile: str, handins: Path, handout: Path,
                          out: Path) -> subprocess.CompletedProcess:
    """``python -m autograder.classroom.similarity`` (make similarity's entry point) run by the staff in
    ``profile`` on the class ``handins``, writing to ``out`` (made here, writable to the
    non-root profiles' user)."""
    out.mkdir()
    out.chmod(0o777)
    return subprocess.run(platform_profiles.launcher(profile, [
        sys.executable, "-m", "autograder.classroom.similarity", str(handins), "--handout", str(handout),
        "--out", str(out)]), capture_output=True, text=True, cwd=REPO_ROOT, timeout=600)


# Rows 31, 37 and 38 in the host profile are make test's own runs, the same class through the same
# `python -m autograder.classroom.similarity` as root with the same checks: tests/classroom/
# test_similarity.py::test_a_poisoned_class_finishes_through_the_real_entry_point and
# test_similarity_families.py::test_each_family_of_hidden_copies_is_flagged_and_ranks_first,
# ::test_one_poisoned_handin_never_stops_the_class. They run in the other profiles only.
CONFINED = tuple(profile for profile in PROFILES if profile != "host")


@pytest.mark.parametrize("profile", CONFINED)
def test_a_poisoned_class_is_compared_in_each_profile(profile):
    """Row 31: ``python -m autograder.classroom.similarity`` run by the staff in the profile on a class
    holding a moved copy of a classmate's graded code (its classes in a module of another name,
    a variable renamed) that also carries files ending the decoding (a codec that raises), the
    parsing (nesting deep enough for a RecursionError, a unary chain for a MemoryError), and a
    student whose graded file cannot be decoded: the run finishes, writes every file, ranks the
    moved copy first and names each poisoned file as its student's finding."""
    folder = profile_folder(profile, "similarity")
    out = folder / "out"
    problems = poisoned_class_problems(similarity_in_profile(profile, *poisoned_class(folder),
                                                             out), out)
    platform_profiles.record(TABLE, profile, "31 similarity of a class with a poisoned handin",
                             "held: moved copy first, each poisoned file a finding"
                             if not problems else f"GOT THROUGH: {problems[0][:200]}")
    assert problems == []


@pytest.mark.parametrize("profile", PROFILES)
def test_moved_copies_rank_first_in_each_profile(profile):
    """Row 32: ``python -m autograder.classroom.similarity`` run by the staff in the profile on three
    independent students, the skeleton and a copy of each moved by another route (a star import
    from a module of another name; a renamed class bound from a subpackage's module; the
    package's __init__ re-exporting from another module), names changed and methods reordered:
    the three copies are the three first pairs, flagged, and no independent pair is."""
    folder = profile_folder(profile, "moved")
    out = folder / "out"
    result = similarity_in_profile(profile, class_folder(folder, moved_class(folder)),
                                   handout_folder(folder), out)
    problems = moved_copies_problems(result, out)
    platform_profiles.record(TABLE, profile, "32 similarity of copies moved by three routes",
                             "held: the three copies first, no independent pair flagged"
                             if not problems else f"GOT THROUGH: {problems[0][:200]}")
    assert problems == []


@pytest.mark.parametrize("profile", CONFINED)
def test_copies_hidden_from_a_static_reading_are_flagged_in_each_profile(profile):
    """Row 37: ``python -m autograder.classroom.similarity`` run by the staff in the profile on
    three independent students and a copy of one of them in each family a static reading of
    Python misses (classes moved to ``_core_*.py`` and subclassed by attribute, in a module or a
    subpackage; hundreds of constants before the class body, in it or in the module; the class
    bound under both branches of an ``if`` or a ``try``; helpers copied under other names): each
    copy is flagged and ranks above every independent pair, none of which is flagged."""
    folder = profile_folder(profile, "families")
    out = folder / "out"
    result = similarity_in_profile(profile, class_folder(folder, family_trees(folder)),
                                   handout_folder(folder), out)
    problems = family_problems(result, out, list(FAMILIES))
    platform_profiles.record(TABLE, profile, "37 similarity of copies hidden by seven routes",
                             "held: each copy flagged above every independent pair"
                             if not problems else f"GOT THROUGH: {problems[0][:200]}")
    assert problems == []


@pytest.mark.parametrize("profile", CONFINED)
def test_one_poisoned_handin_never_stops_the_similarity_in_each_profile(profile):
    """Row 38: ``python -m autograder.classroom.similarity`` run by the staff in the profile on a
    class holding one handin each declaring a slow codec (punycode), a lone surrogate through
    raw_unicode_escape, nesting that ends the parser, a file over the grader's limit, nesting past
    the canonical form's bound (read as raw tokens, compared), and a student folder named with
    non-UTF-8 bytes: the run finishes, writes valid UTF-8, produces every other pair and flags the
    copy among them; each poisoned handin that cannot be read is its own finding."""
    folder = profile_folder(profile, "poison")
    out = folder / "out"
    trees = {**family_trees(folder, ["if-branches"]), **poison(folder)}
    problems = poison_problems(similarity_in_profile(
        profile, class_folder(folder, trees), handout_folder(folder), out), out)
    platform_profiles.record(TABLE, profile, "38 similarity of a class with six kinds of poison",
                             "held: every other pair, each poison a finding"
                             if not problems else f"GOT THROUGH: {problems[0][:200]}")
    assert problems == []


# ------------------------------------------------------------------------------------------------
# CPU hogs beside an honest grading (issue 49)
# ------------------------------------------------------------------------------------------------

# Each hog names every task it starts ``{marker}`` (PR_SET_NAME), so the test can count them while
# the gradings run and find any left after. Its own grading gets HOG_TIMEOUT_S per category, so
# the hog that spins until its deadline ends in seconds (the honest one keeps the default).
NAME_TASK = """
import ctypes as _ctypes
def _name_task():
    _ctypes.CDLL(None).prctl(15, _ctypes.c_char_p({marker!r}.encode()), 0, 0, 0)
"""
FORK_SPINNERS = NAME_TASK + """
import os as _os
for _ in range(48):
    try:
        if _os.fork() == 0:
            _name_task()
            while True:
                pass
    except OSError:
        break
"""
THREAD_SPINNERS = NAME_TASK + """
import hashlib as _hashlib, threading as _threading
def _spin():
    _name_task()
    _block = bytes(2**22)
    while True:
        _hashlib.sha256(_block).digest()  # releases the GIL: each thread may take a core
for _ in range(16):
    try:
        _threading.Thread(target=_spin, daemon=True).start()
    except (RuntimeError, OSError):
        break
"""
SPIN_UNTIL_THE_DEADLINE_NN = """
from .linear import Linear as _Linear
from .activation import Softmax as _Softmax
from .scaled_dot_product_attention import ScaledDotProductAttention as _Attention
from .multi_head_attention import MultiHeadAttention as _MultiHead


def _spin(*args, **kwargs):
    _name_task()
    while True:
        pass


Linear = type("Linear", (_Linear,), {"forward": _spin})
Softmax = type("Softmax", (_Softmax,), {"forward": _spin})
ScaledDotProductAttention = type("ScaledDotProductAttention", (_Attention,), {"forward": _spin})
MultiHeadAttention = type("MultiHeadAttention", (_MultiHead,), {"forward": _spin})
"""
OUTLIVE_THE_WORKER = NAME_TASK + """
import os as _os, signal as _signal
try:
    if _os.fork() == 0:  # the worker goes on grading; this child's child outlives it if it may
        _os.setsid()
        if _os.fork() == 0:
            for _number in (_signal.SIGTERM, _signal.SIGHUP, _signal.SIGINT):
                _signal.signal(_number, _signal.SIG_IGN)
            _name_task()
            while True:
                pass
        _os._exit(0)
except OSError:
    pass
"""
HOG_TIMEOUT_S = 3


def cpu_hog_handin(folder: Path, hog: str, marker: str) -> Path:
    """The reference mytorch with ``hog`` (one of CPU_HOGS) run at its import, or, for the deadline
    hog, every graded class's forward spinning; no model (LanguageModel 0), so that its grading
    spends its time on mytorch, where the hog runs."""
    if hog.startswith("41"):
        handin = attack_handin(folder, "", None, nn_append=NAME_TASK.format(marker=marker)
                               + SPIN_UNTIL_THE_DEADLINE_NN)
    else:
        handin = attack_handin(folder, CPU_HOGS[hog].format(marker=marker), None)
    for name in (STATE_DICT_FILE, CONFIG_FILE):
        (folder / "handin" / name).unlink()
    return pack_folder(folder / "handin", handin)


CPU_HOGS = {  # row: the code its mytorch runs (SPIN_UNTIL_THE_DEADLINE_NN for row 41)
    "39 import forks 48 spinning processes": FORK_SPINNERS,
    "40 import starts 16 threads hashing without the GIL": THREAD_SPINNERS,
    "41 every graded forward spins until its deadline": None,
    "42 a child's child outlives the worker, ignoring signals": OUTLIVE_THE_WORKER,
}


def tasks_named(marker: str) -> set[int]:
    """The ids of every task (process or thread) on this machine whose name is ``marker`` (tasks
    that end while they are read are skipped)."""
    found = set()
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            for task in os.listdir(f"/proc/{pid}/task"):
                if Path(f"/proc/{pid}/task/{task}/comm").read_text().strip() == marker:
                    found.add(int(task))
        except OSError:
            continue
    return found


def cpu_controller_here() -> bool:
    """Whether root on this host has a cpu controller to make cgroups in (v1's cpu hierarchy, or
    v2's root listing it), read from the file system, not from the judge's code."""
    unified = Path("/sys/fs/cgroup/cgroup.controllers")
    return os.geteuid() == 0 and (Path("/sys/fs/cgroup/cpu/cpu.cfs_quota_us").exists() or (
        unified.exists() and "cpu" in unified.read_text().split()))


def what_held(text: str) -> list[str]:
    """The kinds of platform_profiles.CPU_HOG_HOLDERS a hog's grading ``text`` shows."""
    shown = {"cpu cgroup": "no cpu cgroup could be created" not in text,
             "one task": "the worker may start no process or thread" in text,
             "deadline": "timed out: this test was still running" in text}
    assert set(shown) == set(platform_profiles.CPU_HOG_HOLDERS)
    return [kind for kind, held in shown.items() if held]


@pytest.mark.parametrize("profile", PROFILES)
def test_cpu_hogs_leave_an_honest_grading_beside_them_alone(profile):
    """Rows 39-42: the four CPU hogs and the honest handin graded at once in the profile (each hog
    with HOG_TIMEOUT_S per category). The honest one scores exactly its scores alone; each hog at
    most the honest scores; no task a hog named survives the gradings; each hog's sandbox lines
    say whether a cpu cgroup capped its tree (only where the judge can make one: as root on the
    host), and where none did, its worker was one task (no fork, no thread: seccomp). Each hog is
    seen running (its named tasks, polled): where a cgroup caps the tree, its processes and threads
    too; where the worker is one task, only the forward that spins to its deadline."""
    folder = profile_folder(profile, "cpu-hogs")
    honest_folder = folder / "honest"
    honest_folder.mkdir()
    honest_folder.chmod(0o755)
    markers = {hog: f"hog{hog.split()[0]}{os.urandom(3).hex()}" for hog in CPU_HOGS}
    builds = {}
    for hog in CPU_HOGS:
        hog_folder = folder / hog.split()[0]
        hog_folder.mkdir()
        hog_folder.chmod(0o755)
        builds[hog] = (hog_folder, cpu_hog_handin(hog_folder, hog, markers[hog]))
    seen = {hog: 0 for hog in CPU_HOGS}
    built_autograder()  # once, before the threads that use it
    with ThreadPoolExecutor(len(CPU_HOGS) + 1) as pool:
        honest_run = pool.submit(run_grader, honest_folder,
                                 attack_handin(honest_folder, "", None), profile=profile)
        hog_runs = {hog: pool.submit(run_grader, hog_folder, handin,
                                     f"--mytorch-timeout {HOG_TIMEOUT_S}", profile=profile)
                    for hog, (hog_folder, handin) in builds.items()}
        while not all(run.done() for run in [honest_run, *hog_runs.values()]):
            for hog, marker in markers.items():
                seen[hog] = max(seen[hog], len(tasks_named(marker)))
            time.sleep(0.5)
        honest_lines, honest_got = honest_run.result()
        hogs = {hog: run.result() for hog, run in hog_runs.items()}
    left = {hog: tasks_named(marker) for hog, marker in markers.items()}
    for task in set().union(*left.values()):  # so that a failed row leaves no spinner behind
        try:
            os.kill(task, signal.SIGKILL)
        except OSError:
            pass
    capped = profile == "host" and cpu_controller_here()
    honest_held = honest_got == honest_scores()
    problems = []
    for hog, (lines, got) in hogs.items():
        text = "\n".join(lines)
        kinds = what_held(text)
        ran = seen[hog] > 0 if capped or hog.startswith("41") else seen[hog] == 0
        held = (honest_held and all(got[c] <= honest_scores()[c] for c in rubric.RUBRIC)
                and not left[hog] and ("cpu cgroup" in kinds) == capped
                and (capped or "one task" in kinds) and ran)
        platform_profiles.record(TABLE, profile, hog, cell(
            honest_got, "\n".join(honest_lines), held, whose="honest one ")
            + f"; hog mytorch {sum(got[c] for c in rubric.MYTORCH_RUBRIC):g}, {seen[hog]} of its "
            f"tasks at most at once, {len(left[hog])} left; held by {', '.join(kinds) or 'nothing'}")
        if not held:
            problems.append((hog, got, kinds, sorted(left[hog]), text[-2000:]))
    assert honest_held, ("\n".join(honest_lines))[-3000:]
    assert problems == []


@pytest.mark.parametrize("row", ROWS)
@pytest.mark.parametrize("profile", PROFILES)
def test_disguised_copies_are_flagged_in_each_profile(profile, row):
    """Rows 61-63: ``python -m autograder.classroom.similarity`` run by the staff in the profile
    on the four honest students (the reference, three styles) and copies of two of them under
    each disguise of the row (tests/classroom/similarity_disguises.py: renamed, reordered, split
    across modules; a no-op after every assignment, ten kinds; respelled numpy; all at once):
    each copy is flagged, no pair of different students' work is, every copy at least MARGIN
    above them."""
    folder = profile_folder(profile, "disguised")
    out = folder / "out"
    trees = disguised_class(folder, ROW_VICTIMS, ROWS[row])
    problems = disguise_problems(similarity_in_profile(
        profile, class_folder(folder, trees), handout_folder(folder), out), out)
    platform_profiles.record(TABLE, profile, row,
                             "held: each copy flagged, no different students' pair"
                             if not problems else f"GOT THROUGH: {problems[0][:200]}")
    assert problems == []
