"""Which kernel paths are correct on this machine, proven in child processes, and which is fastest, measured.

For one (llama.cpp build, CPU) the check runs each path (``kernel_paths``) in a child process of its own on the
check models (``kernel_probe``): a child that dies by a signal, hangs, returns a NaN or an infinity, or logits
away from the plain path's beyond ``TOLERANCE`` marks its path unusable here. Whatever kills a child never
reaches the app. The verdicts are kept (``KernelCache``) until the build or the CPU changes; a path that killed
the app on its first batch anyway is dropped for good (``drop``).

Speed is measured on the user's model, one child per path and sample, the paths interleaved over rounds, the
median kept per model-size class; a round taken while other programs used the processor is not kept for ever.
"""

from __future__ import annotations

import functools
import hashlib
import logging
import math
import multiprocessing
import platform
import signal
import statistics
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from fara_desktop.files.atomic import read_cache_file, save_cache_file
from fara_desktop.machine.busy import BUSY_CORES, OtherProgramsMeter
from fara_desktop.machine.kernel_paths import BY_KEY, DEFAULT, NO_AMX, PLAIN, KernelPath, describe
from fara_desktop.machine.kernel_probe import ProbeRequest, child_main
from fara_desktop.system.process_end import process_ending, release_child
from fara_desktop.vocabulary.errors import FaraError

log = logging.getLogger(__name__)

TOLERANCE = 0.05  # relative RMS difference of a path's logits from the plain path's
CHECK_SECONDS = 180.0  # a child that has not answered by then hangs: its path is unusable
MEASURE_SECONDS = 600.0
# What a turn of the chat costs, to weigh prompt against reply speed: a message and its context read, a reply
# written. The two phases can disagree (at 1.7B on a Xeon: plain kernels read prompts 1.37x faster, repacked ones
# write 1.16x faster), so the choice is the path that makes such a turn shortest.
SAME_SPEED = 0.97  # a path within 3 % of the fastest is as fast (the machines drift more than that)
TURN_PROMPT_TOKENS = 512
TURN_REPLY_TOKENS = 256
MAX_CACHE_BYTES = 1 << 20


@dataclass(frozen=True)
class PathVerdict:
    """A path's result in the check: usable here, or why not."""

    key: str
    usable: bool
    reason: str = ""
    difference: float = 0.0  # relative RMS difference from the plain path's logits

    def as_json(self) -> dict[str, Any]:
        return {"usable": self.usable, "reason": self.reason, "difference": round(self.difference, 6)}


@dataclass(frozen=True)
class PathSpeed:
    """A path's median prompt and reply speed (tok/s) for one model-size class."""

    prompt: float
    reply: float

    @property
    def turn_seconds(self) -> float:
        return TURN_PROMPT_TOKENS / self.prompt + TURN_REPLY_TOKENS / self.reply


# ---------------------------------------------------------------- who this machine and build are


def build_identity(system_info: str) -> str:
    """llama-cpp-python's version, its libllama file (size and time: a rebuild changes them) and what the build
    says it uses."""
    import llama_cpp

    from fara_desktop.machine.llama_internals import libllama

    lib = Path(getattr(libllama(), "_name", "") or "libllama")
    try:
        stat = lib.stat()
        file = f"{lib}|{stat.st_size}|{stat.st_mtime_ns}"
    except OSError:
        file = str(lib)
    return f"{llama_cpp.__version__}|{file}|{system_info}"


def cpu_identity() -> str:
    """The processor's model and its flags (a VM moved to another host changes them)."""
    name, flags = platform.processor(), ""
    try:
        for line in Path("/proc/cpuinfo").read_text(errors="replace").splitlines():
            key, _, value = line.partition(":")
            if key.strip() == "model name" and not name:
                name = value.strip()
            elif key.strip() in ("flags", "Features") and not flags:
                flags = " ".join(sorted(value.split()))
    except OSError:
        pass
    return f"{platform.machine()}|{name}|{flags}"


def identity_key(build: str, cpu: str) -> str:
    return hashlib.sha256(f"{build}\n{cpu}".encode()).hexdigest()[:24]


# ---------------------------------------------------------------- the child processes


