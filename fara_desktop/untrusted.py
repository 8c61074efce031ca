"""Text that came from outside (a GGUF's name, a hub file name, a chat title) made safe to show or log.

Control characters (terminal escapes, carriage returns that rewrite a log line, bidirectional overrides that
reorder what a reader sees) are removed; length is capped so a 64 MiB "name" cannot flood a label or a log.
"""

from __future__ import annotations

import re

# C0 and C1 controls (ESC starts terminal escapes), DEL, and the bidirectional embedding/override/isolate marks.
_CONTROLS = re.compile(r"[\x00-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069]")
_CONTROLS_BUT_LINES = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def one_line(text: object, limit: int = 200) -> str:
    """A single line: controls (newlines included) become spaces; cut to ``limit`` characters with an ellipsis."""
    cleaned = " ".join(_CONTROLS.sub(" ", str(text)).split())
    return cleaned if len(cleaned) <= limit else cleaned[: limit - 1].rstrip() + "…"


def printable(text: object) -> str:
    """For a terminal: every control character except newline and tab is removed."""
    return _CONTROLS_BUT_LINES.sub("", str(text))
