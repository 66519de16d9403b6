"""Run the worker (the only process that executes student code) isolated, bounded, killed whole.

Standard library only. The strongest mode the machine allows
(``autograder.judging.isolation.sandbox_modes``: one record per mode, strongest first: ``bwrap``,
``setpriv``, ``unshare``, ``none``) is chosen by
:func:`choose`, which tries each in turn with a probe (start the worker's Python and import numpy,
applying its own layers, Landlock and seccomp, which it reports). The choice is a frozen
:class:`Sandbox`: the mode, the layers its probe found, the limits it applies; its
:meth:`Sandbox.run` starts the worker in it, its :meth:`Sandbox.describe` words it for the feedback
and the report.

Every mode adds resource limits (file size, address space, open files, CPU time, processes) and a
wall-clock limit; where cgroups can be created, the worker tree gets its own ``pids``, ``memory`` and
``cpu`` cgroups under the judge's own (``autograder.judging.isolation.cgroups``), which cap the
whole tree (its CPU at ``Limits.tree_cpus``, so it cannot starve a grading beside it); where the
first two cannot, the worker runs as one process, and the feedback's note says which cap is missing.
``autograder.judging.isolation.processes`` runs it and kills every process it left.
"""
from __future__ import annotations

import dataclasses
import os
import resource
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from autograder.sandboxed import seccomp
from autograder.judging.isolation.cgroups import WorkerCgroup
from autograder.judging.isolation.file_trees import tree_entries
from autograder.judging.isolation.processes import Conversation, Run, run_process, uid_tasks
from autograder.judging.isolation.sandbox_modes import (BOOTSTRAP, MODES, TMPFS_BYTES, UNISOLATED,
                                                        Layout, Mode)

PROBE_TIMEOUT_S = 20.0


@dataclass(frozen=True)
class Limits:
    """What bounds the worker besides its time: rlimits on each of its processes, and a cap on its
    whole tree's processes, memory and CPU where a cgroup can be created."""

    file_bytes: int = 64 * 2**20
    address_space: int = 4 * 2**30
    open_files: int = 256
    processes: int = 64
    tree_memory: int = 4 * 2**30  # the whole worker tree, where a cgroup can cap it
    # CPUs' time the whole worker tree may use, where a cgroup can cap it: the worker runs one
    # math thread and one category's child at a time, so an honest tree never needs more.
    tree_cpus: float = 1.0

    def rlimits(self, timeout: float, tasks_beside: int = 0) -> dict[int, int]:
        """{resource.RLIMIT_*: limit} of each worker process, ``timeout`` its CPU seconds.
        RLIMIT_NPROC counts every task of the worker's uid: where that uid is shared (the
        judge's own), ``tasks_beside`` (the tasks it ran already) are allowed on top."""
        return {resource.RLIMIT_CORE: 0, resource.RLIMIT_FSIZE: self.file_bytes,
                resource.RLIMIT_AS: self.address_space, resource.RLIMIT_NOFILE: self.open_files,
                resource.RLIMIT_NPROC: self.processes + tasks_beside,
                resource.RLIMIT_CPU: int(timeout) + 5}

    def tree_cgroup(self) -> WorkerCgroup | None:
        """A fresh cgroup capping a worker tree (the caller removes it), or None."""
        return WorkerCgroup.create(self.processes, self.tree_memory, self.tree_cpus)


@dataclass(frozen=True)
class Description:
    """How student code is isolated, as the feedback and the report say it."""

    mode: str  # the report's ``sandbox`` (details.json)
    summary: str  # one line: how student code was isolated
    layers: str  # one line: the worker's own layers, as its probe found them
    cap_note: str | None  # which cgroup cannot cap the worker tree here, and what holds it then


