"""`fara-desktop serve`: the local API without a window, for scripts and servers.

The model is chosen and tuned as the window would (or given with --model), and its threads measured once per
machine and model size, as the window does (``app.model_loading``); the first line printed is the address it
listens on, so a script can read it; SIGTERM or Ctrl+C stops it cleanly (requests are cancelled, the model is
freed, exit status 0).
"""

from __future__ import annotations

import os
import queue
import signal
import sys
from collections.abc import Mapping
from dataclasses import replace
from functools import partial
from pathlib import Path
from types import FrameType

from fara_desktop.app.core import EngineCore
from fara_desktop.app.embedding import EmbedderService, embedding_model_in
from fara_desktop.app.jobs import Stage
from fara_desktop.app.model_loading import ModelLoading
from fara_desktop.engine.types import (
    CalibrationFailed,
    Event,
    ModelInfo,
    ModelLoaded,
    ModelLoadFailed,
    ThreadsCalibrated,
)
from fara_desktop.files.paths import AppPaths
from fara_desktop.files.regular import read_regular_text
from fara_desktop.machine.kernel_check import KernelChoice
from fara_desktop.serving.api_server import ApiServer
from fara_desktop.serving.local_api import LocalApi
from fara_desktop.serving.principals import checked_keys, split_keys
from fara_desktop.settings import load_settings
from fara_desktop.system.api_keys import LOCAL_API, ApiKeyStore
from fara_desktop.system.process_end import end_child_processes, exit_now
from fara_desktop.text.format import format_count
from fara_desktop.text.untrusted import printable
from fara_desktop.vocabulary.errors import FaraError

KEY_ENV = "FARA_API_KEY"
MAX_KEY_FILE_BYTES = 4096
# SIGTERM to exit: a service manager waits, then kills. What is not done in this time (a picture being encoded
# inside llama.cpp cannot be interrupted) is left to the process's end: the requests under way have been ended (a
# 503, or their connection closed where the process ends first), and nothing that must be kept is written by then.
QUIT_LIMIT_S = 1.2


def serve_key(paths: AppPaths, given: str | None, key_file: Path | None, env: Mapping[str, str]) -> str | None:
    """The keys clients must send, one per app and one per line (``serving.principals``: a key is never split at a
    space or a comma): from ``--api-key`` (one key, with a warning), a file (a key per line), ``FARA_API_KEY`` (a
    key per line), or the keychain (the window's local API keys). Raises ``FaraError`` when the file cannot be read
    or holds no key, or a key cannot be one (too short, not ASCII: the reason, never the key)."""
    if given:
        print(
            "fara-desktop serve: --api-key is visible to every user of this computer in the process list; "
            f"prefer --api-key-file or {KEY_ENV}.",
            file=sys.stderr,
        )
        keys = given.strip()
    elif key_file is not None:
        try:
            text = read_regular_text(key_file, MAX_KEY_FILE_BYTES)
        except (OSError, ValueError) as exc:
            raise FaraError(f"cannot read the API key file {key_file.name}: {exc}") from exc
        if not split_keys(text):
            raise FaraError(f"the API key file {key_file.name} holds no key (one key per line)")
        keys = "\n".join(split_keys(text))
    else:
        stored = env.get(KEY_ENV) or ApiKeyStore(paths.config).get(LOCAL_API)
        if not split_keys(stored):
            return None
        keys = "\n".join(split_keys(stored))
    checked_keys(keys)
    return keys


class StoppedBeforeServing(Exception):
    """SIGTERM or SIGINT arrived while ``serve`` was still planning or loading."""


def run_serve(
    paths: AppPaths,
    model: Path | None,
    host: str,
    port: int,
    api_key: str | None,
    key_file: Path | None = None,
    parallel: int | None = None,
    context: int | None = None,
    speculation: str | None = None,
) -> int:
    """Serve until SIGTERM or Ctrl+C; ``parallel``: the requests decoded together, ``context``: each one's context
    length, ``speculation``: "auto" or "off" (None: as Settings say)."""
    try:
        key = serve_key(paths, api_key, key_file, os.environ)
    except FaraError as exc:
        print(printable(f"fara-desktop serve: {exc}"), file=sys.stderr)
        return 1

    def stop_early(_signal: int, _frame: FrameType | None) -> None:
        raise StoppedBeforeServing

    # From the first moment: a stop while the model loads ends serve cleanly (the load stopped, the engine
    # closed), with no traceback, and is nobody's fault (the crash record is for fatal signals).
    signal.signal(signal.SIGTERM, stop_early)
    signal.signal(signal.SIGINT, stop_early)
    started: list[EngineCore] = []
    try:
        return _serve(paths, model, host, port, key, started, (parallel, context, speculation))
    except StoppedBeforeServing:
        print("fara-desktop serve: stopped before it served", file=sys.stderr)
        return end_serving(started)


