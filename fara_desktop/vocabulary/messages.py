"""A chat's messages, as the chat template sees them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from fara_desktop.vocabulary.pictures import AttachedPicture
from fara_desktop.vocabulary.tools import ToolCall

Role = Literal["system", "user", "assistant", "tool"]


@dataclass(frozen=True)
class ChatMessage:
    """One turn of a conversation, as the chat template sees it. An assistant turn may hold ``tool_calls``; a
    ``tool`` turn is one call's result (``tool_call_id`` names the call, ``name`` the tool)."""

    role: Role
    content: str
    reasoning: str = ""  # an assistant turn's reasoning, kept apart from its answer
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str = ""
    name: str = ""
    pictures: tuple[AttachedPicture, ...] = ()  # a user turn's pictures, shown to the model before its text
