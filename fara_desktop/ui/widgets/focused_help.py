"""The help of the settings field being edited, in a line under the form (not only in a tool tip)."""

from __future__ import annotations

from PySide6.QtCore import QEvent, QObject
from PySide6.QtWidgets import QLabel, QWidget

from fara_desktop.settings.fields import described


class FocusedHelp(QObject):
    """A line under a form that says in plain words what the field being edited (or pointed at) does: the help was
    only in tool tips, which a keyboard user never sees and a new user does not think to wait for."""

    def __init__(self, label: QLabel, first: str) -> None:
        super().__init__(label)
        self.label = label
        self._first = first
        self._keys: dict[QObject, str] = {}
        label.setText(first)

    def watch(self, widget: QWidget, key: str) -> None:
        self._keys[widget] = key
        widget.installEventFilter(self)

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        if event.type() in (QEvent.Type.FocusIn, QEvent.Type.Enter) and watched in self._keys:
            item = described(self._keys[watched])
            self.label.setText(f"{item.label}: {item.help}")
        return super().eventFilter(watched, event)
