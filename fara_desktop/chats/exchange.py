"""Conversations out of the store and into it: the JSON export (every branch) and the Markdown one (the branch
shown), and imports — validated whole before anything is written, then written in one transaction."""

from __future__ import annotations

import hashlib
import html
import json
import re
import sqlite3
import time
import uuid
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any, Literal

from fara_desktop.chats.export_format import (
    EXPORT_FORMAT,
    ImportedConversation,
    ImportedMessage,
    content_digest,
    validate_export,
)
from fara_desktop.chats.imports import FORMAT_NAMES
from fara_desktop.chats.records import finite_time
from fara_desktop.chats.schema import NEXT_CONVERSATION_ID
from fara_desktop.chats.storage import ConversationStore, StorageError
from fara_desktop.chats.tool_rounds import ToolRound, rounds_json
from fara_desktop.chats.tree import MessageTree

# Not exported as they are: keys and parents are the file's own; tool rounds are written in their stored form.
_INTERNAL_FIELDS = ("id", "conversation_id", "position", "parent_id", "sources", "tool_rounds")


def _key_of(keys: dict[int, int], message_id: int | None) -> int | None:
    return keys.get(message_id) if message_id is not None else None


@dataclass(frozen=True)
class ImportOutcome:
    """What became of one imported conversation: ``added``, ``updated`` (in place) or ``skipped`` (already here)."""

    conversation_id: int
    action: Literal["added", "updated", "skipped"]


def export_json(store: ConversationStore, conversation_id: int) -> dict[str, Any]:
    """Every branch; ``current`` names the one shown. Message keys are their order in the file. A chat made here
    gets a ``source_id`` of its own on its first export (``fara:<random>``), and what was exported is remembered,
    so importing that file back is recognised as this chat (it added a duplicate the first time)."""
    summary = store.conversation(conversation_id)
    if summary is None:
        raise StorageError(f"There is no conversation {conversation_id}.")
    messages = store.messages(conversation_id)
    tree = MessageTree(messages)
    key = {m.id: number for number, m in enumerate(messages)}
    leaf = tree.path_to(summary.leaf_id)
    source_id = store.source_id(conversation_id)
    payload = _export_payload(summary, messages, tree, key, leaf, source_id or f"fara:{uuid.uuid4().hex}")
    if source_id is None:  # made here: this export is how the file will be known when it comes back
        with store.transaction() as db:
            db.execute(
                """UPDATE conversations SET source_id = ?, source_digest = ?, source_format = ?, local_digest = ?
                   WHERE id = ? AND source_id IS NULL""",
                (
                    payload["source_id"],
                    content_digest(validate_export(payload)),
                    FORMAT_NAMES[0],
                    stored_digest(db, conversation_id),
                    conversation_id,
                ),
            )
    return payload


def _export_payload(
    summary: Any,
    messages: Sequence[Any],
    tree: MessageTree[Any],
    key: dict[int, int],
    leaf: Sequence[Any],
    source_id: str,
) -> dict[str, Any]:
    return {
        "format": EXPORT_FORMAT,
        "version": 2,
        "source_id": source_id,
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
                **({"tool_rounds": json.loads(rounds_json(m.tool_rounds))} if m.tool_rounds else {}),
            }
            for m in messages
        ],
    }


def _fenced(text: str) -> list[str]:
    """``text`` as a code block no line of it can close (a tool's result is a stranger's text)."""
    fence = "`" * max(3, max((len(run) for run in re.findall(r"`+", text)), default=0) + 1)
    return [fence, text, fence]


def _rounds_markdown(rounds: Sequence[ToolRound]) -> list[str]:
    """Each tool call of a reply as a collapsed block: the call's arguments and its result, as code."""
    lines: list[str] = []
    for tool_round in rounds:
        if tool_round.text.strip():
            lines += [tool_round.text.strip(), ""]
        for use in tool_round.uses:
            title = f"Tool {use.call.name} ({use.server or 'no server'}) — {use.outcome}"
            lines += [
                f"<details><summary>{html.escape(title)}</summary>",
                "",
                "Arguments:",
                "",
                *_fenced(use.call.arguments),
                "",
                "Result:",
                "",
                *_fenced(use.result_for_model),
                "",
                "</details>",
                "",
            ]
    return lines


