"""The main window: conversations on the left, the chat in the middle, the machine and model on the right.

The window lays out the widgets and its menus and wires the controllers to each other through signals (it is
their one mediator; no controller sets another's fields): ``ChatController`` (sending, the turn, engine events),
``StartupController`` (choosing and loading the model), ``ConversationsController`` (the list of chats, export
and import), ``ServersController`` (server models, the local API) and ``DocumentsController`` (collections and
retrieval). The decisions themselves live in the Qt-free core.
"""

from __future__ import annotations

import dataclasses
import logging
from pathlib import Path

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QCloseEvent, QShowEvent
from PySide6.QtWidgets import (
    QApplication,
    QDialog,
)

from fara_desktop import APP_NAME
from fara_desktop.app.core import AppCore
from fara_desktop.app.jobs import Stage
from fara_desktop.app.tool_advice import cannot_call_tools, no_tools_words
from fara_desktop.engine.backend import Backend
from fara_desktop.engine.types import Event, ModelInfo, ModelSource
from fara_desktop.files.paths import AppPaths, app_paths
from fara_desktop.models.discovery import scan_folder
from fara_desktop.planning.catalog_fit import assess_catalog_here
from fara_desktop.planning.params import LoadParams
from fara_desktop.planning.planner import StartupPlan
from fara_desktop.settings import RemoteChoice, Settings
from fara_desktop.ui.controllers.catalog_advice import CatalogAdvice
from fara_desktop.ui.controllers.chat_controller import ChatController
from fara_desktop.ui.controllers.chat_drafts import ChatDrafts
from fara_desktop.ui.controllers.conversations_controller import ConversationsController
from fara_desktop.ui.controllers.documents_controller import DocumentsController
from fara_desktop.ui.controllers.pictures_controller import PicturesController
from fara_desktop.ui.controllers.servers_controller import ServersController
from fara_desktop.ui.controllers.startup_controller import StartupController
from fara_desktop.ui.dialogs.models_dialog import GetModelsDialog
from fara_desktop.ui.dialogs.passage_dialog import PassageDialog
from fara_desktop.ui.dialogs.settings_dialog import SettingsDialog
from fara_desktop.ui.dialogs.shortcuts_dialog import ShortcutsDialog
from fara_desktop.ui.engine_bridge import EngineBridge
from fara_desktop.ui.theme import apply_appearance
from fara_desktop.ui.widgets.file_dialogs import FolderMemory
from fara_desktop.ui.window_layout import WindowLayout
from fara_desktop.ui.window_menus import build_menus, shortcuts_of, show_about
from fara_desktop.ui.window_state import (
    first_geometry,
    keep_on_screen,
    restore_window_state,
    save_window_state,
    sizes_to_keep,
)
from fara_desktop.vocabulary.sampling import SamplingParams
from fara_desktop.vocabulary.sources import Source

log = logging.getLogger(__name__)

INTERRUPTED_NOTICE = (
    "The app ended last time while it wrote a reply: what was saved of it is shown. Regenerate "
    "(Ctrl+Shift+R) writes it again."
)


