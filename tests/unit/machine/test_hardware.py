"""Hardware detection from sysfs/procfs fixtures, instruction sets against the llama.cpp build, and the
machine's measurement cache."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fara_desktop.machine.hardware import detect_hardware, linux_caches
from fara_desktop.machine.isa import REBUILD_HINT, compare, cpu_features, parse_build_features, parse_cpuinfo_flags
from tests.helpers.paths import FIXTURES as TEST_DATA

FIXTURES = TEST_DATA / "cpuinfo"


AVX2_BUILD = "CPU : SSE3 = 1 | SSSE3 = 1 | AVX = 1 | AVX2 = 1 | F16C = 1 | FMA = 1 | BMI2 = 1 | LLAMAFILE = 1 |"


AVX512_BUILD = (
    "CPU : SSE3 = 1 | SSSE3 = 1 | AVX = 1 | AVX2 = 1 | F16C = 1 | FMA = 1 | AVX512 = 1 | AVX512_VBMI = 1 | "
    "AVX512_VNNI = 1 | AVX512_BF16 = 1 | LLAMAFILE = 1 | OPENMP = 1 |"
)


ARM_BUILD = "CPU : NEON = 1 | ARM_FMA = 1 | FP16_VA = 1 | DOTPROD = 1 | LLAMAFILE = 1 |"


ARM_BUILD_NO_DOTPROD = "CPU : NEON = 1 | ARM_FMA = 1 | LLAMAFILE = 1 |"


def features_of(name: str) -> list[str]:
    return cpu_features(parse_cpuinfo_flags((FIXTURES / name).read_text()))


@pytest.mark.parametrize(
    ("fixture", "has", "lacks"),
    [
        ("amd-zen4.txt", ["AVX2", "AVX512", "AVX512_VNNI", "AVX512_BF16", "AVX512_VBMI"], ["AVX_VNNI", "AMX_INT8"]),
        ("intel-sapphire-rapids.txt", ["AVX512", "AVX512_VNNI", "AVX_VNNI", "AVX512_BF16", "AMX_INT8"], []),
        ("intel-knl-partial-avx512.txt", ["AVX2", "AVX512F", "AVX512CD"], ["AVX512", "AVX512BW", "AVX512VL"]),
        ("intel-avx2-laptop.txt", ["AVX", "AVX2", "FMA", "F16C"], ["AVX512F", "AVX512"]),
        ("arm-raspberry-pi-5.txt", ["NEON", "DOTPROD", "FP16_VA"], ["I8MM", "SVE", "AVX2"]),
    ],
)
def test_cpu_features_of_recorded_cpus(fixture, has, lacks):
    features = features_of(fixture)
    assert all(f in features for f in has), features
    assert not any(f in features for f in lacks), features


def test_partial_avx512_is_reported_with_what_is_missing(tmp_path):
    profile = detect_hardware((FIXTURES / "intel-knl-partial-avx512.txt").read_text(), AVX2_BUILD, tmp_path)
    assert profile.cpu_name.startswith("Intel(R) Xeon Phi")
    assert profile.avx512_missing == ["AVX512VL", "AVX512BW", "AVX512DQ"]
    assert profile.build_gaps == []  # ggml cannot use partial AVX-512: an AVX2 build is right here


def test_zen4_on_an_avx2_build_warns_with_the_fix():
    gaps = compare(features_of("amd-zen4.txt"), parse_build_features(AVX2_BUILD))
    assert {g.feature for g in gaps} == {"AVX512", "AVX512_VBMI", "AVX512_VNNI", "AVX512_BF16"}
    assert all(REBUILD_HINT in g.message and "half the speed" in g.message for g in gaps)


def test_zen4_on_a_native_build_has_no_gap():
    assert compare(features_of("amd-zen4.txt"), parse_build_features(AVX512_BUILD)) == []


def test_avx2_laptop_on_an_avx2_build_has_no_gap():
    assert compare(features_of("intel-avx2-laptop.txt"), parse_build_features(AVX2_BUILD)) == []


def test_sapphire_rapids_on_an_avx512_build_is_never_told_to_rebuild_for_amx():
    """llama.cpp's AMX matmul faults on some Xeons: the native build the advice names is the one that crashes."""
    gaps = compare(features_of("intel-sapphire-rapids.txt"), parse_build_features(AVX512_BUILD))
    assert {g.feature for g in gaps} == {"AVX_VNNI"}
    assert not any("AMX" in g.message for g in gaps)


