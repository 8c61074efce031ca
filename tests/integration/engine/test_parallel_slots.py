"""The sequences' kept states are slots of the API's principals (issue 63), as llama.cpp's server chooses its slots:
an edited conversation continues its own slot and leaves the client's other conversation kept, the states are
counted in the saved readings' budget beside the window's chats, and a state kept by a reply in the model's own
context serves the same conversation's next request in a sequence. Real SmolLM2, real llama.cpp."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from fara_desktop.engine.backend import PromptRequest, ReplyRequest, ReplyResult
from fara_desktop.engine.llama_backend import LlamaBackend
from fara_desktop.engine.types import ApiClient
from fara_desktop.planning.params import LoadParams
from fara_desktop.vocabulary.errors import FaraError
from fara_desktop.vocabulary.messages import ChatMessage
from fara_desktop.vocabulary.sampling import SamplingParams

GREEDY = SamplingParams(temperature=0.0, max_tokens=12, repeat_penalty=1.0)
CLIENT = ApiClient("a-client")
# longer than the template's own system prompt, which every conversation shares (a slot is continued by a prompt
# sharing half of its last one)
STORY = (
    "Tell me a long story about a lighthouse keeper on a small rocky island in the north, the ships that pass by at "
    "night, the storms of the winter, the letters he writes to his sister, and the day the lamp went out."
)
BREAD = (
    "Explain how bread is baked, from the flour to the oven, step by step: the yeast, the water and its warmth, the "
    "kneading, the first and the second rise, the shaping of the loaf, the scoring, the steam and the crust."
)


@pytest.fixture(scope="module")
def backend(smollm2_path: Path) -> Iterator[LlamaBackend]:
    loaded = LlamaBackend()
    loaded.load(smollm2_path, LoadParams(n_ctx=1024, n_threads=2, prefault=False, parallel=2))
    yield loaded
    loaded.unload()


def in_a_sequence(backend: LlamaBackend, messages: list[ChatMessage]) -> ReplyResult:
    parallel = backend.parallel
    assert parallel is not None
    prompt = backend.prepare(PromptRequest(messages, 64))
    assert parallel.takes(prompt, GREEDY)
    done: list[ReplyResult | FaraError] = []
    parallel.submit(prompt, ReplyRequest(GREEDY, lambda: False, lambda *_: None, CLIENT), done.append)
    while not done:
        parallel.step()
    (result,) = done
    assert isinstance(result, ReplyResult), result
    return result


def reused(result: ReplyResult) -> int:
    return result.stats.prompt_tokens - result.stats.prompt_tokens_evaluated


def test_edits_of_one_conversation_keep_the_clients_other_conversation(backend: LlamaBackend):
    """Four edits used to take four slots of the client's four and drop its other conversation (issue 63)."""
    backend.forget_conversation(None)
    bread = [ChatMessage("user", BREAD)]
    said = in_a_sequence(backend, bread)
    for n in range(4):
        story = [ChatMessage("user", f"{STORY} Make it {n + 3} paragraphs long.")]
        edited = in_a_sequence(backend, story)
        if n:
            assert reused(edited) > 0, "an edit did not continue its own conversation's slot"
    follow_up = [*bread, ChatMessage("assistant", said.text), ChatMessage("user", "And then?")]
    assert reused(in_a_sequence(backend, follow_up)) >= said.stats.prompt_tokens


def test_the_kept_states_are_counted_in_the_saved_readings_budget(backend: LlamaBackend):
    backend.forget_conversation(None)
    assert backend.kv_states.bytes_used == 0
    in_a_sequence(backend, [ChatMessage("user", BREAD)])
    assert len(backend.kv_states) == 1 and backend.kv_states.bytes_used > 0
    backend.forget_conversation(None)  # Delete saved readings: the sequences' go too
    assert len(backend.kv_states) == 0


def test_the_models_own_context_and_the_sequences_never_try_each_others_states(backend: LlamaBackend):
    """llama.cpp restores a sequence's state only into a context of the layout that wrote it ("n_stream mismatch":
    a stream per sequence in the batch's, one in the model's own): a request the sequences cannot take (pictures,
    log probabilities) is replied to in the model's own context, and its state there is neither tried by the
    conversation's next request in a sequence nor thrown away by it."""
    backend.forget_conversation(None)
    bread = [ChatMessage("user", BREAD)]
    prompt = backend.prepare(PromptRequest(bread, 64))
    said = backend.reply(prompt, ReplyRequest(GREEDY, lambda: False, lambda *_: None, CLIENT))
    window = backend.prepare(PromptRequest([ChatMessage("user", STORY)], 64))
    backend.reply(window, ReplyRequest(GREEDY, lambda: False, lambda *_: None, 1))  # the window's chat: the
    # client's state leaves the context for RAM
    assert len(backend.kv_states) == 1
    restores = backend.parallel.batch.restores_refused  # type: ignore[union-attr]
    follow_up = [*bread, ChatMessage("assistant", said.text), ChatMessage("user", "And then?")]
    first = in_a_sequence(backend, follow_up)
    assert reused(first) == 0
    assert backend.parallel.batch.restores_refused == restores  # type: ignore[union-attr]
    assert len(backend.kv_states) == 2  # its own state kept beside the sequence's
    again = [*follow_up, ChatMessage("assistant", first.text), ChatMessage("user", "And after that?")]
    assert reused(in_a_sequence(backend, again)) >= first.stats.prompt_tokens  # the sequence's own state
