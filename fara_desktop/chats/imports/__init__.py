"""Conversations from other apps: ChatGPT's data export, Open WebUI's and LM Studio's chat files, and our own.

The format is recognised from the file's shape; the whole file is validated before anything is written, and a
file with one bad value is refused whole (``ImportRefusedError``) with the first problem found.
"""

from __future__ import annotations

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
