"""A seccomp filter, the worker's second unprivileged layer (after Landlock), standard library only.

:func:`deny_escapes` installs a BPF program that makes the system calls a numpy worker never needs
and an attacker would fail with EPERM: tracing and reading other processes (``ptrace``,
``process_vm_readv/writev``), sockets, new namespaces (``unshare``, ``setns``, ``clone`` with a
``CLONE_NEW*`` flag; ``clone3`` answers ENOSYS so the C library falls back to ``clone``), mounts,
keyrings, BPF, perf events, ``userfaultfd`` and kernel modules. With ``children=False`` it also
refuses every new task (``fork``, ``vfork``, ``clone``: processes and threads; numpy runs
single-threaded): where no cgroup caps the worker tree's memory and tasks, one process under
RLIMIT_AS is the bound, and it cannot use up the per-uid process count other gradings share.
Every other call is allowed. Children inherit it. x86_64 only (elsewhere it returns False and
changes nothing); the filter kills nothing, it refuses.
"""
from __future__ import annotations

import ctypes
import errno
import platform
import struct

_PR_SET_NO_NEW_PRIVS, _PR_SET_SECCOMP, _SECCOMP_MODE_FILTER = 38, 22, 2
_AUDIT_ARCH_X86_64 = 0xC000003E
_RET_ALLOW, _RET_ERRNO = 0x7FFF0000, 0x00050000
# BPF opcodes: load word absolute, jump if equal, jump if any bit set, return.
_LD_W_ABS, _JEQ_K, _JGE_K, _JSET_K, _RET_K = 0x20, 0x15, 0x35, 0x45, 0x06
_X32_SYSCALL_BIT = 0x40000000  # the x32 ABI's numbers: refused, they would bypass the list
_NR_OFFSET, _ARCH_OFFSET, _ARG0_LOW_OFFSET = 0, 4, 16
_CLONE, _CLONE3 = 56, 435
CLONE_NEW_FLAGS = 0x7E020000  # NEWNS NEWCGROUP NEWUTS NEWIPC NEWUSER NEWPID NEWNET
NEW_TASKS = {"fork": 57, "vfork": 58, "clone": _CLONE}
DENIED = {  # x86_64 numbers
    "ptrace": 101, "process_vm_readv": 310, "process_vm_writev": 311, "socket": 41,
    "socketpair": 53, "unshare": 272, "setns": 308, "mount": 165, "umount2": 166,
    "pivot_root": 155, "add_key": 248, "request_key": 249, "keyctl": 250, "bpf": 321,
    "perf_event_open": 298, "userfaultfd": 323, "init_module": 175, "finit_module": 313,
    "delete_module": 176, "kexec_load": 246, "open_by_handle_at": 304, "name_to_handle_at": 303,
}


def _instruction(code: int, jump_true: int, jump_false: int, k: int) -> bytes:
    return struct.pack("HBBI", code, jump_true, jump_false, k)


def worker_filter(children: bool = True) -> bytes:
    """The worker's filter as BPF instructions (see the module docstring)."""
    return bpf_filter({**DENIED, **({} if children else NEW_TASKS)}, CLONE_NEW_FLAGS)


def bpf_filter(denied: dict[str, int], clone_flags: int) -> bytes:
    """A BPF program refusing (EPERM) the x86_64 system calls in ``denied``, ``clone`` with any of
    ``clone_flags``, the x32 numbers and every other ABI; ``clone3`` answers ENOSYS (its flags are
    out of a filter's reach, and the C library then falls back to ``clone``)."""
    refuse = _RET_ERRNO | errno.EPERM
    code = [_instruction(_LD_W_ABS, 0, 0, _ARCH_OFFSET),
            _instruction(_JEQ_K, 1, 0, _AUDIT_ARCH_X86_64),
            _instruction(_RET_K, 0, 0, refuse),  # another ABI on this kernel: refuse everything
            _instruction(_LD_W_ABS, 0, 0, _NR_OFFSET),
            _instruction(_JGE_K, 0, 1, _X32_SYSCALL_BIT),
            _instruction(_RET_K, 0, 0, refuse)]
    for number in sorted(denied.values()):
        code += [_instruction(_JEQ_K, 0, 1, number), _instruction(_RET_K, 0, 0, refuse)]
    code += [_instruction(_JEQ_K, 0, 1, _CLONE3), _instruction(_RET_K, 0, 0, _RET_ERRNO | errno.ENOSYS),
             _instruction(_JEQ_K, 0, 3, _CLONE),
             _instruction(_LD_W_ABS, 0, 0, _ARG0_LOW_OFFSET),
             _instruction(_JSET_K, 0, 1, clone_flags),
             _instruction(_RET_K, 0, 0, refuse),
             _instruction(_RET_K, 0, 0, _RET_ALLOW)]
    return b"".join(code)


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


def deny_escapes(children: bool = True) -> bool:
    """Install the worker's filter on this process (and its future children; ``children=False``:
    no new processes at all); False where unsupported. OSError when the kernel refuses it."""
    if platform.system() != "Linux" or platform.machine() != "x86_64":
        return False
    install(worker_filter(children))
    return True


def install(code: bytes, no_new_privs: bool = True) -> None:
    """Install the BPF program ``code``. Without ``no_new_privs`` the caller needs CAP_SYS_ADMIN
    (as a container runtime has when it installs a container's filter)."""
    buffer = ctypes.create_string_buffer(code, len(code))
    fprog = _SockFprog(len(code) // 8, ctypes.cast(buffer, ctypes.c_void_p))
    libc = ctypes.CDLL(None, use_errno=True)
    if no_new_privs and libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS) failed")
    if libc.prctl(_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER, ctypes.byref(fprog), 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_SECCOMP) failed")
