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
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from fara_desktop.documents.extract import UnreadableFile, sections, supported
from fara_desktop.documents.index import DocumentIndex, FileRecord
from fara_desktop.documents.passages import passages

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


def lower_this_threads_priority() -> None:
    """Indexing must not take the CPU from the window or from llama.cpp: on Linux a thread has its own nice value."""
    with contextlib.suppress(AttributeError, OSError):  # not Linux, or not allowed: the scan still yields
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), 10)


def candidate_files(roots: Sequence[Path]) -> Iterator[Path]:
    """Regular files under ``roots`` that a parser reads (a FIFO or a device is never opened; hidden folders,
    version control and virtual environments are skipped; symlinks are not followed out of a folder)."""
    for root in roots:
        if root.is_file():
            if supported(root):
                yield root
            continue
        for folder, dirs, files in os.walk(root, followlinks=False):
            dirs[:] = sorted(d for d in dirs if d not in SKIPPED_FOLDERS and not d.startswith("."))
            for name in sorted(files):
                path = Path(folder) / name
                if supported(path) and not name.startswith(".") and path.is_file() and not path.is_symlink():
                    yield path


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def index_collection(
    index: DocumentIndex,
    name: str,
    roots: Sequence[Path] = (),
    on_progress: Callable[[IndexProgress], None] | None = None,
    pause: threading.Event | None = None,
    yield_to: Callable[[], bool] | None = None,
    should_stop: Callable[[], bool] | None = None,
) -> IndexReport:
    """Add ``roots`` to the collection ``name`` (created if new) and bring it up to date with all its roots.
    ``pause``: while set, the scan waits; ``yield_to()``: while true (a reply is being generated), it waits too."""
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
    with index.batch() as commit:
        finished = _scan(index, collection, found, known, seen, report, progress, commit, on_progress, pause,
                         yield_to, should_stop)  # fmt: skip
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
    found: list[Path],
    known: dict[str, FileRecord],
    seen: set[str],
    report: IndexReport,
    progress: IndexProgress,
    commit: Callable[[], None],
    on_progress: Callable[[IndexProgress], None] | None,
    pause: threading.Event | None,
    yield_to: Callable[[], bool] | None,
    should_stop: Callable[[], bool] | None,
) -> bool:
    """True when every file was looked at (only then are files that disappeared forgotten)."""
    last_commit = time.perf_counter()
    for path in found:
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
        try:
            stat = path.stat()
        except OSError:
            continue  # gone since the walk
        record = known.get(key)
        if record is not None and record.size == stat.st_size and record.mtime_ns == stat.st_mtime_ns:
            report.unchanged += 1
        elif record is not None and record.size == stat.st_size and record.sha256 and _same_hash(path, record.sha256):
            index.touch_file(record.id, stat.st_mtime_ns)
            report.unchanged += 1
        else:
            _index_file(index, collection, path, stat, report)
        progress.files_done += 1
        progress.passages = report.passages
        progress.bytes_read = report.bytes_read
        if time.perf_counter() - last_commit >= COMMIT_EVERY_S:
            commit()
            last_commit = time.perf_counter()
        if on_progress is not None:
            on_progress(progress)
    return True


def _same_hash(path: Path, expected: str) -> bool:
    try:
        return sha256_of(path) == expected
    except OSError:
        return False


def _index_file(index: DocumentIndex, collection: int, path: Path, stat: os.stat_result, report: IndexReport) -> None:
    problem: str | None = None
    found = []
    try:
        digest = sha256_of(path)
        found = list(passages(sections(path)))
    except UnreadableFile as exc:
        problem = str(exc)
        digest = None
    except OSError as exc:
        problem = f"cannot be read ({exc.strerror or exc})"
        digest = None
    except Exception as exc:  # a parser's bug on a hostile file must not stop the collection
        log.warning("A parser failed on a file (%s)", type(exc).__name__)
        problem = f"could not be read ({type(exc).__name__})"
        digest = None
    index.replace_file(collection, str(path), stat.st_size, stat.st_mtime_ns, digest, found, problem)
    report.indexed += 1
    report.passages += len(found)
    report.bytes_read += stat.st_size if problem is None else 0


def _must_wait(pause: threading.Event | None, yield_to: Callable[[], bool] | None) -> bool:
    return (pause is not None and pause.is_set()) or (yield_to is not None and yield_to())


def _wait_while(
    pause: threading.Event | None, yield_to: Callable[[], bool] | None, should_stop: Callable[[], bool] | None
) -> None:
    while _must_wait(pause, yield_to):
        if should_stop is not None and should_stop():
            return
        time.sleep(0.05)  # a paused or yielding scan checks again; this is the pause, not synchronisation
