"""Split a markdown reply into prose and fenced code blocks, so code can get its own widget and copy button."""

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


def split_blocks(markdown: str) -> list[Block]:
    blocks: list[Block] = []
    position = 0
    while True:
        opening = _FENCE.search(markdown, position)
        if opening is None:
            break
        if opening.start() > position and markdown[position : opening.start()].strip():
            blocks.append(Block("text", markdown[position : opening.start()].strip("\n")))
        fence = opening.group(1)
        body_start = opening.end() + 1
        closing = re.compile(rf"^{re.escape(fence)}[ \t]*$", re.MULTILINE).search(markdown, body_start)
        if closing is None:
            blocks.append(Block("code", markdown[body_start:].rstrip("\n"), opening.group(2), closed=False))
            return blocks
        blocks.append(Block("code", markdown[body_start : closing.start()].rstrip("\n"), opening.group(2)))
        position = closing.end() + 1
    if markdown[position:].strip():
        blocks.append(Block("text", markdown[position:].strip("\n")))
    return blocks