def export_markdown(store: ConversationStore, conversation_id: int) -> str:
    """The branch shown, as a document: the reasoning of a reply in a collapsed ``<details>`` block."""
    summary = store.conversation(conversation_id)
    if summary is None:
        raise StorageError(f"There is no conversation {conversation_id}.")
    lines = [f"# {summary.title}", ""]
    if summary.system_prompt:
        lines += [f"> System prompt: {summary.system_prompt}", ""]
    for message in store.branch(conversation_id):
        when = time.strftime("%Y-%m-%d %H:%M", time.localtime(finite_time(message.created_at)))
        who = "You" if message.role == "user" else f"Assistant ({message.model or 'model'})"
        status = "" if message.status == "complete" else f" — {message.status}"
        lines += [f"## {who} · {when}{status}", ""]
        if message.reasoning.strip():
            lines += ["<details><summary>Reasoning</summary>", "", message.reasoning.strip(), "", "</details>", ""]
        lines += _rounds_markdown(message.tool_rounds)
        lines += [f"![picture {n}](pictures/{digest}.png)" for n, digest in enumerate(message.pictures, 1)]
        lines += [message.content, ""]
    return "\n".join(lines)


def import_json(store: ConversationStore, data: Any) -> int:
    """Add a conversation from a Fara export. The whole file is validated first (``validate_export``): a file
    with one bad value is refused whole, with the reason, and nothing is written."""
    return import_conversations(store, [validate_export(data)])[0]


def import_conversations(store: ConversationStore, conversations: Sequence[ImportedConversation]) -> list[int]:
    """Write validated conversations as new ones, all in one transaction: all of them or none."""
    with store.transaction() as db:
        return [_insert_conversation(db, conversation)[0] for conversation in conversations]


def import_or_update(
    store: ConversationStore, conversations: Sequence[ImportedConversation], source_format: str
) -> list[ImportOutcome]:
    """Like ``import_conversations``, but a conversation imported before (same ``source_id``) is skipped when it
    is the same, and otherwise added beside it — replaced in place only when the file is the same source in the
    same format (``source_format``, the format's name) and the chat here is exactly as that import left it:
    messages, title, system prompt, branch shown and thinking switch (none of which a stranger's file can vouch
    for). What is in the app is never removed by an import it could be mistaken about."""
    outcomes: list[ImportOutcome] = []
    with store.transaction() as db:
        for conversation in conversations:
            digest = content_digest(conversation)
            earlier = None
            if conversation.source_id:
                earlier = db.execute(
                    """SELECT id, source_digest, source_format, local_digest FROM conversations
                       WHERE source_id = ? ORDER BY id DESC LIMIT 1""",
                    (conversation.source_id,),
                ).fetchone()
            if earlier is not None and earlier[1] == digest:
                outcomes.append(ImportOutcome(int(earlier[0]), "skipped"))
                continue
            if (
                earlier is not None
                and earlier[2] == source_format
                and earlier[3] is not None
                and earlier[3] == stored_digest(db, int(earlier[0]))
            ):
                db.execute("DELETE FROM messages WHERE conversation_id = ?", (earlier[0],))
                _write_conversation(db, int(earlier[0]), conversation, digest, source_format)
                outcomes.append(ImportOutcome(int(earlier[0]), "updated"))
                continue
            conversation_id, _rows = _insert_conversation(db, conversation, digest, source_format)
            outcomes.append(ImportOutcome(conversation_id, "added"))
    return outcomes


def stored_digest(db: sqlite3.Connection, conversation_id: int) -> str:
    """What a chat holds here, as one hash: its title, system prompt, thinking switch, tools, collections, the
    branch shown and every message (by position; a message's parent and the leaf by their positions too)."""
    row = db.execute(
        "SELECT title, system_prompt, thinking, leaf_id, collections, tools FROM conversations WHERE id = ?",
        (conversation_id,),
    ).fetchone()
    messages = db.execute(
        """SELECT id, position, role, content, status, reasoning, parent_id, tool_rounds, sources FROM messages
           WHERE conversation_id = ? ORDER BY position, id""",
        (conversation_id,),
    ).fetchall()
    position = {m[0]: m[1] for m in messages}
    parts: list[Any] = [list(row[:3]), position.get(row[3]), row[4], row[5]] if row else []
    parts += [[m[1], m[2], m[3], m[4], m[5], position.get(m[6]), m[7], m[8]] for m in messages]
    return hashlib.sha256(json.dumps(parts, ensure_ascii=False, default=str).encode()).hexdigest()


