"""Generate the student handout: ``python -m tools.make_handout`` (``make handout``).

Writes ``dist/handout/`` and ``dist/handout.tar.gz`` from the git-tracked files of this repository:

* every solution region (``# TODO: ...`` / ``# BEGIN SOLUTION`` / reference / ``# END
  SOLUTION``) in a ``.py`` file or a notebook code cell becomes ``raise NotImplementedError("<file>:
  <function>: <TODO text>")`` at the region's indentation, the TODO comment kept above it
  (:mod:`tools.handout_regions`);
* what only instructors get is left out and the Makefile loses its instructor targets
  (:mod:`tools.handout_files`), notebooks lose their outputs, README.md's task-list section is
  filled with the students' task list, generated from the regions found, and its grading section
  with the points and the pass mark of ``hw4lib/grading_numbers.py`` (:mod:`tools.handout_readme`);
  ``--full-marks-ppl`` / ``--zero-marks-ppl`` state other thresholds there and in the handout's
  copy of that module (``make autograde`` refuses a grader the built handout does not describe);
* the result is checked: no marker survives, no region's code appears anywhere else in it
  (:mod:`tools.handout_leaks`), every ``.py`` file and notebook cell compiles, and every module of
  ``mytorch`` and ``hw4lib`` imports in a fresh interpreter started in the handout.

Malformed regions (unbalanced or nested markers, no TODO comment, a region that would run at
import time) stop the build with ``file:line`` and what to fix. ``handout_regions.restore`` puts the
reference code back into a handout file; the tests use it to check that the handout differs from
the solution only by its stubs.
"""
from __future__ import annotations

import argparse
import gzip
import io
import os
import re
import shutil
import subprocess
import sys
import tarfile
import textwrap
from dataclasses import dataclass
from pathlib import Path

from tools.handout_files import (EXCLUDED_DIRS, MAKEFILE_BEGIN, MAKEFILE_END, exclusion_reason,
                                 instructor_targets, strip_instructor_targets, tracked_files)
from tools.handout_leaks import find_leaks
from autograder.judging.scoring import rubric
from autograder.classroom.rescore import NUMBERS_MODULE
from tools.handout_readme import stated_numbers, student_readme, with_thresholds
from tools.handout_regions import (HandoutError, Region, code_units, file_regions, is_marker_like,
                                   replace_units, stub_out)

REPO_ROOT = Path(__file__).resolve().parents[1]

LEAK_SUFFIXES = {".py", ".ipynb", ".md", ".txt"}  # where a copy of solution code would be read
TEXT_SUFFIXES = {".py", ".md", ".txt", ".yaml", ".yml", ".ini", ".cfg", ".toml", ".ipynb", ".json",
                 ".sh", ""}
IMPORT_PACKAGES = ("mytorch", "hw4lib", "datagen")


@dataclass
class Handout:
    """What :func:`build` wrote."""

    out: Path
    files: list[str]             # repo-relative paths written, sorted
    regions: list[Region]        # every region replaced, in file order
    excluded: dict[str, str]     # tracked path -> why it was left out
    instructor_targets: frozenset[str] = frozenset()  # Makefile targets students do not get


def build(repo: Path, out: Path, full_marks_ppl: float = rubric.FULL_MARKS_PPL,
          zero_marks_ppl: float = rubric.ZERO_MARKS_PPL) -> Handout:
    """Write the handout tree of ``repo`` into the empty or missing directory ``out``; its README
    and its grading numbers state the two perplexity thresholds given."""
    if out.exists() and any(out.iterdir()):
        raise HandoutError(f"{out} is not empty; remove it or pick another --out")
    files, excluded, regions = [], {}, []
    tracked = tracked_files(repo)
    kept = []
    for path in tracked:
        reason = exclusion_reason(path, repo)
        if reason:
            excluded[path] = reason
        else:
            kept.append(path)
    handout_tests = {Path(p).stem for p in kept if re.fullmatch(r"tests/test_\w+\.py", p)}
    for path in kept:
        source = repo / path
        target = out / path
        target.parent.mkdir(parents=True, exist_ok=True)
        if path.endswith((".py", ".ipynb")):
            text = source.read_text(encoding="utf-8")
            found = file_regions(path, text)
            units = code_units(path, text)
            for cell in units:
                units[cell] = stub_out(units[cell], [r for r in found if r.cell == cell])
            text = replace_units(path, text, units, clear_outputs=True)
            if path == NUMBERS_MODULE:
                text = with_thresholds(text, full_marks_ppl, zero_marks_ppl)
            target.write_text(text, encoding="utf-8")
            shutil.copymode(source, target)
            regions.extend(found)
        elif path == "Makefile":
            target.write_text(strip_instructor_targets(source.read_text(encoding="utf-8")),
                              encoding="utf-8")
        elif path == "README.md":
            continue  # written last, once every region is known
        else:
            shutil.copy2(source, target)
        files.append(path)
    if "README.md" in kept:
        readme = student_readme((repo / "README.md").read_text(encoding="utf-8"), regions,
                                handout_tests, full_marks_ppl, zero_marks_ppl)
        (out / "README.md").write_text(readme, encoding="utf-8")
        files.append("README.md")
    makefile = repo / "Makefile"
    targets = instructor_targets(makefile.read_text(encoding="utf-8")) if makefile.is_file() else []
    return Handout(out, sorted(files), regions, excluded, frozenset(targets))


