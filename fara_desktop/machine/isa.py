"""Instruction sets that matter to llama.cpp: what the CPU has, what the llama.cpp build uses, and the gap.

A CPU with AVX-512 running an AVX2-only build loses up to half its speed without any error; this module turns
that silent gap into a warning with the fix.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# Our feature name → the /proc/cpuinfo flags that mean it (all must be present).
X86_FEATURES: dict[str, tuple[str, ...]] = {
    "AVX": ("avx",),
    "AVX2": ("avx2",),
    "FMA": ("fma",),
    "F16C": ("f16c",),
    "AVX512F": ("avx512f",),
    "AVX512CD": ("avx512cd",),
    "AVX512VL": ("avx512vl",),
    "AVX512BW": ("avx512bw",),
    "AVX512DQ": ("avx512dq",),
    "AVX512_VBMI": ("avx512vbmi",),
    "AVX512_VNNI": ("avx512_vnni",),
    "AVX_VNNI": ("avx_vnni",),
    "AVX512_BF16": ("avx512_bf16",),
    "AMX_INT8": ("amx_tile", "amx_int8"),
    "AMX_BF16": ("amx_tile", "amx_bf16"),
}
ARM_FEATURES: dict[str, tuple[str, ...]] = {
    "NEON": ("asimd",),
    "DOTPROD": ("asimddp",),
    "I8MM": ("i8mm",),
    "SVE": ("sve",),
    "SVE2": ("sve2",),
    "FP16_VA": ("asimdhp",),
}
# ggml's complete AVX-512 set: the build's "AVX512 = 1" needs all five.
AVX512_COMPLETE = ("AVX512F", "AVX512CD", "AVX512VL", "AVX512BW", "AVX512DQ")

# Our feature name → the name llama_print_system_info() uses for it.
BUILD_NAMES = {
    "AVX": "AVX",
    "AVX2": "AVX2",
    "FMA": "FMA",
    "F16C": "F16C",
    "AVX512": "AVX512",
    "AVX512_VBMI": "AVX512_VBMI",
    "AVX512_VNNI": "AVX512_VNNI",
    "AVX_VNNI": "AVX_VNNI",
    "AVX512_BF16": "AVX512_BF16",
    "AMX_INT8": "AMX_INT8",
    "NEON": "NEON",
    "DOTPROD": "DOTPROD",
    "I8MM": "MATMUL_INT8",
    "SVE": "SVE",
}

REBUILD_HINT = (
    'CMAKE_ARGS="-DGGML_NATIVE=ON" pip install --force-reinstall --no-binary llama-cpp-python '
    "--no-cache-dir llama-cpp-python"
)


def parse_cpuinfo_flags(cpuinfo_text: str) -> set[str]:
    """The feature flags of the first CPU in a /proc/cpuinfo text (x86 ``flags``, Arm ``Features``)."""
    for line in cpuinfo_text.splitlines():
        key, _, value = line.partition(":")
        if key.strip() in ("flags", "Features"):
            return set(value.split())
    return set()


def cpu_features(flags: set[str]) -> list[str]:
    """Feature names (ours) the CPU has, in a stable order; ``AVX512`` when the complete set is there."""
    found = [name for name, needs in {**X86_FEATURES, **ARM_FEATURES}.items() if all(f in flags for f in needs)]
    if all(name in found for name in AVX512_COMPLETE):
        found.insert(found.index("AVX512F"), "AVX512")
    return found


def avx512_partial(features: list[str]) -> list[str]:
    """The AVX-512 subsets the CPU lacks when it has some but not all (ggml then cannot use AVX-512)."""
    have = [name for name in AVX512_COMPLETE if name in features]
    return [name for name in AVX512_COMPLETE if name not in features] if have else []


def parse_build_features(system_info: str) -> dict[str, bool]:
    """Parse ``llama_print_system_info()`` (``CPU : SSE3 = 1 | AVX = 1 | ...``) into name → enabled."""
    return {name: value == "1" for name, value in re.findall(r"([A-Z0-9_]+) = (\d)", system_info)}


@dataclass(frozen=True)
class CapabilityGap:
    """A feature the CPU has that the loaded llama.cpp build does not use."""

    feature: str
    message: str


def compare(cpu: list[str], build: dict[str, bool]) -> list[CapabilityGap]:
    """Features the CPU has that the build does not use. The build lists only what it enables, so absent = off."""
    if not build:
        return []  # the build could not be probed: nothing to say
    gaps = []
    for feature, build_name in BUILD_NAMES.items():
        if feature == "AMX_INT8":
            # llama.cpp's AMX matmul faults on some Xeons (llama.cpp #20824): a native build is the one that
            # crashes there, so a build without AMX is never a gap to fix.
            continue
        if feature in cpu and not build.get(build_name, False):
            gaps.append(
                CapabilityGap(
                    feature,
                    f"This CPU supports {feature} but the installed llama.cpp was built without it, which can "
                    f"cost up to half the speed. Rebuild it for this machine: {REBUILD_HINT}",
                )
            )
    return gaps
