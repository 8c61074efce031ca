"""Conversations from other apps: ChatGPT's data export, Open WebUI's and LM Studio's chat files, and our own.

The format is recognised from the file's shape; the whole file is validated before anything is written, and a
file with one bad value is refused whole (``ImportRefusedError``) with the first problem found.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable
from typing import Any

from fara_desktop.chats.export_format import EXPORT_FORMAT, ImportedConversation, ImportRefusedError, validate_export
from fara_desktop.chats.imports import chatgpt, lm_studio, open_webui

FORMAT_NAMES = ("Fara Desktop", "ChatGPT (conversations.json)", "Open WebUI", "LM Studio")


def read_conversations(data: Any) -> tuple[str, list[ImportedConversation]]:
    """(the format's name, its validated conversations)."""
    if isinstance(data, dict) and data.get("format") == EXPORT_FORMAT:
        return FORMAT_NAMES[0], [validate_export(data)]
    if chatgpt.looks_like(data):
        return FORMAT_NAMES[1], chatgpt.read(data)
    if open_webui.looks_like(data):
        return FORMAT_NAMES[2], open_webui.read(data)
    if lm_studio.looks_like(data):
        return FORMAT_NAMES[3], lm_studio.read(data)
    raise ImportRefusedError(
        "This file is not a conversation export Fara Desktop can read (" + ", ".join(FORMAT_NAMES) + ")."
    )


# A JSON string, unrolled so that the regex engine runs through it without a step per character.
_JSON_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"')
# Objects and lists a file may hold: an export of 100,000 messages (the most accepted) holds fewer than this, and
# this many empty objects take about 150 MB as Python objects (33 million of them took 2.5 GB before this check).
MAX_CONTAINERS = 2_000_000


def check_shape(data: bytes) -> None:
    """Refuse, before ``json.loads`` builds anything, a file with more objects and lists than a conversation export
    holds: the strings are blanked out (in C, one pass) and the brackets left are counted."""
    skeleton = _JSON_STRING.sub(b'""', data)
    containers = skeleton.count(b"{") + skeleton.count(b"[")
    if containers > MAX_CONTAINERS:
        raise ImportRefusedError(
            f"The file holds {containers:,} objects and lists; a conversation export holds at most {MAX_CONTAINERS:,}."
        )


def read_import_file(fd: int, limit: int, *, emit: Callable[[Any], None]) -> tuple[str, list[ImportedConversation]]:
    """The sandbox's job for an import: at most ``limit`` bytes from ``fd``, shape-checked, parsed, validated."""
    blocks: list[bytes] = []
    left = limit + 1
    while left > 0 and (block := os.read(fd, min(left, 1 << 20))):
        blocks.append(block)
        left -= len(block)
    data = b"".join(blocks)
    if len(data) > limit:
        raise ImportRefusedError(f"The file is larger than {limit // (1024 * 1024):,} MB.")
    check_shape(data)
    try:
        parsed = json.loads(data)
    except RecursionError as exc:
        raise ImportRefusedError("The file is nested too deeply to be a conversation.") from exc
    except ValueError as exc:
        raise ImportRefusedError(f"The file could not be read as JSON: {str(exc)[:200]}") from exc
    del data, blocks
    try:
        return read_conversations(parsed)
    except RecursionError as exc:
        raise ImportRefusedError("The file is nested too deeply to be a conversation.") from exc
