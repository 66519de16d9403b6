"""Mutation testing of the project's own code: ``make mutation``.

Where ``make mutants`` (tools/mutants.py) checks the student-facing tests against a catalogue of
hand-written student bugs, this generates mutants of the grader's, the class tools' and the
library's own code with cosmic-ray's operators (a flipped comparison, ``<`` for ``<=``, ``-`` for
``+``, a changed number, ``and`` for ``or``, a dropped ``not``, ``True`` for ``False``, a loop that
never runs, ...), anywhere in a file, module-level constants included, and checks that the tests
reject each one.

``[tool.mutation]`` in pyproject.toml configures it: ``operators`` (the cosmic-ray operator names
used) and ``files`` (each file that is mutated, mapped to the test files that exercise it: a
mutant of that file runs those tests only, the reviewed table that keeps a run fast).

Each mutant is written to a private copy of the tree (tools/mutants.py's :func:`make_copy`) and
its tests run there under pytest, stopping at the first failure, in a child forked from a parent
that imported torch and pytest once (tools/mutants.py's :class:`Preloaded`). The mutated file is
the one on disk, so a subprocess, a forked judge or a sandboxed worker that a test starts imports
the mutant too. Verdicts: *killed* (the tests fail), *survived* (they pass), *timeout* (they run
past 10 times their unmutated duration plus 10 s: counted as killed, listed apart).

Not mutated: the lines of a student solution region (``# BEGIN SOLUTION`` .. ``# END SOLUTION``,
which ``make mutants`` covers) and a line that ends with
``# pragma: no mutate (equivalent: <why no test can tell>)``, counted as equivalent-marked; the
reason is required.

    python -m tools.mutation                                  # every file of the table
    python -m tools.mutation autograder/classroom/late_policy.py
    python -m tools.mutation --changed                        # lines changed since the base
    python -m tools.mutation --set-base                       # record HEAD as the base (make
                                                              # mutation SET_BASE=1)
    python -m tools.mutation --list autograder/sandboxed/wire.py   # the mutants, run nothing

``--changed`` mutates only the lines that differ between the work tree and the commit recorded in
tools/mutation_base.txt, within ``--budget`` seconds (CI: 480): past it, the mutants not yet run
are left out (a deterministic sample, the same on every run of the same change) and the report
says how many. Exit status 1 when a mutant survives, and when a file's tests fail on the unmutated
tree (its mutants are then not judged; the others are); without ``--changed``, survivors are
reported and the status is 0 unless ``--strict``.
"""
from __future__ import annotations

import argparse
import fnmatch
import hashlib
import re
import subprocess
import sys
import threading
import time
import tomllib
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from tools.handout_regions import file_regions
from tools.mutants import REPO_ROOT, Preloaded, preloaded_copies, shorten, tree_files

CONFIG_NAME = "pyproject.toml"
BASE_NAME = "tools/mutation_base.txt"
PRAGMA = re.compile(r"#\s*pragma:\s*no mutate\b(.*)$")
EQUIVALENT_REASON = re.compile(r"^\s*\(equivalent: [^)]*\w[^)]*\)")
# pytest on a mutant's test files: to the first failure, without the end-to-end tests that
# make test leaves out (a file's table entry names its fast tests).
PYTEST_ARGV = ("pytest", "-x", "-q", "-p", "no:cacheprovider", "-p", "no:xdist", "-p",
               "no:randomly", "-m", "not long and not platforms and not class_fixture and not "
               "catalogue_sweep and not measurement")
TIMEOUT_FACTOR, TIMEOUT_MARGIN_S = 10.0, 10.0  # a mutant's limit: over its file's unmutated run
BASELINE_TIMEOUT_S = 600.0  # an unmutated run: the table's longest entry takes about a minute


class MutationError(Exception):
    """A configuration or source problem that stops the run; the message names the fix."""


