"""The conversation being chatted in: its messages and which of them the model still sees."""

from __future__ import annotations

from dataclasses import dataclass, field

from fara_desktop.engine.types import ChatMessage, Role

DEFAULT_SYSTEM_PROMPT = "You are a helpful assistant."


@dataclass
class Conversation:
    """Messages in order; ``context_start`` is the first one still sent to the model after trimming."""

    system_prompt: str = DEFAULT_SYSTEM_PROMPT
    messages: list[ChatMessage] = field(default_factory=list)
    context_start: int = 0

    def add(self, role: Role, content: str) -> ChatMessage:
        message = ChatMessage(role, content)
        self.messages.append(message)
        return message

    def prompt_messages(self) -> list[ChatMessage]:
        system = [ChatMessage("system", self.system_prompt)] if self.system_prompt.strip() else []
        return system + self.messages[self.context_start :]

    def apply_trim(self, dropped: int) -> None:
        """The engine left out the ``dropped`` oldest messages it was sent; stop sending them."""
        self.context_start = min(len(self.messages), self.context_start + dropped)
