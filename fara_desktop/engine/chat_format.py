"""Turn a conversation into the prompt text a model expects.

The model's own template (GGUF ``tokenizer.chat_template``, Jinja2) is used when present, rendered in Jinja2's
``ImmutableSandboxedEnvironment`` like llama-cpp-python does. A model without a template (base models such as
Gemma 3 270M) gets a documented fallback:

* architectures of the Gemma family: Gemma's turn format (``<start_of_turn>user … <end_of_turn>``), whose markers
  are special tokens in every Gemma vocabulary;
* anything else: a plain transcript (``### User:`` / ``### Assistant:``) with ``\\n### `` as a stop string.
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

from jinja2 import TemplateError
from jinja2.sandbox import ImmutableSandboxedEnvironment

from fara_desktop.engine.errors import ModelLoadError
from fara_desktop.engine.types import ChatMessage


@dataclass(frozen=True)
class RenderedPrompt:
    text: str
    add_bos: bool  # True when the tokenizer must add BOS (the template did not write it)
    stop: tuple[str, ...]


class ChatFormatter:
    """Renders messages with one chat format; ``name`` says which one for the UI."""

    name: str = "abstract"

    def render(self, messages: Sequence[ChatMessage]) -> RenderedPrompt:
        raise NotImplementedError


def _raise_exception(message: str) -> None:
    raise TemplateError(message)


def _strftime_now(fmt: str) -> str:
    return _dt.datetime.now().strftime(fmt)


class JinjaChatFormatter(ChatFormatter):
    """The model's own template from its GGUF metadata."""

    name = "gguf template"

    def __init__(self, template: str, bos_token: str, eos_token: str) -> None:
        env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
        env.globals.update(raise_exception=_raise_exception, strftime_now=_strftime_now)
        try:
            self._template = env.from_string(template)
        except TemplateError as exc:
            raise ModelLoadError(f"The model's chat template is broken: {exc}") from exc
        self._bos = bos_token
        self._eos = eos_token

    def render(self, messages: Sequence[ChatMessage]) -> RenderedPrompt:
        text = self._template.render(
            messages=[{"role": m.role, "content": m.content} for m in messages],
            add_generation_prompt=True,
            bos_token=self._bos,
            eos_token=self._eos,
        )
        return RenderedPrompt(text=text, add_bos=False, stop=())


class GemmaTurnFormatter(ChatFormatter):
    """Gemma's turn markers; Gemma has no system role, so the system prompt opens the first user turn."""

    name = "gemma turns (fallback)"

    def render(self, messages: Sequence[ChatMessage]) -> RenderedPrompt:
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


class TranscriptFormatter(ChatFormatter):
    """A plain transcript any base model can continue."""

    name = "plain transcript (fallback)"
    _titles: ClassVar[dict[str, str]] = {"system": "System", "user": "User", "assistant": "Assistant"}

    def render(self, messages: Sequence[ChatMessage]) -> RenderedPrompt:
        parts = [f"### {self._titles[m.role]}:\n{m.content}\n\n" for m in messages]
        parts.append("### Assistant:\n")
        return RenderedPrompt(text="".join(parts), add_bos=True, stop=("\n### ",))


def formatter_for(chat_template: str | None, architecture: str, bos_token: str, eos_token: str) -> ChatFormatter:
    if chat_template and chat_template.strip():
        return JinjaChatFormatter(chat_template, bos_token, eos_token)
    if architecture.startswith("gemma"):
        return GemmaTurnFormatter()
    return TranscriptFormatter()
