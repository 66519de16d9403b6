"""The isolation modes the worker can be started in: one :class:`Mode` record each, in
:data:`MODES`, strongest first, with the folders and environment the worker gets in each.

Standard library only. A record says when its mode can be tried (its command on the judge's PATH,
the judge's uid), the command line it puts before the worker's, whether the worker then sees only
its own folders and a private ``/tmp`` (and so its paths and environment), what it isolates, and
its line in the feedback. A new mode is one record here (and the functions it names);
``autograder.judging.isolation.sandbox`` probes the modes in this order, and the mode it chose (a
frozen ``Sandbox``) builds the worker's command line and runs it.

About the worker's uid: under ``bwrap`` it is 65534 inside its user namespace, which maps to the
judge's own uid outside (a root judge's included: then only the read-only mounts, no capabilities
and the worker's own layers stand between it and root's files); under ``setpriv`` (a root judge
only) it is a uid drawn afresh for each grading (:func:`grading_uid`); under ``unshare`` it is
root inside the namespace, mapped to the judge's uid, so a root judge never uses it; under
``none`` it is the judge's own uid.
"""
from __future__ import annotations

import functools
import glob
import os
import secrets
import shutil
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType

SANDBOX_UID = 65534  # nobody: the worker's uid inside bwrap's user namespace
FRESH_UIDS = (2**20, 2**30)  # a root judge's setpriv worker runs as a fresh uid from this range
ACCOUNTS = Path("/etc/passwd")  # the uids of the machine's accounts
SANDBOX_ROOT = "/sandbox"  # where bwrap mounts the worker's folders
TMPFS_BYTES = 64 * 2**20
BOOTSTRAP = ("import sys; sys.path[:0] = {paths!r}; "
             "from autograder.sandboxed.worker import main; main()")


@dataclass(frozen=True)
class Layout:
    """The folders a worker reads, as the judge sees them (``*_dir``) on the host."""

    runtime_dir: Path  # holds the worker's own code (autograder/sandboxed/, worker_folders.RUNTIME_FOLDER)
    pylib_dir: Path  # holds numpy only (symlinks, for the modes that see the host's files)
    student_dir: Path  # holds mytorch/ only
    input_dir: Path  # one program folder per test, each written as the judge asks for it
    tmp_dir: Path  # the worker's TMPDIR and HOME in the modes without a private /tmp
    hidden_dirs: tuple[Path, ...] = ()  # covered by an empty tmpfs under unshare
    readonly_dir: Path | None = None  # remounted read-only under unshare (the grading folder)


def bwrap_prefix(found: str, layout: Layout, python: str) -> list[str]:
    """bubblewrap arguments (``found``: the bwrap command's path): namespaces, read-only system
    and interpreter, numpy alone."""
    import numpy  # the judge's numpy: the worker gets the very same files

    command = [found, "--unshare-user", "--uid", str(SANDBOX_UID), "--gid", str(SANDBOX_UID),
               "--unshare-pid", "--unshare-ipc", "--unshare-net", "--unshare-uts",
               "--unshare-cgroup-try", "--die-with-parent", "--new-session", "--cap-drop", "ALL"]
    for top in ("/usr", "/lib", "/lib64", "/lib32", "/bin", "/sbin"):
        if os.path.islink(top):
            command += ["--symlink", os.readlink(top), top]
        elif os.path.isdir(top):
            command += ["--ro-bind", top, top]
    if os.path.exists("/etc/ld.so.cache"):
        command += ["--ro-bind", "/etc/ld.so.cache", "/etc/ld.so.cache"]
    prefix = os.path.realpath(sys.base_prefix)
    if not any(prefix == top or prefix.startswith(top + "/") for top in ("/usr", "/lib")):
        command += ["--ro-bind", prefix, prefix]
    if not os.path.realpath(python).startswith(prefix + "/"):
        command += ["--ro-bind", os.path.realpath(python), os.path.realpath(python)]
    for packages in installed_package_dirs(prefix):  # torch and friends live there: hide them
        command += ["--tmpfs", packages]
    numpy_dir = Path(numpy.__file__).resolve().parent
    command += ["--ro-bind", str(numpy_dir), f"{SANDBOX_ROOT}/pylib/numpy"]
    if (numpy_dir.parent / "numpy.libs").is_dir():
        command += ["--ro-bind", str(numpy_dir.parent / "numpy.libs"),
                    f"{SANDBOX_ROOT}/pylib/numpy.libs"]
    for name in ("runtime", "student", "input"):
        command += ["--ro-bind", str(getattr(layout, f"{name}_dir")), f"{SANDBOX_ROOT}/{name}"]
    return command + ["--proc", "/proc", "--dev", "/dev", "--size", str(TMPFS_BYTES),
                      "--tmpfs", "/tmp", "--chdir", "/tmp", "--"]


