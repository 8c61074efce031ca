"""The message editor: Enter sends, Shift+Enter starts a new line, Esc asks to stop the reply."""

from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QKeyEvent
from PySide6.QtWidgets import QPlainTextEdit, QWidget

MAX_VISIBLE_LINES = 8


class Composer(QPlainTextEdit):
    """Multi-line input that grows with its text up to a few lines."""

    submitted = Signal()
    stopRequested = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("composer")
        self.setAccessibleName("Message")
        self.setPlaceholderText("Ask anything — Enter to send, Shift+Enter for a new line")
        self.setTabChangesFocus(True)
        self.document().contentsChanged.connect(self._fit_height)
        self._fit_height()

    def keyPressEvent(self, event: QKeyEvent) -> None:
        key = event.key()
        if key in (Qt.Key.Key_Return, Qt.Key.Key_Enter):
            if event.modifiers() & Qt.KeyboardModifier.ShiftModifier:
                self.insertPlainText("\n")
            else:
                self.submitted.emit()
            return
        if key == Qt.Key.Key_Escape:
            self.stopRequested.emit()
            return
        super().keyPressEvent(event)

    def _fit_height(self) -> None:
        wanted = max(1, int(self.document().size().height()))  # in lines for a plain-text document
        lines = min(MAX_VISIBLE_LINES, wanted)
        policy = Qt.ScrollBarPolicy
        self.setVerticalScrollBarPolicy(policy.ScrollBarAsNeeded if wanted > lines else policy.ScrollBarAlwaysOff)
        margins = 2 * self.document().documentMargin() + 2 * self.frameWidth() + 14  # + stylesheet padding
        self.setFixedHeight(int(lines * self.fontMetrics().lineSpacing() + margins))
