"""Check that the component tests reject typical wrong implementations: ``make mutants``.

Each entry of the catalogue (``tools/mutant_catalogue/*.yaml``, one file per area) is a plausible
student bug written as a text replacement in the reference solution::

    - id: sdpa-no-scale                  # unique, kebab-case
      file: mytorch/nn/scaled_dot_product_attention.py
      find: |                            # occurs exactly once in the reference file
        scores = Q @ K.swapaxes(-1, -2) / np.sqrt(d_k)
      replace: |
        scores = Q @ K.swapaxes(-1, -2)
      test: tests.test_mytorch           # the module a student runs for that file (or an
                                         # instructor's, tests.<folder>.test_x, run by pytest)
      bug: forgets to scale the scores by 1/sqrt(d_k)
      family: sdpa-scale                 # graded files only: the bug family the grader's hint
                                         # must name (tools/hint_report.py)

A ``find`` that ends with a newline (a YAML ``|`` block) is a run of whole lines: YAML strips the
block's indentation, so the runner matches those lines at whatever indentation they have in the
file and indents ``replace`` the same way. A ``find`` without a final newline (a plain string or a
``|-`` block) is matched as a raw substring, for a fragment inside a line.

For each entry the runner applies the replacement to a private copy of the tree (the git-tracked
and untracked-but-not-ignored files, plus a link to the built data when there is some), runs
``python -m <test>`` there as a student does (pytest for an instructor's module; each run is a
child forked from a parent that imported numpy, torch and pytest once, :class:`Preloaded`),
stopping at the first failing test (pytest's ``-x``, through ``PYTEST_ADDOPTS`` for a student's
module: the first failure already rejects the mutant, and is the message a student reads first),
and counts the mutant *rejected* when that exits non-zero. Before that, each test module named in
the selection runs once on the unmutated copy and must pass, otherwise a broken test would
"reject" everything. It prints one line per entry (with the first failure the student would read),
then a table per student file. Exit status 1 when any mutant survives, an entry no longer applies
(its ``find`` text is missing or ambiguous), or a baseline run fails.

    python -m tools.mutants                       # the whole catalogue, 2 workers
    python -m tools.mutants --only 'sdpa-*'       # entries whose id matches a glob
    python -m tools.mutants --file tools/mutant_catalogue/mytorch.yaml --workers 1
    python -m tools.mutants --list                # check the catalogue and list it, run nothing
"""
from __future__ import annotations

import argparse
import contextlib
import fnmatch
import os
import queue
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import yaml

from autograder.judging.isolation.judge_zygote import JudgeZygote, ZygoteUnavailable

REPO_ROOT = Path(__file__).resolve().parents[1]
CATALOGUE_DIR = REPO_ROOT / "tools" / "mutant_catalogue"
KEYS = ("id", "file", "find", "replace", "test", "bug")
OPTIONAL_KEYS = ("family",)
ID_PATTERN = re.compile(r"^[a-z0-9]+(-[a-z0-9]+)*$")
TEST_PATTERN = re.compile(r"^tests\.([a-z]+\.)?test_[a-z0-9_]+$")
DEFAULT_TIMEOUT_S = 300
# Built, untracked data that some tests read: linked into each copy when it exists here.
DATA_PATHS = ("hw4_data/hw4p1_data",)


class CatalogueError(Exception):
    """A malformed catalogue file or entry."""


@dataclass(frozen=True)
class Mutant:
    """One catalogue entry: replace ``find`` by ``replace`` in ``file``; ``test`` must then fail."""

    id: str
    file: str
    find: str
    replace: str
    test: str
    bug: str
    source: str  # the catalogue file it came from, for messages
    # the bug family of autograder/judging/scoring/hidden_tests/diagnosis.py, graded files only
    family: str = ""


@dataclass
class Outcome:
    """What running one test module on one (possibly unmutated) tree gave."""

    returncode: int | None  # None: killed after the timeout
    seconds: float
    first_failure: str
    output: str = ""  # what the student would read (stdout and stderr), for tools/message_table.py


