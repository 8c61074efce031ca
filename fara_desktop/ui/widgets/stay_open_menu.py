"""A menu whose check boxes can be ticked one after another: Qt closes a menu on every click, so choosing three
of a chat's tools meant opening it three times."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtGui import QKeyEvent, QMouseEvent
from PySide6.QtWidgets import QMenu


class StayOpenMenu(QMenu):
    """Clicking (or pressing Space on) a checkable item toggles it and leaves the menu open; other items, Enter and
    Esc behave as in any menu."""

    def mouseReleaseEvent(self, event: QMouseEvent) -> None:
        action = self.actionAt(event.position().toPoint())
        if action is not None and action.isEnabled() and action.isCheckable():
            action.trigger()
            return
        super().mouseReleaseEvent(event)

    def keyPressEvent(self, event: QKeyEvent) -> None:
        action = self.activeAction()
        if event.key() == Qt.Key.Key_Space and action is not None and action.isEnabled() and action.isCheckable():
            action.trigger()
            return
        super().keyPressEvent(event)