@dataclass(frozen=True)
class Mutant:
    """One mutation of one file: cosmic-ray's ``operator`` at its ``occurrence``-th position."""

    file: str          # repo-relative path
    line: int          # 1-based line of the mutated node's start
    operator: str      # cosmic-ray operator name, e.g. "core/ReplaceComparisonOperator_Lt_LtE"
    occurrence: int    # index among that operator's positions in the file
    before: str        # the line before, stripped
    after: str         # the mutated line, stripped
    code: str          # the whole mutated file

    @property
    def where(self) -> str:
        return f"{self.file}:{self.line}"

    @property
    def change(self) -> str:
        return f"{self.before}  ->  {self.after}"

    @property
    def order_key(self) -> str:
        """A stable pseudo-random key: the order the mutants of a budgeted run are tried in."""
        name = f"{self.file}:{self.line}:{self.operator}:{self.occurrence}"
        return hashlib.sha256(name.encode()).hexdigest()


@dataclass
class Config:
    operators: list[str]              # cosmic-ray operator names
    files: dict[str, list[str]]       # mutated file -> its test files


def load_config(path: Path = REPO_ROOT / CONFIG_NAME) -> Config:
    """``[tool.mutation]`` of ``path``, its operator globs expanded to cosmic-ray's names; every
    file and test file named must exist."""
    import cosmic_ray.plugins

    section = tomllib.loads(path.read_text()).get("tool", {}).get("mutation")
    if not section:
        raise MutationError(f"{path} has no [tool.mutation] section: add one with 'operators' "
                            f"and 'files' (see tools/mutation.py)")
    known = list(cosmic_ray.plugins.operator_names())
    operators = []
    for pattern in section["operators"]:
        matched = [name for name in known if fnmatch.fnmatchcase(name, pattern)]
        if not matched:
            raise MutationError(f"[tool.mutation] operators: {pattern!r} matches no cosmic-ray "
                                f"operator (python -m cosmic_ray.cli operators lists them)")
        operators += [name for name in matched if name not in operators]
    files = {name: list(tests) for name, tests in section["files"].items()}
    root = path.parent
    for name, tests in files.items():
        for needed in [name, *tests]:
            if not (root / needed).is_file():
                raise MutationError(f"[tool.mutation] files: {needed} does not exist; fix the "
                                    f"table in {path.name}")
        if not tests:
            raise MutationError(f"[tool.mutation] files: {name} names no test file")
    return Config(operators, files)


def excluded_lines(name: str, text: str) -> tuple[set[int], set[int]]:
    """(lines inside a solution region, lines marked equivalent) of file ``name``; raises
    MutationError for a ``# pragma: no mutate`` that gives no ``(equivalent: reason)``."""
    solution = {number for region in file_regions(name, text)
                for number in range(region.begin, region.end + 1)}
    equivalent = set()
    for number, line in enumerate(text.splitlines(), start=1):
        found = PRAGMA.search(line)
        if found:
            if not EQUIVALENT_REASON.match(found.group(1)):
                raise MutationError(f"{name}:{number}: write '# pragma: no mutate (equivalent: "
                                    f"<why no test can tell the mutant apart>)'")
            equivalent.add(number)
    return solution, equivalent


def mutants_of(name: str, text: str, operators: list[str],
               only: set[int] | None = None) -> list[Mutant]:
    """The mutants of file ``name`` (contents ``text``) by ``operators``, on the lines ``only``
    (None: everywhere), in file order. Each is made by parsing the file anew: filter here."""
    import cosmic_ray.plugins
    from cosmic_ray.ast import ast_nodes, get_ast
    from cosmic_ray.mutating import mutate_code

    lines = text.splitlines()
    found = []
    module = get_ast(text)
    for operator_name in operators:
        operator = cosmic_ray.plugins.get_operator(operator_name)()
        positions = [start for node in ast_nodes(module)
                     for start, _end in operator.mutation_positions(node)]
        for occurrence, (line, _column) in enumerate(positions):
            if only is not None and line not in only:
                continue
            code = mutate_code(text, operator, occurrence)
            if code is None or code == text:
                continue
            changed = code.splitlines()
            after = changed[line - 1] if line - 1 < len(changed) else ""
            found.append(Mutant(name, line, operator_name, occurrence, lines[line - 1].strip(),
                                after.strip(), code))
    return sorted(found, key=lambda m: (m.line, m.operator, m.occurrence))


