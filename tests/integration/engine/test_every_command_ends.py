"""Every command the window waits on ends with its final event, whatever fails on the inference thread.

Before: a read-ahead whose prompt was too long (a 1 MB paste) emitted nothing — the window's reading flag stayed
set, and document indexing, which waits on it, stalled until the user sent — and a failed calibration left the
machine panel on "measuring…" for good (``_report_unexpected`` covered loads and replies only)."""

from __future__ import annotations

from pathlib import Path

import pytest

from fara_desktop.engine.errors import GenerationError
from fara_desktop.engine.types import (
    CalibrationFailed,
    CalibrationPostponed,
    Cancelled,
    ConversationForgotten,
    Failed,
    Finished,
    ModelLoaded,
    ModelLoadFailed,
    ModelUnloaded,
    ReadAheadProgress,
    ThreadsCalibrated,
)
from fara_desktop.engine.worker import InferenceWorker
from fara_desktop.planning.params import LoadParams
from fara_desktop.vocabulary.messages import ChatMessage
from tests.conftest import EventLog
from tests.helpers.fakes import FakeBackend

PASTE = [ChatMessage("user", "A very long paste. " * 60_000)]  # 1.1 MB


def _started(backend, path: Path = Path("fake.gguf"), params: LoadParams | None = None):
    log = EventLog()
    worker = InferenceWorker(log, backend).start()
    worker.load_model(path, params or LoadParams(n_ctx=2048))
    assert isinstance(log.next_of(ModelLoaded, ModelLoadFailed), ModelLoaded)
    return worker, log


@pytest.mark.real_model
def test_a_read_ahead_whose_prompt_is_too_long_still_ends(smollm2_path):
    worker, log = _started(None, smollm2_path, LoadParams(n_ctx=2048, prefault=False))
    try:
        ahead = worker.read_ahead(PASTE)
        ended = log.next_of(ReadAheadProgress)
        assert ended.ahead_id == ahead and ended.finished
    finally:
        assert worker.shutdown(timeout=60)


class Failing(FakeBackend):
    """A backend whose reading ahead or calibrating fails, as a refusal or as a bug."""

    def __init__(self, error: Exception) -> None:
        super().__init__()
        self.error = error

    def read_ahead(self, prompt, conversation, should_stop, on_progress) -> int:
        raise self.error

    def calibrate_threads(self, candidates, tokens: int = 48, should_yield=None) -> dict[int, float]:
        raise self.error


@pytest.mark.parametrize("error", [GenerationError("llama.cpp failed"), RuntimeError("a bug")], ids=["refusal", "bug"])
def test_a_read_ahead_and_a_calibration_that_fail_each_end_with_their_event(error):
    worker, log = _started(Failing(error))
    try:
        ahead = worker.read_ahead([ChatMessage("user", "Hello")])
        ended = log.next_of(ReadAheadProgress)
        assert ended.ahead_id == ahead and ended.finished
        worker.calibrate_threads((1, 2))
        assert isinstance(log.next_of(CalibrationFailed, ThreadsCalibrated), CalibrationFailed)
    finally:
        assert worker.shutdown(timeout=30)


class FailingEverywhere(FakeBackend):
    """Once ``error`` is set, every call the worker makes for a command raises it."""

    def __init__(self) -> None:
        super().__init__()
        self.error: Exception | None = None

    def _fail(self) -> None:
        if self.error is not None:
            raise self.error

    def load(self, path, params, on_progress=None):
        self._fail()
        return super().load(path, params, on_progress)

    def prepare(self, request):
        self._fail()
        return super().prepare(request)

    def read_ahead(self, prompt, conversation, should_stop, on_progress) -> int:
        self._fail()
        return super().read_ahead(prompt, conversation, should_stop, on_progress)

    def calibrate_threads(self, candidates, tokens: int = 48, should_yield=None) -> dict[int, float]:
        self._fail()
        return super().calibrate_threads(candidates, tokens, should_yield)

    def unload(self):
        self._fail()
        return super().unload()

    def forget_conversation(self, conversation: object) -> None:
        self._fail()
        super().forget_conversation(conversation)


FINAL_EVENTS = {  # a command, and the events that end it (exactly one of them, once)
    "load": (lambda w: w.load_model(Path("other.gguf"), LoadParams(n_ctx=2048)), (ModelLoaded, ModelLoadFailed)),
    "reply": (lambda w: w.generate([ChatMessage("user", "Hi")], conversation=7), (Finished, Cancelled, Failed)),
    "read ahead": (lambda w: w.read_ahead([ChatMessage("user", "Hi")], conversation=7), (ReadAheadProgress,)),
    "calibrate": (lambda w: w.calibrate_threads((1, 2)), (ThreadsCalibrated, CalibrationFailed, CalibrationPostponed)),
    "unload": (lambda w: w.unload(), (ModelUnloaded,)),
    "forget a chat": (lambda w: w.forget_conversation(7), (ConversationForgotten,)),
}
FAILURES = {"none": None, "refusal": GenerationError("llama.cpp refused"), "bug": RuntimeError("a bug")}


@pytest.mark.parametrize("failure", list(FAILURES))
@pytest.mark.parametrize("command", list(FINAL_EVENTS))
def test_every_command_ends_with_exactly_one_final_event_whatever_fails(command, failure):
    backend = FailingEverywhere()
    worker, log = _started(backend)
    try:
        backend.error = FAILURES[failure]
        send, finals = FINAL_EVENTS[command]
        start = len(log.seen)
        send(worker)
        first = log.next_of(*finals, timeout=30)
        if isinstance(first, ReadAheadProgress):
            while not first.finished:
                first = log.next_of(*finals, timeout=30)
        backend.error = None
        worker.forget_conversation(-1)  # a barrier: every event of the command came before its end
        log.next_of(ConversationForgotten, timeout=30)
        ends = [e for _, e in log.seen[start:] if isinstance(e, finals) and getattr(e, "finished", True)]
        assert ends == ([first, ConversationForgotten(-1)] if command == "forget a chat" else [first])
        if failure == "bug":  # said as a failure, not as a success
            assert not isinstance(first, (ModelLoaded, Finished, ThreadsCalibrated)), first
        worker.unload()  # and the thread lives on
        log.next_of(ModelUnloaded, timeout=30)
    finally:
        assert worker.shutdown(timeout=30)


def test_the_machine_panel_says_a_failed_calibration_instead_of_measuring_for_ever(window):
    win = window(FakeBackend())
    win.startup.on_engine_event(CalibrationFailed("llama.cpp failed"))
    assert "not measured" in win.hardware_panel.value("Threads")


def test_a_late_history_trimmed_event_leaves_the_chat_shown_now_as_it_is(window, qtbot):
    """A "history trimmed" of a chat left since was applied to the chat shown: it silently dropped that chat's oldest
    messages from its prompts (every other reply event was checked for its owner; this one was not)."""
    from fara_desktop.engine.types import Finished, HistoryTrimmed

    backend = FakeBackend()
    win = window(backend)
    with qtbot.waitSignal(win.chat.replyFinished, timeout=10_000) as first:
        win.composer.setPlainText("Hello")
        win.chat.send()
    assert isinstance(first.args[0], Finished)
    old_request = first.args[0].request_id
    win.new_chat()
    for text in ("One", "Two"):
        with qtbot.waitSignal(win.chat.replyFinished, timeout=10_000):
            win.composer.setPlainText(text)
            win.chat.send()
    before = win.session.context_start
    win.bridge.engine_event.emit(HistoryTrimmed(old_request, 2, 1))  # arrives late, through the window's route
    assert win.session.context_start == before
