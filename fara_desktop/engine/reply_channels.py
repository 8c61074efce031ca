"""A reply's text on its way from a backend to the events: split into reasoning and answer by the model's markers,
its tool calls held back and read (``ToolCallSplitter``), and joined into batched ``TokenText`` events."""

from __future__ import annotations

import json
import secrets
import string
import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from fara_desktop.engine.backend import PreparedPrompt, ReplyResult
from fara_desktop.engine.reasoning import ReasoningSplitter, ReasoningSyntax
from fara_desktop.engine.tool_calls import ToolCallSplitter
from fara_desktop.engine.types import Cancelled, Event, Finished, TokenText
from fara_desktop.vocabulary.tools import ToolCall

EventSink = Callable[[Event], None]


class TokenBatcher:
    """Joins token pieces into one event per ``interval`` seconds (and one per change between reasoning and answer).

    The GUI repaints 10 times a second anyway; one queued signal per token would wake the GUI thread 50–150
    times a second, and on a 2-core machine every wake-up is taken from llama.cpp's threads.
    """

    def __init__(self, request_id: int, emit: EventSink, interval: float = 0.05) -> None:
        self._request_id = request_id
        self._emit = emit
        self._interval = interval
        self._parts: list[str] = []
        self._tokens = 0
        self._reasoning = False
        self._thinking_s: float | None = None  # sent with the next batch (the first of the answer)
        self._last = 0.0

    def add(self, text: str, reasoning: bool = False, tokens: int = 1) -> None:
        if reasoning != self._reasoning:
            self.flush()
            self._reasoning = reasoning
        self._parts.append(text)
        self._tokens += tokens
        now = time.monotonic()
        if now - self._last >= self._interval:
            self._last = now
            self.flush()

    def note_thinking(self, seconds: float) -> None:
        """The reasoning ended after ``seconds``: said with the answer's first text."""
        self.flush()
        self._thinking_s = seconds

    def flush(self) -> None:
        if self._parts:
            self._emit(
                TokenText(self._request_id, "".join(self._parts), self._tokens, self._reasoning, self._thinking_s)
            )
            self._parts, self._tokens, self._thinking_s = [], 0, None


class ReplyChannels:
    """Sends each token of a reply to the reasoning or the answer, and counts and times the reasoning. With tools
    offered, the answer goes through the family's ``ToolCallSplitter``: its calls are held back and read."""

    def __init__(self, syntax: ReasoningSyntax, batcher: TokenBatcher, tools: ToolCallSplitter | None = None) -> None:
        self._splitter = ReasoningSplitter(syntax)
        self._tools = tools
        self._apart: dict[bool, list[str]] = {True: [], False: []}  # text the backend sent already split
        self._thinking_reported = False
        self._batcher = batcher
        self._held_tokens = 0  # tokens whose text the splitter still holds back
        self.reasoning_tokens = 0
        self._thinking_from: float | None = None
        self._thinking_to: float | None = None

    @classmethod
    def for_prompt(cls, prompt: PreparedPrompt, batcher: TokenBatcher) -> ReplyChannels:
        """The channels of a reply to ``prompt``: its model's reasoning markers, and its tools' calls when offered."""
        splitter = None
        if prompt.tool_family is not None and prompt.tools is not None:
            schemas = {name: _schema(text) for name, text in prompt.tools.schemas().items()}
            splitter = ToolCallSplitter(prompt.tool_family, schemas)
        return cls(prompt.reasoning, batcher, splitter)

    def final(self, request_id: int, result: ReplyResult) -> Finished | Cancelled:
        """The reply's last event, from what these channels took apart (reasoning, answer, calls) and its result."""
        reasoning, answer = self.reasoning, self.answer  # every piece of result.text went through them
        stats = replace(result.stats, reasoning_tokens=self.reasoning_tokens, thinking_s=round(self.thinking_s, 3))
        if result.finish_reason == "cancelled":
            return Cancelled(request_id, answer, stats, reasoning.strip())
        calls = self.tool_calls() + result.tool_calls
        finish = "tool_calls" if calls else result.finish_reason
        return Finished(request_id, answer, stats, finish, reasoning.strip(), result.logprobs, calls)

    def add(self, text: str, reasoning: bool | None = None) -> None:
        """One token's text; ``reasoning`` None: split it by the model's markers, else it is already known."""
        if reasoning is None:
            was_reasoning = self._splitter.in_reasoning
            pieces = self._splitter.feed(text)
            reasoning_now = was_reasoning or self._splitter.in_reasoning
        else:
            self._apart[reasoning].append(text)
            pieces, reasoning_now = [(text, reasoning)], reasoning
        now = time.monotonic()
        if reasoning_now:
            self.reasoning_tokens += 1
            self._thinking_from = self._thinking_from or now
            self._thinking_to = now
        self._held_tokens += 1
        self._send(pieces)

    def finish(self) -> None:
        self._send(self._splitter.finish())
        if self._tools is not None:
            self._send([(self._tools.finish(), False)])
        self._batcher.flush()

    def _send(self, pieces: list[tuple[str, bool]]) -> None:
        for piece, reasoning in pieces:
            if not reasoning and self._tools is not None:
                piece = self._tools.feed(piece)
                if not piece:
                    continue
            if not reasoning and self.reasoning_tokens and not self._thinking_reported:
                self._thinking_reported = True
                self._batcher.note_thinking(self.thinking_s)
            self._batcher.add(piece, reasoning, self._held_tokens)
            self._held_tokens = 0

    @property
    def reasoning(self) -> str:
        """The reply's reasoning so far, as split while it streamed (the one split: the end does not split again)."""
        return "".join(self._apart[True]) + self._splitter.reasoning

    @property
    def answer(self) -> str:
        if self._tools is not None:
            return self._tools.content + "".join(self._apart[False])
        return self._splitter.answer + "".join(self._apart[False])

    def tool_calls(self) -> tuple[ToolCall, ...]:
        """The calls the answer made, each with a new id (nine letters and digits: what every template takes)."""
        if self._tools is None:
            return ()
        return tuple(
            ToolCall(new_call_id(), c.name, json.dumps(c.arguments, ensure_ascii=False)) for c in self._tools.calls
        )

    @property
    def thinking_s(self) -> float:
        if self._thinking_from is None or self._thinking_to is None:
            return 0.0
        return self._thinking_to - self._thinking_from


def new_call_id() -> str:
    return "".join(secrets.choice(string.ascii_letters + string.digits) for _ in range(9))


def _schema(text: str) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}
