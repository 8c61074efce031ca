"""`fara-desktop smoke`: open the real window, ask one question, print the reply as JSON (a headless check)."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

from fara_desktop.files.paths import app_paths
from fara_desktop.models.packaged import DEFAULT_MODEL_HELP
from fara_desktop.settings import load_settings
from fara_desktop.text.untrusted import printable
from fara_desktop.ui.application import create_application, has_display

NO_MODEL_HELP = f"No model was found. {DEFAULT_MODEL_HELP} — or open any GGUF file with Model ▸ Open a model file."


def run_smoke(
    model: Path | None,
    prompt: str,
    max_tokens: int,
    timeout_s: float,
    screenshot: Path | None,
    remote: tuple[str, str, str | None] | None = None,
) -> int:
    """Ask ``prompt`` through the real window and print the reply, its speed and any notices as one JSON line.
    ``remote``: (server address, model id, API key) — ask that server's model through the same GUI path."""
    if not has_display():
        os.environ["QT_QPA_PLATFORM"] = "offscreen"
    paths = app_paths().ensure()
    settings = load_settings(paths.config).settings
    app = create_application(settings)
    from PySide6.QtCore import QEventLoop, QTimer

    from fara_desktop.engine.types import Finished, RemoteModel
    from fara_desktop.planning.planner import StartupPlan
    from fara_desktop.ui.main_window import MainWindow
    from fara_desktop.vocabulary.sampling import SamplingParams

    window = MainWindow(sampling=SamplingParams(temperature=0.0, max_tokens=max_tokens), paths=paths, settings=settings)
    window.show()
    outcome: dict[str, Any] = {}
    loop = QEventLoop()

    def finished(event: Finished) -> None:
        outcome["finished"] = event
        loop.quit()

    def failed(message: str) -> None:
        outcome.setdefault("error", message)
        loop.quit()

    window.replyFinished.connect(finished)
    window.replyFailed.connect(failed)
    window.modelLoadFailed.connect(failed)

    def plan_ready(plan: StartupPlan) -> None:
        if plan.model is None:
            failed(NO_MODEL_HELP)

    window.planReady.connect(plan_ready)
    QTimer.singleShot(int(timeout_s * 1000), lambda: failed(f"no reply within {timeout_s:.0f} s"))
    if remote is not None:
        url, name, key = remote
        window.load_model(RemoteModel(_host_of(url), url, name, key))
    else:
        window.start_auto(model)
    window.composer.setPlainText(prompt)
    window.send_button.click()  # typed while the app is still choosing a model: it is sent once one is queued
    loop.exec()
    try:
        from fara_desktop.ui.qt_health import refcount_problem

        qt_problem = refcount_problem()
        if qt_problem:
            print(printable(f"fara-desktop smoke: {qt_problem}"), file=sys.stderr)
            return 1
        if "finished" not in outcome:
            print(printable(f"fara-desktop smoke: {outcome.get('error', 'unknown failure')}"), file=sys.stderr)
            return 1
        event: Finished = outcome["finished"]
        tool_servers = _tool_servers(window)
        if screenshot:
            screenshot.parent.mkdir(parents=True, exist_ok=True)
            window.grab().save(str(screenshot))
        info = window.model_info
        print(
            json.dumps(
                {
                    "model": info.name if info else None,
                    "model_path": str(info.path) if info and not info.remote else None,
                    "server": info.server if info else None,
                    "prompt": prompt,
                    "reply": event.text,
                    "completion_tokens": event.stats.completion_tokens,
                    "ttft_s": round(event.stats.ttft_s, 4),
                    "gen_tok_per_s": round(event.stats.gen_tok_per_s, 2),
                    "finish_reason": event.finish_reason,
                    "qt_refcounts": "sound",
                    "notices": window.notice_bar.texts(),
                    "tool_servers": tool_servers,
                },
                ensure_ascii=False,
            )
        )
        return 0
    finally:
        window.close()
        app.processEvents()


def _tool_servers(window: Any, wait_s: float = 60.0) -> dict[str, Any]:
    """The MCP servers the settings enable, once each has started or failed: their state and tools, and the result
    of calling the first tool that needs no arguments (the SDK and the spawned server, as the app runs them)."""
    import time

    from PySide6.QtCore import QEventLoop

    hub = window.core.tools_hub
    deadline = time.monotonic() + wait_s
    while any(state.state == "starting" for state in hub.states().values()) and time.monotonic() < deadline:
        QEventLoop().processEvents(QEventLoop.ProcessEventsFlag.AllEvents, 100)  # the hub reports on its thread
        time.sleep(0.05)
    report: dict[str, Any] = {}
    for name, state in hub.states().items():
        entry: dict[str, Any] = {"state": state.state, "message": state.message, "tools": [t.name for t in state.tools]}
        simple = next((t for t in state.tools if not json.loads(t.spec.parameters or "{}").get("required")), None)
        if simple is not None:
            result = hub.call(simple, {})
            entry["called"] = {"tool": simple.name, "error": result.is_error, "text": result.text[:200]}
        report[name] = entry
    return report


def _host_of(url: str) -> str:
    """A name for a server given only by its address."""
    return url.split("//", 1)[-1].split("/", 1)[0] or url
