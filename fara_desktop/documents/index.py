"""Collections of documents in SQLite: files, their passages, and an FTS5 index ranked by BM25.

Lexical retrieval needs no model and answers in milliseconds on a CPU; a collection is searchable the moment its
text is extracted. The database is its own file next to the conversations (``documents.sqlite3``, readable by the
user only), in WAL mode so searches run while the indexer writes.
"""

from __future__ import annotations

import os
import re
import sqlite3
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from fara_desktop.documents.passages import Passage
from fara_desktop.text.format import format_location
from fara_desktop.vocabulary.errors import FaraError

SCHEMA = """
CREATE TABLE IF NOT EXISTS collections (
    id INTEGER PRIMARY KEY,
    name TEXT NOT NULL UNIQUE,
    created_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS roots (
    collection_id INTEGER NOT NULL REFERENCES collections(id) ON DELETE CASCADE,
    path TEXT NOT NULL,
    PRIMARY KEY (collection_id, path)
);
CREATE TABLE IF NOT EXISTS files (
    id INTEGER PRIMARY KEY,
    collection_id INTEGER NOT NULL REFERENCES collections(id) ON DELETE CASCADE,
    path TEXT NOT NULL,
    size INTEGER NOT NULL,
    mtime_ns INTEGER NOT NULL,
    sha256 TEXT,
    indexed_at REAL NOT NULL,
    passages INTEGER NOT NULL DEFAULT 0,
    problem TEXT,
    UNIQUE (collection_id, path)
);
CREATE TABLE IF NOT EXISTS passages (
    id INTEGER PRIMARY KEY,
    file_id INTEGER NOT NULL REFERENCES files(id) ON DELETE CASCADE,
    text TEXT NOT NULL,
    page INTEGER,
    line_start INTEGER,
    line_end INTEGER
);
CREATE INDEX IF NOT EXISTS passages_by_file ON passages(file_id);
CREATE VIRTUAL TABLE IF NOT EXISTS passages_fts USING fts5(
    text, content='passages', content_rowid='id', tokenize='porter unicode61 remove_diacritics 2'
);
CREATE TRIGGER IF NOT EXISTS passages_ai AFTER INSERT ON passages BEGIN
    INSERT INTO passages_fts(rowid, text) VALUES (new.id, new.text);
END;
CREATE TABLE IF NOT EXISTS vectors (
    passage_id INTEGER PRIMARY KEY REFERENCES passages(id) ON DELETE CASCADE,
    model TEXT NOT NULL,
    data BLOB NOT NULL
);
CREATE TRIGGER IF NOT EXISTS passages_ad AFTER DELETE ON passages BEGIN
    INSERT INTO passages_fts(passages_fts, rowid, text) VALUES ('delete', old.id, old.text);
END;
"""

MAX_QUERY_TERMS = 32
_WORD = re.compile(r"\w+", re.UNICODE)
# Words too common to rank a passage by (a question's "how does the … of …" would otherwise match everything).
_STOPWORDS_WORDS = (
    "a an and are as at be but by can could did do does for from had has have how i if in into is it its "
    "me my no not of on or our so than that the their them then there these they this to was we were what "
    "when where which who why will with would you your"
)
STOPWORDS = frozenset(_STOPWORDS_WORDS.split())


class DocumentIndexError(FaraError):
    """The documents database cannot be used."""


@dataclass(frozen=True)
class CollectionSummary:
    id: int
    name: str
    files: int
    passages: int
    unreadable: int
    roots: list[str]
    indexed_at: float | None


@dataclass(frozen=True)
class FileRecord:
    id: int
    path: str
    size: int
    mtime_ns: int
    sha256: str | None
    passages: int
    problem: str | None


@dataclass(frozen=True)
class Hit:
    """A passage that matches a query; ``score`` is BM25's (higher is better here)."""

    passage_id: int
    path: str
    text: str
    page: int | None
    line_start: int | None
    line_end: int | None
    score: float

    @property
    def where(self) -> str:
        return format_location(self.path, self.page, self.line_start, self.line_end)


def fts_query(text: str) -> str | None:
    """A user's words as an FTS5 query: each word quoted (no operator a stranger could inject), ORed, ranked by
    BM25; common words dropped unless nothing else is left."""
    words = [w.lower() for w in _WORD.findall(text)]
    kept = [w for w in words if w not in STOPWORDS] or words
    unique = list(dict.fromkeys(kept))[:MAX_QUERY_TERMS]
    if not unique:
        return None
    return " OR ".join('"' + w.replace('"', '""') + '"' for w in unique)


