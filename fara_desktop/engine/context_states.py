"""Whose chat is in the llama.cpp context, and the saved states that bring a chat back without reading it again:
RAM snapshots of the chats left, checkpoints where prompts end (models whose state cannot be cut back), and the
files on disk that outlive a restart. Never a state the new prompt cannot continue: a recurrent state serves only
where it ends exactly on the prompt's prefix (``usable_prefix``), a sliding-window cache only where it still holds
the window before the cut (``can_cut_back``). Runs on the inference thread only, as the backend that owns it."""

from __future__ import annotations

import logging
from collections.abc import Hashable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from fara_desktop.engine.api_slots import ApiSlots
from fara_desktop.engine.kv_disk import CHECKPOINT_SLOT, MIN_TOKENS, KVDiskStore, KVDiskWriter, StateIdentity
from fara_desktop.engine.kv_states import KVSnapshot, KVStateCache, usable_prefix
from fara_desktop.engine.llama_state import cached_prefix, restore_sequence, snapshot_sequence
from fara_desktop.engine.types import WINDOW, ApiClient, ApiSlot, SequenceSlot, principal_of

if TYPE_CHECKING:
    from llama_cpp import Llama

log = logging.getLogger(__name__)


class ContextStates:
    """The context's owner and the states kept for every chat, for one loaded model at a time."""

    def __init__(self, store: KVDiskStore | None) -> None:
        self.cache = KVStateCache()
        self.owner: Hashable | None = None  # the conversation whose tokens are in the context now
        self.principal = WINDOW  # whose tokens the context holds: only they may reuse them (``engine.types``)
        self.api_slots = ApiSlots()  # which kept conversation of an API principal a request continues
        self._disk = store
        self._writer = KVDiskWriter(store) if store is not None else None
        self._identity: StateIdentity | None = None  # what the loaded model's states are bound to
        self._kept: tuple[Hashable, int, int] | None = None  # the state last handed to the writer
        # The state restored into the context and not yet decoded on (RAM snapshot, and its file when it came from
        # disk): one that fails in use is discarded and the prompt read again (``discard_restored``). Only while
        # the context holds it: a switch or a reset forgets it, so another chat's failure never blames it.
        self.restored_untried: tuple[KVSnapshot, Path | None] | None = None
        # False for recurrent and hybrid models: their context cannot be cut back to a prefix, so a prompt that
        # leaves what the context holds goes back to a checkpoint saved exactly at a prompt's end, or is re-read.
        self.rewindable = True
        self.window = 0  # a sliding-window model's window: its states restored serve only from their end
        self._checkpointed: tuple[Hashable, int, int] | None = None  # the context last kept as a checkpoint

    @property
    def store(self) -> KVDiskStore | None:
        return self._disk

    @property
    def identity(self) -> StateIdentity | None:
        return self._identity

    def attach(self, identity: StateIdentity | None, rewindable: bool, window: int = 0) -> None:
        """A model was loaded (its states on disk are bound to ``identity``)."""
        self._identity = identity
        self.rewindable = rewindable
        self.window = window
        self._checkpointed = None

    def detach(self) -> None:
        """The model was unloaded: its states in RAM go (those on disk stay for its next load)."""
        self.cache.clear()
        self.api_slots.clear()
        self.owner = None
        self._identity = None
        self._kept = None
        self._checkpointed = None

    def start_over(self, llm: Llama | None, snapshots: bool) -> None:
        """The context is emptied and has no owner; with ``snapshots``, every state kept in RAM goes too."""
        if llm is not None:
            llm.reset()
        self.owner = None
        self.restored_untried = None
        if snapshots:
            self.cache.clear()
            self.api_slots.clear()

    def set_aside(self, llm: Llama) -> None:
        """The context is about to be used for something else (a measurement): the chat in it is kept in RAM."""
        if self.owner is not None:
            self._switch(llm, None, [])
            self.owner = None

    def restore_longest_prefix(self, llm: Llama, conversation: Hashable | None, tokens: list[int]) -> int:
        """Bring the context to the longest usable prefix of ``tokens`` (another chat's state, a checkpoint, or
        what it holds — of the same principal only) and return its length: the context then holds exactly that
        many of ``tokens``'s first. An API client's request continues one of its principal's slots."""
        if isinstance(conversation, ApiClient):
            conversation, dropped = self.api_slots.slot_for(conversation.principal, tokens)
            self.forget_slots(dropped)
        if conversation != self.owner:
            self._switch(llm, conversation, tokens)
        elif principal_of(conversation) != self.principal:  # no owner, and another principal's tokens (set aside)
            self._enter(llm, principal_of(conversation))
        elif (
            not self.rewindable
            and conversation is not None
            and cached_prefix(llm, tokens, self.rewindable) < llm.n_tokens
        ):
            self._restore_saved_state(llm, conversation, tokens)  # a Regenerate or an Edit: back to a checkpoint
        self.owner = conversation
        cached = cached_prefix(llm, tokens, self.rewindable)
        if cached == 0 and llm.n_tokens:
            llm.reset()  # nothing can be kept: never a cut that would continue wrong (see ``can_cut_back``)
            self.restored_untried = None
        elif not self.rewindable:
            self.checkpoint(llm, conversation)  # the state about to be read past
        return cached

    def forget_slots(self, dropped: list[ApiSlot]) -> None:
        """Slots an API principal no longer keeps: their states go, the model's own context's and the sequences'."""
        for slot in dropped:
            self.cache.forget(slot)
            self.cache.forget(SequenceSlot(slot.principal, slot.number))

    def continuable_tokens(
        self, llm: Llama, conversation: Hashable | None, tokens: Sequence[int]
    ) -> list[Sequence[int]]:
        """The tokens of the states a chat's prompt may continue — the context (its own, or the chat a Branch
        leaves), its snapshot in RAM and the closest other, its files on disk: what the model read and wrote,
        which the prompt may be spelled with (``own_tokens``)."""
        if conversation is None:
            return []  # a one-off request
        kept: list[Sequence[int]] = []
        if principal_of(conversation) == self.principal and llm.n_tokens:
            kept.append(llm.input_ids[: llm.n_tokens].tolist())
        if isinstance(conversation, ApiClient):  # the context and the principal's closest slot: none is on disk
            closest = self.cache.closest(tokens, True, conversation.principal)
            return [*kept, closest.tokens] if closest is not None else kept
        for snapshot in (self.cache.get(conversation), self.cache.closest(tokens, True, principal_of(conversation))):
            if snapshot is not None:
                kept.append(snapshot.tokens)
        if self._disk is not None and self._identity is not None:
            for slot in ("", CHECKPOINT_SLOT):
                stored = self._disk.header(self._disk.file_for(conversation, self._identity, slot), self._identity)
                if stored is not None:
                    kept.append(stored.tokens)
        return kept

    def _switch(self, llm: Llama, conversation: Hashable | None, tokens: list[int]) -> None:
        """Keep the KV state of the conversation we leave; bring back the one we return to if it helps (or, for a
        conversation new to the cache, such as a branch, the one that shares most of its prompt): from memory,
        else from disk (a chat reopened after a restart)."""
        if self.owner is not None:
            snapshot = snapshot_sequence(llm)
            if snapshot is not None:
                self.cache.put(self.owner, snapshot)
        self.restored_untried = None  # a state restored for the chat left is not this one's to blame
        self._enter(llm, principal_of(conversation))
        if conversation is None:
            return  # a one-off request reuses whatever prefix of the window's it shares, and is not kept
        self._restore_saved_state(llm, conversation, tokens)

    def _enter(self, llm: Llama, principal: str) -> None:
        """The context is about to serve ``principal``: another's tokens in it go (they are kept, if at all, as
        their owner's snapshot) — reusing them would tell it, by the time to the first token, what was sent."""
        if principal != self.principal:
            llm.reset()
            self.principal = principal
            self.restored_untried = None

    def _restore_saved_state(self, llm: Llama, conversation: Hashable, tokens: list[int]) -> None:
        """Restore the saved state (RAM, else disk) that saves the most reading of ``tokens``, when it saves more
        than the context holds now. A recurrent model's states count only where they end exactly on a prefix."""
        rewind, window = self.rewindable, self.window
        current = cached_prefix(llm, tokens, rewind)
        closest = self.cache.closest(tokens, rewind, principal_of(conversation), window)
        candidates = [s for s in (self.cache.get(conversation), closest) if s]
        scored = [(usable_prefix(s.tokens, tokens, rewind, window), s) for s in candidates]
        shared, saved = max(scored, key=lambda item: item[0], default=(0, None))
        source: Path | None = None
        if max(current, shared) < len(tokens) - 1:
            stored = self._stored_state(conversation, tokens, max(current, shared))
            if stored is not None:
                (saved, source), shared = stored, usable_prefix(stored[0].tokens, tokens, rewind, window)
        if saved is not None and shared > current:
            if restore_sequence(llm, saved):
                self.restored_untried = (saved, source)
            else:  # refused by llama.cpp: never again (a file would be tried at every open of its chat)
                log.info("Could not restore the KV state of conversation %s; it will be re-read", conversation)
                self.cache.discard(saved)
                if source is not None and self._disk is not None:
                    self._disk.discard(source, "llama.cpp refused to restore it")

    def _stored_state(
        self, conversation: Hashable, tokens: Sequence[int], better_than: int
    ) -> tuple[KVSnapshot, Path | None] | None:
        """The state handed to the disk that shares more than ``better_than`` tokens with the prompt, and its file:
        one not yet written is taken as it is in memory (waiting for its write held a Branch or an Edit right
        after a reply for as long as the disk took: seconds at 1.7B); one on disk is read and checked."""
        if self._disk is None or self._identity is None or isinstance(conversation, ApiSlot):
            return None  # an API client's conversations are kept in RAM only, and read no chat's file
        if self._writer is not None:
            held = self._writer.in_flight(conversation, self._identity)
            scored = [(usable_prefix(s.tokens, tokens, self.rewindable, self.window), s) for s in held]
            length, best = max(scored, key=lambda item: item[0], default=(0, None))
            if best is not None and length > better_than:
                return best, None
        stored = self._disk.best_for(conversation, self._identity, tokens, better_than, self.rewindable, self.window)
        loaded = self._disk.load(stored.path, self._identity) if stored is not None else None
        return (loaded, stored.path) if loaded is not None and stored is not None else None

    def batch_interrupted(self, llm: Llama) -> None:
        """llama.cpp stopped (or failed) inside a batch. A KV cache drops that batch's cells and holds exactly
        ``input_ids[:n_tokens]``; a recurrent state has taken in part of the batch and cannot give it back, so the
        context is emptied and has no owner: the next prompt goes back to the checkpoint kept where the reading
        began (``restore_longest_prefix`` saves one before reading past a prompt's end), or is read again — never
        continued from a state that holds part of a batch."""
        if self.rewindable:
            return
        llm.reset()
        self.owner = None
        self.restored_untried = None
        self._kept = None
        self._checkpointed = None

    def discard_restored(self, llm: Llama, why: str) -> bool:
        """The state restored into the context failed in use: it is dropped (from RAM, and its file from disk: a
        state that restores but cannot be decoded would otherwise fail every reply of its chat, and of every chat
        sharing its start) and the context emptied, so the prompt is read again. False: nothing was restored."""
        if self.restored_untried is None:
            return False
        snapshot, source = self.restored_untried
        self.restored_untried = None
        self.cache.discard(snapshot)
        if source is not None and self._disk is not None:
            self._disk.discard(source, why)
        log.warning("A restored chat state failed in use (%s); the chat is read again", why)
        llm.reset()
        self._kept = None
        return True

    def save_to_disk(self, llm: Llama | None, wait: bool = False) -> None:
        """The chat in the context goes to disk: its state is copied out of llama.cpp here (the inference
        thread, once a reply has ended and nothing waits) and written by the writer thread. ``wait``: until it is
        written (at shutdown)."""
        owner, identity = self.owner, self._identity
        if self._writer is None or llm is None or identity is None or owner is None or isinstance(owner, ApiSlot):
            return
        if llm.n_tokens >= MIN_TOKENS:
            kept = (owner, llm.n_tokens, hash(llm.input_ids[: llm.n_tokens].tobytes()))
            if kept != self._kept:
                snapshot = snapshot_sequence(llm)
                if snapshot is not None:
                    self._writer.put(owner, identity, snapshot)
                    self._kept = kept
            checkpoint = self.cache.latest_checkpoint(owner)
            if not self.rewindable and checkpoint is not None and len(checkpoint.tokens) < llm.n_tokens:
                self._writer.put(owner, identity, checkpoint, CHECKPOINT_SLOT)  # where a Regenerate goes back to
        if wait:
            self._writer.wait_idle(10.0)

    def checkpoint(self, llm: Llama, owner: Hashable | None) -> None:
        """Keep the context's state as it is now, for a model whose state cannot be cut back: called where a
        prompt ends and before reading on past a reply, the points a Regenerate, an Edit or a Branch go back to."""
        if self.rewindable or owner is None or llm.n_tokens < MIN_TOKENS:
            return
        mark = (owner, llm.n_tokens, hash(llm.input_ids[: llm.n_tokens].tobytes()))
        if mark == self._checkpointed:
            return
        snapshot = snapshot_sequence(llm)
        if snapshot is not None:
            self.cache.put_checkpoint(owner, snapshot)
            self._checkpointed = mark

    def close(self) -> None:
        """The engine is ending: the writer writes what waits, then its thread ends."""
        if self._writer is not None:
            self._writer.close()

    def forget(self, llm: Llama | None, conversation: Hashable | None) -> None:
        """The chat was deleted (on the inference thread, through the worker's queue, so nothing of the chat is
        written after this): its tokens leave the context, its RAM snapshot goes, a write waiting is dropped and
        one under way deleted once it ends, then its files are deleted. None: every chat's saved reading (RAM
        snapshots, checkpoints, files); what the context holds now stays, and is not written again as it is."""
        if conversation is None:
            self.cache.clear()
            self.api_slots.clear()
            self._checkpointed = None
            self.restored_untried = None
            if self._writer is not None:
                self._writer.discard(None)
                self._writer.wait_idle(30.0)
            if self._disk is not None:
                self._disk.forget(None)
            return
        if self.owner == conversation:
            if llm is not None:
                llm.reset()
            self.owner = None
            self._kept = None
            self.restored_untried = None
            self._checkpointed = None
        self.cache.forget(conversation)
        if self._writer is not None:
            self._writer.discard(conversation)
            self._writer.wait_written(conversation, 30.0)  # its own write only: other chats' go on
        if self._disk is not None:
            self._disk.forget(conversation)
