"""The Documents panel under the chat list: collections, what was indexed and what could not be read, and the
progress of a scan (files, passages, time left) with Pause."""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import QSize, Qt, Signal
from PySide6.QtWidgets import (
    QHBoxLayout,
    QListWidget,
    QListWidgetItem,
    QProgressBar,
    QPushButton,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from fara_desktop.documents.index import CollectionSummary
from fara_desktop.documents.indexer import IndexProgress
from fara_desktop.text.format import format_count, format_duration, format_plan_duration, format_when
from fara_desktop.ui.widgets.plain_text import plain_label, plain_tooltip


def _tool_button(text: str) -> QToolButton:
    """A small button: the panel shares the narrow left column with the chat list."""
    button = QToolButton()
    button.setText(text)
    button.setAccessibleName(text.rstrip("…"))
    return button


RATE_SMOOTHING = 0.1  # each new rate moves the one used by a tenth: a reply's dip barely moves the time left


class DocumentsPanel(QWidget):
    """Lists collections; the buttons ask the documents controller to act."""

    addFolderRequested = Signal()
    addFilesRequested = Signal()
    rescanRequested = Signal(str)
    removeRequested = Signal(str)
    pauseToggled = Signal(bool)
    semanticRequested = Signal()  # convert the installed embedder and turn semantic search on

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("documentsPanel")
        layout = QVBoxLayout(self)
        layout.setContentsMargins(8, 6, 8, 6)
        layout.setSpacing(4)
        title = plain_label("Documents")
        title.setObjectName("documentsTitle")
        self.list = QListWidget()
        self.list.setObjectName("collectionList")
        self.list.setAccessibleName("Document collections")
        self.list.setWordWrap(True)
        self.list.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        # On a short screen the list gives way (it scrolls) before the progress and its status are cut off.
        self.list.setMinimumHeight(44)
        add_row = QHBoxLayout()
        self.add_folder_button = _tool_button("Add folder…")
        self.add_folder_button.clicked.connect(self.addFolderRequested)
        self.add_files_button = _tool_button("Add files…")
        self.add_files_button.clicked.connect(self.addFilesRequested)
        add_row.addWidget(self.add_folder_button)
        add_row.addWidget(self.add_files_button)
        actions = QHBoxLayout()
        self.rescan_button = _tool_button("Re-scan")
        self.rescan_button.setToolTip("Read new and changed files again; forget deleted ones")
        self.rescan_button.clicked.connect(lambda: self._current_name(self.rescanRequested.emit))
        self.remove_button = _tool_button("Remove")
        self.remove_button.setToolTip("Forget this collection (your files are not touched)")
        self.remove_button.clicked.connect(lambda: self._current_name(self.removeRequested.emit))
        actions.addWidget(self.rescan_button)
        actions.addWidget(self.remove_button)
        self._rates: dict[str, float] = {}  # per collection: the smoothed vectors per second
        self.progress = QProgressBar()
        self.progress.setObjectName("indexProgress")
        self.progress.setAccessibleName("Indexing progress")
        self.progress.hide()
        self.status = plain_label()
        self.status.setObjectName("documentsStatus")
        self.status.setWordWrap(True)
        self.pause_button = QPushButton("Pause")
        self.pause_button.setCheckable(True)
        self.pause_button.toggled.connect(self._pause_toggled)
        self.pause_button.hide()
        self.semantic_button = QPushButton("Turn on semantic search")
        self.semantic_button.setObjectName("semanticButton")
        self.semantic_button.setToolTip(
            "all-MiniLM-L6-v2 is installed: convert it for llama.cpp (about 46 MB, a few seconds) so that questions "
            "also find passages that say the same thing in other words."
        )
        self.semantic_button.clicked.connect(self.semanticRequested)
        self.semantic_button.hide()
        layout.addWidget(title)
        layout.addWidget(self.list, 1)
        layout.addLayout(add_row)
        layout.addLayout(actions)
        layout.addWidget(self.progress)
        layout.addWidget(self.pause_button)
        layout.addWidget(self.semantic_button)
        layout.addWidget(self.status)

    def _current_name(self, act: Callable[[str], object]) -> None:
        item = self.list.currentItem()
        if item is not None and item.data(Qt.ItemDataRole.UserRole):
            act(item.data(Qt.ItemDataRole.UserRole))

    def _pause_toggled(self, paused: bool) -> None:
        self.pause_button.setText("Resume" if paused else "Pause")
        self.pauseToggled.emit(paused)

    def minimumSizeHint(self) -> QSize:
        """Tall enough for the wrapped status at this width (a splitter asks this; Qt's own hint counts one line
        of a word-wrapped label, and a long status was cut off at 1024×600)."""
        hint = super().minimumSizeHint()
        layout = self.layout()
        if layout is not None and layout.hasHeightForWidth():
            hint.setHeight(max(hint.height(), layout.minimumHeightForWidth(max(self.width(), hint.width()))))
        return hint

    def show_collections(self, collections: list[CollectionSummary], retrieval: str, semantic: bool = False) -> None:
        current = self.list.currentItem().data(Qt.ItemDataRole.UserRole) if self.list.currentItem() else None
        self.list.clear()
        for summary in collections:
            when = format_when(summary.indexed_at) if summary.indexed_at else "never"
            text = (
                f"{summary.name}\n{format_count(summary.files, 'file')} · {format_count(summary.passages, 'passage')}"
            )
            if summary.unreadable:
                text += f" · {summary.unreadable:,} unreadable"
            item = QListWidgetItem(text)
            item.setData(Qt.ItemDataRole.UserRole, summary.name)
            item.setToolTip(plain_tooltip(f"Indexed {when}\nFrom: " + "\n".join(summary.roots)))
            self.list.addItem(item)
            if summary.name == current:
                self.list.setCurrentItem(item)
        if self.list.currentItem() is None and self.list.count():
            self.list.setCurrentRow(0)
        self.status.setToolTip(plain_tooltip(retrieval))
        if not collections:
            self.status.setText("Add a folder; chats can answer from it.")
        elif not self.progress.isVisible():
            self.status.setText("Search: lexical + semantic" if semantic else "Search: lexical (no embedding model)")

    def show_unreadable(self, name: str, unreadable: list[tuple[str, str]]) -> None:
        for row in range(self.list.count()):
            item = self.list.item(row)
            if item.data(Qt.ItemDataRole.UserRole) == name and unreadable:
                lines = [f"{path}: {reason}" for path, reason in unreadable[:30]]
                more = f"\n… and {len(unreadable) - 30} more" if len(unreadable) > 30 else ""
                item.setToolTip(plain_tooltip(item.toolTip() + "\n\nCould not be read:\n" + "\n".join(lines) + more))

    def show_progress(self, name: str, progress: IndexProgress) -> None:
        self.progress.show()
        self.pause_button.show()
        self.progress.setRange(0, max(progress.files_total, 1))
        self.progress.setValue(progress.files_done)
        left = progress.seconds_left
        eta = f" · {format_duration(left)}" if left is not None and progress.files_done >= 5 else ""
        self.status.setText(
            f"Indexing {name}: {progress.files_done:,} of {format_count(progress.files_total, 'file')} · "
            f"{format_count(progress.passages, 'passage')}{eta}"
        )

    def show_embedding(self, name: str, done: int, total: int, per_second: float) -> None:
        """The second stage: vectors for semantic search, after the collection is already searchable. The rate
        behind the time left is smoothed (it dips while a reply has the CPU), and the time is said coarsely."""
        self.progress.show()
        self.pause_button.show()
        self.progress.setRange(0, max(total, 1))
        self.progress.setValue(done)
        if per_second > 0:
            previous = self._rates.get(name)
            self._rates[name] = per_second if previous is None else previous + RATE_SMOOTHING * (per_second - previous)
        rate = self._rates.get(name, 0.0)
        left = (total - done) / rate if rate > 0 else None
        eta = f" · {format_plan_duration(left)} left" if left is not None and done >= 16 else ""
        self.status.setText(
            f"{name}: semantic vectors for {done:,} of {format_count(total, 'passage')}{eta} (searchable already)"
        )

    def show_idle(self, text: str) -> None:
        self.progress.hide()
        self.pause_button.hide()
        self.pause_button.setChecked(False)
        self.status.setText(text)
