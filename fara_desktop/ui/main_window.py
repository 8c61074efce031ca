"""The main window: conversations on the left, the chat in the middle, the machine and model on the right."""

from __future__ import annotations

import dataclasses
import logging
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from PySide6.QtCore import Qt, QTimer, Signal
from PySide6.QtGui import QAction, QCloseEvent, QGuiApplication, QKeySequence, QShortcut
from PySide6.QtWidgets import (
    QApplication,
    QFileDialog,
    QHBoxLayout,
    QInputDialog,
    QLineEdit,
    QMainWindow,
    QMessageBox,
    QProgressBar,
    QPushButton,
    QSplitter,
    QVBoxLayout,
    QWidget,
)

from fara_desktop import APP_NAME
from fara_desktop.chats.export import export_conversations, import_conversation
from fara_desktop.chats.session import ChatSession
from fara_desktop.chats.storage import ConversationStore, StorageError, StoredMessage, database_path
from fara_desktop.engine.types import (
    Cancelled,
    Event,
    Failed,
    Finished,
    GenerationStarted,
    HistoryTrimmed,
    ModelInfo,
    ModelLoaded,
    ModelLoadFailed,
    ModelLoading,
    ModelUnloaded,
    PromptAdjusted,
    SamplingParams,
    ThreadsCalibrated,
    TokenText,
)
from fara_desktop.engine.worker import Backend
from fara_desktop.errors import FaraError
from fara_desktop.machine.measurements import MachineCache
from fara_desktop.paths import AppPaths, app_paths
from fara_desktop.planning.catalog_fit import assess_catalog_here
from fara_desktop.planning.params import LoadParams
from fara_desktop.planning.planner import (
    StartupPlan,
    fit_refusal,
    model_file,
    plan_startup,
    thread_candidates,
)
from fara_desktop.planning.tuning import estimate_memory, size_class
from fara_desktop.settings import Settings, save_settings
from fara_desktop.ui.background import BackgroundCall
from fara_desktop.ui.dialogs.models_dialog import GetModelsDialog
from fara_desktop.ui.dialogs.settings_dialog import SettingsDialog
from fara_desktop.ui.engine_bridge import EngineBridge
from fara_desktop.ui.theme import apply_appearance
from fara_desktop.ui.widgets.chat_view import ChatView
from fara_desktop.ui.widgets.composer import Composer
from fara_desktop.ui.widgets.hardware_panel import HardwarePanel
from fara_desktop.ui.widgets.message_widget import MessageWidget
from fara_desktop.ui.widgets.plain_text import plain_label, plain_message_box
from fara_desktop.ui.widgets.sidebar import Sidebar
from fara_desktop.ui.window_state import restore_window_state, save_window_state

log = logging.getLogger(__name__)

SAVE_RETRY_MS = 5000
DEFERRED = 0  # request id of a message waiting for the start-up scan to pick a model


def footer_for(message: StoredMessage) -> str:
    """The line under a reply. ``stats`` come from the database (an import, an older version): any key may be
    missing; the store only ever hands out numbers and an error text."""
    stats = message.stats or {}
    parts = []
    if message.status == "stopped":
        parts.append("Stopped")
    elif message.status == "failed":
        parts.append("Failed" + (f": {stats['error']}" if isinstance(stats.get("error"), str) else ""))
    keys = ("completion_tokens", "gen_tok_per_s", "ttft_s", "context_used", "n_ctx")
    if all(isinstance(stats.get(k), (int, float)) for k in keys):
        parts.append(
            f"{stats['completion_tokens']:.0f} tokens · {stats['gen_tok_per_s']:.1f} tok/s · first token "
            f"{stats['ttft_s'] * 1000:.0f} ms · context {stats['context_used']:.0f}/{stats['n_ctx']:.0f}"
        )
    return " · ".join(parts)


