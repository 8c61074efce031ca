"""After a model loads: the correct kernel paths' speeds measured on it, in the background, once per model size.

Each path runs the user's own model in a child process (``machine/kernel_check.measure_paths``), interleaved
with the others over three rounds; the medians are kept per model-size class and the next load of that size
takes the fastest. The child reads the same file (its pages are shared) and, on a repacking path, copies the
weights once more: it is measured only where memory has room for that copy. A sample taken while the machine was
busy is taken again; what stays busy is used and measured again at the next load. It gives way to the user: while
a reply or a read-ahead is queued or running no child runs (one running is stopped and its sample taken again).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from pathlib import Path

import psutil

from fara_desktop.app.jobs import Jobs, Stage
from fara_desktop.engine.types import ModelInfo
from fara_desktop.machine.kernel_check import KernelChoice, measure_paths
from fara_desktop.machine.kernels import keep_speeds, paths_to_measure, reply_speed_seen

log = logging.getLogger(__name__)

ROOM_BESIDE = 512 * 1024 * 1024  # compute buffers and the child's own Python, beside the weights' copy


class KernelSpeeds:
    """Owns the measuring thread (``fara-kernel-speeds``) and its children: one measurement at a time, a job in
    the registry (stage ENGINE) whose stop kills the child being measured."""

    def __init__(self, jobs: Jobs, rounds: int = 3, engine_busy: Callable[[], bool] | None = None) -> None:
        self._jobs = jobs
        self._rounds = rounds
        self._engine_busy = engine_busy  # a reply, a read-ahead: the measurement gives way to it
        self._lock = threading.Lock()
        self._running: threading.Thread | None = None

    def reply_seen(self, info: ModelInfo, tok_per_s: float, tokens: int) -> bool:
        """A reply's speed on the model ``info`` describes: replies clearly faster than the kernel measurement said
        (twice in a row) make it measure again now; True when it started."""
        if info.remote or not info.size_class or not info.kernel_path:
            return False
        if not reply_speed_seen(info.size_class, info.kernel_path, tok_per_s, tokens):
            return False
        return self.measure_after(info)

    def measure_after(self, info: ModelInfo, on_done: Callable[[KernelChoice], None] | None = None) -> bool:
        """Start measuring the kernel paths on the model ``info`` describes, when its size has no measurement
        here and memory has room; True when it started. ``on_done`` is called on the measuring thread."""
        if info.remote or not info.size_class or not isinstance(info.path, Path):
            return False
        paths = paths_to_measure(info.size_class)
        if not paths or psutil.virtual_memory().available < info.file_bytes * 1.25 + ROOM_BESIDE:
            return False
        with self._lock:
            if self._running is not None and self._running.is_alive():
                return False
            stop = threading.Event()
            job = self._jobs.begin("measuring the kernel paths", Stage.ENGINE, stop.set)
            model, threads, size = info.path, info.n_threads_batch, info.size_class

            def run() -> None:
                try:
                    measurement = measure_paths(
                        paths, model, threads, self._rounds, should_stop=stop.is_set, should_yield=self._engine_busy
                    )
                    if stop.is_set():
                        return
                    choice = keep_speeds(size, measurement)
                    log.info("Kernel speeds for %s models: %s (busy: %s)", size, measurement.speeds, measurement.busy)
                    if choice is not None and on_done is not None:
                        on_done(choice)
                except Exception:  # a measurement that fails leaves the choice as it was
                    log.exception("Measuring the kernel paths failed")
                finally:
                    job.end()

            self._running = threading.Thread(target=run, name="fara-kernel-speeds", daemon=True)
            self._running.start()
            return True
