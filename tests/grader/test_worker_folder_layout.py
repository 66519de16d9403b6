# hw4p1: instructor-only
"""The folders the sandboxed worker sees (autograder/judging/isolation/worker_folders.py), fast:
the student's mytorch copied alone, the worker's own code and numpy beside it, each folder's
permission bits read back (the grader's folders private, the worker's readable), the tmp folder's
owner, and a tool's layout.

    .venv/bin/python -m pytest -q tests/grader/test_worker_folder_layout.py
"""
import os
from pathlib import Path

import numpy
import pytest

from autograder.judging.intake.safe_tar import Extraction
from autograder.judging.isolation import sandbox_modes, worker_folders
from autograder.judging.isolation.autograder_paths import AUTOGRADER_PACKAGE


def mode_bits(path: Path) -> int:
    return path.stat().st_mode & 0o777


def handin(folder: Path, names: list[str]) -> Extraction:
    """An extraction of ``names`` under ``folder``, each file holding its own name."""
    files = {}
    for name in names:
        path = folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(name)
        files[name] = path
    return Extraction(files)


@pytest.fixture
def work(tmp_path, monkeypatch):
    """A grading's folder, and a stand-in autograder root (prepare_sandbox makes it private)."""
    root = tmp_path / "autograde"
    root.mkdir()
    monkeypatch.setattr(worker_folders, "AUTOGRADE_ROOT", root)
    folder = root / "work"
    (folder / "handin").mkdir(parents=True)
    (folder / "tmp").mkdir()
    return folder


def test_no_sandbox_without_mytorch_code(work):
    assert worker_folders.prepare_sandbox(handin(work / "handin", ["config.yaml",
                                                                    "mytorch/notes.txt"]),
                                          work) is None
    assert not (work / "sandbox").exists()


def test_the_student_folder_holds_mytorch_sources_only(work):
    names = ["mytorch/__init__.py", "mytorch/nn/__init__.py", "mytorch/nn/linear.py",
             "mytorch/notes.txt", "config.yaml"]
    layout = worker_folders.prepare_sandbox(handin(work / "handin", names), work)
    root = work / "sandbox"
    assert layout == sandbox_modes.Layout(root / "runtime", root / "pylib", root / "student",
                                          root / "input", root / "tmp",
                                          hidden_dirs=(work.parent, work / "handin"),
                                          readonly_dir=work.parent.parent)
    copied = sorted(str(p.relative_to(layout.student_dir)) for p in
                    layout.student_dir.rglob("*") if p.is_file())
    assert copied == ["mytorch/__init__.py", "mytorch/nn/__init__.py", "mytorch/nn/linear.py"]
    assert (layout.student_dir / "mytorch/nn/linear.py").read_text() == "mytorch/nn/linear.py"


def test_the_graders_folders_are_private_and_the_workers_readable(work):
    """The autograder, the handin and the grading's tmp 700; the grading folder 711 (passable,
    not listable); the worker's tmp 700; the worker's folders 755 and its files 644."""
    layout = worker_folders.prepare_sandbox(handin(work / "handin", ["mytorch/__init__.py"]),
                                            work)
    assert {name: mode_bits(path) for name, path in {
        "autograde": work.parent, "work": work, "handin": work / "handin", "tmp": work / "tmp",
        "worker tmp": layout.tmp_dir, "student": layout.student_dir,
        "runtime": layout.runtime_dir, "input": layout.input_dir}.items()} == {
        "autograde": 0o700, "work": 0o711, "handin": 0o700, "tmp": 0o700, "worker tmp": 0o700,
        "student": 0o755, "runtime": 0o755, "input": 0o755}
    assert mode_bits(layout.student_dir / "mytorch" / "__init__.py") == 0o644
    assert not (work / "home").exists()  # a missing private folder is skipped


def test_the_workers_code_and_numpy_beside_it(tmp_path):
    """The package's marker and every sandboxed module, numpy (and its libraries) linked, empty
    input and tmp folders."""
    layout = worker_folders.worker_layout(tmp_path)
    package = layout.runtime_dir / "autograder"
    assert sorted(p.name for p in (package / "sandboxed").iterdir()) == sorted(
        p.name for p in (AUTOGRADER_PACKAGE / "sandboxed").glob("*.py"))
    assert (package / "__init__.py").read_bytes() == (AUTOGRADER_PACKAGE / "__init__.py"
                                                      ).read_bytes()
    numpy_dir = Path(numpy.__file__).resolve().parent
    links = {p.name: p.resolve() for p in layout.pylib_dir.iterdir()}
    expected = {"numpy": numpy_dir}
    if (numpy_dir.parent / "numpy.libs").is_dir():
        expected["numpy.libs"] = numpy_dir.parent / "numpy.libs"
    assert links == expected and all(p.is_symlink() for p in layout.pylib_dir.iterdir())
    assert list(layout.input_dir.iterdir()) == [] and list(layout.tmp_dir.iterdir()) == []
    assert list((layout.student_dir / "mytorch").iterdir()) == []


def test_a_tools_mytorch_copied_without_caches(tmp_path):
    mytorch = tmp_path / "mine"
    (mytorch / "__pycache__").mkdir(parents=True)
    (mytorch / "__init__.py").write_text("x = 1\n")
    (mytorch / "__pycache__" / "a.pyc").write_bytes(b"")
    layout = worker_folders.worker_layout(tmp_path / "box", mytorch)
    assert [p.name for p in (layout.student_dir / "mytorch").iterdir()] == ["__init__.py"]


@pytest.mark.skipif(os.geteuid() != 0, reason="needs a root judge (to give the tmp folder away)")
def test_a_root_judge_gives_the_tmp_folder_to_the_gradings_uid(tmp_path, monkeypatch):
    """As root the worker's tmp belongs to this grading's uid; otherwise it stays the judge's."""
    layout = worker_folders.worker_layout(tmp_path / "root")
    uid = sandbox_modes.grading_uid()
    assert (layout.tmp_dir.stat().st_uid, layout.tmp_dir.stat().st_gid) == (uid, uid)
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    layout = worker_folders.worker_layout(tmp_path / "user")
    assert layout.tmp_dir.stat().st_uid == os.getuid()