def run_child(
    request: Any,
    timeout: float,
    should_stop: Callable[[], bool] | None = None,
    target: Callable[[Connection, Any], None] = child_main,
    name: str = "fara-kernel-check",
) -> tuple[str, Any]:
    """``target(connection, request)`` in a spawned child of its own (a kernel check's by default): its answer
    ``("done", value)`` or ``("failed", text)``, else ``("died", signal name)``, ``("hung", seconds)`` or
    ``("stopped", "")`` (``should_stop`` said so, or the process is ending: the child is killed at once)."""
    if process_ending():  # a child started now would outlive the process, and die of its end
        return "stopped", ""
    context = multiprocessing.get_context("spawn")  # never fork a process that holds a model and threads
    parent_end, child_end = context.Pipe(duplex=False)
    process = context.Process(target=target, args=(child_end, request), name=name, daemon=True)
    process.start()
    child_end.close()
    deadline = time.monotonic() + timeout
    kind: str = "hung"
    value: Any = timeout
    try:
        while time.monotonic() < deadline:
            if (should_stop is not None and should_stop()) or process_ending():
                kind, value = "stopped", ""
                break
            if parent_end.poll(min(0.2, max(0.0, deadline - time.monotonic()))):
                try:
                    kind, value = parent_end.recv()
                except (EOFError, OSError):
                    kind, value = "died", ""
                break
    finally:
        parent_end.close()
        if kind in ("hung", "stopped"):
            process.kill()
        process.join(5.0)
        if process.is_alive():
            process.kill()
        process.join()
        code = process.exitcode
        release_child(process)
    if kind in ("hung", "stopped"):
        return kind, value
    if process_ending():  # ended by the process's end (``end_child_processes``), not by the kernels it ran
        return "stopped", ""
    if kind == "died" or (code is not None and code < 0):
        return "died", _signal_name(-code if code is not None and code < 0 else 0)
    return str(kind), value


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}" if number else "no answer"


def check_paths(paths: Sequence[KernelPath], folder: Path, threads: int) -> dict[str, PathVerdict]:
    """Run every path's check child; compare with the plain path's logits."""
    answers: dict[str, tuple[str, Any]] = {}
    for path in paths:
        request = ProbeRequest("check", path.key, path.extra_buffers, path.refuse_amx, threads, folder=str(folder))
        answers[path.key] = run_child(request, CHECK_SECONDS)
        log.info("Kernel check of %s: %s", path.key, answers[path.key][0])
        if answers[path.key][0] == "stopped":  # the process is ending: no verdict, none kept
            raise KernelCheckStoppedError("the kernel check was stopped: the app is quitting")
    return verdicts_from(answers)


class KernelCheckStoppedError(FaraError):
    """The kernel check did not finish (the process is ending); it gives no verdict."""


def verdicts_from(answers: dict[str, tuple[str, Any]]) -> dict[str, PathVerdict]:
    """The verdicts from what each path's child answered (the plain path, or llama.cpp's default in a build that
    has only that one, is the reference)."""
    logits: dict[str, dict[str, list[list[float]]]] = {}
    verdicts: dict[str, PathVerdict] = {}
    for key, (kind, value) in answers.items():
        if kind == "died":
            verdicts[key] = PathVerdict(key, False, f"the check died by {value}")
        elif kind == "hung":
            verdicts[key] = PathVerdict(key, False, f"the check did not finish in {value:.0f} s")
        elif kind != "done" or not isinstance(value, dict) or not isinstance(value.get("logits"), dict):
            verdicts[key] = PathVerdict(key, False, f"the check failed ({str(value)[:200]})")
        elif not _all_finite(value["logits"]):
            verdicts[key] = PathVerdict(key, False, "the check's logits hold NaN or infinity")
        else:
            logits[key] = value["logits"]
    reference_key = PLAIN.key if PLAIN.key in answers else DEFAULT.key
    reference = logits.get(reference_key)
    for key, rows in logits.items():
        if reference is None:
            verdicts[key] = PathVerdict(key, True, "unchecked against the plain path (it failed)")
            continue
        difference = _difference(rows, reference)
        if difference > TOLERANCE:
            verdicts[key] = PathVerdict(
                key, False, f"the check's logits differ by {difference:.0%} from the plain kernels'", difference
            )
        else:
            verdicts[key] = PathVerdict(key, True, "", difference)
    return verdicts


def _all_finite(logits: dict[str, list[list[float]]]) -> bool:
    return all(math.isfinite(v) for rows in logits.values() for row in rows for v in row)


