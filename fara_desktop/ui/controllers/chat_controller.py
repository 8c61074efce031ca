"""The chat on screen: the view of the open chat's turns (``app.chat_turns``, Qt-free), the message actions, the
model's loading, the tools menu and the Think switch.

The turns decide what is kept and what the engine is asked; this controller shows it (bubbles, the status line,
the busy buttons) and turns clicks and keys into the turns' intents. An event for a request that is no longer
current (the user stopped it, switched chats) only reaches the signals, never the chat on screen.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Protocol

from PySide6.QtCore import QObject, QTimer, Signal
from PySide6.QtGui import QGuiApplication
from PySide6.QtWidgets import QCheckBox, QLabel, QProgressBar, QPushButton, QToolButton

from fara_desktop.app.chat_turns import ReplyEnd
from fara_desktop.app.core import AppCore
from fara_desktop.app.jobs import Stage
from fara_desktop.chats.records import StoredMessage
from fara_desktop.chats.storage import StorageError
from fara_desktop.chats.tool_rounds import ToolRound
from fara_desktop.chats.turn import PendingReply, TurnPhase
from fara_desktop.engine.errors import cannot_see
from fara_desktop.engine.types import (
    Cancelled,
    ConversationForgotten,
    Event,
    Failed,
    Finished,
    LoadProgress,
    ModelInfo,
    ModelLoaded,
    ModelLoadFailed,
    ModelLoading,
    ModelSource,
    ModelUnloaded,
    ReadAheadProgress,
    RemoteModel,
    TokenText,
)
from fara_desktop.planning.params import LoadParams
from fara_desktop.text.untrusted import one_line
from fara_desktop.tools.tool_box import ToolBox
from fara_desktop.ui.after_paint import AfterPaint
from fara_desktop.ui.controllers.model_loading import ModelLoadingView
from fara_desktop.ui.controllers.read_ahead import DraftPrompt, Retriever, TypingReadAhead
from fara_desktop.ui.controllers.tool_flow import ToolFlow
from fara_desktop.ui.controllers.tools_menu import ToolsMenu
from fara_desktop.ui.engine_bridge import EngineBridge
from fara_desktop.ui.widgets.chat_view import ChatView, ShownMessage, footer_for, thinking_seconds
from fara_desktop.ui.widgets.composer import Composer
from fara_desktop.ui.widgets.hardware_panel import HardwarePanel
from fara_desktop.ui.widgets.message_widget import MessageWidget
from fara_desktop.ui.widgets.picture_thumbnails import PictureTray
from fara_desktop.ui.widgets.tool_approval import ToolApprovalBar
from fara_desktop.vocabulary.messages import ChatMessage
from fara_desktop.vocabulary.sampling import SamplingParams

SAVE_RETRY_MS = 5000


class ChatScreen(Protocol):
    """The widgets the chat controller drives (the main window provides them)."""

    chat_view: ChatView
    composer: Composer
    picture_tray: PictureTray
    hardware_panel: HardwarePanel
    edit_banner: QLabel
    wait_hint: QLabel
    send_button: QPushButton
    stop_button: QPushButton
    thinking_box: QCheckBox
    load_progress: QProgressBar
    stop_loading_button: QPushButton
    tool_approval: ToolApprovalBar
    tools_button: QToolButton

    def set_status(self, text: str) -> None: ...
    def show_notice(self, text: str, role: str = "notice") -> None: ...
    def withdraw_notice(self, text: str) -> None: ...
    def refresh_conversation(self, conversation_id: int | None) -> None: ...


class ChatController(QObject):
    """Sends messages and turns engine events into the chat on screen and the saved conversation."""

    modelLoaded = Signal(object)  # ModelInfo
    modelLoadFailed = Signal(str)
    replyFinished = Signal(object)  # Finished
    replyCancelled = Signal(object)  # Cancelled
    replyFailed = Signal(str)
    getModelsRequested = Signal()  # the Tools menu's way to models that call tools
    branchCreated = Signal(int)  # a conversation "Branch from here" made; the window opens it
    chatChanged = Signal()  # another conversation (or a new one) is on screen

    def __init__(self, screen: ChatScreen, core: AppCore, bridge: EngineBridge, sampling: SamplingParams) -> None:
        """``core``: the application's (its open chat and its turns, which this controller shows)."""
        super().__init__()
        self.screen = screen
        self.session = core.session
        self.bridge = bridge
        self.turns = core.open_turns(self, sampling)
        core.jobs.service("a reply's tool calls", Stage.PRODUCERS, self.stop_tools)  # before the servers go
        self.turn = self.turns.turn  # its phase; its busy event is read by the indexing thread
        self.turns.prepared = lambda prompt: self.read_ahead.grounded_for(prompt)
        self.turns.prompt_speed = lambda: self.read_ahead.speed.tok_per_s
        self.editing: MessageWidget | None = None
        # Whether reading ahead while typing is allowed now (the window: the setting, and the battery).
        self.read_ahead_allowed: Callable[[], bool] = lambda: True
        self.read_ahead = TypingReadAhead(
            screen.composer, screen.wait_hint, bridge, self._draft_prompt, lambda: self.read_ahead_allowed()
        )
        self._save_problem_shown = False
        self._unseen = ""  # the notice that the model in use cannot see the pictures attached
        self.tool_flow: ToolFlow | None = None  # set by ``use_tools`` once the window has a tool box
        self.tools_menu = ToolsMenu(
            screen.tools_button, self.turns, lambda: self.tool_flow, screen.show_notice, self.getModelsRequested.emit
        )
        self.loading = ModelLoadingView(
            screen,
            bridge,
            self.turns,
            self.read_ahead.speed,
            self.session,
            self,
            self.modelLoaded.emit,
            self.modelLoadFailed.emit,
        )
        self._retry_timer = QTimer(self)
        self._retry_timer.setInterval(SAVE_RETRY_MS)
        self._retry_timer.timeout.connect(self.retry_saving)
        self._handlers: dict[type, Callable[[Any], None]] = {
            Finished: self._on_finished,
            ModelLoading: self.loading.on_loading,
            LoadProgress: self.loading.on_progress,
            ModelLoaded: self.loading.on_loaded,
            ModelLoadFailed: self.loading.on_load_failed,
            ModelUnloaded: self.loading.on_unloaded,
            ReadAheadProgress: self.read_ahead.on_progress,
            ConversationForgotten: self._on_conversation_forgotten,
        }
        self.set_busy(False)

    @property
    def sampling(self) -> SamplingParams:
        return self.turns.sampling

    @sampling.setter
    def sampling(self, sampling: SamplingParams) -> None:
        self.turns.sampling = sampling

    @property
    def model_info(self) -> ModelInfo | None:
        return self.turns.model_info

    @property
    def tool_choice(self) -> str:
        return self.turns.tool_choice

    @property
    def retrieve(self) -> Retriever | None:
        """Adds the passages of the chat's document collections to the prompt (the documents controller's): searches
        on another thread and calls back with the grounded prompt; False when the chat uses no documents."""
        return self.turns.retrieve

    @retrieve.setter
    def retrieve(self, retriever: Retriever | None) -> None:
        self.turns.retrieve = retriever
        self.read_ahead.retrieve = retriever  # the passages are searched for, and read, on the typing pause too

    def _draft_prompt(self, draft: str) -> DraftPrompt | None:
        """What Enter would send for ``draft``, when it would go to a model on this computer now."""
        info = self.model_info
        pictures = self.session.attached(self.screen.picture_tray.digests())
        if self.turn.busy or self.editing is not None or info is None or info.remote or not (draft or pictures):
            return None
        if pictures and not info.vision:
            return None  # it would be refused: the tray says why
        messages = [*self.session.prompt_messages(), ChatMessage("user", draft, pictures=pictures)]
        return DraftPrompt(
            messages,
            self.session.conversation_id,
            self.session.thinking,
            self.sampling,
            info.n_ctx,
            self.turns.tool_offer(quiet=True),
        )

    # ------------------------------------------------------------------ what the user does

    def load_model(self, path: ModelSource | str, params: LoadParams | None = None, name: str = "") -> None:
        """``name``: what the model was discovered as (an Ollama tag); "" → from the file."""
        self.bridge.load_model(path if isinstance(path, RemoteModel) else Path(path), params, name)

    def send(self) -> None:
        screen = self.screen
        text = screen.composer.toPlainText().strip()
        pictures = screen.picture_tray.digests()
        if not (text or pictures) or self.turn.busy:
            return
        info = self.model_info
        if pictures and info is not None and not info.vision:
            self._unseen = cannot_see(info.name, info.vision_problem)
            screen.show_notice(self._unseen, "error")  # text and pictures stay; withdrawn once a model sees
            return
        self.read_ahead.stop(sent=True)
        replacing = None
        if self.editing is not None:  # the edited text becomes a new version of that message
            replacing = self._message_index(self.editing, screen.chat_view.messages().index(self.editing))
            screen.chat_view.remove_from(self.editing)
            self.cancel_edit()
        screen.composer.clear()
        screen.picture_tray.clear()
        try:
            self.turns.send(text, replacing, pictures)
        except StorageError as exc:
            screen.composer.setPlainText(text)  # nothing is lost: the text goes back where it was typed
            for picture in self.session.attached(pictures):
                screen.picture_tray.add(picture.digest, picture.path)
            self.show_session_messages()
            screen.show_notice(f"Your message could not be saved, so it was not sent: {exc}", "error")

    def regenerate(self, widget: MessageWidget) -> None:
        if self.turn.busy or widget.role != "assistant":
            return
        index = self._message_index(widget, self.screen.chat_view.messages().index(widget))
        self.screen.chat_view.remove_from(widget)  # its button with it: the focus goes back to the message box
        self.turns.regenerate(index)  # the old reply stays a version
        self.screen.composer.setFocus()

    def switch_version(self, widget: MessageWidget, step: int) -> None:
        """‹ / ›: show another version of a message, and the conversation that follows it."""
        if self.turn.busy or widget.message_id is None:
            return
        ids = [m.id for m in self.session.messages]
        if widget.message_id in ids and self.session.switch_version(ids.index(widget.message_id), step):
            self.cancel_edit()
            self.show_session_messages()

    def branch_off(self, widget: MessageWidget) -> None:
        """ "Branch from here": a new chat with the conversation up to this message, opened at once. At one of the
        user's own questions, the new chat stops before it and the question waits in the message box, with its
        pictures, to be edited and sent (a branch that ended on an unanswered question had nothing to act on)."""
        ids = [m.id for m in self.session.messages]
        if self.turn.busy or widget.message_id not in ids:
            return
        question = widget.role == "user"
        try:
            branch = self.session.branch_off(ids.index(widget.message_id), before=question)
        except StorageError as exc:
            self.screen.show_notice(f"The branch could not be saved: {exc}", "error")
            return
        self.branchCreated.emit(branch)
        summary = self.session.store.conversation(branch)
        title = one_line(summary.title, 80) if summary else "a new chat"
        if question:
            self.screen.composer.setPlainText(widget.text)
            for path in widget.pictures.paths:
                self.screen.picture_tray.add(path.stem, path)
            self.screen.composer.setFocus()
        again = ": your question is in the message box, to change and send" if question else ""
        self.screen.set_status(f"Branched into “{title}”{again}; the original chat is unchanged")

    def _version_of(self, index: int) -> tuple[int, int]:
        place = self.session.place(index)
        return place.index, place.count

    def edit_message(self, widget: MessageWidget) -> None:
        if self.turn.busy:
            return
        self.editing = widget
        self.screen.composer.setPlainText(widget.text)
        self.screen.picture_tray.clear()
        for path in widget.pictures.paths:  # an edit keeps the message's pictures unless they are removed
            self.screen.picture_tray.add(path.stem, path)
        self.screen.edit_banner.show()
        self.screen.composer.setFocus()

    def cancel_edit(self) -> None:
        if self.editing is not None:
            self.editing = None
            self.screen.edit_banner.hide()
            self.screen.composer.clear()
            self.screen.picture_tray.clear()

    def copy_message(self, widget: MessageWidget) -> None:
        QGuiApplication.clipboard().setText(widget.text)
        self.screen.set_status("Copied")

    # ------------------------------------------------------------------ the same actions from the keyboard

    def _last(self, role: str) -> MessageWidget | None:
        return next((w for w in reversed(self.screen.chat_view.messages()) if w.role == role), None)

    def act_on_last(self, action: str) -> None:
        """A message action on the newest message it applies to (the keyboard's way to the buttons): "copy" and
        "branch" the newest message, "edit" your last message, "regenerate", "previous" and "next" the last
        reply."""
        widget = self._last("user") if action == "edit" else self._last("assistant")
        if action in ("copy", "branch"):
            chat = [w for w in self.screen.chat_view.messages() if w.role in ("user", "assistant")]
            widget = chat[-1] if chat else None
        if widget is None:
            self.screen.set_status("No message to act on yet")
            return
        if action == "copy":
            self.copy_message(widget)
        elif action == "branch":
            self.branch_off(widget)
        elif action == "edit":
            self.edit_message(widget)
        elif action == "regenerate":
            self.regenerate(widget)
        elif action in ("previous", "next"):
            self.switch_version(widget, -1 if action == "previous" else 1)

    def escape(self) -> None:
        if self.turn.busy:
            self.stop()
        elif self.editing is not None:
            self.cancel_edit()

    def stop(self) -> None:
        self.read_ahead.stop()  # Esc or Stop: the CPU comes back from reading ahead too
        self.turns.stop()
        self.screen.composer.setFocus()  # the next words go there (the Stop button, or nothing, held the focus)

    def show_session_messages(self) -> None:
        self.screen.chat_view.set_messages([self._shown(index, m) for index, m in enumerate(self.session.messages)])

    def _shown(self, index: int, m: StoredMessage) -> ShownMessage:
        return ShownMessage(
            m.role,
            m.content,
            footer_for(m),
            m.model,
            m.id,
            m.created_at,
            m.reasoning,
            thinking_seconds(m),
            self._version_of(index),
            m.sources,
            m.tool_rounds,
            self._picture_files(m.pictures),
        )

    def _picture_files(self, digests: tuple[str, ...]) -> tuple[Path, ...]:
        return tuple(p.path for p in self.session.attached(digests))

    def plan_started(self) -> None:
        self.turns.plan_started()

    def plan_settled(self) -> None:
        self.turns.plan_settled()

    def _message_index(self, widget: MessageWidget, fallback: int) -> int:
        ids = [m.id for m in self.session.messages]
        return ids.index(widget.message_id) if widget.message_id in ids else fallback

    def settle_pending_reply(self) -> None:
        self.turns.settle_pending_reply()

    # ------------------------------------------------------------------ tools

    def use_tools(self, box: ToolBox) -> None:
        """The window's tool box: chats may now offer its tools, and every call goes through the approval bar."""
        self.tool_flow = ToolFlow(
            box,
            self.screen.tool_approval,
            lambda: self.session.tools,
            self.turns.tool_round_done,
            self.screen.set_status,
        )
        self.turns.tools = self.tool_flow
        self.show_tools_choice()

    def stop_tools(self) -> None:
        """The window is closing: a reply waiting on its tool calls ends as stopped, its round kept."""
        if self.turn.phase is TurnPhase.TOOLS:
            self.stop()

    def use_tool(self, key: str, used: bool) -> None:
        self.tools_menu.use_tool(key, used)

    def show_tools_choice(self) -> None:
        self.tools_menu.show_choice()

    def leave_chat(self) -> None:
        """Another chat is about to open: the reply is stopped and an edit dropped."""
        self.stop()
        self.cancel_edit()

    def enter_chat(self, show_messages: bool) -> None:
        """Another chat (or a new one) is open: its switches, and its messages unless it is new."""
        self.chat_changed()
        if show_messages:
            self.show_session_messages()

    def refuse_model(self, reason: str) -> None:
        """The start-up refused to load the model (it would not fit): said to the next message, and signalled."""
        self.no_model_because(reason)
        self.modelLoadFailed.emit(reason)

    def chat_changed(self) -> None:
        """Another conversation is open: the per-chat switches show its choices."""
        self.sync_thinking_switch()
        self.show_tools_choice()
        self.chatChanged.emit()

    def sync_thinking_switch(self) -> None:
        """The Think switch shows this chat's choice, and only for a model whose template has the switch."""
        box = self.screen.thinking_box
        box.blockSignals(True)
        box.setChecked(self.session.thinking)
        box.blockSignals(False)
        box.setVisible(bool(self.model_info and self.model_info.thinking_switch))

    def set_thinking(self, thinking: bool) -> None:
        """The chat's own switch, for models whose template can turn reasoning off (Qwen3's ``enable_thinking``)."""
        try:
            self.session.set_thinking(thinking)
        except StorageError as exc:
            self.screen.show_notice(f"The setting could not be saved: {exc}", "error")

    # ------------------------------------------------------------------ engine events

    def on_engine_event(self, event: Event) -> None:
        handler = self._handlers.get(type(event))
        if handler is not None:
            handler(event)
        self.turns.on_event(event)

    def _on_finished(self, event: Finished) -> None:
        self.read_ahead.speed.observe(event.stats)

    def _on_conversation_forgotten(self, event: ConversationForgotten) -> None:
        if event.failed:  # the chat is gone from the list; a copy of its reading may be left on disk
            self.screen.show_notice(
                "A deleted chat's saved reading could not be removed from disk; the log file says where it is.", "error"
            )

    def set_api_requests(self, active: int) -> None:
        """Other apps' requests (local API) waiting or running in the engine's queue: a reply may wait for them."""
        self.turns.api_requests = active

    def no_model_because(self, reason: str) -> None:
        """What a message sent without a model will be told (a load that failed, a model that does not fit)."""
        self.turns.no_model_because(reason)
        self.screen.hardware_panel.show_model(None)
        self.sync_thinking_switch()

    # ------------------------------------------------------------------ the turns' view

    def after_paint(self, step: Callable[[], None]) -> None:
        AfterPaint(self.screen.chat_view.viewport(), step)

    def user_message_added(self, message: StoredMessage) -> None:
        widget = self.screen.chat_view.add_message(
            "user", message.content, message_id=message.id, pictures=self._picture_files(message.pictures)
        )
        widget.set_place(*self._version_of(len(self.session.messages) - 1))

    def reply_begun(self, pending: PendingReply) -> None:
        self.screen.chat_view.begin_stream(pending.model, pending.reply_id, self.session.draft).set_sources(
            pending.sources
        )
        self.screen.hardware_panel.reply_started()

    def reply_changed(self, event: TokenText) -> None:
        self.screen.chat_view.stream_changed()
        self.screen.hardware_panel.token_arrived(event.tokens)
        if self.session.save_problem and not self._save_problem_shown:
            self.report_save_problem()

    def tool_rounds_changed(self, rounds: Sequence[ToolRound]) -> None:
        self.screen.chat_view.stream_changed()
        widget = self.screen.chat_view.streaming_message
        if widget is not None:
            widget.set_tool_rounds(list(rounds))

    def reply_ended(self, end: ReplyEnd) -> None:
        chat_view, final = self.screen.chat_view, end.final
        widget = chat_view.end_stream(
            final.content if final else end.text,
            footer_for(final) if final else "",
            final.reasoning if final else end.reasoning,
            thinking_seconds(final) if final else None,
        )
        if widget is not None and final is not None:
            widget.set_meta(final.model, final.created_at)  # the model may have loaded after the reply began
            if final in self.session.messages:
                widget.set_place(*self._version_of(self.session.messages.index(final)))
        if widget is not None and final is not None and end.status == "failed" and not final.content.strip():
            chat_view.remove_message(widget)
        panel = self.screen.hardware_panel
        if end.stats is not None:  # the reply's own figures (a stopped one's too), not the live ones of a reply gone
            panel.show_stats(end.stats, stopped=end.status == "stopped")
        else:  # stopped or failed before the engine's figures: the panel must not keep a live one
            panel.reply_ended(end.status)
        self.report_save_problem()

    def reply_over(self, event: Finished | Cancelled | Failed) -> None:
        if isinstance(event, Finished):
            self.replyFinished.emit(event)
        elif isinstance(event, Cancelled):
            self.replyCancelled.emit(event)
        else:
            self.replyFailed.emit(event.message)

    def show_messages(self) -> None:
        self.show_session_messages()

    def withdraw_notice(self, text: str) -> None:
        self.screen.withdraw_notice(text)

    def conversation_changed(self, conversation_id: int | None) -> None:
        self.screen.refresh_conversation(conversation_id)

    def set_status(self, text: str) -> None:
        self.screen.set_status(text)

    def show_notice(self, text: str, role: str = "notice") -> None:
        self.screen.show_notice(text, role)

    # ------------------------------------------------------------------ the model

    def stop_loading(self) -> None:
        self.loading.stop()

    def model_sees(self) -> None:
        """A model that sees is in use: the notice that the attached pictures would not be seen goes."""
        if self.model_info is not None and self.model_info.vision and self._unseen:
            self.screen.withdraw_notice(self._unseen)

    # ------------------------------------------------------------------ saving

    def report_save_problem(self) -> None:
        """One notice while saving fails (not one per attempt); the text is kept and saved when the disk lets us."""
        problem = self.session.save_problem
        if problem and not self._save_problem_shown:
            self._save_problem_shown = True
            self.screen.show_notice(
                f"Replies cannot be saved right now ({problem.rstrip('.')}). They stay here and are saved as soon as "
                "the disk allows it; free some space or check the data folder.",
                "error",
            )
            self._retry_timer.start()
        elif not problem and self._save_problem_shown:
            self._save_problem_shown = False
            self._retry_timer.stop()
            self.screen.set_status("Saved: every reply is on disk again")

    def retry_saving(self) -> None:
        if self.session.retry_pending():
            self.report_save_problem()

    def set_busy(self, busy: bool) -> None:
        self.screen.send_button.setEnabled(not busy)
        self.screen.stop_button.setEnabled(busy)
