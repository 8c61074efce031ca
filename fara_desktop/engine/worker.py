"""The inference thread: owns the model, serialises every llama.cpp call, reports through events."""

from __future__ import annotations

import dataclasses
import logging
import math
import queue
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from fara_desktop.engine.backend import Backend, PreparedPrompt, PromptRequest, ReplyRequest, ReplyResult, TextSink
from fara_desktop.engine.errors import CalibrationYieldedError, GenerationError, LoadCancelledError, RequestCancelled
from fara_desktop.engine.kv_disk import KVDiskStore
from fara_desktop.engine.llama_backend import LlamaBackend
from fara_desktop.engine.remote_backend import RemoteBackend
from fara_desktop.engine.reply_channels import ReplyChannels, TokenBatcher
from fara_desktop.engine.routed_backend import RoutedBackend
from fara_desktop.engine.types import (
    CalibrateThreads,
    CalibrationFailed,
    CalibrationPostponed,
    Cancelled,
    Command,
    Conversation,
    ConversationForgotten,
    Event,
    Failed,
    Finished,
    ForgetConversation,
    Generate,
    GenerationStarted,
    HistoryTrimmed,
    LoadModel,
    LoadProgress,
    ModelInfo,
    ModelLoaded,
    ModelLoadFailed,
    ModelLoading,
    ModelSource,
    ModelUnloaded,
    PromptAdjusted,
    PromptProgress,
    ReadAhead,
    ReadAheadProgress,
    RemoteModel,
    Shutdown,
    ThreadsCalibrated,
    Unload,
)
from fara_desktop.models.gguf_file import read_gguf_header
from fara_desktop.models.load_record import LoadRecord
from fara_desktop.models.metadata import header_display_name
from fara_desktop.models.naming import MAX_NAME, model_display_name, name_from_file
from fara_desktop.planning.params import LoadParams
from fara_desktop.text.untrusted import one_line
from fara_desktop.vocabulary.errors import FaraError
from fara_desktop.vocabulary.messages import ChatMessage
from fara_desktop.vocabulary.sampling import SamplingParams, reply_reserve
from fara_desktop.vocabulary.stats import MIN_MEASURED_S, MIN_MEASURED_TOKENS
from fara_desktop.vocabulary.tools import ToolOffer

log = logging.getLogger(__name__)
KEEP_STATE_AFTER_S = 1.0
PROGRESS_STEP = 0.01  # report loading in steps of 1 %: llama.cpp calls back for every tensor

EventSink = Callable[[Event], None]


def display_name_of(source: ModelSource) -> str:
    """The name a model is shown by while it loads: the same one ``ModelInfo.name`` will have."""
    if isinstance(source, RemoteModel):
        return source.name
    if name_from_file(source.name):  # the file's name is the model's name: no need to read the header twice
        return model_display_name(source.name)
    try:
        return header_display_name(read_gguf_header(source))
    except Exception:  # not readable, not a GGUF: the load says why; the file's name will do until then
        return model_display_name(source.name)


def describe(command: Command) -> str:
    """A command for the log: its type and ids, never message text (the log file is what users are asked to share)."""
    if isinstance(command, Generate):
        return f"Generate(request {command.request_id}, {len(command.messages)} messages)"
    if isinstance(command, LoadModel):
        return f"LoadModel({command.path.name!r})"
    return type(command).__name__


