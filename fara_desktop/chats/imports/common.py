"""What every import shares: checked access to a stranger's JSON, times in any epoch unit, and a message tree
turned into an ``ImportedConversation`` whose parents come first (whatever order, loops or orphans the file has)."""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from fara_desktop.chats.export_format import (
    MAX_CONTENT_CHARS,
    MAX_MESSAGES,
    MAX_MODEL_CHARS,
    MAX_TITLE_CHARS,
    ImportedConversation,
    ImportedMessage,
    ImportRefusedError,
    checked_text,
    content_source_id,
)
from fara_desktop.chats.records import MAX_TIMESTAMP

MAX_SOURCE_ID_CHARS = 200


def source_id(app: str, value: Any) -> str | None:
    """``app:id`` for an id a file gives its conversation (text or a number), else None."""
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        return None
    text = str(value).strip()
    return f"{app}:{text}"[:MAX_SOURCE_ID_CHARS] if text else None


def need_dict(value: Any, where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise ImportRefusedError(f"{where} is not an object.")
    return value


def optional_dict(value: Any) -> dict[str, Any]:
    """An optional object: what is not one reads as empty."""
    return value if isinstance(value, dict) else {}


def need_list(value: Any, where: str) -> list[Any]:
    if not isinstance(value, list):
        raise ImportRefusedError(f"{where} is not a list.")
    return value


def text_or_none(value: Any, where: str, limit: int = MAX_CONTENT_CHARS) -> str | None:
    return None if value is None else checked_text(value, where, limit)


def epoch_seconds(value: Any, where: str) -> float | None:
    """A time as seconds since 1970, from seconds, milliseconds, microseconds or nanoseconds (apps use all four)."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ImportRefusedError(f"{where} is not a time: {str(value)[:40]!r}.")
    seconds = float(value)
    for limit, scale in ((1e17, 1e9), (1e14, 1e6), (1e11, 1e3)):
        if seconds > limit:
            seconds /= scale
            break
    if not 0 <= seconds <= MAX_TIMESTAMP:
        raise ImportRefusedError(f"{where} is out of range: {value!r:.40}.")
    return seconds


@dataclass(frozen=True)
class Node:
    """One message as a format stores it, before the tree is checked. ``keep=False``: a node that is not a chat
    turn (a hidden system message, a tool call); its children attach to its nearest kept ancestor."""

    key: str
    parent: str | None
    role: str = "user"
    content: str = ""
    reasoning: str = ""
    model: str | None = None
    created_at: float | None = None
    keep: bool = True
    pictures: tuple[str, ...] = ()  # the pictures it refers to (``ImportedMessage.picture_refs``)


MAX_PICTURE_REF_CHARS = 24 * 1024 * 1024  # a data: URI of a picture of at most 16 MB
FILE_ID = re.compile(r"file[-_][A-Za-z0-9_-]{1,200}")


def picture_refs(values: Sequence[Any]) -> tuple[str, ...]:
    """The pictures among an app's references that can be taken in: data: URIs of images, and file ids (a file
    beside the export); at most 16 a message; anything else (a web address, a path) is left out."""
    refs: list[str] = []
    for value in values:
        if isinstance(value, str) and value[:11].lower() == "data:image/" and len(value) <= MAX_PICTURE_REF_CHARS:
            refs.append(value)
        elif isinstance(value, str) and FILE_ID.fullmatch(value):
            refs.append(f"file:{value}")
    return tuple(refs[:16])


def build_conversation(
    nodes: Sequence[Node],
    title: str | None,
    created_at: float | None,
    updated_at: float | None,
    current: str | None,
    where: str,
    system_prompt: str = "",
    source_id: str | None = None,
) -> ImportedConversation:
    """Order the tree (parents first, siblings in file order) and refuse a file whose messages loop.
    ``source_id``: the conversation's id in the app it came from (None: one is made from its content)."""
    if len(nodes) > MAX_MESSAGES:
        raise ImportRefusedError(f"{where} has {len(nodes):,} messages; at most {MAX_MESSAGES:,} are accepted.")
    by_key: dict[str, Node] = {}
    for node in nodes:
        if node.key in by_key:
            raise ImportRefusedError(f"{where} has two messages with the id {node.key[:60]!r}.")
        by_key[node.key] = node
    children: dict[str | None, list[Node]] = {}
    for node in nodes:
        parent = node.parent if node.parent in by_key else None
        children.setdefault(parent, []).append(node)
    ordered: list[Node] = []
    stack = list(reversed(children.get(None, [])))
    while stack:  # iterative: a 10,000-message chain must not hit the recursion limit
        node = stack.pop()
        ordered.append(node)
        stack.extend(reversed(children.get(node.key, [])))
    if len(ordered) != len(nodes):
        raise ImportRefusedError(f"{where}: its messages refer to each other in a loop.")

    nearest: dict[str, int | None] = {}  # key of any node → index of its nearest kept ancestor-or-self
    messages: list[ImportedMessage] = []
    started = created_at or 0.0
    for node in ordered:
        kept_parent = nearest.get(node.parent) if node.parent is not None and node.parent in by_key else None
        if not node.keep:
            nearest[node.key] = kept_parent
            continue
        when = node.created_at if node.created_at is not None else started
        messages.append(
            ImportedMessage(
                role=node.role,
                content=node.content,
                status="complete",
                model=node.model[:MAX_MODEL_CHARS] if node.model else None,
                stats=None,
                created_at=when,
                updated_at=when,
                parent=kept_parent,
                reasoning=node.reasoning,
                picture_refs=node.pictures,
            )
        )
        nearest[node.key] = len(messages) - 1
    leaf = nearest.get(current) if current is not None and current in by_key else None
    first = messages[0].created_at if messages else None
    created = created_at if created_at is not None else (first if first is not None else 0.0)
    conversation = ImportedConversation(
        title=((title or "").strip() or "Imported chat")[:MAX_TITLE_CHARS],
        system_prompt=system_prompt,
        created_at=created,
        updated_at=updated_at if updated_at is not None else created,
        messages=messages,
        leaf=leaf,
    )
    return replace(conversation, source_id=source_id or content_source_id(conversation))
