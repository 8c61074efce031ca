"""Export conversations to Markdown and JSON files (one file per conversation); import our JSON and other apps'."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from fara_desktop.atomic_files import write_text_atomically
from fara_desktop.chats.export_format import ImportRefusedError
from fara_desktop.chats.imports import read_conversations
from fara_desktop.chats.storage import ConversationStore
from fara_desktop.regular_files import read_regular_text

FORMATS = ("md", "json")


def file_stem(conversation_id: int, title: str) -> str:
    slug = re.sub(r"[^\w]+", "-", title.lower(), flags=re.UNICODE).strip("-")[:60] or "chat"
    return f"{conversation_id:04d}-{slug}"


def export_conversations(
    store: ConversationStore, out_dir: Path, formats: Iterable[str] = FORMATS, ids: Iterable[int] | None = None
) -> list[Path]:
    out_dir.mkdir(parents=True, exist_ok=True)
    wanted = set(ids) if ids is not None else None
    written: list[Path] = []
    for summary in store.conversations():
        if wanted is not None and summary.id not in wanted:
            continue
        stem = file_stem(summary.id, summary.title)
        for fmt in formats:
            path = out_dir / f"{stem}.{fmt}"
            if fmt == "md":
                write_text_atomically(path, store.export_markdown(summary.id))
            elif fmt == "json":
                write_text_atomically(path, json.dumps(store.export_json(summary.id), indent=2, ensure_ascii=False))
            else:
                raise ValueError(f"unknown export format {fmt!r}")
            written.append(path)
    return written


MAX_IMPORT_BYTES = 512 * 1024 * 1024


@dataclass(frozen=True)
class ImportResult:
    """What an import added: the format it was read as and the new conversations' ids."""

    format_name: str
    conversation_ids: list[int]


def import_conversations(store: ConversationStore, path: Path) -> ImportResult:
    """Every conversation in the file, or none. Raises ``ImportRefusedError`` (unreadable, not JSON, not a format
    we know, invalid) or ``StorageError`` (cannot be saved)."""
    try:
        data = json.loads(read_regular_text(path, MAX_IMPORT_BYTES))
    except RecursionError as exc:
        raise ImportRefusedError(f"{path.name} is nested too deeply to be a conversation.") from exc
    except (OSError, ValueError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise ImportRefusedError(f"{path.name} could not be read as JSON: {reason[:200]}") from exc
    try:
        format_name, conversations = read_conversations(data)
    except RecursionError as exc:
        raise ImportRefusedError(f"{path.name} is nested too deeply to be a conversation.") from exc
    if not conversations:
        raise ImportRefusedError(f"{path.name} holds no conversation.")
    return ImportResult(format_name, store.import_conversations(conversations))


def import_conversation(store: ConversationStore, path: Path) -> int:
    """The first conversation of an import (see ``import_conversations``)."""
    return import_conversations(store, path).conversation_ids[0]