def changed_lines(base: str, names: list[str], root: Path = REPO_ROOT) -> dict[str, set[int]]:
    """The lines of each of ``names`` (repo-relative) that the work tree adds or changes relative
    to commit ``base`` (a new file: all its lines)."""
    diff = subprocess.run(["git", "diff", "--unified=0", "--no-color", "--no-ext-diff", base,
                           "--", *names], cwd=root, check=True, capture_output=True,
                          text=True).stdout
    changed: dict[str, set[int]] = {}
    current = None
    for line in diff.splitlines():
        if line.startswith("+++ "):
            current = line[6:] if line.startswith("+++ b/") else None
        elif line.startswith("@@") and current:
            hunk = re.match(r"@@ -\S+ \+(\d+)(?:,(\d+))? @@", line)
            start, count = int(hunk.group(1)), int(hunk.group(2) or 1)
            changed.setdefault(current, set()).update(range(start, start + count))
    return changed


def read_base(root: Path = REPO_ROOT) -> str:
    """The base commit recorded in ``root``'s tools/mutation_base.txt (its first word), checked
    to be a commit of ``root``'s history."""
    path = root / BASE_NAME
    if not path.is_file() or not path.read_text().split():
        raise MutationError(f"no base commit in {path}: record one with 'make mutation SET_BASE=1'")
    base = path.read_text().split()[0]
    known = subprocess.run(["git", "cat-file", "-e", f"{base}^{{commit}}"], cwd=root,
                           capture_output=True).returncode == 0
    if not known:
        raise MutationError(f"{BASE_NAME} names {base}, which is not a commit of this clone (a "
                            f"shallow clone? fetch the history), or record another with "
                            f"'make mutation SET_BASE=1'")
    return base


@dataclass
class Verdict:
    mutant: Mutant
    outcome: str        # "killed", "survived" or "timeout"
    seconds: float
    detail: str         # the first failing test, for a killed mutant


def run_tests(runner: Preloaded, tests: list[str], timeout_s: float):
    """Run pytest on ``tests`` in the runner's copy (tools/mutants.py's :class:`Preloaded`)."""
    return runner.run_argv([*PYTEST_ARGV, *tests], timeout_s)


def judge(runner: Preloaded, mutant: Mutant, tests: list[str], timeout_s: float) -> Verdict:
    """Write ``mutant`` over its file in the runner's copy, run ``tests``, put the file back."""
    path = runner.copy / mutant.file
    original = path.read_text()
    try:
        path.write_text(mutant.code)
        outcome = run_tests(runner, tests, timeout_s)
    finally:
        path.write_text(original)
    if outcome.returncode is None:
        return Verdict(mutant, "timeout", outcome.seconds, f"over {timeout_s:.0f}s")
    verdict = "killed" if outcome.returncode else "survived"
    return Verdict(mutant, verdict, outcome.seconds, outcome.first_failure)


@dataclass
class FileRow:
    mutants: int = 0
    killed: int = 0
    survived: int = 0
    equivalent: int = 0
    timeouts: int = 0
    not_run: int = 0
    baseline_fails: str = ""  # the first failure of its tests on the unmutated tree

    @property
    def score(self) -> str:
        if self.baseline_fails:
            return "broken"
        judged = self.killed + self.survived + self.timeouts
        return f"{100 * (self.killed + self.timeouts) / judged:.1f}%" if judged else "-"


ROW_FIELD = {"killed": "killed", "survived": "survived", "timeout": "timeouts"}


