"""Index (or update) a collection from folders and files: only new and changed files are read again.

A file is unchanged when its size and modification time match the last scan; when only the time changed, its
sha256 decides. Files that disappeared are forgotten. Each file is committed on its own, so a search sees the
collection grow and an interrupted scan keeps what it did. ``pause`` and ``yield_to`` let the app stop it and
give the CPU to a reply being generated; the indexing thread also runs at a lower priority than the window's.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import stat
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from fara_desktop.documents.extract import (
    MAX_PARSED_BYTES,
    MB,
    MIN_TEXT_CHARS_BUDGET,
    UnreadableFile,
    read_document,
    size_limit,
    supported,
    text_budget,
)
from fara_desktop.documents.index import DocumentIndex, FileRecord
from fara_desktop.documents.passages import Passage
from fara_desktop.files.regular import LinkRefusedError, NotARegularFileError, open_regular
from fara_desktop.system.sandbox import (
    Budget,
    BudgetExceededError,
    Sandbox,
    SandboxFailedError,
    SandboxStoppedError,
    allowed_classes,
)

log = logging.getLogger(__name__)

SKIPPED_FOLDERS = frozenset(
    {".git", ".hg", ".svn", "node_modules", "__pycache__", ".venv", "venv", ".tox", ".mypy_cache"}
)


@dataclass
class IndexProgress:
    """How far a scan is: files seen of those found, passages written, bytes read."""

    files_total: int = 0
    files_done: int = 0
    passages: int = 0
    bytes_read: int = 0
    started: float = field(default_factory=time.perf_counter)

    @property
    def seconds_left(self) -> float | None:
        if not self.files_done or not self.files_total:
            return None
        elapsed = time.perf_counter() - self.started
        return elapsed / self.files_done * (self.files_total - self.files_done)


@dataclass
class IndexReport:
    """What a scan did."""

    collection: str
    files: int = 0  # files in the collection after the scan
    indexed: int = 0  # files read this time (new or changed)
    unchanged: int = 0
    removed: int = 0
    passages: int = 0  # passages written this time
    bytes_read: int = 0
    unreadable: list[tuple[str, str]] = field(default_factory=list)  # (path, reason)
    seconds: float = 0.0


def candidate_files(roots: Sequence[Path]) -> Iterator[tuple[Path, os.stat_result]]:
    """Regular files under ``roots`` that a parser reads, with what ``lstat`` found when they were listed (a FIFO,
    a device or a link is never listed; hidden folders, version control and virtual environments are skipped)."""
    for root in roots:
        if root.is_file():
            if supported(root):
                with contextlib.suppress(OSError):
                    yield root, root.stat()  # a file the user chose (a link they chose is followed)
            continue
        for folder, dirs, files in os.walk(root, followlinks=False):
            dirs[:] = sorted(d for d in dirs if d not in SKIPPED_FOLDERS and not d.startswith("."))
            for name in sorted(files):
                path = Path(folder) / name
                if not supported(path) or name.startswith("."):
                    continue
                try:
                    listed = os.lstat(path)
                except OSError:
                    continue
                if stat.S_ISREG(listed.st_mode):
                    yield path, listed


def open_as_listed(path: Path, listed: os.stat_result | None = None) -> int:
    """A descriptor for the regular file at ``path``, and the very file that was listed there (``listed``: its
    ``lstat``). ``O_NOFOLLOW`` guards only the last component: a listed sub-folder swapped for a link to elsewhere
    between the listing and the open would hand over another file under the shared folder's path; its device and
    inode tell. Raises ``OSError`` (``LinkRefusedError``, ``NotARegularFileError``, ``FileChangedError``)."""
    fd = open_regular(path, follow_links=False)
    if listed is not None:
        opened = os.fstat(fd)
        if (opened.st_dev, opened.st_ino) != (listed.st_dev, listed.st_ino):
            os.close(fd)
            raise FileChangedError(f"{path.name} is not the file that was listed")
    return fd


class FileChangedError(OSError):
    """Another file is at the path than the one listed (a folder on the way was swapped meanwhile)."""


def sha256_of(path: Path, limit: int, listed: os.stat_result | None = None) -> str:
    """The hash of the first ``limit`` bytes of a regular file (a link or a FIFO in its place is refused, and so is
    another file than ``listed``)."""
    digest = hashlib.sha256()
    fd = open_as_listed(path, listed)
    try:
        left = limit
        while left > 0 and (block := os.read(fd, min(1 << 20, left))):
            digest.update(block)
            left -= len(block)
    finally:
        os.close(fd)
    return digest.hexdigest()


def document_budget(size: int) -> Budget:
    """What reading one file of ``size`` bytes may cost: generous for real documents (a 300-page PDF takes a few
    seconds of CPU and a few hundred MB), far below what the hostile ones in the tests cost."""
    return Budget(
        cpu_seconds=min(600.0, 30.0 + 2.0 * size / MB),
        memory_bytes=1024 * MB + 2 * min(size, MAX_PARSED_BYTES),
        output_bytes=4 * text_budget(size) + 64 * MB,
    )


def index_collection(
    index: DocumentIndex,
    name: str,
    roots: Sequence[Path] = (),
    on_progress: Callable[[IndexProgress], None] | None = None,
    pause: threading.Event | None = None,
    yield_to: Callable[[], bool] | None = None,
    should_stop: Callable[[], bool] | None = None,
    budget_for: Callable[[int], Budget] = document_budget,
) -> IndexReport:
    """Add ``roots`` to the collection ``name`` (created if new) and bring it up to date with all its roots.
    ``pause``: while set, the scan waits; ``yield_to()``: while true (a reply is being generated), it waits too.
    Each file is read in a sandboxed child process within ``budget_for(its size)``."""
    started = time.perf_counter()
    collection = index.collection_id(name, create=True)
    assert collection is not None
    if roots:
        index.add_roots(collection, [r.resolve() for r in roots])
    known = index.files(collection)
    found = list(candidate_files([Path(p) for p in index.roots(collection)]))
    progress = IndexProgress(files_total=len(found))
    report = IndexReport(name)
    seen: set[str] = set()
    # The collection as a whole: what this scan reads may give at most this much text (many small files that each
    # stay within their own budget must not fill the disk together)
    to_read = sum(listed.st_size for path, listed in found if str(path) not in known)
    text_left = COLLECTION_TEXT_PER_BYTE * (to_read + sum(r.size for r in known.values())) + MIN_TEXT_CHARS_BUDGET
    reading = _Reading(Sandbox(nice=READER_NICE), budget_for, should_stop, text_left)
    with reading.sandbox, index.batch() as commit:
        finished = _scan(
            index, collection, found, known, seen, report, progress, commit, on_progress, pause, yield_to, reading
        )
        if finished:
            gone = [p for p in known if p not in seen]
            if gone:
                index.forget_files(collection, gone)
            report.removed = len(gone)
    report.files = len(index.files(collection))
    report.unreadable = index.unreadable(collection)
    report.seconds = time.perf_counter() - started
    return report


COMMIT_EVERY_S = 0.5


def _scan(
    index: DocumentIndex,
    collection: int,
    found: list[tuple[Path, os.stat_result]],
    known: dict[str, FileRecord],
    seen: set[str],
    report: IndexReport,
    progress: IndexProgress,
    commit: Callable[[], None],
    on_progress: Callable[[IndexProgress], None] | None,
    pause: threading.Event | None,
    yield_to: Callable[[], bool] | None,
    reading: _Reading,
) -> bool:
    """True when every file was looked at (only then are files that disappeared forgotten)."""
    should_stop = reading.should_stop
    last_commit = time.perf_counter()
    for path, stat_at_listing in found:
        if _must_wait(pause, yield_to):
            commit()  # what is done is visible while the scan waits
            _wait_while(pause, yield_to, should_stop)
        if should_stop is not None and should_stop():
            return False
        _wait_while(pause, yield_to, should_stop)
        if should_stop is not None and should_stop():
            break
        key = str(path)
        seen.add(key)
        listed = stat_at_listing
        record = known.get(key)
        if record is not None and record.size == listed.st_size and record.mtime_ns == listed.st_mtime_ns:
            report.unchanged += 1
        elif (
            record is not None and record.size == listed.st_size and record.sha256 and _same_hash(path, record, listed)
        ):
            index.touch_file(record.id, listed.st_mtime_ns)
            report.unchanged += 1
        elif not _index_file(index, collection, path, listed, report, reading):
            return False
        progress.files_done += 1
        progress.passages = report.passages
        progress.bytes_read = report.bytes_read
        if time.perf_counter() - last_commit >= COMMIT_EVERY_S:
            commit()
            last_commit = time.perf_counter()
        if on_progress is not None:
            on_progress(progress)
    return True


def _same_hash(path: Path, record: FileRecord, listed: os.stat_result) -> bool:
    try:
        return sha256_of(path, record.size, listed) == record.sha256
    except OSError:
        return False


COLLECTION_TEXT_PER_BYTE = 8  # a collection's text: at most this many characters a byte of its files, and 64 M more
READER_NICE = 10  # the reader process gives way to the window and to llama.cpp, like the indexing thread


@dataclass
class _Reading:
    """How files are read in one scan: the sandbox, each file's budget, and the caller's stop."""

    sandbox: Sandbox
    budget_for: Callable[[int], Budget]
    should_stop: Callable[[], bool] | None
    text_left: int = 1 << 62  # characters the collection may still take in this scan


def read_passages(
    reading: _Reading, path: Path, listed_size: int, listed: os.stat_result | None = None
) -> tuple[list[Passage], str, int]:
    """(passages, sha256, bytes read) of one file: opened once, without following a link, refused unless it is a
    regular file and the very file that was listed, and read (in the sandbox) to at most the size it had when it
    was listed."""
    suffix = path.suffix.lower()
    if listed_size > size_limit(suffix):
        raise UnreadableFile(f"larger than {size_limit(suffix) // MB} MB")
    try:
        fd = open_as_listed(path, listed)
    except LinkRefusedError as exc:
        raise UnreadableFile("is a link now (it was a file when listed); links are not followed") from exc
    except NotARegularFileError as exc:
        raise UnreadableFile("is not a regular file now (a pipe, device or socket took its place)") from exc
    except FileChangedError as exc:
        raise UnreadableFile("is another file than the one listed (a folder on its way was replaced)") from exc
    except OSError as exc:
        raise UnreadableFile(f"cannot be opened ({exc.strerror or exc})") from exc
    found: list[Passage] = []
    max_chars = min(text_budget(listed_size), reading.text_left)
    if max_chars <= 0:
        os.close(fd)
        raise UnreadableFile("was not read: the collection already holds as much text as its files' size allows")
    try:
        result = reading.sandbox.run(
            read_document,
            fd,
            (suffix, listed_size, max_chars),
            reading.budget_for(listed_size),
            allowed=PASSAGE_CLASSES,
            on_item=lambda item: found.extend(checked_passages(item)),
            should_stop=reading.should_stop,
            refusal=UnreadableFile,
        )
    except (BudgetExceededError, SandboxFailedError) as exc:
        raise UnreadableFile(str(exc)) from exc
    finally:
        os.close(fd)
    digest, bytes_read = checked_result(result, listed_size)
    reading.text_left -= sum(len(p.text) for p in found)
    return found, digest, bytes_read


def checked_passages(item: object) -> list[Passage]:
    """The passages a message of the reader holds, every field of the type the index stores: a reader a hostile
    file took over gets its file refused, never the scan stopped (a wrong type aborted every rescan before)."""
    if not isinstance(item, list) or not all(_is_passage(p) for p in item):
        raise UnreadableFile("the reader sent back passages of the wrong shape")
    return item


def _is_passage(value: object) -> bool:
    def number(n: object) -> bool:
        return n is None or (isinstance(n, int) and not isinstance(n, bool) and 0 <= n < 1 << 40)

    return (
        type(value) is Passage
        and type(value.text) is str
        and number(value.page)
        and number(value.line_start)
        and number(value.line_end)
    )


def checked_result(result: object, listed_size: int) -> tuple[str, int]:
    """The reader's (sha256, bytes read), checked."""
    if (
        not isinstance(result, tuple)
        or len(result) != 2
        or type(result[0]) is not str
        or len(result[0]) != 64
        or type(result[1]) is not int
        or not 0 <= result[1] <= listed_size
    ):
        raise UnreadableFile("the reader sent back a result of the wrong shape")
    return result[0], result[1]


