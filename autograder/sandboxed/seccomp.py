"""A seccomp filter, the worker's second unprivileged layer (after Landlock), standard library only.

:func:`deny_escapes` installs a BPF filter that makes the system calls a numpy worker never needs
and an attacker would fail with EPERM: tracing and reading other processes (``ptrace``,
``process_vm_readv/writev``), sockets, new namespaces (``unshare``, ``setns``, ``clone`` with a
``CLONE_NEW*`` flag; ``clone3`` answers ENOSYS so the C library falls back to ``clone``), mounts,
keyrings, BPF, perf events, ``userfaultfd`` and kernel modules. With ``children=False`` it also
refuses every new task (``fork``, ``vfork``, ``clone``: processes and threads; numpy runs
single-threaded): where no cgroup caps the worker tree's memory and tasks, one process under
RLIMIT_AS is the bound, and it cannot use up the per-uid process count other gradings share.
Every other call is allowed. Children inherit it; the filter kills nothing, it refuses.

System-call numbers differ between architectures: the filter is built from the table of the machine
it runs on (:data:`ARCHITECTURES`: x86_64 and aarch64; ``tests/grader/test_seccomp.py`` checks every
number against libseccomp's resolver). On any other machine :func:`unsupported` says why no filter
is applied, the grader prints it with the worker's layers, and :func:`deny_escapes` changes nothing.
"""
from __future__ import annotations

import ctypes
import errno
import platform
import struct
from collections.abc import Iterable
from dataclasses import dataclass

_PR_SET_NO_NEW_PRIVS, _PR_SET_SECCOMP, _SECCOMP_MODE_FILTER = 38, 22, 2
_RET_ALLOW, _RET_ERRNO = 0x7FFF0000, 0x00050000
# BPF opcodes: load word absolute, jump if equal, jump if any bit set, return.
_LD_W_ABS, _JEQ_K, _JGE_K, _JSET_K, _RET_K = 0x20, 0x15, 0x35, 0x45, 0x06
# struct seccomp_data: the call's number, its AUDIT_ARCH, the low word of its first argument
# (both architectures below are little-endian).
_NR_OFFSET, _ARCH_OFFSET, _ARG0_LOW_OFFSET = 0, 4, 16
CLONE_NEW_FLAGS = 0x7E020000  # NEWNS NEWCGROUP NEWUTS NEWIPC NEWUSER NEWPID NEWNET
DENIED = ("ptrace", "process_vm_readv", "process_vm_writev", "socket", "socketpair", "unshare",
          "setns", "mount", "umount2", "pivot_root", "add_key", "request_key", "keyctl", "bpf",
          "perf_event_open", "userfaultfd", "init_module", "finit_module", "delete_module",
          "kexec_load", "open_by_handle_at", "name_to_handle_at")
NEW_TASKS = ("fork", "vfork", "clone")  # those the architecture has (aarch64 forks with clone)


@dataclass(frozen=True)
class Architecture:
    """One architecture's system-call numbers, as seccomp sees them."""

    machine: str  # platform.machine()
    audit_arch: int  # seccomp_data.arch of a native call (AUDIT_ARCH_*)
    numbers: dict[str, int]  # every call the filter names that this architecture has
    foreign_bit: int = 0  # numbers with it set are another ABI under the same audit_arch (x32)


ARCHITECTURES = {arch.machine: arch for arch in (
    Architecture("x86_64", 0xC000003E, {
        "ptrace": 101, "process_vm_readv": 310, "process_vm_writev": 311, "socket": 41,
        "socketpair": 53, "unshare": 272, "setns": 308, "mount": 165, "umount2": 166,
        "pivot_root": 155, "add_key": 248, "request_key": 249, "keyctl": 250, "bpf": 321,
        "perf_event_open": 298, "userfaultfd": 323, "init_module": 175, "finit_module": 313,
        "delete_module": 176, "kexec_load": 246, "open_by_handle_at": 304,
        "name_to_handle_at": 303, "fork": 57, "vfork": 58, "clone": 56, "clone3": 435},
        foreign_bit=0x40000000),
    Architecture("aarch64", 0xC00000B7, {
        "ptrace": 117, "process_vm_readv": 270, "process_vm_writev": 271, "socket": 198,
        "socketpair": 199, "unshare": 97, "setns": 268, "mount": 40, "umount2": 39,
        "pivot_root": 41, "add_key": 217, "request_key": 218, "keyctl": 219, "bpf": 280,
        "perf_event_open": 241, "userfaultfd": 282, "init_module": 105, "finit_module": 273,
        "delete_module": 106, "kexec_load": 104, "open_by_handle_at": 265,
        "name_to_handle_at": 264, "clone": 220, "clone3": 435}),
)}


