"""What a read-ahead read stays read when Enter stops it: a paste read ahead for 10 s while the user pauses must
save those 10 s after Enter, for every family. A recurrent state (the hybrids) takes in part of a batch that
llama.cpp aborts and cannot give it back, so a stop inside a batch used to throw the whole read-ahead away."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from fara_desktop.engine.backend import PromptRequest, ReplyRequest
from fara_desktop.engine.kv_disk import KVDiskStore
from fara_desktop.engine.llama_backend import READ_AHEAD_FIRST_CHUNK, LlamaBackend
from fara_desktop.vocabulary.messages import ChatMessage
from fara_desktop.vocabulary.sampling import SamplingParams
from tests.helpers.hybrid_factory import HYBRID_FAMILIES
from tests.integration.engine.test_prefix_paths import PARAMS, model_of

PASTE = "the committee read the figures for the depots and the harbour. " * 5
GREEDY = SamplingParams(temperature=0.0, max_tokens=4, ignore_eos=True, repeat_penalty=1.0)


def stopped_inside_the_second_batch(progress: list[int]) -> Callable[[], bool]:
    """Enter, pressed while llama.cpp reads the read-ahead's second batch: the stop check says stop from its
    third question after the first batch was reported (the loop's check, then the abort callback's inside)."""
    asked = [0]

    def should_stop() -> bool:
        if progress and progress[-1] >= READ_AHEAD_FIRST_CHUNK:
            asked[0] += 1
        return asked[0] >= 3

    return should_stop


@pytest.mark.parametrize("family", ("llama", *HYBRID_FAMILIES))
def test_enter_during_a_read_ahead_keeps_what_it_read(tmp_path, family):
    backend = LlamaBackend(state_store=KVDiskStore(tmp_path / "kv"))
    backend.load(model_of(family, tmp_path), PARAMS)
    try:
        chat = [ChatMessage("system", "the cat sat on the mat."), ChatMessage("user", "hello"),
                ChatMessage("assistant", "the cat"), ChatMessage("user", PASTE)]  # fmt: skip
        prompt = backend.prepare(PromptRequest(chat, 64))
        progress: list[int] = []
        backend.read_ahead(prompt, 1, stopped_inside_the_second_batch(progress), lambda _t, done: progress.append(done))
        read_ahead = max(progress)
        assert read_ahead >= READ_AHEAD_FIRST_CHUNK  # the first batch was read before Enter
        reply = backend.reply(prompt, ReplyRequest(GREEDY, lambda: False, lambda *_: None, 1))
        tokens = reply.stats.prompt_tokens
        assert reply.stats.prompt_tokens_evaluated <= tokens - read_ahead + 1, "the read-ahead was thrown away"
    finally:
        backend.unload()
