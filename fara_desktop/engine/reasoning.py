"""Reasoning models: tell the reasoning a model writes before its answer from the answer itself.

DeepSeek-R1 distills, Qwen3, QwQ, Phi-4-reasoning, gpt-oss and others open their reply with a reasoning block
(``<think>…</think>`` and the variants below, as the templates in llama.cpp's collection declare them). Some
templates open the block themselves at the end of the prompt (R1's ``<｜Assistant｜><think>\\n``): the reply then
starts inside it. An opening marker counts only at the very start of a reply, so an answer that talks about
``<think>`` tags stays an answer.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ReasoningMarkers:
    """How one family marks its reasoning; ``answer_prefixes`` are markers left between the block and the answer."""

    open: str
    close: str
    answer_prefixes: tuple[str, ...] = ()


THINK = ReasoningMarkers("<think>", "</think>")
KNOWN_MARKERS: tuple[ReasoningMarkers, ...] = (
    THINK,
    ReasoningMarkers("<seed:think>", "</seed:think>"),  # ByteDance Seed-OSS
    ReasoningMarkers("<mm:think>", "</mm:think>"),  # MiniMax M3
    ReasoningMarkers("<thinking>", "</thinking>"),  # Apriel, Solar Open
    ReasoningMarkers("<|START_THINKING|>", "<|END_THINKING|>"),  # Cohere Command R7B / A
    ReasoningMarkers("[THINK]", "[/THINK]"),  # Mistral Magistral
    ReasoningMarkers("<|channel>thought", "<channel|>"),  # Gemma 4
    ReasoningMarkers(  # gpt-oss (harmony): the analysis channel, then the final one
        "<|channel|>analysis<|message|>", "<|end|>", ("<|start|>assistant", "<|channel|>final<|message|>")
    ),
)


@dataclass(frozen=True)
class ReasoningSyntax:
    """The markers a model may use, and whether its prompt already opened a reasoning block."""

    markers: tuple[ReasoningMarkers, ...]
    opened: ReasoningMarkers | None = None  # the block the prompt left open, if any


def markers_for_template(template: str | None) -> tuple[ReasoningMarkers, ...]:
    """The markers a chat template declares (its closing marker appears in it); ``<think>`` when it declares none,
    the most common convention, so a model without a template that reasons is still understood."""
    declared = tuple(m for m in KNOWN_MARKERS if template and m.close in template)
    return declared or (THINK,)


def syntax_for_prompt(markers: tuple[ReasoningMarkers, ...], prompt: str) -> ReasoningSyntax:
    """The prompt ends inside a reasoning block when its last non-blank text is an opening marker."""
    tail = prompt.rstrip()
    opened = next((m for m in markers if tail.endswith(m.open)), None)
    return ReasoningSyntax(markers, opened)


class ReasoningSplitter:
    """Splits streamed reply text into reasoning and answer as it arrives.

    Text that could still be the start of a marker is held back until the next piece decides it; ``finish``
    releases it. ``feed`` returns the pieces to show, each tagged ``True`` for reasoning.
    """

    def __init__(self, syntax: ReasoningSyntax) -> None:
        self._markers = syntax.markers
        self._block = syntax.opened
        self._state = "reasoning" if syntax.opened else "start"
        self._pending = ""
        self.reasoning = ""
        self.answer = ""

    @property
    def in_reasoning(self) -> bool:
        return self._state == "reasoning"

    def feed(self, text: str) -> list[tuple[str, bool]]:
        self._pending += text
        out: list[tuple[str, bool]] = []
        while self._pending:
            before = (self._state, len(self._pending))
            if self._state == "start":
                self._at_start(out)
            elif self._state == "reasoning":
                self._in_block(out)
            elif self._state == "after":
                self._after_block(out)
            else:
                self._emit(out, self._pending, False)
                self._pending = ""
            if (self._state, len(self._pending)) == before:
                break  # waiting for more text
        return out

    def finish(self) -> list[tuple[str, bool]]:
        """The reply ended: whatever was held back belongs where the stream was."""
        out: list[tuple[str, bool]] = []
        if self._pending:
            self._emit(out, self._pending, self._state == "reasoning")
            self._pending = ""
        return out

    def _emit(self, out: list[tuple[str, bool]], text: str, reasoning: bool) -> None:
        if not text:
            return
        if reasoning:
            self.reasoning += text
        else:
            self.answer += text
        out.append((text, reasoning))

    def _at_start(self, out: list[tuple[str, bool]]) -> None:
        stripped = self._pending.lstrip()
        for markers in self._markers:
            if stripped.startswith(markers.open):
                self._block = markers
                self._state = "reasoning"
                self._pending = stripped[len(markers.open) :]
                return
        if stripped and not any(m.open.startswith(stripped) for m in self._markers):
            self._state = "answer"

    def _in_block(self, out: list[tuple[str, bool]]) -> None:
        assert self._block is not None
        if not self.reasoning:  # the blank lines after the opening marker are not part of the reasoning
            self._pending = self._pending.lstrip()
        close = self._block.close
        at = self._pending.find(close)
        if at >= 0:
            self._emit(out, self._pending[:at], True)
            self._pending = self._pending[at + len(close) :]
            self._state = "after"
            return
        keep = partial_suffix(self._pending, close)
        self._emit(out, self._pending[: len(self._pending) - keep], True)
        self._pending = self._pending[len(self._pending) - keep :]

    def _after_block(self, out: list[tuple[str, bool]]) -> None:
        """Between the block and the answer: blank lines and the family's own markers are not part of the answer."""
        assert self._block is not None
        stripped = self._pending.lstrip()
        for prefix in self._block.answer_prefixes:
            if stripped.startswith(prefix):
                self._pending = stripped[len(prefix) :]
                return
        if stripped and not any(p.startswith(stripped) for p in self._block.answer_prefixes):
            self._pending = stripped
            self._state = "answer"
        elif not stripped:
            self._pending = ""


def partial_suffix(text: str, marker: str) -> int:
    """How many trailing characters of ``text`` are the beginning of ``marker``."""
    for size in range(min(len(marker) - 1, len(text)), 0, -1):
        if marker.startswith(text[-size:]):
            return size
    return 0


def split_reasoning(text: str, syntax: ReasoningSyntax) -> tuple[str, str]:
    """A whole reply as (reasoning, answer)."""
    splitter = ReasoningSplitter(syntax)
    splitter.feed(text)
    splitter.finish()
    return splitter.reasoning, splitter.answer
