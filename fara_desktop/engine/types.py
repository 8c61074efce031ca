"""Plain data exchanged with the inference worker: its commands and events (the words they carry — messages,
sampling, tools, a reply's figures — are the vocabulary's, shared with every layer).

Everything here is immutable and free of Qt and llama_cpp, so the GUI, the CLI and the tests share it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from fara_desktop.models.naming import server_model_name
from fara_desktop.planning.params import LoadParams
from fara_desktop.vocabulary.messages import ChatMessage
from fara_desktop.vocabulary.sampling import SamplingParams
from fara_desktop.vocabulary.stats import GenerationStats
from fara_desktop.vocabulary.tools import ToolCall, ToolOffer


@dataclass(frozen=True)
class RemoteModel:
    """A model served by an OpenAI-compatible server the user added (llama.cpp's server, vLLM, Ollama, LM Studio,
    a hosted service). ``api_key`` is never shown in a repr, a log line or an export."""

    server: str  # the name the user gave the server
    base_url: str  # ending in /v1, e.g. http://gpu-box:8000/v1
    model: str  # the server's model id
    api_key: str | None = field(default=None, repr=False, compare=False)

    @property
    def name(self) -> str:
        """What the user sees: the id, or the file's name when the id is a path."""
        return server_model_name(self.model)

    def __str__(self) -> str:
        return f"{self.model} on {self.server}"


ModelSource = Path | RemoteModel  # what LoadModel loads: a GGUF file here, or a server's model


WINDOW = "window"  # the principal of the window's chats (and of one-off requests made for the user)


@dataclass(frozen=True)
class ApiClient:
    """The conversation of a local API request: its principal (an API key's fingerprint, or the local clients
    together when no key is set) and nothing else — the engine finds which of the principal's kept conversations the
    request continues. A principal never reuses another's prefix, state, checkpoint or picture embeddings: its time
    to the first token would otherwise tell it what another client or the user's chats had sent."""

    principal: str


@dataclass(frozen=True)
class ApiSlot:
    """One conversation kept for an API principal (in the context, or as a RAM snapshot under this key)."""

    principal: str
    number: int


@dataclass(frozen=True)
class SequenceSlot(ApiSlot):
    """The same slot's state kept by a sequence of the replies decoded together (``ParallelReplies``): llama.cpp
    restores a state only into a context of the layout that wrote it (a stream per sequence there, one here), so
    each context finds only its own."""


Conversation = int | ApiClient | None  # None: a one-off request that may reuse whatever prefix it shares


def principal_of(owner: object) -> str:
    """Whose prefixes a conversation (or a slot) may reuse: an API principal's own, or the window's."""
    return owner.principal if isinstance(owner, (ApiClient, ApiSlot)) else WINDOW


# ---------------------------------------------------------------- commands (GUI → worker)


@dataclass(frozen=True)
class LoadModel:
    path: ModelSource
    params: LoadParams = field(default_factory=LoadParams)
    load_id: int = 0
    name: str = ""  # the name the caller knows it by (an Ollama tag); "" → from the file (models.naming)


@dataclass(frozen=True)
class Generate:
    request_id: int
    messages: tuple[ChatMessage, ...]
    sampling: SamplingParams = field(default_factory=SamplingParams)
    conversation: Conversation = None  # lets the engine keep and restore this conversation's KV state
    thinking: bool = True  # the chat's switch, for templates that can turn reasoning off
    raw: bool = False  # the one message's text is the prompt itself, no chat template (the API's /v1/completions)
    tools: ToolOffer | None = None  # the tools the model may call, declared through its template


@dataclass(frozen=True)
class ReadAhead:
    """Read what would be sent (the chat and the text being typed) into the KV cache before Enter; any other
    command, a newer read-ahead or ``cancel_read_ahead`` stops it at once. ``read`` False: only count the tokens
    not cached yet (for the wait forecast, where reading ahead is off)."""

    ahead_id: int
    messages: tuple[ChatMessage, ...]
    sampling: SamplingParams = field(default_factory=SamplingParams)
    conversation: Conversation = None
    thinking: bool = True
    read: bool = True
    tools: ToolOffer | None = None  # what the reply would be offered: its schemas are prompt tokens too