def load_catalogue(paths: list[Path]) -> list[Mutant]:
    """Parse and validate the YAML files; ids must be unique across all of them."""
    mutants: list[Mutant] = []
    seen: dict[str, str] = {}
    for path in paths:
        where = path.relative_to(REPO_ROOT) if path.is_relative_to(REPO_ROOT) else path
        entries = yaml.safe_load(path.read_text()) or []
        if not isinstance(entries, list):
            raise CatalogueError(f"{where}: expected a YAML list of entries, got {type(entries).__name__}")
        for number, entry in enumerate(entries, start=1):
            if not isinstance(entry, dict) or not set(KEYS) <= set(entry) <= {*KEYS, *OPTIONAL_KEYS}:
                got = sorted(entry) if isinstance(entry, dict) else type(entry).__name__
                raise CatalogueError(f"{where}: entry {number} must have the keys {list(KEYS)} "
                                     f"(and may have {list(OPTIONAL_KEYS)}), got {got}")
            if not all(isinstance(value, str) for value in entry.values()):
                raise CatalogueError(f"{where}: entry {number} ({entry.get('id')}): every value must be a string")
            if not ID_PATTERN.match(entry["id"]):
                raise CatalogueError(f"{where}: id {entry['id']!r} is not kebab-case")
            if entry["id"] in seen:
                raise CatalogueError(f"{where}: id {entry['id']!r} is already used in {seen[entry['id']]}")
            if not TEST_PATTERN.match(entry["test"]):
                raise CatalogueError(f"{where}: {entry['id']}: test must look like tests.test_x "
                                     f"(or tests.<folder>.test_x), got {entry['test']!r}")
            if entry["find"] == entry["replace"]:
                raise CatalogueError(f"{where}: {entry['id']}: replace is the same as find")
            seen[entry["id"]] = str(where)
            mutants.append(Mutant(**entry, source=str(where)))
    return mutants


def _indent(block: str, indent: str) -> str:
    return "".join(indent + line if line.strip() else line for line in block.splitlines(True))


def locate(text: str, mutant: Mutant) -> list[tuple[str, str]]:
    """Every (find, replace) pair, indented as in ``text``, whose find occurs in ``text``.

    Whole-line finds (ending in a newline) are tried at every indentation used in ``text`` and
    must start a line; raw fragments are taken as they are. Each pair appears once per occurrence.
    """
    if not mutant.find.endswith("\n"):
        return [(mutant.find, mutant.replace)] * text.count(mutant.find)
    found = []
    for indent in sorted({line[: len(line) - len(line.lstrip())] for line in text.splitlines()}):
        find = _indent(mutant.find, indent)
        found += [(find, _indent(mutant.replace, indent))] * ("\n" + text).count("\n" + find)
    return found


def mutate(text: str, mutant: Mutant) -> str:
    """``text`` with the single occurrence of the mutant's find text replaced."""
    (find, replace), = locate(text, mutant)
    start = ("\n" + text).index("\n" + find) if mutant.find.endswith("\n") else text.index(find)
    return text[:start] + replace + text[start + len(find):]


def applicability_problem(mutant: Mutant, root: Path = REPO_ROOT) -> str | None:
    """Why ``mutant`` cannot be applied to the tree at ``root``, or None when it can."""
    path = root / mutant.file
    if not path.is_file():
        return f"no longer applies: {mutant.file} does not exist"
    count = len(locate(path.read_text(), mutant))
    if count != 1:
        return f"no longer applies: its find text occurs {count} times in {mutant.file} (must be exactly 1)"
    return None


def tree_files(root: Path = REPO_ROOT) -> list[str]:
    """The files a fresh clone would have, plus untracked files that git does not ignore."""
    listing = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z"],
        cwd=root, check=True, capture_output=True, text=True,
    ).stdout
    return sorted(name for name in listing.split("\0") if name and (root / name).is_file())