def architecture() -> Architecture | None:
    """This machine's table, or None where the filter is not applied (:func:`unsupported`)."""
    return ARCHITECTURES.get(platform.machine()) if platform.system() == "Linux" else None


def unsupported() -> str | None:
    """Why no seccomp filter is applied on this machine, or None where it is."""
    if platform.system() != "Linux":
        return f"seccomp is Linux's, and this is {platform.system()}"
    if platform.machine() not in ARCHITECTURES:
        return (f"seccomp is not applied on {platform.machine()}: autograder/sandboxed/seccomp.py holds the "
                f"system-call numbers of {' and '.join(ARCHITECTURES)} only")
    return None


def _instruction(code: int, jump_true: int, jump_false: int, k: int) -> bytes:
    return struct.pack("HBBI", code, jump_true, jump_false, k)


def worker_filter(arch: Architecture, children: bool = True) -> bytes:
    """The worker's filter for ``arch`` as BPF instructions (see the module docstring)."""
    new_tasks = () if children else [name for name in NEW_TASKS if name in arch.numbers]
    return bpf_filter(arch, [*DENIED, *new_tasks], CLONE_NEW_FLAGS)


def bpf_filter(arch: Architecture, denied: Iterable[str], clone_flags: int) -> bytes:
    """A BPF filter refusing (EPERM) the system calls named in ``denied`` (each must be in
    ``arch.numbers``), ``clone`` with any of ``clone_flags``, the numbers with ``arch``'s foreign
    bit and every other ABI; ``clone3`` answers ENOSYS (its flags are out of a filter's reach, and
    the C library then falls back to ``clone``)."""
    refuse = _RET_ERRNO | errno.EPERM
    code = [_instruction(_LD_W_ABS, 0, 0, _ARCH_OFFSET),
            _instruction(_JEQ_K, 1, 0, arch.audit_arch),
            _instruction(_RET_K, 0, 0, refuse),  # another ABI on this kernel: refuse everything
            _instruction(_LD_W_ABS, 0, 0, _NR_OFFSET)]
    if arch.foreign_bit:
        code += [_instruction(_JGE_K, 0, 1, arch.foreign_bit), _instruction(_RET_K, 0, 0, refuse)]
    for number in sorted(arch.numbers[name] for name in denied):
        code += [_instruction(_JEQ_K, 0, 1, number), _instruction(_RET_K, 0, 0, refuse)]
    code += [_instruction(_JEQ_K, 0, 1, arch.numbers["clone3"]),
             _instruction(_RET_K, 0, 0, _RET_ERRNO | errno.ENOSYS),
             _instruction(_JEQ_K, 0, 3, arch.numbers["clone"]),
             _instruction(_LD_W_ABS, 0, 0, _ARG0_LOW_OFFSET),
             _instruction(_JSET_K, 0, 1, clone_flags),
             _instruction(_RET_K, 0, 0, refuse),
             _instruction(_RET_K, 0, 0, _RET_ALLOW)]
    return b"".join(code)


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


def deny_escapes(children: bool = True) -> bool:
    """Install the worker's filter on this process (and its future children; ``children=False``:
    no new processes at all); False where :func:`unsupported` says why not. OSError when the
    kernel refuses it."""
    arch = architecture()
    if arch is None:
        return False
    install(worker_filter(arch, children))
    return True


def install(instructions: bytes, no_new_privs: bool = True) -> None:
    """Install the BPF filter ``instructions``. Without ``no_new_privs`` the caller needs
    CAP_SYS_ADMIN (as a container runtime has when it installs a container's filter)."""
    buffer = ctypes.create_string_buffer(instructions, len(instructions))
    fprog = _SockFprog(len(instructions) // 8, ctypes.cast(buffer, ctypes.c_void_p))
    libc = ctypes.CDLL(None, use_errno=True)
    if no_new_privs and libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS) failed")
    if libc.prctl(_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER, ctypes.byref(fprog), 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_SECCOMP) failed")
