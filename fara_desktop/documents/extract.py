"""Text out of a user's files, with where each piece came from (page of a PDF, line of a text file).

Parsers, each well kept and pure Python where it matters: ``pypdf`` for PDF (no native library to crash the
process on a hostile file; says when a file is encrypted), ``python-docx`` for DOCX (the reference reader of
the format in Python), lxml's HTML parser for HTML (libxml2, used as a stream of events: no tree is built, so
markup that nests without end costs no more than its text), and plain reading for text, Markdown and source code.

``read_document`` is the job the indexer runs in the sandbox (``fara_desktop.system.sandbox``): it reads from one
descriptor at most the size found when the file was listed, hashes exactly what it read, and sends passages back
in batches. Within the sandbox's budget it also refuses early what is known to be hostile: a DOCX part that
inflates more than ``MAX_INFLATE_RATIO`` times, and text beyond ``max_chars``. A file that cannot be read raises
``UnreadableFile`` with the reason; it never stops the rest of a collection.
"""

from __future__ import annotations

import hashlib
import io
import logging
import os
import zipfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from fara_desktop.documents.passages import Passage, PassageCutter, Section, passages
from fara_desktop.vocabulary.errors import FaraError

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
MB = 1024 * 1024
MAX_FILE_BYTES = 512 * MB  # larger files are listed as unreadable (too large), not read
MAX_PARSED_BYTES = 256 * MB  # PDF, DOCX and HTML are read whole by their parsers
# Apache POI's default: a zip part may not inflate more than 100 times (its MIN_INFLATE_RATIO of 0.01). Real
# DOCX parts inflate 5–30 times; a zip bomb, thousands.
MAX_INFLATE_RATIO = 100
INFLATE_CHECK_ABOVE = 1 * MB  # small parts (styles, settings) may inflate more without costing anything
MAX_DOCX_UNCOMPRESSED = 256 * MB
MIN_TEXT_CHARS_BUDGET = 64 * MB  # a document's text may be this long whatever its size (a PDF's can outgrow its file)
SMALL_FILE_TEXT_CHARS = 4 * MB  # ... but a small file's text at most this, or ``TEXT_PER_BYTE`` characters a byte
TEXT_PER_BYTE = 64  # (two 300-byte files once filled a collection with 904 MiB, each within its 64 M characters)
BLOCK_BYTES = 1 * MB
PASSAGES_PER_MESSAGE = 256


class UnreadableFile(FaraError):
    """The file could not be turned into text; the message says why (damaged, encrypted, not text, too large)."""


def supported(path: Path) -> bool:
    return path.suffix.lower() in SUPPORTED_SUFFIXES


def size_limit(suffix: str) -> int:
    """The largest file of this kind that is read at all."""
    return MAX_FILE_BYTES if suffix.lower() in TEXT_SUFFIXES else MAX_PARSED_BYTES


def text_budget(size: int) -> int:
    """How many characters of text a file of ``size`` bytes may give: its size, or up to 64 M characters when its
    text can outgrow it — but never more than 64 characters a byte of it (at least 4 M)."""
    return max(size, min(MIN_TEXT_CHARS_BUDGET, max(SMALL_FILE_TEXT_CHARS, size * TEXT_PER_BYTE)))


class _BoundedReader:
    """Reads one descriptor from its start, at most ``limit`` bytes, hashing what it reads."""

    def __init__(self, fd: int, limit: int) -> None:
        self._fd = fd
        self._left = limit
        self.digest = hashlib.sha256()
        self.bytes_read = 0
        os.lseek(fd, 0, os.SEEK_SET)

    def read(self, size: int = BLOCK_BYTES) -> bytes:
        if self._left <= 0:
            return b""
        try:
            data = os.read(self._fd, min(size, self._left))
        except BlockingIOError:  # a regular file never blocks; something else in its place is not read
            raise UnreadableFile("cannot be read (it is not a regular file)") from None
        except OSError as exc:
            raise UnreadableFile(f"cannot be read ({exc.strerror or exc})") from exc
        self._left -= len(data)
        self.bytes_read += len(data)
        self.digest.update(data)
        return data

    def read_all(self) -> bytes:
        blocks = []
        while block := self.read():
            blocks.append(block)
        return b"".join(blocks)


class _Output:
    """Counts the characters of the passages sent and refuses a file whose text passes its budget."""

    def __init__(self, emit: Callable[[Any], None], max_chars: int) -> None:
        self._emit = emit
        self._max_chars = max_chars
        self._chars = 0
        self._batch: list[Passage] = []

    def add(self, found: Iterator[Passage]) -> None:
        for passage in found:
            self._chars += len(passage.text)
            if self._chars > self._max_chars:
                raise UnreadableFile(f"holds more than {self._max_chars:,} characters of text (its budget here)")
            self._batch.append(passage)
            if len(self._batch) >= PASSAGES_PER_MESSAGE:
                self.flush()

    def flush(self) -> None:
        if self._batch:
            self._emit(self._batch)
            self._batch = []


def read_document(fd: int, suffix: str, limit: int, max_chars: int, *, emit: Callable[[Any], None]) -> tuple[str, int]:
    """The sandbox's job: passages of the file open at ``fd`` (a ``suffix`` file), sent through ``emit`` in lists;
    returns (sha256 of the bytes read, how many were read: at most ``limit``)."""
    reader = _BoundedReader(fd, limit)
    output = _Output(emit, max_chars)
    suffix = suffix.lower()
    if suffix == ".pdf":
        output.add(passages(_pdf(reader.read_all())))
    elif suffix == ".docx":
        output.add(passages(_docx(reader.read_all())))
    elif suffix in HTML_SUFFIXES:
        output.add(_html(reader))
    else:
        output.add(_text(reader))
    output.flush()
    return reader.digest.hexdigest(), reader.bytes_read