def print_table(rows: dict[str, FileRow]) -> None:
    """The per-file table: mutants, killed, survived, equivalent-marked, timeouts, not run,
    score (killed and timed out over judged)."""
    header = (f"{'file':<52s} {'mutants':>7s} {'killed':>6s} {'survived':>8s} {'equiv':>5s} "
              f"{'timeout':>7s} {'not run':>7s} {'score':>6s}")
    print(header)
    print("-" * len(header))
    total = FileRow()
    for name, row in rows.items():
        print(f"{shorten(name, 52):<52s} {row.mutants:>7d} {row.killed:>6d} {row.survived:>8d} "
              f"{row.equivalent:>5d} {row.timeouts:>7d} {row.not_run:>7d} {row.score:>6s}")
        for field in ("mutants", "killed", "survived", "equivalent", "timeouts", "not_run"):
            setattr(total, field, getattr(total, field) + getattr(row, field))
    print(f"{'all':<52s} {total.mutants:>7d} {total.killed:>6d} {total.survived:>8d} "
          f"{total.equivalent:>5d} {total.timeouts:>7d} {total.not_run:>7d} {total.score:>6s}")


def select(config: Config, names: list[str], lines: dict[str, set[int]] | None,
           root: Path = REPO_ROOT) -> tuple[list[Mutant], dict[str, FileRow]]:
    """The mutants to run for files ``names`` (restricted to ``lines`` when given), and a table
    row per file with its equivalent-marked count filled in."""
    chosen, rows = [], {}
    for name in names:
        text = (root / name).read_text()
        solution, equivalent = excluded_lines(name, text)
        row = rows[name] = FileRow()
        only = set(range(1, text.count("\n") + 2)) if lines is None else lines[name]
        for mutant in mutants_of(name, text, config.operators, only - solution):
            row.mutants += 1
            if mutant.line in equivalent:
                row.equivalent += 1
            else:
                chosen.append(mutant)
    return chosen, rows


def run(config: Config, chosen: list[Mutant], rows: dict[str, FileRow], workers: int,
        budget_s: float | None, root: Path = REPO_ROOT) -> list[Verdict]:
    """Judge ``chosen`` on ``workers`` private copies of the tree, updating ``rows``; a file whose
    tests fail unmutated gets its row's ``baseline_fails`` and none of its mutants judged. With
    ``budget_s``, no mutant starts after that many seconds."""
    start = time.monotonic()
    verdicts: list[Verdict] = []
    lock = threading.Lock()
    with preloaded_copies(workers, tree_files(root), root) as on_runner:
        needed = sorted({m.file for m in chosen})
        print(f"baseline: the tests of {len(needed)} files on the unmutated tree ...", flush=True)
        with ThreadPoolExecutor(workers) as pool:
            baselines = dict(zip(needed, pool.map(lambda name: on_runner(
                lambda runner: run_tests(runner, config.files[name], BASELINE_TIMEOUT_S)), needed)))
        for name, outcome in baselines.items():
            if outcome.returncode != 0:
                rows[name].baseline_fails = outcome.first_failure or "timed out"
                print(f"  BASELINE FAILS  {name}: {rows[name].baseline_fails} (its mutants "
                      f"are not judged: fix its tests first)", flush=True)
        chosen = [mutant for mutant in chosen if not rows[mutant.file].baseline_fails]

        def one(mutant: Mutant) -> None:
            row = rows[mutant.file]
            if budget_s is not None and time.monotonic() - start > budget_s:
                with lock:
                    row.not_run += 1
                return
            timeout = TIMEOUT_FACTOR * baselines[mutant.file].seconds + TIMEOUT_MARGIN_S
            verdict = on_runner(lambda runner: judge(runner, mutant, config.files[mutant.file],
                                                      timeout))
            with lock:
                verdicts.append(verdict)
                field = ROW_FIELD[verdict.outcome]
                setattr(row, field, getattr(row, field) + 1)
                done = len(verdicts)
                if verdict.outcome == "survived":
                    print(f"  SURVIVED {mutant.where}: {shorten(mutant.change, 110)}", flush=True)
                if done % 25 == 0 or done == len(chosen):
                    print(f"  [{done}/{len(chosen)}] {time.monotonic() - start:.0f}s", flush=True)

        print(f"running {len(chosen)} mutants on {workers} workers ...", flush=True)
        with ThreadPoolExecutor(workers) as pool:
            list(pool.map(one, chosen))
    return verdicts


