"""Run the worker (the only process that executes student code) isolated, bounded, killed whole.

Standard library only. The strongest mode the machine allows (``autograder.judging.sandbox_modes``: one
record per mode, strongest first: ``bwrap``, ``setpriv``, ``unshare``, ``none``) is chosen by
:func:`choose_mode`, which tries each in turn with a probe (start the worker's Python and import
numpy, applying its own layers, Landlock and seccomp, which it reports). :func:`run_worker` then
starts the worker in that mode for each category.

Every mode adds resource limits (file size, address space, open files, CPU time, processes) and a
wall-clock limit; where cgroups can be created, the worker tree gets its own ``pids`` and
``memory`` cgroups under the judge's own (``autograder.judging.cgroups``), which cap the whole tree;
where they cannot, the worker runs as one process. ``autograder.judging.processes`` runs it and kills
every process it left.
"""
from __future__ import annotations

import os
import resource
from collections.abc import Callable
from pathlib import Path

from autograder.sandboxed import seccomp
from autograder.judging.cgroups import WorkerCgroup
from autograder.judging.file_trees import tree_entries
from autograder.judging.processes import Conversation, Run, run_process
from autograder.judging.sandbox_modes import (MODES, TMPFS_BYTES, UNISOLATED, Layout, unavailable,
                                      worker_command, worker_environment, worker_folders)

MAX_FILE_BYTES = 64 * 2**20
MAX_ADDRESS_SPACE = 4 * 2**30
MAX_OPEN_FILES = 256
MAX_PROCESSES = 64
MAX_TREE_MEMORY = 4 * 2**30  # the whole worker tree, where a cgroup can cap it
PROBE_TIMEOUT_S = 20.0


def choose_mode(layout: Layout, python: str, wanted: str | None = None,
                allow_unisolated: bool = False) -> tuple[str | None, list[str]]:
    """(mode, notes): the first of MODES whose probe passes; the notes say why each stronger mode
    was passed over. A ``wanted`` mode is tried alone: (None, notes) when it fails, so that student
    code never runs less isolated than asked. A mode with no isolation but the worker's own layers
    ('none', a plain child process) is used only when its probe shows one of those layers
    (Landlock, seccomp) working, or with ``allow_unisolated``."""
    notes = []
    for mode in ([wanted] if wanted else MODES):
        reason = unavailable(mode)
        if reason is None:
            run = run_worker(mode, layout, python, ["--probe"], timeout=PROBE_TIMEOUT_S)
            layers = probe_layers(run)
            if layers is not None and (not MODES[mode].own_layers_only or any(layers.values())
                                       or allow_unisolated):
                PROBED_LAYERS[mode] = layers
                return mode, notes
            reason = (f"its probe failed: {run.output.strip()[-300:] or run.returncode}"
                      if layers is None else "no isolation layer works here (no Landlock, no "
                      "seccomp, no privileges): student code is not run unless the grader is "
                      "given --allow-unisolated")
        notes.append(f"{mode}: {reason}")
    return None, notes


PROBED_LAYERS: dict[str, dict[str, int]] = {}  # mode -> the worker's own layers in its probe


def probe_layers(run: Run) -> dict[str, int] | None:
    """The worker's own layers as its probe reports them (``ok landlock=7 seccomp=1``: the
    Landlock ABI applied, whether the seccomp filter is installed; 0 for a layer the kernel
    lacks, or seccomp on an architecture without a table), or None if the probe failed."""
    if run.returncode != 0 or not run.result.startswith(b"ok"):
        return None
    try:
        return {key: int(value) for key, value in
                (field.split("=") for field in run.result[2:].decode().split())}
    except ValueError:
        return None


def mode_summary(mode: str) -> str:
    """One line for the feedback: how student code was isolated."""
    if MODES[mode].own_layers_only and not PROBED_LAYERS.get(mode, {}).get("landlock"):
        return UNISOLATED
    return MODES[mode].summary


