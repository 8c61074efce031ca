"""A cited passage: its file, page or lines, its text, and a button that opens the file in the user's own app."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import QSize, QUrl
from PySide6.QtGui import QDesktopServices
from PySide6.QtWidgets import QDialog, QDialogButtonBox, QPlainTextEdit, QPushButton, QVBoxLayout, QWidget

from fara_desktop.chats.storage import Source
from fara_desktop.ui.widgets.plain_text import plain_label
from fara_desktop.ui.window_state import fit_to_screen


class PassageDialog(QDialog):
    """Shows one source of a reply."""

    def __init__(self, source: Source, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("passageDialog")
        self.setWindowTitle(f"[{source.number}] {source.where}")
        fit_to_screen(self, QSize(640, 420))
        self.source = source
        layout = QVBoxLayout(self)
        self.location = plain_label(f"[{source.number}] {source.where}\n{source.path}")
        self.location.setWordWrap(True)
        self.text = QPlainTextEdit(source.text)
        self.text.setReadOnly(True)
        self.text.setAccessibleName("The passage")
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Close)
        buttons.rejected.connect(self.reject)
        self.open_button = QPushButton("Open the file")
        self.open_button.setEnabled(Path(source.path).is_file())
        self.open_button.clicked.connect(self.open_file)
        buttons.addButton(self.open_button, QDialogButtonBox.ButtonRole.ActionRole)
        layout.addWidget(self.location)
        layout.addWidget(self.text, 1)
        layout.addWidget(buttons)

    def open_file(self) -> None:
        """A file the user indexed, opened by their desktop's app for it, only on this click."""
        QDesktopServices.openUrl(QUrl.fromLocalFile(self.source.path))
