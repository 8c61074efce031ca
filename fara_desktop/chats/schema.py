"""The conversation database's schema: one migration per ``PRAGMA user_version`` step, never edited once shipped
(a new column is a new migration)."""

from __future__ import annotations

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
    # 5: tools: the calls a reply made, in rounds with their results (JSON, chats.tool_rounds), and the tools each
    # chat offers its model ("server/tool" keys)
    """
    ALTER TABLE messages ADD COLUMN tool_rounds TEXT NOT NULL DEFAULT '[]';
    ALTER TABLE conversations ADD COLUMN tools TEXT NOT NULL DEFAULT '[]';
    """,
    # 6: an import replaces a chat only when it comes from the same source in the same format and nothing was
    # changed here: the format it came in, and a digest of the chat as the import left it (title, system prompt,
    # branch shown, thinking switch, messages) to compare with the chat as it is now
    """
    ALTER TABLE conversations ADD COLUMN source_format TEXT;
    ALTER TABLE conversations ADD COLUMN local_digest TEXT;
    """,
    # 7: a deleted chat's id is never given to a new one (SQLite reuses the highest id once its row is gone, and
    # things outside the database are keyed by it: the chat's saved readings, notices said once per chat). The
    # highest id ever given is kept; new chats are numbered above it (``NEXT_CONVERSATION_ID``).
    """
    CREATE TABLE id_high_water (name TEXT PRIMARY KEY, last INTEGER NOT NULL);
    INSERT INTO id_high_water VALUES ('conversations', coalesce((SELECT max(id) FROM conversations), 0));
    CREATE TRIGGER conversation_ids_only_grow AFTER INSERT ON conversations BEGIN
        UPDATE id_high_water SET last = max(last, NEW.id) WHERE name = 'conversations';
    END;
    """,
    # 8: pictures in the chat (issue 44): the pictures a message carries, as the digests of their files in the
    # data folder's picture store (content-addressed; a file goes when no message uses it any more)
    """
    ALTER TABLE messages ADD COLUMN pictures TEXT NOT NULL DEFAULT '[]';
    """,
]
# The id of the next conversation: above every id given so far (the trigger above keeps the mark).
NEXT_CONVERSATION_ID = (
    "(SELECT max(last, coalesce((SELECT max(id) FROM conversations), 0)) + 1 FROM id_high_water "
    "WHERE name = 'conversations')"
)
SCHEMA_VERSION = len(MIGRATIONS)
