"""Refuse this process the permission to use AMX tiles, so that ggml leaves its AMX kernels out.

ggml asks Linux for the AMX tile data permission (``arch_prctl(ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA)``) when it
first lists its extra buffer types, and uses its AMX matmul only when the answer is yes. On some Xeons that matmul
faults on every batch of two or more tokens (llama.cpp #20824, unfixed): the whole process dies. A seccomp filter
that answers that one request with EPERM makes ggml say "AMX is not ready to be used!" and carry on with its other
kernels (the AVX-512 repacked ones included); every other system call passes untouched.

Installed with ``SECCOMP_FILTER_FLAG_TSYNC``, so every thread of the process has it, and inherited by children:
a program the app starts (a sandbox child, an MCP server) cannot use AMX either. It needs ``no_new_privs``, which
also means a set-user-ID program started from the app does not gain privileges (the app starts none). It cannot be
taken back, and must come before llama.cpp's first model load in the process (ggml lists its buffer types once).
Linux on x86-64 only; elsewhere ``refuse_amx`` answers False and changes nothing.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
import platform
import sys
import threading

log = logging.getLogger(__name__)

_SYS_ARCH_PRCTL = 158
_SYS_SECCOMP = 317
_ARCH_REQ_XCOMP_PERM = 0x1023
_XFEATURE_XTILEDATA = 18
_AUDIT_ARCH_X86_64 = 0xC000003E
_PR_SET_NO_NEW_PRIVS = 38
_SECCOMP_SET_MODE_FILTER = 1
_SECCOMP_FILTER_FLAG_TSYNC = 1
_SECCOMP_RET_ALLOW = 0x7FFF0000
_SECCOMP_RET_ERRNO = 0x00050000
_EPERM = 1
# classic BPF opcodes
_LD_W_ABS = 0x20
_JEQ_K = 0x15
_RET_K = 0x06


class _SockFilter(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint16), ("jt", ctypes.c_uint8), ("jf", ctypes.c_uint8), ("k", ctypes.c_uint32)]


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_uint16), ("filter", ctypes.POINTER(_SockFilter))]


def _program() -> list[tuple[int, int, int, int]]:
    """arch_prctl(ARCH_REQ_XCOMP_PERM, …) → EPERM; everything else allowed. ``seccomp_data``: nr at 0, arch at 4,
    args[0] at 16 (its low 32 bits, little-endian)."""
    allow = 7
    return [
        (_LD_W_ABS, 0, 0, 4),
        (_JEQ_K, 0, allow - 2, _AUDIT_ARCH_X86_64),
        (_LD_W_ABS, 0, 0, 0),
        (_JEQ_K, 0, allow - 4, _SYS_ARCH_PRCTL),
        (_LD_W_ABS, 0, 0, 16),
        (_JEQ_K, 0, allow - 6, _ARCH_REQ_XCOMP_PERM),
        (_RET_K, 0, 0, _SECCOMP_RET_ERRNO | _EPERM),
        (_RET_K, 0, 0, _SECCOMP_RET_ALLOW),
    ]


_lock = threading.Lock()
_refused: list[bool] = []


def can_refuse_amx() -> bool:
    """Whether this platform has the means (Linux, x86-64)."""
    return sys.platform.startswith("linux") and platform.machine().lower() in ("x86_64", "amd64")


def amx_refused() -> bool:
    """Whether ``refuse_amx`` succeeded in this process."""
    return bool(_refused) and _refused[0]


def refuse_amx() -> bool:
    """Install the filter once (idempotent); True when AMX is now refused to this process."""
    with _lock:
        if _refused:
            return _refused[0]
        _refused.append(_install() if can_refuse_amx() else False)
        return _refused[0]


def _install() -> bool:
    libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
    instructions = _program()
    array = (_SockFilter * len(instructions))(*(_SockFilter(*i) for i in instructions))
    prog = _SockFprog(len(instructions), array)
    if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        log.warning("AMX could not be refused (no_new_privs: errno %d)", ctypes.get_errno())
        return False
    libc.syscall.restype = ctypes.c_long
    result = libc.syscall(
        ctypes.c_long(_SYS_SECCOMP),
        ctypes.c_ulong(_SECCOMP_SET_MODE_FILTER),
        ctypes.c_ulong(_SECCOMP_FILTER_FLAG_TSYNC),
        ctypes.byref(prog),
    )
    if result != 0:
        log.warning("AMX could not be refused (seccomp: %d, errno %d)", result, ctypes.get_errno())
        return False
    return True


def amx_permission_request_refused() -> bool:
    """Ask for the AMX permission as ggml does: True when the answer is EPERM (the filter works)."""
    if not can_refuse_amx():
        return False
    libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
    libc.syscall.restype = ctypes.c_long
    result = libc.syscall(
        ctypes.c_long(_SYS_ARCH_PRCTL), ctypes.c_ulong(_ARCH_REQ_XCOMP_PERM), ctypes.c_ulong(_XFEATURE_XTILEDATA)
    )
    return result != 0 and ctypes.get_errno() == _EPERM