def _difference(rows: dict[str, list[list[float]]], reference: dict[str, list[list[float]]]) -> float:
    """The largest, over the check models, relative RMS difference of the logits (1.0: nothing comparable)."""
    worst = 0.0
    for label, expected in reference.items():
        got = rows.get(label)
        if got is None or len(got) != len(expected):
            return 1.0
        flat_got = [v for row in got for v in row]
        flat_expected = [v for row in expected for v in row]
        if len(flat_got) != len(flat_expected) or not flat_expected:
            return 1.0
        error = math.sqrt(sum((a - b) ** 2 for a, b in zip(flat_got, flat_expected, strict=True)) / len(flat_got))
        scale = math.sqrt(sum(b * b for b in flat_expected) / len(flat_expected)) or 1.0
        worst = max(worst, error / scale)
    return worst


@dataclass(frozen=True)
class Measurement:
    """Each path's median speeds, and whether they had to be taken while the machine was busy."""

    speeds: dict[str, PathSpeed]
    busy: bool
    samples_discarded: int


def measure_paths(
    paths: Sequence[KernelPath],
    model: Path,
    threads: int,
    rounds: int = 3,
    should_stop: Callable[[], bool] | None = None,
    should_yield: Callable[[], bool] | None = None,
    prompt_tokens: int = 128,
    reply_tokens: int = 32,
    busy_cores: Callable[[Callable[[], tuple[str, Any]]], tuple[tuple[str, Any], float]] | None = None,
) -> Measurement:
    """Each path's median prompt and reply speed on ``model``: one child per path and round, interleaved (the
    machine's speed drifts within minutes; interleaving spreads the drift over every path). A sample taken while
    other programs (the app's own replies included) used the processor is taken again, up to twice per round;
    after that it counts, and the measurement is marked busy (kept until the next chance to measure). While
    ``should_yield()`` (the user waits on the engine) no child runs: one running is stopped, its sample taken
    again afterwards."""
    timed = busy_cores or other_programs_busy
    samples: dict[str, list[tuple[float, float]]] = {p.key: [] for p in paths}
    busy, discarded = False, 0
    for _ in range(rounds):
        for path in paths:
            request = ProbeRequest(
                "measure",
                path.key,
                path.extra_buffers,
                path.refuse_amx,
                threads,
                model=str(model),
                prompt_tokens=prompt_tokens,
                reply_tokens=reply_tokens,
            )
            attempt = 0
            while attempt < 3:
                if not _wait_while(should_yield, should_stop):
                    return Measurement(_medians(samples), busy, discarded)
                interrupt = functools.partial(_either, should_stop, should_yield)
                (kind, value), others = timed(functools.partial(run_child, request, MEASURE_SECONDS, interrupt))
                if kind == "stopped" and should_stop is not None and should_stop():
                    return Measurement(_medians(samples), busy, discarded)
                if kind == "stopped":  # the user asked something: this sample is taken again afterwards
                    continue
                attempt += 1
                if kind != "done" or not isinstance(value, dict):
                    log.warning("Measuring kernel path %s failed: %s %s", path.key, kind, str(value)[:200])
                    break
                if others > BUSY_CORES and attempt < 3:
                    discarded += 1
                    continue
                busy = busy or others > BUSY_CORES
                samples[path.key].append((float(value["prompt"]), float(value["reply"])))
                break
    return Measurement(_medians(samples), busy, discarded)


def _either(first: Callable[[], bool] | None, second: Callable[[], bool] | None) -> bool:
    return bool((first is not None and first()) or (second is not None and second()))


def _wait_while(busy: Callable[[], bool] | None, should_stop: Callable[[], bool] | None) -> bool:
    """Wait while ``busy()`` (the user waits on the engine); False when stopped meanwhile."""
    pause = threading.Event()
    while busy is not None and busy():
        if should_stop is not None and should_stop():
            return False
        pause.wait(0.2)
    return not (should_stop is not None and should_stop())


def _medians(samples: dict[str, list[tuple[float, float]]]) -> dict[str, PathSpeed]:
    return {
        key: PathSpeed(statistics.median(s[0] for s in got), statistics.median(s[1] for s in got))
        for key, got in samples.items()
        if got
    }


