"""Validate a conversation file before anything of it reaches the database.

An imported file is a stranger's: every field is checked for type, range and size, and a file with one bad value is
refused whole with a reason a person can act on. The checks are written out rather than done with a schema library:
they are few, and the ones that matter most (finite timestamps that ``time.localtime`` can format, stats made only
of finite numbers) are not what JSON Schema's types express.
"""

from __future__ import annotations

import hashlib
import json
import math
import time
from dataclasses import dataclass, replace
from typing import Any

from fara_desktop.chats.records import ENDED_EARLY, MAX_TIMESTAMP, MessageStatus
from fara_desktop.chats.tool_rounds import ToolRound, rounds_from_json
from fara_desktop.vocabulary.errors import FaraError
from fara_desktop.vocabulary.pictures import PICTURE_DIGEST

EXPORT_FORMAT = "fara-desktop-conversation"
MAX_MESSAGES = 100_000
MAX_CONTENT_CHARS = 10_000_000
MAX_TITLE_CHARS = 500
MAX_MODEL_CHARS = 500
MAX_STATS_KEYS = 32
ROLES = ("system", "user", "assistant")
# "streaming" is a live state; imported, it reads as stopped
IMPORT_STATUSES: tuple[MessageStatus, ...] = ("complete", "stopped", "failed")


class ImportRefusedError(FaraError):
    """The file is not a conversation we can import; the message names the first problem found."""


@dataclass(frozen=True)
class ImportedMessage:
    """One validated message."""

    role: str
    content: str
    status: MessageStatus
    model: str | None
    stats: dict[str, Any] | None
    created_at: float
    updated_at: float
    parent: int | None = None  # index of an earlier message in the list; None: a first turn
    reasoning: str = ""
    tool_rounds: tuple[ToolRound, ...] = ()  # the tools a reply called (read as the database's are: bounded)
    pictures: tuple[str, ...] = ()  # digests of the pictures it carries: files beside the export, taken in anew
    # another app's pictures, as its export refers to them: "data:image/…;base64,…" (Open WebUI) or "file:<id>",
    # a file beside the export whose name starts with the id (ChatGPT); read in the sandbox when imported
    picture_refs: tuple[str, ...] = ()


@dataclass(frozen=True)
class ImportedConversation:
    """A validated conversation, ready to be written: its messages form a tree (each parent comes first)."""

    title: str
    system_prompt: str
    created_at: float
    updated_at: float
    messages: list[ImportedMessage]
    leaf: int | None = None  # index of the message that ends the branch shown; None: the last one
    thinking: bool = True
    # Which conversation of which app this is ("chatgpt:<id>"), so importing the same file again is recognised;
    # for a file that names none, a digest of its title, start and first message.
    source_id: str | None = None


def _digest(parts: Any) -> str:
    return hashlib.sha256(json.dumps(parts, ensure_ascii=False, sort_keys=True).encode()).hexdigest()


def content_source_id(conversation: ImportedConversation) -> str:
    first = conversation.messages[0].content[:2000] if conversation.messages else ""
    return "content:" + _digest([conversation.title, conversation.created_at, first])[:40]


def content_digest(conversation: ImportedConversation) -> str:
    """What a conversation holds, as one hash: equal for the same conversation imported twice."""
    return _digest(
        [
            conversation.title,
            conversation.system_prompt,
            conversation.leaf,
            conversation.thinking,
            [
                [m.role, m.content, m.reasoning, m.status, m.model, m.parent, m.created_at]
                for m in conversation.messages
            ],
        ]
    )


def checked_text(value: Any, where: str, limit: int, default: str | None = None) -> str:
    """``value`` if it is text of at most ``limit`` characters (``default`` for a missing one); else refused."""
    if value is None and default is not None:
        return default
    if not isinstance(value, str):
        raise ImportRefusedError(f"{where} is not text.")
    if len(value) > limit:
        raise ImportRefusedError(f"{where} is {len(value):,} characters long; at most {limit:,} are accepted.")
    return value


def _time(value: Any, where: str, default: float) -> float:
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ImportRefusedError(f"{where} is not a time (seconds since 1970): {str(value)[:40]!r}.")
    if not 0 <= value <= MAX_TIMESTAMP:
        raise ImportRefusedError(f"{where} is out of range: {value!r:.40}.")
    return float(value)


def _stats(value: Any, where: str) -> dict[str, Any] | None:
    if value is None:
        return None
    if not isinstance(value, dict) or len(value) > MAX_STATS_KEYS:
        raise ImportRefusedError(f"{where} stats are not a small set of named numbers.")
    stats: dict[str, Any] = {}
    for key, number in value.items():
        if key == "error" and isinstance(number, str) and len(number) <= 2000:
            stats[key] = number
        elif key == "ended_early" and isinstance(number, str) and number in ENDED_EARLY:
            stats[key] = number  # why the reply ended early (the loop detector, the token limit)
        elif isinstance(number, (int, float)) and not isinstance(number, bool) and math.isfinite(number):
            stats[str(key)[:64]] = number
        else:
            raise ImportRefusedError(f"{where} stats hold a value that is not a number ({str(key)[:40]!r}).")
    return stats


