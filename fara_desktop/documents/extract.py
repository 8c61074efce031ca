"""Text out of a user's files, with where each piece came from (page of a PDF, line of a text file).

Parsers, each well kept and pure Python where it matters: ``pypdf`` for PDF (no native library to crash the
process on a hostile file; says when a file is encrypted), ``python-docx`` for DOCX (the reference reader of
the format in Python), Beautiful Soup (with lxml's parser) for HTML, and plain reading for text,
Markdown and source code. A file that cannot be read raises ``UnreadableFile`` with the reason; it never stops
the rest of a collection.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from fara_desktop.errors import FaraError

log = logging.getLogger(__name__)

_TEXT_SUFFIXES_WORDS = (
    ".txt .md .markdown .rst .org .tex .csv .tsv .log .ini .cfg .toml .yaml .yml .json .xml .py .pyi .c "
    ".h .cc .cpp .hpp .rs .go .java .kt .js .ts .tsx .jsx .rb .php .sh .bash .zsh .ps1 .sql .r .jl .lua "
    ".swift .scala .cs .m .css .scss .vue .svelte .dart .hs .ml .ex .exs .erl .clj .el .vim .cmake .mk "
    ".gradle .proto .graphql"
)
TEXT_SUFFIXES = frozenset(_TEXT_SUFFIXES_WORDS.split())
HTML_SUFFIXES = frozenset({".html", ".htm", ".xhtml"})
SUPPORTED_SUFFIXES = TEXT_SUFFIXES | HTML_SUFFIXES | {".pdf", ".docx"}
MAX_FILE_BYTES = 512 * 1024 * 1024  # larger files are listed as unreadable (too large), not read


class UnreadableFile(FaraError):
    """The file could not be turned into text; the message says why (damaged, encrypted, not text, too large)."""


@dataclass(frozen=True)
class Section:
    """A run of text and where it starts: ``page`` (PDF, 1-based) or ``line`` (1-based line of a text file)."""

    text: str
    page: int | None = None
    line: int | None = None


def supported(path: Path) -> bool:
    return path.suffix.lower() in SUPPORTED_SUFFIXES


def sections(path: Path) -> Iterator[Section]:
    """The file's text, in order. Text files are read a block of lines at a time (a 100 MB log is not loaded whole)."""
    suffix = path.suffix.lower()
    try:
        size = path.stat().st_size
    except OSError as exc:
        raise UnreadableFile(f"cannot be opened ({exc.strerror or exc})") from exc
    if size > MAX_FILE_BYTES:
        raise UnreadableFile(f"larger than {MAX_FILE_BYTES // (1024 * 1024)} MB")
    if suffix == ".pdf":
        yield from _pdf(path)
    elif suffix == ".docx":
        yield from _docx(path)
    elif suffix in HTML_SUFFIXES:
        yield from _html(path)
    else:
        yield from _text(path)


LINES_PER_SECTION = 400


def _text(path: Path) -> Iterator[Section]:
    try:
        with open(path, "rb") as handle:
            head = handle.read(8192)
            if b"\0" in head:
                raise UnreadableFile("is binary, not text")
            handle.seek(0)
            lines: list[str] = []
            first = 1
            for number, raw in enumerate(handle, start=1):
                lines.append(raw.decode("utf-8", errors="replace"))
                if len(lines) >= LINES_PER_SECTION:
                    yield Section("".join(lines), line=first)
                    lines, first = [], number + 1
            if lines:
                yield Section("".join(lines), line=first)
    except OSError as exc:
        raise UnreadableFile(f"cannot be read ({exc.strerror or exc})") from exc


def _pdf(path: Path) -> Iterator[Section]:
    from pypdf import PdfReader
    from pypdf.errors import PyPdfError

    try:
        reader = PdfReader(str(path), strict=False)
        if reader.is_encrypted:
            raise UnreadableFile("is encrypted (password-protected)")
        pages = list(reader.pages)
    except UnreadableFile:
        raise
    except (PyPdfError, ValueError, KeyError, TypeError, AttributeError, IndexError, RecursionError, OSError) as exc:
        raise UnreadableFile(f"is a damaged PDF ({type(exc).__name__})") from exc
    readable = 0
    for number, page in enumerate(pages, start=1):
        try:
            text = page.extract_text() or ""
        except Exception as exc:  # one damaged page: the others are still worth having
            log.info("page %d of a PDF could not be read (%s)", number, type(exc).__name__)
            continue
        readable += 1
        if text.strip():
            yield Section(text, page=number)
    if pages and not readable:
        raise UnreadableFile("is a damaged PDF (no page could be read)")


def _docx(path: Path) -> Iterator[Section]:
    import zipfile

    from docx import Document
    from docx.opc.exceptions import PackageNotFoundError

    try:
        document = Document(str(path))
    except (PackageNotFoundError, zipfile.BadZipFile, KeyError, ValueError, OSError) as exc:
        raise UnreadableFile(f"is a damaged DOCX file ({type(exc).__name__})") from exc
    except Exception as exc:  # lxml errors on a hostile XML part
        raise UnreadableFile(f"is a damaged DOCX file ({type(exc).__name__})") from exc
    paragraphs = [p.text for p in document.paragraphs]
    for table in document.tables:
        for row in table.rows:
            paragraphs.append(" | ".join(cell.text for cell in row.cells))
    # A DOCX has no pages or lines of its own: paragraph numbers stand in for lines.
    for start in range(0, len(paragraphs), LINES_PER_SECTION):
        block = paragraphs[start : start + LINES_PER_SECTION]
        yield Section("\n".join(block) + "\n", line=start + 1)


def _html_parser() -> str:
    """lxml's parser when installed (python-docx brings it; several times faster), else the standard library's."""
    try:
        import lxml  # noqa: F401
    except ImportError:
        return "html.parser"
    return "lxml"


_HTML_PARSER = _html_parser()


def _html(path: Path) -> Iterator[Section]:
    from bs4 import BeautifulSoup

    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise UnreadableFile(f"cannot be read ({exc.strerror or exc})") from exc
    soup = BeautifulSoup(raw, _HTML_PARSER)
    for hidden in soup(["script", "style", "noscript", "template"]):
        hidden.decompose()
    text = soup.get_text("\n")
    lines = [line.strip() for line in text.splitlines()]
    cleaned = "\n".join(line for line in lines if line) + "\n"
    yield Section(cleaned, line=1)
