"""A disk that refuses writes, made real: SQLite's authorizer denies the statement, as a full disk would."""

from __future__ import annotations

import sqlite3

from fara_desktop.chats.storage import ConversationStore


def refuse_writes(store: ConversationStore, what: str) -> None:
    """SQLite's authorizer refuses ``what`` ("COMMIT", or a table to write): a real failed write, the
    transaction state included, like a full disk at COMMIT."""

    def authorize(action: int, arg1: str | None, *_rest: object) -> int:
        if action == sqlite3.SQLITE_TRANSACTION and arg1 == what:
            return sqlite3.SQLITE_DENY
        if action in (sqlite3.SQLITE_UPDATE, sqlite3.SQLITE_INSERT, sqlite3.SQLITE_DELETE) and arg1 == what:
            return sqlite3.SQLITE_DENY
        return sqlite3.SQLITE_OK

    store._db.set_authorizer(authorize)


def allow_writes(store: ConversationStore) -> None:
    """Writes work again."""
    store._db.set_authorizer(None)
