"""Split a markdown reply into paragraphs and fenced code blocks.

Code gets its own widget and copy button. Prose is cut at blank lines so that, while a reply streams, only its
last paragraph is laid out again at each repaint: re-rendering the whole reply each time would make every token
cost more than the last.
"""

from __future__ import annotations

import itertools
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


_BLOCK_START = re.compile(r"^ {0,3}([-*+] |\d{1,9}[.)] |#{1,6}( |$)|>|\||```|~~~|[-=*_]{3,} *$)")
_ENDS_BLOCK = re.compile(r"^ {0,3}(#{1,6}( |$)|\||```|~~~|[-=*_]{3,} *$)|^( {4}|\t)")
LINE_SEPARATOR = "\u2028"


def keep_line_breaks(prose: str) -> str:
    """Markdown joins lines that a single newline separates; chat apps keep them (poems, addresses, steps written
    without list markers). A line that simply continues the one before is joined to it with a Unicode line
    separator, which markdown treats as text and Qt lays out as a line break inside the same paragraph (a
    markdown hard break would become a new paragraph in Qt). Lines that start a markdown block (list items,
    headings, quotes, tables, fences, rules), lines after a heading, table row, fence or rule, and indented code
    keep their newline, so lists, tables and headings stay markdown."""
    lines = prose.split("\n")
    out = [lines[0]]
    for previous, line in itertools.pairwise(lines):
        joins = (
            line.strip()
            and previous.strip()
            and not _BLOCK_START.match(line)
            and not _ENDS_BLOCK.match(previous)
            and not line.startswith(("    ", "\t"))
        )
        if joins:
            out[-1] += LINE_SEPARATOR + line
        else:
            out.append(line)
    return "\n".join(out)


SOFT_BREAK = "\u200b"  # zero-width space: a place a line may break, never shown, taken out of what is copied
LONG_RUN = 30  # characters without a space beyond which a word (a URL, a hash, code) may break anywhere
BREAK_EVERY = 16
_LONG_RUN = re.compile(rf"\S{{{LONG_RUN + 1},}}")
_TAG = re.compile(r"(<[^>]*>)")
_HTML_UNIT = re.compile(r"&#?\w+;|.", re.DOTALL)  # an entity is one character of the text


def soft_breaks(text: str, html: bool = False) -> str:
    """``text`` with a place to break every ``BREAK_EVERY`` characters of any word longer than ``LONG_RUN``: Qt
    wraps only at spaces, so one long URL made the chat column wider than the window (its lines cut at the right
    edge, the buttons pushed out of sight). ``html``: HTML that Qt wrote — only its text is touched (never a tag,
    nor the link in it), an entity kept whole."""
    if not _LONG_RUN.search(text):
        return text
    if html:
        return "".join(part if part.startswith("<") else _broken(_HTML_UNIT.findall(part)) for part in _TAG.split(text))
    return _broken(list(text))


def _broken(units: list[str]) -> str:
    out: list[str] = []
    run: list[str] = []

    def end_run() -> None:
        if len(run) > LONG_RUN:
            out.append(SOFT_BREAK.join("".join(run[i : i + BREAK_EVERY]) for i in range(0, len(run), BREAK_EVERY)))
        else:
            out.extend(run)
        run.clear()

    for unit in units:
        if unit.isspace():
            end_run()
            out.append(unit)
        else:
            run.append(unit)
    end_run()
    return "".join(out)


def without_soft_breaks(text: str) -> str:
    return text.replace(SOFT_BREAK, "")
