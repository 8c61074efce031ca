"""Measure this machine's memory read bandwidth: the ceiling of CPU token generation."""

from __future__ import annotations

import time


def measure_read_bandwidth(size_mib: int = 256, repeats: int = 5) -> float:
    """Bytes per second streaming a large array through a dot product (reads only), best of ``repeats``.

    ``a.dot(a)`` reads each element once with vectorised BLAS code; ``a.sum()`` is compute-bound at about half
    the speed on the development machine, so it would under-state the ceiling.
    """
    import numpy as np

    data = np.ones(size_mib * 1024 * 1024 // 8, dtype=np.float64)
    data.dot(data)  # fault the pages in first
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        data.dot(data)
        best = min(best, time.perf_counter() - start)
    return data.nbytes / best
