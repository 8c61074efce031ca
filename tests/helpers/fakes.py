"""A scripted backend for fast GUI tests (the real engine is covered by the real-model tests)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from pathlib import Path

from fara_desktop.engine.backend import PreparedPrompt, PromptRequest, ReplyRequest, ReplyResult
from fara_desktop.engine.errors import LoadCancelledError, ModelLoadError, NoModelLoadedError, tools_unsupported
from fara_desktop.engine.tool_calls import FAMILIES, ToolCallFamily
from fara_desktop.engine.types import ModelInfo
from fara_desktop.planning.params import LoadParams
from fara_desktop.vocabulary.messages import ChatMessage
from fara_desktop.vocabulary.sampling import SamplingParams
from fara_desktop.vocabulary.stats import GenerationStats
from fara_desktop.vocabulary.tools import ToolOffer

HERMES = next(f for f in FAMILIES if f.name == "hermes / qwen")


class FakeBackend:
    """Replies with ``words`` one per token; ``gate`` (when set) holds each token until released. Words such as
    ``["<think>", "Hmm", "</think>", "Answer"]`` script a reasoning model."""

    def __init__(self, words: Sequence[str] = ("Hello", " there", "!"), gate: threading.Semaphore | None = None):
        self.words = list(words)
        self.gate = gate
        self._info: ModelInfo | None = None
        self.prompts: list[list[ChatMessage]] = []
        self.thinking: list[bool] = []  # the chat's thinking switch, per request
        self.samplings: list[SamplingParams] = []  # the sampling of each request
        self.thinking_switch = False  # what the fake model's template supports
        self.thinking_default = True  # where that template starts thinking when nobody says
        self.prompt_batches = 0  # report reading a long prompt in this many batches of 512 tokens
        self.finish = "stop"  # how a reply that is not stopped ends ("repetition": the loop detector ended it)
        self.load_steps = 0  # report loading in this many steps, each waiting for ``load_gate`` when set
        self.load_gate: threading.Semaphore | None = None
        self.read_ahead_prompts: list[list[ChatMessage]] = []  # what was read ahead, in order
        self.read_ahead_gate: threading.Semaphore | None = None  # holds each of 4 read-ahead batches
        self.read_ahead_stopped = 0  # read-aheads that stopped before their end
        self.read_ahead_batches_read = 0  # batches read to their end
        self.kept_states = 0
        self.forgotten: list[object] = []  # conversations forgotten through the worker (deleted chats)
        self.kept_before_reply: list[int] = []  # states kept before each reply began
        self.prompt_speed = 100.0  # tok/s the fake model is said to read prompts at
        self.read_ahead_speed = 100.0  # tok/s it reads ahead at, by its own clock (the worker's, in a window test)
        self.clock_s = 0.0
        self._thinking = True
        self.tool_family: ToolCallFamily | None = HERMES  # None: the fake model's template declares no tools
        self.replies: list[list[str]] = []  # scripted replies, one per request, before ``words`` takes over
        self.offered: list[ToolOffer | None] = []  # the tools each reply was offered
        self._tools: ToolOffer | None = None

    @property
    def info(self) -> ModelInfo | None:
        return self._info

    def load(self, path: Path, params: LoadParams, on_progress: Callable[[float], bool] | None = None) -> ModelInfo:
        for step in range(1, self.load_steps + 1):  # a scripted load that reports progress and can be stopped
            if self.load_gate is not None:
                self.load_gate.acquire()
            if on_progress is not None and not on_progress(step / self.load_steps):
                raise LoadCancelledError("Loading was stopped.")
        if Path(path).name.startswith("broken"):  # refused, as llama.cpp refuses a damaged file: the model stays
            raise ModelLoadError(f"llama.cpp could not load {Path(path).name}: the file is damaged.")
        self._info = ModelInfo(
            path,
            "Fake model",
            "llama",
            params.n_ctx or 2048,
            8192,
            2,
            2,
            "f16",
            False,
            "gguf template",
            0.01,
            1,
            thinking_switch=self.thinking_switch,
            thinking_default=self.thinking_default,
            expected_prompt_tok_per_s=self.prompt_speed,
            tool_calls=self.tool_family.name if self.tool_family else "",
            vision="mmproj-fake.gguf" if Path(path).name.startswith("seeing") else "",  # a model that sees
            picture_tokens=256 if Path(path).name.startswith("seeing") else 0,
            picture_seconds=0.8 if Path(path).name.startswith("seeing") else 0.0,
            parallel=params.parallel,
        )
        return self._info

    def unload(self) -> Path | None:
        path = self._info.path if self._info else None
        self._info = None
        return path

    def close(self) -> None:
        self.unload()

    def calibrate_threads(self, candidates, tokens: int = 48, should_yield=None) -> tuple[dict[int, float], bool]:
        return {t: 10.0 * t for t in candidates}, False

    def prepare(self, request: PromptRequest) -> PreparedPrompt:
        messages, thinking, tools = request.messages, request.thinking, request.tools
        if self._info is None:
            raise NoModelLoadedError("No model is loaded yet.")
        self._thinking = thinking  # recorded with the prompt when it is replied to (not when it is read ahead)
        self._tools = tools
        if tools is not None and tools.declared():
            if self.tool_family is None:
                raise tools_unsupported(self._info.name)
            # Scripted replies write calls the way Qwen and Hermes do; the worker's real splitter reads them.
            return PreparedPrompt(tuple(messages), tool_family=self.tool_family, tools=tools)
        return PreparedPrompt(tuple(messages))

    @property
    def parallel(self) -> None:
        """None: this fake replies one at a time."""
        return None

    def reply(self, prompt: PreparedPrompt, request: ReplyRequest) -> ReplyResult:
        sampling, should_cancel, on_text = request.sampling, request.should_cancel, request.on_text
        on_prompt_progress = request.on_prompt_progress
        self.prompts.append(list(prompt.messages))
        self.samplings.append(sampling)
        self.offered.append(self._tools)
        self.thinking.append(self._thinking)
        self.kept_before_reply.append(self.kept_states)
        if on_prompt_progress is not None and self.prompt_batches:
            for batch in range(1, self.prompt_batches + 1):
                if self.gate is not None:
                    self.gate.acquire()
                on_prompt_progress(batch * 512, self.prompt_batches * 512)
        sent: list[str] = []
        reason = self.finish
        for word in self.replies.pop(0) if self.replies else self.words:
            if self.gate is not None:
                self.gate.acquire()
            if should_cancel():
                reason = "cancelled"
                break
            sent.append(word)
            on_text(word)
        stats = GenerationStats(3, 3, len(sent), 0.01, 300.0, 100.0, 3 + len(sent), 2048, 0.05)
        return ReplyResult("".join(sent), stats, reason)  # type: ignore[arg-type]

    def read_ahead(
        self,
        prompt: PreparedPrompt,
        conversation: object,
        should_stop: Callable[[], bool],
        on_progress: Callable[[int, int], None],
        abort: Callable[[], bool] | None = None,
    ) -> int:
        self.read_ahead_prompts.append(list(prompt.messages))
        total = 400 * len(prompt.messages)
        on_progress(total, 0)
        for batch in range(1, 5):
            if self.read_ahead_gate is not None:
                self.read_ahead_gate.acquire()  # the batch is read (an abort meanwhile throws it away)
            if abort is not None and abort():
                self.read_ahead_stopped += 1
                return (batch - 1) * total // 4
            self.clock_s += total / 4 / self.read_ahead_speed
            self.read_ahead_batches_read += 1
            on_progress(total, batch * total // 4)
            if batch < 4 and should_stop():  # checked between batches
                self.read_ahead_stopped += 1
                return batch * total // 4
        return total

    def clock(self) -> float:
        """The fake model's time: a read-ahead's batches take their tokens' reading at ``read_ahead_speed``."""
        return self.clock_s

    def save_to_disk(self, wait: bool = False) -> None:
        self.kept_states += 1

    def forget_conversation(self, conversation: object) -> None:
        self.forgotten.append(conversation)
