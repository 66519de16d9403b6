"""The folders the sandboxed worker sees: the student's mytorch copied alone, the worker's own code
(``autograder/sandboxed/``), numpy, and empty input and tmp folders; for a grading
(:func:`prepare_sandbox`, with the rest made private) or for a tool (:func:`worker_layout`)."""
from __future__ import annotations

import os
import shutil
from pathlib import Path

from autograder.judging.isolation import sandbox_modes
from autograder.judging.isolation.autograder_paths import AUTOGRADE_ROOT, AUTOGRADER_PACKAGE
from autograder.judging.intake.safe_tar import Extraction
from autograder.judging.isolation.sandbox import make_readable
from hw4lib.handin_format import is_mytorch_source

# What the worker imports: the package's marker and the folder that runs beside student code.
RUNTIME_FOLDER = "sandboxed"


def prepare_sandbox(handin: Extraction, work: Path) -> sandbox_modes.Layout | None:
    """The folders the worker sees, or None when there is no mytorch code to run.

    The student's ``mytorch/`` is copied alone into ``sandbox/student`` and the worker's own code
    into ``sandbox/runtime``; the autograder and the rest of ``work/`` are made private to the
    grader's user (which matters when the worker runs as another uid).
    """
    sources = {name: path for name, path in handin.files.items() if is_mytorch_source(name)}
    if not sources:
        return None
    root = work / "sandbox"
    layout = sandbox_modes.Layout(runtime_dir=root / "runtime", pylib_dir=root / "pylib",
                                  student_dir=root / "student", input_dir=root / "input",
                                  tmp_dir=root / "tmp",
                                  hidden_dirs=(AUTOGRADE_ROOT, work / "handin"),
                                  readonly_dir=AUTOGRADE_ROOT.parent)
    for name, path in sources.items():
        target = layout.student_dir / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, target)
    add_worker_folders(layout, root)
    os.chmod(layout.tmp_dir, 0o700)
    os.chmod(work, 0o711)
    for private in (AUTOGRADE_ROOT, work / "handin", work / "home", work / "tmp"):
        if private.exists():
            os.chmod(private, 0o700)
    return layout


def worker_layout(root: Path, mytorch: Path | None = None) -> sandbox_modes.Layout:
    """The folders a worker reads, under ``root``, laid out as :func:`prepare_sandbox` lays them
    out but without a grading's privacy (for the tools, benches and tests that run a worker on a
    mytorch folder): its runtime, numpy, a copy of ``mytorch`` (an empty package when None) and
    empty input and tmp folders."""
    layout = sandbox_modes.Layout(root / "runtime", root / "pylib", root / "student",
                                  root / "input", root / "tmp")
    if mytorch is None:
        (layout.student_dir / "mytorch").mkdir(parents=True)
    else:
        shutil.copytree(mytorch, layout.student_dir / "mytorch",
                        ignore=shutil.ignore_patterns("__pycache__"))
    add_worker_folders(layout, root)
    return layout


def add_worker_folders(layout: sandbox_modes.Layout, root: Path) -> None:
    """Beside the student's folder of ``layout``: the worker's own code, numpy, empty input and
    tmp folders (tmp owned by the sandbox's uid when root); everything under ``root`` readable."""
    package = layout.runtime_dir / "autograder"
    (package / RUNTIME_FOLDER).mkdir(parents=True)
    shutil.copyfile(AUTOGRADER_PACKAGE / "__init__.py", package / "__init__.py")
    for source in sorted((AUTOGRADER_PACKAGE / RUNTIME_FOLDER).glob("*.py")):
        shutil.copyfile(source, package / RUNTIME_FOLDER / source.name)
    link_numpy(layout.pylib_dir)
    layout.input_dir.mkdir()
    layout.tmp_dir.mkdir()
    make_readable(root)
    if os.geteuid() == 0:
        os.chown(layout.tmp_dir, sandbox_modes.grading_uid(), sandbox_modes.grading_uid())


def link_numpy(folder: Path) -> None:
    """``folder``, made in its existing parent, holding links to numpy (and its bundled
    libraries) and nothing else."""
    import numpy

    folder.mkdir()
    numpy_dir = Path(numpy.__file__).resolve().parent
    for source in (numpy_dir, numpy_dir.parent / "numpy.libs"):
        if source.is_dir():
            (folder / source.name).symlink_to(source)
