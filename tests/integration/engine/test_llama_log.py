"""llama.cpp's log lines in the log file users share: what matters, not what llama-cpp-python makes it say on every
batch (issue 61, suspected: every eval of a hybrid model logged ``seq_rm: invalid seq_id (-1)`` as an error —
confirmed: ``Llama.eval`` asks every sequence to drop the cells past its end, which a recurrent memory refuses)."""

from __future__ import annotations

import logging

import pytest

from fara_desktop.engine.backend import PromptRequest, ReplyRequest
from fara_desktop.engine.llama_backend import LlamaBackend
from fara_desktop.planning.params import LoadParams
from fara_desktop.vocabulary.messages import ChatMessage
from fara_desktop.vocabulary.sampling import SamplingParams
from tests.helpers.hybrid_factory import write_tiny_hybrid


@pytest.mark.parametrize("family", ["lfm2", "qwen35"])
def test_a_hybrid_models_replies_log_no_error(tmp_path, family, caplog):
    caplog.set_level(logging.WARNING, logger="llama.cpp")
    backend = LlamaBackend()
    backend.load(write_tiny_hybrid(tmp_path / "m.gguf", family), LoadParams(n_ctx=1024, n_threads=2, prefault=False))
    try:
        chat = [ChatMessage("system", "the cat sat on the mat. " * 8), ChatMessage("user", "hello")]
        greedy = SamplingParams(temperature=0.0, max_tokens=8)
        for _ in range(2):
            done = backend.reply(
                backend.prepare(PromptRequest(chat, 64)), ReplyRequest(greedy, lambda: False, lambda *_: None, 1)
            )
            chat += [ChatMessage("assistant", done.text), ChatMessage("user", "and then")]
    finally:
        backend.unload()
    errors = [r.getMessage() for r in caplog.records if r.name == "llama.cpp" and r.levelno >= logging.ERROR]
    assert errors == []
