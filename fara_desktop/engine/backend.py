"""What the inference worker needs from a model runtime: the ``Backend`` protocol and the values it passes.

``LlamaBackend`` (llama.cpp in this process) and ``RemoteBackend`` (an OpenAI-compatible server) implement it,
``RoutedBackend`` hands each request to whichever holds the chosen model; GUI tests use a fake.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from typing import Literal, Protocol

from fara_desktop.engine.chat_format import RenderedPrompt
from fara_desktop.engine.types import ChatMessage, GenerationStats, ModelInfo, ModelSource, SamplingParams, TokenLogprob
from fara_desktop.planning.params import LoadParams


@dataclass(frozen=True)
class PreparedPrompt:
    """The prompt tokens of one turn, after old turns were trimmed to fit the context window."""

    tokens: list[int]
    rendered: RenderedPrompt
    dropped_messages: int
    kept_messages: int
    messages: tuple[ChatMessage, ...] = ()  # the turns themselves, for a backend that sends them as they are


@dataclass(frozen=True)
class ReplyResult:
    """A finished reply: its text, its figures, and why it ended."""

    text: str
    stats: GenerationStats
    finish_reason: Literal["stop", "length", "context", "cancelled"]
    logprobs: tuple[TokenLogprob, ...] = ()


class Backend(Protocol):
    """What the worker needs from a model runtime (``LlamaBackend``, or a fake in GUI tests)."""

    @property
    def info(self) -> ModelInfo | None: ...
    def load(
        self, path: ModelSource, params: LoadParams, on_progress: Callable[[float], bool] | None = None
    ) -> ModelInfo:
        """``on_progress(fraction)`` is called as the weights load; returning False stops the load
        (``LoadCancelledError``)."""
        ...

    def unload(self) -> ModelSource | None: ...
    def calibrate_threads(
        self, candidates: Sequence[int], tokens: int = 48, should_yield: Callable[[], bool] | None = None
    ) -> dict[int, float]:
        """Generation tok/s per thread count; raises ``CalibrationYieldedError`` (the model as it was) as soon as
        ``should_yield()`` says a reply is waiting."""
        ...

    def prepare(
        self,
        messages: Sequence[ChatMessage],
        reply_reserve: int,
        should_cancel: Callable[[], bool] | None = None,
        thinking: bool = True,
    ) -> PreparedPrompt: ...
    def prepare_raw(self, text: str, reply_reserve: int) -> PreparedPrompt:
        """``text`` as the prompt itself, without a chat template (control-token text stays text)."""
        ...

    def reply(
        self,
        prompt: PreparedPrompt,
        sampling: SamplingParams,
        should_cancel: Callable[[], bool],
        on_text: Callable[[str], None],
        conversation: Hashable | None = None,
        on_prompt_progress: Callable[[int, int], None] | None = None,
    ) -> ReplyResult: ...
