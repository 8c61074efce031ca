"""A long task's place in the status bar: what it is doing, how far it is, and a Stop button."""

from __future__ import annotations

from PySide6.QtCore import Signal
from PySide6.QtWidgets import QHBoxLayout, QProgressBar, QPushButton, QWidget

from fara_desktop.ui.widgets.plain_text import plain_label


class TaskProgress(QWidget):
    """Shown while a file task (import, export) runs. ``progressed`` may be emitted from the task's thread: Qt
    queues it to the window's thread."""

    progressed = Signal(int, int)  # done, total (total 0: not known yet)
    stopRequested = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("taskProgress")
        layout = QHBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        self.label = plain_label()
        self.bar = QProgressBar()
        self.bar.setMaximumWidth(160)
        self.bar.setAccessibleName("Task progress")
        self.stop_button = QPushButton("Stop")
        self.stop_button.setObjectName("stopTaskButton")
        self.stop_button.clicked.connect(self.stopRequested)
        layout.addWidget(self.label)
        layout.addWidget(self.bar)
        layout.addWidget(self.stop_button)
        self.progressed.connect(self._show_progress)
        self._running = False
        self.hide()

    def begin(self, text: str) -> None:
        self.label.setText(text)
        self.bar.setRange(0, 0)  # busy until the task says how far it is
        self.stop_button.setEnabled(True)
        self._running = True
        self.show()

    def _show_progress(self, done: int, total: int) -> None:
        if total > 0:
            self.bar.setRange(0, total)
            self.bar.setValue(done)

    def end(self) -> None:
        self._running = False
        self.hide()

    @property
    def running(self) -> bool:
        return self._running
