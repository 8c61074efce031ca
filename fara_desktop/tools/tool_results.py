"""A tool's result as the text the model reads and the transcript shows: untrusted, like a document or a reply.

What a server sends back is a stranger's output. Controls and bidirectional overrides are removed; images, audio
and binary resources become a short note (nothing is fetched or shown from them); the text is cut at
``MAX_RESULT_CHARS``, with a note giving its full size, because every character is a prompt token a CPU reads.
Control-token text (``<|im_start|>``) is neutralised later, when the engine renders the prompt, as for any message.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from fara_desktop.text.untrusted import printable

MAX_RESULT_CHARS = 8_000  # about 2,000 tokens: ~10 s of prompt reading for a 1B model on a 2-core laptop


@dataclass(frozen=True)
class ToolResult:
    """A call's outcome: ``text`` for the model and the transcript; ``full_chars`` before it was cut."""

    text: str
    is_error: bool = False
    full_chars: int = 0

    @property
    def cut(self) -> bool:
        return self.full_chars > len(self.text)


def untrusted_result_text(text: str) -> tuple[str, int]:
    """``text`` cleaned and cut: (what is kept, its full length)."""
    full = len(text)
    kept = printable(text[: MAX_RESULT_CHARS + 1024])[:MAX_RESULT_CHARS]
    if full > MAX_RESULT_CHARS:
        kept += f"\n[… cut: the tool returned {full:,} characters; the first {MAX_RESULT_CHARS:,} are kept]"
    return kept, full


def error_result(message: str) -> ToolResult:
    return ToolResult(message, is_error=True, full_chars=len(message))


def _part(item: Any) -> str:
    kind = getattr(item, "type", "")
    if kind == "text":
        return str(getattr(item, "text", ""))
    if kind in ("image", "audio"):
        size = len(getattr(item, "data", "") or "") * 3 // 4
        return f"[{kind}: {getattr(item, 'mime_type', getattr(item, 'mimeType', '?'))}, {size:,} bytes — not shown]"
    if kind == "resource":
        resource = getattr(item, "resource", None)
        text = getattr(resource, "text", None)
        return str(text) if isinstance(text, str) else f"[resource: {getattr(resource, 'uri', '?')} — not shown]"
    if kind == "resource_link":
        return f"[link: {getattr(item, 'uri', '?')}]"
    return f"[{kind or 'unknown'} content — not shown]"


def result_of(result: Any) -> ToolResult:
    """An MCP ``CallToolResult`` as a ``ToolResult``."""
    parts = [_part(item) for item in (getattr(result, "content", None) or [])]
    structured = getattr(result, "structured_content", getattr(result, "structuredContent", None))
    if not parts and structured is not None:
        parts = [json.dumps(structured, ensure_ascii=False)]
    text, full = untrusted_result_text("\n".join(parts))
    return ToolResult(text, bool(getattr(result, "is_error", getattr(result, "isError", False))), full)
