"""ChatGPT's data export: ``conversations.json``, a list of conversations, each a tree of messages (``mapping``:
id → node with ``parent``, ``children`` and ``message``) and ``current_node``, the end of the branch shown.

Kept: user and assistant text (``text`` and ``multimodal_text`` parts that are text; ``code``), titles, times, the
model of each reply (``metadata.model_slug``), and the reasoning of o-series replies (``thoughts`` nodes) on the
reply that follows them, and the pictures of user messages (the files beside the JSON in the export, found by their
ids). Left out, with their children kept: the hidden root, system and tool messages.
"""

from __future__ import annotations

from typing import Any

from fara_desktop.chats.export_format import MAX_CONTENT_CHARS, ImportedConversation
from fara_desktop.chats.imports.common import (
    Node,
    build_conversation,
    epoch_seconds,
    need_dict,
    need_list,
    optional_dict,
    picture_refs,
    source_id,
    text_or_none,
)


def looks_like(data: Any) -> bool:
    first = data[0] if isinstance(data, list) and data else data
    return isinstance(first, dict) and isinstance(first.get("mapping"), dict)


def _pictures(content: dict[str, Any]) -> tuple[str, ...]:
    """The file ids of a message's pictures (``image_asset_pointer`` parts: ``file-service://file-…``); the files
    are beside ``conversations.json`` in the export, named from the id."""
    parts = content.get("parts") if content.get("content_type") == "multimodal_text" else None
    pointers = [
        p.get("asset_pointer")
        for p in parts or []
        if isinstance(p, dict) and p.get("content_type") == "image_asset_pointer"
    ]
    return picture_refs([p.split("://", 1)[-1] for p in pointers if isinstance(p, str)])


def _text(content: dict[str, Any], where: str) -> tuple[str, str]:
    """(text, reasoning) of a message's content."""
    kind = content.get("content_type")
    if kind in ("text", "multimodal_text"):
        parts = need_list(content.get("parts", []), f"{where}'s parts")
        texts = [p for p in parts if isinstance(p, str)]  # pictures are objects: ``_pictures``
        return text_or_none("".join(texts), f"{where}'s text") or "", ""
    if kind == "code":
        return text_or_none(content.get("text"), f"{where}'s code") or "", ""
    if kind == "thoughts":
        thoughts = need_list(content.get("thoughts", []), f"{where}'s thoughts")
        lines = []
        for thought in thoughts:
            thought = need_dict(thought, f"{where}'s thought")
            lines.append(text_or_none(thought.get("content"), f"{where}'s thought") or "")
        return "", text_or_none("\n\n".join(line for line in lines if line), f"{where}'s thoughts") or ""
    return "", ""


def _conversation(data: Any, where: str) -> ImportedConversation:
    data = need_dict(data, where)
    mapping = need_dict(data.get("mapping"), f"{where}'s messages")
    nodes: list[Node] = []
    pending_reasoning: dict[str, str] = {}  # thoughts waiting for the reply below them
    for key, raw in mapping.items():
        raw = need_dict(raw, f"{where}, message {str(key)[:40]}")
        parent = raw.get("parent")
        parent = parent if isinstance(parent, str) else None
        message = raw.get("message")
        if message is None:
            nodes.append(Node(str(key), parent, keep=False))
            continue
        message = need_dict(message, f"{where}, message {str(key)[:40]}")
        author = need_dict(message.get("author", {}), f"{where}, message {str(key)[:40]}'s author")
        role = author.get("role")
        content = need_dict(message.get("content", {}), f"{where}, message {str(key)[:40]}'s content")
        text, reasoning = _text(content, f"{where}, message {str(key)[:40]}")
        metadata = optional_dict(message.get("metadata"))
        hidden = bool(metadata.get("is_visually_hidden_from_conversation"))
        if reasoning:
            pending_reasoning[str(key)] = reasoning
        pictures = _pictures(content)
        keep = role in ("user", "assistant") and bool(text.strip() or pictures) and not hidden
        model = metadata.get("model_slug") if isinstance(metadata.get("model_slug"), str) else None
        nodes.append(
            Node(
                str(key),
                parent,
                str(role) if keep else "user",
                text,
                "",
                model,
                epoch_seconds(message.get("create_time"), f"{where}, message {str(key)[:40]}'s time"),
                keep,
                pictures,
            )
        )
    nodes = _attach_reasoning(nodes, pending_reasoning)
    title = text_or_none(data.get("title"), f"{where}'s title", 10_000)
    return build_conversation(
        nodes,
        title,
        epoch_seconds(data.get("create_time"), f"{where}'s creation time"),
        epoch_seconds(data.get("update_time"), f"{where}'s update time"),
        data.get("current_node") if isinstance(data.get("current_node"), str) else None,
        where,
        source_id=source_id("chatgpt", data.get("conversation_id") or data.get("id")),
    )


def _attach_reasoning(nodes: list[Node], reasoning: dict[str, str]) -> list[Node]:
    """A reply's reasoning is its own node in ChatGPT's tree, an ancestor of the reply: move it onto the nearest
    assistant reply below it. Each thought goes to one reply (the first in the file that reaches it), so a chain
    of thoughts above many replies is stored once, not once per reply, and the walk is linear; a reply's joined
    reasoning is capped like any text."""
    if not reasoning:
        return nodes
    by_key = {n.key: n for n in nodes}
    walked: set[str] = set()
    attached: list[Node] = []
    for node in nodes:
        if node.keep and node.role == "assistant":
            found: list[str] = []
            size = 0
            parent = node.parent
            while parent in by_key and parent not in walked and not by_key[parent].keep:
                walked.add(parent)
                if parent in reasoning and size < MAX_CONTENT_CHARS:
                    found.append(reasoning[parent])
                    size += len(reasoning[parent]) + 2
                parent = by_key[parent].parent
            if found:
                joined = "\n\n".join(reversed(found))[-MAX_CONTENT_CHARS:]  # the nearest thoughts, if too many
                node = Node(node.key, node.parent, node.role, node.content, joined, node.model, node.created_at)
        attached.append(node)
    return attached


def read(data: Any) -> list[ImportedConversation]:
    conversations = data if isinstance(data, list) else [data]
    return [_conversation(c, f"Conversation {number}") for number, c in enumerate(conversations, start=1)]
