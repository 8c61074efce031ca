"""A reply that begins repeating itself is stopped (engine/repetition.py), on the real SmolLM2: greedily, it tells a
detective story's plot in a loop of the same paragraph until the token limit (measured by ``bench --section
loops``); the window's chats end it with ``finish_reason == "repetition"`` instead."""

from __future__ import annotations

import pytest

from fara_desktop.engine.types import Finished, ModelLoaded, ModelLoadFailed
from fara_desktop.engine.worker import InferenceWorker
from fara_desktop.planning.params import LoadParams
from fara_desktop.vocabulary.messages import ChatMessage
from fara_desktop.vocabulary.sampling import SamplingParams
from tests.conftest import EventLog

pytestmark = pytest.mark.real_model

LOOPING = [ChatMessage("system", "You are a helpful assistant."),
           ChatMessage("user", "Summarise the plot of a detective story set in a lighthouse.")]  # fmt: skip


def test_a_reply_that_loops_is_stopped_and_says_why(smollm2_path):
    log = EventLog()
    worker = InferenceWorker(log).start()
    worker.load_model(smollm2_path, LoadParams(n_ctx=2048, prefault=False))
    assert isinstance(log.next_of(ModelLoaded, ModelLoadFailed), ModelLoaded)
    try:
        worker.generate(LOOPING, SamplingParams(temperature=0.0, max_tokens=800), conversation=1)
        stopped = log.next_of(Finished)
        worker.generate(LOOPING, SamplingParams(temperature=0.0, max_tokens=800, stop_loops=False), conversation=2)
        ran_on = log.next_of(Finished)
    finally:
        assert worker.shutdown(timeout=60)
    assert ran_on.finish_reason == "length" and ran_on.stats.completion_tokens == 800  # the loop, left alone
    assert stopped.finish_reason == "repetition" and stopped.stats.completion_tokens < 700
    assert ran_on.text.startswith(stopped.text)  # the same reply, cut where it began to repeat itself
