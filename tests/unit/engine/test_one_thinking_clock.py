"""How long a model reasoned is measured once, by the engine, and carried to the window with the answer's first
text (issue 28: the worker and the chat view each had a clock)."""

from __future__ import annotations

from pathlib import Path

from fara_desktop.chats.draft import ReplyDraft
from fara_desktop.engine.types import Finished, ModelLoaded, TokenText
from fara_desktop.engine.worker import InferenceWorker
from fara_desktop.vocabulary.messages import ChatMessage
from tests.helpers.fakes import FakeBackend


def test_the_first_answer_text_carries_the_engines_thinking_time(event_log):
    worker = InferenceWorker(event_log, FakeBackend(words=["<think>", "Let me ", "see.", "</think>", "Hello", "!"]))
    worker.start()
    try:
        worker.load_model(Path("fake.gguf"))
        event_log.next_of(ModelLoaded, timeout=10)
        worker.generate([ChatMessage("user", "Hi")])
        finished = event_log.next_of(Finished, timeout=10)
    finally:
        worker.shutdown()
    texts = [event for _, event in event_log.of(TokenText)]
    answer = [t for t in texts if not t.reasoning]
    assert [t.thinking_s is not None for t in answer][:1] == [True]  # the first answer batch says it …
    assert all(t.thinking_s is None for t in answer[1:]) and all(t.thinking_s is None for t in texts if t.reasoning)
    assert abs(answer[0].thinking_s - finished.stats.thinking_s) < 1e-3  # the same clock as the saved figure
    draft = ReplyDraft()  # … and the window keeps that figure, with the text
    for event in texts:
        draft.add(event.text, event.reasoning, event.thinking_s)
    assert (draft.reasoning, draft.answer, draft.thinking_s) == ("Let me see.", "Hello!", answer[0].thinking_s)
