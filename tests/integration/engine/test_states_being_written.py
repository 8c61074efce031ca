"""A Branch or an Edit right after a reply never waits for the reply's state to reach the disk: the prompt read
waited for the writer (for as long as the disk took to write and sync ~600 MB at 1.7B and 3,000 tokens), although
the state was in memory. The disk here is held until the test lets it go."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from fara_desktop.engine.backend import PromptRequest, ReplyRequest
from fara_desktop.engine.kv_disk import KVDiskStore
from fara_desktop.engine.llama_backend import LlamaBackend
from fara_desktop.vocabulary.messages import ChatMessage
from fara_desktop.vocabulary.sampling import SamplingParams
from tests.integration.engine.test_prefix_paths import PARAMS, model_of

GREEDY = SamplingParams(temperature=0.0, max_tokens=8, ignore_eos=True, repeat_penalty=1.0)
HISTORY = [ChatMessage("system", "the cat sat on the mat. " * 20), ChatMessage("user", "the dog")]


@pytest.mark.parametrize(("family", "path"), [("llama", "branch"), ("lfm2", "branch"), ("lfm2", "edit")])
def test_the_next_prompt_does_not_wait_for_the_disk(tmp_path: Path, family: str, path: str):
    store = KVDiskStore(tmp_path / "states")
    disk_free = threading.Event()
    save = store.save
    store.save = lambda *args, **kwargs: disk_free.wait() and save(*args, **kwargs)  # type: ignore[method-assign]
    backend = LlamaBackend(state_store=store)
    backend.load(model_of(family, tmp_path), PARAMS)
    try:
        first = backend.reply(
            backend.prepare(PromptRequest(HISTORY, 64)), ReplyRequest(GREEDY, lambda: False, lambda *_: None, 1)
        )
        said = [*HISTORY, ChatMessage("assistant", first.text)]
        second = backend.reply(
            backend.prepare(PromptRequest([*said, ChatMessage("user", "a dog")], 64)),
            ReplyRequest(GREEDY, lambda: False, lambda *_: None, 1),
        )
        backend.save_to_disk()  # as the engine does once a reply has ended: the disk holds the write
        if path == "branch":  # a new chat sharing the history
            chat = [*said, ChatMessage("user", "a dog"), ChatMessage("assistant", second.text)]
            chat.append(ChatMessage("user", "hi"))
            conversation = 2
        else:  # the last question edited: back to the state where the first reply ended
            chat, conversation = [*said, ChatMessage("user", "the cat")], 1
        done = threading.Event()
        result = []

        def ask() -> None:
            prompt = backend.prepare(PromptRequest(chat, 64))
            result.append(backend.reply(prompt, ReplyRequest(GREEDY, lambda: False, lambda *_: None, conversation)))
            done.set()

        asker = threading.Thread(target=ask)
        asker.start()
        answered_while_writing = done.wait(20)  # it waited 30 s for the writer before
        disk_free.set()
        asker.join()
        assert answered_while_writing, "the prompt waited for the state to reach the disk"
        assert result[0].stats.prompt_tokens_evaluated < result[0].stats.prompt_tokens / 2
    finally:
        disk_free.set()
        backend.unload()
