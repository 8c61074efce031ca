"""Turn a conversation into the prompt text a model expects.

The model's own template (GGUF ``tokenizer.chat_template``, Jinja2) is used when present, rendered in Jinja2's
``ImmutableSandboxedEnvironment`` like llama-cpp-python does, with a budget on time and size
(``template_sandbox``). A model without a template (base models such as
Gemma 3 270M) gets a documented fallback:

* architectures of the Gemma family: Gemma's turn format (``<start_of_turn>user … <end_of_turn>``), whose markers
  are special tokens in every Gemma vocabulary;
* anything else: a plain transcript (``### User:`` / ``### Assistant:``) with ``\\n### `` as a stop string.
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Protocol

from jinja2 import TemplateError

from fara_desktop.engine.errors import ModelLoadError, RequestCancelled, TemplateRenderError
from fara_desktop.engine.reasoning import THINK, ReasoningSyntax, markers_for_template, syntax_for_prompt
from fara_desktop.engine.template_sandbox import BoundedSandbox, RenderBudget
from fara_desktop.engine.types import ChatMessage

PLAIN_REASONING = ReasoningSyntax((THINK,))


@dataclass(frozen=True)
class RenderedPrompt:
    text: str
    add_bos: bool  # True when the tokenizer must add BOS (the template did not write it)
    stop: tuple[str, ...]
    note: str | None = None  # how the conversation had to be adapted to the template, for the user to read
    reasoning: ReasoningSyntax = PLAIN_REASONING  # how the reply marks its reasoning


class ChatFormatter(Protocol):
    """Renders messages with one chat format; ``name`` says which one for the UI."""

    name: str
    thinking_switch: bool  # the template can turn the model's reasoning off (``enable_thinking``)

    def render(
        self, messages: Sequence[ChatMessage], should_cancel: Callable[[], bool] | None = None, thinking: bool = True
    ) -> RenderedPrompt: ...


def _raise_exception(message: str) -> None:
    raise TemplateError(message)


def _strftime_now(fmt: str) -> str:
    return _dt.datetime.now().strftime(fmt)


# "No tools", as Hugging Face passes it (``tools=None``); then as the tool-use variants of templates (Hermes,
# Command R+, FireFunction) need it spelled to render at all: an empty list of tools, functions and documents.
NO_TOOLS: tuple[dict[str, Any], ...] = (
    {"tools": None},
    {"tools": [], "functions": "[]", "documents": []},
)

SYSTEM_FOLDED_NOTE = (
    "This model's chat template has no system role, so the system prompt was put at the start of the first message."
)
ROLES_MERGED_NOTE = (
    "This model's chat template needs user and assistant turns to alternate, so consecutive messages of the same "
    "role were joined."
)


def fold_system_prompt(messages: Sequence[ChatMessage]) -> list[ChatMessage]:
    """The system prompt opens the first user turn (what Gemma's own docs recommend for a template without one)."""
    system = "\n\n".join(m.content for m in messages if m.role == "system")
    folded: list[ChatMessage] = []
    for message in messages:
        if message.role == "system":
            continue
        if system and message.role == "user":
            message = ChatMessage("user", f"{system}\n\n{message.content}")
            system = ""
        folded.append(message)
    if system:  # no user turn at all
        folded.insert(0, ChatMessage("user", system))
    return folded


def merge_same_roles(messages: Sequence[ChatMessage]) -> list[ChatMessage]:
    merged: list[ChatMessage] = []
    for message in messages:
        if merged and merged[-1].role == message.role:
            merged[-1] = ChatMessage(message.role, f"{merged[-1].content}\n\n{message.content}")
        else:
            merged.append(message)
    return merged


class JinjaChatFormatter:
    """The model's own template from its GGUF metadata, rendered in a bounded sandbox.

    A template that refuses the conversation is retried once with the system prompt folded into the first user
    turn (Gemma 2 raises "System role not supported"), then with same-role turns joined (Mistral insists on
    alternation); the prompt then carries a note saying so. Otherwise its own message becomes a typed error."""

    name = "gguf template"

    def __init__(self, template: str, bos_token: str, eos_token: str) -> None:
        self.thinking_switch = "enable_thinking" in template
        self.reasoning_markers = markers_for_template(template)
        # gpt-oss reads an earlier turn's reasoning from ``thinking``; most others from ``reasoning_content``
        self._thinking_field = "message.thinking" in template or "message['thinking']" in template
        self._env = BoundedSandbox(trim_blocks=True, lstrip_blocks=True)
        self._env.globals.update(raise_exception=_raise_exception, strftime_now=_strftime_now)
        try:
            self._template = self._env.from_string(template)
        except TemplateError as exc:
            raise ModelLoadError(f"The model's chat template is broken: {exc}") from exc
        except (RecursionError, MemoryError) as exc:
            raise ModelLoadError(f"The model's chat template is too deeply nested to compile ({exc}).") from exc
        self._bos = bos_token
        self._eos = eos_token

    def _message(self, message: ChatMessage) -> dict[str, str]:
        """A turn as Hugging Face passes it. The answer is the content; an earlier reply's reasoning goes only in
        the fields a template may read it from, so a template that does not ask for it never sees it."""
        turn = {"role": message.role, "content": message.content}
        if message.reasoning:
            turn["reasoning_content"] = message.reasoning
            if self._thinking_field:
                turn["thinking"] = message.reasoning
        return turn

    def _render_once(
        self, messages: Sequence[ChatMessage], budget: RenderBudget, no_tools: dict[str, Any], thinking: bool
    ) -> str:
        return self._env.render_bounded(
            self._template,
            budget,
            messages=self._env.checked(self._message(m) for m in messages),
            add_generation_prompt=True,
            bos_token=self._bos,
            eos_token=self._eos,
            enable_thinking=thinking,
            datetime=_dt.datetime.now().strftime("%b %d %Y %H:%M:%S"),  # FireFunction's own variable
            **no_tools,
        )

    def render(
        self, messages: Sequence[ChatMessage], should_cancel: Callable[[], bool] | None = None, thinking: bool = True
    ) -> RenderedPrompt:
        budget = RenderBudget(should_cancel=should_cancel)  # one budget for all attempts
        attempts: list[tuple[list[ChatMessage], str | None]] = [(list(messages), None)]
        folded = fold_system_prompt(messages)
        if any(m.role == "system" for m in messages):
            attempts.append((folded, SYSTEM_FOLDED_NOTE))
        merged = merge_same_roles(folded)
        if merged != folded:
            attempts.append(
                (merged, ROLES_MERGED_NOTE if len(attempts) == 1 else f"{SYSTEM_FOLDED_NOTE} {ROLES_MERGED_NOTE}")
            )
        first_error: Exception | None = None
        for no_tools in NO_TOOLS:
            for attempt, note in attempts:
                try:
                    text = self._render_once(attempt, budget, no_tools, thinking)
                except (TemplateRenderError, RequestCancelled):
                    raise  # over budget or stopped: retrying would only spend more
                except Exception as exc:
                    first_error = first_error or exc
                    continue
                reasoning = syntax_for_prompt(self.reasoning_markers, text)
                return RenderedPrompt(text=text, add_bos=False, stop=(), note=note, reasoning=reasoning)
        assert first_error is not None
        raise TemplateRenderError(_template_message(first_error)) from first_error


def _template_message(error: Exception) -> str:
    detail = " ".join(str(error).split())[:300] or type(error).__name__
    if isinstance(error, TemplateError):
        return f"The model's chat template refused this conversation: {detail}"
    return f"The model's chat template failed on this conversation ({type(error).__name__}: {detail})"


class GemmaTurnFormatter:
    """Gemma's turn markers; Gemma has no system role, so the system prompt opens the first user turn."""

    name = "gemma turns (fallback)"
    thinking_switch = False

    def render(
        self, messages: Sequence[ChatMessage], should_cancel: Callable[[], bool] | None = None, thinking: bool = True
    ) -> RenderedPrompt:
        system = "\n\n".join(m.content for m in messages if m.role == "system")
        parts: list[str] = []
        first_user = True
        for message in messages:
            if message.role == "system":
                continue
            role = "model" if message.role == "assistant" else "user"
            content = message.content
            if role == "user" and first_user and system:
                content = f"{system}\n\n{content}"
            if role == "user":
                first_user = False
            parts.append(f"<start_of_turn>{role}\n{content}<end_of_turn>\n")
        parts.append("<start_of_turn>model\n")
        return RenderedPrompt(text="".join(parts), add_bos=True, stop=("<end_of_turn>",))


class TranscriptFormatter:
    """A plain transcript any base model can continue."""

    name = "plain transcript (fallback)"
    _titles: ClassVar[dict[str, str]] = {"system": "System", "user": "User", "assistant": "Assistant"}
    thinking_switch = False

    def render(
        self, messages: Sequence[ChatMessage], should_cancel: Callable[[], bool] | None = None, thinking: bool = True
    ) -> RenderedPrompt:
        parts = [f"### {self._titles[m.role]}:\n{m.content}\n\n" for m in messages]
        parts.append("### Assistant:\n")
        return RenderedPrompt(text="".join(parts), add_bos=True, stop=("\n### ",))


def formatter_for(chat_template: str | None, architecture: str, bos_token: str, eos_token: str) -> ChatFormatter:
    if chat_template and chat_template.strip():
        return JinjaChatFormatter(chat_template, bos_token, eos_token)
    if architecture.startswith("gemma"):
        return GemmaTurnFormatter()
    return TranscriptFormatter()
