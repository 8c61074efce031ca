"""The side panel: what machine this is, what model runs, and how fast it answers."""

from __future__ import annotations

import time

import psutil
from PySide6.QtCore import QPointF, Qt, QTimer
from PySide6.QtGui import QColor, QPainter, QPaintEvent, QPen, QPolygonF
from PySide6.QtWidgets import QFrame, QGridLayout, QLabel, QProgressBar, QVBoxLayout, QWidget

from fara_desktop.engine.types import ModelInfo
from fara_desktop.machine.hardware import HardwareProfile
from fara_desktop.machine.isa import AVX512_COMPLETE
from fara_desktop.planning.params import TunedParams
from fara_desktop.planning.tuning import MemoryEstimate
from fara_desktop.settings import InferenceOverrides
from fara_desktop.text.format import format_count, format_size
from fara_desktop.ui.widgets.plain_text import plain_label, plain_tooltip
from fara_desktop.vocabulary.stats import GenerationStats


class SpeedPlot(QFrame):
    """A small line of the last replies' generation speed (tokens/s)."""

    def __init__(self, parent: QWidget | None = None, keep: int = 30) -> None:
        super().__init__(parent)
        self.setObjectName("speedPlot")
        self.setAccessibleName("Tokens per second of recent replies")
        self.setMinimumHeight(56)
        self.values: list[float] = []
        self._keep = keep

    def add(self, value: float) -> None:
        self.values = [*self.values, value][-self._keep :]
        self.setToolTip(f"last {len(self.values)} replies: " + ", ".join(f"{v:.0f}" for v in self.values))
        self.update()

    def paintEvent(self, event: QPaintEvent) -> None:
        super().paintEvent(event)
        painter = QPainter(self)
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        rect = self.rect().adjusted(8, 18, -8, -6)
        painter.setPen(QColor("#8a93a1"))
        top = max(self.values, default=0.0)
        painter.drawText(
            self.rect().adjusted(8, 2, -8, 0),
            Qt.AlignmentFlag.AlignLeft,
            f"tok/s — max {top:.0f}" if self.values else "tok/s of recent replies",
        )
        if len(self.values) < 2 or top <= 0:
            return
        step = rect.width() / (len(self.values) - 1)
        points = [
            QPointF(rect.left() + i * step, rect.bottom() - rect.height() * v / top) for i, v in enumerate(self.values)
        ]
        painter.setPen(QPen(QColor("#3a6df0"), 2))
        painter.drawPolyline(QPolygonF(points))


def tuned_text(value: object, user_value: object) -> str:
    """``auto (= 8,192)`` for a tuned value, ``4,096 (yours)`` for one the user pinned."""
    shown = f"{value:,}" if isinstance(value, int) and not isinstance(value, bool) else str(value)
    return f"{shown} (yours)" if user_value is not None else f"auto (= {shown})"


