"""Connects the inference worker to Qt: worker events arrive as a queued signal on the GUI thread."""

from __future__ import annotations

from PySide6.QtCore import QObject, Signal

from fara_desktop.engine.worker import Backend, InferenceWorker


class EngineBridge(QObject):
    """Owns the ``InferenceWorker``; ``event`` is emitted from the worker thread and delivered queued."""

    event = Signal(object)

    def __init__(self, backend: Backend | None = None, parent: QObject | None = None) -> None:
        super().__init__(parent)
        # Signal.emit is thread-safe; Qt queues the call to slots of objects living on the GUI thread.
        self.worker = InferenceWorker(self.event.emit, backend)
        self.worker.start()

    def shutdown(self, timeout: float = 10.0) -> bool:
        return self.worker.shutdown(timeout)
