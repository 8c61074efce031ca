"""Connects the inference worker to Qt: commands go in through methods, events come out as a queued signal."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from PySide6.QtCore import QObject, Signal

from fara_desktop.engine.types import ModelSource
from fara_desktop.engine.worker import EventSink, InferenceWorker
from fara_desktop.planning.params import LoadParams
from fara_desktop.vocabulary.messages import ChatMessage
from fara_desktop.vocabulary.sampling import SamplingParams
from fara_desktop.vocabulary.tools import ToolOffer


class EngineBridge(QObject):
    """The GUI's one way to the engine (the core's ``InferenceWorker``). ``event`` is emitted from the worker thread
    and delivered queued on the GUI thread."""

    engine_event = Signal(object)  # not `event`: that would hide QObject.event, which Qt calls for every QEvent

    def __init__(self, start_engine: Callable[[EventSink], InferenceWorker], parent: QObject | None = None) -> None:
        """``start_engine``: the core's, which owns the worker; the bridge gives it the signal as the events' sink."""
        super().__init__(parent)
        # Signal.emit is thread-safe; Qt queues the call to slots of objects living on the GUI thread.
        self.worker = start_engine(self.engine_event.emit)

    def load_model(self, path: ModelSource, params: LoadParams | None = None, name: str = "") -> None:
        self.worker.load_model(path, params, name)

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

    def calibrate_threads(self, candidates: Sequence[int]) -> None:
        self.worker.calibrate_threads(candidates)
