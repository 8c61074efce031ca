"""Measurements that belong to this machine (thread calibration, bandwidth), kept in the cache folder."""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any

from fara_desktop.files.atomic import read_cache_file, save_cache_file
from fara_desktop.files.paths import AppPaths
from fara_desktop.machine.hardware import HardwareProfile

log = logging.getLogger(__name__)


def machine_key(hardware: HardwareProfile) -> str:
    return f"{hardware.cpu_name}|{hardware.architecture}|{hardware.usable_cores} usable cores"


MAX_CACHE_BYTES = 1 << 20


class MachineCache:
    """A small JSON file: calibrated threads per model-size class, and measured bandwidth, per machine."""

    FILE_NAME = "machine.json"

    @classmethod
    def of_app(cls, paths: AppPaths) -> MachineCache:
        """The machine cache in the app's cache folder."""
        return cls(paths.cache / cls.FILE_NAME)

    def __init__(self, file: Path) -> None:
        self.file = file
        self._data: dict[str, Any] = read_cache_file(file, MAX_CACHE_BYTES, "machine cache")

    def _machine(self, hardware: HardwareProfile) -> dict[str, Any]:
        machine = self._data.get(machine_key(hardware))
        if not isinstance(machine, dict):
            machine = self._data[machine_key(hardware)] = {}
        return machine

    def threads(self, hardware: HardwareProfile, size_class: str) -> int | None:
        """A file on disk like any other: anything but a sane thread count reads as "not measured yet"."""
        threads = self._machine(hardware).get("threads")
        entry = threads.get(size_class) if isinstance(threads, dict) else None
        best = entry.get("best") if isinstance(entry, dict) else None
        return best if isinstance(best, int) and not isinstance(best, bool) and 1 <= best <= 1024 else None

    def set_threads(
        self, hardware: HardwareProfile, size_class: str, results: dict[int, float], best: int, busy: bool = False
    ) -> None:
        machine = self._machine(hardware)
        if not isinstance(machine.get("threads"), dict):
            machine["threads"] = {}
        machine["threads"][size_class] = {
            "best": best,
            "tok_per_s": {str(k): round(v, 2) for k, v in results.items()},
            "measured_at": time.strftime("%Y-%m-%dT%H:%M:%S"),
            "busy": busy,
        }
        self.save()

    def threads_provisional(self, hardware: HardwareProfile, size_class: str) -> bool:
        """Measured while other programs used the processor, or disputed by the speeds seen in use since: used,
        and measured again at the next chance."""
        threads = self._machine(hardware).get("threads")
        entry = threads.get(size_class) if isinstance(threads, dict) else None
        return isinstance(entry, dict) and entry.get("busy") is True

    def calibrated_speed(self, hardware: HardwareProfile, size_class: str, count: int) -> float | None:
        """The generation tok/s the calibration measured at ``count`` threads (None: not measured)."""
        threads = self._machine(hardware).get("threads")
        entry = threads.get(size_class) if isinstance(threads, dict) else None
        speeds = entry.get("tok_per_s") if isinstance(entry, dict) else None
        value = speeds.get(str(count)) if isinstance(speeds, dict) else None
        return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0 else None

    def dispute_threads(self, hardware: HardwareProfile, size_class: str) -> None:
        """The speeds seen in use disagree with the calibration: measure again at the next chance."""
        threads = self._machine(hardware).get("threads")
        entry = threads.get(size_class) if isinstance(threads, dict) else None
        if isinstance(entry, dict):
            entry["busy"] = True
            self.save()

    def bandwidth(self, hardware: HardwareProfile) -> float | None:
        value = self._machine(hardware).get("bandwidth_bytes_per_s")
        if isinstance(value, (int, float)) and not isinstance(value, bool) and 1e8 <= value <= 1e13:
            return float(value)
        return None

    def set_bandwidth(self, hardware: HardwareProfile, value: float) -> None:
        self._machine(hardware)["bandwidth_bytes_per_s"] = value
        self.save()

    def recommended(self, hardware: HardwareProfile, kind: str) -> str | None:
        """The model last recommended here (``kind``: "on disk" or "catalog"), kept so the next one only
        changes when the machine's figures changed clearly."""
        value = self._machine(hardware).get("recommended", {})
        chosen = value.get(kind) if isinstance(value, dict) else None
        return chosen if isinstance(chosen, str) and len(chosen) < 4096 else None

    def set_recommended(self, hardware: HardwareProfile, kind: str, key: str | None) -> None:
        machine = self._machine(hardware)
        if not isinstance(machine.get("recommended"), dict):
            machine["recommended"] = {}
        if machine["recommended"].get(kind) != key:
            machine["recommended"][kind] = key
            self.save()

    def save(self) -> None:
        save_cache_file(self.file, self._data)
