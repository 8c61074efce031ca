"""The kernel check: each path proven in a child process of its own, on the real llama.cpp build of this machine.

Faults are injected into the check's children only (``FARA_KERNEL_FAULT``): the test process never runs a
faulty path. On an AVX2 or AVX-512 machine llama.cpp's default path passes; on a Xeon whose AMX matmul faults it
dies by itself — either way the path a fault is injected into must drop out and the app still answers.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from fara_desktop.machine.kernel_check import (
    TOLERANCE,
    KernelCache,
    PathVerdict,
    check_paths,
    identity_key,
)
from fara_desktop.machine.kernel_paths import PLAIN, KernelPath, available_paths, path_in_use
from fara_desktop.machine.kernel_probe import FAULT_VARIABLE
from fara_desktop.machine.kernels import CACHE_VARIABLE, verdicts_for

pytestmark = pytest.mark.real_model


def _system_info() -> str:
    import llama_cpp

    return llama_cpp.llama_print_system_info().decode()


def _faultable_path(kernel_path) -> KernelPath:  # type: ignore[no-untyped-def]
    """A path other than the plain reference that passed this session's check (the one a fault must knock out)."""
    candidates = [
        p for p in available_paths(_system_info()) if p is not PLAIN and kernel_path.verdicts.get(p.key, None)
        and kernel_path.verdicts[p.key].usable
    ]  # fmt: skip
    if not candidates:
        pytest.skip("this build has one kernel path only: nothing to choose between")
    return candidates[0]


@pytest.mark.parametrize(
    ("fault", "reason"),
    [("signal", "died by SIGSEGV"), ("nan", "NaN or infinity"), ("drift", "differ by"), ("hang", "did not finish")],
)
def test_a_faulty_path_is_unusable_and_the_others_stand(
    kernel_path, tmp_path, monkeypatch, fault: str, reason: str
) -> None:  # type: ignore[no-untyped-def]
    target = _faultable_path(kernel_path)
    monkeypatch.setenv(FAULT_VARIABLE, f"{target.key}:{fault}")
    if fault == "hang":
        monkeypatch.setattr("fara_desktop.machine.kernel_check.CHECK_SECONDS", 10.0)
    paths = (target, PLAIN)
    verdicts = check_paths(paths, tmp_path / "check", 2)
    assert not verdicts[target.key].usable
    assert reason in verdicts[target.key].reason
    assert verdicts[PLAIN.key].usable


def test_correct_paths_agree_with_the_plain_kernels_within_the_tolerance(kernel_path) -> None:  # type: ignore[no-untyped-def]
    """The session's real check: the plain path is the reference, every other usable path within tolerance, and
    the check models cover what AMX and repacking handle."""
    assert kernel_path.verdicts[PLAIN.key].usable or len(kernel_path.verdicts) == 1
    for verdict in kernel_path.verdicts.values():
        if verdict.usable:
            assert verdict.difference <= TOLERANCE


def test_every_load_in_this_process_goes_through_the_choice(kernel_path, smollm2_path: Path) -> None:  # type: ignore[no-untyped-def]
    """The suite's own ``Llama``s included: the default model parameters carry the chosen path's extra buffers."""
    import llama_cpp
    import llama_cpp.llama_cpp as raw

    in_use = path_in_use()
    assert in_use is not None and in_use.key in kernel_path.usable()
    assert raw.llama_model_default_params().use_extra_bufts is in_use.extra_buffers
    assert llama_cpp.llama_model_default_params().use_extra_bufts is in_use.extra_buffers
    llm = llama_cpp.Llama(str(smollm2_path), n_ctx=256, n_batch=64, verbose=False)
    try:
        llm.eval(llm.tokenize(b"A batch of several tokens read at once, as a prompt is read."))  # one batch
    finally:
        llm.close()


def test_a_changed_build_or_cpu_makes_the_check_run_again(tmp_path) -> None:  # type: ignore[no-untyped-def]
    cache = KernelCache(tmp_path / "kernels.json")
    paths = tuple(available_paths("CPU : AVX2 = 1 | REPACK = 1 |"))
    checks: list[int] = []

    def counting(paths_, folder, threads):  # type: ignore[no-untyped-def]
        checks.append(1)
        return {p.key: PathVerdict(p.key, True) for p in paths_}

    old = identity_key("0.3.36|libllama.so|1|2|CPU : AVX2 = 1 |", "x86_64|Xeon|avx2")
    verdicts_for(cache, old, "b", "c", paths, tmp_path, 2, counting)
    verdicts_for(KernelCache(tmp_path / "kernels.json"), old, "b", "c", paths, tmp_path, 2, counting)
    assert len(checks) == 1  # kept on disk for the same build and CPU
    rebuilt = identity_key("0.3.36|libllama.so|1|3|CPU : AVX2 = 1 |", "x86_64|Xeon|avx2")  # a new libllama
    _, checked = verdicts_for(KernelCache(tmp_path / "kernels.json"), rebuilt, "b", "c", paths, tmp_path, 2, counting)
    moved = identity_key("0.3.36|libllama.so|1|3|CPU : AVX2 = 1 |", "x86_64|Xeon|avx2 avx512f")  # another host
    verdicts_for(KernelCache(tmp_path / "kernels.json"), moved, "b", "c", paths, tmp_path, 2, counting)
    assert checked and len(checks) == 3


def _app_env(home: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in (CACHE_VARIABLE, FAULT_VARIABLE)}
    env.update(FARA_HOME=str(home), **extra)
    return env


