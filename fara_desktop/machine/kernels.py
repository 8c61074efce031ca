"""This process's kernel path: proven once per (llama.cpp build, CPU) in child processes, chosen by measured speed
per model-size class, applied before llama.cpp loads anything here.

``ensure_kernel_path`` is called before every model load (the chat model, the embedder, the benchmark, the test
suite's own loads). The first call in a process reads the record (``KernelCache``), runs the check where the build
or the CPU is new (seconds: ``kernel_check``), takes note of a path that killed the app on its first batch last
time, refuses AMX to the process where llama.cpp's default path failed and AMX can be refused, and applies the
choice. Later calls only switch extra buffers on or off for the next load (per model-size class, as measured).

``first_batch`` surrounds the first multi-token decode on a path in use: a process that dies there by a fatal
signal leaves a record that drops the path at the next start (the machine's fault; the model is not blamed).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from fara_desktop.files.atomic import write_text_atomically
from fara_desktop.files.fatal_log import died_by_fatal_signal, fatal_log_in_use, process_alive
from fara_desktop.files.paths import app_paths
from fara_desktop.machine.amx_refusal import amx_refused, refuse_amx
from fara_desktop.machine.kernel_check import (
    KernelCache,
    KernelChoice,
    Measurement,
    PathSpeed,
    PathVerdict,
    build_identity,
    check_paths,
    choose_path,
    cpu_identity,
    default_check_folder,
    identity_key,
)
from fara_desktop.machine.kernel_paths import DEFAULT, NO_AMX, KernelPath, available_paths, use_path
from fara_desktop.machine.llama_build import load_ggml_cpu_library

log = logging.getLogger(__name__)

CACHE_VARIABLE = "FARA_KERNEL_CACHE"  # where the record lives, when not in the app's cache folder (the test suite)
FIRST_BATCH_FILE = "kernel-first-batch.json"


@dataclass
class _Process:
    """What this process knows: the machine's record, its identity and the paths here."""

    cache: KernelCache
    key: str
    system_info: str
    paths: tuple[KernelPath, ...]
    verdicts: dict[str, PathVerdict]
    checked_now: bool


_lock = threading.RLock()
_state: list[_Process] = []
_settings: dict[str, str | None] = {"pinned": None, "cache_file": None}


def configure_kernels(cache_file: Path | None = None, pinned: str | None = None) -> None:
    """Where the record lives and the path the user pinned in Settings (None: chosen here)."""
    with _lock:
        if cache_file is not None:
            _settings["cache_file"] = str(cache_file)
        _settings["pinned"] = pinned


def kernel_cache_file() -> Path:
    configured = os.environ.get(CACHE_VARIABLE) or _settings["cache_file"]
    return Path(configured) if configured else app_paths().cache / "kernels.json"


def ensure_kernel_path(size_class: str | None = None, threads: int = 2) -> KernelChoice:
    """The path for the next load (checked and applied; see the module's docstring). Never raises: where nothing
    can be known, llama.cpp's own choice stands."""
    with _lock:
        try:
            process = _process(threads)
        except Exception:  # no llama.cpp, a broken cache folder: never a reason not to load
            log.exception("The kernel check could not run; llama.cpp chooses its own kernels")
            return KernelChoice(DEFAULT, "not checked (the check could not run)", {}, {})
        speeds = process.cache.speeds(process.key, size_class) if size_class else {}
        choice = choose_path(
            process.paths,
            process.verdicts,
            process.cache.dropped(process.key),
            speeds,
            process.system_info,
            _settings["pinned"],
        )
        effective = use_path(choice.path)
        if effective is not choice.path:
            choice = KernelChoice(
                effective,
                f"{choice.reason} (AMX stays refused until the app restarts)",
                choice.verdicts,
                choice.speeds,
                choice.pinned,
                choice.summary,
            )
        return choice


def prepare_llama_load(size_class: str | None = None, threads: int = 2) -> KernelChoice:
    """Before llama.cpp loads a model in this process: its CPU library registered and the kernel path applied."""
    load_ggml_cpu_library()
    return ensure_kernel_path(size_class, threads)


