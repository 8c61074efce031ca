"""LM Studio's conversation files (``~/.lmstudio/conversations/*.conversation.json``): ``{"name", "createdAt"
(ms), "systemPrompt", "messages": [{"versions": [...], "currentlySelected": n}]}``. A user version holds
``content: [{"type": "text", "text"}]``; an assistant version (``multiStep``) holds ``steps`` of content blocks,
those styled ``thinking`` being its reasoning, and ``senderInfo.senderName``, the model.

LM Studio keeps the versions of each message (regenerations, edits) but only one continuation: the conversation
goes on after the selected version, and the other versions become siblings without continuation.
"""

from __future__ import annotations

from typing import Any

from fara_desktop.chats.export_format import ImportedConversation
from fara_desktop.chats.imports.common import (
    Node,
    build_conversation,
    epoch_seconds,
    need_dict,
    need_list,
    optional_dict,
    text_or_none,
)


def looks_like(data: Any) -> bool:
    if not isinstance(data, dict) or not isinstance(data.get("messages"), list):
        return False
    return all(isinstance(m, dict) and "versions" in m for m in data["messages"][:5])


def _texts(blocks: Any, where: str) -> str:
    parts = []
    for block in need_list(blocks, where):
        if isinstance(block, dict) and block.get("type") == "text":
            parts.append(text_or_none(block.get("text"), where) or "")
    return text_or_none("".join(parts), where) or ""


def _version(raw: Any, where: str) -> tuple[str, str, str, str | None]:
    """(role, text, reasoning, model) of one version."""
    version = need_dict(raw, where)
    role = version.get("role")
    if version.get("type") == "multiStep" or "steps" in version:
        answer: list[str] = []
        reasoning: list[str] = []
        for step in need_list(version.get("steps", []), f"{where}'s steps"):
            if not isinstance(step, dict) or step.get("type") != "contentBlock":
                continue  # tool calls and their results
            style = optional_dict(step.get("style"))
            text = _texts(step.get("content", []), f"{where}'s text")
            (reasoning if style.get("type") == "thinking" else answer).append(text)
        sender = optional_dict(version.get("senderInfo"))
        model = sender.get("senderName") if isinstance(sender.get("senderName"), str) else None
        return str(role), "".join(answer), "\n\n".join(r for r in reasoning if r), model
    return str(role), _texts(version.get("content", []), f"{where}'s text"), "", None


def read(data: Any) -> list[ImportedConversation]:
    data = need_dict(data, "The conversation")
    created = epoch_seconds(data.get("createdAt"), "The conversation's creation time")
    nodes: list[Node] = []
    parent: str | None = None
    for number, raw in enumerate(need_list(data.get("messages"), "The message list"), start=1):
        message = need_dict(raw, f"Message {number}")
        versions = need_list(message.get("versions"), f"Message {number}'s versions")
        selected = message.get("currentlySelected", 0)
        if not isinstance(selected, int) or isinstance(selected, bool) or not 0 <= selected < max(len(versions), 1):
            selected = 0
        chosen = parent
        for index, version in enumerate(versions):
            role, text, reasoning, model = _version(version, f"Message {number}, version {index + 1}")
            key = f"{number}.{index}"
            keep = role in ("user", "assistant") and bool(text.strip() or reasoning)
            nodes.append(Node(key, parent, role if keep else "user", text, reasoning, model, created, keep))
            if index == selected:
                chosen = key
        parent = chosen
    system = text_or_none(data.get("systemPrompt"), "The system prompt") or ""
    return [
        build_conversation(
            nodes,
            text_or_none(data.get("name"), "The title", 10_000),
            created,
            None,
            parent,
            "The conversation",
            system,
        )
    ]
