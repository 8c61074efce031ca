"""What the chat store hands out: messages and conversation summaries, and the clean-up of a row into one —
whatever an older version, an import or a hand edit left in the database reads as something the app can show."""

from __future__ import annotations

import json
import math
import sqlite3
from dataclasses import dataclass
from typing import Any, Literal, get_args

from fara_desktop.chats.tool_rounds import ToolRound, rounds_from_json
from fara_desktop.vocabulary.pictures import PICTURE_DIGEST
from fara_desktop.vocabulary.sources import Source, sources_from_json

MAX_TIMESTAMP = 32_503_680_000.0  # 1 January 3000
MessageStatus = Literal["complete", "streaming", "stopped", "failed"]
MESSAGE_STATUSES: tuple[MessageStatus, ...] = get_args(MessageStatus)
# A finished reply that ended before its end (``GenerationStats.ended_early``), as said under it.
ENDED_EARLY = {
    "repetition": "Stopped: it began repeating itself",
    "length": "Stopped at the token limit",
    "context": "Stopped: the context window is full",
    # not the engine's: the store's, for a reply the app never finished (killed, crashed, a power cut)
    "interrupted": "Interrupted: the app ended before this reply did",
}
INTERRUPTED_EMPTY = "Interrupted before any of it was saved: Regenerate writes it again"


@dataclass(frozen=True)
class StoredMessage:
    id: int
    conversation_id: int
    position: int
    role: str
    content: str
    status: MessageStatus
    model: str | None
    stats: dict[str, Any] | None
    created_at: float
    updated_at: float
    parent_id: int | None = None
    reasoning: str = ""
    sources: tuple[Source, ...] = ()  # the passages of the user's documents this reply was given, numbered
    tool_rounds: tuple[ToolRound, ...] = ()  # the tools the reply called, before its answer
    pictures: tuple[str, ...] = ()  # the pictures the message carries: digests in the picture store


@dataclass(frozen=True)
class ConversationSummary:
    id: int
    title: str
    system_prompt: str
    created_at: float
    updated_at: float
    message_count: int
    leaf_id: int | None = None
    thinking: bool = True
    collections: tuple[str, ...] = ()  # the document collections this chat searches
    tools: tuple[str, ...] = ()  # the tools this chat offers its model ("server/tool")
    match: str = ""  # from a search: the words around where a message matched


def finite_time(value: Any, fallback: float = 0.0) -> float:
    """A timestamp that ``time.localtime`` can format: finite and between 1970 and the year 3000."""
    if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
        return float(value) if 0 <= value <= MAX_TIMESTAMP else fallback
    return fallback


def stats_from_json(raw: Any) -> dict[str, Any] | None:
    """Stats as stored: a JSON object of numbers (and an error text, and why a reply ended early); anything else
    reads as none."""
    if not raw:
        return None
    try:
        data = json.loads(raw) if isinstance(raw, str) else None
    except (ValueError, RecursionError):
        return None
    if not isinstance(data, dict):
        return None
    kept: dict[str, Any] = {}
    for key, value in data.items():
        number = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
        if key == "error" and isinstance(value, str):
            kept[key] = value[:2000]
        elif number or (key == "ended_early" and isinstance(value, str) and value in ENDED_EARLY):
            kept[key] = value
    return kept


def message_from_row(row: sqlite3.Row) -> StoredMessage:
    """A row as the app can show it, whatever an older version, an import or a hand edit left in it."""
    status: MessageStatus = next((s for s in MESSAGE_STATUSES if s == row["status"]), "complete")
    model = row["model"] if isinstance(row["model"], str) else None
    content = row["content"] if isinstance(row["content"], str) else str(row["content"] or "")
    created = finite_time(row["created_at"])
    parent = row["parent_id"] if isinstance(row["parent_id"], int) else None
    reasoning = row["reasoning"] if isinstance(row["reasoning"], str) else ""
    sources = sources_from_json(row["sources"])
    return StoredMessage(
        id=row["id"],
        conversation_id=row["conversation_id"],
        position=row["position"],
        role=row["role"],
        content=content,
        status=status,
        model=model,
        stats=stats_from_json(row["stats"]),
        created_at=created,
        updated_at=finite_time(row["updated_at"], created),
        parent_id=parent,
        reasoning=reasoning,
        sources=sources,
        tool_rounds=rounds_from_json(row["tool_rounds"]),
        pictures=digests_from_json(row["pictures"]),
    )


def digests_from_json(raw: Any) -> tuple[str, ...]:
    """A message's picture digests, as the database holds them: only well-formed ones (a hand edit cannot name a
    file outside the store)."""
    try:
        data = json.loads(raw) if isinstance(raw, str) else None
    except (ValueError, RecursionError):
        return ()
    if not isinstance(data, list):
        return ()
    return tuple(d for d in data[:16] if isinstance(d, str) and PICTURE_DIGEST.fullmatch(d))


def names_from_json(raw: Any) -> tuple[str, ...]:
    try:
        data = json.loads(raw) if isinstance(raw, str) else None
    except (ValueError, RecursionError):
        return ()
    return tuple(n for n in data[:100] if isinstance(n, str)) if isinstance(data, list) else ()


def title_from(text: str, limit: int = 48) -> str:
    """A conversation title from its first message: the first line, trimmed at a word boundary."""
    line = " ".join(text.strip().split("\n", 1)[0].split())
    if len(line) <= limit:
        return line or "New chat"
    cut = line[:limit].rsplit(" ", 1)[0]
    return (cut if len(cut) > limit // 2 else line[:limit]).rstrip(" ,.;:") + "…"
