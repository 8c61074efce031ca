"""Measure this machine's memory read bandwidth: the ceiling of CPU token generation."""

from __future__ import annotations

import time

FILL_CHUNK = 1 << 20  # float64 values: 8 MiB, about a millisecond of work


def measure_read_bandwidth(size_mib: int = 256, repeats: int = 5) -> float:
    """Bytes per second streaming a large array through a dot product (reads only), best of ``repeats``.

    ``a.dot(a)`` reads each element once with vectorised BLAS code; ``a.sum()`` is compute-bound at about half
    the speed on the development machine, so it would under-state the ceiling.
    """
    import numpy as np

    data = np.empty(size_mib * 1024 * 1024 // 8, dtype=np.float64)
    for offset in range(0, data.size, FILL_CHUNK):
        # a slice at a time: ``np.ones`` fills 256 MiB in one call that holds Python's lock throughout, and the
        # probe runs on a background thread while the window is on screen
        data[offset : offset + FILL_CHUNK] = 1.0
    data.dot(data)  # fault the pages in first
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        data.dot(data)
        best = min(best, time.perf_counter() - start)
    return data.nbytes / best
