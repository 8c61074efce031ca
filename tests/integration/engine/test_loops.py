"""A reply that begins repeating itself is stopped (engine/repetition.py), on the real SmolLM2; the window's chats
end it with ``finish_reason == "repetition"`` instead of running to the token limit.

Whether a given prompt loops, and where, depends on the last bits of the CPU's arithmetic (llama.cpp's AVX2 and
AVX-512 kernels round differently: on an AVX2 laptop SmolLM2's greedy story ended where on AVX-512 it looped). So
the test does not assume the model's text: it lets the model run on past its end of turn (``ignore_eos``) without
the detector, finds a prompt whose reply does loop on this CPU — the detector's own check, read on the text
afterwards; the first, a text that already repeats itself read as it is, loops on AVX2 and AVX-512 alike — then
asks the same again with the detector on."""

from __future__ import annotations

from dataclasses import replace

import pytest

from fara_desktop.engine.repetition import LoopDetector
from fara_desktop.engine.types import Finished, ModelLoaded, ModelLoadFailed
from fara_desktop.engine.worker import InferenceWorker
from fara_desktop.planning.params import LoadParams
from fara_desktop.vocabulary.messages import ChatMessage
from fara_desktop.vocabulary.sampling import SamplingParams
from tests.conftest import EventLog

pytestmark = pytest.mark.real_model

SYSTEM = ChatMessage("system", "You are a helpful assistant.")
# (messages, raw): a text already repeating itself, read as it is (what a model continues most surely on any CPU),
# then questions whose greedy replies loop on some CPUs
PROMPTS = (
    ([ChatMessage("user", "The lighthouse keeper said: the light must never go out. " * 6)], True),
    ([SYSTEM, ChatMessage("user", "Summarise the plot of a detective story set in a lighthouse.")], False),
    ([SYSTEM, ChatMessage("user", "List the days of the week.")], False),
)
TOKENS = 800


def loops(text: str) -> bool:
    """Whether the detector, fed this text a few characters at a time, finds a loop in it."""
    detector = LoopDetector()
    return any(detector.feed(text[i : i + 4]) for i in range(0, len(text), 4))


def test_a_reply_that_loops_is_stopped_and_says_why(smollm2_path):
    log = EventLog()
    worker = InferenceWorker(log).start()
    # no proposals: a quantized model rounds a decode of several tokens otherwise than one, and the two replies
    # compared here must be the same greedy reply (the proposals a reply makes depend on the machine's timing)
    worker.load_model(smollm2_path, LoadParams(n_ctx=2048, prefault=False, speculate=False))
    assert isinstance(log.next_of(ModelLoaded, ModelLoadFailed), ModelLoaded)
    greedy = SamplingParams(temperature=0.0, max_tokens=TOKENS, ignore_eos=True)
    try:
        for conversation, (messages, raw) in enumerate(PROMPTS, 1):
            worker.generate(messages, replace(greedy, stop_loops=False), conversation, raw=raw)
            ran_on = log.next_of(Finished)
            if loops(ran_on.text):
                break
        else:
            pytest.fail(f"none of {len(PROMPTS)} prompts looped in {TOKENS} tokens on this CPU")
        worker.generate(messages, greedy, conversation + 100, raw=raw)
        stopped = log.next_of(Finished)
    finally:
        assert worker.shutdown(timeout=60)
    assert ran_on.finish_reason == "length" and ran_on.stats.completion_tokens == TOKENS  # the loop, left alone
    assert stopped.finish_reason == "repetition" and stopped.stats.completion_tokens < TOKENS
    assert ran_on.text.startswith(stopped.text)  # the same reply, cut where it began to repeat itself
