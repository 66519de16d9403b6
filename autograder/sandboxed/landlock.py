"""Landlock, the unprivileged sandbox layer the worker applies to itself before student code runs.

Standard library only (ctypes). After :func:`restrict` the process, and every process it starts,
may read (and execute) only beneath the given folders, write only beneath the writable ones, open
no TCP connection, and, from ABI 6 on, signal no process and reach no abstract UNIX socket outside
its own Landlock domain. Nothing needs privileges: it works as root, as any user, in any
container whose kernel has Landlock (Linux 5.13+; ABI 6 with Linux 6.12). On a kernel without it,
:func:`restrict` returns 0 and changes nothing; the judge reports which layers applied.
"""
from __future__ import annotations

import ctypes
import os
import platform

# System call numbers (the same on x86_64 and aarch64: they were added after the tables merged).
_CREATE_RULESET, _ADD_RULE, _RESTRICT_SELF = 444, 445, 446
_CREATE_RULESET_VERSION = 1
_RULE_PATH_BENEATH = 1
_PR_SET_NO_NEW_PRIVS = 38

EXECUTE, WRITE_FILE, READ_FILE, READ_DIR = 1 << 0, 1 << 1, 1 << 2, 1 << 3
# The rest of the file-system rights, by the ABI that introduced them.
_FS_RIGHTS_BY_ABI = {1: (1 << 13) - 1, 2: 1 << 13, 3: 1 << 14, 5: 1 << 15}
_FILE_RIGHTS = EXECUTE | WRITE_FILE | READ_FILE | (1 << 14) | (1 << 15)  # valid on a file itself
_NET_TCP = 1 | 2  # bind and connect (ABI 4)
_SCOPE_ABSTRACT_UNIX_SOCKET, _SCOPE_SIGNAL = 1, 2  # ABI 6
READ = EXECUTE | READ_FILE | READ_DIR


class _RulesetAttr(ctypes.Structure):
    _fields_ = [("handled_access_fs", ctypes.c_uint64), ("handled_access_net", ctypes.c_uint64),
                ("scoped", ctypes.c_uint64)]


class _PathBeneathAttr(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


def _libc():
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    return libc


def abi_version() -> int:
    """The kernel's Landlock ABI version; 0 without Landlock (or on an unknown architecture)."""
    if platform.system() != "Linux" or platform.machine() not in ("x86_64", "aarch64"):
        return 0
    version = _libc().syscall(_CREATE_RULESET, None, ctypes.c_size_t(0),
                              ctypes.c_uint32(_CREATE_RULESET_VERSION))
    return max(int(version), 0)


def restrict(readable: list[str], writable: list[str]) -> int:
    """Confine this process (and its future children) as the module docstring says; return the
    ABI version applied (0: no Landlock here, nothing changed). Paths that do not exist are
    skipped. OSError when the kernel refuses a step."""
    abi = abi_version()
    if abi == 0:
        return 0
    handled = sum(rights for version, rights in _FS_RIGHTS_BY_ABI.items() if version <= abi)
    attr = _RulesetAttr(handled, _NET_TCP if abi >= 4 else 0,
                        _SCOPE_ABSTRACT_UNIX_SOCKET | _SCOPE_SIGNAL if abi >= 6 else 0)
    size = ctypes.sizeof(_RulesetAttr) if abi >= 6 else (16 if abi >= 4 else 8)
    libc = _libc()
    ruleset = libc.syscall(_CREATE_RULESET, ctypes.byref(attr), ctypes.c_size_t(size),
                           ctypes.c_uint32(0))
    if ruleset < 0:
        raise OSError(ctypes.get_errno(), "landlock_create_ruleset failed")
    try:
        for paths, rights in ((readable, READ), (writable, handled)):
            for path in paths:
                _allow(libc, int(ruleset), path, rights & handled)
        if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS) failed")
        if libc.syscall(_RESTRICT_SELF, ctypes.c_int(int(ruleset)), ctypes.c_uint32(0)) != 0:
            raise OSError(ctypes.get_errno(), "landlock_restrict_self failed")
    finally:
        os.close(int(ruleset))
    return abi


def _allow(libc, ruleset: int, path: str, rights: int) -> None:
    try:
        fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
    except OSError:
        return
    try:
        if not os.path.isdir(path):
            rights &= _FILE_RIGHTS
        rule = _PathBeneathAttr(rights, fd)
        if libc.syscall(_ADD_RULE, ctypes.c_int(ruleset), ctypes.c_int(_RULE_PATH_BENEATH),
                        ctypes.byref(rule), ctypes.c_uint32(0)) != 0:
            raise OSError(ctypes.get_errno(), f"landlock_add_rule failed for {path}")
    finally:
        os.close(fd)