def _process(threads: int) -> _Process:
    if _state:
        return _state[0]
    import llama_cpp

    load_ggml_cpu_library()
    system_info = llama_cpp.llama_print_system_info().decode(errors="replace")
    paths = available_paths(system_info)
    build, cpu = build_identity(system_info), cpu_identity()
    key = identity_key(build, cpu)
    file = kernel_cache_file()
    cache = KernelCache(file)
    _collect_first_batch_death(cache, key, file.parent)
    verdicts, checked_now = verdicts_for(cache, key, build, cpu, paths, default_check_folder(file.parent), threads)
    default_ok = verdicts.get(DEFAULT.key, PathVerdict(DEFAULT.key, False)).usable
    if (not default_ok or DEFAULT.key in cache.dropped(key)) and NO_AMX in paths:
        # Before the first load: ggml lists its AMX buffers once per process, and a later load with extra
        # buffers must never find them there.
        refuse_amx()
    _state.append(_Process(cache, key, system_info, paths, verdicts, checked_now))
    return _state[0]


def paths_to_measure(size_class: str) -> list[KernelPath]:
    """The usable paths whose speeds are not known for ``size_class`` here (or were measured while the machine
    was busy); empty when there is nothing to choose between."""
    usable = usable_paths()
    with _lock:
        if not _state or len(usable) < 2:
            return []
        process = _state[0]
        known = process.cache.speeds(process.key, size_class)
        if all(p.key in known for p in usable) and not process.cache.speeds_provisional(process.key, size_class):
            return []
        return usable


DISPUTE_RATIO = 1.5  # replies this much faster than the measurement said: it was taken while the machine was busy
DISPUTES_NEEDED = 2
DISPUTE_MIN_TOKENS = 32
_disputes: dict[str, int] = {}


def reply_speed_seen(size_class: str, path_key: str, tok_per_s: float, tokens: int) -> bool:
    """A reply's generation speed on ``path_key``: True when replies ran clearly faster than the measurement of
    that path said, twice in a row (the measurement is then provisional: measured again)."""
    if not _lock.acquire(blocking=False):  # called on the GUI thread: never waits for a check under way
        return False
    try:
        return _reply_speed_seen(size_class, path_key, tok_per_s, tokens)
    finally:
        _lock.release()


def _reply_speed_seen(size_class: str, path_key: str, tok_per_s: float, tokens: int) -> bool:
    if not _state or tokens < DISPUTE_MIN_TOKENS:
        return False
    process = _state[0]
    measured = process.cache.speeds(process.key, size_class).get(path_key)
    if measured is None:
        return False
    count = _disputes.get(size_class, 0) + 1 if tok_per_s > DISPUTE_RATIO * measured.reply else 0
    _disputes[size_class] = count
    if count < DISPUTES_NEEDED:
        return False
    _disputes[size_class] = 0
    process.cache.dispute_speeds(process.key, size_class)
    return True


def keep_speeds(size_class: str, measurement: Measurement) -> KernelChoice | None:
    """Keep a measurement for ``size_class``; the choice it makes for the next load of that size."""
    with _lock:
        if not _state or not measurement.speeds:
            return None
        process = _state[0]
        process.cache.set_speeds(process.key, size_class, measurement.speeds, measurement.busy)
        return choose_path(
            process.paths,
            process.verdicts,
            process.cache.dropped(process.key),
            measurement.speeds,
            process.system_info,
            _settings["pinned"],
        )


def usable_paths() -> list[KernelPath]:
    """The paths this process may load on: passed the check, not dropped, and not AMX once it is refused."""
    with _lock:
        if not _state:
            return []
        process = _state[0]
        dropped = process.cache.dropped(process.key)
        return [
            p
            for p in process.paths
            if process.verdicts.get(p.key, PathVerdict(p.key, False)).usable
            and p.key not in dropped
            and not (p is DEFAULT and amx_refused())
        ]


def choice_with(speeds: dict[str, PathSpeed]) -> KernelChoice | None:
    """What this process would choose with these speeds (the pin aside)."""
    with _lock:
        if not _state:
            return None
        process = _state[0]
        dropped = process.cache.dropped(process.key)
        return choose_path(process.paths, process.verdicts, dropped, speeds, process.system_info)


