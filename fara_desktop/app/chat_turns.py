"""A chat's turns without a window: send, regenerate and stop, the engine's request, and every engine event about
the reply — what the chat keeps (the session) and what the engine is asked (the turn's phases) — told to a view.

The window's chat controller is one view (bubbles, the status line, the busy buttons); a test's recorder is
another, which is how sending, stopping and the events' ownership are tested without Qt. The engine is anything
with the worker's ``generate`` and ``cancel`` (the worker itself, or the window's bridge to it).
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from fara_desktop.app.tool_advice import cannot_call_tools, no_tools_words
from fara_desktop.chats.records import MessageStatus, StoredMessage
from fara_desktop.chats.session import ChatSession
from fara_desktop.chats.storage import StorageError
from fara_desktop.chats.tool_rounds import ToolRound
from fara_desktop.chats.turn import PendingReply, Turn, TurnPhase
from fara_desktop.engine.repetition import asks_for_repetition
from fara_desktop.engine.types import (
    Cancelled,
    Event,
    Failed,
    Finished,
    GenerationStarted,
    HistoryTrimmed,
    ModelInfo,
    PromptAdjusted,
    PromptProgress,
    TokenText,
)
from fara_desktop.text.format import format_duration
from fara_desktop.tools.tool_box import ToolBox
from fara_desktop.vocabulary.messages import ChatMessage
from fara_desktop.vocabulary.sampling import SamplingParams
from fara_desktop.vocabulary.sources import Source
from fara_desktop.vocabulary.stats import GenerationStats
from fara_desktop.vocabulary.tools import ToolCall, ToolOffer

# Searches the chat's documents: (prompt, context size, sampling, on_done) → whether it started.
Retriever = Callable[
    [list[ChatMessage], int, SamplingParams, Callable[[list[ChatMessage], tuple[Source, ...]], None]], bool
]
Grounded = tuple[list[ChatMessage], tuple[Source, ...]]
STOPPED_BEFORE_THE_ENGINE = Cancelled(0, "", None)  # a reply stopped before the engine had it (or between rounds)
FINISH_NOTES = {
    "length": " (stopped at the token limit)",
    "context": " (the context window is full)",
    "repetition": " (stopped: the reply began repeating itself)",
}


class TurnEngine(Protocol):
    """What a turn asks of the engine: the inference worker, or the window's bridge to it."""

    def generate(
        self,
        messages: Sequence[ChatMessage],
        sampling: SamplingParams,
        conversation: int | None = None,
        thinking: bool = True,
        *,
        tools: ToolOffer | None = None,
    ) -> int: ...

    def cancel(self) -> None: ...


class ToolDecider(Protocol):
    """Who decides and runs a reply's tool calls (the window's approval bar); it calls ``ChatTurns.tool_round_done``
    with the round once every call is decided and run."""

    box: ToolBox

    @property
    def over_limit(self) -> bool: ...
    def new_reply(self) -> None: ...
    def start(self, text: str, reasoning: str, calls: tuple[ToolCall, ...]) -> None: ...
    def stop(self) -> ToolRound | None: ...


@dataclass(frozen=True)
class ReplyEnd:
    """How the turn's reply ended, as kept: ``final`` is the stored message (None when it could not be made)."""

    final: StoredMessage | None
    text: str | None
    status: MessageStatus
    stats: GenerationStats | None
    reasoning: str | None


class TurnView(Protocol):
    """What a front end shows of the turns."""

    def set_status(self, text: str) -> None: ...
    def show_notice(self, text: str, role: str = "notice") -> None: ...
    def set_busy(self, busy: bool) -> None: ...
    def after_paint(self, step: Callable[[], None]) -> None:
        """Run ``step`` once the user's message is on screen (a view without a screen runs it at once)."""

    def user_message_added(self, message: StoredMessage) -> None: ...
    def reply_begun(self, pending: PendingReply) -> None: ...
    def reply_changed(self, event: TokenText) -> None: ...
    def tool_rounds_changed(self, rounds: Sequence[ToolRound]) -> None: ...
    def reply_ended(self, end: ReplyEnd) -> None: ...
    def reply_over(self, event: Finished | Cancelled | Failed) -> None:
        """Every end the engine (or a stop) reports, this turn's or not: what tests and scripts wait on."""

    def show_messages(self) -> None:
        """The open chat's messages changed under the view (a failed regenerate brought the earlier version back)."""

    def withdraw_notice(self, text: str) -> None:
        """A notice shown earlier is no longer true (the model it blamed was replaced): hide it if still shown."""

    def conversation_changed(self, conversation_id: int | None) -> None: ...


