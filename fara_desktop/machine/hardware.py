"""What machine are we on: CPU, instruction sets, cores, caches, memory, power, and the llama.cpp build.

Every probe is optional: one that fails leaves its field ``None`` ("unknown") and notes why in ``probe_notes``;
detection never raises. Probes read /proc and /sys on Linux, ``sysctl`` on macOS, py-cpuinfo elsewhere. Run it off
the GUI thread: the build probe imports llama_cpp and py-cpuinfo can take a second.
"""

from __future__ import annotations

import functools
import os
import platform
import subprocess
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import psutil

from fara_desktop.machine.isa import (
    CapabilityGap,
    avx512_partial,
    compare,
    cpu_features,
    parse_build_features,
    parse_cpuinfo_flags,
)
from fara_desktop.machine.llama_build import load_ggml_cpu_library, loaded_ggml_cpu_variant

T = TypeVar("T")


@dataclass(frozen=True)
class HardwareProfile:
    """A snapshot of the machine and of the llama.cpp build that will run on it."""

    cpu_name: str
    architecture: str
    physical_cores: int | None
    logical_cores: int
    usable_cores: int  # honours CPU affinity (containers, taskset)
    performance_cores: int | None
    efficiency_cores: int | None
    l2_cache_bytes: int | None  # per core
    l3_cache_bytes: int | None  # whole package
    numa_nodes: int | None
    ram_total_bytes: int
    ram_available_bytes: int
    swap_total_bytes: int | None
    on_battery: bool | None
    battery_percent: float | None
    cpu_features: list[str] = field(default_factory=list)
    avx512_missing: list[str] = field(default_factory=list)  # partial AVX-512: the subsets ggml still needs
    build_info: str | None = None
    build_features: dict[str, bool] = field(default_factory=dict)
    build_gaps: list[CapabilityGap] = field(default_factory=list)
    cpu_backend_variant: str | None = None  # runtime-dispatched builds: which CPU kernels ggml loaded
    probe_notes: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def _probe(notes: list[str], what: str, fn: Callable[[], T], default: T) -> T:
    try:
        return fn()
    except Exception as exc:  # any probe may fail on some OS; it must not break detection
        notes.append(f"{what}: {type(exc).__name__}: {exc}")
        return default


def _read(path: Path) -> str:
    return path.read_text(encoding="utf-8", errors="replace").strip()


def _cpu_list_count(text: str) -> int:
    """Count CPUs in a sysfs list such as ``0-3,8-11``."""
    count = 0
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        low, _, high = part.partition("-")
        count += int(high) - int(low) + 1 if high else 1
    return count


def _parse_size(text: str) -> int:
    units = {"K": 1024, "M": 1024**2, "G": 1024**3}
    text = text.strip()
    return int(text[:-1]) * units[text[-1]] if text and text[-1] in units else int(text)


def cpu_name_from_cpuinfo(text: str) -> str | None:
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key.strip() in ("model name", "Hardware", "Model") and value.strip():
            return value.strip()
    return None