@dataclass(frozen=True)
class CalibrateThreads:
    """Measure generation speed at each thread count on the loaded model and keep the fastest."""

    candidates: tuple[int, ...]
    tokens: int = 48


@dataclass(frozen=True)
class Unload:
    pass


@dataclass(frozen=True)
class Shutdown:
    pass


@dataclass(frozen=True)
class ForgetConversation:
    """A chat was deleted: nothing of its reading stays (the context, the RAM snapshot, a write waiting, its files).
    ``conversation`` None: every chat's saved reading goes (Settings ▸ Prompts ▸ *Delete saved reading*)."""

    conversation: int | None


Command = LoadModel | Generate | ReadAhead | CalibrateThreads | Unload | Shutdown | ForgetConversation


# ---------------------------------------------------------------- events (worker → GUI)


@dataclass(frozen=True)
class ModelInfo:
    """What the GUI shows about a loaded model."""

    path: ModelSource
    name: str
    architecture: str
    n_ctx: int
    n_ctx_train: int
    n_threads: int
    n_threads_batch: int
    kv_type: str
    flash_attn: bool
    chat_format: str  # "gguf template" or the name of the fallback used
    load_seconds: float
    file_bytes: int
    thinking_switch: bool = False  # the template honours ``enable_thinking`` (Qwen3 and others)
    thinking_default: bool = True  # where the template starts when nobody sets it (Qwen3.5 0.8B/2B: off)
    tool_calls: str = ""  # how its template has it write tool calls (the family's name); "": it cannot call tools
    expected_prompt_tok_per_s: float = 0.0  # predicted from its size and the threads, until a reply measures it
    prompt_span_tokens: float = 0.0  # where a prompt token costs twice one at the start (0: unknown; ``tuning``)
    rewindable: bool = True  # its context can be cut back to a prefix (False: a recurrent or hybrid model)
    server: str | None = None  # the server that runs it; None: this computer
    vision: str = ""  # the vision projector loaded beside it (its file name); "": it cannot see pictures
    vision_problem: str = ""  # why the projector paired with it was not loaded ("" when none was, or it was)
    picture_tokens: int = 0  # the tokens a picture of the preferred size takes in its context
    picture_seconds: float = 0.0  # the seconds to encode one picture here (forecast; 0: unknown)
    kernel_path: str = ""  # the kernel path it was loaded on (``machine/kernel_paths``); "": not this computer's
    kernel_reason: str = ""  # why that path, in words
    kernel_summary: str = ""  # the path and why in a few words (the hardware panel's line)
    size_class: str = ""  # the model-size class its kernel and thread speeds are kept for ("": unknown)
    parallel: int = 1  # the local API's replies it decodes together (``LoadParams.parallel``)
    draft: str = ""  # the draft model proposing the window's next tokens (its file name); "": none
    speculates: bool = False  # the window's replies check proposals (from their text, the draft's or MTP's)
    mtp: bool = False  # loaded with its multi-token-prediction head, which proposes the window's next tokens

    @property
    def remote(self) -> bool:
        return self.server is not None


@dataclass(frozen=True)
class TokenLogprob:
    """One generated token's text (bytes: a token may hold part of a character), its log probability under the
    model, and the likeliest alternatives at that step."""

    token: bytes
    logprob: float
    top: tuple[tuple[bytes, float], ...] = ()


@dataclass(frozen=True)
class ModelLoading:
    path: ModelSource
    name: str = ""  # the display name ModelInfo.name will have


@dataclass(frozen=True)
class LoadProgress:
    """How far llama.cpp has read (and repacked) the weights, 0.0–1.0."""

    path: ModelSource
    fraction: float


