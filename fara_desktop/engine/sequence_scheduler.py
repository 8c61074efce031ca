"""Who gets the next free sequence (issue 63's scheduler, on the engine's thread): requests wait in arrival order,
the window's chat before every client's; one takes a sequence as soon as one frees, and one cancelled while it
waits never takes one. ``SequenceBatch`` then decodes them together."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from itertools import count

from fara_desktop.engine.sequence_batch import SequenceBatch, SequenceEnd, SequenceState, TokenSink
from fara_desktop.vocabulary.sampling import SamplingParams


@dataclass
class SequenceRequest:
    """A reply asked of the engine: its prompt's tokens, how it is sampled, where its tokens go, and its cancel."""

    prompt: list[int]
    sampling: SamplingParams
    on_token: TokenSink
    should_cancel: Callable[[], bool] = field(default=lambda: False)
    window: bool = False  # the window's chat: before every client's, for a sequence and for its prompt's reading
    restore: SequenceState | None = None
    keep: bool = False
    speculate: bool = False


class SequenceScheduler:
    """Requests admitted into ``batch`` as its sequences free; ``step`` until ``idle``."""

    def __init__(self, batch: SequenceBatch) -> None:
        self.batch = batch
        self._tickets = count(1)
        self._waiting: list[tuple[int, SequenceRequest]] = []
        self._running: dict[int, int] = {}  # sequence id → ticket

    def submit(self, request: SequenceRequest) -> int:
        """The request's ticket; it waits for a sequence (``waiting``) or takes one at the next step."""
        ticket = next(self._tickets)
        self._waiting.append((ticket, request))
        return ticket

    @property
    def waiting(self) -> int:
        return len(self._waiting)

    @property
    def idle(self) -> bool:
        return not self._waiting and not self._running

    def step(self) -> list[tuple[int, SequenceEnd]]:
        """Admit what fits (the window's chat first), decode once; the requests that ended, by ticket (one cancelled
        while it waited ends with no tokens and no sequence)."""
        ended = [(t, SequenceEnd(-1, (), "cancelled", len(r.prompt))) for t, r in self._waiting if r.should_cancel()]
        self._waiting = [(t, r) for t, r in self._waiting if not r.should_cancel()]
        while self._waiting and self.batch.free:
            ticket, request = next(((t, r) for t, r in self._waiting if r.window), self._waiting[0])
            self._waiting.remove((ticket, request))
            seq_id = self.batch.add(
                request.prompt,
                request.sampling,
                request.on_token,
                request.should_cancel,
                restore=request.restore,
                keep=request.keep,
                first=request.window,
                speculate=request.speculate,
            )
            self._running[seq_id] = ticket
        for end in self.batch.step():
            ended.append((self._running.pop(end.seq_id), end))
        return ended