def known_verdicts() -> dict[str, PathVerdict]:
    """Each path's verdict here, once this process has checked or read them (empty before its first load)."""
    if not _lock.acquire(blocking=False):  # the check runs now (seconds): the GUI thread never waits for it
        return {}
    try:
        return dict(_state[0].verdicts) if _state else {}
    finally:
        _lock.release()


def verdicts_for(
    cache: KernelCache,
    key: str,
    build: str,
    cpu: str,
    paths: tuple[KernelPath, ...],
    folder: Path,
    threads: int,
    check: Callable[[Sequence[KernelPath], Path, int], dict[str, PathVerdict]] = check_paths,
) -> tuple[dict[str, PathVerdict], bool]:
    """The verdicts kept for (build, CPU) ``key``, or checked now (True) when there are none: a new build, a new
    CPU, a new set of paths."""
    verdicts = cache.verdicts(key)
    if verdicts is not None and set(verdicts) == {p.key for p in paths}:
        return verdicts, False
    if len(paths) == 1:
        verdicts = {paths[0].key: PathVerdict(paths[0].key, True, "the only path of this build")}
    else:
        started = time.perf_counter()
        verdicts = check(paths, folder, threads)
        usable = {k: v.usable for k, v in verdicts.items()}
        log.info("Kernel check: %s in %.1f s", usable, time.perf_counter() - started)
        if not any(usable.values()):
            # Nothing passed, not even the plain kernels: the check itself could not run (a full disk for its
            # models, no way to start a process). Used now, never kept: the next start checks again.
            return verdicts, True
    cache.set_verdicts(key, verdicts, build, cpu)
    return verdicts, True


# ---------------------------------------------------------------- the first batch on a path


def first_batch_needed(path: KernelPath) -> bool:
    """Whether no process has yet decoded a batch on ``path`` here (its first is then recorded)."""
    if not _state:
        return False
    proven = _state[0].cache.proven(_state[0].key)
    return path.key not in proven


@contextlib.contextmanager
def first_batch(path: KernelPath) -> Iterator[None]:
    """Surround the first multi-token decode on ``path``: recorded on disk before, removed and the path marked
    proven after; a process that dies in between leaves the record (see ``_collect_first_batch_death``)."""
    if not _state:
        yield
        return
    process = _state[0]
    record = kernel_cache_file().parent / FIRST_BATCH_FILE
    entry = {
        "key": process.key,
        "path": path.key,
        "pid": os.getpid(),
        "fatal_log": fatal_log_in_use(),
        "when": time.time(),
    }
    try:
        record.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        write_text_atomically(record, json.dumps(entry))
    except OSError as exc:
        log.warning("Could not record the first batch on %s: %s", path.key, exc)
    try:
        yield
    finally:
        with contextlib.suppress(OSError):
            record.unlink()
    process.cache.set_proven(process.key, path.key)


def _collect_first_batch_death(cache: KernelCache, key: str, folder: Path) -> None:
    record = folder / FIRST_BATCH_FILE
    try:
        entry = json.loads(record.read_text(encoding="utf-8")[:100_000])
    except FileNotFoundError:
        return
    except (OSError, ValueError, RecursionError):
        entry = None
    if isinstance(entry, dict) and isinstance(entry.get("pid"), int) and entry["pid"] != os.getpid():
        if process_alive(entry["pid"]):
            return  # another process of ours (``serve`` beside the window) is in its first batch right now
        path, fatal = entry.get("path"), entry.get("fatal_log")
        crashed = died_by_fatal_signal(fatal if isinstance(fatal, str) else "")
        if entry.get("key") == key and isinstance(path, str) and crashed:
            day = time.strftime("%Y-%m-%d %H:%M", time.localtime(float(entry.get("when") or 0)))
            cache.drop(key, path, f"the app died on its first batch on this path ({day})")
            log.warning("Kernel path %s killed the app on its first batch: it is not used again here", path)
    with contextlib.suppress(OSError):
        record.unlink()