def check_tree(handout: Handout) -> None:
    """Raise HandoutError when a marker or a hidden-test line survived, some code does not
    compile, a solution leaks, or a file mentions a file or an instructor-only make target that
    students do not get (the handout stands alone)."""
    problems = []
    left_out = sorted({next((d for d in EXCLUDED_DIRS if p.startswith(d)), p)
                       for p, reason in handout.excluded.items() if reason != "cache"}
                      - {"hw4_data/hw4p1_data/", "expts/", "dist/", ".venv/"})
    left_out += [f"make {target}" for target in sorted(handout.instructor_targets)]
    for path in handout.files:
        full = handout.out / path
        if Path(path).suffix not in TEXT_SUFFIXES:
            continue
        text = full.read_text(encoding="utf-8", errors="replace")
        for number, line in enumerate(text.splitlines(), start=1):
            if is_marker_like(line) or line.strip() in (MAKEFILE_BEGIN, MAKEFILE_END):
                problems.append(f"{path}:{number}: marker survived: {line.strip()!r}")
        for name in left_out:
            whole = r"(?![\w-])" if name.startswith("make ") else ""  # make test != make test-x
            if re.search(re.escape(name) + whole, text) and path != ".gitignore":
                problems.append(f"{path} mentions {name}, which students do not get: reword it, "
                                f"or keep it to instructor-only files")
        if path.endswith(".py"):
            try:
                compile(text, path, "exec")
            except SyntaxError as error:
                problems.append(f"{path}:{error.lineno}: does not compile: {error.msg}")
        elif path.endswith(".ipynb"):
            problems.extend(_check_notebook_cells(path, text))
    texts = {path: (handout.out / path).read_text(encoding="utf-8", errors="replace")
             for path in handout.files if Path(path).suffix in LEAK_SUFFIXES}
    problems += [f"{leak.where}: gives away the solution of {leak.region}:\n"
                 + textwrap.indent(leak.code, "      ") for leak in find_leaks(handout.regions, texts)]
    if problems:
        raise HandoutError("the generated handout is broken:\n  " + "\n  ".join(problems))


def _check_notebook_cells(path: str, text: str) -> list[str]:
    try:
        from IPython.core.inputtransformer2 import TransformerManager
    except ImportError:
        return []
    problems = []
    for cell, lines in code_units(path, text).items():
        try:
            compile(TransformerManager().transform_cell("".join(lines)), f"{path}:{cell}", "exec")
        except SyntaxError as error:
            problems.append(f"{path} (cell {cell}):{error.lineno}: does not compile: {error.msg}")
    return problems


IMPORT_CHECK = """
import importlib, pkgutil, sys
failed = []
for package in sys.argv[1:]:
    importlib.import_module(package)
    for module in pkgutil.walk_packages(importlib.import_module(package).__path__, package + "."):
        try:
            importlib.import_module(module.name)
        except Exception as error:
            failed.append(f"{module.name}: {type(error).__name__}: {error}")
print("\\n".join(failed))
sys.exit(1 if failed else 0)
"""


def check_imports(root: Path, packages: tuple[str, ...] = IMPORT_PACKAGES) -> None:
    """Import every module of ``packages`` in a fresh interpreter with ``root`` as working
    directory; raise HandoutError listing the modules that fail."""
    present = tuple(p for p in packages if (root / p / "__init__.py").is_file())
    env = dict(os.environ, WANDB_MODE="disabled", PYTHONDONTWRITEBYTECODE="1",
               PYTHONPATH=str(root))
    result = subprocess.run([sys.executable, "-c", IMPORT_CHECK, *present], cwd=root, env=env,
                            capture_output=True, text=True, timeout=600)
    if result.returncode != 0:
        raise HandoutError(f"the handout does not import cleanly:\n{result.stdout}{result.stderr}")


def check_manifest(repo: Path) -> None:
    """HandoutError unless the state-dict manifest students get is the reference model's (a
    repository without the manifest's tool has none to check)."""
    if not (repo / "tools" / "state_dict_manifest.py").is_file():
        return
    check = subprocess.run([sys.executable, "-m", "tools.state_dict_manifest", "--check"],
                           cwd=repo, capture_output=True, text=True)
    if check.returncode != 0:
        raise HandoutError(f"the state-dict manifest is stale or could not be derived:\n"
                           f"{check.stdout}{check.stderr}")


