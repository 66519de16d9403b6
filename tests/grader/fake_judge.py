# hw4p1: instructor-only
"""The fake judge the zygote's and the regrade's interrupt tests grade with: an autograde.tar whose
``autograder.judging.grade`` is a short script, beside the real Makefile.
"""
import io
import tarfile
from pathlib import Path

from autograder.judging import grading_run
from tools.make_autograde import makefile_text

# What the fake judge does, by its handin's text: report what it was given, then end as told.
FAKE_JUDGE = r'''
import json, os, random, stat, sys, time
import numpy
from pathlib import Path
import autograder

behaviour = Path(sys.argv[1]).read_text()
tree = {str(p.relative_to(Path.cwd().parent)): oct(stat.S_IMODE(p.stat().st_mode))
        for p in sorted(Path.cwd().parent.rglob("*")) if "work" not in p.parts}
# make's own variables, and those of its command line, which make exports to the judge
MAKES = ("MAKELEVEL", "MAKEFLAGS", "MFLAGS", "MAKEOVERRIDES", "PYTHON", "GRADER_FLAGS")
environment = {k: v for k, v in os.environ.items() if k not in MAKES}
print(json.dumps({"argv": sys.argv[1:], "argv0": sys.argv[0], "cwd": os.getcwd(),
                  "path0": sys.path[0], "autograder": autograder.__file__,
                  "session": os.getsid(0), "stdin": sys.stdin.read(),
                  "env": environment, "tree": tree, "main": __name__}))
print(json.dumps({"random": [random.random(), numpy.random.random()]}))
sys.stdout.flush()
if behaviour == "raise":
    raise RuntimeError("the fake judge fails")
if behaviour == "exit 3":
    sys.exit(3)
if behaviour == "sleep":
    try:
        time.sleep(300)
    except KeyboardInterrupt:
        print("interrupted", flush=True)
        sys.exit(130)
print(json.dumps({"scores": {"Linear": 5}}))
'''


def fake_grader(folder: Path, judge: str = FAKE_JUDGE) -> Path:
    """A grader folder: the real Makefile, and an autograde.tar whose judge is ``judge`` (the
    source of ``autograder/judging/grade.py``; FAKE_JUDGE by default)."""
    folder.mkdir(parents=True)
    members = {"autograde/autograder/__init__.py": b"",
               "autograde/autograder/judging/__init__.py": b"",
               "autograde/autograder/judging/grade.py": judge.encode()}
    with tarfile.open(folder / grading_run.AUTOGRADE_TAR, "w") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size, info.mode = len(data), 0o644
            tar.addfile(info, io.BytesIO(data))
    (folder / grading_run.MAKEFILE).write_text(makefile_text())
    return folder