def report_survivors(verdicts: list[Verdict], config: Config) -> None:
    """Each survivor: file:line, the mutation, the operator, the tests that ran."""
    survivors = sorted((v for v in verdicts if v.outcome == "survived"),
                       key=lambda v: (v.mutant.file, v.mutant.line, v.mutant.operator))
    if survivors:
        print(f"\n{len(survivors)} surviving mutants (kill each with a test, or mark its line "
              f"'# pragma: no mutate (equivalent: <why>)' when no test can tell):")
    for verdict in survivors:
        mutant = verdict.mutant
        print(f"{mutant.where}: {mutant.change}\n    operator {mutant.operator} #{mutant.occurrence};"
              f" tests that ran: {' '.join(config.files[mutant.file])}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("files", nargs="*", help="files of the table to mutate (default: all)")
    parser.add_argument("--changed", action="store_true",
                        help=f"only the lines changed since the base ({BASE_NAME})")
    parser.add_argument("--base", help="compare with this commit instead of the recorded base")
    parser.add_argument("--set-base", action="store_true",
                        help=f"record HEAD in {BASE_NAME} and exit")
    parser.add_argument("--budget", type=float,
                        help="seconds after which no further mutant starts (the rest: not run)")
    parser.add_argument("--workers", type=int, default=2, help="test runs in parallel (default 2)")
    parser.add_argument("--strict", action="store_true",
                        help="exit 1 on a survivor also without --changed")
    parser.add_argument("--list", action="store_true", help="list the mutants, run nothing")
    parser.add_argument("--root", type=Path, default=REPO_ROOT,
                        help="the repository whose pyproject.toml and files are used (default: this one)")
    args = parser.parse_args(argv)
    try:
        return _main(args)
    except MutationError as error:
        print(f"mutation: {error}", file=sys.stderr)
        return 1


def _main(args: argparse.Namespace) -> int:
    root = args.root.resolve()
    if args.set_base:
        head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, check=True,
                              capture_output=True, text=True).stdout.strip()
        (root / BASE_NAME).write_text(head + "\n")
        print(f"mutation: base recorded: {head} in {BASE_NAME}; commit it")
        return 0
    config = load_config(root / CONFIG_NAME)
    names = [str(Path(name)) for name in args.files] or list(config.files)
    unknown = [name for name in names if name not in config.files]
    if unknown:
        raise MutationError(f"not in [tool.mutation] files of pyproject.toml: {' '.join(unknown)}; "
                            f"add each with the test files that exercise it")
    lines = None
    if args.changed or args.base:
        base = args.base or read_base(root)
        lines = changed_lines(base, names, root)
        names = [name for name in names if lines.get(name)]
        lines = {name: lines[name] for name in names}
        print(f"changed since {base[:12]}: {sum(map(len, lines.values()))} lines in "
              f"{len(names)} files of the table", flush=True)
    chosen, rows = select(config, names, lines, root)
    if args.list:
        for mutant in chosen:
            print(f"{mutant.where}: {mutant.change}   [{mutant.operator} #{mutant.occurrence}]")
        return 0
    if args.budget is not None:
        chosen.sort(key=lambda m: m.order_key)
    start = time.monotonic()
    verdicts = (run(config, chosen, rows, max(1, args.workers), args.budget, root)
                if chosen else [])
    print()
    print_table(rows)
    report_survivors(verdicts, config)
    not_run = sum(row.not_run for row in rows.values())
    if not_run:
        print(f"\nbudget of {args.budget:.0f}s reached: {not_run} of {len(chosen)} mutants not run "
              f"(a fixed sample of the change ran; record a newer base once reviewed)")
    survived = sum(row.survived for row in rows.values())
    broken = [name for name, row in rows.items() if row.baseline_fails]
    print(f"{len(verdicts)} mutants judged, {survived} survived; "
          f"{time.monotonic() - start:.0f}s with {args.workers} workers")
    for name in broken:
        print(f"BASELINE FAILS  {name}: {rows[name].baseline_fails}")
    return 1 if broken or (survived and (args.changed or args.base or args.strict)) else 0


if __name__ == "__main__":
    sys.exit(main())
