"""How many cores other programs kept busy while we measured something: a measurement taken then is not kept
for ever (a thread count measured while another program held a core chose 1 thread for good)."""

from __future__ import annotations

import time

import psutil

BUSY_CORES = 0.25  # other programs using more than this share of one core make a measurement unreliable


def _system_busy_seconds() -> float:
    times = psutil.cpu_times()
    return float(sum(times)) - float(times.idle) - float(getattr(times, "iowait", 0.0))


def _own_seconds() -> float:
    times = psutil.Process().cpu_times()
    return float(times.user + times.system)


class OtherProgramsMeter:
    """Started when a measurement starts; ``cores`` when it ends: the machine's busy time less this process's (and
    ``also_ours`` seconds more, a child's that measured for us), over the wall time."""

    def __init__(self) -> None:
        self._system = _system_busy_seconds()
        self._own = _own_seconds()
        self._started = time.perf_counter()

    def cores(self, also_ours: float = 0.0) -> float:
        wall = max(time.perf_counter() - self._started, 1e-3)
        others = (_system_busy_seconds() - self._system) - (_own_seconds() - self._own) - also_ours
        return max(0.0, others) / wall

    def busy(self, also_ours: float = 0.0) -> bool:
        return self.cores(also_ours) > BUSY_CORES
