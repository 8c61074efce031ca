"""The app without a window, as a test drives it: the core, the open chat's turns and a view that records what a
screen would show; the engine's events are handed to the turns on the test's thread (as Qt hands them to the
window's)."""

from __future__ import annotations

import queue
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fara_desktop.app.chat_turns import ReplyEnd
from fara_desktop.app.core import AppCore
from fara_desktop.chats.records import StoredMessage
from fara_desktop.chats.tool_rounds import ToolRound
from fara_desktop.chats.turn import PendingReply
from fara_desktop.engine.types import (
    Cancelled,
    Event,
    Failed,
    Finished,
    ModelLoaded,
    ModelLoadFailed,
    ModelUnloaded,
    TokenText,
)
from fara_desktop.files.paths import AppPaths
from fara_desktop.settings import Settings
from fara_desktop.vocabulary.sampling import SamplingParams


@dataclass
class RecordingView:
    """A ``TurnView`` that keeps everything it is told."""

    statuses: list[str] = field(default_factory=list)
    notices: list[tuple[str, str]] = field(default_factory=list)
    busy: list[bool] = field(default_factory=list)
    users: list[StoredMessage] = field(default_factory=list)
    begun: list[PendingReply] = field(default_factory=list)
    texts: list[str] = field(default_factory=list)
    rounds: list[Sequence[ToolRound]] = field(default_factory=list)
    ends: list[ReplyEnd] = field(default_factory=list)
    overs: list[Finished | Cancelled | Failed] = field(default_factory=list)
    shown_again: int = 0
    changed: list[int | None] = field(default_factory=list)

    def set_status(self, text: str) -> None:
        self.statuses.append(text)

    def show_notice(self, text: str, role: str = "notice") -> None:
        self.notices.append((text, role))

    def set_busy(self, busy: bool) -> None:
        self.busy.append(busy)

    def after_paint(self, step: Callable[[], None]) -> None:
        step()  # nothing to paint

    def user_message_added(self, message: StoredMessage) -> None:
        self.users.append(message)

    def reply_begun(self, pending: PendingReply) -> None:
        self.begun.append(pending)

    def reply_changed(self, event: TokenText) -> None:
        self.texts.append(event.text)

    def tool_rounds_changed(self, rounds: Sequence[ToolRound]) -> None:
        self.rounds.append(rounds)

    def reply_ended(self, end: ReplyEnd) -> None:
        self.ends.append(end)

    def reply_over(self, event: Finished | Cancelled | Failed) -> None:
        self.overs.append(event)

    def show_messages(self) -> None:
        self.shown_again += 1

    def withdraw_notice(self, text: str) -> None:
        self.notices = [n for n in self.notices if n[0] != text]

    def conversation_changed(self, conversation_id: int | None) -> None:
        self.changed.append(conversation_id)


class HeadlessApp:
    """``AppCore`` + ``ChatTurns`` + ``RecordingView``; ``pump_until`` hands the engine's events to the turns."""

    def __init__(self, paths: AppPaths, backend: Any = None, settings: Settings | None = None,
                 sampling: SamplingParams | None = None) -> None:  # fmt: skip
        self.core = AppCore(paths.ensure(), settings or Settings(), backend)
        self.events: queue.Queue[Event] = queue.Queue()
        self.seen: list[Event] = []
        self.worker = self.core.start_engine(self.events.put)
        self.view = RecordingView()
        self.turns = self.core.open_turns(self.view, sampling or SamplingParams(max_tokens=32))

    def pump_until(self, done: Callable[[Event], bool], timeout: float = 120.0) -> Event:
        """Deliver events to the turns (and the model's to them too) until one satisfies ``done``."""
        while True:
            event = self.events.get(timeout=timeout)
            self.seen.append(event)
            if isinstance(event, (ModelLoaded, ModelLoadFailed, ModelUnloaded)):
                self.turns.model_loaded(
                    event.info if isinstance(event, ModelLoaded) else getattr(event, "still_loaded", None)
                )
            self.turns.on_event(event)
            if done(event):
                return event

    def load(self, path: Path) -> ModelLoaded:
        self.worker.load_model(path)
        event = self.pump_until(lambda e: isinstance(e, (ModelLoaded, ModelLoadFailed)))
        assert isinstance(event, ModelLoaded), event
        return event

    def close(self, timeout: float = 30.0) -> list[str]:
        """The window's quit without the window: the jobs that had not ended within ``timeout``."""
        return self.core.close(timeout, save_pending_reply=self.turns.settle_pending_reply)
