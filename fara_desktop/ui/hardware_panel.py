"""The side panel: what machine this is, what model runs, and how fast it answers."""

from __future__ import annotations

import time

import psutil
from PySide6.QtCore import Qt, QTimer
from PySide6.QtWidgets import QFormLayout, QFrame, QLabel, QVBoxLayout, QWidget

from fara_desktop.engine.types import GenerationStats, ModelInfo
from fara_desktop.hardware import HardwareProfile


def human_bytes(count: float) -> str:
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if abs(count) < 1024 or unit == "TB":
            return f"{count:.0f} {unit}" if unit in ("B", "KB") else f"{count:.1f} {unit}"
        count /= 1024
    return f"{count:.1f} TB"


class HardwarePanel(QFrame):
    """Read-only facts, refreshed from events and a slow timer (RAM); never blocks the GUI thread."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("hardwarePanel")
        self.setAccessibleName("Hardware and model")
        self.setMinimumWidth(240)
        outer = QVBoxLayout(self)
        outer.setContentsMargins(16, 16, 16, 16)
        outer.setSpacing(12)
        self._values: dict[str, QLabel] = {}
        outer.addWidget(self._section("This machine", ["CPU", "Cores", "RAM"]))
        outer.addWidget(self._section("Model", ["Name", "Format", "Context", "Threads"]))
        outer.addWidget(self._section("Last reply", ["Speed", "First token", "Prompt", "Context used"]))
        outer.addStretch(1)
        self._ram_timer = QTimer(self)
        self._ram_timer.setInterval(2000)
        self._ram_timer.timeout.connect(self._refresh_ram)
        self._ram_timer.start()
        self._stream_started: float | None = None
        self._stream_tokens = 0
        for key in ("CPU", "Cores", "RAM"):
            self.set_value(key, "detecting…")
        for key in ("Name", "Format", "Context", "Threads", "Speed", "First token", "Prompt", "Context used"):
            self.set_value(key, "—")

    def _section(self, title: str, keys: list[str]) -> QWidget:
        box = QFrame()
        box.setObjectName("panelSection")
        layout = QVBoxLayout(box)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(6)
        heading = QLabel(title)
        heading.setObjectName("panelHeading")
        layout.addWidget(heading)
        form = QFormLayout()
        form.setLabelAlignment(Qt.AlignmentFlag.AlignLeft)
        form.setHorizontalSpacing(10)
        form.setVerticalSpacing(4)
        for key in keys:
            value = QLabel()
            value.setObjectName(f"panelValue{key.replace(' ', '')}")
            value.setWordWrap(True)
            value.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
            name = QLabel(key)
            name.setObjectName("panelKey")
            form.addRow(name, value)
            self._values[key] = value
        layout.addLayout(form)
        return box

    def value(self, key: str) -> str:
        return self._values[key].text()

    def set_value(self, key: str, text: str) -> None:
        self._values[key].setText(text)
        self._values[key].setAccessibleName(f"{key}: {text}")

    # ------------------------------------------------------------------ updates

    def show_hardware(self, profile: HardwareProfile) -> None:
        self.set_value("CPU", profile.cpu_name)
        physical = profile.physical_cores if profile.physical_cores is not None else "?"
        self.set_value("Cores", f"{physical} physical · {profile.logical_cores} logical · {profile.architecture}")
        self._refresh_ram()

    def _refresh_ram(self) -> None:
        memory = psutil.virtual_memory()
        self.set_value("RAM", f"{human_bytes(memory.available)} free of {human_bytes(memory.total)}")

    def show_model_loading(self, name: str) -> None:
        self.set_value("Name", f"loading {name}…")

    def show_model(self, info: ModelInfo | None) -> None:
        if info is None:
            for key in ("Name", "Format", "Context", "Threads"):
                self.set_value(key, "—")
            return
        self.set_value("Name", f"{info.name} ({info.architecture}, {human_bytes(info.file_bytes)})")
        self.set_value("Format", info.chat_format)
        self.set_value("Context", f"{info.n_ctx:,} tokens (trained {info.n_ctx_train:,})")
        self.set_value("Threads", f"{info.n_threads} (prompt {info.n_threads_batch})")

    def reply_started(self) -> None:
        self._stream_started = None
        self._stream_tokens = 0
        self.set_value("Speed", "waiting for first token…")

    def token_arrived(self) -> None:
        now = time.perf_counter()
        if self._stream_started is None:
            self._stream_started = now
            return
        self._stream_tokens += 1
        elapsed = now - self._stream_started
        if elapsed > 0.25:
            self.set_value("Speed", f"{self._stream_tokens / elapsed:.1f} tok/s (live)")

    def show_stats(self, stats: GenerationStats) -> None:
        self.set_value("Speed", f"{stats.gen_tok_per_s:.1f} tok/s · {stats.completion_tokens} tokens")
        self.set_value("First token", f"{stats.ttft_s * 1000:.0f} ms")
        reused = stats.prompt_tokens - stats.prompt_tokens_evaluated
        self.set_value("Prompt", f"{stats.prompt_tokens_evaluated:,} read · {reused:,} reused")
        self.set_value("Context used", f"{stats.context_used:,} / {stats.n_ctx:,} tokens")
