"""Help ▸ User guide: the guide that ships with the app (``docs/guide.md``, a package asset), offline, with a search
box, opened at the section for the screen the user is on."""

from __future__ import annotations

from PySide6.QtCore import QTimer
from PySide6.QtGui import QShowEvent, QTextCursor, QTextDocument
from PySide6.QtWidgets import QDialog, QHBoxLayout, QLabel, QLineEdit, QPushButton, QTextBrowser, QVBoxLayout, QWidget

from fara_desktop.files.resources import asset_path
from fara_desktop.ui.widgets.plain_text import plain_label

GUIDE = "guide.md"


class GuideDialog(QDialog):
    """The user guide in a browser of its own (links to the web are not followed: it is read here, offline);
    ``find`` searches it from where the reader is, wrapping to the top."""

    def __init__(self, parent: QWidget | None = None, section: str | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle("Fara Desktop — user guide")
        self.setObjectName("guideDialog")
        self.resize(860, 640)
        layout = QVBoxLayout(self)
        row = QHBoxLayout()
        self.search = QLineEdit()
        self.search.setObjectName("guideSearch")
        self.search.setPlaceholderText("Search the guide (Enter: the next place)")
        self.search.setClearButtonEnabled(True)
        self.search.returnPressed.connect(self.find_next)
        self.next_button = QPushButton("Find next")
        self.next_button.setAutoDefault(False)
        self.next_button.clicked.connect(self.find_next)
        row.addWidget(self.search, 1)
        row.addWidget(self.next_button)
        layout.addLayout(row)
        self.browser = QTextBrowser()
        self.browser.setObjectName("guideText")
        self.browser.setOpenLinks(False)  # nothing leaves this computer from here
        try:
            text = asset_path(GUIDE).read_text(encoding="utf-8")
        except OSError as exc:
            text = f"The guide could not be read ({exc.strerror or exc})."
        self.browser.setMarkdown(text)
        layout.addWidget(self.browser, 1)
        self.status: QLabel = plain_label()
        self.status.setObjectName("guideStatus")
        layout.addWidget(self.status)
        self._section = section  # scrolled to once the dialog is laid out (before, the view has no height)

    def showEvent(self, event: QShowEvent) -> None:
        super().showEvent(event)
        if self._section:
            section, self._section = self._section, None
            QTimer.singleShot(0, lambda: self.show_section(section))

    def find_next(self) -> bool:
        """The next place the search box's words occur (from the top again after the last); False when nowhere."""
        words = self.search.text().strip()
        if not words:
            return False
        found = self.browser.find(words)
        if not found:
            self.browser.moveCursor(QTextCursor.MoveOperation.Start)
            found = self.browser.find(words)
        self.status.setText("" if found else f"“{words}” is not in the guide.")
        return found

    def show_section(self, heading: str) -> bool:
        """Scroll to the heading ``heading`` (its whole text, as the guide writes it), at the top of the view."""
        document = self.browser.document()
        cursor = document.find(heading, 0, QTextDocument.FindFlag.FindCaseSensitively)
        while not cursor.isNull() and cursor.block().blockFormat().headingLevel() == 0:
            cursor = document.find(heading, cursor, QTextDocument.FindFlag.FindCaseSensitively)
        if cursor.isNull():
            return False
        self.browser.setTextCursor(cursor)
        bar = self.browser.verticalScrollBar()
        bar.setValue(bar.value() + self.browser.cursorRect().top())  # the heading at the top of the view
        return True