@dataclass(frozen=True)
class Sandbox:
    """A mode to start the worker in, on ``layout`` with the interpreter ``python``: ``command``,
    the mode's command as found once (its probe and every run use that file); ``landlock`` (the
    ABI applied, 0: none) and ``seccomp`` (1: the filter installed), the worker's own layers as
    its probe found them, and ``capped``, the cgroup controllers that could cap the worker tree
    then (both 0 and empty when not probed: :meth:`of`)."""

    mode: Mode
    layout: Layout
    python: str
    command: str | None = None
    landlock: int = 0
    seccomp: int = 0
    capped: frozenset[str] = frozenset()
    limits: Limits = Limits()

    @classmethod
    def of(cls, mode: Mode, layout: Layout, python: str | None = None) -> Sandbox:
        """``mode`` unprobed (a candidate, or for tools that name their mode), its command found
        now; ``python`` defaults to :func:`python_executable`."""
        return cls(mode, layout, python or python_executable(), mode.command_path())

    def command_line(self, args: list[str]) -> list[str]:
        """The command line that starts the worker with ``args`` in this mode."""
        folders = self.mode.folders(self.layout)
        paths = [folders[name] for name in ("runtime", "pylib", "student")]
        worker = [self.python, "-I", "-S", "-c", BOOTSTRAP.format(paths=paths), *args,
                  "--readable", *paths]
        return self.mode.prefix(self.command, self.layout, self.python) + worker

    def run(self, args: list[str], timeout: float,
            dialogue: Callable[[Conversation], None] | None = None,
            wall_timeout: float | None = None) -> Run:
        """Run the worker with ``args`` (``{input}`` stands for its input folder as it sees it);
        its result pipe is passed as ``--result-fd`` and, with a ``dialogue``
        (``processes.run_process``), its request pipe as ``--request-fd``. ``timeout`` bounds each
        of its processes' CPU time, ``wall_timeout`` (default ``timeout``) the whole run."""
        cgroup = self.limits.tree_cgroup()
        read_end, write_end = os.pipe()
        input_dir = self.mode.folders(self.layout)["input"]
        args = [a.replace("{input}", input_dir) for a in args] + ["--result-fd", str(write_end)]
        request_pipe = os.pipe() if dialogue is not None else None
        if request_pipe:
            args += ["--request-fd", str(request_pipe[0])]
        if cgroup is None or not {"pids", "memory"} <= set(cgroup.paths):
            args.append("--single-process")  # no cap on the tree: one task, under RLIMIT_AS
        if self.mode.own_view:  # its /tmp is a private tmpfs of TMPFS_BYTES; elsewhere no writes
            args += ["--writable", "/tmp"]
        try:
            return run_process(self.command_line(args), cwd=self.layout.tmp_dir,
                               env=self.mode.environment(self.layout),
                               timeout=wall_timeout or timeout,
                               limits=self.limits.rlimits(timeout, self.tasks_beside()),
                               cgroup=cgroup,
                               result_pipe=(read_end, write_end), request_pipe=request_pipe,
                               dialogue=dialogue)
        finally:
            if cgroup is not None:
                cgroup.remove()

    def tasks_beside(self) -> int:
        """The tasks the worker's uid runs already: 0 where the mode gives each grading a fresh
        uid, else the judge's uid's (a TA's desktop, other gradings), so that they never count
        against the worker's RLIMIT_NPROC."""
        return 0 if self.mode.fresh_uid else uid_tasks(os.getuid())

    def describe(self) -> Description:
        """The feedback's lines on this sandbox, and the report's field."""
        return Description(self.mode.name, self._summary(), self._layers_summary(),
                           self._cap_note())

    def _summary(self) -> str:
        if self.mode.own_layers_only and not self.landlock:
            return UNISOLATED
        return self.mode.summary

    def _layers_summary(self) -> str:
        """The worker's own layers (where seccomp is not applied, :func:`seccomp.unsupported`
        says why)."""
        writes = (f"only its private {TMPFS_BYTES >> 20} MiB /tmp" if self.mode.own_view
                  else "no file")
        parts = [f"Landlock ABI {self.landlock} (reads only the interpreter, numpy and its input, "
                 f"writes {writes}, no TCP"
                 f"{', no signal outside its domain' if self.landlock >= 6 else ''})"
                 if self.landlock else "no Landlock on this kernel",
                 "a seccomp filter (no ptrace, sockets, namespaces, mounts, keyrings, BPF)"
                 if self.seccomp else seccomp.unsupported() or "no seccomp filter here"]
        return "; ".join(parts)

    def _cap_note(self) -> str | None:
        """Which cgroups cannot cap the worker tree here, and what bounds it then: without
        ``pids`` or ``memory``, its seccomp filter lets the worker start no process or thread, so
        RLIMIT_AS bounds its memory (without seccomp either, RLIMIT_NPROC per uid and RLIMIT_AS
        per process are left); without ``cpu``, the kernel's scheduler alone shares the CPU
        between it and gradings beside it. None where all three cap it."""
        missing = [c for c in ("pids", "memory") if c not in self.capped]
        notes = []
        if missing and self.seccomp:
            notes.append(f"no {' or '.join(missing)} cgroup could be created under the grader's "
                         f"own, so the worker may start no process or thread (its seccomp filter) "
                         f"and RLIMIT_AS bounds its memory")
        elif missing:
            notes.append(f"no {' or '.join(missing)} cgroup could be created under the grader's "
                         f"own, so the worker tree's "
                         f"{' and '.join('processes' if c == 'pids' else 'memory' for c in missing)}"
                         f" {'is' if len(missing) == 1 else 'are'} bounded per process (rlimits) "
                         f"and by the time limit only")
        if "cpu" not in self.capped:
            notes.append("no cpu cgroup could be created under the grader's own, so only the "
                         "kernel's scheduler shares the CPU between the worker tree and gradings "
                         "beside it")
        return "; ".join(notes) or None