@dataclass(frozen=True)
class ModelLoaded:
    info: ModelInfo


@dataclass(frozen=True)
class ModelLoadFailed:
    path: ModelSource
    message: str
    error_type: str
    still_loaded: ModelInfo | None = None  # the model in use before, kept (or loaded again) after this failure


@dataclass(frozen=True)
class ModelUnloaded:
    path: ModelSource | None


@dataclass(frozen=True)
class ConversationForgotten:
    """Every copy of a deleted chat's reading is gone (``ForgetConversation`` ended); ``failed``: some file could
    not be deleted (the log says which and why)."""

    conversation: int | None
    failed: bool = False


@dataclass(frozen=True)
class CalibrationPostponed:
    """The thread calibration gave way to a reply that was waiting; it runs again once the replies are done."""


@dataclass(frozen=True)
class CalibrationFailed:
    """The thread calibration could not measure (``reason``); the thread count in use stays."""

    reason: str


@dataclass(frozen=True)
class ThreadsCalibrated:
    """Tokens/s per thread count on the loaded model; ``best`` is now in use."""

    path: ModelSource
    tok_per_s: dict[int, float]
    best: int
    busy: bool = False  # other programs used the processor meanwhile: used now, measured again at the next start


@dataclass(frozen=True)
class GenerationStarted:
    request_id: int


@dataclass(frozen=True)
class HistoryTrimmed:
    """Oldest turns were left out of the prompt so the new turn fits the context window."""

    request_id: int
    dropped_messages: int
    kept_messages: int


@dataclass(frozen=True)
class PromptAdjusted:
    """The conversation had to be adapted to the model's chat template (e.g. a template without a system role)."""

    request_id: int
    note: str


@dataclass(frozen=True)
class PromptProgress:
    """How much of a long prompt llama.cpp has read (batch by batch), so a long paste shows progress."""

    request_id: int
    done: int
    total: int


@dataclass(frozen=True)
class ReadAheadProgress:
    """How much of what would be sent is in the KV cache: ``cached`` of ``tokens`` (the rest is what Enter would
    wait for). Sent once the prompt is tokenized and after each batch read ahead; ``finished`` on the last."""

    ahead_id: int
    tokens: int
    cached: int
    finished: bool = False
    # the read-ahead's own reading speed so far (0 until it has read enough to say): the speed now, on a machine
    # that may be busier than when the last reply was read
    tok_per_s: float = 0.0


@dataclass(frozen=True)
class TokenText:
    """New reply text; ``tokens`` is how many tokens it covers (pieces are batched, see ``TokenBatcher``)."""

    request_id: int
    text: str
    tokens: int = 1
    reasoning: bool = False  # part of the reasoning before the answer, not of the answer
    thinking_s: float | None = None  # on the first answer text after reasoning: how long the model reasoned


@dataclass(frozen=True)
class Finished:
    request_id: int
    text: str  # the answer
    stats: GenerationStats
    finish_reason: Literal["stop", "length", "context", "tool_calls", "repetition"]
    reasoning: str = ""
    logprobs: tuple[TokenLogprob, ...] = ()  # when the request asked for them (the local API)
    tool_calls: tuple[ToolCall, ...] = ()  # the calls the reply made (finish_reason "tool_calls")


@dataclass(frozen=True)
class Cancelled:
    request_id: int
    text: str
    stats: GenerationStats | None
    reasoning: str = ""


@dataclass(frozen=True)
class Failed:
    request_id: int
    message: str
    error_type: str


Event = (
    ReadAheadProgress
    | ModelLoading
    | LoadProgress
    | ModelLoaded
    | ModelLoadFailed
    | ModelUnloaded
    | ConversationForgotten
    | ThreadsCalibrated
    | CalibrationPostponed
    | CalibrationFailed
    | GenerationStarted
    | HistoryTrimmed
    | PromptAdjusted
    | PromptProgress
    | TokenText
    | Finished
    | Cancelled
    | Failed
)
