"""Conversations in SQLite: WAL, foreign keys, ``PRAGMA user_version`` migrations, files readable by the user only.

Writes are small and frequent (a reply is saved while it streams), so the database runs in WAL mode with
``synchronous=NORMAL``: a commit survives a killed process; only a power cut can lose the last commits.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import sqlite3
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fara_desktop.chats.records import (
    ConversationSummary,
    MessageStatus,
    StoredMessage,
    digests_from_json,
    finite_time,
    message_from_row,
    names_from_json,
    stats_from_json,
)
from fara_desktop.chats.schema import MIGRATIONS, NEXT_CONVERSATION_ID, SCHEMA_VERSION
from fara_desktop.chats.tool_rounds import ToolRound, rounds_json
from fara_desktop.chats.tree import MessageTree
from fara_desktop.vocabulary.errors import FaraError
from fara_desktop.vocabulary.sources import Source, sources_json

log = logging.getLogger(__name__)


# Characters shown before and after where a search matched: few before, so that the match stays at the start of
# the line the list shows (the rest of the line is cut at its end to fit).
MATCH_BEFORE = 16
MATCH_AFTER = 60


class StorageError(FaraError):
    """The conversation database cannot be used (corrupt, newer schema, read-only, disk full)."""


class ConversationStore:
    """All database access. Used by the chat session and the CLI; widgets never touch it."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.closed = False
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
                for statement in _statements(MIGRATIONS[number]):
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
        self.closed = True

    def integrity_ok(self) -> bool:
        return bool(self._db.execute("PRAGMA integrity_check").fetchone()[0] == "ok")

    # ------------------------------------------------------------------ conversations

    def create_conversation(self, title: str = "New chat", system_prompt: str = "") -> int:
        now = time.time()
        with self.transaction() as db:
            cursor = db.execute(
                "INSERT INTO conversations (id, title, system_prompt, created_at, updated_at) "
                f"VALUES ({NEXT_CONVERSATION_ID}, ?, ?, ?, ?)",
                (title, system_prompt, now, now),
            )
        return int(cursor.lastrowid or 0)

    def conversations(self, search: str | None = None) -> list[ConversationSummary]:
        """Newest first; ``search`` matches titles and message text."""
        if search and search.strip():
            pattern = "%" + search.strip().replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
            found = self._summaries(
                """WHERE c.title LIKE ? ESCAPE '\\' OR EXISTS (SELECT 1 FROM messages m
                   WHERE m.conversation_id = c.id AND m.content LIKE ? ESCAPE '\\')""",
                (pattern, pattern),
            )
            return [dataclasses.replace(s, match=self._match(s.id, pattern, search.strip())) for s in found]
        return self._summaries("", ())

    def _match(self, conversation_id: int, pattern: str, search: str) -> str:
        """A few words around the first place a message matches a search (case as written), for the list."""
        row = self._db.execute(
            "SELECT content FROM messages WHERE conversation_id = ? AND content LIKE ? ESCAPE '\\' "
            "ORDER BY position LIMIT 1",
            (conversation_id, pattern),
        ).fetchone()
        if row is None or not isinstance(row[0], str):
            return ""
        text: str = row[0]
        at = text.casefold().find(search.casefold())
        if at < 0:
            return ""
        start, end = max(0, at - MATCH_BEFORE), min(len(text), at + len(search) + MATCH_AFTER)
        if start and not text[start - 1].isspace():  # from the start of a word, never a piece of one
            space = text.find(" ", start, at)
            start = space + 1 if space >= 0 else at
        return ("…" if start else "") + " ".join(text[start:end].split()) + ("…" if end < len(text) else "")

    def conversation(self, conversation_id: int) -> ConversationSummary | None:
        """One conversation's summary, by its key (the list is not read: a Send asks for it twice)."""
        found = self._summaries("WHERE c.id = ?", (conversation_id,))
        return found[0] if found else None

    def _summaries(self, where: str, args: tuple[Any, ...]) -> list[ConversationSummary]:
        query = f"""SELECT c.*, (SELECT COUNT(*) FROM messages m WHERE m.conversation_id = c.id) AS n
                    FROM conversations c {where} ORDER BY c.updated_at DESC, c.id DESC"""
        return [
            ConversationSummary(
                r["id"],
                r["title"] if isinstance(r["title"], str) else str(r["title"]),
                r["system_prompt"] if isinstance(r["system_prompt"], str) else "",
                finite_time(r["created_at"]),
                finite_time(r["updated_at"], finite_time(r["created_at"])),
                r["n"],
                r["leaf_id"] if isinstance(r["leaf_id"], int) else None,
                r["thinking"] != 0,
                names_from_json(r["collections"]),
                names_from_json(r["tools"]),
            )
            for r in self._db.execute(query, args)
        ]

    def rename(self, conversation_id: int, title: str) -> None:
        """A new title; the chat keeps its place in the list (a rename is not news in the chat)."""
        with self.transaction() as db:
            db.execute(
                "UPDATE conversations SET title = ? WHERE id = ?", (title.strip() or "New chat", conversation_id)
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
        return [message_from_row(r) for r in rows]

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

    def set_tools(self, conversation_id: int, keys: tuple[str, ...]) -> None:
        with self.transaction() as db:
            db.execute("UPDATE conversations SET tools = ? WHERE id = ?", (json.dumps(list(keys)), conversation_id))

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
        pictures: Sequence[str] = (),
    ) -> StoredMessage:
        """A new message after ``parent_id`` (by default after the end of the branch shown; ``first_turn``: a new
        first message, as when the first message is edited); it becomes the end of the branch shown. ``pictures``:
        the digests of the pictures it carries (in the picture store)."""
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
                   updated_at, parent_id, pictures) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)""",
                (
                    conversation_id,
                    position,
                    role,
                    content,
                    status,
                    model,
                    now,
                    now,
                    parent_id,
                    json.dumps(list(pictures)),
                ),
            )
            message_id = int(cursor.lastrowid or 0)
            db.execute(
                "UPDATE conversations SET updated_at = ?, leaf_id = ? WHERE id = ?", (now, message_id, conversation_id)
            )
        return StoredMessage(
            message_id,
            conversation_id,
            position,
            role,
            content,
            status,
            model,
            None,
            now,
            now,
            parent_id,
            pictures=tuple(pictures),
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
        tool_rounds: Sequence[ToolRound] | None = None,
    ) -> None:
        with self.transaction() as db:
            db.execute(
                """UPDATE messages SET content = ?, status = COALESCE(?, status), stats = COALESCE(?, stats),
                   model = COALESCE(?, model), reasoning = COALESCE(?, reasoning), sources = COALESCE(?, sources),
                   tool_rounds = COALESCE(?, tool_rounds), updated_at = ? WHERE id = ?""",
                (
                    content,
                    status,
                    json.dumps(stats) if stats is not None else None,
                    model,
                    reasoning,
                    sources_json(sources) if sources is not None else None,
                    rounds_json(tool_rounds) if tool_rounds is not None else None,
                    time.time(),
                    message_id,
                ),
            )

    def delete_message(self, message_id: int, leaf_id: int | None = None) -> None:
        """Delete a message and the branch below it; the conversation then shows the branch ending at ``leaf_id``."""
        with self.transaction() as db:
            db.execute(
                "UPDATE conversations SET leaf_id = ? WHERE id = (SELECT conversation_id FROM messages WHERE id = ?)",
                (leaf_id, message_id),
            )
            db.execute("DELETE FROM messages WHERE id = ?", (message_id,))

    def pictures_in_use(self) -> set[str]:
        """Every picture digest a message still carries (what the picture store must keep)."""
        used: set[str] = set()
        for (raw,) in self._db.execute("SELECT pictures FROM messages WHERE pictures != '[]'"):
            used.update(digests_from_json(raw))
        return used

    def pictures_of(self, conversation_id: int) -> set[str]:
        """The picture digests one conversation's messages carry (all branches)."""
        used: set[str] = set()
        query = "SELECT pictures FROM messages WHERE conversation_id = ? AND pictures != '[]'"
        for (raw,) in self._db.execute(query, (conversation_id,)):
            used.update(digests_from_json(raw))
        return used

    def mark_interrupted(self) -> int:
        """Replies left 'streaming' by a crash, a kill or a power cut become 'stopped', marked as interrupted (shown
        so under the reply, with what was saved of it; Regenerate redoes it)."""
        with self.transaction() as db:
            rows = db.execute("SELECT id, stats FROM messages WHERE status = 'streaming'").fetchall()
            for message_id, raw in rows:
                stats = {**(stats_from_json(raw) or {}), "ended_early": "interrupted"}
                db.execute(
                    "UPDATE messages SET status = 'stopped', stats = ? WHERE id = ?", (json.dumps(stats), message_id)
                )
            return len(rows)

    def chat_being_written(self) -> int | None:
        """The conversation whose reply was written last among those still marked 'streaming' (before
        ``mark_interrupted``: the chat the app was writing in when it ended)."""
        query = "SELECT conversation_id FROM messages WHERE status = 'streaming' ORDER BY updated_at DESC LIMIT 1"
        row = self._db.execute(query).fetchone()
        return int(row[0]) if row else None

    def source_id(self, conversation_id: int) -> str | None:
        """Where an imported conversation came from (its id in the other app), or None."""
        row = self._db.execute("SELECT source_id FROM conversations WHERE id = ?", (conversation_id,)).fetchone()
        return row[0] if row and isinstance(row[0], str) and row[0] else None


