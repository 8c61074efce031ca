"""Reading ahead while the user types: the chat and the text typed so far go into the KV cache on a pause in
typing (at once after a paste), so Enter reads only what changed since; the composer says how long Enter would
make the user wait for the rest when that is more than a few seconds."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass

from PySide6.QtCore import QObject, QTimer
from PySide6.QtWidgets import QLabel

from fara_desktop.chats.prompt_wait import PromptSpeed, ReadAheadWait, wait_text
from fara_desktop.engine.types import ReadAheadProgress
from fara_desktop.ui.engine_bridge import EngineBridge
from fara_desktop.ui.widgets.composer import Composer
from fara_desktop.vocabulary.messages import ChatMessage
from fara_desktop.vocabulary.sampling import SamplingParams
from fara_desktop.vocabulary.sources import Source
from fara_desktop.vocabulary.tools import ToolOffer

PAUSE_MS = 600  # a pause in typing this long starts reading ahead
TYPING_MS = 250  # while text is added at the end, the read-ahead follows it this often
PASTE_CHARS = 200  # text that grew this much at once was pasted: read it at once

# Searches the chat's documents: (prompt, context size, sampling, on_done) → whether it started.
Retriever = Callable[
    [list[ChatMessage], int, SamplingParams, Callable[[list[ChatMessage], tuple[Source, ...]], None]], bool
]


@dataclass(frozen=True)
class DraftPrompt:
    """What Enter would send for the text typed so far, and where."""

    messages: list[ChatMessage]
    conversation: int | None
    thinking: bool
    sampling: SamplingParams
    n_ctx: int
    tools: ToolOffer | None = None  # the tools the reply would be offered (their schemas are prompt tokens)


class TypingReadAhead(QObject):
    """Reads ahead on typing pauses. A key that changes the text before its end (a deletion, an edit in the middle)
    stops it at once; text typed on at the end leaves what it reads valid up to its last words, so it reads on and
    a newer read-ahead of the longer text follows. The engine yields to every other command: Send, Stop and a
    model switch stop it at once."""

    def __init__(
        self,
        composer: Composer,
        hint: QLabel,
        bridge: EngineBridge,
        draft_prompt: Callable[[str], DraftPrompt | None],
        may_read: Callable[[], bool],
    ) -> None:
        super().__init__(composer)
        self.composer = composer
        self.hint = hint
        self.bridge = bridge
        self.draft_prompt = draft_prompt
        self.may_read = may_read  # reading ahead is allowed now (the setting, the battery)
        self.retrieve: Retriever | None = None
        self.speed = PromptSpeed()
        self._wait = ReadAheadWait(self.speed)
        self._ahead_id: int | None = None
        # Set while the model reads ahead (any thread may look: background indexing waits, as for a reply, so
        # that two llama.cpp thread pools never spin on the same cores).
        self.reading = threading.Event()
        self._length = 0
        self._read_text = ""  # the text the last read-ahead was asked to read
        self._retrieval = 0  # the retrieval whose passages are wanted; an older one is ignored
        self._grounded: tuple[list[ChatMessage], list[ChatMessage], tuple[Source, ...]] | None = None
        self._timer = QTimer(self)
        self._timer.setSingleShot(True)
        self._timer.timeout.connect(self._paused)
        composer.textChanged.connect(self._text_changed)

    @property
    def _reading(self) -> bool:
        return self.reading.is_set()

    @_reading.setter
    def _reading(self, value: bool) -> None:
        if value:
            self.reading.set()
        else:
            self.reading.clear()

    # ------------------------------------------------------------------ typing

    def _text_changed(self) -> None:
        text = self.composer.toPlainText()
        appended = text.startswith(self._read_text)
        if self._reading and not appended:  # what it reads is stale: the CPU comes back within one batch layer
            self.bridge.cancel_read_ahead()
            self._reading = False
        grown, self._length = len(text) - self._length, len(text)
        self._retrieval += 1
        if not text:
            self.stop()
            return
        if grown >= PASTE_CHARS:
            self._timer.start(0)
        elif appended and self._read_text:
            self._timer.start(TYPING_MS)
        else:
            self._timer.start(PAUSE_MS)

    def pictures_changed(self) -> None:
        """A picture was attached or removed: the draft is read again from its start, the new picture encoded now
        (on a CPU that is seconds: better while the user types than after Enter)."""
        if self._reading:
            self.bridge.cancel_read_ahead()
            self._reading = False
        self._read_text = ""
        self._retrieval += 1
        self._timer.start(0)

    def stop(self, sent: bool = False) -> None:
        """The message was sent, or the chat left: nothing more is read for this text, and the hint goes. ``sent``:
        the batch being read is part of what was sent, so it is finished, not thrown away (the reply's command
        stops the reading after it)."""
        self._timer.stop()
        if self._reading and not sent:
            self.bridge.cancel_read_ahead()
        self._reading = False
        self._ahead_id = None
        self._read_text = ""
        self._retrieval += 1
        self.hint.clear()
        self.hint.hide()

    def _paused(self) -> None:
        self._read_text = self.composer.toPlainText()
        draft = self._read_text.strip()
        prepared = self.draft_prompt(draft)  # None for nothing to read (no text, no picture)
        if prepared is None:
            self.hint.hide()
            return
        ticket = self._retrieval
        if self.retrieve is not None:

            def found(grounded: list[ChatMessage], sources: tuple[Source, ...]) -> None:
                if ticket == self._retrieval:  # no key since: these passages are the ones Enter would send
                    self._grounded = (prepared.messages, grounded, sources)
                    self._read(prepared, grounded)

            if self.retrieve(prepared.messages, prepared.n_ctx, prepared.sampling, found):
                return
        self._read(prepared, prepared.messages)

    def _read(self, prepared: DraftPrompt, messages: list[ChatMessage]) -> None:
        read = self.may_read()
        self._ahead_id = self.bridge.read_ahead(
            messages, prepared.sampling, prepared.conversation, prepared.thinking, read, prepared.tools
        )
        self._reading = read

    # ------------------------------------------------------------------ the engine

    def on_progress(self, event: ReadAheadProgress) -> None:
        if event.ahead_id != self._ahead_id:
            return
        if event.finished:
            self._reading = False
        text = wait_text(self._wait.seconds(event.ahead_id, event.tokens, event.cached, event.tok_per_s))
        self.hint.setText(text)
        self.hint.setVisible(bool(text))

    def grounded_for(self, messages: list[ChatMessage]) -> tuple[list[ChatMessage], tuple[Source, ...]] | None:
        """The passages found on the typing pause for exactly this prompt (the ones already read ahead)."""
        if self._grounded is not None and self._grounded[0] == messages:
            return self._grounded[1], self._grounded[2]
        return None
