"""The open conversation, kept in step with the database: nothing the user typed is ever only in memory.

The user's message is committed before the reply is requested; the reply is a row from its first token on,
saved at most a second apart while it streams and finalised when it finishes, is stopped or fails. A reply's
reasoning is kept apart from its answer.

When the disk refuses a save while a reply streams or ends, the text stays in memory, ``save_problem`` says why,
and every later save (and ``retry_pending``) tries again; the conversation never waits on the disk.

A conversation is a tree (``chats.tree``): regenerate and edit-and-resend add a sibling of the message they redo,
and nothing is deleted; the session holds the branch shown. A regenerate that fails before writing anything
goes back to the branch shown before.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from fara_desktop.chats.draft import ReplyDraft
from fara_desktop.chats.exchange import copy_branch
from fara_desktop.chats.records import MessageStatus, StoredMessage, title_from
from fara_desktop.chats.storage import ConversationStore, StorageError
from fara_desktop.chats.tool_rounds import ToolRound, round_messages
from fara_desktop.chats.tree import MessageTree, SiblingPlace
from fara_desktop.vocabulary.messages import ChatMessage
from fara_desktop.vocabulary.pictures import AttachedPicture
from fara_desktop.vocabulary.sources import Source
from fara_desktop.vocabulary.stats import GenerationStats

log = logging.getLogger(__name__)

# The final state of a reply the disk refused: (content, status, stats, model, reasoning).
_UnsavedReply = tuple[str, MessageStatus, dict[str, Any] | None, str | None, str, tuple[ToolRound, ...]]

DEFAULT_SYSTEM_PROMPT = "You are a helpful assistant."
SAVE_INTERVAL_S = 1.0


class ChatSession:
    """One conversation: the branch shown (mirrored from the store) and which of its messages the model still sees."""

    def __init__(
        self,
        store: ConversationStore,
        system_prompt: str = DEFAULT_SYSTEM_PROMPT,
        picture_file: Callable[[str], Path] | None = None,
    ) -> None:
        """``picture_file``: where the picture store keeps a digest's file (None: pictures are not sent)."""
        self.store = store
        self.picture_file = picture_file
        self.default_system_prompt = system_prompt
        self.conversation_id: int | None = None
        self.system_prompt = system_prompt
        self.thinking = True  # the per-chat switch for models whose template can turn reasoning off
        self.default_thinking = True  # where a new chat's switch starts: where the model's template starts
        self.collections: tuple[str, ...] = ()  # the document collections this chat searches
        self.tools: tuple[str, ...] = ()  # the tools this chat offers its model ("server/tool")
        self.rounds: list[ToolRound] = []  # the reply being written: its tool calls so far
        self.messages: list[StoredMessage] = []
        self.tree: MessageTree[StoredMessage] = MessageTree([])
        self.context_start = 0
        self._reply: StoredMessage | None = None
        self.draft = ReplyDraft()  # the reply being written: the one copy of its text on this side of the queue
        self._last_save = 0.0
        self._restore_leaf: int | None = None  # the branch to go back to when a regenerate fails empty-handed
        self._unsaved: dict[int, _UnsavedReply] = {}
        self.save_problem: str | None = None

    # ------------------------------------------------------------------ opening

    def new(self) -> None:
        """A fresh, empty conversation; it gets a database row with its first message."""
        if self._reply is not None:
            self.end_reply(None, "stopped")
        self.conversation_id = None
        self.system_prompt = self.default_system_prompt
        self.thinking = self.default_thinking
        self.collections = ()
        self.tools = ()
        self.messages = []
        self.tree = MessageTree([])
        self.context_start = 0
        self._restore_leaf = None

    def open(self, conversation_id: int) -> None:
        if self._reply is not None:  # a reply still streaming into the old conversation is kept as stopped
            self.end_reply(None, "stopped")
        summary = self.store.conversation(conversation_id)
        if summary is None:
            raise KeyError(conversation_id)
        self.retry_pending()
        self.conversation_id = conversation_id
        self.system_prompt = summary.system_prompt
        self.thinking = summary.thinking
        self.collections = summary.collections
        self.tools = summary.tools
        self.reload()

    def reload(self) -> None:
        """Read the open conversation's branch again from the database."""
        if self.conversation_id is not None:
            summary = self.store.conversation(self.conversation_id)
            self.tree = MessageTree(self._with_unsaved(self.store.messages(self.conversation_id)))
            self.messages = self.tree.path_to(summary.leaf_id if summary else None)
            self.context_start = 0
        self._restore_leaf = None

    def set_system_prompt(self, text: str) -> None:
        self.system_prompt = text
        if self.conversation_id is not None:
            self.store.set_system_prompt(self.conversation_id, text)

    def set_collections(self, names: tuple[str, ...]) -> None:
        self.collections = tuple(names)
        if self.conversation_id is not None:
            self.store.set_collections(self.conversation_id, self.collections)

    def set_tools(self, keys: tuple[str, ...]) -> None:
        self.tools = tuple(keys)
        if self.conversation_id is not None:
            self.store.set_tools(self.conversation_id, self.tools)

    def start_thinking_at(self, default: bool) -> None:
        """A model whose template starts thinking (or not) was loaded: new chats, and this one if it has no
        message yet, start there; a chat with messages keeps its own switch."""
        self.default_thinking = default
        if self.conversation_id is None:
            self.thinking = default

    def set_thinking(self, thinking: bool) -> None:
        self.thinking = thinking
        if self.conversation_id is not None:
            self.store.set_thinking(self.conversation_id, thinking)

    # ------------------------------------------------------------------ turns

    @property
    def replying(self) -> bool:
        return self._reply is not None

    @staticmethod
    def in_prompt(message: StoredMessage) -> bool:
        """Whether the model sees this message (trimming counts only these)."""
        said = bool(message.content.strip()) or bool(message.tool_rounds) or bool(message.pictures)
        return message.role in ("user", "assistant") and message.status != "failed" and said

    def prompt_messages(self) -> list[ChatMessage]:
        """What the model is sent: answers as content, each reply's reasoning apart (the template decides whether
        it goes back to the model)."""
        system = [ChatMessage("system", self.system_prompt)] if self.system_prompt.strip() else []
        visible: list[ChatMessage] = []
        for m in self.messages[self.context_start :]:
            if not self.in_prompt(m):
                continue
            visible += round_messages(m.tool_rounds)  # the tools a reply called come before its answer
            if m.content.strip() or m.pictures or not m.tool_rounds:
                seen = self.attached(m.pictures)
                visible.append(ChatMessage(m.role, m.content, m.reasoning, pictures=seen))  # type: ignore[arg-type]
        return system + visible

    def attached(self, digests: Sequence[str]) -> tuple[AttachedPicture, ...]:
        """The pictures of these digests, as the model is sent them (their files in the picture store)."""
        where = self.picture_file
        return tuple(AttachedPicture(d, where(d)) for d in digests) if where is not None else ()

    def continuation_prompt(self) -> list[ChatMessage]:
        """The prompt that goes on with the reply being written after its tool calls: the chat, then its rounds."""
        return self.prompt_messages() + round_messages(self.rounds)

    def add_tool_round(self, tool_round: ToolRound) -> None:
        """The reply's calls were decided and run: kept with it (saved at once: results are not asked for twice)."""
        if self._reply is None:
            return
        self.rounds.append(tool_round)
        try:
            self.store.update_message(self._reply.id, "", tool_rounds=self.rounds)
        except StorageError as exc:  # kept in memory; the reply's final save tries again
            self.save_problem = str(exc)

    def _add(
        self,
        role: str,
        content: str,
        status: MessageStatus = "complete",
        model: str | None = None,
        pictures: Sequence[str] = (),
    ) -> StoredMessage:
        assert self.conversation_id is not None
        parent = self.messages[-1].id if self.messages else None
        message = self.store.add_message(
            self.conversation_id, role, content, status, model, parent, first_turn=parent is None, pictures=pictures
        )
        self.messages.append(message)
        self.tree = MessageTree([*self.tree.by_id.values(), message])
        return message

    def add_user_message(self, text: str, pictures: Sequence[str] = ()) -> StoredMessage:
        self.retry_pending()
        self._restore_leaf = None  # an edited message stays shown even when its reply fails
        if self.conversation_id is None:
            self.conversation_id = self.store.create_conversation(title_from(text), self.system_prompt)
            if not self.thinking:
                self.store.set_thinking(self.conversation_id, False)
            if self.collections:
                self.store.set_collections(self.conversation_id, self.collections)
            if self.tools:
                self.store.set_tools(self.conversation_id, self.tools)
        return self._add("user", text, pictures=pictures)

    def begin_reply(self, model: str | None, sources: tuple[Source, ...] = ()) -> StoredMessage:
        """The reply's row, from its first token on; ``sources``: the passages of documents it is given."""
        assert self.conversation_id is not None, "a reply needs a conversation"
        reply = self._add("assistant", "", "streaming", model)
        if sources:
            self.store.update_message(reply.id, "", sources=sources)
            reply = dataclasses.replace(reply, sources=sources)
            self.messages[-1] = reply
            self.tree = MessageTree([reply if m.id == reply.id else m for m in self.tree.by_id.values()])
        self._reply, self.draft = reply, ReplyDraft()
        self.rounds = []
        self._last_save = time.monotonic()
        return reply

    def reply_text(self, text: str, reasoning: bool = False, thinking_s: float | None = None) -> None:
        """Text arrived (of the answer, or of the reasoning before it); saved at most once a second."""
        if self._reply is None:
            return
        self.draft.add(text, reasoning, thinking_s)
        now = time.monotonic()
        if now - self._last_save >= SAVE_INTERVAL_S:
            self._last_save = now
            try:
                self.store.update_message(self._reply.id, self.draft.answer, reasoning=self.draft.reasoning)
            except StorageError as exc:  # kept in memory; the final save (and each later one) tries again
                self.save_problem = str(exc)

    def end_reply(
        self,
        text: str | None,
        status: MessageStatus,
        stats: GenerationStats | None = None,
        model: str | None = None,
        error: str | None = None,
        reasoning: str | None = None,
        waited_s: float | None = None,
    ) -> StoredMessage | None:
        """``waited_s``: what the user waited, from asking to the reply's first words (kept with its figures)."""
        reply = self._reply
        if reply is None:
            return None
        content = text if text is not None else self.draft.answer
        thought = reasoning if reasoning is not None else self.draft.reasoning
        stats_data: dict[str, Any] | None = asdict(stats) if stats else None
        if error:
            stats_data = {**(stats_data or {}), "error": error}
        if waited_s is not None and stats_data is not None:
            stats_data["waited_s"] = round(waited_s, 3)
        rounds, self.rounds = tuple(self.rounds), []
        self._reply, self.draft = None, ReplyDraft()
        restore, self._restore_leaf = self._restore_leaf, None
        if status == "failed" and not content.strip() and not thought.strip() and not rounds:
            return self._drop_failed(reply, restore, stats_data)
        try:
            self.store.update_message(reply.id, content, status, stats_data, model, thought, tool_rounds=rounds)
        except StorageError as exc:
            self.save_problem = str(exc)
            self._unsaved[reply.id] = (content, status, stats_data, model, thought, rounds)
        final = dataclasses.replace(
            reply,
            content=content,
            status=status,
            model=model or reply.model,
            stats=stats_data,
            updated_at=time.time(),
            reasoning=thought,
            tool_rounds=rounds,
        )
        self._replace_shown(reply, final)
        return final

    def _drop_failed(self, reply: StoredMessage, restore: int | None, stats: dict[str, Any] | None) -> StoredMessage:
        """A reply that failed before writing anything is not kept (the error is shown); a regenerate goes back to
        the reply it was redoing."""
        try:
            self.store.delete_message(reply.id, restore if restore is not None else reply.parent_id)
        except StorageError as exc:
            self.save_problem = str(exc)
        if self.conversation_id == reply.conversation_id:
            self.reload()
        return dataclasses.replace(reply, status="failed", stats=stats)

    def _replace_shown(self, old: StoredMessage, new: StoredMessage) -> None:
        if old in self.messages:  # the user may have switched to another conversation meanwhile
            self.messages[self.messages.index(old)] = new
        if old.id in self.tree.by_id:
            self.tree = MessageTree([new if m.id == old.id else m for m in self.tree.by_id.values()])

    def retry_pending(self) -> bool:
        """Save what the disk refused before; True when nothing is left unsaved."""
        for message_id, (content, status, stats, model, reasoning, rounds) in list(self._unsaved.items()):
            try:
                self.store.update_message(message_id, content, status, stats, model, reasoning, tool_rounds=rounds)
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
            dataclasses.replace(
                m,
                content=self._unsaved[m.id][0],
                status=self._unsaved[m.id][1],
                reasoning=self._unsaved[m.id][4],
                tool_rounds=self._unsaved[m.id][5],
            )
            if m.id in self._unsaved
            else m
            for m in messages
        ]

    # ------------------------------------------------------------------ branches

    def redo_from(self, index: int) -> None:
        """The message at ``index`` is to be redone (regenerate; edit and resend): the branch shown stops before
        it, and the next message becomes its sibling. The earlier version stays in the tree."""
        if self.conversation_id is None or not 0 <= index < len(self.messages):
            return
        self._restore_leaf = self.messages[-1].id
        del self.messages[index:]
        self.context_start = min(self.context_start, len(self.messages))

    def place(self, index: int) -> SiblingPlace:
        """Which version of its turn the message at ``index`` is (``‹ 2/3 ›``)."""
        return self.tree.place(self.messages[index])

    def switch_version(self, index: int, step: int) -> bool:
        """Show another version of the message at ``index`` and the branch that follows it; False when there is
        none that way (or a reply is streaming)."""
        if self._reply is not None or self.conversation_id is None or not 0 <= index < len(self.messages):
            return False
        leaf = self.tree.sibling_leaf(self.messages[index], step)
        if leaf is None or leaf == self.messages[-1].id:
            return False
        self.store.set_leaf(self.conversation_id, leaf)
        self.reload()
        return True

    def branch_off(self, index: int, before: bool = False) -> int:
        """ "Branch from here": a new conversation with this branch up to the message at ``index`` (``before``: up
        to the one before it — a question branched to be asked again); returns its id."""
        assert self.conversation_id is not None and 0 <= index < len(self.messages)
        summary = self.store.conversation(self.conversation_id)
        base = summary.title if summary else "Chat"
        kept = self.messages[: index if before else index + 1]
        return copy_branch(self.store, self.conversation_id, [m.id for m in kept], f"{base} (branch)"[:200])

    def apply_trim(self, dropped: int) -> None:
        """The engine left out the ``dropped`` oldest messages it was sent; stop sending them."""
        skipped = 0
        index = self.context_start
        while index < len(self.messages) and skipped < dropped:
            if self.in_prompt(self.messages[index]):
                skipped += 1
            index += 1
        self.context_start = index
