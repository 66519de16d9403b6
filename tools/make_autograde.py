"""Build the Autolab autograder: ``python -m tools.make_autograde`` (``make autograde``).

Writes two files in Autolab's convention:

* ``dist/autograde.tar``: one folder ``autograde/`` holding the grading driver (``autograder/``),
  the judge, sandbox and worker, the hidden mytorch tests, the hidden test set of the language model
  (drawn here, see ``autograder/hidden_data.py``), the reference ``hw4lib`` with its tokenizer
  JSONs, ``tests/numeric_checks.py`` and ``build_info.json``;
* ``dist/autograde-Makefile``: upload it as the assessment's Makefile. In a folder holding it (as
  ``Makefile``), ``autograde.tar`` and a student's ``handin.tar``, ``make`` grades the handin and
  the last line it prints is ``{"scores": {...}}``.

The archive is reproducible: sorted members, fixed owners and times, so the same tree and seed give
the same bytes. The hidden set's seed stays out of the archive; only its transcripts go in.
"""
from __future__ import annotations

import argparse
import ast
import hashlib
import io
import json
import subprocess
import tarfile
from pathlib import Path

from autograder import rubric
from autograder.hidden_data import HIDDEN_NUM_CHARS, build_hidden_transcripts

REPO_ROOT = Path(__file__).resolve().parents[1]
ARCHIVE_ROOT = "autograde"
# Repository files shipped as they are (the hw4lib tree is added separately).
SHIPPED_FILES = (
    "autograder/__init__.py",
    "autograder/rubric.py",
    "autograder/safe_tar.py",
    "autograder/grade.py",
    "autograder/grade_model.py",
    "autograder/judge.py",
    "autograder/sandbox.py",
    "autograder/wire.py",
    "autograder/worker.py",
    "autograder/hidden_tests/__init__.py",
    "autograder/hidden_tests/mytorch_hidden.py",
    "tests/__init__.py",
    "tests/numeric_checks.py",  # truths the hidden mytorch tests share with tests/test_mytorch.py
)
HIDDEN_TESTS = "autograder/hidden_tests/mytorch_hidden.py"
HW4LIB_SUFFIXES = (".py", ".json")
HIDDEN_SET_FILE = "autograder/hidden_set/test.txt"  # autograder.grade_model reads it
MEMBER_MTIME = 1_700_000_000  # fixed, so the archive's bytes depend on the content only


class AutogradeBuildError(Exception):
    """The repository cannot be turned into an autograder; the message says what to fix."""


def build(out_dir: Path, public_seed: int = 0, hidden_chars: int = HIDDEN_NUM_CHARS,
          full_marks_ppl: float = rubric.FULL_MARKS_PPL,
          zero_marks_ppl: float = rubric.ZERO_MARKS_PPL, repo: Path = REPO_ROOT) -> dict:
    """Write ``out_dir/autograde.tar`` and ``out_dir/autograde-Makefile``; return the build info.

    ``public_seed`` is the seed of the public data (its transcripts are kept out of the hidden set);
    the two perplexities set the language model's scoring line (see ``rubric.lm_score``).
    """
    rubric.lm_score(full_marks_ppl, full_marks_ppl, zero_marks_ppl)  # raises on a bad pair
    check_hidden_tests_rubric(repo / HIDDEN_TESTS)
    transcripts = build_hidden_transcripts(public_seed=public_seed, num_chars=hidden_chars)
    hidden_text = ("\n".join(transcripts) + "\n").encode("utf-8")
    info = {
        "git_commit": git_commit(repo),
        "public_seed": public_seed,
        "hidden_utterances": len(transcripts),
        "hidden_chars": sum(len(t) for t in transcripts),
        "hidden_set_sha256": hashlib.sha256(hidden_text).hexdigest(),
        "rubric": rubric.RUBRIC,
        "lm_thresholds": {"full_marks_ppl": full_marks_ppl, "zero_marks_ppl": zero_marks_ppl},
    }
    members = {path: (repo / path).read_bytes() for path in SHIPPED_FILES}
    members.update({path: (repo / path).read_bytes() for path in hw4lib_files(repo)})
    members[HIDDEN_SET_FILE] = hidden_text
    members["build_info.json"] = (json.dumps(info, indent=2) + "\n").encode("utf-8")

    out_dir.mkdir(parents=True, exist_ok=True)
    write_tar(out_dir / "autograde.tar",
              {f"{ARCHIVE_ROOT}/{path}": data for path, data in members.items()})
    (out_dir / "autograde-Makefile").write_text(makefile_text(), encoding="utf-8")
    return info


def check_hidden_tests_rubric(path: Path) -> None:
    """The hidden tests must exist and declare exactly the mytorch categories and points awarded."""
    if not path.is_file():
        raise AutogradeBuildError(f"{path} not found: the hidden mytorch tests are part of the "
                                  f"autograder")
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        targets = node.targets if isinstance(node, ast.Assign) else []
        if any(getattr(target, "id", None) == "RUBRIC" for target in targets):
            declared = ast.literal_eval(node.value)
            if declared != rubric.MYTORCH_RUBRIC:
                raise AutogradeBuildError(f"{path} declares RUBRIC = {declared}, but "
                                          f"autograder/rubric.py awards {rubric.MYTORCH_RUBRIC}; "
                                          f"make them agree")
            check_test_shares()
            return
    raise AutogradeBuildError(f"{path} has no literal RUBRIC = {{...}} assignment")