def validate_export(data: Any) -> ImportedConversation:
    """Check a decoded Fara export; raise ``ImportRefusedError`` naming the first problem."""
    if not isinstance(data, dict) or data.get("format") != EXPORT_FORMAT:
        raise ImportRefusedError("This file is not a Fara Desktop conversation export.")
    version = data.get("version")
    if version not in (1, 2, None):
        raise ImportRefusedError(f"This export has version {str(version)[:20]}; this app reads versions 1 and 2.")
    branching = version == 2
    messages = data.get("messages")
    if not isinstance(messages, list):
        raise ImportRefusedError("The conversation file has no message list.")
    if len(messages) > MAX_MESSAGES:
        raise ImportRefusedError(f"The file has {len(messages):,} messages; at most {MAX_MESSAGES:,} are accepted.")
    now = time.time()
    created = _time(data.get("created_at"), "The conversation's creation time", now)
    checked: list[ImportedMessage] = []
    index_of_key: dict[Any, int] = {}
    for number, message in enumerate(messages, start=1):
        where = f"Message {number}"
        if not isinstance(message, dict):
            raise ImportRefusedError(f"{where} is not an object.")
        parent = number - 2 if number > 1 else None
        if branching:
            parent = _parent(message, where, index_of_key)
            index_of_key[_key(message.get("key"), where, index_of_key)] = number - 1
        role = message.get("role")
        if role not in ROLES:
            raise ImportRefusedError(f"{where} has no valid role (system, user or assistant).")
        raw_status = message.get("status") or "complete"
        if raw_status == "streaming":
            raw_status = "stopped"
        status = next((s for s in IMPORT_STATUSES if s == raw_status), None)
        if status is None:
            raise ImportRefusedError(f"{where} has an unknown status {str(raw_status)[:40]!r}.")
        model = message.get("model")
        message_time = _time(message.get("created_at"), f"{where}'s time", created)
        checked.append(
            ImportedMessage(
                role=role,
                content=checked_text(message.get("content"), f"{where}'s text", MAX_CONTENT_CHARS, ""),
                status=status,
                model=None if model is None else checked_text(model, f"{where}'s model name", MAX_MODEL_CHARS),
                stats=_stats(message.get("stats"), where),
                created_at=message_time,
                updated_at=_time(message.get("updated_at"), f"{where}'s update time", message_time),
                parent=parent,
                reasoning=checked_text(message.get("reasoning"), f"{where}'s reasoning", MAX_CONTENT_CHARS, ""),
                tool_rounds=_rounds(message.get("tool_rounds"), where),
                pictures=_pictures(message.get("pictures"), where),
            )
        )
    current = data.get("current")
    if branching and current is not None and _plain_key(current) not in index_of_key:
        raise ImportRefusedError("The conversation's current message is not one of its messages.")
    thinking = data.get("thinking", True)
    if not isinstance(thinking, bool):
        raise ImportRefusedError("The conversation's thinking switch is not true or false.")
    declared_source = data.get("source_id")
    conversation = ImportedConversation(
        title=checked_text(data.get("title"), "The title", MAX_TITLE_CHARS, "Imported chat").strip() or "Imported chat",
        system_prompt=checked_text(data.get("system_prompt"), "The system prompt", MAX_CONTENT_CHARS, ""),
        created_at=created,
        updated_at=_time(data.get("updated_at"), "The conversation's update time", created),
        messages=checked,
        leaf=index_of_key[_plain_key(current)] if branching and current is not None else None,
        thinking=thinking,
    )
    if isinstance(declared_source, str) and 0 < len(declared_source) <= MAX_KEY_CHARS:
        return replace(conversation, source_id=declared_source)
    return replace(conversation, source_id=content_source_id(conversation))


MAX_KEY_CHARS = 200
MAX_PICTURES = 16


def _pictures(value: Any, where: str) -> tuple[str, ...]:
    """A message's picture digests: names of files in the export's ``pictures`` folder, never a path."""
    if value is None:
        return ()
    if not isinstance(value, (list, tuple)) or len(value) > MAX_PICTURES:  # a tuple: our own export, in memory
        raise ImportRefusedError(f"{where}'s pictures are not a list of at most {MAX_PICTURES}.")
    if not all(isinstance(v, str) and PICTURE_DIGEST.fullmatch(v) for v in value):
        raise ImportRefusedError(f"{where} names a picture that is not a picture digest.")
    return tuple(value)


def _rounds(value: Any, where: str) -> tuple[ToolRound, ...]:
    if value is None:
        return ()
    if not isinstance(value, list):
        raise ImportRefusedError(f"{where}'s tool calls are not a list.")
    try:
        text = json.dumps(value)
    except (ValueError, RecursionError) as exc:
        raise ImportRefusedError(f"{where}'s tool calls cannot be read.") from exc
    return rounds_from_json(text)


def _plain_key(value: Any) -> Any:
    """A message key as a dict key: text or a whole number (True and 1.0 are not keys)."""
    if isinstance(value, str) and len(value) <= MAX_KEY_CHARS:
        return value
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    return None


def _key(value: Any, where: str, seen: dict[Any, int]) -> Any:
    key = _plain_key(value)
    if key is None:
        raise ImportRefusedError(f"{where} has no key (a number or a short text naming it).")
    if key in seen:
        raise ImportRefusedError(f"{where} has the same key as message {seen[key] + 1}.")
    return key


def _parent(message: dict[str, Any], where: str, seen: dict[Any, int]) -> int | None:
    """The index of the message's parent, which must come earlier in the file (so there is no loop)."""
    raw = message.get("parent")
    if raw is None:
        return None
    parent = seen.get(_plain_key(raw))
    if parent is None:
        raise ImportRefusedError(f"{where} follows a message that is not earlier in the file.")
    return parent
