"""The llama.cpp build this process runs: its ggml CPU library (which instruction-set variant) and its log lines.

Naming: "backend" in ggml means one of its compute libraries; here it is always called the *ggml CPU library*, so
that it is not confused with the engine's model adapter (``engine/llama_backend.py``).

Load llama.cpp's CPU library when the build dispatches at run time (portable builds such as the frozen app).

A build made with ``GGML_BACKEND_DL=ON GGML_CPU_ALL_VARIANTS=ON`` ships one CPU backend library per instruction-set
level (``libggml-cpu-haswell.so``, ``-skylakex``, ``-icelake``, ``-zen4`` ...). ggml scores each against this CPU
and loads the best, but it only looks next to the executable and in the current folder — the Python interpreter's
folder for us — so we point it at ``llama_cpp/lib`` before the first model loads. Native builds (the usual
``pip install``) compile the CPU backend into ``libggml`` and need nothing.
"""

from __future__ import annotations

import ctypes
import logging
import sys
import threading
from pathlib import Path
from typing import Any

from fara_desktop.machine.llama_internals import libllama
from fara_desktop.text.untrusted import one_line

log = logging.getLogger(__name__)
_lock = threading.Lock()
_done = False


def llama_lib_dir() -> Path:
    import llama_cpp

    return Path(llama_cpp.__file__).resolve().parent / "lib"


def cpu_variant_files(lib_dir: Path) -> list[Path]:
    """The dispatchable CPU backends in ``lib_dir`` (empty for a native build)."""
    patterns = ("ggml-cpu-*.dll",) if sys.platform == "win32" else ("libggml-cpu-*.so", "libggml-cpu-*.dylib")
    return sorted(path for pattern in patterns for path in lib_dir.glob(pattern))


def load_ggml_cpu_library() -> None:
    """Register the best CPU backend once, if this build has loadable ones; safe to call from any thread."""
    global _done
    with _lock:
        if _done:
            return
        _done = True
        import llama_cpp

        lib_dir = llama_lib_dir()
        if not cpu_variant_files(lib_dir):
            return
        route_llama_logs_to_logging()  # ggml announces the backend it loads; that belongs in the log file
        # Look the ggml functions up through libllama's own handle: dlsym then searches libllama's dependencies,
        # so we reach the very libggml it uses. Opening libggml.so by path could load a second copy (wheels ship
        # libggml.so and libggml.so.0 as two files), whose backend registry libllama would never see.
        ggml = libllama()
        ggml.ggml_backend_reg_count.restype = ctypes.c_size_t
        if ggml.ggml_backend_reg_count() == 0:
            ggml.ggml_backend_load_all_from_path.argtypes = [ctypes.c_char_p]
            ggml.ggml_backend_load_all_from_path(str(lib_dir).encode())
        llama_cpp.llama_backend_init()
        log.info("CPU backend: %s", loaded_ggml_cpu_variant() or "unknown variant")


_REPACKS: list[bool] = []


def weights_are_repacked() -> bool:
    """Whether this llama.cpp build repacks weights for its faster CPU kernels (``REPACK = 1`` in its system
    info: x86 with AVX2, ARM with dotprod/i8mm). Then a memory-mapped model keeps its file pages resident *and* a
    repacked copy in anonymous memory (measured at 1.7B, Q4_K_M, 4k context: 2.68 GB with mmap, 1.93 GB without)."""
    if not _REPACKS:
        try:
            import llama_cpp

            load_ggml_cpu_library()
            info = llama_cpp.llama_print_system_info().decode(errors="replace")
            _REPACKS.append("REPACK = 1" in info)
        except Exception:  # no llama.cpp to ask: assume the common case of a recent x86 build
            _REPACKS.append(True)
    return _REPACKS[0]


def loaded_ggml_cpu_variant() -> str | None:
    """Which CPU variant ggml picked (``haswell``, ``zen4`` ...), from the libraries mapped into this process
    (Linux only); None for native builds or where it cannot be told."""
    try:
        maps = Path("/proc/self/maps").read_text()
    except OSError:
        return None
    for line in maps.splitlines():
        name = line.rsplit("/", 1)[-1]
        if name.startswith("libggml-cpu-") and name.endswith(".so"):
            return name[len("libggml-cpu-") : -len(".so")]
    return None


# ggml's enum ggml_log_level (ggml.h of the vendored llama.cpp; llama-cpp-python's own table predates it).
_LLAMA_LOG_LEVELS = {1: logging.DEBUG, 2: logging.INFO, 3: logging.WARNING, 4: logging.ERROR}
_llama_log_callback: Any = None  # the ctypes callback must outlive every llama.cpp call
# llama-cpp-python's ``Llama.eval`` asks every sequence (-1) to drop the cells past its end before each batch, which
# a recurrent memory refuses with an error line: on a hybrid model, one in the log users share for every reply.
_NOT_ERRORS = ("seq_rm: invalid seq_id (-1)",)


def route_llama_logs_to_logging() -> None:
    """Send llama.cpp's own log lines to the ``llama.cpp`` logger (the log file) instead of stderr."""
    global _llama_log_callback
    if _llama_log_callback is not None:
        return
    import llama_cpp

    llama_log = logging.getLogger("llama.cpp")
    last_level = [logging.DEBUG]

    def forward(level: int, text: bytes, _user_data: Any) -> None:
        log_level = last_level[0] if level == 5 else _LLAMA_LOG_LEVELS.get(level, logging.DEBUG)
        last_level[0] = log_level
        if log_level >= logging.WARNING and llama_log.isEnabledFor(log_level):
            # One line, no control characters: llama.cpp quotes names and values from the GGUF in its warnings.
            line = one_line(text.decode("utf-8", errors="replace"), 2000)
            if not line.startswith(_NOT_ERRORS):
                llama_log.log(log_level, "%s", line)

    _llama_log_callback = llama_cpp.llama_log_callback(forward)
    llama_cpp.llama_log_set(_llama_log_callback, ctypes.c_void_p(0))