def layers_summary(mode: str) -> str:
    """One line for the feedback: the worker's own layers under the mode, as the probe found them
    (where seccomp is not applied, :func:`seccomp.unsupported` says why)."""
    layers = PROBED_LAYERS.get(mode, {})
    abi = layers.get("landlock", 0)
    writes = f"only its private {TMPFS_BYTES >> 20} MiB /tmp" if MODES[mode].own_view else "no file"
    parts = [f"Landlock ABI {abi} (reads only the interpreter, numpy and its input, writes "
             f"{writes}, no TCP{', no signal outside its domain' if abi >= 6 else ''})"
             if abi else "no Landlock on this kernel",
             "a seccomp filter (no ptrace, sockets, namespaces, mounts, keyrings, BPF)"
             if layers.get("seccomp") else seccomp.unsupported() or "no seccomp filter here"]
    return "; ".join(parts)


def process_cap_note(mode: str) -> str | None:
    """A note for the feedback when no cgroup caps the worker tree's processes and memory here:
    then its seccomp filter lets the worker start no process or thread, so RLIMIT_AS bounds its
    memory (without seccomp either, RLIMIT_NPROC per uid and RLIMIT_AS per process are left)."""
    cgroup = WorkerCgroup.create(MAX_PROCESSES, MAX_TREE_MEMORY)
    capped = set(cgroup.paths) if cgroup is not None else set()
    if cgroup is not None:
        cgroup.remove()
    missing = [c for c in ("pids", "memory") if c not in capped]
    if not missing:
        return None
    if PROBED_LAYERS.get(mode, {}).get("seccomp"):
        return (f"no {' or '.join(missing)} cgroup could be created under the grader's own, so the "
                f"worker may start no process or thread (its seccomp filter) and RLIMIT_AS bounds "
                f"its memory")
    return (f"no {' or '.join(missing)} cgroup could be created under the grader's own, so the "
            f"worker tree's {' and '.join('processes' if c == 'pids' else 'memory' for c in missing)}"
            f" {'is' if len(missing) == 1 else 'are'} bounded per process (rlimits) and by the "
            f"time limit only")


def run_worker(mode: str, layout: Layout, python: str, args: list[str], timeout: float,
               dialogue: Callable[[Conversation], None] | None = None,
               wall_timeout: float | None = None) -> Run:
    """Run the worker in ``mode`` with ``args``; its result pipe is passed as ``--result-fd``
    and, with a ``dialogue`` (``processes.run_process``), its request pipe as ``--request-fd``.
    ``timeout`` bounds each of its processes' CPU time, ``wall_timeout`` (default ``timeout``)
    the whole run."""
    cgroup = WorkerCgroup.create(MAX_PROCESSES, MAX_TREE_MEMORY)
    read_end, write_end = os.pipe()
    input_dir = worker_folders(mode, layout)["input"]
    args = [a.replace("{input}", input_dir) for a in args] + ["--result-fd", str(write_end)]
    request_pipe = os.pipe() if dialogue is not None else None
    if request_pipe:
        args += ["--request-fd", str(request_pipe[0])]
    if cgroup is None or set(cgroup.paths) != {"pids", "memory"}:
        args.append("--single-process")  # no cap on the tree: one task, under RLIMIT_AS
    if MODES[mode].own_view:  # its /tmp is a private tmpfs of TMPFS_BYTES; elsewhere no writes
        args += ["--writable", "/tmp"]
    command = worker_command(mode, layout, python, args)
    try:
        return run_process(command, cwd=layout.tmp_dir, env=worker_environment(mode, layout),
                           timeout=wall_timeout or timeout, limits=worker_limits(timeout),
                           cgroup=cgroup,
                           result_pipe=(read_end, write_end), request_pipe=request_pipe,
                           dialogue=dialogue)
    finally:
        if cgroup is not None:
            cgroup.remove()


def worker_limits(timeout: float) -> dict[int, int]:
    return {resource.RLIMIT_CORE: 0, resource.RLIMIT_FSIZE: MAX_FILE_BYTES,
            resource.RLIMIT_AS: MAX_ADDRESS_SPACE, resource.RLIMIT_NOFILE: MAX_OPEN_FILES,
            resource.RLIMIT_NPROC: MAX_PROCESSES, resource.RLIMIT_CPU: int(timeout) + 5}


def make_readable(folder: Path) -> None:
    """Let the sandbox uid read ``folder`` (for setpriv): directories 755, files 644. Symbolic
    links (numpy's, into the installed packages) are left alone: chmod would follow them."""
    os.chmod(folder, 0o755)
    for entry in tree_entries(folder):
        if not entry.is_symlink():
            os.chmod(entry.path, 0o755 if entry.is_dir(follow_symlinks=False) else 0o644)