def make_copy(destination: Path, files: list[str], root: Path = REPO_ROOT) -> None:
    """Copy ``files`` from ``root`` to ``destination``, keeping their relative paths, as the files
    git tracks there (a test that builds the handout lists the tracked files:
    tools/handout_files.py), and link the built data of :data:`DATA_PATHS` that exists under
    ``root`` (read-only use, so not copied)."""
    for name in files:
        target = destination / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(root / name, target)
    subprocess.run(["git", "init", "-q", str(destination)], check=True)
    subprocess.run(["git", "-C", str(destination), "add", "--pathspec-from-file=-",
                    "--pathspec-file-nul"], input="\0".join(files), text=True, check=True)
    for name in DATA_PATHS:
        if (root / name).is_dir() and not (destination / name).exists():
            (destination / name).parent.mkdir(parents=True, exist_ok=True)
            (destination / name).symlink_to((root / name).resolve(), target_is_directory=True)


def first_failure(output: str) -> str:
    """The first thing a student would read as the reason for failing, on one line."""
    lines = output.splitlines()
    for index, line in enumerate(lines):
        if "  FAILED  " in line:  # a progress bar on stderr may share the line
            detail = lines[index + 1].strip() if index + 1 < len(lines) else ""
            return f"{line.split('  FAILED  ', 1)[1].strip()}: {detail}"
        if line.startswith("FAILED "):  # pytest's summary, for an instructor's module
            return line.removeprefix("FAILED ").strip()
    tail = [line.strip() for line in lines if line.strip()]
    return tail[-1] if tail else "(no output)"


def runs_standalone(test: str) -> bool:
    """Whether ``test`` is a module the handout ships (``tests.test_x``), which runs as a student
    runs it, ``python -m tests.test_x``; an instructor's module (``tests.<folder>.test_x``) has no
    rubric and runs under pytest."""
    return test.count(".") == 1


def test_command(test: str) -> list[str]:
    """How ``test`` runs (:func:`runs_standalone`), as ``python -m`` arguments: ``tests.test_x``
    (the rubric report), else pytest on its file."""
    if runs_standalone(test):
        return [test]
    return ["pytest", "-q", "-p", "no:cacheprovider", test.replace(".", "/") + ".py"]


# The third-party packages a test run imports, ~3 CPU s of the ~5 s an entry takes on its own.
# torch.fx.experimental.symbolic_shapes (sympy, ~0.9 s of CPU) is what torch imports the first
# time a test calls backward with a gradient tensor, as most component tests do; torch._dynamo
# (~0.7 s) the first time an operation without a C++ meta kernel (torch.triu) runs on the meta
# device, as the device checks of the model's parts do (testing_framework.check_built_on_input_device).
PRELOAD = ("numpy", "torch", "torch.fx.experimental.symbolic_shapes", "torch._dynamo", "pytest",
           "yaml", "pydantic", "tokenizers", "tqdm")


class Preloaded:
    """Runs test modules in ``copy`` as ``python -m`` does, each in a fresh child forked from one
    parent that imported :data:`PRELOAD` once and nothing of the tree (the judge zygote,
    ``autograder/judging/isolation/judge_zygote.py``, with this list), so that an entry pays for
    its tests and the tree's own imports only (the child imports every module of the tree anew: a
    mutated file is read when the test runs). Each run: a session of its own (killed whole after
    its timeout), standard output and error to one file, the exit handlers run. Use as a context
    manager."""

    def __init__(self, copy: Path):
        self.copy = copy
        self.env = dict(os.environ, WANDB_MODE="disabled", PYTHONHASHSEED="0",
                        PYTEST_ADDOPTS="-x", PYTHONDONTWRITEBYTECODE="1", OMP_NUM_THREADS="1",
                        MKL_NUM_THREADS="1")
        self.env.pop("PYTHONPATH", None)
        self.zygote = JudgeZygote(sys.executable, self.env, PRELOAD)
        handle, name = tempfile.mkstemp(prefix="hw4p1-mutant-output-")
        os.close(handle)
        self.output = Path(name)

    def __enter__(self) -> Preloaded:
        return self

    def __exit__(self, *exc) -> None:
        self.zygote.close()
        self.output.unlink(missing_ok=True)

    def run(self, test: str, timeout_s: float) -> Outcome:
        """Run ``test`` (:func:`test_command`) up to its first failing test (the rubric runner
        reads ``-x`` from PYTEST_ADDOPTS as pytest does); never raises on test failure."""
        return self.run_argv(test_command(test), timeout_s)

    def run_argv(self, argv: list[str], timeout_s: float) -> Outcome:
        """Run ``python -m`` with ``argv`` in the copy; never raises on test failure."""
        start = time.perf_counter()
        self.output.write_bytes(b"")
        try:
            child = self.zygote.fork_judge(self.copy, argv[0], list(argv[1:]), self.env,
                                           self.output, stderr=True, atexit=True)
        except ZygoteUnavailable as why:
            raise RuntimeError(f"the preloaded test runner in {self.copy} stopped: {why}") from None
        try:
            returncode = child.wait(timeout_s)
        except subprocess.TimeoutExpired:
            os.killpg(child.pid, signal.SIGKILL)  # its session: the test and what it started
            child.wait()
            returncode = None
        seconds = time.perf_counter() - start
        output = self.output.read_text(errors="replace")
        if returncode is None:
            return Outcome(None, seconds, f"timed out after {timeout_s:.0f}s", output)
        return Outcome(returncode, seconds, first_failure(output) if returncode else "", output)


