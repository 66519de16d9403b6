# hw4p1: instructor-only
"""Tests of the model child forked from the judge
(``autograder.judging.isolation.parked_child.ParkedChild``, parked by
``autograder.judging.scoring.model_child.park_model_child``): it runs as the fresh ``python -m
autograder.judging.scoring.grade_model`` command did (session, limits, folder, environment,
descriptors, signals, malloc, threads, output), is killed whole at its time limit, is refused where
a thread would not survive the fork, and measures every handin to the last digit as the fresh
command does; a grading through the Autolab Makefile forks its model child.

Each test runs a judge of its own (a fresh interpreter that imports ``autograder.judging.grade`` as the
real judge does, with another hash seed than its children's; or the real one, through make),
since the fork is only safe in a process that has run no OpenMP region, which a pytest process
cannot promise.

    .venv/bin/python -m pytest -q tests/grader/test_model_fork.py
"""
import ctypes
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
import yaml

from autograder.judging.scoring import grade_model, rubric
from autograder.judging.scoring import report as grading_report
from hw4lib.data import H4Tokenizer
from hw4lib.data.tokenizer import DEFAULT_TOKEN_MAP
from hw4lib.handin_format import transcripts_sha256
from tests.grader.autograder_helpers import (REPO_ROOT, TINY_MODEL, attack_handin,
                                             make_model_handin, run_grader)
from tests.grader.test_grade_model import HIDDEN_LINES, make_hidden_set

DEFAULT_MODEL = yaml.safe_load((REPO_ROOT / "configs/default.yaml").read_text())["model"]
PUBLIC_LINES = ["THE MATE SANG A SONG OF THE SEA", "NO GULL CRIED THAT DAY"] * 3
JUDGE_ENVIRONMENT = {"PYTHONHASHSEED": "4321", "PYTHONPATH": str(REPO_ROOT)}
# The judge's side of every test: run as ``python -c JUDGE <test> <folder>``, it starts as
# autograder.judging.grade.main does, then runs the test's function (below), which parks its children.
JUDGE = """
import sys
from pathlib import Path
from autograder.judging import grade  # the judge's imports
from autograder.judging.isolation import judge_process, processes
processes.become_subreaper()
judge_process.limit_address_space()
from tests.grader import test_model_fork
getattr(test_model_fork, sys.argv[1])(Path(sys.argv[2]))
"""
PROBES = "tests.grader.test_model_fork"  # the module of the children's functions below
# Signals 32 and 33 (bits 31 and 32 of /proc's masks): glibc's own handlers for thread
# cancellation and set*id, installed once a process has started a thread (the judge has numpy's).
GLIBC_SIGNALS = 3 << 31


