"""The chat pane: message widgets top to bottom, an empty state, and batched streaming of the current reply."""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from PySide6.QtCore import Qt, QTimer, Signal
from PySide6.QtWidgets import QFrame, QPushButton, QScrollArea, QVBoxLayout, QWidget

from fara_desktop.chats.draft import ReplyDraft
from fara_desktop.chats.records import ENDED_EARLY, INTERRUPTED_EMPTY, StoredMessage
from fara_desktop.chats.tool_rounds import ToolRound
from fara_desktop.models.packaged import DEFAULT_MODEL_HELP
from fara_desktop.ui.widgets.message_widget import MessageWidget
from fara_desktop.ui.widgets.plain_text import plain_label
from fara_desktop.vocabulary.sources import Source

# 10 repaints a second while a reply streams: on a 2-core machine each repaint takes CPU from one of llama.cpp's
# two lock-stepped threads (measured app/raw generation: 0.81 at 66 ms, 0.90 at 150 ms, 0.93 at 400 ms).
REPAINT_INTERVAL_MS = 100
PAGE = 60  # messages built at a time; older ones wait behind "Show earlier messages"


@dataclass(frozen=True)
class ShownMessage:
    """What the chat pane needs to build one message widget."""

    role: str
    text: str
    footer: str = ""
    model: str | None = None
    message_id: int | None = None
    created_at: float | None = None
    reasoning: str = ""
    thinking_s: float | None = None
    version: tuple[int, int] = (0, 1)  # (index, count) among the versions of its turn
    sources: tuple[Source, ...] = ()  # the document passages a reply was given, for its citations
    tool_rounds: tuple[ToolRound, ...] = ()  # the tools a reply called, before its answer
    pictures: tuple[Path, ...] = ()  # a user message's pictures (their files in the picture store)


def thinking_seconds(message: StoredMessage) -> float | None:
    value = (message.stats or {}).get("thinking_s")
    return float(value) if isinstance(value, (int, float)) else None


def footer_for(message: StoredMessage) -> str:
    """The line under a reply. ``stats`` come from the database (an import, an older version): any key may be
    missing; the store only ever hands out numbers and an error text."""
    stats = message.stats or {}
    parts = []
    early = stats.get("ended_early")
    if message.status == "stopped" and early == "interrupted":
        parts.append(ENDED_EARLY[early] if message.content.strip() else INTERRUPTED_EMPTY)
    elif message.status == "stopped":
        parts.append("Stopped")
    elif isinstance(early, str) and early in ENDED_EARLY:
        parts.append(ENDED_EARLY[early])
    elif message.status == "failed":
        parts.append("Failed" + (f": {stats['error']}" if isinstance(stats.get("error"), str) else ""))
    keys = ("completion_tokens", "gen_tok_per_s", "ttft_s", "context_used", "n_ctx")
    if all(isinstance(stats.get(k), (int, float)) for k in keys):
        context = f" · context {stats['context_used']:.0f}/{stats['n_ctx']:.0f}" if stats["n_ctx"] else ""
        parts.append(
            f"{stats['completion_tokens']:.0f} tokens · {stats['gen_tok_per_s']:.1f} tok/s · "
            f"{first_words(stats)}{context}"
        )
    proposed, accepted = stats.get("draft_proposed"), stats.get("draft_accepted")
    if isinstance(proposed, (int, float)) and isinstance(accepted, (int, float)) and proposed > 0:
        parts.append(f"{proposed:,.0f} tokens proposed, {accepted:,.0f} accepted")
    reused = stats.get("prompt_tokens", 0) - stats.get("prompt_tokens_evaluated", 0)
    if isinstance(reused, (int, float)) and reused >= RESUMED_WORTH_SAYING:
        parts.append(f"resumed: {reused:,.0f} tokens not read again")
    return " · ".join(parts)


RESUMED_WORTH_SAYING = 256  # tokens kept from before: below this, a follow-up's usual reuse, not worth a word


