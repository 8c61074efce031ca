"""Measurements that belong to this machine (thread calibration, bandwidth), kept in the cache folder."""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path
from typing import Any

from fara_desktop.atomic_files import save_cache_file
from fara_desktop.hardware import HardwareProfile

log = logging.getLogger(__name__)


def machine_key(hardware: HardwareProfile) -> str:
    return f"{hardware.cpu_name}|{hardware.architecture}|{hardware.usable_cores} usable cores"


class MachineCache:
    """A small JSON file: calibrated threads per model-size class, and measured bandwidth, per machine."""

    def __init__(self, file: Path) -> None:
        self.file = file
        self._data: dict[str, Any] = {}
        try:
            self._data = json.loads(file.read_text(encoding="utf-8")) if file.is_file() else {}
        except (OSError, ValueError) as exc:
            log.warning("Ignoring the unreadable machine cache %s: %s", file, exc)

    def _machine(self, hardware: HardwareProfile) -> dict[str, Any]:
        return self._data.setdefault(machine_key(hardware), {})

    def threads(self, hardware: HardwareProfile, size_class: str) -> int | None:
        entry = self._data.get(machine_key(hardware), {}).get("threads", {}).get(size_class)
        return int(entry["best"]) if entry else None

    def set_threads(self, hardware: HardwareProfile, size_class: str, results: dict[int, float], best: int) -> None:
        self._machine(hardware).setdefault("threads", {})[size_class] = {
            "best": best,
            "tok_per_s": {str(k): round(v, 2) for k, v in results.items()},
            "measured_at": time.strftime("%Y-%m-%dT%H:%M:%S"),
        }
        self.save()

    def bandwidth(self, hardware: HardwareProfile) -> float | None:
        value = self._data.get(machine_key(hardware), {}).get("bandwidth_bytes_per_s")
        return float(value) if value else None

    def set_bandwidth(self, hardware: HardwareProfile, value: float) -> None:
        self._machine(hardware)["bandwidth_bytes_per_s"] = value
        self.save()

    def save(self) -> None:
        save_cache_file(self.file, self._data)
