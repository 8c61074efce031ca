"""A cited passage: its file, page or lines, its text, and a button that opens the file in the user's own app."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from PySide6.QtCore import QSize, Qt, QUrl
from PySide6.QtGui import QDesktopServices
from PySide6.QtWidgets import QDialog, QDialogButtonBox, QPlainTextEdit, QPushButton, QVBoxLayout, QWidget

from fara_desktop.documents.opening import how_to_open, nothing_opens
from fara_desktop.text.untrusted import one_line
from fara_desktop.ui.widgets.plain_text import plain_label
from fara_desktop.ui.window_state import fit_to_screen
from fara_desktop.vocabulary.sources import Source


class PassageDialog(QDialog):
    """Shows one source of a reply."""

    opener: Callable[[QUrl], bool] = staticmethod(QDesktopServices.openUrl)  # tests put a recorder here

    def __init__(self, source: Source, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("passageDialog")
        self.setWindowTitle(one_line(f"[{source.number}] {source.where}", 120))
        fit_to_screen(self, QSize(640, 420))
        self.source = source
        layout = QVBoxLayout(self)
        self.location = plain_label(f"[{source.number}] {source.where}\n{one_line(source.path, 500)}")
        self.location.setWordWrap(True)
        self.location.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.note = plain_label("")
        self.note.setObjectName("openNote")
        self.note.setWordWrap(True)
        self.note.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.note.hide()
        self.text = QPlainTextEdit(source.text)
        self.text.setReadOnly(True)
        self.text.setAccessibleName("The passage")
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Close)
        buttons.rejected.connect(self.reject)
        self.choice = how_to_open(Path(source.path))
        self.open_button = QPushButton("Open the file" if self.choice.kind == "file" else "Show in folder")
        self.open_button.setEnabled(self.choice.kind != "missing")
        self.open_button.setToolTip(self.choice.note)
        self.open_button.clicked.connect(self.open_file)
        buttons.addButton(self.open_button, QDialogButtonBox.ButtonRole.ActionRole)
        layout.addWidget(self.location)
        layout.addWidget(self.text, 1)
        layout.addWidget(self.note)
        layout.addWidget(buttons)

    def open_file(self) -> None:
        """A document the user indexed, opened by their desktop's app for it, only on this click; anything else
        (a script, a program, a link) shows its folder; and the dialog says when nothing could open it."""
        choice = how_to_open(Path(self.source.path))  # again: the file may have changed since the dialog opened
        if choice.kind == "missing":
            self._say(choice.note)
            return
        if self.opener(QUrl.fromLocalFile(str(choice.target))):
            if choice.note:
                self._say(choice.note)
            return
        self._say(nothing_opens(choice))

    def _say(self, text: str) -> None:
        self.note.setText(text)
        self.note.show()
