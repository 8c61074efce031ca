"""The open conversation, kept in step with the database: nothing the user typed is ever only in memory.

The user's message is committed before the reply is requested; the reply is a row from its first token on,
saved at most a second apart while it streams and finalised when it finishes, is stopped or fails.

When the disk refuses a save while a reply streams or ends, the text stays in memory, ``save_problem`` says why,
and every later save (and ``retry_pending``) tries again; the conversation never waits on the disk. Regenerate and
edit-and-resend keep the messages they replace until the replacement reply exists, then delete them in the same
transaction that saves it: a failed reply loses nothing.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from dataclasses import asdict
from typing import Any

from fara_desktop.chats.export_format import MessageStatus
from fara_desktop.chats.storage import ConversationStore, StorageError, StoredMessage, title_from
from fara_desktop.engine.types import ChatMessage, GenerationStats

log = logging.getLogger(__name__)

# The final state of a reply the disk refused: (content, status, stats, model, replacing).
_UnsavedReply = tuple[str, MessageStatus, dict[str, Any] | None, str | None, tuple[int, int] | None]

DEFAULT_SYSTEM_PROMPT = "You are a helpful assistant."
SAVE_INTERVAL_S = 1.0


class ChatSession:
    """One conversation: its messages (mirrored from the store) and which of them the model still sees."""

    def __init__(self, store: ConversationStore, system_prompt: str = DEFAULT_SYSTEM_PROMPT) -> None:
        self.store = store
        self.default_system_prompt = system_prompt
        self.conversation_id: int | None = None
        self.system_prompt = system_prompt
        self.messages: list[StoredMessage] = []
        self.context_start = 0
        self._reply: StoredMessage | None = None
        self._reply_parts: list[str] = []
        self._last_save = 0.0
        # Positions [first, end) of messages a new turn replaces; deleted once the new reply is saved.
        self._replacing: tuple[int, int] | None = None
        self._unsaved: dict[int, _UnsavedReply] = {}
        self.save_problem: str | None = None

    # ------------------------------------------------------------------ opening

    def new(self) -> None:
        """A fresh, empty conversation; it gets a database row with its first message."""
        if self._reply is not None:
            self.end_reply(None, "stopped")
        self.conversation_id = None
        self.system_prompt = self.default_system_prompt
        self.messages = []
        self.context_start = 0
        self._replacing = None

    def open(self, conversation_id: int) -> None:
        if self._reply is not None:  # a reply still streaming into the old conversation is kept as stopped
            self.end_reply(None, "stopped")
        summary = self.store.conversation(conversation_id)
        if summary is None:
            raise KeyError(conversation_id)
        self.retry_pending()
        self.conversation_id = conversation_id
        self.system_prompt = summary.system_prompt
        self.messages = self._with_unsaved(self.store.messages(conversation_id))
        self.context_start = 0
        self._replacing = None

    def reload(self) -> None:
        """Read the open conversation again from the database (after a write that did not happen)."""
        if self.conversation_id is not None:
            self.messages = self._with_unsaved(self.store.messages(self.conversation_id))
            self.context_start = 0
        self._replacing = None

    def set_system_prompt(self, text: str) -> None:
        self.system_prompt = text
        if self.conversation_id is not None:
            self.store.set_system_prompt(self.conversation_id, text)

    # ------------------------------------------------------------------ turns

    @property
    def replying(self) -> bool:
        return self._reply is not None

    @staticmethod
    def in_prompt(message: StoredMessage) -> bool:
        """Whether the model sees this message (trimming counts only these)."""
        return message.role in ("user", "assistant") and message.status != "failed" and bool(message.content.strip())

    def prompt_messages(self) -> list[ChatMessage]:
        system = [ChatMessage("system", self.system_prompt)] if self.system_prompt.strip() else []
        visible = [
            ChatMessage(m.role, m.content)  # type: ignore[arg-type]
            for m in self.messages[self.context_start :]
            if self.in_prompt(m)
        ]
        return system + visible

    def add_user_message(self, text: str) -> StoredMessage:
        self.retry_pending()
        if self.conversation_id is None:
            self.conversation_id = self.store.create_conversation(title_from(text), self.system_prompt)
        message = self.store.add_message(self.conversation_id, "user", text)
        self.messages.append(message)
        return message

    def begin_reply(self, model: str | None) -> StoredMessage:
        assert self.conversation_id is not None, "a reply needs a conversation"
        reply = self.store.add_message(self.conversation_id, "assistant", "", status="streaming", model=model)
        self.messages.append(reply)
        self._reply, self._reply_parts, self._last_save = reply, [], time.monotonic()
        return reply

    def reply_text(self, text: str) -> None:
        """Tokens arrived; saved to the database at most once a second."""
        if self._reply is None:
            return
        self._reply_parts.append(text)
        now = time.monotonic()
        if now - self._last_save >= SAVE_INTERVAL_S:
            self._last_save = now
            try:
                self.store.update_message(self._reply.id, "".join(self._reply_parts))
            except StorageError as exc:  # kept in memory; the final save (and each later one) tries again
                self.save_problem = str(exc)

    def end_reply(
        self,
        text: str | None,
        status: MessageStatus,
        stats: GenerationStats | None = None,
        model: str | None = None,
        error: str | None = None,
    ) -> StoredMessage | None:
        reply = self._reply
        if reply is None:
            return None
        content = text if text is not None else "".join(self._reply_parts)
        stats_data: dict[str, Any] | None = asdict(stats) if stats else None
        if error:
            stats_data = {**(stats_data or {}), "error": error}
        # The replaced messages go only when their replacement has text; a failed or empty reply keeps them.
        pending = self._replacing
        replacing = pending if content.strip() and status != "failed" else None
        self._replacing = None
        try:
            self.store.update_message(reply.id, content, status, stats_data, model, replacing)
        except StorageError as exc:
            self.save_problem = str(exc)
            self._unsaved[reply.id] = (content, status, stats_data, model, replacing)
        final = StoredMessage(
            reply.id,
            reply.conversation_id,
            reply.position,
            "assistant",
            content,
            status,
            model or reply.model,
            stats_data,
            reply.created_at,
            time.time(),
        )
        if reply in self.messages:  # the user may have switched to another conversation meanwhile
            self.messages[self.messages.index(reply)] = final
        self._reply, self._reply_parts = None, []
        if pending is not None and replacing is None and self.conversation_id == reply.conversation_id:
            self.reload()  # the replacement failed: the earlier versions, still stored, are shown again
        return final

    def retry_pending(self) -> bool:
        """Save what the disk refused before; True when nothing is left unsaved."""
        for message_id, (content, status, stats, model, replacing) in list(self._unsaved.items()):
            try:
                self.store.update_message(message_id, content, status, stats, model, replacing)
            except StorageError as exc:
                self.save_problem = str(exc)
                return False
            del self._unsaved[message_id]
        if not self._unsaved:
            self.save_problem = None
        return not self._unsaved

    @property
    def unsaved_count(self) -> int:
        return len(self._unsaved)

    def close(self) -> None:
        """The app is quitting and the engine is gone: a reply still streaming is kept as stopped, and replies the
        disk refused get a last try (what still fails is logged; the store is closed by its owner)."""
        if self._reply is not None:
            self.end_reply(None, "stopped")
        if not self.retry_pending():
            log.error("%d reply(ies) could not be saved before quitting", len(self._unsaved))

    def _with_unsaved(self, messages: list[StoredMessage]) -> list[StoredMessage]:
        """Rows from the database, with the text of replies whose final save is still pending."""
        return [
            dataclasses.replace(m, content=self._unsaved[m.id][0], status=self._unsaved[m.id][1])
            if m.id in self._unsaved
            else m
            for m in messages
        ]

    # ------------------------------------------------------------------ rewriting history

    def replace_from(self, index: int) -> None:
        """The message at ``index`` and all later ones are to be replaced (regenerate; edit and resend). They
        leave the conversation the model sees now, and the database once the new reply is saved."""
        if self.conversation_id is None or not 0 <= index < len(self.messages):
            return
        first = self.messages[index].position
        self._replacing = (first, self.messages[-1].position + 1)
        del self.messages[index:]
        self.context_start = min(self.context_start, len(self.messages))

    def apply_trim(self, dropped: int) -> None:
        """The engine left out the ``dropped`` oldest messages it was sent; stop sending them."""
        skipped = 0
        index = self.context_start
        while index < len(self.messages) and skipped < dropped:
            if self.in_prompt(self.messages[index]):
                skipped += 1
            index += 1
        self.context_start = index
