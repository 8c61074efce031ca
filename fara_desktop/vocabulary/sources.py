"""A passage a reply was given, as the chat stores it and shows it: its number in the reply's citations and where
it came from. The documents search makes them, the chat store saves them, the window shows them; so the type lives
below all three."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from typing import Any

from fara_desktop.text.format import format_location


@dataclass(frozen=True)
class Source:
    """A passage a reply was given: its number in the reply's citations, and where it came from."""

    number: int
    path: str
    text: str
    page: int | None = None
    line_start: int | None = None
    line_end: int | None = None

    @property
    def where(self) -> str:
        return format_location(self.path, self.page, self.line_start, self.line_end)


MAX_SOURCES = 50


def sources_from_json(raw: Any) -> tuple[Source, ...]:
    """Sources as stored: a JSON list of objects; anything else (an older version, a hand edit) reads as none."""
    try:
        data = json.loads(raw) if isinstance(raw, str) else None
    except (ValueError, RecursionError):
        return ()
    kept: list[Source] = []
    for item in data[:MAX_SOURCES] if isinstance(data, list) else []:
        if not isinstance(item, dict) or not isinstance(item.get("path"), str) or not isinstance(item.get("text"), str):
            continue
        whole = [
            item.get(k) if isinstance(item.get(k), int) and not isinstance(item.get(k), bool) else None
            for k in ("number", "page", "line_start", "line_end")
        ]
        kept.append(Source(whole[0] or len(kept) + 1, item["path"][:4096], item["text"][:20_000], *whole[1:]))
    return tuple(kept)


def sources_json(sources: tuple[Source, ...] | list[Source]) -> str:
    return json.dumps([asdict(s) for s in sources], ensure_ascii=False)