def end_serving(started: list[EngineCore]) -> int:
    """Every job stopped within the quit's limit (the load or the requests, the engine's thread); a child process
    left is ended, and a thread still inside llama.cpp is not waited for: the process ends at once."""
    late = [name for core in started for name in core.close(QUIT_LIMIT_S)]
    end_child_processes(grace_s=0.3)
    if late:
        exit_now(0)
    return 0


def _serve(
    paths: AppPaths,
    model: Path | None,
    host: str,
    port: int,
    key: str | None,
    started: list[EngineCore],
    pinned: tuple[int | None, int | None, str | None],
) -> int:
    settings = load_settings(paths.config).settings
    parallel, context, speculation = pinned
    inference = replace(
        settings.inference,
        parallel=parallel if parallel is not None else settings.inference.parallel,
        n_ctx=context if context is not None else settings.inference.n_ctx,
        speculation=(speculation != "off") if speculation is not None else settings.inference.speculation,
    )
    settings = replace(settings, inference=inference.validated())
    loading = ModelLoading(paths)  # the window's loop: plan, load, then measure the threads once
    prepared = loading.prepare(
        model,
        [Path(f) for f in settings.extra_model_folders],
        partial(settings.inference.apply, serving=True),
        settings.projectors,
    )
    loading.use_plan(prepared)
    plan, decision = prepared.plan, prepared.decision
    if plan.model is None:
        print("fara-desktop serve: no model found; give one with --model PATH", file=sys.stderr)
        return 1
    if model is not None and Path(plan.model.path) != model:  # the file asked for stopped the app before
        print(printable(f"fara-desktop serve: {model.name} was not loaded: {plan.reason}"), file=sys.stderr)
        return 1
    if decision.refusal or prepared.file is None:
        why = decision.refusal or f"{plan.model.display_name} could not be prepared for loading"
        print(printable(f"fara-desktop serve: {why}"), file=sys.stderr)
        return 1
    # The embedding model the scan found serves /v1/embeddings; a failure to load it is the request's 500.
    core = EngineCore(paths, settings, embedding=EmbedderService(embedding_model_in(plan), strict=True))
    started.append(core)
    events: queue.Queue[Event] = queue.Queue()

    def kernels_measured(choice: KernelChoice) -> None:  # on the measuring thread
        print(printable(f"kernels measured: {choice.reason} (taken at the next start)"), flush=True)

    def on_event(event: Event) -> None:  # on the inference thread
        if isinstance(event, ThreadsCalibrated):
            loading.calibrated(event)
            print(f"{format_count(event.best, 'thread')} measured fastest for this model", flush=True)
        if isinstance(event, (ThreadsCalibrated, CalibrationFailed)):
            info_now = core.worker.loaded_model
            if info_now is not None:
                core.kernel_speeds.measure_after(info_now, kernels_measured)
        events.put(event)

    worker = core.start_engine(on_event)
    worker.load_model(prepared.file, decision.params, plan.model.display_name)
    loaded: ModelInfo | None = None
    while loaded is None:
        event = events.get()
        if isinstance(event, ModelLoadFailed):
            print(printable(f"fara-desktop serve: {event.message}"), file=sys.stderr)
            core.close()
            return 1
        if isinstance(event, ModelLoaded):
            loaded = event.info
    info = loaded
    candidates = loading.calibration_after(info, settings.inference.n_threads)
    if candidates is not None:  # measured while the first requests are answered: it gives way to them
        worker.calibrate_threads(candidates)
    else:
        core.kernel_speeds.measure_after(info, kernels_measured)
    api = LocalApi(
        worker,
        lambda: info,
        settings.sampling.params,
        key,
        allowed_origins=settings.local_api.allowed_origins,
        embedder=core.embedding.get,
        pictures=core.api_picture_files,
    )
    try:
        server = ApiServer(api, host, port)
    except FaraError as exc:
        print(printable(f"fara-desktop serve: {exc}"), file=sys.stderr)
        core.close()
        return 1
    core.jobs.service("the local API", Stage.INTAKE, lambda: server.stop(timeout=0))  # stopped first at the end

    def stop(_signal: int, _frame: FrameType | None) -> None:
        server.request_stop()  # the socket is closed once ``run`` has returned, never under it

    # Before the address is printed: a script that reads it and stops serve at once gets a clean exit (it got a
    # traceback, or death by the signal, when the handlers came after).
    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    print(server.address, flush=True)  # the first line: scripts read the address from it
    print(
        printable(
            f"serving {info.name} ({info.n_ctx:,}-token context, {format_count(info.n_threads, 'thread')}"
            + (f", {info.parallel} requests at once)" if info.parallel > 1 else ")")
        ),
        flush=True,
    )
    if info.kernel_reason:
        print(printable(f"kernels: {info.kernel_reason}"), flush=True)
    try:
        server.run()
    finally:
        server.stop(timeout=0)
        code = end_serving(started)
    return code