class HardwarePanel(QFrame):
    """Read-only facts, refreshed from events and a slow timer (RAM); never blocks the GUI thread."""

    MODEL_KEYS = (
        "Name",
        "Why",
        "Format",
        "Context",
        "Threads",
        "KV cache",
        "Batch",
        "API replies",
        "Proposals",
        "Kernels",
    )

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("hardwarePanel")
        self.setAccessibleName("Hardware and model")
        self.setMinimumWidth(240)
        outer = QVBoxLayout(self)
        outer.setContentsMargins(16, 16, 16, 16)
        outer.setSpacing(12)
        self._values: dict[str, QLabel] = {}
        outer.addWidget(self._section("This machine", ["CPU", "Cores", "Instructions", "Caches", "RAM"]))
        self.warning = plain_label()
        self.warning.setObjectName("capabilityWarning")
        self.warning.setWordWrap(True)
        self.warning.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.warning.hide()
        outer.addWidget(self.warning)
        outer.addWidget(self._section("Model", list(self.MODEL_KEYS)))
        outer.addWidget(self._section("Memory", ["This app", "Model weights", "KV memory", "CPU load"]))
        outer.addWidget(self._section("Last reply", ["Speed", "First token", "Thinking", "Prompt", "Context used"]))
        self.context_bar = QProgressBar()
        self.context_bar.setObjectName("contextFill")
        self.context_bar.setAccessibleName("Context window fill")
        self.context_bar.setTextVisible(False)
        self.context_bar.setRange(0, 100)
        self.context_bar.setValue(0)
        outer.addWidget(self.context_bar)
        self.plot = SpeedPlot()
        outer.addWidget(self.plot)
        outer.addStretch(1)
        self._ram_timer = QTimer(self)
        self._ram_timer.setInterval(2000)
        self._ram_timer.timeout.connect(self._refresh_ram)
        self._ram_timer.start()
        self._process = psutil.Process()
        psutil.cpu_percent(None)  # primes the counter: later calls return the load since the previous one
        self._stream_started: float | None = None
        self._last_label = 0.0
        self._stream_tokens = 0
        for key in ("CPU", "Cores", "Instructions", "Caches", "RAM"):
            self.set_value(key, "detecting…")
        for key in (
            *self.MODEL_KEYS,
            "Model weights",
            "KV memory",
            "Speed",
            "First token",
            "Thinking",
            "Prompt",
            "Context used",
        ):
            self.set_value(key, "—")
        self._tuned: TunedParams | None = None
        self._overrides = InferenceOverrides()
        self._parallel = 1  # the loaded model's local API replies decoded together (``ModelInfo.parallel``)
        self._api_requests = 0

    def _section(self, title: str, keys: list[str]) -> QWidget:
        box = QFrame()
        box.setObjectName("panelSection")
        layout = QVBoxLayout(box)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(6)
        heading = plain_label(title)
        heading.setObjectName("panelHeading")
        layout.addWidget(heading)
        # A grid, not a QFormLayout: QFormLayout keeps the row heights it computed for a label's earlier text, so a
        # value that grows to two lines after layout (the model's name once it loads) was cut in half.
        grid = QGridLayout()
        grid.setHorizontalSpacing(10)
        grid.setVerticalSpacing(4)
        grid.setColumnStretch(1, 1)
        for row, key in enumerate(keys):
            value = plain_label()
            value.setObjectName(f"panelValue{key.replace(' ', '')}")
            value.setWordWrap(True)
            value.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
            name = plain_label(key)
            name.setObjectName("panelKey")
            grid.addWidget(name, row, 0, Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignTop)
            grid.addWidget(value, row, 1)
            self._values[key] = value
        layout.addLayout(grid)
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
        cores = f"{physical} physical · {profile.logical_cores} logical · {profile.architecture}"
        if profile.performance_cores and profile.efficiency_cores:
            cores += f" ({profile.performance_cores} P + {profile.efficiency_cores} E)"
        self.set_value("Cores", cores)
        features = profile.cpu_features
        shown = [f for f in features if f not in AVX512_COMPLETE or "AVX512" not in features]
        instructions = " · ".join(shown) or "baseline only"
        if profile.cpu_backend_variant:
            instructions += f"\nllama.cpp kernels: {profile.cpu_backend_variant}"
        self.set_value("Instructions", instructions)
        caches = []
        if profile.l2_cache_bytes:
            caches.append(f"L2 {format_size(profile.l2_cache_bytes)}/core")
        if profile.l3_cache_bytes:
            caches.append(f"L3 {format_size(profile.l3_cache_bytes)}")
        self.set_value("Caches", " · ".join(caches) or "unknown")
        warnings = [gap.message for gap in profile.build_gaps]
        if profile.avx512_missing:
            warnings.append(
                "This CPU has only part of AVX-512 (missing " + ", ".join(profile.avx512_missing) + "), so "
                "llama.cpp uses its AVX2 kernels: that is expected, not a fault."
            )
        self.warning.setText("\n\n".join(warnings))
        self.warning.setAccessibleName("Warning: " + " ".join(warnings) if warnings else "")
        self.warning.setVisible(bool(warnings))
        self._refresh_ram()

    def _refresh_ram(self) -> None:
        """Non-blocking samples: psutil reads /proc; cpu_percent(None) compares with the previous call."""
        memory = psutil.virtual_memory()
        self.set_value("RAM", f"{format_size(memory.available)} free of {format_size(memory.total)}")
        self.set_value("This app", format_size(self._process.memory_info().rss))
        self.set_value("CPU load", f"{psutil.cpu_percent(None):.0f} % of all cores")

    def show_memory_plan(self, estimate: MemoryEstimate) -> None:
        eyes = f" + {format_size(estimate.vision)} to see pictures" if estimate.vision else ""
        self.set_value("Model weights", format_size(estimate.weights) + eyes)
        sequences = f" + {format_size(estimate.sequences)} for the API's replies" if estimate.sequences else ""
        self.set_value(
            "KV memory", f"{format_size(estimate.kv_cache)} ({estimate.kv_type}, {estimate.n_ctx:,} tokens){sequences}"
        )

    def show_model_loading(self, name: str) -> None:
        self.set_value("Name", f"loading {name}…")

    def show_choice(self, reason: str) -> None:
        """The first clause in the panel; the whole explanation as its tooltip."""
        self.set_value("Why", reason.split(";")[0] if reason else "—")
        self._values["Why"].setToolTip(plain_tooltip(reason))

    def show_tuning(self, tuned: TunedParams, overrides: InferenceOverrides) -> None:
        self._tuned, self._overrides = tuned, overrides

    def show_model(self, info: ModelInfo | None) -> None:
        self._values["Proposals"].setToolTip("")  # a draft named for the model before: not this one's
        if info is None:
            for key in self.MODEL_KEYS:
                self.set_value(key, "—")
            return
        if info.remote:  # the server decides how it runs; what is known here is where and what
            self.set_value("Name", f"{info.name} (on {info.server})")
            self.set_value("Why", "chosen by you: runs on a server")
            self.set_value("Format", "the server's chat template")
            for key in ("Context", "Threads", "KV cache", "Batch", "API replies", "Proposals"):
                self.set_value(key, "the server's")
            for key in ("Model weights", "KV memory"):  # nothing of a local model stays loaded
                self.set_value(key, "on the server")
            return
        if self.value("Why") == "—":
            self.set_value("Why", "opened by you")
        mine = self._overrides
        self.set_value("Name", f"{info.name} ({info.architecture}, {format_size(info.file_bytes)})")
        seeing = " · sees pictures" if info.vision else (" · pictures: not loaded" if info.vision_problem else "")
        self.set_value("Format", info.chat_format + seeing)
        self._values["Format"].setToolTip(
            plain_tooltip(
                f"Vision projector: {info.vision}; a picture is about {info.picture_tokens} tokens here"
                if info.vision
                else info.vision_problem
            )
        )
        self.set_value("Context", f"{tuned_text(info.n_ctx, mine.n_ctx)} of {info.n_ctx_train:,} trained")
        self.set_value("Threads", f"{tuned_text(info.n_threads, mine.n_threads)} · prompt {info.n_threads_batch}")
        self.set_value(
            "KV cache", tuned_text(info.kv_type, mine.kv_type) + (" · flash attn" if info.flash_attn else "")
        )
        self.set_value("Batch", tuned_text(self._tuned.n_batch if self._tuned else 512, mine.n_batch))
        self._parallel = info.parallel
        self.show_api_requests(self._api_requests)
        self.set_value("Proposals", proposals_text(info))
        if info.draft:
            self._values["Proposals"].setToolTip(plain_tooltip(f"Draft model: {info.draft}"))
        self.set_value("Kernels", info.kernel_summary or info.kernel_path or "—")
        self._values["Kernels"].setToolTip(plain_tooltip(info.kernel_reason))

    def show_api_requests(self, active: int) -> None:
        """The local API's requests under way (``ServersController.apiRequestsChanged``): how many of them the
        loaded model decodes together now (Settings ▸ Inference ▸ Parallel API conversations)."""
        self._api_requests = active
        if self.value("Context") in ("—", "the server's"):
            return  # no local model
        parallel = self._parallel
        if parallel <= 1:
            self.set_value("API replies", "one at a time" + (f" · {active} under way" if active else ""))
            return
        shown = f"{parallel} at once" + (" (yours)" if self._overrides.parallel is not None else " (auto)")
        self.set_value("API replies", shown + (f" · {min(active, parallel)} decoding now" if active else ""))

    def show_calibration(self, tok_per_s: dict[int, float], best: int, user_threads: int | None) -> None:
        measured = ", ".join(f"{format_count(t, 'thread')} {v:.0f} tok/s" for t, v in sorted(tok_per_s.items()))
        self.set_value("Threads", f"{tuned_text(best, user_threads)} · measured: {measured}")

    def note_threads(self, note: str) -> None:
        """What the thread calibration is doing, after the thread count in use."""
        current = self.value("Threads").split(" · ")[0]
        self.set_value("Threads", f"{current} · {note}")

    def reply_started(self) -> None:
        self._stream_started = None
        self._stream_tokens = 0
        self.set_value("Speed", "waiting for first token…")
        for key in ("First token", "Thinking", "Prompt"):  # the previous reply's figures are not this one's
            self.set_value(key, "…")

    def reply_ended(self, status: str) -> None:
        """A reply that ended without the engine's figures (stopped, failed): no live speed is left behind."""
        self._stream_started = None
        if self._stream_tokens and status == "stopped":
            self.set_value("Speed", f"stopped after {format_count(self._stream_tokens, 'token')}")
        else:
            self.set_value("Speed", "stopped" if status == "stopped" else "failed" if status == "failed" else "—")
        for key in ("First token", "Thinking", "Prompt"):
            if self.value(key) == "…":
                self.set_value(key, "—")

    def token_arrived(self, tokens: int = 1) -> None:
        """Live speed, relabelled at most four times a second (a relayout per token would cost CPU time that
        llama.cpp's threads need)."""
        now = time.perf_counter()
        if self._stream_started is None:
            self._stream_started = self._last_label = now
            return
        self._stream_tokens += tokens
        elapsed = now - self._stream_started
        if elapsed > 0.25 and now - self._last_label >= 0.25:
            self._last_label = now
            self.set_value("Speed", f"{self._stream_tokens / elapsed:.1f} tok/s (live)")

    def show_stats(self, stats: GenerationStats, stopped: bool = False) -> None:
        """A reply's measured figures (``stopped``: it was stopped, and they are of what it wrote until then)."""
        self._stream_started = None
        end = " (stopped)" if stopped else ""
        self.set_value("Speed", f"{stats.gen_tok_per_s:.1f} tok/s · {stats.completion_tokens} tokens{end}")
        self.set_value("First token", f"{stats.ttft_s * 1000:.0f} ms")
        thinking = f"{stats.thinking_s:.1f} s · {stats.reasoning_tokens:,} tokens" if stats.reasoning_tokens else "—"
        self.set_value("Thinking", thinking)
        reused = stats.prompt_tokens - stats.prompt_tokens_evaluated
        self.set_value("Prompt", f"{stats.prompt_tokens_evaluated:,} read · {reused:,} reused")
        if stats.n_ctx:
            self.set_value("Context used", f"{stats.context_used:,} of {stats.n_ctx:,} tokens")
        else:
            used = format_count(stats.context_used, "token")
            self.set_value("Context used", f"{used} (the limit is set by the server)")
        self.context_bar.setValue(round(100 * stats.context_used / max(1, stats.n_ctx)))
        self.plot.add(stats.gen_tok_per_s)


def proposals_text(info: ModelInfo) -> str:
    """How the window's replies speculate (Settings ▸ Inference ▸ Speculative decoding, Draft model)."""
    if not info.speculates:
        return "off"
    if info.mtp:
        return "from the model's MTP head"
    return "from a draft model" if info.draft else "from the reply's own text"  # its file: the tooltip