def installed_package_dirs(prefix: str) -> list[str]:
    """site-packages and dist-packages folders of the interpreter and the system."""
    patterns = [f"{prefix}/lib/python3*/site-packages", f"{prefix}/lib/python3*/dist-packages",
                "/usr/lib/python3*/site-packages", "/usr/lib/python3*/dist-packages",
                "/usr/local/lib/python3*/site-packages", "/usr/local/lib/python3*/dist-packages"]
    return sorted({os.path.realpath(p) for pattern in patterns for p in glob.glob(pattern)
                   if os.path.isdir(p)})


def unshare_prefix(found: str, layout: Layout, python: str) -> list[str]:
    """unshare arguments, and a shell that hides the grader's folders before starting the worker."""
    script = ["set -e"]
    if layout.readonly_dir is not None:
        folder = _quote(layout.readonly_dir)
        script += [f"mount --bind {folder} {folder}", f"mount -o remount,bind,ro {folder}"]
    covered = [*layout.hidden_dirs, layout.tmp_dir]
    for shared in (Path("/tmp"), Path("/dev/shm")):  # unless the grading folder lies there
        if layout.readonly_dir is None or not layout.readonly_dir.is_relative_to(shared):
            covered.append(shared)
    script += [f"mount -t tmpfs -o size={TMPFS_BYTES} tmpfs {_quote(path)}" for path in covered]
    script.append('exec "$@"')
    return [found, "--user", "--map-root-user", "--mount", "--pid", "--fork", "--kill-child",
            "--mount-proc", "--net", "--ipc", "--", "sh", "-c", "; ".join(script), "sandbox"]


def _quote(path: Path) -> str:
    return "'" + str(path).replace("'", "'\\''") + "'"


def setpriv_prefix(found: str, layout: Layout, python: str) -> list[str]:
    """setpriv arguments: this grading's own uid and gid, no groups, no new privileges."""
    uid = grading_uid()
    return [found, f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "--no-new-privs", "--"]


@functools.cache
def grading_uid() -> int:
    """The uid (and gid) a root judge runs this grading's worker as (setpriv): drawn afresh for
    every grading, owned by no account and no running process, so a worker cannot signal, trace
    or read another grading's worker, as one shared uid (65534) would let it."""
    try:
        accounts = ACCOUNTS.read_text(errors="replace")
    except OSError:
        accounts = ""
    taken = {int(line.split(":")[2]) for line in accounts.splitlines()
             if line.count(":") >= 2 and line.split(":")[2].isdigit()}
    for path in glob.glob("/proc/[0-9]*"):
        try:
            taken.add(os.stat(path).st_uid)
        except OSError:  # the process ended meanwhile
            pass
    while True:
        uid = FRESH_UIDS[0] + secrets.randbelow(FRESH_UIDS[1] - FRESH_UIDS[0])
        if uid not in taken:
            return uid


def _any_uid() -> str | None:
    return None


def _no_prefix(found: str | None, layout: Layout, python: str) -> list[str]:
    return []


def _only_as_root() -> str | None:
    return None if os.geteuid() == 0 else "the grader does not run as root"


def _never_as_root() -> str | None:
    if os.geteuid() != 0:
        return None
    return ("the grader runs as root, and the worker would be host root inside the namespace "
            "(--map-root-user maps it to the grader's uid); setpriv gives it a uid of its own")


