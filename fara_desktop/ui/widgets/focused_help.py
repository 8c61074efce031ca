"""The help of the settings field being edited, in a line under the form (not only in a tool tip)."""

from __future__ import annotations

from PySide6.QtCore import QObject
from PySide6.QtWidgets import QApplication, QLabel, QWidget

from fara_desktop.settings.fields import described


class FocusedHelp(QObject):
    """A line under a form that says in plain words what the field being edited does: the help was only in tool
    tips, which a keyboard user never sees and a new user does not think to wait for. It follows the application's
    focus (a signal, disconnected with this object) rather than filtering the fields' events: an event filter
    written in Python is called while Qt restyles or destroys the widgets it watches, and crashed there."""

    def __init__(self, label: QLabel, first: str) -> None:
        super().__init__(label)
        self.label = label
        self._keys: dict[str, str] = {}  # a field's object name → its setting
        label.setText(first)
        app = QApplication.instance()
        if isinstance(app, QApplication):
            app.focusChanged.connect(self._focus_changed)

    def watch(self, widget: QWidget, key: str) -> None:
        self._keys[widget.objectName()] = key

    def _focus_changed(self, _old: QWidget | None, new: QWidget | None) -> None:
        while new is not None and new.objectName() not in self._keys:  # a spin box's own line edit has the focus
            new = new.parentWidget() if not new.isWindow() else None
        if new is not None and new.window() is self.label.window():
            item = described(self._keys[new.objectName()])
            self.label.setText(f"{item.label}: {item.help}")