def _text(reader: _BoundedReader) -> Iterator[Passage]:
    head = reader.read(8192)
    if b"\0" in head:
        raise UnreadableFile("is binary, not text")
    import codecs

    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    cutter = PassageCutter(line=1)
    block = head
    while block:
        yield from cutter.feed(decoder.decode(block))
        block = reader.read()
    yield from cutter.feed(decoder.decode(b"", final=True))
    yield from cutter.finish()


def _pdf(data: bytes) -> Iterator[Section]:
    from pypdf import PdfReader
    from pypdf.errors import PyPdfError

    try:
        reader = PdfReader(io.BytesIO(data), strict=False)
        if reader.is_encrypted:
            raise UnreadableFile("is encrypted (password-protected)")
        pages = list(reader.pages)
    except UnreadableFile:
        raise
    except (PyPdfError, ValueError, KeyError, TypeError, AttributeError, IndexError, RecursionError, OSError) as exc:
        raise UnreadableFile(f"is a damaged PDF ({type(exc).__name__})") from exc
    readable = 0
    extracted: set[Any] = set()  # content streams already read: pages may share one (a 2 MB one, 20 times)
    for number, page in enumerate(pages, start=1):
        contents = _contents_key(page)
        if contents is not None and contents in extracted:
            readable += 1
            continue
        try:
            text = page.extract_text() or ""
        except MemoryError:
            raise
        except Exception as exc:  # one damaged page: the others are still worth having
            log.info("page %d of a PDF could not be read (%s)", number, type(exc).__name__)
            continue
        if contents is not None:
            extracted.add(contents)
        readable += 1
        if text.strip():
            yield Section(text, page=number)
    if pages and not readable:
        raise UnreadableFile("is a damaged PDF (no page could be read)")


def _contents_key(page: Any) -> Any:
    """Which stream objects a page draws (None when they are not shared objects, or cannot be told)."""
    try:
        raw = page.raw_get("/Contents")
    except (KeyError, AttributeError):
        return None
    refs = raw if isinstance(raw, list) else [raw]
    keys = []
    for ref in refs:
        idnum = getattr(ref, "idnum", None)
        if idnum is None:
            return None
        keys.append((idnum, getattr(ref, "generation", 0)))
    return tuple(keys) or None


def check_zip_parts(data: bytes) -> None:
    """Refuse a zip (DOCX) whose parts would inflate to more than we read, before any part is opened."""
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            total = 0
            for part in archive.infolist():
                total += part.file_size
                ratio = part.file_size / max(part.compress_size, 1)
                if part.file_size > INFLATE_CHECK_ABOVE and ratio > MAX_INFLATE_RATIO:
                    raise UnreadableFile(
                        f"is a zip bomb (a part inflates {ratio:,.0f} times; real documents inflate less than "
                        f"{MAX_INFLATE_RATIO})"
                    )
                if total > MAX_DOCX_UNCOMPRESSED:
                    raise UnreadableFile(f"inflates to more than {MAX_DOCX_UNCOMPRESSED // MB} MB")
    except zipfile.BadZipFile as exc:
        raise UnreadableFile(f"is a damaged DOCX file ({type(exc).__name__})") from exc


LINES_PER_SECTION = 400


def _docx(data: bytes) -> Iterator[Section]:
    from docx import Document
    from docx.opc.exceptions import PackageNotFoundError

    check_zip_parts(data)
    try:
        document = Document(io.BytesIO(data))
    except MemoryError:
        raise
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


_HIDDEN_TAGS = frozenset({"script", "style", "noscript", "template"})


class _HtmlText:
    """lxml parser target: the visible text, one line per text node, blank lines dropped (as a browser's reader
    would show it), fed to a cutter as it is parsed."""

    def __init__(self) -> None:
        self.cutter = PassageCutter(line=1)
        self.ready: list[Passage] = []
        self._hidden = 0
        self._line: list[str] = []

    def _break(self) -> None:
        if self._line:
            text = "".join(self._line).strip()
            self._line = []
            if text:
                self.ready.extend(self.cutter.feed(text + "\n"))

    def start(self, tag: Any, attrib: Any) -> None:
        self._break()
        if isinstance(tag, str) and tag.lower() in _HIDDEN_TAGS:
            self._hidden += 1

    def end(self, tag: Any) -> None:
        self._break()
        if isinstance(tag, str) and tag.lower() in _HIDDEN_TAGS and self._hidden:
            self._hidden -= 1

    def data(self, text: str) -> None:
        if self._hidden:
            return
        for number, piece in enumerate(text.split("\n")):
            if number:
                self._break()
            self._line.append(piece)

    def comment(self, text: str) -> None:
        pass

    def close(self) -> None:
        self._break()
        self.ready.extend(self.cutter.finish())


def _html(reader: _BoundedReader) -> Iterator[Passage]:
    from lxml import etree

    target = _HtmlText()
    parser = etree.HTMLParser(target=target, recover=True, no_network=True)
    try:
        while block := reader.read():
            parser.feed(block)
            yield from target.ready
            target.ready = []
        parser.close()
    except etree.Error as exc:
        raise UnreadableFile(f"is damaged HTML ({type(exc).__name__})") from exc
    yield from target.ready
