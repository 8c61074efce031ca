"""Export conversations to Markdown and JSON files (one file per conversation), and import JSON back."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable
from pathlib import Path

from fara_desktop.storage import ConversationStore, StorageError

FORMATS = ("md", "json")


def file_stem(conversation_id: int, title: str) -> str:
    slug = re.sub(r"[^\w]+", "-", title.lower(), flags=re.UNICODE).strip("-")[:60] or "chat"
    return f"{conversation_id:04d}-{slug}"


def _write_atomic(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


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
                _write_atomic(path, store.export_markdown(summary.id))
            elif fmt == "json":
                _write_atomic(path, json.dumps(store.export_json(summary.id), indent=2, ensure_ascii=False))
            else:
                raise ValueError(f"unknown export format {fmt!r}")
            written.append(path)
    return written


def import_conversation(store: ConversationStore, path: Path) -> int:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise StorageError(f"{path.name} could not be read as JSON: {exc}") from exc
    return store.import_json(data)