def first_words(stats: dict[str, Any]) -> str:
    """What the user waited for the first words (from Enter: reading the prompt, a model still loading), and the
    model's own first token where it differs clearly ("first token 64 ms" under a 1.64 s wait read as a lie)."""
    model_ms = stats["ttft_s"] * 1000
    waited = stats.get("waited_s")
    if not isinstance(waited, (int, float)) or waited * 1000 < model_ms + 250:
        return f"first token {model_ms:.0f} ms"
    return f"first words after {waited:.1f} s (the model's first token {model_ms:.0f} ms)"


LOCAL_PRIVACY = "Everything runs on this computer. Nothing you type leaves it."


class EmptyState(QFrame):
    """What an empty chat shows: a welcome, or (first run, no model) what was searched and what to do."""

    openModelRequested = Signal()
    addFolderRequested = Signal()
    getModelsRequested = Signal()
    suggestionDismissed = Signal()  # "Not now" on the suggested download

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("emptyState")
        layout = QVBoxLayout(self)
        layout.setContentsMargins(40, 60, 40, 40)
        layout.setSpacing(12)
        self.heading = plain_label()
        self.heading.setObjectName("emptyHeading")
        self.heading.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.body = plain_label()
        self.body.setObjectName("emptyBody")
        self.body.setWordWrap(True)
        self.body.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.body.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.get_button = QPushButton("Get a model for this computer…")
        self.get_button.setObjectName("getModelsButton")
        self.get_button.setDefault(True)
        self.get_button.clicked.connect(self.getModelsRequested)
        self.open_button = QPushButton("Open a GGUF model…")
        self.open_button.setObjectName("openModelButton")
        self.open_button.clicked.connect(self.openModelRequested)
        self.folder_button = QPushButton("Add a models folder…")
        self.folder_button.setObjectName("addFolderButton")
        self.folder_button.clicked.connect(self.addFolderRequested)
        self.suggestion = plain_label()
        self.suggestion.setObjectName("downloadSuggestion")
        self.suggestion.setWordWrap(True)
        self.suggestion.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.not_now_button = QPushButton("Not now")
        self.not_now_button.setObjectName("notNowButton")
        self.not_now_button.clicked.connect(self._dismiss_suggestion)
        layout.addWidget(self.heading)
        layout.addWidget(self.body)
        layout.addWidget(self.suggestion)
        for button in (self.get_button, self.open_button, self.folder_button, self.not_now_button):
            layout.addWidget(button, 0, Qt.AlignmentFlag.AlignHCenter)
        layout.addStretch(1)
        self.privacy = LOCAL_PRIVACY
        self.show_welcome()

    def set_privacy(self, server: str | None) -> None:
        """Where chats go: this computer, or the server whose model is in use (the welcome must not promise more)."""
        self.privacy = (
            LOCAL_PRIVACY
            if server is None
            else (f"Your messages go to the server {server}, which runs the model; they are kept on this computer too.")
        )
        if not self.property("problem"):
            self.body.setText(self.privacy)

    def show_welcome(self) -> None:
        self.setProperty("problem", False)
        self.heading.setText("Ask anything")
        self.body.setText(self.privacy)
        self.get_button.setVisible(bool(self.suggestion.text()))
        self.open_button.hide()
        self.folder_button.hide()
        self.suggestion.setVisible(bool(self.suggestion.text()))
        self.not_now_button.setVisible(bool(self.suggestion.text()))

    def suggest_download(self, text: str) -> None:
        """A model far better than the ones here fits this computer: said on the welcome, with Get and Not now."""
        self.suggestion.setText(text)
        if not self.property("problem"):
            self.show_welcome()

    def _dismiss_suggestion(self) -> None:
        self.suggestion.setText("")
        self.show_welcome()
        self.suggestionDismissed.emit()

    def show_no_model(self, searched: list[str]) -> None:
        self.setProperty("problem", True)
        self.heading.setText("No model found yet")
        self.body.setText(
            "Fara Desktop looked for GGUF models in:\n\n" + "\n".join(searched) + "\n\n"
            "Get a model chosen for this computer (a download, only when you click), open a GGUF file you "
            f"already have, or add the folder where you keep your models. {DEFAULT_MODEL_HELP}"
        )
        self.get_button.show()
        self.open_button.show()
        self.folder_button.show()


