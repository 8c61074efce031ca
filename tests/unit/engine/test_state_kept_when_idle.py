"""A chat's KV state is copied out of llama.cpp when the engine is idle, not between a reply and the next command
(at 1.7B the copy takes 1.8 s: a Regenerate would wait for it), and before another chat or a switch takes the
context."""

from __future__ import annotations

import threading
from pathlib import Path

from fara_desktop.engine.types import Finished, ModelLoaded
from fara_desktop.engine.worker import InferenceWorker
from fara_desktop.vocabulary.messages import ChatMessage
from tests.conftest import wait_until
from tests.helpers.fakes import FakeBackend

QUESTION = [ChatMessage("user", "Hi")]


def test_the_state_is_kept_once_the_engine_is_idle_not_before_the_next_reply(event_log):
    backend = FakeBackend()
    worker = InferenceWorker(event_log, backend).start()
    try:
        worker.load_model(Path("fake.gguf"))
        event_log.next_of(ModelLoaded)
        worker.generate(QUESTION, conversation=1)
        event_log.next_of(Finished)
        worker.generate(QUESTION, conversation=1)  # Regenerate, as soon as the reply has ended
        event_log.next_of(Finished)
        assert backend.kept_before_reply == [0, 0]  # nothing was copied between the two replies
        wait_until(lambda: backend.kept_states == 1, 10, "the state kept once idle")
    finally:
        assert worker.shutdown()


def test_the_state_is_kept_before_another_chat_takes_the_context(event_log):
    backend = FakeBackend()
    worker = InferenceWorker(event_log, backend).start()
    try:
        worker.load_model(Path("fake.gguf"))
        event_log.next_of(ModelLoaded)
        backend.gate = threading.Semaphore(0)
        worker.generate(QUESTION, conversation=1)
        worker.generate(QUESTION, conversation=2)  # another chat, queued at once: chat 1 is kept before it
        backend.gate.release(100)
        event_log.next_of(Finished)
        event_log.next_of(Finished)
        assert backend.kept_before_reply == [0, 1]
    finally:
        assert worker.shutdown()