@dataclass(frozen=True)
class Mode:
    """One way of starting the worker (see the module docstring)."""

    name: str
    isolates: str  # what it isolates, in a few words (grade.py's --sandbox help)
    summary: str  # one line for the feedback: how student code was isolated
    command: str | None = None  # the command it starts the worker with (on the judge's PATH)
    package: str | None = None  # the Debian package that installs that command
    refusal: Callable[[], str | None] = _any_uid  # why the judge's uid rules it out, or None
    # (the command's path as found, layout, python): the arguments before the worker's
    prefix: Callable[[str | None, Layout, str], list[str]] = _no_prefix
    # The worker sees its folders at SANDBOX_ROOT and a private TMPFS_BYTES /tmp, its HOME, TMPDIR
    # and the one folder it writes; elsewhere it sees the host's paths and writes nothing.
    own_view: bool = False
    # No isolation but the worker's own layers (Landlock, seccomp): tried only where they work.
    own_layers_only: bool = False
    # The worker runs as a uid of its own (no task of the judge's uid counts against it).
    fresh_uid: bool = False

    def command_path(self) -> str | None:
        """The absolute path of the command this mode starts the worker with, as found now on
        the judge's PATH (None: no such command, or none needed); a ``Sandbox`` finds it once,
        so that its probe and every run use this very file whatever PATH they get."""
        found = shutil.which(self.command) if self.command else None
        return os.path.realpath(found) if found else None

    def unavailable(self) -> str | None:
        """Why this mode cannot be tried on this machine, or None."""
        if self.command and self.command_path() is None:
            return f"no {self.command} command (Debian package {self.package})"
        return self.refusal()

    def folders(self, layout: Layout) -> dict[str, str]:
        """The worker's folders as it sees them in this mode: {"runtime", "pylib", "student",
        "input", "tmp": path}."""
        if self.own_view:
            return {**{name: f"{SANDBOX_ROOT}/{name}" for name in ("runtime", "pylib", "student",
                                                                 "input")}, "tmp": "/tmp"}
        return {name: str(getattr(layout, f"{name}_dir"))
                for name in ("runtime", "pylib", "student", "input", "tmp")}

    def environment(self, layout: Layout) -> dict[str, str]:
        """A small, fixed environment: nothing of the grader's leaks into the worker."""
        tmp = self.folders(layout)["tmp"]
        return {"PATH": "/usr/bin:/bin", "HOME": tmp, "TMPDIR": tmp, "LANG": "C.UTF-8",
                "PYTHONHASHSEED": "0", "PYTHONDONTWRITEBYTECODE": "1",
                "PYTHONIOENCODING": "utf-8", "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1",
                "MKL_NUM_THREADS": "1"}


MODES = MappingProxyType({mode.name: mode for mode in (
    Mode("bwrap", "new user, PID, IPC, UTS and network namespaces, no capabilities; read-only "
         "system folders, numpy alone, no grading folder, a private /tmp",
         "student code ran in a bubblewrap sandbox (no network, no view of the grader)",
         command="bwrap", package="bubblewrap", prefix=bwrap_prefix, own_view=True),
    Mode("setpriv", "a fresh uid of its own for each grading, no capabilities (root only)",
         "student code ran as a fresh unprivileged uid of its own (no bubblewrap here)",
         command="setpriv", package="util-linux", refusal=_only_as_root, prefix=setpriv_prefix,
         fresh_uid=True),
    Mode("unshare", "unprivileged user, mount, PID, IPC and network namespaces; the grading "
         "folder read-only, the grader's folders and /tmp covered (never as root)",
         "student code ran in unprivileged namespaces (no bubblewrap here)",
         command="unshare", package="util-linux", refusal=_never_as_root, prefix=unshare_prefix),
    Mode("none", "a plain child process: the worker's own layers only",
         "student code ran as a plain child process with the grader's uid, confined by its "
         "Landlock layer only (no bubblewrap, setpriv as root, or unshare here)",
         own_layers_only=True),
)})
UNISOLATED = ("WARNING: student code ran UNISOLATED with the grader's permissions: no sandbox "
              "layer (bubblewrap, setpriv as root, unshare, Landlock) works on this machine; "
              "see autograder/README.md")
