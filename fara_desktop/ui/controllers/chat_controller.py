"""The chat: what the user sends, edits, regenerates and stops, and every engine event about replies and models.

The window lays out the widgets; this controller decides what happens to them. Engine events are dispatched by
type through one table; an event for a request that is no longer current (the user stopped it, switched chats)
only reaches the signals, never the chat on screen.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

from PySide6.QtCore import QObject, QTimer, Signal
from PySide6.QtGui import QGuiApplication
from PySide6.QtWidgets import QCheckBox, QLabel, QMenu, QProgressBar, QPushButton, QToolButton

from fara_desktop.chats.records import MessageStatus, StoredMessage
from fara_desktop.chats.session import ChatSession
from fara_desktop.chats.storage import StorageError
from fara_desktop.chats.tool_rounds import ToolRound
from fara_desktop.chats.turn import PendingReply, Turn, TurnPhase
from fara_desktop.citations import Source
from fara_desktop.engine.types import (
    Cancelled,
    ChatMessage,
    Event,
    Failed,
    Finished,
    GenerationStarted,
    GenerationStats,
    HistoryTrimmed,
    LoadProgress,
    ModelInfo,
    ModelLoaded,
    ModelLoadFailed,
    ModelLoading,
    ModelSource,
    ModelUnloaded,
    PromptAdjusted,
    PromptProgress,
    ReadAheadProgress,
    RemoteModel,
    SamplingParams,
    TokenText,
    ToolOffer,
)
from fara_desktop.format import format_duration
from fara_desktop.planning.params import LoadParams
from fara_desktop.tools.tool_box import ToolBox, schema_tokens, tool_key
from fara_desktop.ui.after_paint import AfterPaint
from fara_desktop.ui.controllers.read_ahead import DraftPrompt, Retriever, TypingReadAhead
from fara_desktop.ui.controllers.tool_flow import ToolFlow
from fara_desktop.ui.engine_bridge import EngineBridge
from fara_desktop.ui.widgets.chat_view import ChatView, ShownMessage, footer_for, thinking_seconds
from fara_desktop.ui.widgets.composer import Composer
from fara_desktop.ui.widgets.hardware_panel import HardwarePanel
from fara_desktop.ui.widgets.message_widget import MessageWidget
from fara_desktop.ui.widgets.tool_approval import ToolApprovalBar
from fara_desktop.untrusted import one_line

SAVE_RETRY_MS = 5000


class ChatScreen(Protocol):
    """The widgets the chat controller drives (the main window provides them)."""

    chat_view: ChatView
    composer: Composer
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
    def refresh_conversation(self, conversation_id: int | None) -> None: ...


class ChatController(QObject):
    """Sends messages and turns engine events into the chat on screen and the saved conversation."""

    modelLoaded = Signal(object)  # ModelInfo
    modelLoadFailed = Signal(str)
    replyFinished = Signal(object)  # Finished
    replyCancelled = Signal(object)  # Cancelled
    replyFailed = Signal(str)
    branchCreated = Signal(int)  # a conversation "Branch from here" made; the window opens it
    chatChanged = Signal()  # another conversation (or a new one) is on screen

    def __init__(
        self, screen: ChatScreen, session: ChatSession, bridge: EngineBridge, sampling: SamplingParams
    ) -> None:
        super().__init__()
        self.screen = screen
        self.session = session
        self.bridge = bridge
        self.sampling = sampling
        self.model_info: ModelInfo | None = None
        self.turn = Turn()  # the reply being asked for: its phase, the engine's request id, what it waits for
        self._waiting_for_plan = False  # while True, a sent message waits (DEFERRED) for a model to be queued
        self.editing: MessageWidget | None = None
        self._api_requests = 0  # requests of other apps (local API) waiting or running in the same queue
        self._retrieve: Retriever | None = None
        # Whether reading ahead while typing is allowed now (the window: the setting, and the battery).
        self.read_ahead_allowed: Callable[[], bool] = lambda: True
        self.read_ahead = TypingReadAhead(screen.composer, screen.wait_hint, bridge, self._draft_prompt,
                                          lambda: self.read_ahead_allowed())  # fmt: skip
        self._adjusted: set[int | None] = set()  # chats already told how their prompt was adapted to the template
        self._save_problem_shown = False
        self._reasoning_shown: bool | None = None  # which part of the current reply the status line names
        self._loading_since = 0.0
        self._loading_name = ""
        self._no_model_reason: str | None = None  # why no model is loaded, once a load failed or was refused
        self._reading_since: tuple[float, int] | None = None  # when a long prompt's progress began, and where
        self.tool_flow: ToolFlow | None = None  # set by ``use_tools`` once the window has a tool box
        self.tool_choice = "auto"  # the next reply's: "required" when the user asked it to call a tool
        self._told_no_tools: set[int | None] = set()  # chats told their model cannot call tools
        menu = QMenu(screen.tools_button)
        menu.aboutToShow.connect(self._fill_tools_menu)
        screen.tools_button.setMenu(menu)
        screen.tools_button.setPopupMode(QToolButton.ToolButtonPopupMode.InstantPopup)
        self._retry_timer = QTimer(self)
        self._retry_timer.setInterval(SAVE_RETRY_MS)
        self._retry_timer.timeout.connect(self.retry_saving)
        self._handlers: dict[type, Callable[[Any], None]] = {
            TokenText: self._on_token_text,
            GenerationStarted: self._on_generation_started,
            Finished: self._on_finished,
            Cancelled: self._on_cancelled,
            Failed: self._on_failed,
            PromptAdjusted: self._on_prompt_adjusted,
            PromptProgress: self._on_prompt_progress,
            HistoryTrimmed: self._on_history_trimmed,
            ModelLoading: self._on_model_loading,
            LoadProgress: self._on_load_progress,
            ModelLoaded: self._on_model_loaded,
            ModelLoadFailed: self._on_model_load_failed,
            ModelUnloaded: self._on_model_unloaded,
            ReadAheadProgress: self.read_ahead.on_progress,
        }
        self.set_busy(False)

    @property
    def retrieve(self) -> Retriever | None:
        """Adds the passages of the chat's document collections to the prompt (the documents controller's): searches
        on another thread and calls back with the grounded prompt; False when the chat uses no documents."""
        return self._retrieve

    @retrieve.setter
    def retrieve(self, retriever: Retriever | None) -> None:
        self._retrieve = retriever
        self.read_ahead.retrieve = retriever  # the passages are searched for, and read, on the typing pause too

    def _draft_prompt(self, draft: str) -> DraftPrompt | None:
        """What Enter would send for ``draft``, when it would go to a model on this computer now."""
        info = self.model_info
        if self.turn.busy or self.editing is not None or info is None or info.remote:
            return None
        messages = [*self.session.prompt_messages(), ChatMessage("user", draft)]
        return DraftPrompt(messages, self.session.conversation_id, self.session.thinking, self.sampling, info.n_ctx,
                           self._tool_offer(quiet=True))  # fmt: skip

    # ------------------------------------------------------------------ what the user does

    def load_model(self, path: ModelSource | str, params: LoadParams | None = None, name: str = "") -> None:
        """``name``: what the model was discovered as (an Ollama tag); "" → from the file."""
        self.bridge.load_model(path if isinstance(path, RemoteModel) else Path(path), params, name)

    def send(self) -> None:
        screen = self.screen
        text = screen.composer.toPlainText().strip()
        if not text or self.turn.busy:
            return
        self.read_ahead.stop()
        if self.editing is not None:  # the edited text becomes a new version of that message
            index = screen.chat_view.messages().index(self.editing)
            self.session.redo_from(self._message_index(self.editing, index))
            screen.chat_view.remove_from(self.editing)
            self.cancel_edit()
        screen.composer.clear()
        try:
            user = self.session.add_user_message(text)
        except StorageError as exc:
            screen.composer.setPlainText(text)  # nothing is lost: the text goes back where it was typed
            self.session.reload()  # an edit's earlier messages were not replaced: show them again
            self.show_session_messages()
            screen.show_notice(f"Your message could not be saved, so it was not sent: {exc}", "error")
            return
        widget = screen.chat_view.add_message("user", text, message_id=user.id)
        widget.set_place(*self._version_of(len(self.session.messages) - 1))
        self._request_reply()

    def regenerate(self, widget: MessageWidget) -> None:
        if self.turn.busy or widget.role != "assistant":
            return
        messages = self.screen.chat_view.messages()
        self.session.redo_from(self._message_index(widget, messages.index(widget)))  # the old reply stays a version
        self.screen.chat_view.remove_from(widget)
        self._request_reply()

    def switch_version(self, widget: MessageWidget, step: int) -> None:
        """‹ / ›: show another version of a message, and the conversation that follows it."""
        if self.turn.busy or widget.message_id is None:
            return
        ids = [m.id for m in self.session.messages]
        if widget.message_id in ids and self.session.switch_version(ids.index(widget.message_id), step):
            self.cancel_edit()
            self.show_session_messages()

    def branch_off(self, widget: MessageWidget) -> None:
        """ "Branch from here": a new chat with the conversation up to this message, opened at once."""
        ids = [m.id for m in self.session.messages]
        if self.turn.busy or widget.message_id not in ids:
            return
        try:
            branch = self.session.branch_off(ids.index(widget.message_id))
        except StorageError as exc:
            self.screen.show_notice(f"The branch could not be saved: {exc}", "error")
            return
        self.branchCreated.emit(branch)
        summary = self.session.store.conversation(branch)
        title = one_line(summary.title, 80) if summary else "a new chat"
        self.screen.set_status(f"Branched into “{title}”: the original chat is unchanged")

    def _version_of(self, index: int) -> tuple[int, int]:
        place = self.session.place(index)
        return place.index, place.count

    def edit_message(self, widget: MessageWidget) -> None:
        if self.turn.busy:
            return
        self.editing = widget
        self.screen.composer.setPlainText(widget.text)
        self.screen.edit_banner.show()
        self.screen.composer.setFocus()

    def cancel_edit(self) -> None:
        if self.editing is not None:
            self.editing = None
            self.screen.edit_banner.hide()
            self.screen.composer.clear()

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
        phase = self.turn.phase
        if phase is TurnPhase.RETRIEVING:  # the question is saved; no reply was started for it
            self.turn.end()
            self.set_busy(False)
            self.screen.set_status("Stopped")
            return
        if phase is TurnPhase.PENDING:  # the reply had not begun: it begins, and ends at once as stopped
            self._begin_reply(start_engine=False)
        if self.turn.phase is TurnPhase.DEFERRED:
            self._reply_done(None, "", "stopped", None, None)
            self.replyCancelled.emit(Cancelled(0, "", None))  # stopped before the engine had it
            return
        if self.turn.phase is TurnPhase.GENERATING:
            self.turn.stopping()
            self.bridge.cancel()
            self.screen.set_status("Stopping…")
        if self.turn.phase is TurnPhase.TOOLS and self.tool_flow is not None:
            stopped = self.tool_flow.stop()
            if stopped is not None:
                self.session.add_tool_round(stopped)
            self._reply_done(None, "", "stopped", None, None)
            self.replyCancelled.emit(Cancelled(0, "", None))
            self.screen.set_status("Stopped")

    def show_session_messages(self) -> None:
        self.screen.chat_view.set_messages([self._shown(index, m) for index, m in enumerate(self.session.messages)])

    def _shown(self, index: int, m: StoredMessage) -> ShownMessage:
        return ShownMessage(
            m.role, m.content, footer_for(m), m.model, m.id, m.created_at, m.reasoning, thinking_seconds(m),
            self._version_of(index), m.sources, m.tool_rounds,
        )  # fmt: skip

    def plan_started(self) -> None:
        """The start-up scan looks for a model: a message sent meanwhile waits for it (DEFERRED)."""
        self._waiting_for_plan = True

    def plan_settled(self) -> None:
        """The start-up scan ended (a model is queued, or none was found): a message that waited is sent now."""
        self._waiting_for_plan = False
        if self.turn.phase is TurnPhase.DEFERRED:
            self.turn.generating(self._generate())

    def _message_index(self, widget: MessageWidget, fallback: int) -> int:
        ids = [m.id for m in self.session.messages]
        return ids.index(widget.message_id) if widget.message_id in ids else fallback

    def _request_reply(self) -> None:
        """A reply is asked for in two steps: this one saves its row and marks the chat busy; once the chat has
        been painted, the second makes the reply's bubble, refreshes the sidebar and starts llama.cpp. Qt lays out
        and paints the user's message while no inference thread competes for the CPU, each step is about half of a
        send's GUI work (a 400-token paste took the GUI thread 35-45 ms in one piece on a slow 2-core machine), and
        the window answers input in between."""
        model = self.model_info.name if self.model_info else None
        prompt = self.session.prompt_messages()
        ready = self.read_ahead.grounded_for(prompt)
        if ready is not None:  # searched, and read ahead, while the question was typed
            self._start_reply(model, *ready)
            return
        if self.retrieve is not None:
            ticket = self.turn.start_retrieving()
            n_ctx = self.model_info.n_ctx if self.model_info else 0
            done = lambda grounded, found: self._retrieved(ticket, model, grounded, found)  # noqa: E731
            if self.retrieve(prompt, n_ctx, self.sampling, done):
                self.set_busy(True)
                self.screen.set_status("Searching your documents…")
                return
            self.turn.end()  # the chat uses no documents
        self._start_reply(model, prompt, ())

    def _retrieved(
        self, ticket: object, model: str | None, prompt: list[ChatMessage], sources: tuple[Source, ...]
    ) -> None:
        if not self.turn.retrieved(ticket):  # stopped, or another chat
            return
        self._start_reply(model, prompt, sources)

    def _start_reply(self, model: str | None, prompt: list[ChatMessage], sources: tuple[Source, ...]) -> None:
        try:
            reply = self.session.begin_reply(model, sources)
        except StorageError as exc:
            self.show_session_messages()  # a regenerate's earlier reply is back
            self.screen.refresh_conversation(self.session.conversation_id)
            self.screen.show_notice(f"The reply could not be started because the chat could not be saved: {exc}",
                                    "error")  # fmt: skip
            self.turn.end()
            self.set_busy(False)
            return
        if self.tool_flow is not None:
            self.tool_flow.new_reply()
        self.turn.wait_for_paint(PendingReply(model, reply.id, sources), prompt)
        self.set_busy(True)
        if self._api_requests:
            self.screen.set_status("Waiting for another app's request (local API) to finish…")
        else:
            self.screen.set_status("Thinking…" if self.model_info else "Waiting for the model to load…")
        AfterPaint(self.screen.chat_view.viewport(), self._begin_reply)

    def _begin_reply(self, start_engine: bool = True) -> None:
        pending = self.turn.take_pending()
        if pending is None:  # stopped before this step came
            return
        self.screen.chat_view.begin_stream(pending.model, pending.reply_id, self.session.draft).set_sources(
            pending.sources
        )
        self.screen.hardware_panel.reply_started()
        if self._waiting_for_plan or not start_engine:
            self.turn.defer()
        else:
            self.turn.generating(self._generate())
        self.screen.refresh_conversation(self.session.conversation_id)

    def settle_pending_reply(self) -> None:
        """The window is closing: a reply whose second step has not come gets its bubble without the engine (closing
        the session then keeps it as stopped, as it keeps a reply cut off mid-stream), and the step is dropped."""
        if self.turn.phase is TurnPhase.PENDING:
            self._begin_reply(start_engine=False)

    def _generate(self) -> int:
        session = self.session
        prompt = self.turn.take_prompt()
        prompt = prompt if prompt is not None else session.prompt_messages()
        return self.bridge.generate(prompt, self.sampling, session.conversation_id, session.thinking,
                                    self._tool_offer())  # fmt: skip

    # ------------------------------------------------------------------ tools

    def use_tools(self, box: ToolBox) -> None:
        """The window's tool box: chats may now offer its tools, and every call goes through the approval bar."""
        self.tool_flow = ToolFlow(box, self.screen.tool_approval, lambda: self.session.tools, self._tool_round_done,
                                  self.screen.set_status)  # fmt: skip
        self.show_tools_choice()

    def stop_tools(self) -> None:
        """The window is closing: a reply waiting on its tool calls ends as stopped, its round kept."""
        if self.turn.phase is TurnPhase.TOOLS:
            self.stop()

    def _tool_offer(self, quiet: bool = False) -> ToolOffer | None:
        """The chat's tools for the next request, when its model can call tools (else said once, and none)."""
        flow, info = self.tool_flow, self.model_info
        if flow is None or not self.session.tools or info is None:
            return None
        tools = flow.box.offered(self.session.tools)
        if not tools:
            return None
        if not info.tool_calls and not info.remote:
            if not quiet and self.session.conversation_id not in self._told_no_tools:
                self._told_no_tools.add(self.session.conversation_id)
                self.screen.show_notice(
                    f"{one_line(info.name, 80)} cannot call tools: its chat template declares none, so this chat's "
                    "tools are not offered to it. Choose a model made for tool calling (Qwen 2.5/3, Llama 3.1+, "
                    "Mistral, Granite, Hermes …)."
                )
            return None
        choice = "none" if flow.over_limit else self.tool_choice
        return ToolOffer(tuple(t.spec for t in tools), choice)

    def _tool_round_done(self, tool_round: ToolRound) -> None:
        """Every call of the round is decided and run: the round is kept with the reply, which goes on."""
        if self.turn.phase is not TurnPhase.TOOLS:
            return
        self.session.add_tool_round(tool_round)
        widget = self.screen.chat_view.streaming_message
        if widget is not None:
            widget.set_tool_rounds(self.session.rounds)
        self.screen.set_status("Reading the tools' results…")
        session = self.session
        request = self.bridge.generate(session.continuation_prompt(), self.sampling, session.conversation_id,
                                       session.thinking, self._tool_offer())  # fmt: skip
        self.turn.generating(request)

    def _fill_tools_menu(self) -> None:
        menu = self.screen.tools_button.menu()
        menu.clear()
        tools = self.tool_flow.box.available() if self.tool_flow is not None else []
        chosen = set(self.session.tools)
        server = None
        for tool in tools:
            if tool.server != server:
                server = tool.server
                menu.addSection(one_line(server, 60))
            action = menu.addAction(one_line(tool.spec.name, 80))
            action.setToolTip(one_line(tool.spec.description, 300))
            action.setCheckable(True)
            key = tool_key(tool)
            action.setChecked(key in chosen)
            action.toggled.connect(lambda on, k=key: self.use_tool(k, on))
        if not tools:
            menu.addAction("No tools yet: add MCP servers in Settings ▸ Tools").setEnabled(False)
            return
        menu.addSeparator()
        force = menu.addAction("Make the next reply call a tool")
        force.setCheckable(True)
        force.setChecked(self.tool_choice == "required")
        force.setToolTip("For models that do not call tools by themselves: the next reply must call one of this "
                         "chat's tools (its arguments held to the tool's schema).")  # fmt: skip
        force.toggled.connect(lambda on: setattr(self, "tool_choice", "required" if on else "auto"))

    def use_tool(self, key: str, used: bool) -> None:
        """Switch one tool on or off for this chat."""
        keys = [k for k in self.session.tools if k != key] + ([key] if used else [])
        try:
            self.session.set_tools(tuple(keys))
        except StorageError as exc:
            self.screen.show_notice(f"The chat's tools could not be saved: {exc}", "error")
        self.show_tools_choice()

    def show_tools_choice(self) -> None:
        """The Tools button: how many tools the chat offers and what they cost in prompt reading."""
        offered = self.tool_flow.box.offered(self.session.tools) if self.tool_flow is not None else []
        button = self.screen.tools_button
        button.setText(f"Tools: {len(offered)}" if offered else "Tools: off")
        cost = (f" Their descriptions add about {schema_tokens(offered):,} prompt tokens (read once per chat, then "
                "cached; the wait shown under the message box counts them).") if offered else ""  # fmt: skip
        button.setToolTip(f"The tools this chat's model may call (each call asks you first).{cost}")

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

    def _on_token_text(self, event: TokenText) -> None:
        if self.turn.owns(event.request_id):
            self.session.reply_text(event.text, event.reasoning, event.thinking_s)
            self.screen.chat_view.stream_changed()
            self.screen.hardware_panel.token_arrived(event.tokens)
            if event.reasoning != self._reasoning_shown:
                self._reasoning_shown = event.reasoning
                self.screen.set_status("Thinking…" if event.reasoning else "Writing the answer…")
            if self.session.save_problem and not self._save_problem_shown:
                self.report_save_problem()

    def _on_generation_started(self, event: GenerationStarted) -> None:
        if self.turn.owns(event.request_id):
            self._reasoning_shown = None
            self._reading_since = None
            self.screen.set_status("Reading the conversation…")

    def _on_finished(self, event: Finished) -> None:
        self.read_ahead.speed.observe(event.stats)
        flow = self.tool_flow
        if event.tool_calls and flow is not None and self.turn.owns(event.request_id):
            self.tool_choice = "auto"  # "make the next reply call a tool" is for one reply
            self.turn.using_tools()
            self.session.draft.clear()  # this text belongs to the round, shown above its calls
            self.screen.chat_view.stream_changed()
            widget = self.screen.chat_view.streaming_message
            if widget is not None:  # the rounds so far, and this one's text while its calls are decided
                widget.set_tool_rounds([*self.session.rounds, ToolRound(event.text, event.reasoning, ())])
            flow.start(event.text, event.reasoning, event.tool_calls)
            return
        if self._reply_done(event.request_id, event.text, "complete", event.stats, None, event.reasoning):
            self.screen.hardware_panel.show_stats(event.stats)
            note = {"length": " (stopped at the token limit)", "context": " (the context window is full)",
                    "repetition": " (stopped: the reply began repeating itself)"}  # fmt: skip
            self.screen.set_status(f"Ready · {event.stats.gen_tok_per_s:.1f} tok/s{note.get(event.finish_reason, '')}")
        self.replyFinished.emit(event)

    def _on_cancelled(self, event: Cancelled) -> None:
        if self._reply_done(event.request_id, event.text, "stopped", event.stats, None, event.reasoning):
            if event.stats is not None:  # the stopped reply's own figures, not the live ones of a reply gone
                self.screen.hardware_panel.show_stats(event.stats, stopped=True)
            self.screen.set_status("Stopped")
        self.replyCancelled.emit(event)

    def set_api_requests(self, active: int) -> None:
        """Other apps' requests (local API) waiting or running in the engine's queue: a reply may wait for them."""
        self._api_requests = active

    def no_model_because(self, reason: str) -> None:
        """What a message sent without a model will be told (a load that failed, a model that does not fit)."""
        self._no_model_reason = reason.rstrip(".")

    def _on_failed(self, event: Failed) -> None:
        message = event.message
        if event.error_type == "NoModelLoadedError" and self._no_model_reason:  # not "No model is loaded yet."
            message = (
                f"No model is loaded: {self._no_model_reason}. Choose another one in Settings ▸ Model, or get one "
                "with Get models."
            )
        if self._reply_done(event.request_id, None, "failed", None, message):
            self.screen.show_notice(message, "error")
            self.screen.set_status("The reply failed — you can send again or change the model")
        self.replyFailed.emit(message)

    def _on_prompt_progress(self, event: PromptProgress) -> None:
        """A long prompt: how much of it the model has read, and about how long the rest will take."""
        if not self.turn.owns(event.request_id):
            return
        now = time.monotonic()
        if self._reading_since is None or event.done <= 0:
            self._reading_since = (now, event.done)
        started, first = self._reading_since
        rate = (event.done - first) / (now - started) if now > started and event.done > first else 0.0
        left = f" · about {format_duration((event.total - event.done) / rate)}" if rate > 0 else ""
        self.screen.set_status(f"Reading your message: {event.done:,} of {event.total:,} tokens{left}")

    def _on_prompt_adjusted(self, event: PromptAdjusted) -> None:
        if self.turn.owns(event.request_id) and self.session.conversation_id not in self._adjusted:
            self._adjusted.add(self.session.conversation_id)  # said once per chat
            self.screen.show_notice(event.note)

    def _on_history_trimmed(self, event: HistoryTrimmed) -> None:
        if not self.turn.owns(event.request_id):
            return  # a reply of a chat left since: the chat shown now keeps its history
        self.session.apply_trim(event.dropped_messages)
        self.screen.set_status(
            f"The {event.dropped_messages} oldest messages no longer fit the context window; "
            "the model does not see them any more (they stay here)"
        )

    def stop_loading(self) -> None:
        self.bridge.cancel_load()
        self.screen.stop_loading_button.setEnabled(False)
        self.screen.set_status("Stopping the load…")

    def _show_loading(self, visible: bool) -> None:
        self.screen.load_progress.setVisible(visible)
        self.screen.stop_loading_button.setVisible(visible)
        self.screen.stop_loading_button.setEnabled(visible)

    def _on_model_loading(self, event: ModelLoading) -> None:
        self._loading_name = event.name or event.path.name
        self.screen.hardware_panel.show_model_loading(self._loading_name)
        self.screen.load_progress.setRange(0, 0)
        self._show_loading(True)
        self._loading_since = time.monotonic()
        self.screen.set_status(f"Loading {self._loading_name}…")

    def _on_load_progress(self, event: LoadProgress) -> None:
        bar = self.screen.load_progress
        if bar.maximum() == 0:
            bar.setRange(0, 100)
        bar.setValue(int(event.fraction * 100))
        if not self.screen.stop_loading_button.isEnabled():
            return  # "Stopping the load…" stays until llama.cpp has stopped
        elapsed = time.monotonic() - self._loading_since
        left = ""
        if 0.05 <= event.fraction < 1.0 and elapsed >= 1.0:
            left = f" · about {format_duration(elapsed * (1 - event.fraction) / event.fraction)}"
        self.screen.set_status(f"Loading {self._loading_name}: {event.fraction:.0%}{left}")

    def _on_model_loaded(self, event: ModelLoaded) -> None:
        self.model_info = event.info
        self.read_ahead.speed.reset(event.info.expected_prompt_tok_per_s)
        self._no_model_reason = None
        self._show_loading(False)
        self.screen.hardware_panel.show_model(event.info)
        self.screen.chat_view.empty_state.set_privacy(event.info.server)
        self.sync_thinking_switch()
        self.screen.set_status(f"Ready · {event.info.name} loaded in {event.info.load_seconds:.1f} s")
        self.modelLoaded.emit(event.info)

    def _on_model_load_failed(self, event: ModelLoadFailed) -> None:
        kept = event.still_loaded
        self.model_info = kept
        self._show_loading(False)
        self.screen.hardware_panel.show_model(kept)
        stopped = event.error_type == "LoadCancelledError"
        if kept is not None:  # a switch that failed: the model in use stays (or was loaded again)
            what = "Loading stopped" if stopped else "Could not load the model"
            self.screen.show_notice(f"{what}. {event.message} Still chatting with {kept.name}.", "notice" if
                                    stopped else "error")  # fmt: skip
            self.screen.set_status(f"Ready · {kept.name} (the switch {'was stopped' if stopped else 'failed'})")
            self.sync_thinking_switch()
            self.modelLoadFailed.emit(event.message)
            return
        name = self._loading_name or event.path.name
        if stopped:
            self.no_model_because(f"loading {name} was stopped")
            self.screen.show_notice(f"{event.message} No model is loaded: choose one in Settings ▸ Model to chat.")
            self.screen.set_status("Loading stopped · no model loaded")
            self.modelLoadFailed.emit(event.message)
            return
        self.no_model_because(f"{name} could not be loaded ({event.message.rstrip('.')})")
        self.screen.show_notice(f"Could not load the model. {event.message}", "error")
        self.screen.set_status("No model loaded")
        self.modelLoadFailed.emit(event.message)

    def _on_model_unloaded(self, _event: ModelUnloaded) -> None:
        self.model_info = None
        self.screen.hardware_panel.show_model(None)
        self.sync_thinking_switch()

    def _reply_done(
        self,
        request_id: int | None,
        text: str | None,
        status: MessageStatus,
        stats: GenerationStats | None,
        error: str | None,
        reasoning: str | None = None,
    ) -> bool:
        """Ends the turn's reply; ``request_id`` None: one the engine never had (stopped while DEFERRED).
        False when the event is about no reply of this turn."""
        without_engine = (TurnPhase.DEFERRED, TurnPhase.TOOLS)
        if not (self.turn.owns(request_id) if request_id is not None else self.turn.phase in without_engine):
            return False
        chat_view = self.screen.chat_view
        model = self.model_info.name if self.model_info else None
        shown = self.session.messages
        final = self.session.end_reply(text, status, stats, model, error, reasoning)
        widget = chat_view.end_stream(
            final.content if final else text,
            footer_for(final) if final else "",
            final.reasoning if final else reasoning,
            thinking_seconds(final) if final else None,
        )
        if widget is not None and final is not None:
            widget.set_meta(final.model, final.created_at)  # the model may have loaded after the reply began
            if final in self.session.messages:
                widget.set_place(*self._version_of(self.session.messages.index(final)))
        if widget is not None and final is not None and status == "failed" and not final.content.strip():
            chat_view.remove_message(widget)
        if self.session.messages is not shown:  # a failed regenerate or edit: the earlier versions are back
            self.show_session_messages()
        self.turn.end()
        self.tool_choice = "auto"  # "make the next reply call a tool" was for this reply, whatever became of it
        self.set_busy(False)
        if stats is None:  # stopped or failed before the engine's figures: the panel must not keep a live one
            self.screen.hardware_panel.reply_ended(status)
        self.report_save_problem()
        self.screen.refresh_conversation(self.session.conversation_id)
        return True

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
