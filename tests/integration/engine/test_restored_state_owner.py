"""Issue 61, suspected: a stale ``ContextStates.restored_untried`` after an early-returning read-ahead (or a cancelled
reply): a later decode failure could delete that state's file. Confirmed: a read-ahead that restored a chat from disk
and was stopped before reading left the state marked "restored, not yet decoded on"; a reply of another chat that
then failed once blamed it, and the first chat's file was deleted. A state is blamed only while the context holds it."""

from __future__ import annotations

import contextlib
from pathlib import Path

from fara_desktop.engine.backend import PromptRequest, ReplyRequest
from fara_desktop.engine.errors import GenerationError
from fara_desktop.engine.kv_disk import KVDiskStore
from fara_desktop.engine.llama_backend import LlamaBackend
from fara_desktop.planning.params import LoadParams
from fara_desktop.vocabulary.messages import ChatMessage
from fara_desktop.vocabulary.sampling import SamplingParams
from tests.helpers.gguf_factory import write_tiny_model

PARAMS = LoadParams(n_ctx=1024, n_threads=2, prefault=False)
GREEDY = SamplingParams(temperature=0.0, max_tokens=4, ignore_eos=True, repeat_penalty=1.0)


def test_a_failure_in_another_chat_never_deletes_a_state_a_stopped_read_ahead_restored(tmp_path: Path):
    model = write_tiny_model(tmp_path / "m.gguf", context_length=1024)
    store = KVDiskStore(tmp_path / "kv")
    chat = [ChatMessage("system", "the cat sat on the mat. " * 12), ChatMessage("user", "hello")]
    first = LlamaBackend(state_store=store)
    first.load(model, PARAMS)
    try:
        first.reply(first.prepare(PromptRequest(chat, 64)), ReplyRequest(GREEDY, lambda: False, lambda *_: None, 1))
        first.save_to_disk(wait=True)  # chat 1's state on disk, as at quit
    finally:
        first.unload()
    assert store.size_of(1) > 0

    backend = LlamaBackend(state_store=store)
    backend.load(model, PARAMS)
    try:
        follow_up = backend.prepare(
            PromptRequest([*chat, ChatMessage("assistant", "a"), ChatMessage("user", "and then")], 64)
        )
        backend.read_ahead(follow_up, 1, lambda: True, lambda *_: None)  # restores chat 1, then a key stops it
        llm = backend._llm
        assert llm is not None
        real_eval, failed = llm.eval, []

        def fails_once(tokens):  # type: ignore[no-untyped-def]
            if not failed:
                failed.append(True)
                raise RuntimeError("llama_decode returned -3")
            return real_eval(tokens)

        llm.eval = fails_once  # type: ignore[method-assign]
        other = [ChatMessage("system", "a dog ran in the park. " * 12), ChatMessage("user", "hi")]
        with contextlib.suppress(GenerationError):  # the other chat's failure is its own to say
            backend.reply(
                backend.prepare(PromptRequest(other, 64)), ReplyRequest(GREEDY, lambda: False, lambda *_: None, 2)
            )
    finally:
        backend.unload()
    assert failed, "the failure did not happen: the test shows nothing"
    assert store.size_of(1) > 0, "chat 1's state was deleted for another chat's failure"
