"""A prompt as llama.cpp reads it: its tokens (a picture's positions included), the text they came from (for its
stop strings) and, when it carries pictures, where they sit; wrapped as the worker's ``PreparedPrompt``."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from fara_desktop.engine.backend import PreparedPrompt
from fara_desktop.engine.chat_format import RenderedPrompt
from fara_desktop.engine.vision import VisionPrompt
from fara_desktop.vocabulary.messages import ChatMessage
from fara_desktop.vocabulary.tools import ToolOffer

if TYPE_CHECKING:
    from llama_cpp import Llama


@dataclass(frozen=True)
class LlamaPrompt:
    """What llama.cpp needs of a prepared prompt: its tokens, and the text they came from (for its stop strings)."""

    tokens: list[int]
    rendered: RenderedPrompt
    vision: VisionPrompt | None = None  # the prompt carries pictures: where they sit, and mtmd's chunks
    # The prompt's last tokens that open the reply's reasoning (``<think>\n``; 0: none). Qwen3.5's template, as
    # most reasoning ones, renders this reply without them in the next prompt, which parts from the context there:
    # a model that cannot cut back keeps its state there (``reasoning_tail``).
    reasoning_tail: int = 0

    @property
    def cells(self) -> int:
        """The KV cells it takes: its tokens, and an M-RoPE picture's cells beyond its positions."""
        return len(self.tokens) + (self.vision.extra_cells if self.vision else 0)


def llama_prompt(
    messages: Sequence[ChatMessage],
    dropped: int,
    read: LlamaPrompt,
    tools: ToolOffer | None = None,
) -> PreparedPrompt:
    rendered = read.rendered
    return PreparedPrompt(
        tuple(messages),
        dropped,
        rendered.note,
        rendered.reasoning,
        read,
        rendered.tool_family,
        tools if rendered.tool_family else None,
    )


def reasoning_tail(llm: Llama, rendered: RenderedPrompt, tokens: list[int]) -> int:
    """How many of ``tokens`` open the reply's reasoning at the prompt's end (0 when it opens none, or when the
    text before the opening marker does not tokenize to the prompt's own first tokens)."""
    opened = rendered.reasoning.opened if rendered.reasoning else None
    if opened is None:
        return 0
    head = rendered.text[: rendered.text.rstrip().rfind(opened.open)]
    before = llm.tokenize(head.encode("utf-8"), add_bos=rendered.add_bos, special=True)
    return len(tokens) - len(before) if 0 < len(before) < len(tokens) and tokens[: len(before)] == before else 0


def checkpoint_at(detail: LlamaPrompt, tokens: list[int]) -> int:
    """Where a model that cannot cut back keeps its state for the next prompt, which parts from this one where
    the reply's reasoning opens (``reasoning_tail``), else before the last token: the reply and the read-ahead
    both keep it there."""
    return len(tokens) - max(1, detail.reasoning_tail if detail.vision is None else 0)


def prompt_reporter(llm: Llama, reused: int, total: int, on_progress: Callable[[int, int], None]) -> Callable[[], None]:
    """Reports the tokens of a prompt read so far each time a batch completes (``n_tokens`` grows batch by batch)."""
    last = [-1]

    def report() -> None:
        done = max(0, min(llm.n_tokens - reused, total))
        if done != last[0]:
            last[0] = done
            on_progress(done, total)

    return report