class DocumentIndex:
    """All access to the documents database."""

    def __init__(self, path: Path) -> None:
        self.path = path
        try:
            path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            if not path.exists():
                os.close(os.open(path, os.O_CREAT | os.O_WRONLY, 0o600))
            self._db = sqlite3.connect(path, isolation_level=None, check_same_thread=False, timeout=30)
            self._db.execute("PRAGMA foreign_keys = ON")
            self._db.execute("PRAGMA journal_mode = WAL")
            self._db.execute("PRAGMA synchronous = NORMAL")
            self._db.executescript(SCHEMA)
            self._batching = False
            self._matrices: dict[tuple[tuple[str, ...], str], tuple[list[int], np.ndarray]] = {}
        except (sqlite3.DatabaseError, OSError) as exc:
            raise DocumentIndexError(f"The documents database {path} cannot be opened: {exc}") from exc

    def close(self) -> None:
        self._db.close()

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """One write transaction; inside ``batch`` it is part of the batch's."""
        if self._batching:
            yield self._db
            return
        self._db.execute("BEGIN IMMEDIATE")
        try:
            yield self._db
            self._db.execute("COMMIT")
        except BaseException:
            if self._db.in_transaction:
                self._db.execute("ROLLBACK")
            raise

    @contextmanager
    def batch(self) -> Iterator[Callable[[], None]]:
        """Many writes in few transactions (one per file would cost a commit each: 10,000 small files); the
        yielded ``commit()`` ends the current one, so searches see the work so far."""
        self._db.execute("BEGIN IMMEDIATE")
        self._batching = True

        def commit() -> None:
            self._db.execute("COMMIT")
            self._db.execute("BEGIN IMMEDIATE")

        try:
            yield commit
            self._db.execute("COMMIT")
        except BaseException:
            if self._db.in_transaction:
                self._db.execute("ROLLBACK")
            raise
        finally:
            self._batching = False

    # ------------------------------------------------------------------ collections

    def collection_id(self, name: str, create: bool = False) -> int | None:
        row = self._db.execute("SELECT id FROM collections WHERE name = ?", (name,)).fetchone()
        if row is not None:
            return int(row[0])
        if not create:
            return None
        with self.transaction() as db:
            cursor = db.execute("INSERT INTO collections (name, created_at) VALUES (?, ?)", (name, time.time()))
        return int(cursor.lastrowid or 0)

    def add_roots(self, collection_id: int, paths: Sequence[Path]) -> None:
        with self.transaction() as db:
            db.executemany(
                "INSERT OR IGNORE INTO roots (collection_id, path) VALUES (?, ?)",
                [(collection_id, str(p)) for p in paths],
            )

    def roots(self, collection_id: int) -> list[str]:
        return [
            r[0]
            for r in self._db.execute("SELECT path FROM roots WHERE collection_id = ? ORDER BY path", (collection_id,))
        ]

    def collections(self) -> list[CollectionSummary]:
        rows = self._db.execute(
            """SELECT c.id, c.name, COUNT(f.id), COALESCE(SUM(f.passages), 0), COALESCE(SUM(f.problem IS NOT NULL), 0),
                      MAX(f.indexed_at)
               FROM collections c LEFT JOIN files f ON f.collection_id = c.id GROUP BY c.id ORDER BY c.name"""
        ).fetchall()
        return [CollectionSummary(r[0], r[1], r[2], r[3], r[4], self.roots(r[0]), r[5]) for r in rows]

    def remove_collection(self, name: str) -> bool:
        with self.transaction() as db:
            return db.execute("DELETE FROM collections WHERE name = ?", (name,)).rowcount > 0

    # ------------------------------------------------------------------ files

    def files(self, collection_id: int) -> dict[str, FileRecord]:
        rows = self._db.execute(
            "SELECT id, path, size, mtime_ns, sha256, passages, problem FROM files WHERE collection_id = ?",
            (collection_id,),
        )
        return {r[1]: FileRecord(*r) for r in rows}

    def unreadable(self, collection_id: int) -> list[tuple[str, str]]:
        return [
            (r[0], r[1])
            for r in self._db.execute(
                "SELECT path, problem FROM files WHERE collection_id = ? AND problem IS NOT NULL ORDER BY path",
                (collection_id,),
            )
        ]

    def replace_file(
        self,
        collection_id: int,
        path: str,
        size: int,
        mtime_ns: int,
        sha256: str | None,
        passages: Sequence[Passage],
        problem: str | None = None,
    ) -> None:
        """The file's passages, replacing what an earlier scan stored for it, in one transaction."""
        self._matrices.clear()
        with self.transaction() as db:
            db.execute("DELETE FROM files WHERE collection_id = ? AND path = ?", (collection_id, path))
            cursor = db.execute(
                """INSERT INTO files (collection_id, path, size, mtime_ns, sha256, indexed_at, passages, problem)
                   VALUES (?, ?, ?, ?, ?, ?, ?, ?)""",
                (collection_id, path, size, mtime_ns, sha256, time.time(), len(passages), problem),
            )
            file_id = cursor.lastrowid
            db.executemany(
                "INSERT INTO passages (file_id, text, page, line_start, line_end) VALUES (?, ?, ?, ?, ?)",
                [(file_id, p.text, p.page, p.line_start, p.line_end) for p in passages],
            )

    def touch_file(self, file_id: int, mtime_ns: int) -> None:
        """Same content, new modification time (the hash matched): nothing to re-index."""
        with self.transaction() as db:
            db.execute("UPDATE files SET mtime_ns = ?, indexed_at = ? WHERE id = ?", (mtime_ns, time.time(), file_id))

    def forget_files(self, collection_id: int, paths: Sequence[str]) -> None:
        with self.transaction() as db:
            db.executemany(
                "DELETE FROM files WHERE collection_id = ? AND path = ?", [(collection_id, p) for p in paths]
            )

    # ------------------------------------------------------------------ search

    def search(self, collections: Sequence[str], query: str, top: int = 5) -> list[Hit]:
        match = fts_query(query)
        if match is None or not collections:
            return []
        marks = ",".join("?" * len(collections))
        rows = self._db.execute(
            f"""SELECT p.id, f.path, p.text, p.page, p.line_start, p.line_end, bm25(passages_fts) AS rank
                FROM passages_fts JOIN passages p ON p.id = passages_fts.rowid JOIN files f ON f.id = p.file_id
                JOIN collections c ON c.id = f.collection_id
                WHERE passages_fts MATCH ? AND c.name IN ({marks})
                ORDER BY rank LIMIT ?""",
            (match, *collections, top),
        ).fetchall()
        return [Hit(r[0], r[1], r[2], r[3], r[4], r[5], -float(r[6])) for r in rows]

    # ------------------------------------------------------------------ vectors (semantic search)

    def passages_without_vectors(self, collection: str, model: str, limit: int) -> list[tuple[int, str]]:
        return [
            (r[0], r[1])
            for r in self._db.execute(
                """SELECT p.id, p.text FROM passages p JOIN files f ON f.id = p.file_id
               JOIN collections c ON c.id = f.collection_id LEFT JOIN vectors v ON v.passage_id = p.id
               WHERE c.name = ? AND (v.passage_id IS NULL OR v.model != ?) ORDER BY p.id LIMIT ?""",
                (collection, model, limit),
            )
        ]

    def store_vectors(self, model: str, ids: Sequence[int], vectors: np.ndarray) -> None:
        """Float32 rows, one per passage, stored as arrays in the database (measured fast enough at 40,000
        passages: one matrix product; no vector extension to ship)."""
        with self.transaction() as db:
            db.executemany(
                "INSERT OR REPLACE INTO vectors (passage_id, model, data) VALUES (?, ?, ?)",
                [(pid, model, row.astype(np.float32).tobytes()) for pid, row in zip(ids, vectors, strict=True)],
            )
        self._matrices.clear()

    def vector_count(self, collection: str, model: str) -> int:
        return int(
            self._db.execute(
                """SELECT COUNT(*) FROM vectors v JOIN passages p ON p.id = v.passage_id
               JOIN files f ON f.id = p.file_id JOIN collections c ON c.id = f.collection_id
               WHERE c.name = ? AND v.model = ?""",
                (collection, model),
            ).fetchone()[0]
        )

    def semantic_search(self, collections: Sequence[str], query: np.ndarray, model: str, top: int = 5) -> list[Hit]:
        if not collections:
            return []
        ids, matrix = self._matrix(tuple(collections), model)
        if not ids:
            return []
        scores = matrix @ query.astype(np.float32).reshape(-1)
        best = np.argsort(-scores)[:top]
        hits = []
        for row in best:
            hit = self.passage(ids[int(row)])
            if hit is not None:
                hits.append(
                    Hit(
                        hit.passage_id,
                        hit.path,
                        hit.text,
                        hit.page,
                        hit.line_start,
                        hit.line_end,
                        float(scores[int(row)]),
                    )
                )
        return hits

    def _matrix(self, collections: tuple[str, ...], model: str) -> tuple[list[int], np.ndarray]:
        """The collections' vectors as one matrix, kept until vectors change."""
        key = (collections, model)
        if key not in self._matrices:
            marks = ",".join("?" * len(collections))
            rows = self._db.execute(
                f"""SELECT v.passage_id, v.data FROM vectors v JOIN passages p ON p.id = v.passage_id
                    JOIN files f ON f.id = p.file_id JOIN collections c ON c.id = f.collection_id
                    WHERE c.name IN ({marks}) AND v.model = ? ORDER BY v.passage_id""",
                (*collections, model),
            ).fetchall()
            ids = [r[0] for r in rows]
            dims = {len(r[1]) for r in rows}
            if len(dims) > 1:  # vectors of another width under the same name: unusable together
                rows, ids = [], []
            matrix = (
                np.frombuffer(b"".join(r[1] for r in rows), dtype=np.float32).reshape(len(rows), -1)
                if rows
                else np.zeros((0, 0), dtype=np.float32)
            )
            self._matrices[key] = (ids, matrix)
        return self._matrices[key]

    def passage(self, passage_id: int) -> Hit | None:
        row = self._db.execute(
            """SELECT p.id, f.path, p.text, p.page, p.line_start, p.line_end FROM passages p
               JOIN files f ON f.id = p.file_id WHERE p.id = ?""",
            (passage_id,),
        ).fetchone()
        return Hit(row[0], row[1], row[2], row[3], row[4], row[5], 0.0) if row else None


def documents_path(data_dir: Path) -> Path:
    return data_dir / "documents.sqlite3"
