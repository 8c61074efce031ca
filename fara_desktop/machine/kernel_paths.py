"""The kernel paths llama.cpp can take on this CPU, and the one this process uses.

A *kernel path* is how llama.cpp multiplies the weights here:

- ``default``: as llama.cpp chooses by itself: weights of repackable types copied into its extra buffers (AMX
  tiles on a Xeon that has them, interleaved AVX2/AVX-512 layouts otherwise);
- ``no-amx``: the same with AMX refused to the process (``amx_refusal``): the repacked AVX-512 kernels;
- ``plain``: no extra buffers (the model parameter ``use_extra_bufts`` false): ggml's plain kernels on the
  weights as the file has them.

Which are correct here is proven in a child process (``kernel_check``); which is fastest is measured. This
module applies the choice to the whole process: every model llama.cpp loads here afterwards (the chat model, the
embedder, a test's own ``Llama``) takes its ``use_extra_bufts`` from ``llama_model_default_params``, wrapped once.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

from fara_desktop.machine.amx_refusal import amx_refused, can_refuse_amx, refuse_amx


@dataclass(frozen=True)
class KernelPath:
    """One way llama.cpp can run the weights here (see the module's docstring)."""

    key: str
    extra_buffers: bool
    refuse_amx: bool
    title: str


DEFAULT = KernelPath("default", True, False, "llama.cpp's default kernels")
NO_AMX = KernelPath("no-amx", True, True, "repacked weights, AMX refused")
PLAIN = KernelPath("plain", False, False, "plain kernels, no repacking")
ALL_PATHS = (DEFAULT, NO_AMX, PLAIN)
BY_KEY = {p.key: p for p in ALL_PATHS}


def build_has_extra_buffers(system_info: str) -> bool:
    return "REPACK = 1" in system_info or "AMX_INT8 = 1" in system_info


def build_has_amx(system_info: str) -> bool:
    return "AMX_INT8 = 1" in system_info


def available_paths(system_info: str) -> tuple[KernelPath, ...]:
    """The paths this build offers here, llama.cpp's default first. A build without extra buffers has one path."""
    if not build_has_extra_buffers(system_info):
        return (DEFAULT,)
    paths = [DEFAULT]
    if build_has_amx(system_info) and can_refuse_amx():
        paths.append(NO_AMX)
    paths.append(PLAIN)
    return tuple(paths)


def describe(path: KernelPath, system_info: str) -> str:
    """The path in words for this build ("llama.cpp's default kernels (AMX and repacked weights)")."""
    if path is DEFAULT and build_has_amx(system_info):
        return "llama.cpp's default kernels (AMX and repacked weights)"
    if path is DEFAULT and build_has_extra_buffers(system_info):
        return "llama.cpp's default kernels (repacked weights)"
    return path.title


# ---------------------------------------------------------------- the process's own path

_lock = threading.Lock()
_extra_buffers = [True]
_wrapped: list[bool] = []
_in_use: list[KernelPath] = []


def use_path(path: KernelPath) -> KernelPath:
    """Make ``path`` this process's path for every later load; returns the path in effect. AMX, once refused,
    stays refused (the process would need a restart to take ``default`` again: ``no-amx`` is then in effect)."""
    with _lock:
        _wrap_default_params()
        if path.refuse_amx:
            refuse_amx()
        _extra_buffers[0] = path.extra_buffers
        effective = NO_AMX if path is DEFAULT and amx_refused() else path
        _in_use[:] = [effective]
        return effective


def path_in_use() -> KernelPath | None:
    """The path applied in this process (None: llama.cpp's own choice, nothing applied yet)."""
    return _in_use[0] if _in_use else None


def _wrap_default_params() -> None:
    """Every ``llama_model_default_params()`` made here carries the process's ``use_extra_bufts``: ``Llama`` and
    our own loads take their model parameters from it (both names: the bindings' module and the package)."""
    if _wrapped:
        return
    import llama_cpp
    import llama_cpp.llama_cpp as raw

    original = raw.llama_model_default_params

    def with_path() -> Any:
        params = original()
        params.use_extra_bufts = _extra_buffers[0]
        return params

    raw.llama_model_default_params = with_path
    llama_cpp.llama_model_default_params = with_path
    _wrapped.append(True)
