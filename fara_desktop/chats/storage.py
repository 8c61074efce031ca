"""Conversations in SQLite: WAL, foreign keys, ``PRAGMA user_version`` migrations, files readable by the user only.

Writes are small and frequent (a reply is saved while it streams), so the database runs in WAL mode with
``synchronous=NORMAL``: a commit survives a killed process; only a power cut can lose the last commits.
"""

from __future__ import annotations

import json
import logging
import math
import os
import sqlite3
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal

from fara_desktop.chats.export_format import (
    EXPORT_FORMAT,
    MAX_TIMESTAMP,
    MESSAGE_STATUSES,
    ImportedConversation,
    ImportedMessage,
    MessageStatus,
    content_digest,
    validate_export,
)
from fara_desktop.chats.tree import MessageTree
from fara_desktop.errors import FaraError
from fara_desktop.format import format_location

log = logging.getLogger(__name__)


MIGRATIONS: list[str] = [
    # 1: conversations and their messages
    """
    CREATE TABLE conversations (
        id INTEGER PRIMARY KEY,
        title TEXT NOT NULL,
        system_prompt TEXT NOT NULL DEFAULT '',
        created_at REAL NOT NULL,
        updated_at REAL NOT NULL
    );
    CREATE TABLE messages (
        id INTEGER PRIMARY KEY,
        conversation_id INTEGER NOT NULL REFERENCES conversations(id) ON DELETE CASCADE,
        position INTEGER NOT NULL,
        role TEXT NOT NULL CHECK (role IN ('system', 'user', 'assistant')),
        content TEXT NOT NULL,
        status TEXT NOT NULL DEFAULT 'complete',
        model TEXT,
        stats TEXT,
        created_at REAL NOT NULL,
        updated_at REAL NOT NULL,
        UNIQUE (conversation_id, position)
    );
    CREATE INDEX messages_by_conversation ON messages(conversation_id, position);
    CREATE INDEX conversations_by_update ON conversations(updated_at DESC);
    """,
    # 2: conversations branch (each message has a parent; the chat shows the branch ending at leaf_id), replies
    # keep their reasoning apart from their answer, and each chat has its own thinking switch. ``position`` stays
    # the order messages were written in. Existing chats become single branches, in place.
    """
    ALTER TABLE messages ADD COLUMN parent_id INTEGER REFERENCES messages(id) ON DELETE CASCADE;
    ALTER TABLE messages ADD COLUMN reasoning TEXT NOT NULL DEFAULT '';
    ALTER TABLE conversations ADD COLUMN leaf_id INTEGER;
    ALTER TABLE conversations ADD COLUMN thinking INTEGER NOT NULL DEFAULT 1;
    UPDATE messages SET parent_id = (
        SELECT p.id FROM messages p WHERE p.conversation_id = messages.conversation_id
        AND p.position < messages.position ORDER BY p.position DESC LIMIT 1);
    UPDATE conversations SET leaf_id = (
        SELECT m.id FROM messages m WHERE m.conversation_id = conversations.id ORDER BY m.position DESC LIMIT 1);
    CREATE INDEX messages_by_parent ON messages(parent_id);
    """,
    # 3: chats with documents: the collections a chat searches, and the passages each reply was given
    """
    ALTER TABLE conversations ADD COLUMN collections TEXT NOT NULL DEFAULT '[]';
    ALTER TABLE messages ADD COLUMN sources TEXT NOT NULL DEFAULT '[]';
    """,
    # 4: imports are recognised when the same file comes again: the conversation's id in the app it came from,
    # a digest of what was imported, and its update time then (a later one: the user continued it here)
    """
    ALTER TABLE conversations ADD COLUMN source_id TEXT;
    ALTER TABLE conversations ADD COLUMN source_digest TEXT;
    ALTER TABLE conversations ADD COLUMN source_updated_at REAL;
    CREATE INDEX conversations_by_source ON conversations(source_id);
    """,
]
SCHEMA_VERSION = len(MIGRATIONS)