def _insert_conversation(
    db: sqlite3.Connection,
    conversation: ImportedConversation,
    digest: str | None = None,
    source_format: str | None = None,
) -> tuple[int, list[int]]:
    cursor = db.execute(
        f"INSERT INTO conversations (id, title, created_at, updated_at) VALUES ({NEXT_CONVERSATION_ID}, '', 0, 0)"
    )
    conversation_id = int(cursor.lastrowid or 0)
    return conversation_id, _write_conversation(db, conversation_id, conversation, digest, source_format)


def _write_conversation(
    db: sqlite3.Connection,
    conversation_id: int,
    conversation: ImportedConversation,
    digest: str | None,
    source_format: str | None = None,
) -> list[int]:
    """The conversation's fields and messages into the (empty) conversation ``conversation_id``; for an import
    (``digest``), where it came from and the digest of the chat as written."""
    row_ids: list[int] = []
    for position, m in enumerate(conversation.messages):
        parent = row_ids[m.parent] if m.parent is not None else None
        cursor = db.execute(
            """INSERT INTO messages (conversation_id, position, role, content, status, model, stats,
               created_at, updated_at, parent_id, reasoning, tool_rounds, pictures)
               VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)""",
            (
                conversation_id,
                position,
                m.role,
                m.content,
                m.status,
                m.model,
                json.dumps(m.stats) if m.stats else None,
                m.created_at,
                m.updated_at,
                parent,
                m.reasoning,
                rounds_json(m.tool_rounds),
                json.dumps(list(m.pictures)),
            ),
        )
        row_ids.append(int(cursor.lastrowid or 0))
    leaf = conversation.leaf if conversation.leaf is not None else len(row_ids) - 1
    db.execute(
        """UPDATE conversations SET title = ?, system_prompt = ?, created_at = ?, updated_at = ?, thinking = ?,
           leaf_id = ?, source_id = ?, source_digest = ?, source_updated_at = ? WHERE id = ?""",
        (
            conversation.title,
            conversation.system_prompt,
            conversation.created_at,
            conversation.updated_at,
            int(conversation.thinking),
            row_ids[leaf] if row_ids else None,
            conversation.source_id if digest is not None else None,
            digest,
            conversation.updated_at if digest is not None else None,
            conversation_id,
        ),
    )
    if digest is not None:
        db.execute(
            "UPDATE conversations SET source_format = ?, local_digest = ? WHERE id = ?",
            (source_format, stored_digest(db, conversation_id), conversation_id),
        )
    return row_ids


def copy_branch(store: ConversationStore, conversation_id: int, up_to: Sequence[int], title: str) -> int:
    """A new conversation holding copies of the messages ``up_to`` (a branch, first to last): "Branch from
    here", with each reply's citations and tool calls, and the chat's collections and tools. The original is not
    changed."""
    summary = store.conversation(conversation_id)
    if summary is None:
        raise StorageError(f"There is no conversation {conversation_id}.")
    by_id = {m.id: m for m in store.messages(conversation_id)}
    originals = [by_id[i] for i in up_to if i in by_id]
    copied = [
        ImportedMessage(
            m.role,
            m.content,
            "stopped" if m.status == "streaming" else m.status,
            m.model,
            m.stats,
            m.created_at,
            m.updated_at,
            parent=index - 1 if index else None,
            reasoning=m.reasoning,
            pictures=m.pictures,
        )
        for index, m in enumerate(originals)
    ]
    now = time.time()
    branch = ImportedConversation(title, summary.system_prompt, now, now, copied, thinking=summary.thinking)
    with store.transaction() as db:
        new_id, row_ids = _insert_conversation(db, branch)
        db.executemany(
            "UPDATE messages SET sources = (SELECT sources FROM messages WHERE id = ?), "
            "tool_rounds = (SELECT tool_rounds FROM messages WHERE id = ?) WHERE id = ?",
            [(original.id, original.id, copy) for original, copy in zip(originals, row_ids, strict=True)],
        )
        db.execute(
            "UPDATE conversations SET collections = (SELECT collections FROM conversations WHERE id = ?), "
            "tools = (SELECT tools FROM conversations WHERE id = ?) WHERE id = ?",
            (conversation_id, conversation_id, new_id),
        )
    return new_id