class ChatView(QScrollArea):
    """Messages stacked top to bottom; the reply being written is repainted in batches, not per token."""

    streamFlushed = Signal()
    copyRequested = Signal(object)
    editRequested = Signal(object)
    regenerateRequested = Signal(object)
    branchRequested = Signal(object)
    versionRequested = Signal(object, int)
    sourceRequested = Signal(object)  # a Source whose citation was clicked
    pictureRequested = Signal(object)  # the Path of a picture clicked in a message

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("chatView")
        self.setAccessibleName("Conversation")
        self.setWidgetResizable(True)
        self.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.setFrameShape(QFrame.Shape.NoFrame)
        self._content = QWidget()
        self._content.setObjectName("chatContent")
        self._layout = QVBoxLayout(self._content)
        self._layout.setContentsMargins(18, 18, 18, 18)
        self._layout.setSpacing(10)
        self.more_button = QPushButton("Show earlier messages")
        self.more_button.setObjectName("showEarlierButton")
        self.more_button.clicked.connect(self._show_earlier)
        self.more_button.hide()
        self._layout.addWidget(self.more_button, 0, Qt.AlignmentFlag.AlignHCenter)
        self.empty_state = EmptyState()
        self._layout.addWidget(self.empty_state)
        self._layout.addStretch(1)
        self.setWidget(self._content)
        # The first call of viewport() in a process builds PySide6's Python types behind it (18 ms measured); it is
        # made here, at start-up, rather than on the first Send.
        self.viewport()
        self._messages: list[MessageWidget] = []
        self._hidden: list[ShownMessage] = []
        self._streaming: MessageWidget | None = None
        self._draft = ReplyDraft()  # the reply being streamed: the session's, read here (never a copy)
        self._stream_dirty = False
        self._flush_timer = QTimer(self)
        self._flush_timer.setInterval(REPAINT_INTERVAL_MS)
        self._flush_timer.timeout.connect(self._flush)
        self._stick_to_bottom = True
        self.verticalScrollBar().rangeChanged.connect(self._follow_bottom)
        self.verticalScrollBar().valueChanged.connect(self._remember_position)

    # ------------------------------------------------------------------ messages

    def messages(self) -> list[MessageWidget]:
        return list(self._messages)

    def _make(self, shown: ShownMessage) -> MessageWidget:
        widget = MessageWidget(shown.role, shown.text, self._content)
        widget.message_id = shown.message_id
        widget.set_footer(shown.footer)
        role = shown.role
        widget.set_meta(shown.model, shown.created_at or (time.time() if role in ("user", "assistant") else None))
        if shown.reasoning.strip():
            widget.reasoning.show_reasoning(shown.reasoning, thinking=False, seconds=shown.thinking_s)
        widget.set_place(*shown.version)
        widget.set_sources(shown.sources)
        if shown.tool_rounds:
            widget.set_tool_rounds(shown.tool_rounds)
        widget.pictures.set_pictures(shown.pictures)
        widget.pictureRequested.connect(self.pictureRequested)
        widget.copyRequested.connect(self.copyRequested)
        widget.editRequested.connect(self.editRequested)
        widget.regenerateRequested.connect(self.regenerateRequested)
        widget.branchRequested.connect(self.branchRequested)
        widget.versionRequested.connect(self.versionRequested)
        widget.sourceRequested.connect(self.sourceRequested)
        return widget

    def add_message(
        self,
        role: str,
        text: str,
        footer: str = "",
        model: str | None = None,
        message_id: int | None = None,
        created_at: float | None = None,
        pictures: tuple[Path, ...] = (),
    ) -> MessageWidget:
        return self.add_shown(ShownMessage(role, text, footer, model, message_id, created_at, pictures=pictures))

    def add_shown(self, shown: ShownMessage) -> MessageWidget:
        widget = self._make(shown)
        self._layout.insertWidget(self._layout.count() - 1, widget)
        self._messages.append(widget)
        self.empty_state.hide()
        self._stick_to_bottom = True
        self._update_regenerate()
        return widget

    def set_messages(self, items: list[ShownMessage]) -> None:
        """Replace everything; only the newest page is built, older ones wait behind "Show earlier messages"."""
        self.clear()
        self._hidden = items[:-PAGE] if len(items) > PAGE else []
        for item in items[-PAGE:]:
            self.add_shown(item)
        self.more_button.setVisible(bool(self._hidden))
        self.empty_state.setVisible(not items)
        if not items:
            self.empty_state.show_welcome()

    def _show_earlier(self) -> None:
        batch, self._hidden = self._hidden[-PAGE:], self._hidden[:-PAGE]
        self._stick_to_bottom = False
        for offset, item in enumerate(batch):
            widget = self._make(item)
            self._layout.insertWidget(2 + offset, widget)  # after the button and the (hidden) empty state
            self._messages.insert(offset, widget)
        self.more_button.setVisible(bool(self._hidden))

    def remove_message(self, widget: MessageWidget) -> None:
        if widget in self._messages:
            self._messages.remove(widget)
            widget.setParent(None)
            widget.deleteLater()
            self._update_regenerate()

    def remove_from(self, widget: MessageWidget) -> None:
        """Remove ``widget`` and every message after it."""
        if widget in self._messages:
            for later in self._messages[self._messages.index(widget) :]:
                self.remove_message(later)

    def clear(self) -> None:
        self.end_stream()
        for widget in self._messages:
            widget.setParent(None)
            widget.deleteLater()
        self._messages.clear()
        self._hidden = []
        self.more_button.hide()
        self.empty_state.show()
        self.empty_state.show_welcome()

    def _update_regenerate(self) -> None:
        chat = [w for w in self._messages if w.role in ("user", "assistant")]
        for widget in chat:
            widget.set_can_regenerate(widget is chat[-1] and widget is not self._streaming)

    # ------------------------------------------------------------------ streaming

    @property
    def streaming_message(self) -> MessageWidget | None:
        return self._streaming

    def begin_stream(
        self, model: str | None = None, message_id: int | None = None, draft: ReplyDraft | None = None
    ) -> MessageWidget:
        """A bubble for the reply being written; ``draft`` holds its text as it arrives (the session's), and
        ``stream_changed`` says when it grew."""
        self.end_stream()
        self._streaming = self.add_message("assistant", "", model=model, message_id=message_id)
        self._draft = draft if draft is not None else ReplyDraft()
        self._flush_timer.start()
        self._update_regenerate()
        return self._streaming

    def stream_changed(self) -> None:
        """The draft grew: it is repainted at the next flush (10 times a second, not per token)."""
        if self._streaming is not None:
            self._stream_dirty = True

    def end_stream(
        self,
        final_text: str | None = None,
        footer: str = "",
        reasoning: str | None = None,
        thinking_s: float | None = None,
    ) -> MessageWidget | None:
        widget = self._streaming
        self._flush_timer.stop()
        if widget is not None:
            draft = self._draft
            widget.set_text(final_text if final_text is not None else draft.answer)
            widget.set_footer(footer)
            thought = reasoning if reasoning is not None else draft.reasoning
            if thought.strip():
                widget.reasoning.show_reasoning(thought, False, thinking_s or draft.thinking_s)
                if (final_text or "").strip():
                    widget.reasoning.collapse()
            else:
                widget.reasoning.hide()
        self._streaming = None
        self._draft = ReplyDraft()
        self._stream_dirty = False
        self._update_regenerate()
        return widget

    def _flush(self) -> None:
        if not self._stream_dirty or self._streaming is None:
            return
        self._stream_dirty = False
        draft = self._draft
        thought = draft.reasoning
        if thought:
            section = self._streaming.reasoning
            was_thinking = section.header.text() == "Thinking…"
            section.show_reasoning(thought, thinking=not draft.answering, seconds=draft.thinking_s)
            if draft.answering and was_thinking:
                section.collapse()  # the answer started: the reasoning folds away
        if draft.answering or not thought:
            self._streaming.set_text(draft.answer, streaming=True)
        self.streamFlushed.emit()

    # ------------------------------------------------------------------ scrolling

    def _remember_position(self, value: int) -> None:
        self._stick_to_bottom = value >= self.verticalScrollBar().maximum() - 24

    def _follow_bottom(self, _minimum: int, maximum: int) -> None:
        if self._stick_to_bottom:
            self.verticalScrollBar().setValue(maximum)