def run_judge(test: str, folder: Path, environment: dict | None = None) -> dict:
    """Run ``JUDGE`` for ``test`` in ``folder`` (``environment``: variables set, or removed where
    None); what that test's judge wrote to result.json."""
    env = {**os.environ, **JUDGE_ENVIRONMENT, **(environment or {})}
    env = {key: value for key, value in env.items() if value is not None}
    run = subprocess.run([sys.executable, "-c", JUDGE, test, str(folder)], cwd=REPO_ROOT, env=env,
                         capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    return json.loads((folder / "result.json").read_text())


def fresh_and_forked(parked, module: str, function: str, arguments: list[str], work: Path,
                     timeout: float = 300):
    """(the fresh command's Run, the parked child's Run) of ``module.function(arguments)`` with
    the model child's environment, folder and limits; ``{}`` in ``arguments`` stands for
    ``fresh`` or ``forked``."""
    from autograder.judging.isolation import autograder_paths, processes
    from autograder.judging.scoring import model_child

    code = f"import sys; from {module} import {function}; {function}(sys.argv[1:])"
    environment = model_child.child_environment(work, [autograder_paths.AUTOGRADE_ROOT])
    fresh = processes.run_process(
        [sys.executable, "-c", code, *(a.format("fresh") for a in arguments)],
        cwd=autograder_paths.AUTOGRADE_ROOT, env=environment, timeout=timeout,
        limits=model_child.model_limits())
    forked = parked.run([a.format("forked") for a in arguments], autograder_paths.AUTOGRADE_ROOT,
                        environment, timeout, model_child.model_limits())
    return fresh, forked


# ------------------------------------------------------------------------------------------------
# The child's side: what a child is, and what a fresh one and a forked one must share
# ------------------------------------------------------------------------------------------------

class MallInfo2(ctypes.Structure):
    """glibc's ``struct mallinfo2``: ``hblks`` counts the blocks malloc mapped on their own."""

    _fields_ = [(name, ctypes.c_size_t) for name in (
        "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks",
        "fordblks", "keepcost")]


def describe_process(argv: list[str]) -> None:
    """Write to ``argv[0]`` what isolates this process and what it starts from (after what the
    model child reads again from its environment, ``grade_model.follow_environment``)."""
    import resource
    import signal
    import tempfile

    from autograder.judging.scoring import grade_model

    grade_model.follow_environment()
    libc = ctypes.CDLL(None)
    libc.mallinfo2.restype = MallInfo2
    mapped = libc.mallinfo2().hblks
    block = bytearray(64 * 2**20)  # not a mapping of its own under MALLOC_MMAP_THRESHOLD_ (1 GiB)
    from_heap = libc.mallinfo2().hblks == mapped
    del block
    status = dict(line.split(":\t", 1) for line in
                  Path("/proc/self/status").read_text().splitlines() if ":\t" in line)
    descriptors = sorted(int(fd) for fd in os.listdir("/proc/self/fd"))[:-1]  # the listing's own
    limits = {name: resource.getrlimit(getattr(resource, name)) for name in dir(resource)
              if name.startswith("RLIMIT_")}
    described = {
        "session leader": os.getsid(0) == os.getpid() == os.getpgid(0),
        "limits": limits, "environment": dict(os.environ), "folder": os.getcwd(),
        "uid gid groups": [os.getuid(), os.getgid(), sorted(os.getgroups())],
        "stdin": os.readlink("/proc/self/fd/0"), "descriptors": descriptors,
        "signals blocked, ignored, caught": [int(status["SigBlk"], 16), int(status["SigIgn"], 16),
                                             int(status["SigCgt"], 16) & ~GLIBC_SIGNALS],
        "SIGINT handler": repr(signal.getsignal(signal.SIGINT)),
        "no new privileges, seccomp": [status["NoNewPrivs"].strip(), status["Seccomp"].strip()],
        "subreaper": libc.prctl(37, ctypes.byref(flag := ctypes.c_int()), 0, 0, 0) or flag.value,
        "writes bytecode": not sys.dont_write_bytecode,
        "stdout, stderr": [sys.stdout.encoding, sys.stderr.encoding, sys.stderr.errors],
        "temporary folder": tempfile.gettempdir(), "torch threads": torch.get_num_threads(),
        "64 MiB from the heap": from_heap, "python": sys.executable,
        "modules from": [module.__file__ for module in (grade_model, torch, yaml)],
    }
    Path(argv[0]).write_text(json.dumps(described))
    print("described")


def sleep_with_a_detached_child(argv: list[str]) -> None:
    """Start a grandchild in a session of its own (its pid to ``argv[0]``), then sleep."""
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"],
                             start_new_session=True)
    Path(argv[0]).write_text(str(child.pid))
    print("started", flush=True)
    time.sleep(600)


# ------------------------------------------------------------------------------------------------
# The judge's side, one function per test (run by JUDGE)
# ------------------------------------------------------------------------------------------------

def judge_isolation(folder: Path) -> None:
    """Describe a fresh child and a forked one, their environment asking for one torch thread
    where the judge's torch started without a count (as a judge that chooses its children's
    threads after its imports); then time a forked sleeper out."""
    from autograder.judging.isolation import autograder_paths, parked_child
    from autograder.judging.scoring import model_child

    parked = parked_child.ParkedChild(PROBES, "describe_process")
    os.environ["OMP_NUM_THREADS"] = "1"
    work = folder / "work"
    for sub in ("home", "tmp"):
        (work / sub).mkdir(parents=True)
    fresh, forked = fresh_and_forked(parked, PROBES, "describe_process",
                                     [str(folder / "{}.json")], work)
    described = {name: json.loads((folder / f"{name}.json").read_text())
                 for name in ("fresh", "forked")}
    sleeper = parked_child.ParkedChild(PROBES, "sleep_with_a_detached_child")
    timed = sleeper.run([str(folder / "grandchild.pid")], autograder_paths.AUTOGRADE_ROOT,
                        model_child.child_environment(work, [autograder_paths.AUTOGRADE_ROOT]), 3,
                        model_child.model_limits())
    (folder / "result.json").write_text(json.dumps({
        "described": described, "output": [fresh.output, forked.output],
        "returncodes": [fresh.returncode, forked.returncode],
        "sleeper": timed and [timed.timed_out, timed.output]}))


