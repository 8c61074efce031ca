"""Notices in one place that is not the conversation: the newest above the composer, earlier ones under History.

A notice (a model that failed to load, an import refused, the local API not starting) is about the app, not about
the chat that happens to be open; written into the transcript it landed in whatever chat was open — a new empty
one included — and came back after every Settings OK. Here the newest one shows until it is dismissed or replaced,
the same text twice in a row is not repeated, and History lists the last ones with their time.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QFrame, QHBoxLayout, QMenu, QToolButton, QWidget

from fara_desktop.text.format import format_when
from fara_desktop.text.untrusted import one_line
from fara_desktop.ui.widgets.plain_text import plain_label

MAX_HISTORY = 100


@dataclass(frozen=True)
class Notice:
    """One notice: when, its kind ("notice" or "error") and its text."""

    at: float
    role: str
    text: str


class NoticeBar(QFrame):
    """The newest notice, a History menu of the earlier ones, and a button that dismisses it."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("noticeBar")
        self.setProperty("role", "notice")
        layout = QHBoxLayout(self)
        layout.setContentsMargins(10, 4, 4, 4)
        self.label = plain_label()
        self.label.setObjectName("noticeText")
        self.label.setWordWrap(True)
        self.label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.history_button = QToolButton()
        self.history_button.setText("History")
        self.history_button.setToolTip("Earlier notices")
        self.history_button.setPopupMode(QToolButton.ToolButtonPopupMode.InstantPopup)
        self.history_menu = QMenu(self.history_button)
        self.history_menu.aboutToShow.connect(self._fill_history)
        self.history_button.setMenu(self.history_menu)
        self.close_button = QToolButton()
        self.close_button.setText("×")
        self.close_button.setToolTip("Dismiss this notice")
        self.close_button.setAccessibleName("Dismiss this notice")
        self.close_button.clicked.connect(self.hide)
        layout.addWidget(self.label, 1)
        layout.addWidget(self.history_button, 0, Qt.AlignmentFlag.AlignTop)
        layout.addWidget(self.close_button, 0, Qt.AlignmentFlag.AlignTop)
        self.notices: list[Notice] = []
        self.hide()

    def add(self, text: str, role: str = "notice") -> None:
        if self.notices and (self.notices[-1].text, self.notices[-1].role) == (text, role):
            self.notices[-1] = Notice(time.time(), role, text)  # the same again: shown once, with the new time
        else:
            self.notices.append(Notice(time.time(), role, text))
            del self.notices[:-MAX_HISTORY]
        self.setProperty("role", role)
        self.style().unpolish(self)
        self.style().polish(self)
        self.label.setText(text)
        self.setAccessibleName("Error" if role == "error" else "Notice")
        self.show()

    def withdraw(self, text: str) -> None:
        """A notice that is no longer true: hidden when it is the one shown (it stays in the history)."""
        if self.isVisible() and self.label.text() == text:
            self.hide()

    def texts(self, role: str | None = None) -> list[str]:
        return [n.text for n in self.notices if role is None or n.role == role]

    def _fill_history(self) -> None:
        self.history_menu.clear()
        for notice in reversed(self.notices):
            mark = "⚠ " if notice.role == "error" else ""
            action = self.history_menu.addAction(f"{format_when(notice.at)} · {mark}{one_line(notice.text, 120)}")
            action.setToolTip(notice.text)
            action.triggered.connect(lambda _checked=False, n=notice: self._show_again(n))

    def _show_again(self, notice: Notice) -> None:
        self.setProperty("role", notice.role)
        self.style().unpolish(self)
        self.style().polish(self)
        self.label.setText(notice.text)
        self.show()