def test_the_app_answers_when_its_first_choice_of_path_dies_in_the_check(kernel_path, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """A fresh home (the check runs as on a new machine) with a fault in the path the app would take: the path
    is recorded unusable, another answers."""
    target = _faultable_path(kernel_path)
    home = tmp_path / "home"
    result = subprocess.run(
        [sys.executable, "-m", "fara_desktop", "smoke", "--max-tokens", "8"],
        env=_app_env(home, **{FAULT_VARIABLE: f"{target.key}:signal"}),
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-2000:]
    assert json.loads(result.stdout.strip().splitlines()[-1])["completion_tokens"] > 0
    record = json.loads((home / "cache" / "kernels.json").read_text())
    (entry,) = record.values()
    assert entry["paths"][target.key] == {"usable": False, "reason": "the check died by SIGSEGV", "difference": 0.0}
    assert target.key not in entry.get("proven", [])  # the first batch ran on another path
    assert entry["proven"]


_FIRST_BATCH_CHILD = """
import os, signal, sys
from pathlib import Path
from fara_desktop.files.fatal_log import enable_fatal_log
from fara_desktop.machine import kernels
enable_fatal_log(Path(sys.argv[1]))
choice = kernels.ensure_kernel_path()
print(choice.path.key, flush=True)
if sys.argv[2] != "none":
    with kernels.first_batch(choice.path):
        os.kill(os.getpid(), getattr(signal, sys.argv[2]))  # as a faulting kernel, or a logout, would
"""


def _start(cache: Path, logs: Path, sig: str) -> tuple[int, str]:
    result = subprocess.run(
        [sys.executable, "-c", _FIRST_BATCH_CHILD, str(logs), sig],
        env={**os.environ, CACHE_VARIABLE: str(cache)}, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    return result.returncode, result.stdout.strip()


def test_a_death_on_the_first_batch_drops_that_path_not_the_model(kernel_path, tmp_path) -> None:  # type: ignore[no-untyped-def]
    if len(kernel_path.usable()) < 2:
        pytest.skip("one usable kernel path here: nothing to fall back to")
    cache, logs = tmp_path / "kernels.json", tmp_path / "logs"
    cache.write_text(Path(os.environ[CACHE_VARIABLE]).read_text())  # this machine's verdicts: no check again
    code, first = _start(cache, logs, "SIGTERM")
    assert code == -15
    code, after_stop = _start(cache, logs, "none")
    assert code == 0 and after_stop == first  # a stop is nobody's fault: the same path
    code, _ = _start(cache, logs, "SIGSEGV")
    assert code == -11
    code, after_crash = _start(cache, logs, "none")
    assert code == 0 and after_crash != first  # the machine's fault: that path is dropped, another is used
    (entry,) = json.loads(cache.read_text()).values()
    assert entry["dropped"][first].startswith("the app died on its first batch")


def test_a_check_that_could_not_run_at_all_is_not_kept(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """Every path failing at once (the check's models could not be written: a full disk) says nothing about the
    kernels: it is used for this start and checked again at the next."""
    paths = tuple(available_paths("CPU : AVX2 = 1 | REPACK = 1 |"))
    checks: list[int] = []

    def nothing_runs(paths_, folder, threads):  # type: ignore[no-untyped-def]
        checks.append(1)
        return {p.key: PathVerdict(p.key, False, "the check failed (OSError: No space left on device)") for p in paths_}

    for _ in range(2):
        verdicts, _ = verdicts_for(KernelCache(tmp_path / "k.json"), "key", "b", "c", paths, tmp_path, 2, nothing_runs)
        assert not any(v.usable for v in verdicts.values())
    assert len(checks) == 2


def test_the_gui_threads_questions_never_wait_for_a_check_under_way(kernel_path) -> None:  # type: ignore[no-untyped-def]
    """The first check runs for seconds under the module's lock (on the inference thread); Settings asking for the
    verdicts and a finished reply's speed must not freeze the window meanwhile."""
    import threading

    from fara_desktop.machine import kernels

    holding, release = threading.Event(), threading.Event()

    def check_under_way() -> None:
        with kernels._lock:
            holding.set()
            release.wait(30)

    other = threading.Thread(target=check_under_way)
    other.start()
    try:
        assert holding.wait(10)
        assert kernels.known_verdicts() == {}  # at once: nothing known yet, as far as the dialog can tell
        assert kernels.reply_speed_seen("tiny", "plain", 1e6, 500) is False
    finally:
        release.set()
        other.join(10)
    assert kernels.known_verdicts() == kernel_path.verdicts


def test_once_the_process_is_ending_no_check_child_starts_and_no_verdict_is_given(tmp_path):
    """A stop while ``serve`` checked its kernels: the process's last sweep ended the check's child, the check took
    that for a path that died, started the next path's child (which outlived the process, printing a traceback) and
    could keep a wrong verdict. In a process of its own (the sweep ends every child of the process it runs in)."""
    import subprocess
    import sys

    code = (
        "import sys, psutil\n"
        "from fara_desktop.system.process_end import end_child_processes\n"
        "from fara_desktop.machine.kernel_check import KernelCheckStoppedError, check_paths\n"
        "from fara_desktop.machine.kernel_paths import DEFAULT, PLAIN\n"
        "end_child_processes(0.1)\n"
        "try:\n"
        "    check_paths([DEFAULT, PLAIN], __import__('pathlib').Path(sys.argv[1]), 1)\n"
        "except KernelCheckStoppedError:\n"
        "    print('stopped', len(psutil.Process().children()))\n"
    )
    done = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True, timeout=120)
    assert done.stdout.strip() == "stopped 0", done.stderr[-2000:]
