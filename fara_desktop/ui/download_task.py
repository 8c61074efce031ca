"""A download running on its own thread, reporting to the GUI through Qt signals."""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from pathlib import Path

from PySide6.QtCore import QObject, Signal

from fara_desktop.models.hub import RemoteFile
from fara_desktop.models.transfer import DownloadCancelled, Downloader, Progress
from fara_desktop.vocabulary.errors import FaraError

log = logging.getLogger(__name__)


class DownloadTask(QObject):
    """Wraps the ``Downloader``s of one model: its file, and for a model that sees, its vision projector after it
    (one click, one row; each file resumable and checked against its sha256). ``start`` (again after a pause
    resumes), ``pause``, ``cancel``; emits ``progress(Progress)`` over all the files, then ``finished(Path)`` with
    the model's (the first file's) path or ``failed(Exception)`` — always on the GUI thread. ``publish_as``: where
    the one file is to appear — a projector fetched for a model already installed, beside it; ``finished`` then
    hands over that model."""

    progress = Signal(object)
    finished = Signal(object)
    failed = Signal(object)

    def __init__(
        self,
        remotes: RemoteFile | Sequence[RemoteFile],
        cache_dir: Path | None = None,
        parent: QObject | None = None,
        publish_as: Path | None = None,
    ) -> None:
        super().__init__(parent)
        self.remotes = (remotes,) if isinstance(remotes, RemoteFile) else tuple(remotes)
        self.remote = self.remotes[0]
        if publish_as is not None and len(self.remotes) != 1:
            raise ValueError("only one file can be published beside a model")
        self.downloaders = [Downloader(r, cache_dir, self._report, publish_as=publish_as) for r in self.remotes]
        self.downloader = self.downloaders[0]  # the one transferring now
        self.total = sum(r.size for r in self.remotes)
        self.publish_as = publish_as
        self._thread: threading.Thread | None = None
        self._halt = threading.Event()  # paused or cancelled: no further file starts
        self._turn = threading.Lock()  # a pause and the next file's start, one after the other

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def partial_bytes(self) -> int:
        return sum(d.partial_bytes() for d in self.downloaders)

    def start(self) -> None:
        if self.running:
            return
        self._halt.clear()
        for downloader in self.downloaders:
            downloader.resume()
        self._thread = threading.Thread(target=self._run, name="fara-download", daemon=True)
        self._thread.start()

    def pause(self) -> None:
        with self._turn:
            self._halt.set()
            self.downloader.pause()

    def cancel(self) -> None:
        self._halt.set()
        if self.running:
            self.downloader.cancel()
        for downloader in self.downloaders:  # paused or failed, or the files not begun: their partial files go
            if downloader is not self.downloader or not self.running:
                downloader.partial.unlink(missing_ok=True)

    def wait(self, timeout: float | None = None) -> None:
        if self._thread is not None:
            self._thread.join(timeout)

    @staticmethod
    def model_beside(projector: Path) -> Path:
        """The model a projector named ``mmproj-<model>.gguf`` was fetched for."""
        return projector.with_name(projector.name.removeprefix("mmproj-"))

    def _report(self, progress: Progress) -> None:
        before = sum(d.remote.size for d in self.downloaders[: self.downloaders.index(self.downloader)])
        done = before + progress.done
        eta = (self.total - done) / progress.bytes_per_s if progress.bytes_per_s > 0 else None
        self.progress.emit(Progress(done, self.total, progress.bytes_per_s, eta))

    def _run(self) -> None:
        try:
            paths = []
            for downloader in self.downloaders:
                with self._turn:
                    if self._halt.is_set():
                        raise DownloadCancelled("stopped between files", kept_partial=True)
                    self.downloader = downloader
                paths.append(downloader.run())
        except Exception as exc:  # typed DownloadError subclasses, or an OSError from the disk
            if not isinstance(exc, (FaraError, OSError)):  # a bug: the row says a sentence, the log where it was
                log.warning("A download failed unexpectedly", exc_info=True)
            self.failed.emit(exc)
        else:
            self.finished.emit(paths[0] if self.publish_as is None else self.model_beside(self.publish_as))
