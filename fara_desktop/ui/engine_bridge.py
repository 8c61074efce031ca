"""Connects the inference worker to Qt: commands go in through methods, events come out as a queued signal."""

from __future__ import annotations

from collections.abc import Sequence

from PySide6.QtCore import QObject, Signal

from fara_desktop.engine.backend import Backend
from fara_desktop.engine.kv_disk import KVDiskStore
from fara_desktop.engine.types import ChatMessage, ModelSource, SamplingParams, ToolOffer
from fara_desktop.engine.worker import InferenceWorker
from fara_desktop.models.load_record import LoadRecord
from fara_desktop.planning.params import LoadParams


class EngineBridge(QObject):
    """Owns the ``InferenceWorker``; the GUI's one way to the engine. ``event`` is emitted from the worker thread
    and delivered queued on the GUI thread."""

    engine_event = Signal(object)  # not `event`: that would hide QObject.event, which Qt calls for every QEvent

    def __init__(
        self,
        backend: Backend | None = None,
        parent: QObject | None = None,
        load_record: LoadRecord | None = None,
        state_store: KVDiskStore | None = None,
    ) -> None:
        super().__init__(parent)
        # Signal.emit is thread-safe; Qt queues the call to slots of objects living on the GUI thread.
        self.worker = InferenceWorker(self.engine_event.emit, backend, load_record, state_store)
        self.worker.start()

    def load_model(self, path: ModelSource, params: LoadParams | None = None, name: str = "") -> None:
        self.worker.load_model(path, params, name)

    def generate(
        self,
        messages: Sequence[ChatMessage],
        sampling: SamplingParams,
        conversation: int | None = None,
        thinking: bool = True,
        tools: ToolOffer | None = None,
    ) -> int:
        """Queue a reply; returns its request id (events of this reply carry it)."""
        return self.worker.generate(messages, sampling, conversation, thinking, tools=tools)

    def read_ahead(
        self,
        messages: Sequence[ChatMessage],
        sampling: SamplingParams,
        conversation: int | None,
        thinking: bool,
        read: bool = True,
        tools: ToolOffer | None = None,
    ) -> int:
        """Read what would be sent into the KV cache before Enter (``read`` False: only count what is not cached)."""
        return self.worker.read_ahead(messages, sampling, conversation, thinking, read, tools)

    def cancel_read_ahead(self) -> None:
        self.worker.cancel_read_ahead()

    def cancel_load(self) -> None:
        """Stop the model being loaded."""
        self.worker.cancel_load()

    def cancel(self) -> None:
        """Stop the reply in progress within one token (sets the worker's flag directly, not through the queue)."""
        self.worker.cancel()

    def calibrate_threads(self, candidates: Sequence[int]) -> None:
        self.worker.calibrate_threads(candidates)

    def shutdown(self, timeout: float = 10.0) -> bool:
        return self.worker.shutdown(timeout)
