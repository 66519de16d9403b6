# hw4p1: instructor-only
"""autograder/sandboxed/seccomp.py's system-call tables against libseccomp's own resolver, and the filter
built for each architecture run through a model of the kernel's BPF machine: every call it names
is refused on x86_64 and aarch64 alike, whichever machine runs the test. libseccomp is only the
test's truth (the grader never loads it); the tests skip where it is not installed."""
import ctypes
import ctypes.util
import errno
import struct
import sys
from pathlib import Path

import pytest

from autograder.sandboxed import seccomp
from autograder.judging.isolation import sandbox, sandbox_modes

# The kernel's return values and classic BPF opcodes (linux/seccomp.h, linux/filter.h), written
# out here so that the model below does not take them from the module it checks.
RET_ALLOW, RET_ERRNO = 0x7FFF0000, 0x00050000
LD_W_ABS, JEQ_K, JGE_K, JSET_K, RET_K = 0x20, 0x15, 0x35, 0x45, 0x06
CLONE_NEWUSER, CLONE_THREAD_FLAGS = 0x10000000, 0x003D0F00  # what pthread_create passes
ALLOWED = ("read", "write", "openat", "close", "mmap", "munmap", "futex", "exit_group")


def libseccomp():
    """libseccomp through ctypes, or a skip where it is absent."""
    name = ctypes.util.find_library("seccomp")
    if name is None:
        pytest.skip("libseccomp is not installed (Debian: libseccomp2)")
    library = ctypes.CDLL(name)
    library.seccomp_arch_resolve_name.restype = ctypes.c_uint32
    library.seccomp_arch_resolve_name.argtypes = [ctypes.c_char_p]
    library.seccomp_syscall_resolve_name_arch.restype = ctypes.c_int
    library.seccomp_syscall_resolve_name_arch.argtypes = [ctypes.c_uint32, ctypes.c_char_p]
    return library


def resolve(library, arch_token: int, name: str) -> int:
    """libseccomp's number of ``name`` on the architecture; negative where it has no such call."""
    return library.seccomp_syscall_resolve_name_arch(arch_token, name.encode())


def run_filter(instructions: bytes, arch_token: int, number: int, arg0: int = 0) -> int:
    """What the kernel's classic BPF machine returns for one call (struct seccomp_data: nr, arch,
    instruction pointer, six arguments), for the opcodes the worker's filter uses."""
    data = struct.pack("=iIQ6Q", number, arch_token, 0, arg0, 0, 0, 0, 0, 0)
    pc, accumulator = 0, 0
    for _ in range(len(instructions) // 8):
        code, jump_true, jump_false, k = struct.unpack_from("=HBBI", instructions, 8 * pc)
        pc += 1
        if code == LD_W_ABS:
            accumulator = struct.unpack_from("=I", data, k)[0]
        elif code in (JEQ_K, JGE_K, JSET_K):
            taken = {JEQ_K: accumulator == k, JGE_K: accumulator >= k,
                     JSET_K: bool(accumulator & k)}[code]
            pc += jump_true if taken else jump_false
        elif code == RET_K:
            return k
        else:
            raise AssertionError(f"opcode {code:#x} at {pc - 1} is not one the filter should use")
    raise AssertionError("the filter ran off its end without returning")


def test_every_table_entry_is_libseccomps_number():
    library = libseccomp()
    for machine, arch in seccomp.ARCHITECTURES.items():
        token = library.seccomp_arch_resolve_name(machine.encode())
        assert token == arch.audit_arch, (
            f"{machine}: AUDIT_ARCH {arch.audit_arch:#x} in the table, libseccomp says {token:#x}")
        for name, number in arch.numbers.items():
            assert resolve(library, token, name) == number, (
                f"{machine}: {name} is {number} in autograder/sandboxed/seccomp.py, libseccomp says "
                f"{resolve(library, token, name)}")
        for name in (*seccomp.DENIED, *seccomp.NEW_TASKS, "clone3"):
            if name not in arch.numbers:
                assert resolve(library, token, name) < 0, (
                    f"{machine} has {name} (libseccomp: {resolve(library, token, name)}), "
                    f"the table lacks it")


def test_each_architectures_filter_refuses_by_its_own_numbers():
    """The filter built for each table, fed libseccomp's numbers for that architecture."""
    library = libseccomp()
    eperm, enosys = RET_ERRNO | errno.EPERM, RET_ERRNO | errno.ENOSYS
    for machine, arch in seccomp.ARCHITECTURES.items():
        token = library.seccomp_arch_resolve_name(machine.encode())
        for children in (True, False):
            instructions = seccomp.worker_filter(arch, children)

            def returns(name: str, arg0: int = 0) -> int:
                return run_filter(instructions, token, resolve(library, token, name), arg0)

            case = f"{machine}, children={children}"
            for name in seccomp.DENIED:
                assert returns(name) == eperm, f"{case}: {name} must be refused"
            for name in ALLOWED:
                assert returns(name) == RET_ALLOW, f"{case}: {name} must be allowed"
            assert returns("clone3") == enosys, f"{case}: clone3 must answer ENOSYS"
            assert returns("clone", CLONE_NEWUSER) == eperm, f"{case}: a new user namespace"
            for name, flags in (("clone", CLONE_THREAD_FLAGS), ("fork", 0), ("vfork", 0)):
                if resolve(library, token, name) >= 0:
                    assert returns(name, flags) == (RET_ALLOW if children else eperm), (
                        f"{case}: {name} must be {'allowed' if children else 'refused'}")
            other = seccomp.ARCHITECTURES["aarch64" if machine == "x86_64" else "x86_64"]
            assert run_filter(instructions, other.audit_arch, 0) == eperm, (
                f"{case}: a call of another ABI must be refused")
    x32 = library.seccomp_arch_resolve_name(b"x32")
    x32_read = resolve(library, x32, "read")
    assert run_filter(seccomp.worker_filter(seccomp.ARCHITECTURES["x86_64"]),
                      seccomp.ARCHITECTURES["x86_64"].audit_arch, x32_read) == eperm, (
        "an x32 number must be refused: it would bypass the list")


def test_an_unknown_architecture_is_refused_by_name(monkeypatch):
    """No filter on a machine without a table, and the grader's layers line says which machine
    and why (the worker's probe then reports seccomp=0)."""
    monkeypatch.setattr(seccomp.platform, "machine", lambda: "riscv64")
    reason = seccomp.unsupported()
    assert reason and "riscv64" in reason and "x86_64" in reason, reason
    assert seccomp.architecture() is None
    assert seccomp.deny_escapes() is False
    layout = sandbox_modes.Layout(*(Path("/nonexistent") / name for name in "abcde"))
    layers = sandbox.Sandbox(sandbox_modes.MODES["none"], layout, sys.executable, landlock=6,
                             seccomp=0).describe().layers
    assert reason in layers, layers
