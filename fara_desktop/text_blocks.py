"""Split a markdown reply into paragraphs and fenced code blocks.

Code gets its own widget and copy button. Prose is cut at blank lines so that, while a reply streams, only its
last paragraph is laid out again at each repaint: re-rendering the whole reply each time would make every token
cost more than the last.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_FENCE = re.compile(r"^(```|~~~)[ \t]*([\w+#.-]*)[^\n]*$", re.MULTILINE)


@dataclass(frozen=True)
class Block:
    kind: str  # "text" or "code"
    text: str
    language: str = ""
    closed: bool = True  # False for a code block still being streamed


_PARAGRAPH_BREAK = re.compile(r"\n[ \t]*\n(?=\S)")


def _prose(text: str) -> list[Block]:
    return [Block("text", part.strip("\n")) for part in _PARAGRAPH_BREAK.split(text) if part.strip()]


def split_blocks(markdown: str) -> list[Block]:
    blocks: list[Block] = []
    position = 0
    while True:
        opening = _FENCE.search(markdown, position)
        if opening is None:
            break
        blocks.extend(_prose(markdown[position : opening.start()]))
        fence = opening.group(1)
        body_start = opening.end() + 1
        closing = re.compile(rf"^{re.escape(fence)}[ \t]*$", re.MULTILINE).search(markdown, body_start)
        if closing is None:
            blocks.append(Block("code", markdown[body_start:].rstrip("\n"), opening.group(2), closed=False))
            return blocks
        blocks.append(Block("code", markdown[body_start : closing.start()].rstrip("\n"), opening.group(2)))
        position = closing.end() + 1
    blocks.extend(_prose(markdown[position:]))
    return blocks
