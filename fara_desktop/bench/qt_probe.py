"""The Qt half of the benchmark, run in a child process as the real app runs: generation through the real
window (window → queue → worker → Qt signals → chat view) with the event loop's longest stall, and start-up
(window shown, model ready, RSS at both moments).

    python -m fara_desktop.bench.qt_probe app-path SPEC_JSON
    python -m fara_desktop.bench.qt_probe startup [--model GGUF]
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

from PySide6.QtCore import QEventLoop, QObject, QTimer

from fara_desktop.bench.runner import PROMPT_TEXT, Figure
from fara_desktop.engine.types import Finished, TokenText
from fara_desktop.files.paths import AppPaths
from fara_desktop.planning.params import LoadParams
from fara_desktop.settings import Settings
from fara_desktop.ui.after_paint import AfterPaint
from fara_desktop.ui.main_window import MainWindow
from fara_desktop.vocabulary.sampling import SamplingParams

TICK_MS = 5


class StallMonitor(QObject):
    """A 5 ms timer; the longest gap between two ticks beyond 5 ms is the longest stall of the event loop."""

    def __init__(self) -> None:
        super().__init__()
        self._timer = QTimer(self)
        self._timer.setInterval(TICK_MS)
        self._timer.timeout.connect(self._tick)
        self._last = 0.0
        self.max_stall_ms = 0.0

    def start(self) -> None:
        self.max_stall_ms = 0.0
        self._last = time.perf_counter()
        self._timer.start()

    def stop(self) -> float:
        self._timer.stop()
        return self.max_stall_ms

    def _tick(self) -> None:
        now = time.perf_counter()
        self.max_stall_ms = max(self.max_stall_ms, (now - self._last) * 1000 - TICK_MS)
        self._last = now


def _wait(signal: object, timeout_s: float = 600) -> None:
    loop = QEventLoop()
    signal.connect(loop.quit)  # type: ignore[attr-defined]
    QTimer.singleShot(int(timeout_s * 1000), loop.quit)
    loop.exec()


def _long_message(tokens: int) -> str:
    """About ``tokens`` tokens of prose (a token is about four characters of English)."""
    text = "Summarise this text. " + PROMPT_TEXT * (tokens * 4 // len(PROMPT_TEXT) + 1)
    return text[: tokens * 4]


def app_path(
    model: Path, params: LoadParams, paths: AppPaths, repeats: int, gen_tokens: int, long_prompt_tokens: int = 0
) -> dict[str, Any]:
    """Greedy generation of ``gen_tokens`` through window → queue → worker → Qt signals → chat view; the event
    loop watched while the model loads, while a long message is read, and while a reply streams."""
    import psutil

    sampling = SamplingParams(temperature=0.0, repeat_penalty=1.0, max_tokens=gen_tokens, ignore_eos=True)
    window = MainWindow(sampling=sampling, paths=paths, settings=Settings())
    window.show()
    settle = QTimer()  # let the first paint (fonts, style) finish: it is start-up, not model loading
    settle.setSingleShot(True)
    settle.start(300)
    _wait(settle.timeout)
    process = psutil.Process()
    rss_before = process.memory_info().rss
    monitor = StallMonitor()
    monitor.start()
    window.load_model(model, params)
    _wait(window.modelLoaded)
    stall_load = monitor.stop()
    rss_loaded = process.memory_info().rss
    stall_prompt = 0.0
    if long_prompt_tokens:
        window.new_chat()
        window.composer.setPlainText(_long_message(long_prompt_tokens))
        monitor.start()
        window.send_button.click()
        _wait(window.replyFinished)
        stall_prompt = monitor.stop()
    speeds = Figure()
    stalls = Figure()
    first: list[float] = []

    def on_event(event: object) -> None:
        if isinstance(event, TokenText) and not first:
            first.append(time.perf_counter())

    window.bridge.engine_event.connect(on_event)
    # The last run watches the event loop; the timer's own wake-ups would slow the measured runs.
    for run in range(repeats + 1):
        watch = run == repeats
        window.new_chat()
        first.clear()
        finished: list[Finished] = []
        window.replyFinished.connect(finished.append)
        window.composer.setPlainText("Write a long essay about the history of computing.")
        if watch:
            monitor.start()
        window.send_button.click()
        _wait(window.replyFinished)
        ended = time.perf_counter()
        window.replyFinished.disconnect(finished.append)
        if watch:
            stalls.runs.append(monitor.stop())
            continue
        tokens = finished[0].stats.completion_tokens if finished else 0
        speeds.runs.append((tokens - 1) / (ended - first[0]) if first and tokens > 1 else 0.0)
    window.close()
    return {
        "gen": speeds,
        "stall_load_ms": stall_load,
        "stall_prompt_ms": stall_prompt,
        "stall_stream_ms": max(stalls.runs, default=0.0),
        "rss_before_bytes": rss_before,
        "rss_loaded_bytes": rss_loaded,
    }


def app_path_main(spec_json: str) -> None:
    from fara_desktop.ui.application import create_application

    spec = json.loads(spec_json)
    create_application()
    home = Path(spec["home"])
    paths = AppPaths(home / "data", home / "config", home / "cache", home / "logs").ensure()
    result = app_path(
        Path(spec["model"]),
        LoadParams(**spec["params"]),
        paths,
        spec["repeats"],
        spec["gen_tokens"],
        spec.get("long_prompt_tokens", 0),
    )
    print(json.dumps({**result, "gen": result["gen"].runs}), flush=True)


def report_startup(window: MainWindow) -> None:
    """Print when the window was shown and the model ready (seconds since the process started), the RSS at both
    moments and the event loop's longest stall in between, then quit."""
    import psutil
    from PySide6.QtWidgets import QApplication

    process = psutil.Process()
    started = process.create_time()
    report: dict[str, float] = {}
    monitor = StallMonitor()
    monitor.setParent(window)

    def shown() -> None:
        report["window_shown_s"] = time.time() - started
        report["rss_no_model_bytes"] = process.memory_info().rss

    # stalls count once the user can see the window: after its first paint
    painted = AfterPaint(window, monitor.start, fallback_ms=None)

    def ready(_info: object) -> None:
        report["stall_startup_ms"] = monitor.stop()
        report["model_ready_s"] = time.time() - started
        report["rss_model_loaded_bytes"] = process.memory_info().rss
        print(json.dumps(report), flush=True)
        QApplication.quit()

    QTimer.singleShot(0, shown)  # runs on the first turn of the event loop, right after the window is shown
    window.modelLoaded.connect(ready)
    window.setProperty("benchFirstPaint", painted)  # keep the filter alive with the window


def startup_main(argv: list[str]) -> int:
    """Start the app as `fara-desktop [--model GGUF]` does, with the start-up report attached to its window."""
    from fara_desktop.cli.arguments import build_parser
    from fara_desktop.files.paths import app_paths
    from fara_desktop.system.logs import configure_logging
    from fara_desktop.ui.application import run_gui

    args = build_parser().parse_args(argv)
    log_file = configure_logging(app_paths().ensure().logs)
    return run_gui(args.model, log_file, on_window=report_startup)


if __name__ == "__main__":
    if sys.argv[1] == "app-path":
        app_path_main(sys.argv[2])
    else:
        raise SystemExit(startup_main(sys.argv[2:]))