def choose(layout: Layout, python: str, wanted: Mode | None = None,
           allow_unisolated: bool = False) -> tuple[Sandbox | None, list[str]]:
    """(sandbox, notes): the first of MODES whose probe passes; the notes say why each stronger
    mode was passed over. A ``wanted`` mode is tried alone: (None, notes) when it fails, so that
    student code never runs less isolated than asked. A mode with no isolation but the worker's
    own layers ('none', a plain child process) is used only when its probe shows one of those
    layers (Landlock, seccomp) working, or with ``allow_unisolated``."""
    notes = []
    for mode in ([wanted] if wanted else MODES.values()):
        reason = mode.unavailable()
        if reason is None:
            candidate = Sandbox.of(mode, layout, python)
            run = candidate.run(["--probe"], timeout=PROBE_TIMEOUT_S)
            layers = probe_layers(run)
            if layers is not None and (not mode.own_layers_only or any(layers.values())
                                       or allow_unisolated):
                return dataclasses.replace(candidate, landlock=layers.get("landlock", 0),
                                           seccomp=layers.get("seccomp", 0),
                                           capped=capped_controllers(candidate.limits)), notes
            reason = (f"its probe failed: {run.output.strip()[-300:] or run.returncode}"
                      if layers is None else "no isolation layer works here (no Landlock, no "
                      "seccomp, no privileges): student code is not run unless the grader is "
                      "given --allow-unisolated")
        notes.append(f"{mode.name}: {reason}")
    return None, notes


def probe_layers(run: Run) -> dict[str, int] | None:
    """The worker's own layers as its probe reports them (``ok landlock=7 seccomp=1``: the
    Landlock ABI applied, whether the seccomp filter is installed; 0 for a layer the kernel
    lacks, or seccomp on an architecture without a table), or None if the probe failed."""
    if run.returncode != 0 or not run.result.startswith(b"ok"):
        return None
    try:
        return {key: int(value) for key, value in
                (field.split("=") for field in run.result.decode().split()[1:])}
    except ValueError:
        return None


def capped_controllers(limits: Limits) -> frozenset[str]:
    """The cgroup controllers (``pids``, ``memory``, ``cpu``) that can cap a worker tree here
    now."""
    cgroup = limits.tree_cgroup()
    if cgroup is None:
        return frozenset()
    capped = frozenset(cgroup.paths)
    cgroup.remove()
    return capped


def python_executable() -> str:
    """The real interpreter (not a virtual environment's link): the worker runs it with -I -S."""
    return str(Path(sys.executable).resolve())


def make_readable(folder: Path) -> None:
    """Let the sandbox uid read ``folder`` (for setpriv): directories 755, files 644. Symbolic
    links (numpy's, into the installed packages) are left alone: chmod would follow them."""
    os.chmod(folder, 0o755)
    for entry in tree_entries(folder):
        if not entry.is_symlink():
            os.chmod(entry.path, 0o755 if entry.is_dir(follow_symlinks=False) else 0o644)
