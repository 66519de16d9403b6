"""The platforms the grader runs on, emulated on one root Linux machine for its attack tests.

    python tools/platform_profiles.py PROFILE -- COMMAND...   (as root) run COMMAND in PROFILE
    python tools/platform_profiles.py --table FOLDER           the attacks x profiles table

Profiles (what the grader finds when it starts):
- ``host``: COMMAND as it is; on CI, root with bubblewrap and writable cgroups.
- ``gradescope``: root in a Docker container: Docker's default capabilities (no
  ``CAP_SYS_ADMIN``), a seccomp filter refusing new namespaces, mounts, keyrings, BPF and perf
  events as Docker's default profile does for such a container (so bubblewrap cannot start), and
  the cgroup file system read-only (so no cgroup can be made for the worker).
- ``autolab``: a non-root user in a container (Tango's), under the same seccomp filter.
- ``laptop``: a non-root user with bubblewrap and unprivileged user namespaces.

The emulation's own effect is checked where it is used
(``tests/platforms/test_platform_profiles.py`` probes each profile), so a wrong emulation fails
instead of testing the wrong thing.
"""
from __future__ import annotations

import ctypes
import json
import os
import sys
from pathlib import Path

if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from autograder.sandboxed import seccomp

PROFILES = ("host", "gradescope", "autolab", "laptop")
NON_ROOT = ("autolab", "laptop")
PROFILE_UID = 4711  # the non-root profiles' user (no account needed)
# Docker's default capability set: CAP_SYS_ADMIN, CAP_SYS_PTRACE and the rest are not in it.
DOCKER_CAPABILITIES = ("chown", "dac_override", "fowner", "fsetid", "kill", "setgid", "setuid",
                       "setpcap", "net_bind_service", "net_raw", "sys_chroot", "mknod",
                       "audit_write", "setfcap")
# What Docker's default seccomp profile refuses a container without CAP_SYS_ADMIN (and the
# module, keyring and BPF calls it refuses always); ptrace, sockets and process_vm_* it allows.
DOCKER_DENIED = ("unshare", "setns", "mount", "umount2", "pivot_root", "add_key", "request_key",
                 "keyctl", "bpf", "perf_event_open", "userfaultfd", "init_module", "finit_module",
                 "delete_module", "kexec_load", "open_by_handle_at")
CLONE_NEWNS = 0x00020000
# What a "not run" cell of the table means (the test module's JUDGE_SIDE and CONFINED say why
# for each row).
NOT_RUN = ("a row no profile changes runs in the host profile only, and a row whose host cell "
           "would be a make test test's own run in the other three; or the row failed to run "
           "there")
# What held a CPU hog graded beside an honest handin (rows 39-42), as its cells name it; the table
# ends with this legend.
CPU_HOG_HOLDERS = {
    "cpu cgroup": "the worker tree's own cgroup capped its CPU time (cpu.max, v1: cpu.cfs_quota_us)",
    "one task": "no cgroup could cap the tree, so the worker ran as one task: its seccomp filter "
                "refuses new processes and threads",
    "deadline": "a test outlasted its category's time limit, and the worker tree was killed",
}


def launcher(profile: str, command: list[str]) -> list[str]:
    """The command line that runs ``command`` in ``profile``."""
    if profile not in PROFILES:
        raise ValueError(f"unknown profile {profile!r} (one of {', '.join(PROFILES)})")
    return [sys.executable, str(Path(__file__).resolve()), profile, "--", *command]


def docker_filter() -> bytes:
    arch = seccomp.architecture()
    if arch is None:
        raise SystemExit(seccomp.unsupported())
    return seccomp.bpf_filter(arch, DOCKER_DENIED, seccomp.CLONE_NEW_FLAGS)


_MS_RDONLY, _MS_REMOUNT, _MS_BIND, _MS_REC, _MS_PRIVATE = 1, 32, 4096, 16384, 1 << 18


def _mount(source: str | None, target: str, kind: str | None, flags: int,
           options: str | None = None) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    encoded = [None if value is None else value.encode() for value in (source, target, kind, options)]
    if libc.mount(*encoded[:3], ctypes.c_ulong(flags), encoded[3]) != 0:
        raise OSError(ctypes.get_errno(), f"mount {source} on {target} failed")


