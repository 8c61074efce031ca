"""One download in the Get models dialog: progress, speed, time left, Pause/Resume, Cancel, then Use."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import Signal
from PySide6.QtWidgets import (
    QFrame,
    QHBoxLayout,
    QProgressBar,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from fara_desktop.models.hub import (
    host_of,
)
from fara_desktop.models.transfer import DownloadCancelled, Progress
from fara_desktop.text.format import format_duration, format_rate, format_size
from fara_desktop.ui.download_task import DownloadTask
from fara_desktop.ui.widgets.plain_text import plain_label, plain_tooltip


class DownloadRow(QFrame):
    """One download: name, progress bar, bytes · speed · time left, Pause/Resume, Cancel, then "Use this model"."""

    useRequested = Signal(object)  # Path

    def __init__(self, title: str, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("downloadRow")
        self.task: DownloadTask | None = None
        self.path: Path | None = None
        layout = QVBoxLayout(self)
        layout.setContentsMargins(8, 6, 8, 6)
        top = QHBoxLayout()
        self.title = plain_label(title)
        self.title.setObjectName("downloadTitle")
        self.pause_button = QPushButton("Pause")
        self.pause_button.setObjectName("pauseDownloadButton")
        self.pause_button.clicked.connect(self._pause_or_resume)
        self.cancel_button = QPushButton("Cancel")
        self.cancel_button.setObjectName("cancelDownloadButton")
        self.cancel_button.clicked.connect(self.cancel)
        self.use_button = QPushButton("Use this model")
        self.use_button.setObjectName("useDownloadButton")
        self.use_button.clicked.connect(lambda: self.useRequested.emit(self.path))
        self.use_button.hide()
        top.addWidget(self.title, 1)
        for button in (self.pause_button, self.cancel_button, self.use_button):
            top.addWidget(button)
        self.bar = QProgressBar()
        self.bar.setObjectName("downloadProgress")
        self.bar.setRange(0, 0)
        self.bar.setTextVisible(False)
        self.bar.setMaximumHeight(8)
        self.status = plain_label("Reading the hub's file listing…")
        self.status.setObjectName("downloadStatus")
        self.status.setWordWrap(True)
        layout.addLayout(top)
        layout.addWidget(self.bar)
        layout.addWidget(self.status)
        self.pause_button.setEnabled(False)

    def attach(self, task: DownloadTask) -> None:
        self.task = task
        files = " + ".join(r.filename for r in task.remotes)
        self.title.setText(f"{task.remote.repo_id} · {files} · from {host_of(task.remote.url)}")
        task.progress.connect(self._on_progress)
        task.finished.connect(self._on_finished)
        task.failed.connect(self._on_failed)
        already = task.partial_bytes()
        what = (
            f"{len(task.remotes)} files, each checked against its sha256"
            if len(task.remotes) > 1
            else f"sha256 {task.remote.sha256[:12]}…"
        )
        self.status.setText(
            f"{format_size(task.total)} · {what}" + (f" · resuming after {format_size(already)}" if already else "")
        )
        self.pause_button.setEnabled(True)
        task.start()

    def fail_before_start(self, message: str) -> None:
        self._show_problem(message)
        self.pause_button.hide()
        self.cancel_button.setText("Dismiss")

    def _pause_or_resume(self) -> None:
        if self.task is None:
            return
        if self.task.running:
            self.task.pause()
        else:
            self.pause_button.setText("Pause")
            self.setProperty("problem", False)
            self.status.setText("Resuming…")
            self.task.start()

    def cancel(self) -> None:
        if self.task is not None and self.path is None:
            self.task.cancel()
        self.hide()
        self.deleteLater()

    def _on_progress(self, progress: Progress) -> None:
        self.bar.setRange(0, 1000)
        self.bar.setValue(int(1000 * progress.done / max(1, progress.total)))
        self.status.setText(
            f"{format_size(progress.done)} of {format_size(progress.total)} · "
            + (f"{format_rate(progress.bytes_per_s)} · " if progress.bytes_per_s > 0 else "measuring speed · ")
            + format_duration(progress.eta_s)
        )

    def _on_finished(self, path: Path) -> None:
        self.path = path
        self.bar.setRange(0, 1000)
        self.bar.setValue(1000)
        several = self.task is not None and len(self.task.remotes) > 1
        if self.task is not None and self.task.publish_as is not None:
            self.status.setText(f"Done: sha256 verified. Saved beside {path.name}: it can see pictures now.")
        else:
            self.status.setText(
                f"Done: sha256 verified{' for both files' if several else ''}. Saved in the "
                "Hugging Face cache, where other apps find it too."
            )
        self.status.setToolTip(plain_tooltip(str(path)))
        self.pause_button.hide()
        self.cancel_button.setText("Dismiss")
        self.use_button.show()

    def _on_failed(self, error: Exception) -> None:
        if isinstance(error, DownloadCancelled):
            if error.kept_partial:
                self.status.setText(f"Paused ({error}). Resume continues where it stopped.")
                self.pause_button.setText("Resume")
            return
        self._show_problem(str(error))
        resumable = self.task is not None and self.task.partial_bytes() > 0
        self.pause_button.setText("Resume" if resumable else "Retry")

    def _show_problem(self, message: str) -> None:
        self.setProperty("problem", True)
        self.bar.setRange(0, 1000)
        self.status.setText(message)
