"""What machine are we on: CPU, cores and memory. Every probe is optional; a failed one reads "unknown"."""

from __future__ import annotations

import os
import platform
from dataclasses import dataclass
from pathlib import Path

import psutil


@dataclass(frozen=True)
class HardwareProfile:
    """A snapshot of the machine, taken off the GUI thread (py-cpuinfo can take a second)."""

    cpu_name: str
    architecture: str
    physical_cores: int | None
    logical_cores: int
    usable_cores: int  # honours CPU affinity (containers, taskset)
    ram_total_bytes: int
    ram_available_bytes: int


def _cpu_name_linux() -> str | None:
    try:
        text = Path("/proc/cpuinfo").read_text(errors="replace")
    except OSError:
        return None
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key.strip() in ("model name", "Hardware", "Model") and value.strip():
            return value.strip()
    return None


def cpu_name() -> str:
    name = _cpu_name_linux() if platform.system() == "Linux" else None
    if name:
        return name
    try:
        import cpuinfo

        name = cpuinfo.get_cpu_info().get("brand_raw")
    except Exception:
        name = None
    return name or platform.processor() or "unknown CPU"


def detect_hardware() -> HardwareProfile:
    memory = psutil.virtual_memory()
    logical = psutil.cpu_count(logical=True) or os.cpu_count() or 1
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else logical
    return HardwareProfile(
        cpu_name=cpu_name(),
        architecture=platform.machine() or "unknown",
        physical_cores=psutil.cpu_count(logical=False),
        logical_cores=logical,
        usable_cores=usable,
        ram_total_bytes=memory.total,
        ram_available_bytes=memory.available,
    )
