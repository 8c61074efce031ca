"""Open WebUI's chat export: a list of chats, each ``{"title", "created_at", "updated_at", "chat": {"history":
{"messages": {id: {"parentId", "childrenIds", "role", "content", "timestamp", "model"}}, "currentId"}}}``.

Reasoning models' replies carry their reasoning inside the content as
``<details type="reasoning" …><summary>Thought for 3 seconds</summary>> quoted lines</details>``: it is moved
to the reply's reasoning, unquoted. Chats of older versions without ``history`` use their flat ``messages`` list.
"""

from __future__ import annotations

import re
from typing import Any

from fara_desktop.chats.export_format import ImportedConversation
from fara_desktop.chats.imports.common import (
    Node,
    build_conversation,
    epoch_seconds,
    need_dict,
    need_list,
    picture_refs,
    source_id,
    text_or_none,
)

_OPENING = re.compile(r'<details\s+type="reasoning"')
_CLOSING = "</details>"


def looks_like(data: Any) -> bool:
    first = data[0] if isinstance(data, list) and data else data
    return isinstance(first, dict) and isinstance(first.get("chat"), dict)


def split_reasoning(content: str) -> tuple[str, str]:
    """(answer, reasoning) of an Open WebUI reply. One pass with ``find``: an unclosed block ends the search
    rather than being looked for again from every later position (a regex did that: 0.9 MB took 226 s)."""
    blocks: list[str] = []
    answer: list[str] = []
    position = 0
    while (opening := _OPENING.search(content, position)) is not None:
        tag_end = content.find(">", opening.end())
        closing = content.find(_CLOSING, tag_end + 1) if tag_end >= 0 else -1
        if closing < 0:
            break  # no later block can close either
        inner = content[tag_end + 1 : closing].lstrip()
        if inner.startswith("<summary>") and (summary_end := inner.find("</summary>")) >= 0:
            inner = inner[summary_end + len("</summary>") :]
        blocks.append(inner)
        answer.append(content[position : opening.start()])
        position = closing + len(_CLOSING)
        while position < len(content) and content[position].isspace():
            position += 1
    if not blocks:
        return content, ""
    answer.append(content[position:])
    lines = "\n".join(blocks).strip().splitlines()
    reasoning = "\n".join(line[2:] if line.startswith("> ") else line.lstrip(">") for line in lines)
    return "".join(answer).strip(), reasoning.strip()


def _node(key: str, raw: Any, parent: str | None, where: str) -> Node:
    raw = need_dict(raw, where)
    role = raw.get("role")
    content = text_or_none(raw.get("content"), f"{where}'s text") or ""
    reasoning = ""
    if role == "assistant":
        content, reasoning = split_reasoning(content)
    model = raw.get("modelName") or raw.get("model")
    pictures = _pictures(raw)
    return Node(
        key,
        parent,
        role if role in ("user", "assistant") else "user",
        content,
        reasoning,
        model if isinstance(model, str) else None,
        epoch_seconds(raw.get("timestamp"), f"{where}'s time"),
        keep=role in ("user", "assistant") and bool(content.strip() or reasoning or pictures),
        pictures=pictures,
    )


def _pictures(raw: dict[str, Any]) -> tuple[str, ...]:
    """A message's pictures as Open WebUI keeps them: data: URIs in ``files`` (``{"type": "image", "url": …}``)
    or, in older exports, in ``images``."""
    files, older = raw.get("files"), raw.get("images")
    urls = (
        [f.get("url") for f in files if isinstance(f, dict) and f.get("type") == "image"]
        if isinstance(files, list)
        else []
    )
    return picture_refs([*urls, *(older if isinstance(older, list) else [])])


def _chat(data: Any, where: str) -> ImportedConversation:
    data = need_dict(data, where)
    chat = need_dict(data.get("chat"), f"{where}'s chat")
    history = chat.get("history")
    nodes: list[Node] = []
    current = None
    if isinstance(history, dict) and isinstance(history.get("messages"), dict):
        for key, raw in history["messages"].items():
            parent = raw.get("parentId") if isinstance(raw, dict) else None
            nodes.append(_node(str(key), raw, parent if isinstance(parent, str) else None, f"{where}, message {key}"))
        current = history.get("currentId") if isinstance(history.get("currentId"), str) else None
    else:
        previous = None
        for number, raw in enumerate(need_list(chat.get("messages", []), f"{where}'s messages"), start=1):
            nodes.append(_node(str(number), raw, previous, f"{where}, message {number}"))
            previous = str(number)
    title = text_or_none(data.get("title") or chat.get("title"), f"{where}'s title", 10_000)
    created = epoch_seconds(data.get("created_at"), f"{where}'s creation time")
    if created is None:
        created = epoch_seconds(chat.get("timestamp"), f"{where}'s creation time")
    return build_conversation(
        nodes,
        title,
        created,
        epoch_seconds(data.get("updated_at"), f"{where}'s update time"),
        current,
        where,
        source_id=source_id("open-webui", data.get("id")),
    )


def read(data: Any) -> list[ImportedConversation]:
    chats = data if isinstance(data, list) else [data]
    return [_chat(c, f"Chat {number}") for number, c in enumerate(chats, start=1)]
