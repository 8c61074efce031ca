"""The kernel path chosen from the check's verdicts and the measured speeds (pure: no llama.cpp)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from fara_desktop.machine.amx_refusal import can_refuse_amx
from fara_desktop.machine.kernel_check import KernelCache, PathSpeed, PathVerdict, choose_path, verdicts_from
from fara_desktop.machine.kernel_paths import DEFAULT, NO_AMX, PLAIN, available_paths

AMX_BUILD = "CPU : AVX2 = 1 | AVX512 = 1 | AVX512_VNNI = 1 | AMX_INT8 = 1 | OPENMP = 1 | REPACK = 1 |"
AVX2_BUILD = "CPU : AVX2 = 1 | FMA = 1 | OPENMP = 1 | REPACK = 1 |"
PATHS = (DEFAULT, NO_AMX, PLAIN)
OK = {p.key: PathVerdict(p.key, True) for p in PATHS}


def test_an_amx_crash_chooses_repacked_avx512_and_says_why():
    verdicts = {**OK, "default": PathVerdict("default", False, "the check died by SIGSEGV")}
    choice = choose_path(PATHS, verdicts, {}, {}, AMX_BUILD)
    assert choice.path is NO_AMX
    assert choice.reason.startswith("AMX kernels crash on this machine (a known llama.cpp fault; the check died")


def test_the_fastest_measured_path_by_a_whole_turn_and_its_ratio_to_the_default():
    speeds = {"default": PathSpeed(41.0, 11.8), "no-amx": PathSpeed(41.5, 11.8), "plain": PathSpeed(84.0, 10.2)}
    choice = choose_path(PATHS, OK, {}, speeds, AMX_BUILD)
    assert choice.path is PLAIN  # 512/84 + 256/10.2 = 31.2 s a turn against 34.2 s
    assert "prompts 2.05×, replies 0.86× llama.cpp's default" in choice.reason


def test_a_path_within_three_percent_of_the_fastest_keeps_the_default():
    speeds = {"default": PathSpeed(100.0, 20.0), "no-amx": PathSpeed(101.0, 20.2), "plain": PathSpeed(99.0, 20.0)}
    choice = choose_path(PATHS, OK, {}, speeds, AMX_BUILD)
    assert choice.path is DEFAULT and "as fast as the fastest here (a chat turn within 3 %)" in choice.reason


def test_dropped_and_unusable_paths_are_never_chosen_even_when_pinned_or_fastest():
    speeds = {"default": PathSpeed(500.0, 50.0), "plain": PathSpeed(10.0, 1.0)}
    dropped = {"default": "the app died on its first batch on this path"}
    assert choose_path(PATHS, OK, dropped, speeds, AMX_BUILD, pinned="default").path is not DEFAULT
    bad = {**OK, "no-amx": PathVerdict("no-amx", False, "NaN")}
    assert choose_path(PATHS, bad, dropped, speeds, AMX_BUILD, pinned="no-amx").path is PLAIN


def test_a_pinned_usable_path_wins():
    choice = choose_path(PATHS, OK, {}, {}, AMX_BUILD, pinned="plain")
    assert choice.path is PLAIN and choice.pinned and "chosen in Settings" in choice.reason


def test_nothing_passed_the_check_falls_back_to_the_plain_kernels_and_says_so():
    verdicts = {p.key: PathVerdict(p.key, False, "died") for p in PATHS}
    choice = choose_path(PATHS, verdicts, {}, {}, AMX_BUILD)
    assert choice.path is PLAIN and "no kernel path passed the check" in choice.reason


def test_paths_offered_by_each_build():
    assert available_paths("CPU : AVX = 1 |") == (DEFAULT,)  # no extra buffers: one path
    assert available_paths(AVX2_BUILD) == (DEFAULT, PLAIN)
    assert available_paths(AMX_BUILD) == ((DEFAULT, NO_AMX, PLAIN) if can_refuse_amx() else (DEFAULT, PLAIN))


def test_verdicts_from_the_childrens_answers():
    logits = {"Q4_0": [[1.0, -2.0, 3.0]], "Q6_K": [[0.5, 0.5, -1.0]]}
    close = {"Q4_0": [[1.01, -2.0, 3.0]], "Q6_K": [[0.5, 0.51, -1.0]]}
    answers = {
        "plain": ("done", {"logits": logits}),
        "no-amx": ("done", {"logits": close}),
        "default": ("died", "SIGILL"),
    }
    verdicts = verdicts_from(answers)
    assert verdicts["plain"].usable and verdicts["no-amx"].usable and 0 < verdicts["no-amx"].difference < 0.01
    assert verdicts["default"] == PathVerdict("default", False, "the check died by SIGILL")
    missing = verdicts_from({"plain": ("done", {"logits": logits}), "no-amx": ("done", {"logits": {"Q4_0": []}})})
    assert not missing["no-amx"].usable  # a model left out is not a pass


def test_a_hostile_record_reads_as_nothing_checked(tmp_path):
    file = tmp_path / "kernels.json"
    file.write_text('{"k": {"paths": {"default": {"usable": "yes"}, "evil": {"usable": true}}, "speeds": []}}')
    cache = KernelCache(file)
    assert cache.verdicts("k") is None and cache.speeds("k", "small") == {} and cache.dropped("k") == {}
    file.write_text("[" * 100_000)
    assert KernelCache(file).verdicts("k") is None


@pytest.mark.skipif(not can_refuse_amx(), reason="AMX is refused on Linux x86-64 only")
def test_amx_refused_to_the_process_and_its_children():
    """(The suite's own process may have refused it already, on a host whose AMX kernels fault.)"""
    code = """
import subprocess, sys
from fara_desktop.machine.amx_refusal import amx_permission_request_refused, refuse_amx
assert refuse_amx() and amx_permission_request_refused()
child = subprocess.run([sys.executable, "-c",
    "from fara_desktop.machine.amx_refusal import amx_permission_request_refused as r; print(r())"],
    capture_output=True, text=True)
print(child.stdout.strip(), open('/proc/self/status').read().count('Seccomp:\\t2'))
"""
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["True", "1"]
