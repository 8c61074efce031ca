"""One ``Backend`` for the worker that is llama.cpp in this process or a server's model, whichever was loaded
last: the worker, its queue and its events stay the same for both, and the GUI does not learn a second path."""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence

from fara_desktop.engine.backend import (
    Backend,
    PreparedPrompt,
    PromptRequest,
    RepliesTogether,
    ReplyRequest,
    ReplyResult,
)
from fara_desktop.engine.types import ModelInfo, ModelSource, RemoteModel
from fara_desktop.planning.params import LoadParams


class RoutedBackend:
    """Delegates to ``local`` for GGUF files and to ``remote`` for ``RemoteModel``; loading one unloads the other."""

    def __init__(self, local: Backend, remote: Backend) -> None:
        self.local = local
        self.remote = remote
        self._active: Backend = local

    @property
    def active(self) -> Backend:
        return self._active

    @property
    def info(self) -> ModelInfo | None:
        return self._active.info

    def load(
        self, path: ModelSource, params: LoadParams, on_progress: Callable[[float], bool] | None = None
    ) -> ModelInfo:
        chosen = self.remote if isinstance(path, RemoteModel) else self.local
        info = chosen.load(path, params, on_progress)  # the model in use stays usable when this one fails to load
        other = self.local if chosen is self.remote else self.remote
        if other.info is not None:
            other.unload()
        self._active = chosen
        return info

    def unload(self) -> ModelSource | None:
        return self._active.unload()

    def close(self) -> None:
        self.local.close()
        self.remote.close()

    def calibrate_threads(
        self, candidates: Sequence[int], tokens: int = 48, should_yield: Callable[[], bool] | None = None
    ) -> tuple[dict[int, float], bool]:
        return self._active.calibrate_threads(candidates, tokens, should_yield)

    def prepare(self, request: PromptRequest) -> PreparedPrompt:
        return self._active.prepare(request)

    def prepare_raw(self, text: str, reply_reserve: int) -> PreparedPrompt:
        return self._active.prepare_raw(text, reply_reserve)

    def reply(self, prompt: PreparedPrompt, request: ReplyRequest) -> ReplyResult:
        return self._active.reply(prompt, request)

    @property
    def parallel(self) -> RepliesTogether | None:
        return self._active.parallel

    def read_ahead(
        self,
        prompt: PreparedPrompt,
        conversation: Hashable | None,
        should_stop: Callable[[], bool],
        on_progress: Callable[[int, int], None],
        abort: Callable[[], bool] | None = None,
    ) -> int:
        return self._active.read_ahead(prompt, conversation, should_stop, on_progress, abort)

    def save_to_disk(self, wait: bool = False) -> None:
        self._active.save_to_disk(wait)

    def forget_conversation(self, conversation: Hashable | None) -> None:
        self.local.forget_conversation(conversation)  # its states are the local model's, whichever is in use
        self.remote.forget_conversation(conversation)