def test_arm_board_dotprod():
    features = features_of("arm-raspberry-pi-5.txt")
    assert compare(features, parse_build_features(ARM_BUILD)) == []
    assert [g.feature for g in compare(features, parse_build_features(ARM_BUILD_NO_DOTPROD))] == ["DOTPROD"]


def test_unknown_build_says_nothing():
    assert compare(features_of("amd-zen4.txt"), {}) == []


def test_recorded_sysfs_caches(tmp_path):
    cpu = tmp_path / "devices/system/cpu"
    (cpu / "online").parent.mkdir(parents=True)
    (cpu / "online").write_text("0-7\n")
    for index, (level, kind, size, shared) in enumerate(
        [
            ("1", "Data", "48K", "0"),
            ("1", "Instruction", "32K", "0"),
            ("2", "Unified", "2048K", "0"),
            ("3", "Unified", "16384K", "0-3"),
        ]
    ):
        folder = cpu / f"cpu0/cache/index{index}"
        folder.mkdir(parents=True)
        for name, value in (("level", level), ("type", kind), ("size", size), ("shared_cpu_list", shared)):
            (folder / name).write_text(value + "\n")
    assert linux_caches(tmp_path) == (2048 * 1024, 2 * 16384 * 1024)


def test_a_failing_probe_is_unknown_not_a_crash(tmp_path):
    (tmp_path / "devices/system/cpu/cpu0/cache/index0").mkdir(parents=True)  # no files inside: reads fail
    profile = detect_hardware("model name : Test CPU\nflags : avx avx2\n", AVX2_BUILD, tmp_path)
    assert profile.cpu_name == "Test CPU"
    assert profile.l2_cache_bytes is None and profile.l3_cache_bytes is None
    assert any(note.startswith("caches:") for note in profile.probe_notes)


def test_this_machine():
    profile = detect_hardware()
    assert profile.logical_cores >= 1 and profile.usable_cores >= 1
    assert profile.ram_total_bytes > profile.ram_available_bytes > 0
    assert profile.build_features, "the llama.cpp build could be probed"
    assert profile.build_gaps == compare(profile.cpu_features, profile.build_features)


@pytest.mark.parametrize(
    "content",
    [
        "[" * 50_000 + "]" * 50_000,
        "[1, 2]",
        json.dumps({"KEY": {"threads": {"small": {"best": "8"}}, "bandwidth_bytes_per_s": "fast"}}),
        json.dumps({"KEY": {"threads": {"small": {"best": 10**30}}, "bandwidth_bytes_per_s": 1e400}}),
        json.dumps({"KEY": {"threads": [1, 2]}}),
        json.dumps({"KEY": "not a dict"}),
    ],
)
def test_a_damaged_machine_cache_reads_as_not_measured(tmp_path: Path, content: str):
    from fara_desktop.machine.hardware import detect_hardware
    from fara_desktop.machine.measurements import MachineCache, machine_key

    hardware = detect_hardware()
    path = tmp_path / "machine.json"
    path.write_text(content.replace("KEY", machine_key(hardware).replace('"', '\\"')))
    cache = MachineCache(path)
    assert cache.threads(hardware, "small") is None
    assert cache.bandwidth(hardware) is None
    cache.set_threads(hardware, "small", {1: 10.0, 2: 18.0}, 2)
    assert MachineCache(path).threads(hardware, "small") == 2


def test_native_build_needs_no_backend_loading(tmp_path):
    from fara_desktop.machine import llama_build as llama_runtime

    lib = llama_runtime.llama_lib_dir()
    assert (lib / "libllama.so").is_file() or list(lib.glob("*llama*"))
    for name in ("libggml-cpu-haswell.so", "libggml-cpu-zen4.so", "libggml.so"):
        (tmp_path / name).touch()
    assert [p.name for p in llama_runtime.cpu_variant_files(tmp_path)] == [
        "libggml-cpu-haswell.so",
        "libggml-cpu-zen4.so",
    ]
    if not llama_runtime.cpu_variant_files(lib):  # the development install is a native build
        llama_runtime.load_ggml_cpu_library()
        assert llama_runtime.loaded_ggml_cpu_variant() is None