class ChatTurns:
    """The open chat's one turn at a time: what is sent, the engine's request for it, and the events about it.
    Events about another request (a chat left, a reply stopped and forgotten) change nothing of the open chat."""

    def __init__(self, session: ChatSession, engine: TurnEngine, view: TurnView, sampling: SamplingParams) -> None:
        self.session = session
        self.engine = engine
        self.view = view
        self.sampling = sampling
        self.turn = Turn()  # the reply being asked for: its phase, the engine's request id, what it waits for
        self.model_info: ModelInfo | None = None
        self.retrieve: Retriever | None = None
        # Passages already found (and read ahead) for exactly this prompt while the question was typed.
        self.prepared: Callable[[list[ChatMessage]], Grounded | None] = lambda _prompt: None
        self.tools: ToolDecider | None = None
        self.tool_choice = "auto"  # the next reply's: "required" when the user asked it to call a tool
        self.tool_suggestions: list[str] = []  # catalog models that call tools and fit here (``tool_advice``)
        # The prompt reading speed measured here (tokens/s; 0: none yet): the wait is said before llama.cpp's first
        # batch is read, not only once a rate can be taken from its progress.
        self.prompt_speed: Callable[[], float] = lambda: 0.0
        self._no_tools_notice: str | None = None  # the notice last shown about a model that cannot call tools
        self._asked_at: float | None = None  # when the user asked for the reply (monotonic)
        self._first_word_s: float | None = None  # from then to the reply's first words
        self.api_requests = 0  # requests of other apps (local API) waiting or running in the same queue
        self._waiting_for_plan = False  # while True, a sent message waits (DEFERRED) for a model to be queued
        self._told_no_tools: set[int | None] = set()  # chats told their model cannot call tools
        self._adjusted: set[int | None] = set()  # chats already told how their prompt was adapted to the template
        self._no_model_reason: str | None = None  # why no model is loaded, once a load failed or was refused
        self._reasoning_shown: bool | None = None  # which part of the current reply the status line names
        self._reading_since: tuple[float, int] | None = None  # when a long prompt's progress began, and where
        self._handlers: dict[type, Callable[[Any], None]] = {
            TokenText: self._on_token_text,
            GenerationStarted: self._on_generation_started,
            Finished: self._on_finished,
            Cancelled: self._on_cancelled,
            Failed: self._on_failed,
            PromptAdjusted: self._on_prompt_adjusted,
            PromptProgress: self._on_prompt_progress,
            HistoryTrimmed: self._on_history_trimmed,
        }

    # ------------------------------------------------------------------ intents

    def send(self, text: str, replacing: int | None = None, pictures: Sequence[str] = ()) -> StoredMessage:
        """Keep the user's message (``replacing``: the index of the message it is a new version of; ``pictures``:
        the digests of the pictures it carries, already in the picture store) and ask for the reply. Raises
        ``StorageError`` when the message could not be saved: nothing was sent, and the session shows what it had
        before."""
        if replacing is not None:
            self.session.redo_from(replacing)
        try:
            user = self.session.add_user_message(text, pictures)
        except StorageError:
            self.session.reload()  # an edit's earlier messages were not replaced
            raise
        self.view.user_message_added(user)
        self.request_reply()
        return user

    def regenerate(self, index: int) -> None:
        """Another reply in place of the one at ``index`` (which stays as a version)."""
        self.session.redo_from(index)
        self.request_reply()

    def stop(self) -> None:
        """Stop the turn wherever it is; the reply ends as stopped (through the engine when it has it)."""
        phase = self.turn.phase
        if phase is TurnPhase.RETRIEVING:  # the question is saved; no reply was started for it
            self.turn.end()
            self.view.set_busy(False)
            self.view.set_status("Stopped")
            return
        if phase is TurnPhase.PENDING:  # the reply had not begun: it begins, and ends at once as stopped
            self._begin_reply(start_engine=False)
        if self.turn.phase is TurnPhase.DEFERRED:
            self._reply_done(None, "", "stopped", None, None)
            self.view.reply_over(STOPPED_BEFORE_THE_ENGINE)
            return
        if self.turn.phase is TurnPhase.GENERATING:
            self.turn.stopping()
            self.engine.cancel()
            self.view.set_status("Stopping…")
        if self.turn.phase is TurnPhase.TOOLS and self.tools is not None:
            stopped = self.tools.stop()
            if stopped is not None:
                self.session.add_tool_round(stopped)
            self._reply_done(None, "", "stopped", None, None)
            self.view.reply_over(STOPPED_BEFORE_THE_ENGINE)
            self.view.set_status("Stopped")

    def settle_pending_reply(self) -> None:
        """Closing: a reply whose second step has not come gets its bubble without the engine (closing the session
        then keeps it as stopped, as it keeps a reply cut off mid-stream), and the step is dropped."""
        if self.turn.phase is TurnPhase.PENDING:
            self._begin_reply(start_engine=False)

    def plan_started(self) -> None:
        """The start-up scan looks for a model: a message sent meanwhile waits for it (DEFERRED)."""
        self._waiting_for_plan = True

    def plan_settled(self) -> None:
        """The start-up scan ended (a model is queued, or none was found): a message that waited is sent now."""
        self._waiting_for_plan = False
        if self.turn.phase is TurnPhase.DEFERRED:
            self.turn.generating(self._generate())

    def no_model_because(self, reason: str) -> None:
        """What a message sent without a model will be told (a load that failed, a model that does not fit)."""
        self.model_info = None
        self._no_model_reason = reason.rstrip(".")

    def model_loaded(self, info: ModelInfo | None) -> None:
        self.model_info = info
        if info is not None:
            self._no_model_reason = None
        if info is not None and not cannot_call_tools(info):  # notices about the model before stop being true
            self._told_no_tools.clear()
            if self._no_tools_notice is not None:
                self.view.withdraw_notice(self._no_tools_notice)
                self._no_tools_notice = None

    def tools_chosen(self) -> None:
        """The chat's tools changed: a model that cannot call them is said at once, not after a made-up answer."""
        info = self.model_info
        if self.session.tools and info is not None and cannot_call_tools(info):
            self._tell_no_tools(info)

    def _tell_no_tools(self, info: ModelInfo) -> None:
        """Once per chat (a new chat told before its first message is saved counts as told once it is)."""
        chat = self.session.conversation_id
        if chat in self._told_no_tools:
            return
        if chat is not None and None in self._told_no_tools:
            self._told_no_tools.discard(None)
            self._told_no_tools.add(chat)
            return
        self._told_no_tools.add(chat)
        self._no_tools_notice = no_tools_words(info, self.tool_suggestions)
        self.view.show_notice(self._no_tools_notice)

    # ------------------------------------------------------------------ a reply, step by step

    def request_reply(self) -> None:
        """A reply is asked for in two steps: this one saves its row and marks the chat busy; once the view has
        shown the user's message, the second makes the reply's bubble and starts llama.cpp. The window paints the
        message while no inference thread competes for the CPU, and answers input in between."""
        model = self.model_info.name if self.model_info else None
        self._asked_at, self._first_word_s = time.monotonic(), None  # what the user waits: Enter to the first word
        prompt = self.session.prompt_messages()
        ready = self.prepared(prompt)
        if ready is not None:  # searched, and read ahead, while the question was typed
            self._start_reply(model, *ready)
            return
        if self.retrieve is not None:
            ticket = self.turn.start_retrieving()
            n_ctx = self.model_info.n_ctx if self.model_info else 0
            done = lambda grounded, found: self._retrieved(ticket, model, grounded, found)  # noqa: E731
            if self.retrieve(prompt, n_ctx, self.sampling, done):
                self.view.set_busy(True)
                self.view.set_status("Searching your documents…")
                return
            self.turn.end()  # the chat uses no documents
        self._start_reply(model, prompt, ())

    def _retrieved(
        self, ticket: object, model: str | None, prompt: list[ChatMessage], sources: tuple[Source, ...]
    ) -> None:
        if not self.turn.retrieved(ticket):  # stopped, or another chat
            return
        self._start_reply(model, prompt, sources)

    def _start_reply(self, model: str | None, prompt: list[ChatMessage], sources: tuple[Source, ...]) -> None:
        try:
            reply = self.session.begin_reply(model, sources)
        except StorageError as exc:
            self.view.show_messages()  # a regenerate's earlier reply is back
            self.view.conversation_changed(self.session.conversation_id)
            self.view.show_notice(f"The reply could not be started because the chat could not be saved: {exc}", "error")
            self.turn.end()
            self.view.set_busy(False)
            return
        if self.tools is not None:
            self.tools.new_reply()
        self.turn.wait_for_paint(PendingReply(model, reply.id, sources), prompt)
        self.view.set_busy(True)
        if self.api_requests:
            self.view.set_status("Waiting for another app's request (local API) to finish…")
        else:
            self.view.set_status("Thinking…" if self.model_info else "Waiting for the model to load…")
        self.view.after_paint(self._begin_reply)

    def _begin_reply(self, start_engine: bool = True) -> None:
        pending = self.turn.take_pending()
        if pending is None:  # stopped before this step came
            return
        self.view.reply_begun(pending)
        if self._waiting_for_plan or not start_engine:
            self.turn.defer()
        else:
            self.turn.generating(self._generate())
        self.view.conversation_changed(self.session.conversation_id)

    def _generate(self) -> int:
        session = self.session
        prompt = self.turn.take_prompt()
        prompt = prompt if prompt is not None else session.prompt_messages()
        asked = next((m.content for m in reversed(prompt) if m.role == "user"), "")
        sampling = dataclasses.replace(self.sampling, stop_loops=False) if asks_for_repetition(asked) else self.sampling
        return self.engine.generate(
            prompt, sampling, session.conversation_id, session.thinking, tools=self.tool_offer()
        )

    # ------------------------------------------------------------------ tools

    def tool_offer(self, quiet: bool = False) -> ToolOffer | None:
        """The chat's tools for the next request, when its model can call tools (else said once, and none)."""
        tools, info = self.tools, self.model_info
        if tools is None or not self.session.tools or info is None:
            return None
        offered = tools.box.offered(self.session.tools)
        if not offered:
            return None
        if cannot_call_tools(info):
            if not quiet:
                self._tell_no_tools(info)
            return None
        choice = "none" if tools.over_limit else self.tool_choice
        return ToolOffer(tuple(t.spec for t in offered), choice)

    def tool_round_done(self, tool_round: ToolRound) -> None:
        """Every call of the round is decided and run: the round is kept with the reply, which goes on."""
        if self.turn.phase is not TurnPhase.TOOLS:
            return
        self.session.add_tool_round(tool_round)
        self.view.tool_rounds_changed(self.session.rounds)
        self.view.set_status("Reading the tools' results…")
        session = self.session
        request = self.engine.generate(
            session.continuation_prompt(),
            self.sampling,
            session.conversation_id,
            session.thinking,
            tools=self.tool_offer(),
        )
        self.turn.generating(request)

    # ------------------------------------------------------------------ engine events

    def on_event(self, event: Event) -> None:
        """An engine event about replies (the others are not the turn's and are ignored)."""
        handler = self._handlers.get(type(event))
        if handler is not None:
            handler(event)

    def _on_token_text(self, event: TokenText) -> None:
        if self.turn.owns(event.request_id):
            if self._first_word_s is None and self._asked_at is not None:
                self._first_word_s = time.monotonic() - self._asked_at
            self.session.reply_text(event.text, event.reasoning, event.thinking_s)
            self.view.reply_changed(event)
            if event.reasoning != self._reasoning_shown:
                self._reasoning_shown = event.reasoning
                self.view.set_status("Thinking…" if event.reasoning else "Writing the answer…")

    def _on_generation_started(self, event: GenerationStarted) -> None:
        if self.turn.owns(event.request_id):
            self._reasoning_shown = None
            self._reading_since = None
            self.view.set_status("Reading the conversation…")

    def _on_finished(self, event: Finished) -> None:
        tools = self.tools
        if event.tool_calls and tools is not None and self.turn.owns(event.request_id):
            self.tool_choice = "auto"  # "make the next reply call a tool" is for one reply
            self.turn.using_tools()
            self.session.draft.clear()  # this text belongs to the round, shown above its calls
            # The rounds so far, and this one's text while its calls are decided.
            self.view.tool_rounds_changed([*self.session.rounds, ToolRound(event.text, event.reasoning, ())])
            tools.start(event.text, event.reasoning, event.tool_calls)
            return
        early = event.finish_reason if event.finish_reason in FINISH_NOTES else ""
        stats = dataclasses.replace(event.stats, ended_early=early) if event.stats is not None else None
        if self._reply_done(event.request_id, event.text, "complete", stats, None, event.reasoning):
            note = FINISH_NOTES.get(event.finish_reason, "")
            self.view.set_status(f"Ready · {event.stats.gen_tok_per_s:.1f} tok/s{note}")
        self.view.reply_over(event)

    def _on_cancelled(self, event: Cancelled) -> None:
        if self._reply_done(event.request_id, event.text, "stopped", event.stats, None, event.reasoning):
            self.view.set_status("Stopped")
        self.view.reply_over(event)

    def _on_failed(self, event: Failed) -> None:
        message = event.message
        if event.error_type == "NoModelLoadedError" and self._no_model_reason:  # not "No model is loaded yet."
            message = (
                f"No model is loaded: {self._no_model_reason}. Choose another one in Settings ▸ Model, or get one "
                "with Get models."
            )
        if self._reply_done(event.request_id, None, "failed", None, message):
            self.view.show_notice(message, "error")
            self.view.set_status("The reply failed — you can send again or change the model")
        self.view.reply_over(Failed(event.request_id, message, event.error_type))

    def _on_prompt_progress(self, event: PromptProgress) -> None:
        """A long prompt: how much of it the model has read, and about how long the rest will take."""
        if not self.turn.owns(event.request_id):
            return
        now = time.monotonic()
        if self._reading_since is None or event.done <= 0:
            self._reading_since = (now, event.done)
        started, first = self._reading_since
        rate = (event.done - first) / (now - started) if now > started and event.done > first else 0.0
        if rate <= 0:  # nothing read yet: the speed measured before, or the one expected of this model here
            rate = self.prompt_speed() or (self.model_info.expected_prompt_tok_per_s if self.model_info else 0.0)
        left = f" · about {format_duration((event.total - event.done) / rate)}" if rate > 0 else ""
        self.view.set_status(f"Reading your message: {event.done:,} of {event.total:,} tokens{left}")

    def _on_prompt_adjusted(self, event: PromptAdjusted) -> None:
        if self.turn.owns(event.request_id) and self.session.conversation_id not in self._adjusted:
            self._adjusted.add(self.session.conversation_id)  # said once per chat
            self.view.show_notice(event.note)

    def _on_history_trimmed(self, event: HistoryTrimmed) -> None:
        if not self.turn.owns(event.request_id):
            return  # a reply of a chat left since: the chat shown now keeps its history
        self.session.apply_trim(event.dropped_messages)
        self.view.set_status(
            f"The {event.dropped_messages} oldest messages no longer fit the context window; "
            "the model does not see them any more (they stay here)"
        )

    def _reply_done(
        self,
        request_id: int | None,
        text: str | None,
        status: MessageStatus,
        stats: GenerationStats | None,
        error: str | None,
        reasoning: str | None = None,
    ) -> bool:
        """Ends the turn's reply; ``request_id`` None: one the engine never had (stopped while DEFERRED or between
        tool rounds). False when the event is about no reply of this turn."""
        without_engine = (TurnPhase.DEFERRED, TurnPhase.TOOLS)
        if not (self.turn.owns(request_id) if request_id is not None else self.turn.phase in without_engine):
            return False
        model = self.model_info.name if self.model_info else None
        shown = self.session.messages
        waited, self._asked_at, self._first_word_s = self._first_word_s, None, None
        final = self.session.end_reply(text, status, stats, model, error, reasoning, waited)
        self.view.reply_ended(ReplyEnd(final, text, status, stats, reasoning))
        if self.session.messages is not shown:  # a failed regenerate or edit: the earlier versions are back
            self.view.show_messages()
        self.turn.end()
        self.tool_choice = "auto"  # "make the next reply call a tool" was for this reply, whatever became of it
        self.view.set_busy(False)
        self.view.conversation_changed(self.session.conversation_id)
        return True
