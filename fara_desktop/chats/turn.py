"""The state of one turn — a reply asked for, from Send to its end — as explicit phases and transitions.

One object owns the phase, so the controllers never read it from request ids or set each other's fields: each phase
says what the reply waits for, each transition checks where it comes from (a wrong one is a ``TurnStateError``, a
bug, not a silent mix-up), and the busy flag is mirrored in a ``threading.Event`` so that a background thread (the
document indexer yielding to a reply) can read it without touching the controller. No Qt: the controllers drive it,
the tests drive it without a window.

    IDLE ──send──▶ RETRIEVING ──passages──▶ PENDING ──painted──▶ GENERATING ──stop──▶ STOPPING
      ▲   └──────────send (no documents)──────▲   └──no model yet──▶ DEFERRED ──model queued──▲
      └────────────── end (finished, stopped, failed) from any phase ─────────────────────────┘
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum

from fara_desktop.vocabulary.messages import ChatMessage
from fara_desktop.vocabulary.sources import Source


class TurnPhase(Enum):
    IDLE = "idle"
    RETRIEVING = "retrieving"  # the chat's documents are searched (off the GUI thread) for the prompt's passages
    PENDING = "pending"  # the reply's row is saved; its bubble is made and the engine started once the chat is painted
    DEFERRED = "deferred"  # the bubble is there; the engine waits for a model to be chosen (the start-up scan)
    GENERATING = "generating"  # the engine has it, as ``request_id``
    STOPPING = "stopping"  # Stop was pressed; the engine's end of ``request_id`` is awaited
    TOOLS = "tools"  # the reply called tools: the user decides on each, they run, then the reply goes on


class TurnStateError(RuntimeError):
    """A transition from a phase it cannot come from: a bug in the caller."""


@dataclass(frozen=True)
class PendingReply:
    """A reply whose row is saved and whose bubble is not made yet."""

    model: str | None
    reply_id: int
    sources: tuple[Source, ...]


class Turn:
    """The one turn of a chat window (there is at most one reply at a time)."""

    def __init__(self) -> None:
        self.phase = TurnPhase.IDLE
        self.request_id: int | None = None  # the engine's id, while GENERATING or STOPPING
        self.pending: PendingReply | None = None
        self._prompt: list[ChatMessage] | None = None
        self._ticket: object | None = None
        self.busy_event = threading.Event()  # set while busy; safe to read from any thread

    @property
    def busy(self) -> bool:
        return self.phase is not TurnPhase.IDLE

    def owns(self, request_id: int) -> bool:
        """An engine event with this id is about this turn's reply (not one stopped and forgotten)."""
        return self.phase in (TurnPhase.GENERATING, TurnPhase.STOPPING) and request_id == self.request_id

    def _move(self, to: TurnPhase, allowed_from: Sequence[TurnPhase]) -> None:
        if self.phase not in allowed_from:
            raise TurnStateError(f"a turn cannot go from {self.phase.value} to {to.value}")
        self.phase = to
        if to is TurnPhase.IDLE:
            self.busy_event.clear()
        else:
            self.busy_event.set()

    def start_retrieving(self) -> object:
        """Searching the documents; the search's answer must show the returned ticket (a stale one is dropped)."""
        self._move(TurnPhase.RETRIEVING, (TurnPhase.IDLE,))
        self._ticket = object()
        return self._ticket

    def retrieved(self, ticket: object) -> bool:
        """The search with this ticket is still the one the turn waits for."""
        return self.phase is TurnPhase.RETRIEVING and ticket is self._ticket

    def wait_for_paint(self, pending: PendingReply, prompt: list[ChatMessage]) -> None:
        self._move(TurnPhase.PENDING, (TurnPhase.IDLE, TurnPhase.RETRIEVING))
        self._ticket = None
        self.pending, self._prompt = pending, prompt

    def take_pending(self) -> PendingReply | None:
        """The reply whose bubble is to be made now; None when the turn moved on (stopped before the paint)."""
        if self.phase is not TurnPhase.PENDING or self.pending is None:
            return None
        pending, self.pending = self.pending, None
        return pending

    def take_prompt(self) -> list[ChatMessage] | None:
        prompt, self._prompt = self._prompt, None
        return prompt

    def defer(self) -> None:
        """No model is queued yet: the reply waits for the start-up scan (or was stopped before it began)."""
        self._move(TurnPhase.DEFERRED, (TurnPhase.PENDING,))

    def generating(self, request_id: int) -> None:
        self._move(TurnPhase.GENERATING, (TurnPhase.PENDING, TurnPhase.DEFERRED, TurnPhase.TOOLS))
        self.request_id = request_id

    def using_tools(self) -> None:
        """The engine's part of the reply ended with tool calls; no engine request runs while they are decided."""
        self._move(TurnPhase.TOOLS, (TurnPhase.GENERATING,))
        self.request_id = None

    def stopping(self) -> None:
        self._move(TurnPhase.STOPPING, (TurnPhase.GENERATING, TurnPhase.STOPPING))

    def end(self) -> None:
        """The reply is over (finished, stopped, failed, or never begun): the chat is free for the next."""
        self._move(TurnPhase.IDLE, tuple(TurnPhase))
        self.request_id = None
        self.pending = None
        self._prompt = None
        self._ticket = None
