"""A list that asks for a few rows of height, not Qt's default 192 px: in a scrolling settings page with wrapped
text the page is laid out at its items' size hints, and two default lists pushed its buttons and status below the
fold of a 560 px dialog."""

from __future__ import annotations

from PySide6.QtCore import QSize
from PySide6.QtWidgets import QListWidget, QWidget


class ShortList(QListWidget):
    """A ``QListWidget`` whose preferred height is ``rows`` lines; it still grows with the space it is given."""

    def __init__(self, rows: int, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._rows = rows

    def sizeHint(self) -> QSize:
        hint = super().sizeHint()
        rows_height = self._rows * (self.fontMetrics().height() + 4) + 2 * self.frameWidth() + 4
        return QSize(hint.width(), rows_height)

    def minimumSizeHint(self) -> QSize:
        return self.sizeHint()