def other_programs_busy(run: Callable[[], tuple[str, Any]]) -> tuple[tuple[str, Any], float]:
    """``run()`` and the cores other programs kept busy meanwhile (the measuring child's own time, which it
    reports as ``cpu_seconds``, is ours)."""
    meter = OtherProgramsMeter()
    answer = run()
    own = answer[1].get("cpu_seconds", 0.0) if answer[0] == "done" and isinstance(answer[1], dict) else 0.0
    return answer, meter.cores(float(own))


# ---------------------------------------------------------------- what is kept


class KernelCache:
    """``kernels.json`` in the cache folder: per (build, CPU), each path's verdict, the paths dropped after they
    killed the app, and the measured speeds per model-size class."""

    def __init__(self, file: Path) -> None:
        self.file = file
        self._data: dict[str, Any] = read_cache_file(file, MAX_CACHE_BYTES, "kernel record")

    def _entry(self, key: str) -> dict[str, Any]:
        entry = self._data.get(key)
        if not isinstance(entry, dict):
            entry = self._data[key] = {}
        return entry

    def verdicts(self, key: str) -> dict[str, PathVerdict] | None:
        paths = self._entry(key).get("paths")
        if not isinstance(paths, dict) or not paths:
            return None
        verdicts = {}
        for name, value in paths.items():
            if name in BY_KEY and isinstance(value, dict) and isinstance(value.get("usable"), bool):
                reason = value.get("reason")
                difference = value.get("difference")
                verdicts[name] = PathVerdict(
                    name,
                    value["usable"],
                    reason if isinstance(reason, str) else "",
                    float(difference) if isinstance(difference, (int, float)) else 0.0,
                )
        return verdicts or None

    def set_verdicts(self, key: str, verdicts: dict[str, PathVerdict], build: str, cpu: str) -> None:
        entry = self._entry(key)
        entry.update(
            build=build[:2000],
            cpu=cpu[:4000],
            checked_at=time.strftime("%Y-%m-%dT%H:%M:%S"),
            paths={k: v.as_json() for k, v in verdicts.items()},
        )
        self.save()

    def dropped(self, key: str) -> dict[str, str]:
        value = self._entry(key).get("dropped")
        return {k: v for k, v in value.items() if isinstance(v, str)} if isinstance(value, dict) else {}

    def drop(self, key: str, path_key: str, reason: str) -> None:
        entry = self._entry(key)
        if not isinstance(entry.get("dropped"), dict):
            entry["dropped"] = {}
        entry["dropped"][path_key] = reason[:500]
        self.save()

    def proven(self, key: str) -> set[str]:
        """The paths a process here has decoded a first batch on and lived."""
        value = self._entry(key).get("proven")
        return {k for k in value if isinstance(k, str)} if isinstance(value, list) else set()

    def set_proven(self, key: str, path_key: str) -> None:
        proven = self.proven(key)
        if path_key not in proven:
            self._entry(key)["proven"] = sorted(proven | {path_key})
            self.save()

    def speeds(self, key: str, size_class: str) -> dict[str, PathSpeed]:
        value = self._entry(key).get("speeds")
        entry = value.get(size_class) if isinstance(value, dict) else None
        tok = entry.get("tok_per_s") if isinstance(entry, dict) else None
        if not isinstance(tok, dict):
            return {}
        speeds = {}
        for name, pair in tok.items():
            if name in BY_KEY and isinstance(pair, dict):
                prompt, reply = pair.get("prompt"), pair.get("reply")
                if isinstance(prompt, (int, float)) and isinstance(reply, (int, float)) and prompt > 0 and reply > 0:
                    speeds[name] = PathSpeed(float(prompt), float(reply))
        return speeds

    def speeds_provisional(self, key: str, size_class: str) -> bool:
        """Measured while the machine was busy: used, and measured again at the next chance."""
        value = self._entry(key).get("speeds")
        entry = value.get(size_class) if isinstance(value, dict) else None
        return bool(entry.get("busy")) if isinstance(entry, dict) else False

    def dispute_speeds(self, key: str, size_class: str) -> None:
        """The speeds seen in use disagree with the measurement: measured again at the next chance."""
        value = self._entry(key).get("speeds")
        entry = value.get(size_class) if isinstance(value, dict) else None
        if isinstance(entry, dict):
            entry["busy"] = True
            self.save()

    def set_speeds(self, key: str, size_class: str, speeds: dict[str, PathSpeed], busy: bool) -> None:
        entry = self._entry(key)
        if not isinstance(entry.get("speeds"), dict):
            entry["speeds"] = {}
        entry["speeds"][size_class] = {
            "tok_per_s": {k: {"prompt": round(v.prompt, 2), "reply": round(v.reply, 2)} for k, v in speeds.items()},
            "busy": busy,
            "measured_at": time.strftime("%Y-%m-%dT%H:%M:%S"),
        }
        self.save()

    def save(self) -> None:
        save_cache_file(self.file, self._data)