def linux_caches(sys_root: Path) -> tuple[int | None, int | None]:
    """(L2 per core, L3 total) from sysfs cache descriptions of cpu0 and the L3's sharing groups."""
    l2 = l3 = None
    cache_dir = sys_root / "devices/system/cpu/cpu0/cache"
    for index in sorted(cache_dir.glob("index*")):
        level = _read(index / "level")
        if _read(index / "type") == "Instruction":
            continue
        size = _parse_size(_read(index / "size"))
        if level == "2":
            l2 = size
        elif level == "3":
            shared = _cpu_list_count(_read(index / "shared_cpu_list"))
            total_cpus = _cpu_list_count(_read(sys_root / "devices/system/cpu/online"))
            l3 = size * max(1, total_cpus // max(1, shared))
    return l2, l3


def linux_hybrid_cores(sys_root: Path) -> tuple[int | None, int | None]:
    """Performance / efficiency core counts: Intel hybrid (cpu_core/cpu_atom) or Arm cpu_capacity."""
    core, atom = sys_root / "devices/cpu_core/cpus", sys_root / "devices/cpu_atom/cpus"
    if core.exists() and atom.exists():
        return _cpu_list_count(_read(core)), _cpu_list_count(_read(atom))
    capacities = [int(_read(p)) for p in (sys_root / "devices/system/cpu").glob("cpu[0-9]*/cpu_capacity")]
    if capacities:
        top = max(capacities)
        return sum(1 for c in capacities if c == top), sum(1 for c in capacities if c < top)
    return None, None


def linux_numa_nodes(sys_root: Path) -> int | None:
    nodes = list((sys_root / "devices/system/node").glob("node[0-9]*"))
    return len(nodes) or None


def macos_sysctl(name: str) -> str:
    return subprocess.run(["sysctl", "-n", name], capture_output=True, text=True, timeout=5, check=True).stdout.strip()


_MACOS_ARM_FLAGS = {
    "hw.optional.neon": "asimd",
    "hw.optional.arm.FEAT_DotProd": "asimddp",
    "hw.optional.arm.FEAT_I8MM": "i8mm",
    "hw.optional.arm.FEAT_FP16": "asimdhp",
    "hw.optional.arm.FEAT_SVE": "sve",
}


def macos_flags() -> set[str]:
    if platform.machine() == "arm64":
        flags = set()
        for key, flag in _MACOS_ARM_FLAGS.items():
            try:
                if macos_sysctl(key) == "1":
                    flags.add(flag)
            except subprocess.SubprocessError:
                continue
        return flags
    text = " ".join(macos_sysctl(k) for k in ("machdep.cpu.features", "machdep.cpu.leaf7_features"))
    flags = {f.lower().replace(".", "_") for f in text.split()}
    aliases = {"avx1_0": "avx", "avx512vnni": "avx512_vnni", "avx512bf16": "avx512_bf16"}
    return flags | {linux for mac, linux in aliases.items() if mac in flags}


def cpuinfo_flags() -> set[str]:
    import cpuinfo

    return set(cpuinfo.get_cpu_info().get("flags", []))


def llama_build_info() -> str:
    import llama_cpp

    load_ggml_cpu_library()
    info: bytes = llama_cpp.llama_print_system_info()
    return info.decode("utf-8", errors="replace").strip()


def usable_cores(logical: int | None = None) -> int:
    """Cores this process may run on (CPU affinity: containers, taskset)."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return logical or os.cpu_count() or 1


def physical_cores() -> int | None:
    """Physical cores as the OS tells them, or None."""
    try:
        count: int | None = psutil.cpu_count(logical=False)
        return count
    except Exception:  # the OS does not say
        return None


def detect_hardware(
    cpuinfo_text: str | None = None,
    build_info: str | None = None,
    sys_root: Path = Path("/sys"),
    probe_build: bool = True,
) -> HardwareProfile:
    """Probe the machine. ``cpuinfo_text``/``build_info``/``sys_root`` let tests replay recorded machines."""
    notes: list[str] = []
    system = platform.system()
    if cpuinfo_text is None and system == "Linux":
        cpuinfo_text = _probe(notes, "/proc/cpuinfo", lambda: Path("/proc/cpuinfo").read_text(errors="replace"), "")
    if cpuinfo_text:
        flags = parse_cpuinfo_flags(cpuinfo_text)
        name = cpu_name_from_cpuinfo(cpuinfo_text)
    elif system == "Darwin":
        flags = _probe(notes, "sysctl flags", macos_flags, set())
        name = _probe(notes, "sysctl brand", lambda: macos_sysctl("machdep.cpu.brand_string"), None)
    else:
        flags = _probe(notes, "py-cpuinfo", cpuinfo_flags, set())
        name = None
    if not name:
        name = _probe(notes, "py-cpuinfo brand", lambda: __import__("cpuinfo").get_cpu_info().get("brand_raw"), None)
    features = cpu_features(flags)

    if build_info is None and probe_build:
        build_info = _probe(notes, "llama.cpp build", llama_build_info, None)
    build = parse_build_features(build_info) if build_info else {}
    variant = _probe(notes, "CPU backend", loaded_ggml_cpu_variant, None) if probe_build else None

    l2: int | None = None
    l3: int | None = None
    numa: int | None = None
    perf: int | None = None
    eff: int | None = None
    unknown: tuple[int | None, int | None] = (None, None)
    if system == "Linux" or sys_root != Path("/sys"):
        l2, l3 = _probe(notes, "caches", lambda: linux_caches(sys_root), unknown)
        perf, eff = _probe(notes, "hybrid cores", lambda: linux_hybrid_cores(sys_root), unknown)
        numa = _probe(notes, "NUMA", lambda: linux_numa_nodes(sys_root), None)
    elif system == "Darwin":
        perf = _probe(notes, "P-cores", lambda: int(macos_sysctl("hw.perflevel0.physicalcpu")), None)
        eff = _probe(notes, "E-cores", lambda: int(macos_sysctl("hw.perflevel1.physicalcpu")), None)
        l2 = _probe(notes, "L2", lambda: int(macos_sysctl("hw.l2cachesize")), None)
        l3 = _probe(notes, "L3", lambda: int(macos_sysctl("hw.l3cachesize")) or None, None)

    memory = psutil.virtual_memory()
    swap = _probe(notes, "swap", lambda: psutil.swap_memory().total, None)
    battery = _probe(notes, "battery", psutil.sensors_battery, None) if hasattr(psutil, "sensors_battery") else None
    logical = psutil.cpu_count(logical=True) or os.cpu_count() or 1
    usable = usable_cores(logical)
    return HardwareProfile(
        cpu_name=name or platform.processor() or "unknown CPU",
        architecture=platform.machine() or "unknown",
        physical_cores=_probe(notes, "physical cores", lambda: psutil.cpu_count(logical=False), None),
        logical_cores=logical,
        usable_cores=usable,
        performance_cores=perf,
        efficiency_cores=eff,
        l2_cache_bytes=l2,
        l3_cache_bytes=l3,
        numa_nodes=numa,
        ram_total_bytes=memory.total,
        ram_available_bytes=memory.available,
        swap_total_bytes=swap,
        on_battery=None if battery is None else not battery.power_plugged,
        battery_percent=None if battery is None else float(battery.percent),
        cpu_features=features,
        avx512_missing=avx512_partial(features),
        build_info=build_info,
        build_features=build,
        build_gaps=compare(features, build),
        cpu_backend_variant=variant,
        probe_notes=notes,
    )


def on_battery_now() -> bool:
    """Whether the computer runs on its battery at this moment (a machine without one never does)."""
    import psutil

    try:
        battery = psutil.sensors_battery() if hasattr(psutil, "sensors_battery") else None
    except (OSError, RuntimeError, AttributeError):
        return False
    return battery is not None and not battery.power_plugged


@functools.cache
def this_cpu_features() -> tuple[str, ...]:
    """This machine's instruction-set features (as ``HardwareProfile.cpu_features``), read once."""
    try:
        if platform.system() == "Linux":
            return tuple(cpu_features(parse_cpuinfo_flags(Path("/proc/cpuinfo").read_text(errors="replace"))))
        if platform.system() == "Darwin":
            return tuple(cpu_features(macos_flags()))
        return tuple(cpu_features(cpuinfo_flags()))
    except Exception:  # a probe that fails only makes the prediction the cautious one
        return ()