def _statements(script: str) -> list[str]:
    """A migration's statements, one by one (a trigger's body holds ``;`` of its own)."""
    statements, current = [], ""
    for piece in script.split(";"):
        current += piece + ";"
        if sqlite3.complete_statement(current):
            if current.strip(" \n;"):
                statements.append(current)
            current = ""
    return statements


def database_path(data_dir: Path) -> Path:
    return data_dir / "conversations.sqlite3"


@dataclass(frozen=True)
class OpenedStore:
    """The conversation store the app uses, and why it is a temporary one when the real one could not open."""

    store: ConversationStore
    problem: str | None
    interrupted_chat: int | None = None  # the chat whose reply the app was writing when it ended last time


def open_store(data_dir: Path) -> OpenedStore:
    """The store in ``data_dir`` (replies interrupted last time marked as stopped); when it cannot be opened, a
    store in a private temporary folder — writable even when the whole data folder is read-only — and the reason."""
    try:
        store = ConversationStore(database_path(data_dir))
        being_written = store.chat_being_written()
        interrupted = store.mark_interrupted()
    except StorageError as exc:
        fallback = Path(tempfile.mkdtemp(prefix="fara-chats-")) / "conversations.sqlite3"
        return OpenedStore(ConversationStore(fallback), str(exc))
    if interrupted:
        log.info("%d reply(ies) were interrupted last time; kept as stopped", interrupted)
    return OpenedStore(store, None, being_written)