# ---------------------------------------------------------------- the choice


@dataclass(frozen=True)
class KernelChoice:
    """The path to use and why, in words the hardware panel shows."""

    path: KernelPath
    reason: str
    verdicts: dict[str, PathVerdict]
    speeds: dict[str, PathSpeed]
    pinned: bool = False
    summary: str = ""  # a few words for the panel's line ("plain kernels, no repacking · measured fastest")

    def usable(self) -> list[str]:
        return [k for k, v in self.verdicts.items() if v.usable]


def choose_path(
    paths: Sequence[KernelPath],
    verdicts: dict[str, PathVerdict],
    dropped: dict[str, str],
    speeds: dict[str, PathSpeed],
    system_info: str,
    pinned: str | None = None,
) -> KernelChoice:
    """The fastest usable path by measured speed; before any measurement, llama.cpp's default when it is usable,
    else the nearest to it; a pinned path when it is usable."""
    usable = [p for p in paths if verdicts.get(p.key, PathVerdict(p.key, False)).usable and p.key not in dropped]
    failed = {k: v.reason for k, v in verdicts.items() if not v.usable}
    failed.update(dropped)
    why_not_default = _why_not_default(failed, system_info)
    amx_note = " · AMX crashes here" if why_not_default.startswith("AMX") else ""
    if pinned is not None and any(p.key == pinned for p in usable):
        path = BY_KEY[pinned]
        title = describe(path, system_info)
        return KernelChoice(path, f"{title}: chosen in Settings", verdicts, speeds, True, f"{title} · yours")
    if not usable:
        return KernelChoice(
            PLAIN,
            "no kernel path passed the check on this machine: the plain kernels",
            verdicts,
            speeds,
            summary=f"{PLAIN.title} · none passed the check",
        )
    measured = [p for p in usable if p.key in speeds]
    if len(measured) >= 2 or (measured and len(usable) == 1):
        best = min(measured, key=lambda p: speeds[p.key].turn_seconds)
        preferred = measured[0]  # the nearest to llama.cpp's default: kept unless clearly slower
        verdict = "measured fastest here"
        if preferred is not best and speeds[preferred.key].turn_seconds <= speeds[best.key].turn_seconds / SAME_SPEED:
            best = preferred
            verdict = "measured as fast as the fastest here (a chat turn within 3 %)"
        default_speed = speeds.get(DEFAULT.key)
        comparison = ""
        if default_speed is not None and best is not DEFAULT:
            comparison = (
                f" — prompts {speeds[best.key].prompt / default_speed.prompt:.2f}×, replies "
                f"{speeds[best.key].reply / default_speed.reply:.2f}× llama.cpp's default"
            )
        elif best is not DEFAULT and len(measured) >= 2:
            other = min((p for p in measured if p is not best), key=lambda p: speeds[p.key].turn_seconds)
            prompt_ratio = speeds[best.key].prompt / speeds[other.key].prompt
            reply_ratio = speeds[best.key].reply / speeds[other.key].reply
            comparison = f" — prompts {prompt_ratio:.2f}×, replies {reply_ratio:.2f}× {describe(other, system_info)}"
        title = describe(best, system_info)
        reason = f"{title}: {verdict}{comparison}"
        summary = f"{title} · measured{amx_note}"
        return KernelChoice(best, f"{why_not_default}{reason}", verdicts, speeds, summary=summary)
    path = usable[0]
    title = describe(path, system_info)
    return KernelChoice(path, f"{why_not_default}{title}", verdicts, speeds, summary=f"{title}{amx_note}")


def _why_not_default(failed: dict[str, str], system_info: str) -> str:
    reason = failed.get(DEFAULT.key)
    if reason is None:
        return ""
    if "AMX_INT8 = 1" in system_info and NO_AMX.key not in failed:
        return f"AMX kernels crash on this machine (a known llama.cpp fault; {reason}): "
    return f"llama.cpp's default kernels fail on this machine ({reason}): "


def default_check_folder(cache: Path) -> Path:
    return cache / "kernel-check"