def write_tarball(handout: Handout, tarball: Path, top: str = "hw4p1") -> None:
    """Pack the handout's files (and only them) under ``top/``, byte-for-byte reproducibly."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for path in handout.files:
            data = (handout.out / path).read_bytes()
            info = tarfile.TarInfo(f"{top}/{path}")
            info.size = len(data)
            info.mode = 0o755 if (handout.out / path).stat().st_mode & 0o111 else 0o644
            info.mtime = 0
            tar.addfile(info, io.BytesIO(data))
    tarball.parent.mkdir(parents=True, exist_ok=True)
    with open(tarball, "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", mtime=0,
                                                    filename="") as zipped:
        zipped.write(buffer.getvalue())


def _size(n_bytes: int) -> str:
    return f"{n_bytes / 1e6:.2f} MB" if n_bytes >= 1e6 else f"{n_bytes / 1e3:.1f} kB"


def main(argv: list[str] | None = None) -> Handout:
    parser = argparse.ArgumentParser(description="Write the student handout of this repository.")
    parser.add_argument("--repo", type=Path, default=REPO_ROOT, help="source repository")
    parser.add_argument("--out", type=Path, default=None,
                        help="handout directory (default <repo>/dist/handout; replaced if it is "
                             "the default, otherwise it must be empty or missing)")
    parser.add_argument("--no-tar", action="store_true", help="skip <out>.tar.gz")
    parser.add_argument("--no-import-check", action="store_true",
                        help="skip importing every module of the handout (saves a few seconds)")
    parser.add_argument("--full-marks-ppl", type=float, default=rubric.FULL_MARKS_PPL,
                        help="the pass mark the handout states (give make autograde the same)")
    parser.add_argument("--zero-marks-ppl", type=float, default=rubric.ZERO_MARKS_PPL,
                        help="the perplexity of no points the handout states (likewise)")
    args = parser.parse_args(argv)
    try:
        rubric.lm_score(args.full_marks_ppl, args.full_marks_ppl, args.zero_marks_ppl)
    except ValueError as error:
        sys.exit(f"make_handout: {error}")
    repo = args.repo.resolve()
    out = (args.out or repo / "dist" / "handout").resolve()
    if args.out is None and out.exists():
        shutil.rmtree(out)
    try:
        check_manifest(repo)
        handout = build(repo, out, args.full_marks_ppl, args.zero_marks_ppl)
        check_tree(handout)
        if not args.no_import_check:
            check_imports(out)
    except HandoutError as error:
        sys.exit(f"make_handout: {error}")

    by_file: dict[str, int] = {}
    for region in handout.regions:
        by_file[region.path] = by_file.get(region.path, 0) + 1
    print(f"{len(handout.regions)} solution regions stubbed in {len(by_file)} files:")
    for path, count in by_file.items():
        print(f"  {count:3d}  {path}")
    reasons: dict[str, int] = {}
    for reason in handout.excluded.values():
        reasons[reason] = reasons.get(reason, 0) + 1
    print(f"{len(handout.excluded)} tracked files left out: "
          + ", ".join(f"{n} {reason}" for reason, n in sorted(reasons.items())))
    tree_bytes = sum((out / p).stat().st_size for p in handout.files)
    print(f"wrote {out} ({len(handout.files)} files, {_size(tree_bytes)})")
    if not args.no_tar:
        tarball = out.with_name(out.name + ".tar.gz")
        write_tarball(handout, tarball)
        print(f"wrote {tarball} ({_size(tarball.stat().st_size)})")
    stale = stale_grader(out)
    if stale:
        print(f"note: {stale}")
    return handout


def stale_grader(handout: Path) -> str:
    """Why the grader built beside ``handout`` (``dist/autograde.tar`` beside ``dist/handout``)
    awards other points or thresholds than the handout states, or ''."""
    from autograder.classroom.rescore import read_build_info

    tar, numbers = handout.parent / "autograde.tar", handout / NUMBERS_MODULE
    info = read_build_info(tar) if tar.is_file() else None
    if info is None or not numbers.is_file():
        return ""
    stated = stated_numbers(numbers.read_text(encoding="utf-8"))
    built = {"rubric": info.get("rubric"), **(info.get("lm_thresholds") or {})}
    if built == stated:
        return ""
    return (f"{tar} awards {built}, not what this handout states ({stated}): rebuild it "
            f"with `make autograde ARGS='--full-marks-ppl {stated['full_marks_ppl']} "
            f"--zero-marks-ppl {stated['zero_marks_ppl']}'` before grading")


if __name__ == "__main__":
    main()