class StorageError(FaraError):
    """The conversation database cannot be used (corrupt, newer schema, read-only, disk full)."""


@dataclass(frozen=True)
class StoredMessage:
    id: int
    conversation_id: int
    position: int
    role: str
    content: str
    status: MessageStatus
    model: str | None
    stats: dict[str, Any] | None
    created_at: float
    updated_at: float
    parent_id: int | None = None
    reasoning: str = ""
    sources: tuple[Source, ...] = ()  # the passages of the user's documents this reply was given, numbered


@dataclass(frozen=True)
class Source:
    """A passage a reply was given: its number in the reply's citations, and where it came from."""

    number: int
    path: str
    text: str
    page: int | None = None
    line_start: int | None = None
    line_end: int | None = None

    @property
    def where(self) -> str:
        return format_location(self.path, self.page, self.line_start, self.line_end)


MAX_SOURCES = 50


def _sources(raw: Any) -> tuple[Source, ...]:
    """Sources as stored: a JSON list of objects; anything else (an older version, a hand edit) reads as none."""
    try:
        data = json.loads(raw) if isinstance(raw, str) else None
    except (ValueError, RecursionError):
        return ()
    kept: list[Source] = []
    for item in data[:MAX_SOURCES] if isinstance(data, list) else []:
        if not isinstance(item, dict) or not isinstance(item.get("path"), str) or not isinstance(item.get("text"), str):
            continue
        whole = [item.get(k) if isinstance(item.get(k), int) and not isinstance(item.get(k), bool) else None
                 for k in ("number", "page", "line_start", "line_end")]  # fmt: skip
        kept.append(Source(whole[0] or len(kept) + 1, item["path"][:4096], item["text"][:20_000], *whole[1:]))
    return tuple(kept)


def sources_json(sources: tuple[Source, ...] | list[Source]) -> str:
    return json.dumps([asdict(s) for s in sources], ensure_ascii=False)


@dataclass(frozen=True)
class ConversationSummary:
    id: int
    title: str
    system_prompt: str
    created_at: float
    updated_at: float
    message_count: int
    leaf_id: int | None = None
    thinking: bool = True
    collections: tuple[str, ...] = ()  # the document collections this chat searches


def _finite_time(value: Any, fallback: float = 0.0) -> float:
    """A timestamp that ``time.localtime`` can format: finite and between 1970 and the year 3000."""
    if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
        return float(value) if 0 <= value <= MAX_TIMESTAMP else fallback
    return fallback


def _stats(raw: Any) -> dict[str, Any] | None:
    """Stats as stored: a JSON object of numbers (and an error text); anything else reads as none."""
    if not raw:
        return None
    try:
        data = json.loads(raw) if isinstance(raw, str) else None
    except (ValueError, RecursionError):
        return None
    if not isinstance(data, dict):
        return None
    kept: dict[str, Any] = {}
    for key, value in data.items():
        if key == "error" and isinstance(value, str):
            kept[key] = value[:2000]
        elif isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
            kept[key] = value
    return kept


def _message(row: sqlite3.Row) -> StoredMessage:
    """A row as the app can show it, whatever an older version, an import or a hand edit left in it."""
    status: MessageStatus = next((s for s in MESSAGE_STATUSES if s == row["status"]), "complete")
    model = row["model"] if isinstance(row["model"], str) else None
    content = row["content"] if isinstance(row["content"], str) else str(row["content"] or "")
    created = _finite_time(row["created_at"])
    parent = row["parent_id"] if isinstance(row["parent_id"], int) else None
    reasoning = row["reasoning"] if isinstance(row["reasoning"], str) else ""
    sources = _sources(row["sources"])
    return StoredMessage(
        id=row["id"], conversation_id=row["conversation_id"], position=row["position"], role=row["role"],
        content=content, status=status, model=model, stats=_stats(row["stats"]), created_at=created,
        updated_at=_finite_time(row["updated_at"], created), parent_id=parent, reasoning=reasoning, sources=sources,
    )  # fmt: skip


