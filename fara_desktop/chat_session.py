"""The open conversation, kept in step with the database: nothing the user typed is ever only in memory.

The user's message is committed before the reply is requested; the reply is a row from its first token on,
saved at most a second apart while it streams and finalised when it finishes, is stopped or fails.
"""

from __future__ import annotations

import time
from dataclasses import asdict
from typing import Any

from fara_desktop.engine.types import ChatMessage, GenerationStats
from fara_desktop.storage import ConversationStore, StoredMessage, title_from

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

    # ------------------------------------------------------------------ opening

    def new(self) -> None:
        """A fresh, empty conversation; it gets a database row with its first message."""
        if self._reply is not None:
            self.end_reply(None, "stopped")
        self.conversation_id = None
        self.system_prompt = self.default_system_prompt
        self.messages = []
        self.context_start = 0

    def open(self, conversation_id: int) -> None:
        if self._reply is not None:  # a reply still streaming into the old conversation is kept as stopped
            self.end_reply(None, "stopped")
        summary = self.store.conversation(conversation_id)
        if summary is None:
            raise KeyError(conversation_id)
        self.conversation_id = conversation_id
        self.system_prompt = summary.system_prompt
        self.messages = self.store.messages(conversation_id)
        self.context_start = 0

    def set_system_prompt(self, text: str) -> None:
        self.system_prompt = text
        if self.conversation_id is not None:
            self.store.set_system_prompt(self.conversation_id, text)

    # ------------------------------------------------------------------ turns

    @property
    def replying(self) -> bool:
        return self._reply is not None

    def prompt_messages(self) -> list[ChatMessage]:
        system = [ChatMessage("system", self.system_prompt)] if self.system_prompt.strip() else []
        visible = [
            ChatMessage(m.role, m.content)  # type: ignore[arg-type]
            for m in self.messages[self.context_start :]
            if m.role in ("user", "assistant") and m.status != "failed" and m.content.strip()
        ]
        return system + visible

    def add_user_message(self, text: str) -> StoredMessage:
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
            self.store.update_message(self._reply.id, "".join(self._reply_parts))

    def end_reply(
        self,
        text: str | None,
        status: str,
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
        self.store.update_message(reply.id, content, status, stats_data, model)
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
        return final

    # ------------------------------------------------------------------ rewriting history

    def truncate_from(self, index: int) -> None:
        """Forget the message at ``index`` and all later ones (regenerate; edit and resend)."""
        if self.conversation_id is None or not 0 <= index < len(self.messages):
            return
        self.store.delete_messages_from(self.conversation_id, self.messages[index].position)
        del self.messages[index:]
        self.context_start = min(self.context_start, len(self.messages))

    def last_user_index(self) -> int | None:
        return next((i for i in range(len(self.messages) - 1, -1, -1) if self.messages[i].role == "user"), None)

    def apply_trim(self, dropped: int) -> None:
        """The engine left out the ``dropped`` oldest messages it was sent; stop sending them."""
        skipped = 0
        index = self.context_start
        while index < len(self.messages) and skipped < dropped:
            message = self.messages[index]
            if message.role in ("user", "assistant") and message.status != "failed" and message.content.strip():
                skipped += 1
            index += 1
        self.context_start = index