def run_mutant(runner: Preloaded, mutant: Mutant, timeout_s: float) -> Outcome:
    """Apply ``mutant`` to the runner's copy, run its test, and put the file back whatever
    happens."""
    path = runner.copy / mutant.file
    original = path.read_text()
    try:
        path.write_text(mutate(original, mutant))
        return runner.run(mutant.test, timeout_s)
    finally:
        path.write_text(original)


def shorten(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 3] + "..."


def print_table(mutants: list[Mutant], results: dict[str, Outcome | str]) -> None:
    """One row per student file: rejected / total, then the survivors and stale entries."""
    by_file: dict[str, list[Mutant]] = {}
    for mutant in mutants:
        by_file.setdefault(mutant.file, []).append(mutant)
    print(f"\n{'file':<44s} {'rejected':>8s} / total")
    total_rejected = 0
    for name in sorted(by_file):
        rejected = sum(1 for m in by_file[name] if isinstance(results[m.id], Outcome)
                       and results[m.id].returncode != 0)
        total_rejected += rejected
        mark = "" if rejected == len(by_file[name]) else "   <-- survivors"
        print(f"{name:<44s} {rejected:>8d} / {len(by_file[name])}{mark}")
    print(f"{'all':<44s} {total_rejected:>8d} / {len(mutants)}")


@contextlib.contextmanager
def preloaded_copies(workers: int, files: list[str], root: Path = REPO_ROOT):
    """``workers`` private copies of ``root``'s ``files`` (:func:`make_copy`), each with its
    :class:`Preloaded` runner, removed at the end; yields ``on_runner(job)``, which calls
    ``job(runner)`` on a free runner (waiting for one) and returns what it returns."""
    with tempfile.TemporaryDirectory(prefix="hw4p1-mutants-") as scratch, \
            contextlib.ExitStack() as stack:
        runners: queue.Queue[Preloaded] = queue.Queue()
        for index in range(workers):
            copy = Path(scratch) / f"tree{index}"
            make_copy(copy, files, root)
            runners.put(stack.enter_context(Preloaded(copy)))

        def on_runner(job):
            runner = runners.get()
            try:
                return job(runner)
            finally:
                runners.put(runner)

        yield on_runner


