"""A thinking model's follow-up (issue 54, item 5): Qwen3.5's template, as most reasoning templates, drops an
earlier reply's reasoning from the prompt, so the prompt parts from what the context holds where that reply's
reasoning began. A follow-up must read the last answer and the new words only — on a dense model (cut back there)
as on a hybrid (which cannot be cut back: it needs the state kept where the reasoning began), not the whole chat."""

from __future__ import annotations

from pathlib import Path

import pytest

from fara_desktop.engine.backend import PreparedPrompt, PromptRequest, ReplyRequest, ReplyResult
from fara_desktop.engine.kv_states import common_prefix
from fara_desktop.engine.llama_backend import LlamaBackend
from fara_desktop.planning.params import LoadParams
from fara_desktop.vocabulary.messages import ChatMessage
from fara_desktop.vocabulary.sampling import SamplingParams
from tests.helpers.gguf_factory import write_tiny_model
from tests.helpers.hybrid_factory import HYBRID_FAMILIES, write_tiny_hybrid
from tests.helpers.paths import FIXTURES

QWEN35 = (FIXTURES / "chat_templates" / "Qwen3.5-4B.jinja").read_text(encoding="utf-8")
WRITE = SamplingParams(temperature=0.0, max_tokens=40, ignore_eos=True, repeat_penalty=1.0)


def model_of(family: str, folder: Path) -> Path:
    path = folder / f"{family}-qwen35-template.gguf"
    if family in HYBRID_FAMILIES:
        return write_tiny_hybrid(path, family, chat_template=QWEN35)
    return write_tiny_model(path, family, chat_template=QWEN35, context_length=2048)


@pytest.mark.parametrize("read_ahead", [False, True], ids=["sent-at-once", "read-ahead"])
@pytest.mark.parametrize("family", ["llama", *HYBRID_FAMILIES])
def test_a_follow_up_reads_the_last_answer_without_its_reasoning_and_the_new_words(tmp_path, family, read_ahead):
    """Issue 61, item 3: with the message read ahead as it was typed (the default), a hybrid's follow-up read
    9.1× its new tokens: the read-ahead read past the reasoning's opening and kept no state there."""
    backend = LlamaBackend()
    backend.load(model_of(family, tmp_path), LoadParams(n_ctx=2048, n_threads=2, prefault=False))
    chat = [ChatMessage("system", "You are a careful assistant. " * 30), ChatMessage("user", "What is two and two")]
    read_over_new = []

    def answer(prompt: PreparedPrompt) -> tuple[ReplyResult, int]:
        """The reply, and the tokens read for it: by the read-ahead, then by the reply."""
        read = 0
        if read_ahead:
            began: list[int] = []
            cached = backend.read_ahead(prompt, 7, lambda: False, lambda _t, done: began.append(done))
            read = cached - began[0]
        reply = backend.reply(prompt, ReplyRequest(WRITE, lambda: False, lambda *_: None, 7))
        return reply, read + reply.stats.prompt_tokens_evaluated

    try:
        for asked in ("And why is that so", "Say it once more"):
            first = backend.prepare(PromptRequest(chat, 64))
            assert first.detail.rendered.text.endswith("<think>\n")  # the reply starts inside its reasoning
            written, _ = answer(first)
            chat += [ChatMessage("assistant", "It is four.", reasoning=written.text), ChatMessage("user", asked)]
            follow = backend.prepare(PromptRequest(chat, 64))
            new = len(follow.detail.tokens) - common_prefix(first.detail.tokens, follow.detail.tokens)
            result, read = answer(follow)
            read_over_new.append(read / new)
            chat += [ChatMessage("assistant", "Because it is.", reasoning=result.text), ChatMessage("user", asked)]
    finally:
        backend.unload()
    print(f"\n{family}: thinking_followup_read_over_new {read_over_new} (read ahead: {read_ahead})")
    assert max(read_over_new) <= 1.2, "the follow-up read the chat again"


@pytest.mark.parametrize("family", ["llama", "qwen35"])
def test_the_bench_says_it_and_the_follow_up_continues_as_a_fresh_read(tmp_path, family):
    """``bench --section prefix``'s keys on a dense model and a gated delta-net with the real Qwen3.5 template."""
    from fara_desktop.bench.prefix_paths import prefix_paths

    figures = prefix_paths(model_of(family, tmp_path), LoadParams(n_ctx=2048, n_threads=2, prefault=False))
    assert figures["thinking_followup_same_tokens"] is True
    assert figures["thinking_followup_read_over_new"] <= 1.2
    assert figures["prefix_paths_same_tokens"] is True