def own_mount_namespace() -> None:
    """Give this process a mount namespace of its own, whose changes reach nothing outside."""
    if ctypes.CDLL(None, use_errno=True).unshare(CLONE_NEWNS) != 0:
        raise OSError(ctypes.get_errno(), "unshare(CLONE_NEWNS) failed")
    _mount(None, "/", None, _MS_REC | _MS_PRIVATE)


def read_only_cgroups() -> None:
    """Remount every cgroup file system read-only, as Docker mounts them in a container."""
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        target = line.split()[4]
        if target == "/sys/fs/cgroup" or target.startswith("/sys/fs/cgroup/"):
            _mount(None, target, None, _MS_REMOUNT | _MS_BIND | _MS_RDONLY)


def reachable_interpreter() -> None:
    """Let a non-root user run this interpreter, as a platform's image installs it: a folder above
    it that others cannot enter (pyenv's /root) is covered by a tmpfs holding only the way down."""
    chain = list(reversed(Path(sys.base_prefix).resolve().parents))[1:]  # below /
    closed = [folder for folder in chain if not folder.stat().st_mode & 0o001]
    if not closed:
        return
    top = closed[0]
    way_down = chain[chain.index(top) + 1] if top in chain[:-1] else Path(sys.base_prefix).resolve()
    kept = os.open(way_down, os.O_PATH)
    _mount("tmpfs", str(top), "tmpfs", 0, "mode=755")
    os.mkdir(way_down)
    _mount(f"/proc/self/fd/{kept}", str(way_down), None, _MS_BIND | _MS_REC)
    os.close(kept)


def enter(profile: str, command: list[str]) -> None:
    """Become ``profile`` (see the module docstring), then exec ``command``; never returns."""
    if os.geteuid() != 0:
        raise SystemExit("the profiles are set up as root")
    setpriv = ["setpriv"]
    if profile != "host":
        own_mount_namespace()
    if profile in NON_ROOT:
        reachable_interpreter()
    if profile == "gradescope":
        read_only_cgroups()
        caps = ",".join(f"+{name}" for name in DOCKER_CAPABILITIES)
        setpriv += [f"--bounding-set=-all,{caps}", "--inh-caps=-all"]
    if profile in NON_ROOT:
        setpriv += [f"--reuid={PROFILE_UID}", f"--regid={PROFILE_UID}", "--clear-groups"]
    if profile in ("gradescope", "autolab"):
        seccomp.install(docker_filter(), no_new_privs=False)  # as runc does, with CAP_SYS_ADMIN
    if profile == "host":
        os.execvp(command[0], command)
    os.execvp("setpriv", [*setpriv, "--", *command])


def record(folder: str | None, profile: str, attack: str, outcome: str) -> None:
    """Add one cell of the attacks x profiles table (when the run keeps one)."""
    if folder:
        name = "".join(c if c.isalnum() else "-" for c in f"{attack}@{profile}")
        Path(folder, f"{name}.json").write_text(
            json.dumps({"profile": profile, "attack": attack, "outcome": outcome}))


def table(folder: Path) -> str:
    """The recorded cells as a markdown table, one row per attack, one column per profile."""
    cells = [json.loads(path.read_text()) for path in sorted(folder.glob("*.json"))]
    attacks = sorted({cell["attack"] for cell in cells})
    found = {(cell["attack"], cell["profile"]): cell["outcome"] for cell in cells}
    lines = ["| attack | " + " | ".join(PROFILES) + " |", "|---" * (len(PROFILES) + 1) + "|"]
    for attack in attacks:
        lines.append(f"| {attack} | "
                     + " | ".join(found.get((attack, p), "not run") for p in PROFILES) + " |")
    if len(found) < len(attacks) * len(PROFILES):
        lines += ["", f"not run: {NOT_RUN}"]
    if any("held by" in outcome for outcome in found.values()):
        lines += ["", "What held the CPU hogs:"] + [f"- {kind}: {meaning}"
                                                  for kind, meaning in CPU_HOG_HOLDERS.items()]
    return "\n".join(lines)


if __name__ == "__main__":
    if sys.argv[1:2] == ["--table"]:
        print(table(Path(sys.argv[2])))
    elif len(sys.argv) > 3 and sys.argv[2] == "--":
        enter(sys.argv[1], sys.argv[3:])
    else:
        raise SystemExit(__doc__)