class InferenceWorker:
    """One long-lived thread fed by a ``queue.Queue`` of commands.

    ``on_event`` is called on the worker thread; the GUI passes a Qt signal's ``emit`` so delivery is queued to
    the GUI thread. ``cancel()`` is called from any thread and takes effect between two tokens, or inside
    llama.cpp's prompt evaluation through its abort callback.
    """

    def __init__(
        self,
        on_event: EventSink,
        backend: Backend | None = None,
        load_record: LoadRecord | None = None,
        state_store: KVDiskStore | None = None,
    ) -> None:
        """For the default backend: ``load_record``, where llama.cpp's loads are recorded (crash-safe loading);
        ``state_store``, where chats' KV states are kept across restarts."""
        self._emit_default = on_event
        self._backend: Backend = (
            backend if backend is not None else RoutedBackend(LlamaBackend(load_record, state_store), RemoteBackend())
        )
        self._commands: queue.Queue[Command] = queue.Queue()
        self._thread = threading.Thread(target=self._run, name="fara-inference", daemon=True)
        self.clock: Callable[[], float] = time.perf_counter  # times a read-ahead's reading (a test's own clock)
        self._lock = threading.Lock()
        self._loaded: ModelInfo | None = None
        self._last_request_id = 0
        self._cancel_below: float = 0  # every request with a smaller id is cancelled
        self._cancelled: set[int] = set()  # and these, one by one (a local API client that went away)
        self._sinks: dict[int, EventSink] = {}  # requests whose events go elsewhere than ``on_event``
        self._stopping = False
        self._last_load_id = 0
        self._replies_waiting = 0  # Generate commands queued and not yet taken: a calibration gives way to them
        self._load_cancel_below = 0  # every load with a smaller id is stopped
        self._last_ahead_id = 0
        self._ahead_cancel_below = 0  # every read-ahead with a smaller id stops
        self._aheads_waiting = 0  # ReadAhead commands queued and not yet taken
        self._unsaved: int | None = None  # the chat whose state changed since it was last kept
        self._working = False  # a reply, a read-ahead, a load or a calibration is being handled
        self._last_active = time.monotonic()  # when the engine last ended such a command
        self._parallel_running = 0  # the local API's replies decoding together (``ParallelReplies``)
        self._calibration_after: CalibrateThreads | None = None  # measured once the parallel replies have ended

    # ------------------------------------------------------------------ public, any thread

    def start(self) -> InferenceWorker:
        self._thread.start()
        return self

    @property
    def thread(self) -> threading.Thread:
        return self._thread

    def load_model(self, path: ModelSource | str, params: LoadParams | None = None, name: str = "") -> None:
        source = path if isinstance(path, RemoteModel) else Path(path)
        with self._lock:
            self._last_load_id += 1
            load_id = self._last_load_id
        self._commands.put(LoadModel(source, params or LoadParams(), load_id, one_line(name, MAX_NAME)))

    @property
    def loaded_model(self) -> ModelInfo | None:
        """The model loaded now, as the last load event said; safe to read from any thread (the local API's)."""
        with self._lock:
            return self._loaded

    def cancel_load(self) -> None:
        """Stop the model being loaded (and any load already queued); the load ends with ``ModelLoadFailed``
        (``LoadCancelledError``) and no model is loaded. Harmless when nothing loads."""
        with self._lock:
            self._load_cancel_below = self._last_load_id + 1

    def generate(
        self,
        messages: Sequence[ChatMessage],
        sampling: SamplingParams | None = None,
        conversation: Conversation = None,
        thinking: bool = True,
        on_event: EventSink | None = None,
        raw: bool = False,
        tools: ToolOffer | None = None,
    ) -> int:
        """Queue a reply; its events go to ``on_event`` when given (a local API request), else to the worker's sink.
        Requests run one at a time in the order they were queued. ``tools``: what the reply may call."""
        with self._lock:
            self._last_request_id += 1
            request_id = self._last_request_id
            if on_event is not None:
                self._sinks[request_id] = on_event
            self._replies_waiting += 1
        self._commands.put(
            Generate(request_id, tuple(messages), sampling or SamplingParams(), conversation, thinking, raw, tools)
        )
        return request_id

    def read_ahead(
        self,
        messages: Sequence[ChatMessage],
        sampling: SamplingParams | None = None,
        conversation: Conversation = None,
        thinking: bool = True,
        read: bool = True,
        tools: ToolOffer | None = None,
    ) -> int:
        """Queue reading ``messages`` (the chat and the text being typed) into the KV cache; ``ReadAheadProgress``
        events say how much of it is cached. It yields to every other command: a reply, a load, a newer read-ahead."""
        with self._lock:
            self._last_ahead_id += 1
            ahead_id = self._last_ahead_id
            self._aheads_waiting += 1
        self._commands.put(
            ReadAhead(ahead_id, tuple(messages), sampling or SamplingParams(), conversation, thinking, read, tools)
        )
        return ahead_id

    def cancel_read_ahead(self) -> None:
        """Stop reading ahead (the text was changed before its end): within one batch's layer, tens of ms."""
        with self._lock:
            self._ahead_cancel_below = self._last_ahead_id + 1

    def _ahead_stopped(self, ahead_id: int) -> bool:
        """Stopped, or another command waits (a reply, a load...): a newer read-ahead follows this one instead,
        since the text typed on at the end leaves what this one reads valid up to its last words."""
        with self._lock:
            return (
                self._stopping or ahead_id < self._ahead_cancel_below or self._commands.qsize() > self._aheads_waiting
            )

    def _ahead_cancelled(self, ahead_id: int) -> bool:
        """Stopped, or cancelled (the text changed before its end, Esc): what is being read goes at once. Enter
        only stops it between batches — the batch it reads is part of what it sends."""
        with self._lock:
            return self._stopping or ahead_id < self._ahead_cancel_below

    def cancel(self) -> None:
        """Stop the GUI's reply being generated and any GUI reply already queued (requests with their own sink,
        such as the local API's, are stopped by ``cancel_request``). Harmless when idle."""
        with self._lock:
            self._cancel_below = max(self._cancel_below, self._last_request_id + 1)

    def cancel_request(self, request_id: int) -> None:
        """Stop one request, running or queued."""
        with self._lock:
            self._cancelled.add(request_id)

    @property
    def queued(self) -> int:
        return self._commands.qsize()

    def calibrate_threads(self, candidates: Sequence[int], tokens: int = 48) -> None:
        self._commands.put(CalibrateThreads(tuple(candidates), tokens))

    def unload(self) -> None:
        self._commands.put(Unload())

    def forget_conversation(self, conversation: int | None) -> None:
        """A chat was deleted (None: the user deleted every saved reading): every copy of its reading goes, in the
        order the inference thread sees it (a reply of it that is still ending, or its state about to be written,
        cannot bring a file back afterwards)."""
        self._commands.put(ForgetConversation(conversation))

    def shutdown(self, timeout: float = 10.0) -> bool:
        """Cancel everything, stop the thread and free the model; True when the thread has ended."""
        with self._lock:
            self._cancel_below = math.inf
            self._stopping = True
        self._commands.put(Shutdown())
        if self._thread.is_alive():
            self._thread.join(timeout)
        return not self._thread.is_alive()

    def busy(self) -> bool:
        """Whether the user waits on the engine now (a reply or read-ahead queued or running, a model loading or
        being measured): background measurements give way (``app/kernel_speeds``)."""
        with self._lock:
            return self._working or self._replies_waiting > 0 or self._aheads_waiting > 0 or self._parallel_running > 0

    def quiet_seconds(self) -> float:
        """How long the engine has had nothing to do (0 while it works or something waits)."""
        with self._lock:
            if self._working or self._replies_waiting > 0 or self._aheads_waiting > 0 or self._parallel_running > 0:
                return 0.0
            return time.monotonic() - self._last_active

    def is_cancelled(self, request_id: int) -> bool:
        if self._stopping or request_id in self._cancelled:
            return True
        return request_id < self._cancel_below and request_id not in self._sinks

    def _emit(self, event: Event) -> None:
        """To the request's own sink when it has one; its last event (finished, stopped, failed) releases it."""
        request_id = getattr(event, "request_id", None)
        sink: EventSink | None = None
        if isinstance(event, (ModelLoaded, ModelLoadFailed, ModelUnloaded)):
            with self._lock:
                self._loaded = (
                    event.info
                    if isinstance(event, ModelLoaded)
                    else (event.still_loaded if isinstance(event, ModelLoadFailed) else None)
                )
        if isinstance(request_id, int):
            with self._lock:
                sink = self._sinks.get(request_id)
                if isinstance(event, (Finished, Cancelled, Failed)):
                    self._sinks.pop(request_id, None)
                    self._cancelled.discard(request_id)
        (sink or self._emit_default)(event)

    # ------------------------------------------------------------------ the thread

    def _run(self) -> None:
        while True:
            parallel = self._parallel_busy()
            if not parallel and self._calibration_after is not None:
                self._commands.put(self._calibration_after)
                self._calibration_after = None
            try:
                # A reply's state is copied out of llama.cpp (0.9 s for 3,000 tokens at 1.7B) once nothing has come
                # for a moment: a Regenerate or the next question right after a reply does not wait for it.
                if parallel:  # the parallel replies decode between commands, one step at a time
                    command = self._commands.get_nowait()
                else:
                    command = self._commands.get(timeout=KEEP_STATE_AFTER_S if self._unsaved is not None else None)
            except queue.Empty:
                if parallel:
                    self._step_parallel()
                else:
                    self._save_to_disk()
                continue
            if isinstance(command, ForgetConversation) and command.conversation in (None, self._unsaved):
                self._unsaved = None  # a deleted chat is not kept on its way out
            if self._unsaved is not None and not (
                isinstance(command, (Generate, ReadAhead)) and command.conversation == self._unsaved
            ):  # another chat, a switch, a calibration: the chat in the context is kept before it leaves
                self._save_to_disk()
            if isinstance(command, Shutdown):
                self._step_parallel()  # everything is cancelled by now: the replies under way end, undecoded
                self._save_to_disk(wait=True)
                self._safe_close()
                return
            if isinstance(command, Generate):
                with self._lock:
                    self._replies_waiting -= 1
            elif isinstance(command, ReadAhead):
                with self._lock:
                    self._aheads_waiting -= 1
            with self._lock:
                self._working = isinstance(command, (Generate, ReadAhead, CalibrateThreads, LoadModel))
            try:
                final = self._handle(command)
            except Exception:  # the thread must survive anything, and the command still ends with its event
                # Never the command itself: a Generate carries the whole conversation, and the log is shared.
                log.exception("Unexpected error in the inference thread while handling %s", describe(command))
                final = self._failure_event(
                    command, "Something went wrong inside the engine; details are in the log file."
                )
            with self._lock:
                self._working = False
                self._last_active = time.monotonic()
            try:
                if final is not None:  # the one place a command's final event is sent (a parallel reply's: its own)
                    self._emit(final)
            except Exception:  # a sink that fails (its window gone) must not end the thread
                log.exception("The end of %s could not be delivered", describe(command))

    def _handle(self, command: Command) -> Event | None:
        """Run one command; its final event (the events on the way are emitted as they come), or None for a reply
        that went to the parallel replies (its final event comes as it ends)."""
        if isinstance(command, LoadModel):
            return self._load(command)
        if isinstance(command, Generate):
            final = self._generate(command)
            if isinstance(command.conversation, int):  # a chat's: kept on disk once the engine is idle
                self._unsaved = command.conversation
            return final
        if isinstance(command, ReadAhead):
            return self._read_ahead(command)
        if isinstance(command, CalibrateThreads):
            return self._calibrate(command)
        if isinstance(command, Unload):
            return ModelUnloaded(self._backend.unload())
        if isinstance(command, ForgetConversation):
            self._backend.forget_conversation(command.conversation)
            return ConversationForgotten(command.conversation)
        raise TypeError(f"not a command the worker runs: {type(command).__name__}")

    def _failure_event(self, command: Command, message: str) -> Event:
        """The final event of a command that failed unexpectedly: what its sender waits for, saying it failed."""
        if isinstance(command, LoadModel):
            return ModelLoadFailed(command.path, message, "InternalError", self._backend.info)
        if isinstance(command, Generate):
            return Failed(command.request_id, message, "InternalError")
        if isinstance(command, ReadAhead):
            return ReadAheadProgress(command.ahead_id, 0, 0, finished=True)
        if isinstance(command, CalibrateThreads):
            return CalibrationFailed(message)
        if isinstance(command, Unload):  # whatever llama.cpp did, the app no longer counts on a model
            return ModelUnloaded(None)
        if isinstance(command, ForgetConversation):
            return ConversationForgotten(command.conversation, failed=True)
        raise TypeError(f"not a command the worker runs: {type(command).__name__}")

    def _load(self, command: LoadModel) -> ModelLoaded | ModelLoadFailed:
        self._emit(ModelLoading(command.path, command.name or display_name_of(command.path)))
        reported = [-1.0]

        def on_progress(fraction: float) -> bool:
            if self._stopping or command.load_id < self._load_cancel_below:
                return False
            if fraction - reported[0] >= PROGRESS_STEP or (fraction >= 1.0 > reported[0]):
                reported[0] = fraction
                self._emit(LoadProgress(command.path, fraction))
            return True

        try:
            if not on_progress(0.0):
                raise LoadCancelledError("Loading was stopped before it began.")
            info = self._backend.load(command.path, command.params, on_progress)
        except FaraError as exc:
            return ModelLoadFailed(command.path, str(exc), type(exc).__name__, self._backend.info)
        return ModelLoaded(dataclasses.replace(info, name=command.name) if command.name else info)

    def _calibrate(self, command: CalibrateThreads) -> ThreadsCalibrated | CalibrationPostponed | CalibrationFailed:
        info = self._backend.info
        if info is None or info.remote:  # a server's threads are the server's business: nothing to measure here
            return CalibrationFailed("no model on this computer is loaded to measure")
        if self._parallel_busy():  # taken again from the queue it would give way at once, for ever
            self._calibration_after = command
            return CalibrationPostponed()
        try:
            results, busy = self._backend.calibrate_threads(command.candidates, command.tokens, self._reply_waiting)
        except CalibrationYieldedError:
            if self._parallel_busy():
                self._calibration_after = command
            else:
                self._commands.put(command)  # measured again after the replies that were waiting
            return CalibrationPostponed()
        except FaraError as exc:
            log.warning("Thread calibration failed: %s", exc)
            return CalibrationFailed(str(exc))
        if not results:
            return CalibrationFailed("no thread count could be measured")
        return ThreadsCalibrated(info.path, results, max(results, key=lambda t: results[t]), busy)

    def _reply_waiting(self) -> bool:
        """A calibration gives way: a reply waits, or the app is closing (it must not wait for a measurement)."""
        with self._lock:
            return self._replies_waiting > 0 or self._parallel_running > 0 or self._stopping

    def _generate(self, command: Generate) -> Finished | Cancelled | Failed | None:
        """The reply's final event; None when a sequence of the parallel replies took it (a local API request, on a
        model loaded with several): its final event comes as its sequence ends, and the worker takes the next
        command meanwhile."""
        request_id = command.request_id
        if self.is_cancelled(request_id):
            return Cancelled(request_id, "", None)
        self._emit(GenerationStarted(request_id))
        should_cancel = lambda: self.is_cancelled(request_id)  # noqa: E731
        try:
            prompt = self._prompt_for(command, should_cancel)
            channels = ReplyChannels.for_prompt(prompt, TokenBatcher(request_id, self._emit))
            request = ReplyRequest(
                command.sampling,
                should_cancel=should_cancel,
                on_text=channels.add,
                conversation=command.conversation,
                on_prompt_progress=lambda done, total: self._emit(PromptProgress(request_id, done, total)),
            )
            parallel = self._backend.parallel
            with self._lock:
                for_a_client = request_id in self._sinks
            if parallel is not None and for_a_client and parallel.takes(prompt, command.sampling):
                parallel.submit(prompt, request, lambda outcome: self._parallel_ended(command, channels, outcome))
                with self._lock:
                    self._parallel_running += 1
                return None
            if parallel is not None and not parallel.idle:  # the sequences go on between its chunks and tokens
                stepping = self._stepping_parallel(channels.add)
                request = dataclasses.replace(request, on_text=stepping, between_chunks=self._step_parallel)
            try:
                result = self._backend.reply(prompt, request)
            finally:
                channels.finish()
        except RequestCancelled:
            return Cancelled(request_id, "", None)
        except FaraError as exc:
            return Failed(request_id, str(exc), type(exc).__name__)
        return channels.final(request_id, result)

    def _prompt_for(self, command: Generate, should_cancel: Callable[[], bool]) -> PreparedPrompt:
        info = self._backend.info
        reserve = reply_reserve(command.sampling, info.n_ctx if info else 0)
        if command.raw:
            prompt = self._backend.prepare_raw(command.messages[0].content, reserve)
        else:
            prompt = self._backend.prepare(
                PromptRequest(command.messages, reserve, should_cancel, command.thinking, command.tools)
            )
        if prompt.dropped_messages:
            self._emit(HistoryTrimmed(command.request_id, prompt.dropped_messages, prompt.kept_messages))
        if prompt.note:
            self._emit(PromptAdjusted(command.request_id, prompt.note))
        return prompt

    # ------------------------------------------------------------------ the parallel replies

    def _parallel_busy(self) -> bool:
        parallel = self._backend.parallel
        return parallel is not None and not parallel.idle

    def _step_parallel(self) -> None:
        """One decode of the local API's replies under way (each that ends sends its final event)."""
        parallel = self._backend.parallel
        if parallel is None or parallel.idle:
            return
        try:
            parallel.step()
        except Exception:  # the thread survives, and every reply under way still ends with its event
            log.exception("Unexpected error in the inference thread while decoding the parallel replies")
            parallel.fail_all(GenerationError("Something went wrong inside the engine; details are in the log file."))

    def _stepping_parallel(self, on_text: TextSink) -> TextSink:
        """``on_text`` that also steps the parallel replies: they go on while a reply of the model's own context
        (the window's, a request with pictures) is written."""

        def stepping(text: str, reasoning: bool | None = None) -> None:
            on_text(text, reasoning)
            self._step_parallel()

        return stepping

    def _parallel_ended(self, command: Generate, channels: ReplyChannels, outcome: ReplyResult | FaraError) -> None:
        with self._lock:
            self._parallel_running -= 1
            self._last_active = time.monotonic()
        try:
            channels.finish()
            if isinstance(outcome, FaraError):
                final: Event = Failed(command.request_id, str(outcome), type(outcome).__name__)
            else:
                final = channels.final(command.request_id, outcome)
            self._emit(final)
        except Exception:  # a sink that fails (its client gone) must not end the thread
            log.exception("The end of %s could not be delivered", describe(command))

    def _read_ahead(self, command: ReadAhead) -> ReadAheadProgress:
        """Ends with one ``ReadAheadProgress(finished=True)`` for this read-ahead: the window waits for it (and
        document indexing waits on the window), so a prompt too long to read must say so too."""
        last = [0, 0]
        self._read_ahead_into(command, last)
        return ReadAheadProgress(command.ahead_id, last[0], last[1], finished=True)

    def _read_ahead_into(self, command: ReadAhead, last: list[int]) -> None:
        ahead_id = command.ahead_id
        with self._lock:
            superseded = ahead_id < self._last_ahead_id  # a newer read-ahead (of longer text) is queued
        if superseded or self._ahead_stopped(ahead_id) or self._backend.info is None:
            return
        should_stop = (lambda: True) if not command.read else (lambda: self._ahead_stopped(ahead_id))
        abort = (lambda: True) if not command.read else (lambda: self._ahead_cancelled(ahead_id))

        began: list[float] = []  # when the reading began, and from where

        def report(tokens: int, cached: int) -> None:
            last[:] = tokens, cached
            now = self.clock()
            began[:] = began or [now, cached]
            read, seconds = cached - began[1], now - began[0]
            enough = read >= MIN_MEASURED_TOKENS or (read > 0 and seconds >= MIN_MEASURED_S)  # a slow machine: 1 s
            speed = read / seconds if enough and seconds > 0 else 0.0
            self._emit(ReadAheadProgress(ahead_id, tokens, cached, tok_per_s=speed))

        try:
            reserve = reply_reserve(command.sampling, self._backend.info.n_ctx)
            prompt = self._backend.prepare(
                PromptRequest(
                    command.messages,
                    reserve,
                    lambda: self._ahead_stopped(ahead_id),
                    command.thinking,
                    command.tools,
                )
            )
            self._backend.read_ahead(prompt, command.conversation, should_stop, report, abort)
        except FaraError as exc:  # too long, no model, stopped while rendering: Enter will say what matters
            log.info("Reading ahead stopped: %s", type(exc).__name__)

    def _save_to_disk(self, wait: bool = False) -> None:
        self._unsaved = None
        try:
            self._backend.save_to_disk(wait)
        except Exception:  # a state is only a speed-up
            log.exception("Keeping the chat's state failed")

    def _safe_close(self) -> None:
        try:
            self._backend.close()
        except Exception:
            log.exception("Closing the engine's backend at shutdown failed")