def judge_all(runnable: list[Mutant], on_runner, workers: int,
              args: argparse.Namespace, results: dict[str, Outcome | str]) -> int | None:
    """Run each test module once unmutated (unless ``--no-baseline``), then each mutant, on
    ``workers`` threads, each on a runner of ``on_runner`` (:func:`preloaded_copies`); put each
    mutant's outcome in ``results``. 1 when a baseline run fails (no mutant is judged then), else
    None."""
    lock = threading.Lock()

    tests = sorted({m.test for m in runnable})
    durations: dict[str, float] = {}
    baseline_failed = []
    if not args.no_baseline and tests:
        print(f"baseline: {len(tests)} test modules on the unmutated tree ...", flush=True)
        with ThreadPoolExecutor(workers) as pool:
            outcomes = dict(zip(tests, pool.map(
                lambda test: on_runner(lambda runner: runner.run(test, args.timeout)), tests)))
        for test, outcome in outcomes.items():
            durations[test] = outcome.seconds
            # a standalone run ends with the rubric's summary (tests/testing_framework.py)
            unsummarised = runs_standalone(test) and "Summary" not in outcome.output
            if outcome.returncode != 0 or unsummarised:
                baseline_failed.append(test)
                why = outcome.first_failure or "exit 0 without the rubric's Summary"
                print(f"  BASELINE FAILS  {test}: {why}")
        if baseline_failed:
            print("mutants: fix the failing test modules first; a mutant cannot be judged "
                  "against a test that already fails", file=sys.stderr)
            return 1

    # Longest test modules first, so the two workers finish together.
    ordered = sorted(runnable, key=lambda m: -durations.get(m.test, 0.0))
    print(f"running {len(ordered)} mutants on {workers} workers ...", flush=True)

    def judge(mutant: Mutant) -> None:
        outcome = on_runner(lambda runner: run_mutant(runner, mutant, args.timeout))
        with lock:
            results[mutant.id] = outcome
            verdict = "SURVIVED" if outcome.returncode == 0 else "rejected"
            detail = (f"bug: {mutant.bug.strip()}" if outcome.returncode == 0
                      else outcome.first_failure)
            print(f"  {verdict:<8s} {mutant.id:<38s} {outcome.seconds:5.1f}s  "
                  f"{shorten(' '.join(detail.split()), 140)}", flush=True)

    with ThreadPoolExecutor(workers) as pool:
        list(pool.map(judge, ordered))
    return None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--file", action="append", type=Path,
                        help="catalogue file to use (repeatable; default: every tools/mutant_catalogue/*.yaml)")
    parser.add_argument("--only", action="append",
                        help="run only entries whose id matches this glob (repeatable)")
    parser.add_argument("--workers", type=int, default=2, help="test runs in parallel (default 2)")
    parser.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT_S,
                        help=f"seconds per test run before it counts as a hang (default {DEFAULT_TIMEOUT_S})")
    parser.add_argument("--no-baseline", action="store_true",
                        help="skip checking that each test module passes on the unmutated tree")
    parser.add_argument("--list", action="store_true", help="validate and list the entries, run nothing")
    args = parser.parse_args(argv)

    paths = [p.resolve() for p in args.file] if args.file else sorted(CATALOGUE_DIR.glob("*.yaml"))
    try:
        mutants = load_catalogue(paths)
    except CatalogueError as error:
        print(f"mutants: {error}", file=sys.stderr)
        return 1
    if args.only:
        mutants = [m for m in mutants if any(fnmatch.fnmatch(m.id, pattern) for pattern in args.only)]
    if not mutants:
        print("mutants: no catalogue entry selected", file=sys.stderr)
        return 1

    results: dict[str, Outcome | str] = {}
    runnable = []
    for mutant in mutants:
        problem = applicability_problem(mutant)
        if problem:
            results[mutant.id] = problem
        else:
            runnable.append(mutant)
    if args.list:
        for mutant in mutants:
            status = results.get(mutant.id, "ok")
            print(f"{mutant.id:<40s} {mutant.test:<40s} {status}")
        return 1 if any(isinstance(r, str) for r in results.values()) else 0

    files = tree_files()
    workers = max(1, min(args.workers, len(runnable) or 1))
    start = time.perf_counter()
    with preloaded_copies(workers, files) as on_runner:
        status = judge_all(runnable, on_runner, workers, args, results)
    if status is not None:
        return status

    print_table(mutants, results)
    survivors = [m for m in mutants if isinstance(results[m.id], Outcome) and results[m.id].returncode == 0]
    stale = [m for m in mutants if isinstance(results[m.id], str)]
    for mutant in survivors:
        print(f"SURVIVED  {mutant.id} ({mutant.test}): {mutant.bug.strip()}")
    for mutant in stale:
        print(f"STALE     {mutant.id} ({mutant.source}): {results[mutant.id]}")
    print(f"{len(mutants)} entries, {len(survivors)} survived, {len(stale)} no longer apply; "
          f"{time.perf_counter() - start:.0f}s with {workers} workers")
    return 1 if survivors or stale else 0


if __name__ == "__main__":
    sys.exit(main())