def judge_refusals(folder: Path) -> None:
    """Park a child, then more: beside a running Python thread, then after an OpenMP region of
    two threads; then fork without the check after that region and time a parallel op in the
    child."""
    import signal
    import threading

    from autograder.judging.isolation import parked_child
    from autograder.judging.scoring import model_child
    from autograder.judging.scoring.report import GradingReport

    report = GradingReport()
    model_child.park_model_child(report).close()
    refusals = []
    stop = threading.Event()
    thread = threading.Thread(target=stop.wait)
    thread.start()
    try:
        parked_child.ParkedChild(PROBES, "describe_process").close()
        refusals.append("")
    except parked_child.ForkRefused as refusal:
        refusals.append(str(refusal))
    stop.set()
    thread.join()
    torch.set_num_threads(2)
    matrix = torch.randn(512, 512)
    matrix @ matrix  # starts the OpenMP team
    try:
        parked_child.ParkedChild(PROBES, "describe_process").close()
        refusals.append("")
    except parked_child.ForkRefused as refusal:
        refusals.append(str(refusal))
    pid = os.fork()
    if pid == 0:  # what the check prevents: an OpenMP region in a child forked after one
        signal.alarm(5)
        matrix @ matrix  # waits for the team forever
        os._exit(0)
    _, status = os.waitpid(pid, 0)
    (folder / "result.json").write_text(json.dumps({
        "model_child": report.model_child, "refusals": refusals,
        "unchecked child": os.waitstatus_to_exitcode(status)}))


def judge_measurements(folder: Path) -> None:
    """Each handin of ``folder/handins`` measured by a fresh child and by a model child parked as
    the judge parks it."""
    from autograder.judging.scoring import model_child
    from autograder.judging.scoring.report import GradingReport

    work = folder / "work"
    for sub in ("home", "tmp"):
        (work / sub).mkdir(parents=True)
    found, report = {}, GradingReport()
    compare = json.loads((folder / "compare.json").read_text())
    for handin in sorted((folder / "handins").iterdir()):
        child = model_child.park_model_child(report)
        arguments = ["--handin", str(handin), "--hidden-set", str(folder / "hidden"),
                     "--out", str(folder / f"{handin.name}-{{}}.json"),
                     "--public-set", str(folder / "public"), "--compare", *compare[handin.name]]
        fresh, forked = fresh_and_forked(child, "autograder.judging.scoring.grade_model", "main",
                                         arguments, work)
        found[handin.name] = {
            "returncodes": [fresh.returncode, forked.returncode],
            "results": [json.loads((folder / f"{handin.name}-{name}.json").read_text())
                        for name in ("fresh", "forked")],
            "output": [fresh.output, forked.output]}
    (folder / "result.json").write_text(json.dumps({"model_child": report.model_child, "handins": found}))


# ------------------------------------------------------------------------------------------------
# The tests
# ------------------------------------------------------------------------------------------------

@pytest.mark.slow
def test_the_forked_child_runs_as_the_fresh_command_did(tmp_path):
    """Every property of the fresh command's child holds in the forked one (the judge's torch
    threads on the machine's default, its child's environment asking for one thread)."""
    environment = {"OMP_NUM_THREADS": None, "MKL_NUM_THREADS": None}
    result = run_judge("judge_isolation", tmp_path, environment)
    fresh, forked = result["described"]["fresh"], result["described"]["forked"]
    assert fresh["limits"]["RLIMIT_CORE"] == [0, 0] and fresh["limits"]["RLIMIT_FSIZE"][0] == 2**20
    assert fresh["session leader"] and fresh["descriptors"] == [0, 1, 2], fresh
    assert fresh["environment"]["PYTHONHASHSEED"] == "0" and fresh["64 MiB from the heap"]
    assert fresh["torch threads"] == 1 and not fresh["writes bytecode"], fresh
    differing = {key: (fresh[key], forked[key]) for key in fresh if fresh[key] != forked[key]}
    assert differing == {}, differing
    assert result["output"] == ["described\n", "described\n"], result["output"]
    assert result["returncodes"] == [0, 0]
    timed_out, output = result["sleeper"]
    assert timed_out and "started" in output, result["sleeper"]
    grandchild = int((tmp_path / "grandchild.pid").read_text())
    assert not Path(f"/proc/{grandchild}").exists() or Path(
        f"/proc/{grandchild}/stat").read_text().rsplit(") ", 1)[1][0] in "ZX", \
        "the forked child's detached grandchild outlived its time limit"