def check_test_shares() -> None:
    """Each category's hidden tests must share out exactly the category's points."""
    from autograder.hidden_tests.mytorch_hidden import HIDDEN_TESTS

    for category, points in rubric.MYTORCH_RUBRIC.items():
        shares = [test.points for test in HIDDEN_TESTS if test.category == category]
        if not shares or abs(sum(shares) - points) > 1e-9:
            raise AutogradeBuildError(f"the hidden tests of {category} share out {sum(shares)} "
                                      f"points, but the category is worth {points}")


def hw4lib_files(repo: Path) -> list[str]:
    """Repository-relative paths of the reference hw4lib's sources and tokenizer JSONs."""
    paths = sorted(p for p in (repo / "hw4lib").rglob("*")
                   if p.is_file() and p.suffix in HW4LIB_SUFFIXES and "__pycache__" not in p.parts)
    if not (repo / "hw4lib/data/tokenizer_jsons/tokenizer_char.json").is_file():
        raise AutogradeBuildError("hw4lib/data/tokenizer_jsons/ has no tokenizer JSONs: run "
                                  "`make tokenizers`")
    return [p.relative_to(repo).as_posix() for p in paths]


def git_commit(repo: Path) -> str:
    """Short commit id, with '-dirty' when tracked files differ from it; 'unknown' without git."""
    try:
        commit = subprocess.run(["git", "-C", str(repo), "rev-parse", "--short", "HEAD"],
                                check=True, capture_output=True, text=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(repo), "status", "--porcelain",
                                "--untracked-files=no"],
                               check=True, capture_output=True, text=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return commit + ("-dirty" if dirty else "")


def write_tar(path: Path, members: dict[str, bytes]) -> None:
    """Write an uncompressed tar of ``members`` atomically: sorted, mode 644, owner root, fixed
    time, so equal contents give equal bytes."""
    partial = path.with_name(path.name + ".partial")
    with tarfile.open(partial, "w", format=tarfile.PAX_FORMAT) as tar:
        for name in sorted(members):
            data = members[name]
            info = tarfile.TarInfo(name)
            info.size, info.mode, info.mtime = len(data), 0o644, MEMBER_MTIME
            tar.addfile(info, io.BytesIO(data))
    partial.replace(path)


def makefile_text() -> str:
    """The Autolab Makefile; when the driver cannot even start, it prints a line of zeros."""
    zero_line = json.dumps({"scores": rubric.zero_scores()})
    return f"""\
# hw4p1 autograder, generated by `make autograde` (tools/make_autograde.py): do not edit by hand.
# Autolab runs `make` in a folder holding this file (as Makefile), autograde.tar and the student's
# handin.tar. The last line printed is the scores JSON. Grade each handin in a fresh folder: the
# driver deletes autograde.tar once the hidden data is used (see autograder/README.md).
PYTHON ?= python3
GRADER_FLAGS ?=

all:
\t@tar -xf autograde.tar && cd {ARCHIVE_ROOT} && $(PYTHON) -m autograder.grade ../handin.tar \\
\t\t--work ../work --autograde-tar ../autograde.tar $(GRADER_FLAGS) || echo '{zero_line}'
"""


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Build dist/autograde.tar and "
                                                 "dist/autograde-Makefile.")
    parser.add_argument("--out", type=Path, default=REPO_ROOT / "dist",
                        help="output folder (default: dist/)")
    parser.add_argument("--seed", type=int, default=0,
                        help="seed of the PUBLIC data (make data SEED=...), whose transcripts "
                             "the hidden set leaves out")
    parser.add_argument("--hidden-chars", type=int, default=HIDDEN_NUM_CHARS,
                        help="characters of hidden test text to draw")
    parser.add_argument("--full-marks-ppl", type=float, default=rubric.FULL_MARKS_PPL,
                        help="per-character perplexity at or below which the model earns "
                             "full marks")
    parser.add_argument("--zero-marks-ppl", type=float, default=rubric.ZERO_MARKS_PPL,
                        help="per-character perplexity at or above which it earns nothing")
    args = parser.parse_args(argv)
    try:
        info = build(args.out, args.seed, args.hidden_chars, args.full_marks_ppl,
                     args.zero_marks_ppl)
    except (AutogradeBuildError, ValueError) as error:
        raise SystemExit(f"make autograde: {error}")
    tar_path = args.out / "autograde.tar"
    print(f"wrote {tar_path} ({tar_path.stat().st_size / 2**20:.1f} MiB) and "
          f"{args.out / 'autograde-Makefile'}")
    print(f"  hidden test set: {info['hidden_utterances']} transcripts, "
          f"{info['hidden_chars']:,} characters, sha256 {info['hidden_set_sha256'][:16]}")
    print(f"  rubric: {info['rubric']}; language model: full marks at perplexity <= "
          f"{args.full_marks_ppl}, none at >= {args.zero_marks_ppl}; commit {info['git_commit']}")
    print("  upload both to the Autolab assessment (the Makefile under the name Makefile)")


if __name__ == "__main__":
    main()
