"""Text that came from outside (a GGUF's name, a hub file name, a chat title) made safe to show or log.

Control characters (terminal escapes, carriage returns that rewrite a log line, bidirectional overrides that
reorder what a reader sees) are removed; length is capped so a 64 MiB "name" cannot flood a label or a log.
"""

from __future__ import annotations

import re
import unicodedata

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


# Characters a reader cannot see, or that move what they see: controls but newline and tab, format characters
# (bidirectional marks, zero-width joiners and spaces, the BOM), line and paragraph separators (a box that wraps
# at U+2028 hides what follows below its edge), private-use and unassigned ones, and the Hangul fillers that render
# as blank space.
_BLANK_LOOKING = frozenset("\u115f\u1160\u3164\uffa0\u2800")


def _hidden(char: str) -> bool:
    if char in "\n\t":
        return False
    return unicodedata.category(char) in ("Cc", "Cf", "Zl", "Zp", "Co", "Cs", "Cn") or char in _BLANK_LOOKING


def with_hidden_shown(text: str) -> str:
    """``text`` with every character a reader could not see (or that reorders what they see) written as its
    escape, ``\\u202e``: what is shown is then all there is. Inside a JSON string the escape means the very same
    character, so JSON shown this way reads back to exactly the value it shows."""
    return "".join(_escape(c) if _hidden(c) else c for c in text)


def _escape(char: str) -> str:
    code = ord(char)
    if code <= 0xFFFF:
        return f"\\u{code:04x}"
    code -= 0x10000  # beyond the first plane: a surrogate pair, as JSON writes it
    return f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}"