class MainWindow(QMainWindow):
    """Wires the widgets to the engine and the conversation store; the only place reacting to engine events."""

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
        self.setWindowTitle(APP_NAME)
        self.resize(1280, 780)
        self.paths = paths or app_paths().ensure()
        self.settings = settings or Settings()
        self.sampling = sampling or self.settings.sampling.params()
        self.plan: StartupPlan | None = None
        self.model_info: ModelInfo | None = None
        self._current_request: int | None = None
        self._planning = False
        self._plan_generation = 0
        self._closed = False
        self._editing: MessageWidget | None = None
        self._background: set[BackgroundCall] = set()
        self.models_dialog: GetModelsDialog | None = None
        self._adjusted: set[int | None] = set()  # chats already told how their prompt was adapted to the template
        self._save_problem_shown = False
        self._retry_timer = QTimer(self)
        self._retry_timer.setInterval(SAVE_RETRY_MS)
        self._retry_timer.timeout.connect(self._retry_saving)
        self.store = self._open_store()
        self.session = ChatSession(self.store)

        self.bridge = EngineBridge(backend, self)
        self.bridge.event.connect(self._on_engine_event)
        self._build()
        restore_window_state(self.paths.config, self, self.splitter)
        self._set_busy(False)
        self.refresh_sidebar()

    def _open_store(self) -> ConversationStore:
        try:
            store = ConversationStore(database_path(self.paths.data))
            interrupted = store.mark_interrupted()
            if interrupted:
                log.info("%d reply(ies) were interrupted last time; kept as stopped", interrupted)
            return store
        except StorageError as exc:
            self._store_problem = str(exc)
            # A private temporary folder: writable even when the whole data folder is read-only.
            return ConversationStore(Path(tempfile.mkdtemp(prefix="fara-chats-")) / "conversations.sqlite3")

    # ------------------------------------------------------------------ layout

    def _build(self) -> None:
        self.sidebar = Sidebar()
        self.sidebar.newRequested.connect(self.new_chat)
        self.sidebar.conversationChosen.connect(self.open_conversation)
        self.sidebar.renameRequested.connect(self.rename_conversation)
        self.sidebar.deleteRequested.connect(self.delete_conversation)
        self.sidebar.searchChanged.connect(lambda _text: self.refresh_sidebar())

        self.system_prompt = QLineEdit(self.session.system_prompt)
        self.system_prompt.setObjectName("systemPrompt")
        self.system_prompt.setAccessibleName("System prompt")
        self.system_prompt.setPlaceholderText("System prompt (how the assistant should behave)")
        self.system_prompt.editingFinished.connect(lambda: self.session.set_system_prompt(self.system_prompt.text()))

        self.chat_view = ChatView()
        self.chat_view.copyRequested.connect(self.copy_message)
        self.chat_view.editRequested.connect(self.edit_message)
        self.chat_view.regenerateRequested.connect(self.regenerate)
        self.chat_view.empty_state.openModelRequested.connect(self._choose_model_file)
        self.chat_view.empty_state.addFolderRequested.connect(self._add_models_folder)
        self.chat_view.empty_state.getModelsRequested.connect(self.open_models_dialog)

        self.edit_banner = plain_label(
            "Editing an earlier message: Enter sends it again and the chat continues from there; Esc cancels."
        )
        self.edit_banner.setObjectName("editBanner")
        self.edit_banner.setWordWrap(True)
        self.edit_banner.hide()
        self.composer = Composer()
        self.composer.submitted.connect(self.send)
        self.composer.stopRequested.connect(self.stop)
        self.send_button = QPushButton("Send")
        self.send_button.setObjectName("sendButton")
        self.send_button.setAccessibleName("Send message")
        self.send_button.setToolTip("Send (Enter)")
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
        composer_row.setSpacing(10)
        composer_row.addWidget(self.composer, 1)
        composer_row.addLayout(buttons)
        bottom = QVBoxLayout()
        bottom.setContentsMargins(18, 8, 18, 14)
        bottom.setSpacing(6)
        bottom.addWidget(self.edit_banner)
        bottom.addLayout(composer_row)
        top = QHBoxLayout()
        top.setContentsMargins(18, 10, 18, 0)
        top.addWidget(self.system_prompt)

        chat_column = QWidget()
        chat_column.setObjectName("chatColumn")
        column = QVBoxLayout(chat_column)
        column.setContentsMargins(0, 0, 0, 0)
        column.setSpacing(0)
        column.addLayout(top)
        column.addWidget(self.chat_view, 1)
        column.addLayout(bottom)

        self.hardware_panel = HardwarePanel()
        self.splitter = QSplitter(Qt.Orientation.Horizontal)
        self.splitter.setObjectName("mainSplitter")
        self.splitter.addWidget(self.sidebar)
        self.splitter.addWidget(chat_column)
        self.splitter.addWidget(self.hardware_panel)
        self.splitter.setStretchFactor(0, 0)
        self.splitter.setStretchFactor(1, 1)
        self.splitter.setStretchFactor(2, 0)
        self.splitter.setSizes([230, 730, 320])
        self.setCentralWidget(self.splitter)

        self.status_label = plain_label("Starting…")
        self.status_label.setObjectName("statusLabel")
        self.load_progress = QProgressBar()
        self.load_progress.setObjectName("loadProgress")
        self.load_progress.setAccessibleName("Model loading")
        self.load_progress.setRange(0, 0)  # llama.cpp reports no progress: a busy indicator
        self.load_progress.setMaximumWidth(160)
        self.load_progress.hide()
        self.statusBar().addWidget(self.status_label, 1)
        self.statusBar().addPermanentWidget(self.load_progress)
        self._build_menus()
        self.composer.setFocus()

    def _action(self, menu: Any, text: str, slot: Callable[[], Any], shortcut: Any = None) -> QAction:
        action = QAction(text, self)
        if shortcut is not None:
            action.setShortcut(shortcut)
        action.triggered.connect(slot)
        menu.addAction(action)
        self.addAction(action)  # shortcuts work even with the menu bar hidden
        return action

    def _build_menus(self) -> None:
        bar = self.menuBar()
        chat = bar.addMenu("&Chat")
        self._action(chat, "&New chat", self.new_chat, QKeySequence.StandardKey.New)
        self._action(chat, "&Find chats", self.focus_search, QKeySequence.StandardKey.Find)
        chat.addSeparator()
        self._action(chat, "&Export this chat…", self.export_current, QKeySequence("Ctrl+E"))
        self._action(chat, "Export &all chats…", self.export_all)
        self._action(chat, "&Import a chat…", self.import_chat)
        chat.addSeparator()
        self._action(chat, "&Quit", self.close, QKeySequence.StandardKey.Quit)
        model = bar.addMenu("&Model")
        self._action(model, "&Open a model file…", self._choose_model_file, QKeySequence.StandardKey.Open)
        self._action(model, "&Get models…", self.open_models_dialog, QKeySequence("Ctrl+Shift+M"))
        self._action(model, "&Measure the best thread count", self.recalibrate)
        self._action(model, "&Settings…", self.open_settings, QKeySequence("Ctrl+,"))
        QShortcut(QKeySequence(Qt.Key.Key_Escape), self, activated=self.escape)

    # ------------------------------------------------------------------ conversations

    def refresh_sidebar(self) -> None:
        self.sidebar.show_conversations(
            self.store.conversations(self.sidebar.search.text()), self.session.conversation_id
        )

    def new_chat(self) -> None:
        self.stop()
        self._cancel_edit()
        self.session.new()
        self.system_prompt.setText(self.session.system_prompt)
        self.chat_view.clear()
        self.refresh_sidebar()
        self.composer.setFocus()

    def open_conversation(self, conversation_id: int) -> None:
        if conversation_id == self.session.conversation_id:
            return
        self.stop()
        self._cancel_edit()
        self.session.open(conversation_id)
        self.system_prompt.setText(self.session.system_prompt)
        self._show_session_messages()
        self.refresh_sidebar()

    def _show_session_messages(self) -> None:
        self.chat_view.set_messages(
            [(m.role, m.content, footer_for(m), m.model, m.id, m.created_at) for m in self.session.messages]
        )

    def rename_conversation(self, conversation_id: int) -> None:
        summary = self.store.conversation(conversation_id)
        if summary is None:
            return
        title, ok = QInputDialog.getText(self, "Rename chat", "Title:", text=summary.title)
        if ok and title.strip():
            self.store.rename(conversation_id, title)
            self.refresh_sidebar()

    def delete_conversation(self, conversation_id: int, confirm: bool = True) -> None:
        summary = self.store.conversation(conversation_id)
        if summary is None:
            return
        if confirm:
            box = plain_message_box(
                QMessageBox.Icon.Question,
                "Delete chat",
                f"Delete “{summary.title}” and its {summary.message_count} messages? This cannot be undone.",
                self,
            )
            box.setStandardButtons(QMessageBox.StandardButton.Yes | QMessageBox.StandardButton.No)
            box.setDefaultButton(QMessageBox.StandardButton.No)
            if box.exec() != QMessageBox.StandardButton.Yes:
                return
        if conversation_id == self.session.conversation_id:
            self.new_chat()
        self.store.delete(conversation_id)
        self.refresh_sidebar()

    def focus_search(self) -> None:
        self.sidebar.search.setFocus()
        self.sidebar.search.selectAll()

    def export_current(self) -> None:
        if self.session.conversation_id is None:
            self._set_status("Nothing to export yet")
            return
        self._export([self.session.conversation_id])

    def export_all(self) -> None:
        self._export(None)

    def _export(self, ids: list[int] | None) -> None:
        folder = QFileDialog.getExistingDirectory(self, "Export chats to a folder", str(Path.home()))
        if folder:
            written = export_conversations(self.store, Path(folder), ids=ids)
            self._set_status(f"Exported {len(written)} files to {folder}")

    def import_chat(self) -> None:
        path, _ = QFileDialog.getOpenFileName(self, "Import a chat", str(Path.home()), "Fara chats (*.json)")
        if not path:
            return
        try:
            conversation_id = import_conversation(self.store, Path(path))
        except FaraError as exc:  # refused (ImportRefusedError) or not saved (StorageError): nothing was written
            self.show_notice(f"{Path(path).name} was not imported. {exc}", "error")
            return
        self.refresh_sidebar()
        self.open_conversation(conversation_id)

    # ------------------------------------------------------------------ chatting

    def load_model(self, path: Path | str, params: LoadParams | None = None) -> None:
        self.bridge.worker.load_model(Path(path), params)

    def send(self) -> None:
        text = self.composer.toPlainText().strip()
        if not text or self._current_request is not None:
            return
        if self._editing is not None:
            index = self.chat_view.messages().index(self._editing)
            self.session.replace_from(self._message_index(self._editing, index))
            self.chat_view.remove_from(self._editing)
            self._cancel_edit()
        self.composer.clear()
        try:
            user = self.session.add_user_message(text)
        except StorageError as exc:
            self.composer.setPlainText(text)  # nothing is lost: the text goes back where it was typed
            self.session.reload()  # an edit's earlier messages were not replaced: show them again
            self._show_session_messages()
            self.show_notice(f"Your message could not be saved, so it was not sent: {exc}", "error")
            return
        self.chat_view.add_message("user", text, message_id=user.id)
        self._request_reply()
        self.refresh_sidebar()

    def _message_index(self, widget: MessageWidget, fallback: int) -> int:
        ids = [m.id for m in self.session.messages]
        return ids.index(widget.message_id) if widget.message_id in ids else fallback

    def _request_reply(self) -> None:
        model = self.model_info.name if self.model_info else None
        reply = self.session.begin_reply(model)
        self.chat_view.begin_stream(model, reply.id)
        self.hardware_panel.reply_started()
        self._set_busy(True)
        if self._planning:
            self._current_request = DEFERRED  # sent once the model is chosen and its load is queued
        else:
            self._current_request = self._generate()
        self._set_status("Thinking…" if self.model_info else "Waiting for the model to load…")

    def _generate(self) -> int:
        return self.bridge.worker.generate(self.session.prompt_messages(), self.sampling, self.session.conversation_id)

    def regenerate(self, widget: MessageWidget) -> None:
        if self._current_request is not None or widget.role != "assistant":
            return
        messages = self.chat_view.messages()
        self.session.replace_from(self._message_index(widget, messages.index(widget)))
        self.chat_view.remove_from(widget)
        self._request_reply()

    def edit_message(self, widget: MessageWidget) -> None:
        if self._current_request is not None:
            return
        self._editing = widget
        self.composer.setPlainText(widget.text)
        self.edit_banner.show()
        self.composer.setFocus()

    def _cancel_edit(self) -> None:
        if self._editing is not None:
            self._editing = None
            self.edit_banner.hide()
            self.composer.clear()

    def copy_message(self, widget: MessageWidget) -> None:
        QGuiApplication.clipboard().setText(widget.text)
        self._set_status("Copied")

    def escape(self) -> None:
        if self._current_request is not None:
            self.stop()
        elif self._editing is not None:
            self._cancel_edit()

    def stop(self) -> None:
        if self._current_request == DEFERRED:
            self._reply_done(DEFERRED, "", "stopped", None, None)
            return
        if self._current_request is not None:
            self.bridge.worker.cancel()
            self._set_status("Stopping…")

    def bring_to_front(self) -> None:
        """Another launch asked for the window: un-minimise it and give it the focus."""
        self.setWindowState(self.windowState() & ~Qt.WindowState.WindowMinimized)
        self.show()
        self.raise_()
        self.activateWindow()

    def show_notice(self, text: str, role: str = "notice") -> None:
        self.chat_view.add_message(role, text)

    def _choose_model_file(self) -> None:
        path, _ = QFileDialog.getOpenFileName(self, "Open a GGUF model", str(Path.home()), "GGUF models (*.gguf)")
        if path:
            self.start_auto(Path(path))

    def _add_models_folder(self) -> None:
        folder = QFileDialog.getExistingDirectory(self, "Add a models folder", str(Path.home()))
        if folder:
            self.apply_settings(
                type(self.settings)(
                    **{**self.settings.__dict__, "extra_model_folders": [*self.settings.extra_model_folders, folder]}
                ),
                None,
            )

    def open_models_dialog(self) -> GetModelsDialog:
        """The catalog and downloads; one dialog for the window's lifetime so downloads go on while it is hidden."""
        if self.models_dialog is None:
            paths, folders = self.paths, [Path(f) for f in self.settings.extra_model_folders]
            self.models_dialog = GetModelsDialog(lambda: assess_catalog_here(paths.models, paths.cache, folders), self)
            self.models_dialog.modelReady.connect(self.use_downloaded_model)
        self.models_dialog.show()
        self.models_dialog.raise_()
        return self.models_dialog

    def use_downloaded_model(self, path: Path) -> None:
        """Load a model the user just downloaded, and keep it as their choice for the next start."""
        self.apply_settings(dataclasses.replace(self.settings, model_path=str(path)), str(path))

    # ------------------------------------------------------------------ settings

    def open_settings(self, page: str | None = None) -> SettingsDialog:
        dialog = SettingsDialog(self.settings, self.plan, self)
        if page:
            dialog.show_page(page)
        dialog.accepted.connect(lambda: self.apply_settings(dialog.settings(), dialog.chosen_model()))
        dialog.open()
        return dialog

    def apply_settings(self, settings: Settings, chosen_model: str | None) -> None:
        old = self.settings
        self.settings = settings
        try:
            save_settings(self.paths.config, settings)
        except OSError as exc:
            self.show_notice(f"Settings could not be saved ({exc}); they apply until you quit.", "error")
        self.sampling = settings.sampling.params()
        app = QApplication.instance()
        if isinstance(app, QApplication) and (old.theme, old.font_size) != (settings.theme, settings.font_size):
            apply_appearance(app, settings.theme, settings.font_size)
        reload = (
            chosen_model is not None
            or old.inference != settings.inference
            or old.extra_model_folders != settings.extra_model_folders
        )
        if reload:
            self.start_auto(Path(chosen_model) if chosen_model else None)

    def recalibrate(self) -> None:
        if self.plan is not None and self.model_info is not None:
            self._set_status("Measuring generation speed at each thread count…")
            self.bridge.worker.calibrate_threads(thread_candidates(self.plan.hardware))

    # ------------------------------------------------------------------ automatic start

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

    def start_auto(self, preferred: Path | None = None) -> None:
        """Probe the machine, scan for models, pick and tune the best one, load it — all off the GUI thread."""
        self._set_status("Looking at this machine and its models…")
        preferred = preferred or (Path(self.settings.model_path) if self.settings.model_path else None)
        folders = [Path(f) for f in self.settings.extra_model_folders]

        def work() -> tuple[StartupPlan, Path | None]:
            plan = plan_startup(self.paths, preferred, folders)
            return plan, model_file(plan.model, self.paths) if plan.model else None

        self._planning = True
        self._plan_generation += 1
        generation = self._plan_generation  # a newer request (settings changed meanwhile) wins, not the slower one
        self.run_in_background(
            work,
            lambda result: self._apply_plan(result) if generation == self._plan_generation else None,
            lambda error: self._plan_failed(error) if generation == self._plan_generation else None,
        )

    def _apply_plan(self, result: tuple[StartupPlan, Path | None]) -> None:
        plan, path = result
        self.plan = plan
        self._planning = False
        self.hardware_panel.show_hardware(plan.hardware)
        if path is None:
            searched = [f"• {loc.source}: {loc.folder}" for loc in plan.scan.searched]
            self.chat_view.empty_state.show_no_model(searched)
            self._set_status("No model found")
        else:
            params = self.settings.inference.apply(plan.tuned) if plan.tuned else None
            if plan.tuned:
                self.hardware_panel.show_tuning(plan.tuned, self.settings.inference)
            self.hardware_panel.show_choice(plan.reason)
            if plan.model is not None and plan.model.metadata is not None and params is not None:
                self.hardware_panel.show_memory_plan(
                    estimate_memory(plan.model.metadata, params.n_ctx or 4096, params.kv_type)
                )
            refusal = fit_refusal(plan.model, params) if plan.model is not None and params is not None else None
            if refusal:
                self.show_notice(refusal, "error")
                self._set_status("The chosen model does not fit in memory")
                self.modelLoadFailed.emit(refusal)
            else:
                self.load_model(path, params)
        if self._current_request == DEFERRED:  # a message typed while we were looking: send it now
            self._current_request = self._generate()
        self.planReady.emit(plan)
        if getattr(self, "_store_problem", None):
            self.show_notice(
                f"{self._store_problem.rstrip('.')}. Chats are kept in a temporary database until you quit; "
                "make the data folder writable to keep them.",
                "error",
            )
            self._store_problem = None

    def _plan_failed(self, error: Exception) -> None:
        self._planning = False
        self.show_notice(f"Could not examine this machine's models: {error}", "error")
        if self._current_request == DEFERRED:
            self._current_request = self._generate()

    def _on_calibrated(self, event: ThreadsCalibrated) -> None:
        plan = self.plan
        if plan is not None and plan.model is not None and plan.model.metadata is not None:
            cache = MachineCache.of_app(self.paths)
            cache.set_threads(plan.hardware, size_class(plan.model.metadata), event.tok_per_s, event.best)
        self.hardware_panel.show_calibration(event.tok_per_s, event.best, self.settings.inference.n_threads)
        self._set_status(f"Ready · {event.best} threads measured fastest for this model")

    # ------------------------------------------------------------------ engine events

    def _on_engine_event(self, event: Event) -> None:
        if self._closed:  # events queued before the window closed may still be delivered
            return
        if isinstance(event, TokenText):
            if event.request_id == self._current_request:
                self.chat_view.append_stream(event.text)
                self.session.reply_text(event.text)
                self.hardware_panel.token_arrived(event.tokens)
                if self.session.save_problem and not self._save_problem_shown:
                    self._report_save_problem()
        elif isinstance(event, GenerationStarted):
            if event.request_id == self._current_request:
                self._set_status("Reading the conversation…")
        elif isinstance(event, Finished):
            if self._reply_done(event.request_id, event.text, "complete", event.stats, None):
                self.hardware_panel.show_stats(event.stats)
                note = {"length": " (stopped at the token limit)", "context": " (the context window is full)"}
                self._set_status(f"Ready · {event.stats.gen_tok_per_s:.1f} tok/s{note.get(event.finish_reason, '')}")
            self.replyFinished.emit(event)
        elif isinstance(event, Cancelled):
            if self._reply_done(event.request_id, event.text, "stopped", event.stats, None):
                self._set_status("Stopped")
            self.replyCancelled.emit(event)
        elif isinstance(event, Failed):
            if self._reply_done(event.request_id, None, "failed", None, event.message):
                self.show_notice(event.message, "error")
                self._set_status("The reply failed — you can send again or change the model")
            self.replyFailed.emit(event.message)
        elif isinstance(event, PromptAdjusted):
            if event.request_id == self._current_request and self.session.conversation_id not in self._adjusted:
                self._adjusted.add(self.session.conversation_id)  # said once per chat
                self.show_notice(event.note)
        elif isinstance(event, HistoryTrimmed):
            self.session.apply_trim(event.dropped_messages)
            self._set_status(
                f"The {event.dropped_messages} oldest messages no longer fit the context window; "
                "the model does not see them any more (they stay here)"
            )
        elif isinstance(event, ThreadsCalibrated):
            self._on_calibrated(event)
        elif isinstance(event, ModelLoading):
            self.hardware_panel.show_model_loading(event.path.name)
            self.load_progress.show()
            self._set_status(f"Loading {event.path.name}…")
        elif isinstance(event, ModelLoaded):
            self.model_info = event.info
            self.load_progress.hide()
            self.hardware_panel.show_model(event.info)
            self._set_status(f"Ready · {event.info.name} loaded in {event.info.load_seconds:.1f} s")
            plan = self.plan
            if plan is not None and plan.needs_calibration and self.settings.inference.n_threads is None:
                self.bridge.worker.calibrate_threads(thread_candidates(plan.hardware))
            self.modelLoaded.emit(event.info)
        elif isinstance(event, ModelLoadFailed):
            self.model_info = None
            self.load_progress.hide()
            self.hardware_panel.show_model(None)
            self.show_notice(f"Could not load the model. {event.message}", "error")
            self._set_status("No model loaded")
            self.modelLoadFailed.emit(event.message)
        elif isinstance(event, ModelUnloaded):
            self.model_info = None
            self.hardware_panel.show_model(None)

    def _reply_done(self, request_id: int, text: str | None, status: str, stats: Any, error: str | None) -> bool:
        if request_id != self._current_request:
            return False
        model = self.model_info.name if self.model_info else None
        shown = self.session.messages
        final = self.session.end_reply(text, status, stats, model, error)
        widget = self.chat_view.end_stream(final.content if final else text, footer_for(final) if final else "")
        if widget is not None and final is not None:
            widget.set_meta(final.model, final.created_at)  # the model may have loaded after the reply began
        if widget is not None and final is not None and status == "failed" and not final.content.strip():
            self.chat_view.remove_message(widget)
        if self.session.messages is not shown:  # a failed regenerate or edit: the earlier versions are back
            self._show_session_messages()
        self._current_request = None
        self._set_busy(False)
        self._report_save_problem()
        self.refresh_sidebar()
        return True

    def _report_save_problem(self) -> None:
        """One notice while saving fails (not one per attempt); the text is kept and saved when the disk lets us."""
        problem = self.session.save_problem
        if problem and not self._save_problem_shown:
            self._save_problem_shown = True
            self.show_notice(
                f"Replies cannot be saved right now ({problem.rstrip('.')}). They stay here and are saved as soon as "
                "the disk allows it; free some space or check the data folder.",
                "error",
            )
            self._retry_timer.start()
        elif not problem and self._save_problem_shown:
            self._save_problem_shown = False
            self._retry_timer.stop()
            self._set_status("Saved: every reply is on disk again")

    def _retry_saving(self) -> None:
        if self.session.retry_pending():
            self._report_save_problem()

    # ------------------------------------------------------------------ state

    def _set_busy(self, busy: bool) -> None:
        self.send_button.setEnabled(not busy)
        self.stop_button.setEnabled(busy)

    def _set_status(self, text: str) -> None:
        self.status_label.setText(text)

    def closeEvent(self, event: QCloseEvent) -> None:
        if self._closed:
            super().closeEvent(event)
            return
        self._closed = True
        save_window_state(self.paths.config, self, self.splitter)
        if self.models_dialog is not None:
            self.models_dialog.pause_all()
        self.bridge.worker.cancel()
        self.bridge.shutdown(timeout=10.0)
        self.bridge.event.disconnect(self._on_engine_event)
        if self.session.replying:  # the worker is gone: keep what was written as a stopped reply
            self.session.end_reply(None, "stopped")
        if not self.session.retry_pending():
            log.error("%d reply(ies) could not be saved before quitting", self.session.unsaved_count)
        self.store.close()
        super().closeEvent(event)
