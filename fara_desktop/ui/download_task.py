"""A download running on its own thread, reporting to the GUI through Qt signals."""

from __future__ import annotations

import logging
import threading
from pathlib import Path

from PySide6.QtCore import QObject, Signal

from fara_desktop.models.hub import RemoteFile
from fara_desktop.models.transfer import Downloader, Progress
from fara_desktop.vocabulary.errors import FaraError

log = logging.getLogger(__name__)


class DownloadTask(QObject):
    """Wraps one ``Downloader``: ``start`` (again after a pause resumes), ``pause``, ``cancel``; emits
    ``progress(Progress)``, then ``finished(Path)`` or ``failed(Exception)`` — always on the GUI thread."""

    progress = Signal(object)
    finished = Signal(object)
    failed = Signal(object)

    def __init__(self, remote: RemoteFile, cache_dir: Path | None = None, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.remote = remote
        self.downloader = Downloader(remote, cache_dir, on_progress=self._report)
        self._thread: threading.Thread | None = None

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def start(self) -> None:
        if self.running:
            return
        self._thread = threading.Thread(target=self._run, name="fara-download", daemon=True)
        self._thread.start()

    def pause(self) -> None:
        self.downloader.pause()

    def cancel(self) -> None:
        if self.running:
            self.downloader.cancel()
        else:  # paused or failed: nothing runs, so remove the partial file here
            self.downloader.partial.unlink(missing_ok=True)

    def wait(self, timeout: float | None = None) -> None:
        if self._thread is not None:
            self._thread.join(timeout)

    def _report(self, progress: Progress) -> None:
        self.progress.emit(progress)

    def _run(self) -> None:
        try:
            path = self.downloader.run()
        except Exception as exc:  # typed DownloadError subclasses, or an OSError from the disk
            if not isinstance(exc, (FaraError, OSError)):  # a bug: the row says a sentence, the log where it was
                log.warning("A download failed unexpectedly", exc_info=True)
            self.failed.emit(exc)
        else:
            self.finished.emit(path)