@pytest.mark.slow
def test_no_fork_beside_a_thread_that_would_not_survive_it(tmp_path):
    """A live Python thread or an OpenMP team refuses the fork (the grading then starts its model
    child fresh); without the check, the child forked after an OpenMP region hangs in its first
    parallel region (killed by its alarm)."""
    result = run_judge("judge_refusals", tmp_path)
    assert result["model_child"] == "forked from the judge", result["model_child"]
    assert all("threads when it forked" in refusal for refusal in result["refusals"]), result
    assert result["unchecked child"] == -14, result  # SIGALRM: it never finished its product


@pytest.mark.slow
def test_the_forked_child_measures_every_digit_the_fresh_one_does(tmp_path):
    """A default-config handin (1k tokenizer) and tiny handins of the char and 5k tokenizers,
    each measured on a hidden set and compared on a public split: the same result and output to
    the last digit (timings aside), from a judge of another hash seed."""
    folder = tmp_path / "judge"
    make_hidden_set(folder / "hidden")
    make_hidden_set(folder / "public", PUBLIC_LINES)
    make_model_handin(folder / "handins/default-1k", "1k", DEFAULT_MODEL)
    for token_type in ("char", "5k"):
        make_model_handin(folder / f"handins/tiny-{token_type}", token_type, TINY_MODEL)
    compare = {}  # all but the last public transcript: the set a run card names
    for handin in (folder / "handins").iterdir():
        token_type = yaml.safe_load((handin / "config.yaml").read_text())["tokenization"][
            "token_type"]
        public = grade_model.read_partition(folder / "public",
                                            H4Tokenizer(DEFAULT_TOKEN_MAP, token_type))
        count = len(PUBLIC_LINES) - 1
        compare[handin.name] = [str(count), transcripts_sha256(public.transcripts[:count])]
    (folder / "compare.json").write_text(json.dumps(compare))
    result = run_judge("judge_measurements", folder, {"OMP_NUM_THREADS": "1"})
    assert result["model_child"] == "forked from the judge", result["model_child"]
    assert sorted(result["handins"]) == ["default-1k", "tiny-5k", "tiny-char"]
    timings = ("seconds", "phase_seconds")
    for name, found in result["handins"].items():
        assert found["returncodes"] == [0, 0], (name, found)
        fresh, forked = ({key: value for key, value in measured.items() if key not in timings}
                         for measured in found["results"])
        assert fresh["num_utterances"] == len(HIDDEN_LINES), fresh
        assert isinstance(fresh["compared_perplexity_char"], float), fresh
        assert fresh == forked, name
        outputs = [output.replace(f" in {measured['seconds']} s", "") for output, measured in
                   zip(found["output"], found["results"])]
        assert outputs[0] == outputs[1], (name, outputs)


@pytest.mark.slow
def test_a_grading_through_make_forks_its_model_child(tmp_path):
    """The judge the Autolab Makefile runs parks its model child before anything of it starts a
    thread (details.json says the child was forked), and grades the honest handin in full."""
    details = tmp_path / "grading" / "details.json"
    _, scores = run_grader(tmp_path, attack_handin(tmp_path, "", None),
                           f"--results-json {details}")
    recorded = grading_report.load(details)
    assert recorded.model_child == "forked from the judge", recorded.model_child
    assert recorded.lm.hint is not None and 0 < scores["LanguageModel"], recorded.lm
    assert all(scores[name] == points for name, points in rubric.MYTORCH_RUBRIC.items()), scores