PASSAGE_CLASSES = allowed_classes(Passage)


def _index_file(
    index: DocumentIndex, collection: int, path: Path, listed: os.stat_result, report: IndexReport, reading: _Reading
) -> bool:
    """False when the scan was stopped while the file was read (nothing is stored for it)."""
    problem: str | None = None
    found: list[Passage] = []
    digest: str | None = None
    bytes_read = 0
    try:
        found, digest, bytes_read = read_passages(reading, path, listed.st_size, listed)
    except SandboxStoppedError:
        return False
    except UnreadableFile as exc:
        problem = str(exc)
    index.replace_file(collection, str(path), listed.st_size, listed.st_mtime_ns, digest, found, problem)
    report.indexed += 1
    report.passages += len(found)
    report.bytes_read += bytes_read
    return True


def _must_wait(pause: threading.Event | None, yield_to: Callable[[], bool] | None) -> bool:
    return (pause is not None and pause.is_set()) or (yield_to is not None and yield_to())


def _wait_while(
    pause: threading.Event | None, yield_to: Callable[[], bool] | None, should_stop: Callable[[], bool] | None
) -> None:
    while _must_wait(pause, yield_to):
        if should_stop is not None and should_stop():
            return
        time.sleep(0.05)  # a paused or yielding scan checks again; this is the pause, not synchronisation
