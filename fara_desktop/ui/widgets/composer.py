"""The message editor: Enter sends, Shift+Enter starts a new line, Esc asks to stop the reply."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import QEvent, QMimeData, Qt, Signal
from PySide6.QtGui import QKeyEvent, QResizeEvent
from PySide6.QtWidgets import QPlainTextEdit, QWidget

MAX_VISIBLE_LINES = 8
# A QPlainTextEdit draws its placeholder on one line, clipped: the longest that fits the width is shown.
PLACEHOLDERS = ("Ask anything — Enter to send, Shift+Enter for a new line", "Ask anything — Enter to send", "Ask…")
LONGEST_WRAPPED_LINE = 20_000
PICTURE_SUFFIXES = (".png", ".jpg", ".jpeg", ".gif", ".webp", ".bmp", ".tif", ".tiff")
PICTURE_FORMATS = ("image/png", "image/jpeg", "image/gif", "image/webp", "image/bmp")


def pictures_in(source: QMimeData) -> list[Path | bytes]:
    """The pictures a paste or a drop carries: picture files on this computer, else an image's own bytes (as the
    copying app encoded them: decoded later in the sandbox, never by Qt here)."""
    files = [Path(url.toLocalFile()) for url in source.urls() if url.isLocalFile()]
    pictures: list[Path | bytes] = [f for f in files if f.suffix.lower() in PICTURE_SUFFIXES]
    if pictures:
        return pictures
    encoded = next((f for f in PICTURE_FORMATS if source.hasFormat(f)), None)
    return [bytes(source.data(encoded).data())] if encoded else []


class Composer(QPlainTextEdit):
    """Multi-line input that grows with its text up to a few lines."""

    submitted = Signal()
    stopRequested = Signal()
    picturesOffered = Signal(object)  # a paste or a drop of pictures: a list of Paths and encoded bytes

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("composer")
        self.setAccessibleName("Message")
        self.setPlaceholderText(PLACEHOLDERS[0])
        self.setToolTip(PLACEHOLDERS[0])
        self.setTabChangesFocus(True)
        self.document().contentsChanged.connect(self._fit_height)
        # A paste is laid out after its text is in: the height follows the layout, or a 3,000-word paste showed
        # one line and no scroll bar.
        self.document().documentLayout().documentSizeChanged.connect(lambda _size: self._fit_height())
        self._fit_height()

    def resizeEvent(self, event: QResizeEvent) -> None:
        super().resizeEvent(event)
        self._fit_placeholder()

    def changeEvent(self, event: QEvent) -> None:
        super().changeEvent(event)
        if event.type() in (QEvent.Type.FontChange, QEvent.Type.StyleChange):  # a larger font in Appearance
            self._fit_placeholder()

    def _fit_placeholder(self) -> None:
        room = self.viewport().width() - 2 * self.document().documentMargin() - 4
        metrics = self.fontMetrics()
        fitting = next((p for p in PLACEHOLDERS if metrics.horizontalAdvance(p) <= room), PLACEHOLDERS[-1])
        if fitting != self.placeholderText():
            self.setPlaceholderText(fitting)

    def _wrap_for(self, text: str) -> None:
        """Word-wrapping one enormous line makes Qt lay it out for minutes; such a paste scrolls sideways."""
        longest = max((len(line) for line in text.splitlines()), default=0)
        mode = QPlainTextEdit.LineWrapMode
        self.setLineWrapMode(mode.NoWrap if longest > LONGEST_WRAPPED_LINE else mode.WidgetWidth)

    def setPlainText(self, text: str) -> None:
        self._wrap_for(text)
        super().setPlainText(text)

    def clear(self) -> None:
        super().clear()
        self.setLineWrapMode(QPlainTextEdit.LineWrapMode.WidgetWidth)

    def canInsertFromMimeData(self, source: QMimeData) -> bool:
        return bool(pictures_in(source)) or super().canInsertFromMimeData(source)

    def insertFromMimeData(self, source: QMimeData) -> None:
        pictures = pictures_in(source)
        if pictures:  # attached, not pasted as a file name
            self.picturesOffered.emit(pictures)
            return
        if source.hasText():
            self._wrap_for(self.toPlainText() + source.text())
        super().insertFromMimeData(source)

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
