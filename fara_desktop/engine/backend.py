"""What the inference worker needs from a model runtime: the ``Backend`` protocol and the values it passes.

``LlamaBackend`` (llama.cpp in this process) and ``RemoteBackend`` (an OpenAI-compatible server) implement it,
``RoutedBackend`` hands each request to whichever holds the chosen model; GUI tests use a fake.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from fara_desktop.engine.chat_format import PLAIN_REASONING
from fara_desktop.engine.reasoning import ReasoningSyntax
from fara_desktop.engine.tool_calls import ToolCallFamily
from fara_desktop.engine.types import ModelInfo, ModelSource, TokenLogprob
from fara_desktop.planning.params import LoadParams
from fara_desktop.vocabulary.errors import FaraError
from fara_desktop.vocabulary.messages import ChatMessage
from fara_desktop.vocabulary.sampling import SamplingParams
from fara_desktop.vocabulary.stats import GenerationStats
from fara_desktop.vocabulary.tools import ToolCall, ToolOffer


@dataclass(frozen=True)
class PreparedPrompt:
    """One turn's prompt, after old turns were trimmed to fit the context window. The worker reads the neutral
    fields; ``detail`` belongs to the backend that made it and is read only by that backend (llama.cpp: the tokens
    and the rendered text; a server applies its own template and needs nothing more than the messages)."""

    messages: tuple[ChatMessage, ...]  # the turns that are sent (the oldest may have been dropped)
    dropped_messages: int = 0
    note: str | None = None  # how the conversation had to be adapted to the template, for the user to read
    reasoning: ReasoningSyntax = PLAIN_REASONING  # how the reply marks its reasoning, when it is not sent apart
    detail: Any = None
    tool_family: ToolCallFamily | None = None  # tools were offered: how the reply writes its calls
    tools: ToolOffer | None = None

    @property
    def kept_messages(self) -> int:
        return len(self.messages)


class TextSink(Protocol):
    """Where a backend sends reply text as it arrives. ``reasoning``: None when the text may mix reasoning and
    answer (the worker splits it by the model's markers, once); True or False when the backend already knows
    (a server that sends its reasoning apart)."""

    def __call__(self, text: str, reasoning: bool | None = None) -> None: ...


def ignore_text(text: str, reasoning: bool | None = None) -> None:
    """A ``TextSink`` for callers that want only the finished reply (the benchmark)."""


@dataclass(frozen=True)
class PromptRequest:
    """A chat to make into a prompt (``Backend.prepare``): its messages, the room kept for the reply, how to stop
    a long render, the chat's Think switch and the tools offered."""

    messages: Sequence[ChatMessage]
    reply_reserve: int
    should_cancel: Callable[[], bool] | None = None
    thinking: bool = True
    tools: ToolOffer | None = None


@dataclass(frozen=True)
class ReplyRequest:
    """How a prepared prompt is replied to (``Backend.reply``): the sampling, the cancel asked between tokens,
    where the text goes, the conversation whose reading is kept, where the prompt's reading is reported, and what
    runs between its chunks."""

    sampling: SamplingParams
    should_cancel: Callable[[], bool]
    on_text: TextSink
    conversation: Hashable | None = None
    on_prompt_progress: Callable[[int, int], None] | None = None
    # called between the chunks of a prompt longer than one batch, which is then read chunk by chunk: the local
    # API's replies decoding together go on there (a long prompt holds their tokens one chunk at most)
    between_chunks: Callable[[], None] | None = None


@dataclass(frozen=True)
class ReplyResult:
    """A finished reply: its text, its figures, and why it ended."""

    text: str
    stats: GenerationStats
    finish_reason: Literal["stop", "length", "context", "cancelled", "repetition"]
    logprobs: tuple[TokenLogprob, ...] = ()
    tool_calls: tuple[ToolCall, ...] = ()  # calls a server read out of the reply itself (sent apart from the text)


class RepliesTogether(Protocol):
    """Replies that decode together (``ParallelReplies``): the worker hands it the local API's requests it
    ``takes`` and steps it between commands; each reply's ``done`` is called on the worker's thread."""

    @property
    def idle(self) -> bool: ...
    def takes(self, prompt: PreparedPrompt, sampling: SamplingParams) -> bool: ...
    def submit(
        self, prompt: PreparedPrompt, request: ReplyRequest, done: Callable[[ReplyResult | FaraError], None]
    ) -> None: ...
    def step(self) -> None: ...
    def fail_all(self, error: FaraError) -> None: ...


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
    def close(self) -> None:
        """The engine's thread is ending: the model is freed and every thread of the backend's ends (the saved
        readings' writer finishes what waits first)."""
        ...

    def calibrate_threads(
        self, candidates: Sequence[int], tokens: int = 48, should_yield: Callable[[], bool] | None = None
    ) -> tuple[dict[int, float], bool]:
        """Generation tok/s per thread count, and whether other programs used the processor meanwhile; raises
        ``CalibrationYieldedError`` (the model as it was) as soon as ``should_yield()`` says a reply is waiting."""
        ...

    def prepare(self, request: PromptRequest) -> PreparedPrompt:
        """Raises ``ToolsUnsupportedError`` when ``tools`` are offered to a model that cannot call any."""
        ...

    def prepare_raw(self, text: str, reply_reserve: int) -> PreparedPrompt:
        """``text`` as the prompt itself, without a chat template (control-token text stays text)."""
        ...

    def reply(self, prompt: PreparedPrompt, request: ReplyRequest) -> ReplyResult: ...

    @property
    def parallel(self) -> RepliesTogether | None:
        """Where the API's replies decode together (None: one at a time, through ``reply``)."""
        ...

    def read_ahead(
        self,
        prompt: PreparedPrompt,
        conversation: Hashable | None,
        should_stop: Callable[[], bool],
        on_progress: Callable[[int, int], None],
        abort: Callable[[], bool] | None = None,
    ) -> int:
        """Read ``prompt`` into the KV cache before it is sent, reporting ``(tokens, cached)`` as it goes, until
        ``should_stop()`` (between batches) or ``abort()`` (within one); returns the tokens cached. A backend with
        nothing to read ahead (a server) returns 0 and reports nothing."""
        ...

    def save_to_disk(self, wait: bool = False) -> None:
        """A reply ended and nothing waits: keep the chat's KV state where it survives a restart (``wait``: until
        it is kept). A backend without such state does nothing."""
        ...

    def forget_conversation(self, conversation: Hashable | None) -> None:
        """The chat was deleted: drop every copy of its reading (in the context, in memory, waiting to be written,
        on disk); None: every chat's saved reading (what the context holds now stays). A backend without such state
        does nothing."""
        ...