_INTERNAL_FIELDS = ("id", "conversation_id", "position", "parent_id", "sources")  # not exported: keys and parents are


def _names(raw: Any) -> tuple[str, ...]:
    try:
        data = json.loads(raw) if isinstance(raw, str) else None
    except (ValueError, RecursionError):
        return ()
    return tuple(n for n in data[:100] if isinstance(n, str)) if isinstance(data, list) else ()


def _key_of(keys: dict[int, int], message_id: int | None) -> int | None:
    return keys.get(message_id) if message_id is not None else None


def title_from(text: str, limit: int = 48) -> str:
    """A conversation title from its first message: the first line, trimmed at a word boundary."""
    line = " ".join(text.strip().split("\n", 1)[0].split())
    if len(line) <= limit:
        return line or "New chat"
    cut = line[:limit].rsplit(" ", 1)[0]
    return (cut if len(cut) > limit // 2 else line[:limit]).rstrip(" ,.;:") + "…"


class ConversationStore:
    """All database access. Used by the chat session and the CLI; widgets never touch it."""

    def __init__(self, path: Path) -> None:
        self.path = path
        try:
            path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            if not path.exists():  # create the file readable by the user only before SQLite opens it
                os.close(os.open(path, os.O_CREAT | os.O_WRONLY, 0o600))
            self._db = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
            self._db.row_factory = sqlite3.Row
            self._db.execute("PRAGMA foreign_keys = ON")
            self._db.execute("PRAGMA journal_mode = WAL")
            self._db.execute("PRAGMA synchronous = NORMAL")
            self._migrate()
        except sqlite3.DatabaseError as exc:
            raise StorageError(f"The conversation database {path} cannot be opened: {exc}") from exc
        except OSError as exc:  # a read-only or full disk, a folder without permission
            raise StorageError(f"The conversation database {path} cannot be created: {exc.strerror or exc}") from exc

    def _migrate(self) -> None:
        version = self._db.execute("PRAGMA user_version").fetchone()[0]
        if version > SCHEMA_VERSION:
            raise StorageError(
                f"The conversation database was written by a newer Fara Desktop (schema {version}, this version "
                f"knows {SCHEMA_VERSION}). Update the app; your conversations were not changed."
            )
        for number in range(version, SCHEMA_VERSION):
            with self.transaction():  # executescript would commit on its own; run statement by statement
                for statement in MIGRATIONS[number].split(";"):
                    if statement.strip():
                        self._db.execute(statement)
                self._db.execute(f"PRAGMA user_version = {number + 1}")

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """One write transaction. Whatever fails inside it — a statement, or COMMIT itself (disk full, I/O error) —
        is rolled back, so the connection is never left inside a transaction that makes every later write fail."""
        try:
            self._db.execute("BEGIN IMMEDIATE")
        except sqlite3.Error as exc:
            raise StorageError(f"Could not save to {self.path.name}: {exc}") from exc
        try:
            yield self._db
            self._db.execute("COMMIT")
        except BaseException as exc:
            if self._db.in_transaction:
                try:
                    self._db.execute("ROLLBACK")
                except sqlite3.Error:
                    log.warning("rollback failed after a failed write to %s", self.path.name)
            if isinstance(exc, sqlite3.Error):
                raise StorageError(f"Could not save to {self.path.name}: {exc}") from exc
            raise

    def close(self) -> None:
        self._db.close()

    def integrity_ok(self) -> bool:
        return bool(self._db.execute("PRAGMA integrity_check").fetchone()[0] == "ok")

    # ------------------------------------------------------------------ conversations

    def create_conversation(self, title: str = "New chat", system_prompt: str = "") -> int:
        now = time.time()
        with self.transaction() as db:
            cursor = db.execute(
                "INSERT INTO conversations (title, system_prompt, created_at, updated_at) VALUES (?, ?, ?, ?)",
                (title, system_prompt, now, now),
            )
        return int(cursor.lastrowid or 0)

    def conversations(self, search: str | None = None) -> list[ConversationSummary]:
        query = """SELECT c.*, (SELECT COUNT(*) FROM messages m WHERE m.conversation_id = c.id) AS n
                   FROM conversations c"""
        args: tuple[Any, ...] = ()
        if search and search.strip():
            pattern = "%" + search.strip().replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
            query += """ WHERE c.title LIKE ? ESCAPE '\\' OR EXISTS (SELECT 1 FROM messages m
                         WHERE m.conversation_id = c.id AND m.content LIKE ? ESCAPE '\\')"""
            args = (pattern, pattern)
        query += " ORDER BY c.updated_at DESC, c.id DESC"
        return [
            ConversationSummary(
                r["id"],
                r["title"] if isinstance(r["title"], str) else str(r["title"]),
                r["system_prompt"] if isinstance(r["system_prompt"], str) else "",
                _finite_time(r["created_at"]),
                _finite_time(r["updated_at"], _finite_time(r["created_at"])),
                r["n"],
                r["leaf_id"] if isinstance(r["leaf_id"], int) else None,
                r["thinking"] != 0,
                _names(r["collections"]),
            )
            for r in self._db.execute(query, args)
        ]

    def conversation(self, conversation_id: int) -> ConversationSummary | None:
        return next((c for c in self.conversations() if c.id == conversation_id), None)

    def rename(self, conversation_id: int, title: str) -> None:
        with self.transaction() as db:
            db.execute(
                "UPDATE conversations SET title = ?, updated_at = ? WHERE id = ?",
                (title.strip() or "New chat", time.time(), conversation_id),
            )

    def set_system_prompt(self, conversation_id: int, system_prompt: str) -> None:
        with self.transaction() as db:
            db.execute("UPDATE conversations SET system_prompt = ? WHERE id = ?", (system_prompt, conversation_id))

    def delete(self, conversation_id: int) -> None:
        with self.transaction() as db:
            db.execute("DELETE FROM conversations WHERE id = ?", (conversation_id,))

    # ------------------------------------------------------------------ messages

    def messages(self, conversation_id: int) -> list[StoredMessage]:
        """Every message of the conversation, all branches, in the order they were written."""
        rows = self._db.execute(
            "SELECT * FROM messages WHERE conversation_id = ? ORDER BY position", (conversation_id,)
        )
        return [_message(r) for r in rows]

    def tree(self, conversation_id: int) -> MessageTree[StoredMessage]:
        return MessageTree(self.messages(conversation_id))

    def branch(self, conversation_id: int) -> list[StoredMessage]:
        """The branch the chat shows: from the first message to the conversation's current leaf."""
        summary = self.conversation(conversation_id)
        return self.tree(conversation_id).path_to(summary.leaf_id if summary else None)

    def set_leaf(self, conversation_id: int, leaf_id: int | None) -> None:
        with self.transaction() as db:
            db.execute("UPDATE conversations SET leaf_id = ? WHERE id = ?", (leaf_id, conversation_id))

    def set_collections(self, conversation_id: int, names: tuple[str, ...]) -> None:
        with self.transaction() as db:
            db.execute(
                "UPDATE conversations SET collections = ? WHERE id = ?", (json.dumps(list(names)), conversation_id)
            )

    def set_thinking(self, conversation_id: int, thinking: bool) -> None:
        with self.transaction() as db:
            db.execute("UPDATE conversations SET thinking = ? WHERE id = ?", (int(thinking), conversation_id))

    def add_message(
        self,
        conversation_id: int,
        role: str,
        content: str,
        status: MessageStatus = "complete",
        model: str | None = None,
        parent_id: int | None = None,
        first_turn: bool = False,
    ) -> StoredMessage:
        """A new message after ``parent_id`` (by default after the end of the branch shown; ``first_turn``: a new
        first message, as when the first message is edited); it becomes the end of the branch shown."""
        now = time.time()
        with self.transaction() as db:
            if parent_id is None and not first_turn:
                row = db.execute("SELECT leaf_id FROM conversations WHERE id = ?", (conversation_id,)).fetchone()
                leaf = row[0] if row else None
                known = (
                    leaf is not None
                    and db.execute(
                        "SELECT 1 FROM messages WHERE id = ? AND conversation_id = ?", (leaf, conversation_id)
                    ).fetchone()
                )
                parent_id = leaf if known else None
            position = db.execute(
                "SELECT COALESCE(MAX(position), -1) + 1 FROM messages WHERE conversation_id = ?", (conversation_id,)
            ).fetchone()[0]
            cursor = db.execute(
                """INSERT INTO messages (conversation_id, position, role, content, status, model, created_at,
                   updated_at, parent_id) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)""",
                (conversation_id, position, role, content, status, model, now, now, parent_id),
            )
            message_id = int(cursor.lastrowid or 0)
            db.execute(
                "UPDATE conversations SET updated_at = ?, leaf_id = ? WHERE id = ?", (now, message_id, conversation_id)
            )
        return StoredMessage(
            message_id, conversation_id, position, role, content, status, model, None, now, now, parent_id
        )

    def update_message(
        self,
        message_id: int,
        content: str,
        status: MessageStatus | None = None,
        stats: dict[str, Any] | None = None,
        model: str | None = None,
        reasoning: str | None = None,
        sources: tuple[Source, ...] | None = None,
    ) -> None:
        with self.transaction() as db:
            db.execute(
                """UPDATE messages SET content = ?, status = COALESCE(?, status), stats = COALESCE(?, stats),
                   model = COALESCE(?, model), reasoning = COALESCE(?, reasoning), sources = COALESCE(?, sources),
                   updated_at = ? WHERE id = ?""",
                (content, status, json.dumps(stats) if stats is not None else None, model, reasoning,
                 sources_json(sources) if sources is not None else None, time.time(), message_id),
            )  # fmt: skip

    def delete_message(self, message_id: int, leaf_id: int | None = None) -> None:
        """Delete a message and the branch below it; the conversation then shows the branch ending at ``leaf_id``."""
        with self.transaction() as db:
            db.execute(
                "UPDATE conversations SET leaf_id = ? WHERE id = (SELECT conversation_id FROM messages WHERE id = ?)",
                (leaf_id, message_id),
            )
            db.execute("DELETE FROM messages WHERE id = ?", (message_id,))

    def mark_interrupted(self) -> int:
        """Replies left 'streaming' by a crash or a kill become 'stopped' (their text is kept)."""
        with self.transaction() as db:
            return db.execute("UPDATE messages SET status = 'stopped' WHERE status = 'streaming'").rowcount

    def branch_off(self, conversation_id: int, up_to: Sequence[int], title: str) -> int:
        """A new conversation holding copies of the messages ``up_to`` (a branch, first to last): "Branch from
        here", with each reply's citations and the chat's collections. The original is not changed."""
        summary = self.conversation(conversation_id)
        if summary is None:
            raise StorageError(f"There is no conversation {conversation_id}.")
        by_id = {m.id: m for m in self.messages(conversation_id)}
        originals = [by_id[i] for i in up_to if i in by_id]
        copied = [
            ImportedMessage(m.role, m.content, "stopped" if m.status == "streaming" else m.status, m.model, m.stats,
                            m.created_at, m.updated_at, parent=index - 1 if index else None, reasoning=m.reasoning)
            for index, m in enumerate(originals)
        ]  # fmt: skip
        now = time.time()
        branch = ImportedConversation(title, summary.system_prompt, now, now, copied, thinking=summary.thinking)
        with self.transaction() as db:
            new_id, row_ids = self._insert_conversation(db, branch)
            db.executemany(
                "UPDATE messages SET sources = (SELECT sources FROM messages WHERE id = ?) WHERE id = ?",
                [(original.id, copy) for original, copy in zip(originals, row_ids, strict=True)],
            )
            db.execute(
                "UPDATE conversations SET collections = (SELECT collections FROM conversations WHERE id = ?) "
                "WHERE id = ?",
                (conversation_id, new_id),
            )
        return new_id

    # ------------------------------------------------------------------ export / import

    def export_json(self, conversation_id: int) -> dict[str, Any]:
        """Every branch; ``current`` names the one shown. Message keys are their order in the file."""
        summary = self.conversation(conversation_id)
        if summary is None:
            raise StorageError(f"There is no conversation {conversation_id}.")
        messages = self.messages(conversation_id)
        tree = MessageTree(messages)
        key = {m.id: number for number, m in enumerate(messages)}
        leaf = tree.path_to(summary.leaf_id)
        source = self._db.execute("SELECT source_id FROM conversations WHERE id = ?", (conversation_id,)).fetchone()
        return {
            "format": EXPORT_FORMAT,
            "version": 2,
            **({"source_id": source[0]} if source and source[0] else {}),
            "title": summary.title,
            "system_prompt": summary.system_prompt,
            "created_at": summary.created_at,
            "updated_at": summary.updated_at,
            "thinking": summary.thinking,
            "current": key[leaf[-1].id] if leaf else None,
            "messages": [
                {
                    "key": key[m.id],
                    "parent": _key_of(key, tree.parent_of(m)),
                    **{k: v for k, v in asdict(m).items() if k not in _INTERNAL_FIELDS},
                }
                for m in messages
            ],
        }

    def export_markdown(self, conversation_id: int) -> str:
        """The branch shown, as a document: the reasoning of a reply in a collapsed ``<details>`` block."""
        summary = self.conversation(conversation_id)
        if summary is None:
            raise StorageError(f"There is no conversation {conversation_id}.")
        lines = [f"# {summary.title}", ""]
        if summary.system_prompt:
            lines += [f"> System prompt: {summary.system_prompt}", ""]
        for message in self.branch(conversation_id):
            when = time.strftime("%Y-%m-%d %H:%M", time.localtime(_finite_time(message.created_at)))
            who = "You" if message.role == "user" else f"Assistant ({message.model or 'model'})"
            status = "" if message.status == "complete" else f" — {message.status}"
            lines += [f"## {who} · {when}{status}", ""]
            if message.reasoning.strip():
                lines += ["<details><summary>Reasoning</summary>", "", message.reasoning.strip(), "", "</details>", ""]
            lines += [message.content, ""]
        return "\n".join(lines)

    def import_json(self, data: Any) -> int:
        """Add a conversation from a Fara export. The whole file is validated first (``validate_export``): a file
        with one bad value is refused whole, with the reason, and nothing is written."""
        return self.import_conversations([validate_export(data)])[0]

    def import_conversations(self, conversations: Sequence[ImportedConversation]) -> list[int]:
        """Write validated conversations as new ones, all in one transaction: all of them or none."""
        with self.transaction() as db:
            return [self._insert_conversation(db, conversation)[0] for conversation in conversations]

    def import_or_update(self, conversations: Sequence[ImportedConversation]) -> list[ImportOutcome]:
        """Like ``import_conversations``, but a conversation imported before (same ``source_id``) is skipped when
        it is the same, updated in place when it changed at its source and not here, and added as a new chat
        when it changed in both places (what the user wrote here is never replaced)."""
        outcomes: list[ImportOutcome] = []
        with self.transaction() as db:
            for conversation in conversations:
                digest = content_digest(conversation)
                earlier = None
                if conversation.source_id:
                    earlier = db.execute(
                        """SELECT id, source_digest, source_updated_at, updated_at FROM conversations
                           WHERE source_id = ? ORDER BY id DESC LIMIT 1""",
                        (conversation.source_id,),
                    ).fetchone()
                if earlier is not None and earlier[1] == digest:
                    outcomes.append(ImportOutcome(int(earlier[0]), "skipped"))
                    continue
                if earlier is not None and earlier[2] == earlier[3]:
                    db.execute("DELETE FROM messages WHERE conversation_id = ?", (earlier[0],))
                    self._write_conversation(db, int(earlier[0]), conversation, digest)
                    outcomes.append(ImportOutcome(int(earlier[0]), "updated"))
                    continue
                conversation_id, _rows = self._insert_conversation(db, conversation, digest)
                outcomes.append(ImportOutcome(conversation_id, "added"))
        return outcomes

    def _insert_conversation(
        self, db: sqlite3.Connection, conversation: ImportedConversation, digest: str | None = None
    ) -> tuple[int, list[int]]:
        cursor = db.execute("INSERT INTO conversations (title, created_at, updated_at) VALUES ('', 0, 0)")
        conversation_id = int(cursor.lastrowid or 0)
        return conversation_id, self._write_conversation(db, conversation_id, conversation, digest)

    def _write_conversation(
        self, db: sqlite3.Connection, conversation_id: int, conversation: ImportedConversation, digest: str | None
    ) -> list[int]:
        """The conversation's fields and messages into the (empty) conversation ``conversation_id``."""
        row_ids: list[int] = []
        for position, m in enumerate(conversation.messages):
            parent = row_ids[m.parent] if m.parent is not None else None
            cursor = db.execute(
                """INSERT INTO messages (conversation_id, position, role, content, status, model, stats,
                   created_at, updated_at, parent_id, reasoning) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)""",
                (conversation_id, position, m.role, m.content, m.status, m.model,
                 json.dumps(m.stats) if m.stats else None, m.created_at, m.updated_at, parent, m.reasoning),
            )  # fmt: skip
            row_ids.append(int(cursor.lastrowid or 0))
        leaf = conversation.leaf if conversation.leaf is not None else len(row_ids) - 1
        db.execute(
            """UPDATE conversations SET title = ?, system_prompt = ?, created_at = ?, updated_at = ?, thinking = ?,
               leaf_id = ?, source_id = ?, source_digest = ?, source_updated_at = ? WHERE id = ?""",
            (conversation.title, conversation.system_prompt, conversation.created_at, conversation.updated_at,
             int(conversation.thinking), row_ids[leaf] if row_ids else None,
             conversation.source_id if digest is not None else None, digest,
             conversation.updated_at if digest is not None else None, conversation_id),
        )  # fmt: skip
        return row_ids


@dataclass(frozen=True)
class ImportOutcome:
    """What became of one imported conversation: ``added``, ``updated`` (in place) or ``skipped`` (already here)."""

    conversation_id: int
    action: Literal["added", "updated", "skipped"]


def database_path(data_dir: Path) -> Path:
    return data_dir / "conversations.sqlite3"


@dataclass(frozen=True)
class OpenedStore:
    """The conversation store the app uses, and why it is a temporary one when the real one could not open."""

    store: ConversationStore
    problem: str | None


def open_store(data_dir: Path) -> OpenedStore:
    """The store in ``data_dir`` (replies interrupted last time marked as stopped); when it cannot be opened, a
    store in a private temporary folder — writable even when the whole data folder is read-only — and the reason."""
    try:
        store = ConversationStore(database_path(data_dir))
        interrupted = store.mark_interrupted()
    except StorageError as exc:
        fallback = Path(tempfile.mkdtemp(prefix="fara-chats-")) / "conversations.sqlite3"
        return OpenedStore(ConversationStore(fallback), str(exc))
    if interrupted:
        log.info("%d reply(ies) were interrupted last time; kept as stopped", interrupted)
    return OpenedStore(store, None)
