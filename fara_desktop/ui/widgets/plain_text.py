"""Widgets that show data as plain text, never as Qt rich text.

Qt guesses: a QLabel, tooltip or message box whose text *looks* like HTML is rendered as HTML, and HTML can load
resources — ``<img src="/dev/zero">`` or an image on a FIFO blocks the GUI thread forever, and on Windows a
``file://host/share`` image opens a network connection. A model's name, a chat title, a hub file name or an error
text is somebody else's text. Every label that shows data is made here, with its format fixed to plain text, and
every tooltip that carries data is escaped; ``tests/unit/ui/test_hostile_text_rendering.py`` checks that no label
is left to guess.
"""

from __future__ import annotations

import html

from PySide6.QtCore import QSize, Qt
from PySide6.QtGui import QResizeEvent
from PySide6.QtWidgets import QLabel, QMessageBox, QSizePolicy, QWidget


def plain_label(text: str = "", parent: QWidget | None = None) -> QLabel:
    """A QLabel that shows ``text`` (and whatever it is given later) literally."""
    label = QLabel(parent)
    label.setTextFormat(Qt.TextFormat.PlainText)
    label.setText(text)
    return label


class ElidedLabel(QLabel):
    """One line of plain text that gives up width instead of pushing its neighbours out: what does not fit is
    elided in the middle (a model's file path keeps its start and its name), and the tooltip holds all of it."""

    def __init__(self, text: str = "", parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setTextFormat(Qt.TextFormat.PlainText)
        self.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        self._full = ""
        self.setText(text)

    def setText(self, text: str) -> None:
        self._full = text
        self.setToolTip(plain_tooltip(text))
        self._elide()

    def text(self) -> str:
        return self._full

    def minimumSizeHint(self) -> QSize:
        return QSize(0, super().minimumSizeHint().height())

    def sizeHint(self) -> QSize:
        return QSize(self.fontMetrics().horizontalAdvance(self._full) + 4, super().sizeHint().height())

    def resizeEvent(self, event: QResizeEvent) -> None:
        super().resizeEvent(event)
        self._elide()

    def _elide(self) -> None:
        shown = self.fontMetrics().elidedText(self._full, Qt.TextElideMode.ElideMiddle, max(0, self.width() - 2))
        super().setText(shown)


def plain_tooltip(text: str) -> str:
    """Tooltip text shown literally: escaped and wrapped, so Qt's rich-text guess sees only our own markup."""
    if not text:
        return ""
    return f"<p style='white-space:pre-wrap'>{html.escape(text)}</p>"


def plain_message_box(
    icon: QMessageBox.Icon, title: str, text: str, parent: QWidget | None = None, detail: str = ""
) -> QMessageBox:
    """A message box whose text and informative text are plain text."""
    box = QMessageBox(icon, title, text, QMessageBox.StandardButton.NoButton, parent)
    box.setTextFormat(Qt.TextFormat.PlainText)
    if detail:
        box.setInformativeText(detail)
        label = box.findChild(QLabel, "qt_msgbox_informativelabel")
        if label is not None:
            label.setTextFormat(Qt.TextFormat.PlainText)
    return box
