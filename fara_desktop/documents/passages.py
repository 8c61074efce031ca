"""Cutting extracted text into passages: about ``TARGET_CHARS`` each (≈ 200 tokens), ending at a line break where
possible, each knowing its page or its first and last line, so a citation points at the right place."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from fara_desktop.documents.extract import Section

TARGET_CHARS = 800
MAX_CHARS = 1600


@dataclass(frozen=True)
class Passage:
    text: str
    page: int | None
    line_start: int | None
    line_end: int | None


def passages(sections: Iterable[Section]) -> Iterator[Passage]:
    for section in sections:
        yield from _cut(section)


def _cut(section: Section) -> Iterator[Passage]:
    lines = section.text.splitlines(keepends=True)
    buffer: list[str] = []
    size = 0
    first_line = section.line
    line = section.line
    for text in lines:
        while len(text) > MAX_CHARS:  # one enormous line (minified code, a PDF page without breaks)
            head, text = text[:TARGET_CHARS], text[TARGET_CHARS:]
            if buffer:
                yield _passage(buffer, section.page, first_line, line - 1 if line is not None else None)
                buffer, size, first_line = [], 0, line
            yield Passage(head.strip(), section.page, line, line)
        buffer.append(text)
        size += len(text)
        if size >= TARGET_CHARS:
            yield _passage(buffer, section.page, first_line, line)
            buffer, size = [], 0
            first_line = line + 1 if line is not None else None
        line = line + 1 if line is not None else None
    if buffer and "".join(buffer).strip():
        yield _passage(buffer, section.page, first_line, line - 1 if line is not None else None)


def _passage(buffer: list[str], page: int | None, first: int | None, last: int | None) -> Passage:
    return Passage("".join(buffer).strip(), page, first, last)