class MainWindow(WindowLayout):
    """Lays out the chat, the conversation list and the hardware panel, and wires them to the controllers."""

    toolsChanged = Signal()  # an MCP server started, stopped or failed (emitted on the hub's thread)

    def __init__(
        self,
        backend: Backend | None = None,
        sampling: SamplingParams | None = None,
        paths: AppPaths | None = None,
        settings: Settings | None = None,
    ) -> None:
        super().__init__()
        self.setWindowTitle(APP_NAME)
        self.setGeometry(first_geometry(self.screen().availableGeometry()))
        self._placed = False
        self.paths = paths or app_paths().ensure()
        self.folders = FolderMemory(self.paths.config)  # where each file dialog opens
        self._closed = False
        self.late_jobs: list[str] = []  # what had not ended when the quit's time was up
        self.models_dialog: GetModelsDialog | None = None
        # MCP servers run on the hub's own thread; it reports changes there, the window hears them on its own.
        self.core = AppCore(
            self.paths,
            settings or Settings(),
            backend,
            self.toolsChanged.emit,
            lambda problem: self.show_notice(problem, "error"),
        )
        self.store, self.session, self.chat_states = self.core.store, self.core.session, self.core.chat_states
        self.bridge = EngineBridge(self.core.start_engine, self)
        self._build(self.session.system_prompt)
        self.chat = ChatController(self, self.core, self.bridge, sampling or self.settings.sampling.params())
        self.startup = StartupController(self, self.bridge)
        self.startup.measure_kernels = self.core.kernel_speeds.measure_after
        self.startup.kernel_speed_seen = self.core.kernel_speeds.reply_seen
        self.chat.replyFinished.connect(self.startup.reply_finished)
        self.startup.planStarted.connect(self.chat.plan_started)
        self.startup.planSettled.connect(self.chat.plan_settled)
        self.startup.loadRequested.connect(self.chat.load_model)
        self.startup.modelRefused.connect(self.chat.refuse_model)
        self.chat.modelLoaded.connect(self.startup.calibrate_if_needed)
        self.chat.modelLoaded.connect(self.startup.model_loaded)
        self.chat.modelLoadFailed.connect(self.startup.model_load_failed)
        self.startup.keep_choice = self._keep_model_choice
        self.startup.store_problem = self.core.store_problem
        self.conversations = ConversationsController(
            self, self, self.store, self.session, self.core.delete_chat, self.core.jobs
        )
        self.conversations.pictures = self.core.pictures
        self.conversations.leavingChat.connect(self.chat.leave_chat)
        self.conversations.enteredChat.connect(self.chat.enter_chat)
        self.drafts = ChatDrafts(self.composer, self.picture_tray, self.core.pictures)  # each chat's unsent words
        self.conversations.leavingChat.connect(lambda: self.drafts.leave(self.session.conversation_id))
        self.conversations.enteredChat.connect(lambda _shown: self.drafts.enter(self.session.conversation_id))
        self.api_keys = self.core.api_keys
        self.servers = ServersController(self, self.bridge.worker, self.api_keys, self.chat.sampling, self.core.jobs)
        self.servers.pictures = self.core.api_picture_files
        self.servers.apiRequestsChanged.connect(self.chat.set_api_requests)
        self.servers.apiRequestsChanged.connect(self.hardware_panel.show_api_requests)
        self.chat.modelLoaded.connect(self.servers.warn_if_unencrypted)
        self.advice = CatalogAdvice(self.paths, lambda: self.settings)
        self.chat.modelLoaded.connect(self.advice.models_that_call_tools)
        self.advice.toolModels.connect(lambda lines: setattr(self.chat.turns, "tool_suggestions", lines))
        self.chat.getModelsRequested.connect(self.open_models_dialog)
        self.startup.remote_choice = self.servers.chosen_remote
        self.documents = DocumentsController(
            self,
            self,
            self.session,
            (self.chat.turn.busy_event, self.chat.read_ahead.reading),
            self.core.embedding,
            self.core.jobs,
        )
        self.chat.retrieve = self.documents.retrieve
        self.pictures = PicturesController(self, self.core.pictures, self)
        self.pictures.prompt_speed = lambda: self.chat.read_ahead.speed.tok_per_s
        self.chat.read_ahead_allowed = self.core.read_ahead_allowed
        self.documents.readable_tokens = lambda: self.core.readable_passage_tokens(self.chat.read_ahead.speed.tok_per_s)
        self.servers.embedder_source = self.documents.embedder
        self.tools_hub, self.tool_box = self.core.tools_hub, self.core.tool_box
        self.chat.use_tools(self.tool_box)
        self.toolsChanged.connect(self.chat.show_tools_choice)
        if self.core.tools_problem:
            self.show_notice(self.core.tools_problem, "error")
        if self.core.interrupted_chat is not None:
            self.conversations.open_conversation(self.core.interrupted_chat)
            self.show_notice(INTERRUPTED_NOTICE)
        self._connect()
        self.bridge.engine_event.connect(self._on_engine_event)
        # The signals tests, the smoke check and the benchmark wait on.
        self.modelLoaded = self.chat.modelLoaded
        self.modelLoadFailed = self.chat.modelLoadFailed
        self.replyFinished = self.chat.replyFinished
        self.replyCancelled = self.chat.replyCancelled
        self.replyFailed = self.chat.replyFailed
        self.planReady = self.startup.planReady
        restore_window_state(self.paths.config, self, self.splitter)
        for index in (0, 2):
            self._give_room(index)
        self.refresh_sidebar()
        self.servers.apply_api_settings(self.settings.local_api)

    def _connect(self) -> None:
        chat, conversations = self.chat, self.conversations
        self.sidebar.newRequested.connect(conversations.new_chat)
        self.sidebar.conversationChosen.connect(conversations.open_conversation)
        self.sidebar.renameRequested.connect(conversations.rename_conversation)
        self.sidebar.deleteRequested.connect(conversations.delete_conversation)
        self.sidebar.searchChanged.connect(lambda _text: conversations.refresh_sidebar())
        self.system_prompt.editingFinished.connect(lambda: self.session.set_system_prompt(self.system_prompt.text()))
        self.chat_view.copyRequested.connect(chat.copy_message)
        self.chat_view.editRequested.connect(chat.edit_message)
        self.chat_view.regenerateRequested.connect(chat.regenerate)
        self.chat_view.branchRequested.connect(chat.branch_off)
        self.chat_view.versionRequested.connect(chat.switch_version)
        chat.branchCreated.connect(conversations.open_conversation)
        self.chat_view.sourceRequested.connect(self.show_source)
        self.chat_view.pictureRequested.connect(self.pictures.show_picture)
        self.pictures.changed.connect(chat.read_ahead.pictures_changed)
        chat.modelLoaded.connect(self.pictures.model_changed)
        self.startup.planReady.connect(self.pictures.use_plan)
        chat.chatChanged.connect(self.documents.show_chat_choice)
        self.startup.planReady.connect(self.documents.use_plan)
        self.startup.planReady.connect(self.advice.download)
        self.advice.downloadSuggested.connect(self.chat_view.empty_state.suggest_download)
        self.chat_view.empty_state.suggestionDismissed.connect(self.advice.download_dismissed)
        self.thinking_box.toggled.connect(chat.set_thinking)
        self.chat_view.empty_state.openModelRequested.connect(self.choose_model_file)
        self.chat_view.empty_state.addFolderRequested.connect(self.add_models_folder)
        self.chat_view.empty_state.getModelsRequested.connect(self.open_models_dialog)
        self.composer.submitted.connect(chat.send)
        self.composer.stopRequested.connect(chat.stop)
        self.send_button.clicked.connect(chat.send)
        self.stop_button.clicked.connect(chat.stop)
        self.stop_loading_button.clicked.connect(chat.stop_loading)
        self.task_progress.stopRequested.connect(conversations.stop_task)
        self._build_menus()

    def _build_menus(self) -> None:
        build_menus(self)

    def shortcuts(self) -> list[tuple[str, str]]:
        """(what, keys) of every action with a key, read from the actions themselves (so the list is never stale)."""
        return shortcuts_of(self, self.tool_approval)

    def show_shortcuts(self) -> QDialog:
        dialog = ShortcutsDialog(self.shortcuts(), self)
        dialog.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)  # one more each time it is opened, else
        dialog.show()
        return dialog

    def show_about(self) -> None:
        show_about(self, self.paths.data)

    # ------------------------------------------------------------------ what the screen offers its controllers

    def set_status(self, text: str) -> None:
        self.status_label.setText(text)

    def show_notice(self, text: str, role: str = "notice") -> None:
        """About the app, not the chat: in the notice bar (with its history), never in the transcript."""
        self.notice_bar.add(text, role)

    def withdraw_notice(self, text: str) -> None:
        self.notice_bar.withdraw(text)

    def refresh_sidebar(self) -> None:
        self.conversations.refresh_sidebar()

    def refresh_conversation(self, conversation_id: int | None) -> None:
        self.conversations.refresh_conversation(conversation_id)

    # ------------------------------------------------------------------ the controllers' actions, by name

    @property
    def settings(self) -> Settings:
        """The settings in use: the core's."""
        settings: Settings = self.core.settings
        return settings

    @property
    def plan(self) -> StartupPlan | None:
        return self.startup.plan

    @property
    def model_info(self) -> ModelInfo | None:
        return self.chat.model_info

    @property
    def sampling(self) -> SamplingParams:
        return self.chat.sampling

    @sampling.setter
    def sampling(self, sampling: SamplingParams) -> None:
        self.chat.sampling = sampling
        self.servers.sampling = sampling  # the local API's default sampling

    def start_auto(self, preferred: Path | None = None) -> None:
        self.startup.start_auto(preferred)

    def load_model(self, path: ModelSource | str, params: LoadParams | None = None) -> None:
        self.chat.load_model(path, params)

    def send(self) -> None:
        self.chat.send()

    def stop(self) -> None:
        self.chat.stop()

    def new_chat(self) -> None:
        self.conversations.new_chat()

    def open_conversation(self, conversation_id: int) -> None:
        self.conversations.open_conversation(conversation_id)

    def rename_conversation(self, conversation_id: int) -> None:
        self.conversations.rename_conversation(conversation_id)

    def delete_conversation(self, conversation_id: int, confirm: bool = True) -> None:
        self.conversations.delete_conversation(conversation_id, confirm)

    def show_source(self, source: Source) -> PassageDialog:
        """A citation was clicked: its passage, with its file, page or lines, and a button to open the file."""
        dialog = PassageDialog(source, self)
        dialog.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
        dialog.open()
        return dialog

    def bring_to_front(self) -> None:
        """Another launch asked for the window: un-minimise it and give it the focus."""
        self.setWindowState(self.windowState() & ~Qt.WindowState.WindowMinimized)
        self.show()
        self.raise_()
        self.activateWindow()

    # ------------------------------------------------------------------ models and settings

    def choose_model_file(self) -> None:
        """Model ▸ Open: the file becomes the user's choice, loaded now and at the next start."""
        path = self.folders.open_file(self, "models", "Open a GGUF model", "GGUF models (*.gguf)")
        if path:
            self.use_model_file(Path(path))

    def add_models_folder(self) -> None:
        folder = self.folders.folder(self, "models", "Add a models folder")
        if folder:
            folders = [*self.settings.extra_model_folders, folder]
            self.apply_settings(dataclasses.replace(self.settings, extra_model_folders=folders), None)

    def open_models_dialog(self) -> GetModelsDialog:
        """The catalog and downloads; one dialog for the window's lifetime so downloads go on while it is hidden."""
        if self.models_dialog is None:
            paths, folders = self.paths, [Path(f) for f in self.settings.extra_model_folders]
            self.models_dialog = GetModelsDialog(lambda: assess_catalog_here(paths.models, paths.cache, folders), self)
            self.models_dialog.modelReady.connect(self.use_model_file)
            self.models_dialog.downloaded.connect(lambda _path: self.startup.rescan())
            self.core.jobs.service("downloads", Stage.INTAKE, self.models_dialog.pause_all)
        self.models_dialog.show()
        self.models_dialog.raise_()
        return self.models_dialog

    def _keep_model_choice(self, path: Path) -> None:
        self.core.apply_settings(dataclasses.replace(self.settings, model_path=str(path)))

    def use_model_file(self, path: Path) -> None:
        """Load a model the user just opened or downloaded; once loaded, it is their choice for the next start."""
        self.startup.choose(path)

    def open_settings(self, page: str | None = None) -> SettingsDialog:
        info = self.chat.model_info
        note = no_tools_words(info, self.chat.turns.tool_suggestions) if info and cannot_call_tools(info) else ""
        dialog = SettingsDialog(
            self.settings,
            self.plan,
            self.api_keys,
            self,
            self.chat_states,
            self.session.conversation_id,
            self.tools_hub.states,
            self.tools_hub.restart,
            tools_note=note,
            folders=self.folders,
            forget_states=self.core.forget_saved_readings,
            api_clients=self.servers.api_clients,
            scan_folder=lambda folder: scan_folder(folder, self.paths.cache),
        )
        self.toolsChanged.connect(dialog.tools_page.refresh)
        if page:
            dialog.show_page(page)
        dialog.accepted.connect(lambda: self._settings_accepted(dialog))
        dialog.finished.connect(lambda _result: self._settings_closed(dialog))
        dialog.open()
        return dialog

    def _settings_closed(self, dialog: SettingsDialog) -> None:
        """The dialog's link to the tool servers goes, and the dialog itself once its answer has been read."""
        self.toolsChanged.disconnect(dialog.tools_page.refresh)
        dialog.deleteLater()

    def _settings_accepted(self, dialog: SettingsDialog) -> None:
        self.servers.store_keys(dialog.servers_page.key_changes, dialog.local_api_page)
        settings = dataclasses.replace(dialog.settings(), model_path=self.settings.model_path)  # kept once loaded
        self.apply_settings(settings, dialog.chosen_model(), dialog.chosen_remote())

    def apply_settings(
        self, settings: Settings, chosen_model: str | None, chosen_remote: RemoteChoice | None = None
    ) -> None:
        applied = self.core.apply_settings(settings)
        for problem in (applied.save_problem, applied.tools_problem):
            if problem:
                self.show_notice(problem, "error")
        self.sampling = settings.sampling.params()  # the chats' and the local API's defaults
        app = QApplication.instance()
        if isinstance(app, QApplication) and applied.appearance_changed:
            apply_appearance(app, settings.theme, settings.font_size)
        self.servers.apply_api_settings(settings.local_api)
        if applied.tools_changed:
            self.chat.show_tools_choice()
            if self.chat.model_info is not None:
                self.advice.models_that_call_tools(self.chat.model_info)
        remote = self.servers.remote_model(chosen_remote) if chosen_remote else None
        if remote is not None:
            self.load_model(remote)
            return
        if chosen_model:
            self.startup.choose(Path(chosen_model))
        elif chosen_model is not None or applied.reload:
            self.start_auto()

    # ------------------------------------------------------------------ engine events and closing

    def _on_engine_event(self, event: Event) -> None:
        if self._closed:  # events queued before the window closed may still be delivered
            return
        # Each event type has one owner: the calibration's belong to the start-up controller, the rest to the chat.
        owner = self.startup if isinstance(event, StartupController.ENGINE_EVENTS) else self.chat
        owner.on_engine_event(event)

    def showEvent(self, event: QShowEvent) -> None:
        super().showEvent(event)
        if not self._placed:  # the frame is known now: a remembered geometry from another screen is brought back
            self._placed = True
            keep_on_screen(self)

    def closeEvent(self, event: QCloseEvent) -> None:
        if self._closed:
            super().closeEvent(event)
            return
        self._closed = True
        hidden = {i for i, pane in ((0, self.left_column), (2, self.panel_scroll)) if not pane.isVisibleTo(self)}
        save_window_state(self.paths.config, self, self.splitter, sizes_to_keep(self.splitter.sizes(), hidden))
        # Gone at once: stopping a reply, keeping the chat's reading and freeing the model take seconds, and a window
        # left standing on "Writing the answer…" meanwhile reads as a hang. Nothing is lost: the reply is kept as
        # stopped below, as it would be on screen.
        self.hide()
        self.bridge.engine_event.disconnect(self._on_engine_event)
        # Every job in its stage's order (``app.jobs``): the API and downloads, documents, imports and a reply's tool
        # calls (its round kept as stopped), the tool servers, the engine, the embedder.
        self.late_jobs = self.core.close(save_pending_reply=self.chat.settle_pending_reply)
        super().closeEvent(event)
