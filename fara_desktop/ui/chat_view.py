"""The chat pane: one widget per message, markdown rendering, and batched streaming of the current reply."""

from __future__ import annotations

from PySide6.QtCore import Qt, QTimer, QUrl, Signal
from PySide6.QtGui import QDesktopServices
from PySide6.QtWidgets import QFrame, QLabel, QScrollArea, QSizePolicy, QVBoxLayout, QWidget

from fara_desktop.engine.types import GenerationStats

REPAINT_INTERVAL_MS = 33  # at most ~30 repaints a second while a reply streams
_SAFE_LINK_SCHEMES = ("http", "https", "mailto")
_ROLE_TITLES = {"user": "You", "assistant": "Assistant", "notice": "Fara", "error": "Problem"}


def open_link(url: str) -> None:
    """Links open in the system browser only when clicked, and only for web and mail addresses."""
    target = QUrl(url)
    if target.scheme().lower() in _SAFE_LINK_SCHEMES:
        QDesktopServices.openUrl(target)


class MessageWidget(QFrame):
    """One message: a small title line and the body rendered as markdown (no remote content is fetched)."""

    def __init__(self, role: str, text: str = "", parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.role = role
        self.setObjectName(f"{role}Message")
        self.setProperty("role", role)
        self.setAccessibleName(f"{_ROLE_TITLES.get(role, role)} message")
        layout = QVBoxLayout(self)
        layout.setContentsMargins(14, 8, 14, 10)
        layout.setSpacing(3)
        self.title = QLabel(_ROLE_TITLES.get(role, role))
        self.title.setObjectName("messageTitle")
        self.body = QLabel()
        self.body.setObjectName("messageBody")
        self.body.setWordWrap(True)
        self.body.setTextFormat(Qt.TextFormat.MarkdownText)
        self.body.setOpenExternalLinks(False)
        self.body.linkActivated.connect(open_link)
        self.body.setTextInteractionFlags(
            Qt.TextInteractionFlag.TextSelectableByMouse | Qt.TextInteractionFlag.LinksAccessibleByMouse
        )
        self.body.setSizePolicy(QSizePolicy.Policy.Preferred, QSizePolicy.Policy.Minimum)
        self.footer = QLabel()
        self.footer.setObjectName("messageFooter")
        self.footer.hide()
        layout.addWidget(self.title)
        layout.addWidget(self.body)
        layout.addWidget(self.footer)
        self._text = ""
        self.set_text(text)

    @property
    def text(self) -> str:
        return self._text

    def set_text(self, text: str) -> None:
        self._text = text
        self.body.setText(text if text else "…")

    def set_footer(self, text: str) -> None:
        self.footer.setText(text)
        self.footer.setVisible(bool(text))


def stats_line(stats: GenerationStats) -> str:
    return (
        f"{stats.completion_tokens} tokens · {stats.gen_tok_per_s:.1f} tok/s · "
        f"first token {stats.ttft_s * 1000:.0f} ms · context {stats.context_used}/{stats.n_ctx}"
    )


class ChatView(QScrollArea):
    """Messages stacked top to bottom; the reply being written is repainted in batches, not per token."""

    streamFlushed = Signal()

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
        self._layout.addStretch(1)
        self.setWidget(self._content)
        self._messages: list[MessageWidget] = []
        self._streaming: MessageWidget | None = None
        self._stream_parts: list[str] = []
        self._stream_dirty = False
        self._flush_timer = QTimer(self)
        self._flush_timer.setInterval(REPAINT_INTERVAL_MS)
        self._flush_timer.timeout.connect(self._flush)
        self.verticalScrollBar().rangeChanged.connect(self._follow_bottom)
        self._stick_to_bottom = True
        self.verticalScrollBar().valueChanged.connect(self._remember_position)

    # ------------------------------------------------------------------ messages

    def messages(self) -> list[MessageWidget]:
        return list(self._messages)

    def add_message(self, role: str, text: str) -> MessageWidget:
        widget = MessageWidget(role, text, self._content)
        self._layout.insertWidget(self._layout.count() - 1, widget)
        self._messages.append(widget)
        self._stick_to_bottom = True
        return widget

    def remove_message(self, widget: MessageWidget) -> None:
        if widget in self._messages:
            self._messages.remove(widget)
            widget.setParent(None)
            widget.deleteLater()

    def clear(self) -> None:
        self.end_stream()
        for widget in self._messages:
            widget.setParent(None)
            widget.deleteLater()
        self._messages.clear()

    # ------------------------------------------------------------------ streaming

    @property
    def streaming_message(self) -> MessageWidget | None:
        return self._streaming

    def begin_stream(self) -> MessageWidget:
        self.end_stream()
        self._streaming = self.add_message("assistant", "")
        self._streaming.setProperty("streaming", True)
        self._stream_parts = []
        self._flush_timer.start()
        return self._streaming

    def append_stream(self, text: str) -> None:
        if self._streaming is None:
            return
        self._stream_parts.append(text)
        self._stream_dirty = True

    def end_stream(self, final_text: str | None = None, footer: str = "") -> MessageWidget | None:
        widget = self._streaming
        self._flush_timer.stop()
        if widget is not None:
            text = final_text if final_text is not None else "".join(self._stream_parts)
            widget.set_text(text)
            widget.set_footer(footer)
            widget.setProperty("streaming", False)
        self._streaming = None
        self._stream_parts = []
        self._stream_dirty = False
        return widget

    def _flush(self) -> None:
        if not self._stream_dirty or self._streaming is None:
            return
        self._stream_dirty = False
        joined = "".join(self._stream_parts)
        self._stream_parts = [joined]
        self._streaming.set_text(joined)
        self.streamFlushed.emit()

    # ------------------------------------------------------------------ scrolling

    def _remember_position(self, value: int) -> None:
        bar = self.verticalScrollBar()
        self._stick_to_bottom = value >= bar.maximum() - 24

    def _follow_bottom(self, _minimum: int, maximum: int) -> None:
        if self._stick_to_bottom:
            self.verticalScrollBar().setValue(maximum)
