"""A reply the tokenizer would spell otherwise is not read again: a follow-up, a Branch and a restart read only the
new message, on hybrid models (whose state cannot be cut back to where the spellings part) as on dense ones. The
models have random weights and a real tokenizer (SmolLM2's); a grammar keeps their replies to lowercase words, so
the replies are text that is stored and tokenized again — in other pieces than the model chose."""

from __future__ import annotations

from pathlib import Path

import pytest

from fara_desktop.engine.backend import PromptRequest, ReplyRequest
from fara_desktop.engine.kv_disk import KVDiskStore
from fara_desktop.engine.kv_states import common_prefix
from fara_desktop.engine.llama_backend import LlamaBackend
from fara_desktop.planning.params import LoadParams
from fara_desktop.vocabulary.messages import ChatMessage
from fara_desktop.vocabulary.sampling import SamplingParams
from tests.helpers.hybrid_factory import HYBRID_FAMILIES, write_tiny_hybrid

PARAMS = LoadParams(n_ctx=2048, n_threads=2, prefault=False)
WORDS = SamplingParams(temperature=0.0, max_tokens=48, json_schema='{"type": "string", "pattern": "^[a-z ]{1,300}$"}')
CONTINUE = SamplingParams(temperature=0.0, max_tokens=8, ignore_eos=True, repeat_penalty=1.0)
ASKED = "And then what happened next"


def reply(backend: LlamaBackend, chat: list[ChatMessage], sampling: SamplingParams):
    return backend.reply(
        backend.prepare(PromptRequest(chat, 64)), ReplyRequest(sampling, lambda: False, lambda *_: None, 7)
    )


@pytest.mark.parametrize("family", HYBRID_FAMILIES)
def test_a_follow_up_and_a_restart_read_only_the_new_message(tmp_path: Path, smollm2_path: Path, family: str):
    model = write_tiny_hybrid(tmp_path / "model.gguf", family, vocabulary_of=smollm2_path)
    store = KVDiskStore(tmp_path / "states")
    backend = LlamaBackend(state_store=store)
    backend.load(model, PARAMS)
    chat = [ChatMessage("system", "You are a helpful assistant. " * 20), ChatMessage("user", "Hello there")]
    respelled = 0
    try:
        for _ in range(2):
            written = reply(backend, chat, WORDS)
            chat += [ChatMessage("assistant", written.text), ChatMessage("user", ASKED)]
            context = backend._llm.input_ids[: backend._llm.n_tokens].tolist()  # type: ignore[union-attr]
            canonical = backend.prepare(PromptRequest(chat, 64)).detail.tokens
            respelled += common_prefix(context, canonical) < len(context)  # the tokenizer parts from the model
            new_message = len(canonical) - len(backend.prepare(PromptRequest(chat[:-1], 64)).detail.tokens)
            follow_up = reply(backend, chat, CONTINUE)
            assert follow_up.stats.prompt_tokens_evaluated <= new_message + 8, "the reply was read again"
            chat += [ChatMessage("assistant", follow_up.text), ChatMessage("user", ASKED)]
        in_memory = reply(backend, chat, CONTINUE)
        branched = [*chat, ChatMessage("assistant", in_memory.text), ChatMessage("user", "Who else was there")]
        new_message = len(backend.prepare(PromptRequest(branched, 64)).detail.tokens) - len(
            backend.prepare(PromptRequest(chat, 64)).detail.tokens
        )
        branch = backend.reply(
            backend.prepare(PromptRequest(branched, 64)), ReplyRequest(CONTINUE, lambda: False, lambda *_: None, 8)
        )
        assert branch.stats.prompt_tokens_evaluated <= new_message + 8, "a Branch read the chat's replies again"
        in_memory = reply(backend, chat, CONTINUE)  # back to the chat (a near-tie may go otherwise from a checkpoint)
        backend.save_to_disk(wait=True)  # its state is the one kept at quit
    finally:
        backend.unload()
    assert respelled, "no reply was spelled otherwise by the tokenizer: the test shows nothing"
    again = LlamaBackend(state_store=store)
    again.load(model, PARAMS)
    try:
        chat += [ChatMessage("assistant", in_memory.text), ChatMessage("user", ASKED)]
        restarted = reply(again, chat, CONTINUE)
        new_message = len(again.prepare(PromptRequest(chat, 64)).detail.tokens) - len(
            again.prepare(PromptRequest(chat[:-1], 64)).detail.tokens
        )
        assert restarted.stats.prompt_tokens_evaluated <= new_message + 8, "the restart read the chat again"
        llm = again._llm
        assert llm is not None
        prompt = llm.input_ids[: restarted.stats.prompt_tokens].tolist()  # the tokens it read, the model's own in it
        continued = llm.input_ids[restarted.stats.prompt_tokens : llm.n_tokens].tolist()
    finally:
        again.unload()
    assert continued == fresh_read(model, prompt, len(continued)), "the respelled prompt continues otherwise"


def fresh_read(model: Path, prompt: list[int], count: int) -> list[int]:
    """The greedy continuation of ``prompt`` read whole by llama-cpp-python, from nothing."""
    from llama_cpp import Llama

    llm = Llama(str(model), n_ctx=PARAMS.n_ctx, n_threads=2, verbose=False)
    try:
        tokens = []
        for token in llm.generate(prompt, temp=0.0, top_k=1, repeat_penalty=1.0):
            tokens.append(token)
            if len(tokens) == count:
                return tokens
        return tokens
    finally:
        llm.close()


@pytest.mark.parametrize("family", HYBRID_FAMILIES)
def test_an_api_clients_follow_up_reads_only_the_new_message(tmp_path: Path, smollm2_path: Path, family: str):
    """Issue 61, item 5: an API client's follow-ups on a hybrid model read the last reply again (53–58 tokens
    more than a window chat's 6–7): its prompts were never spelled with the model's own tokens. A client sends its
    whole conversation each time; another key's client reading the same words still reads them whole."""
    from fara_desktop.engine.types import ApiClient

    backend = LlamaBackend()
    backend.load(write_tiny_hybrid(tmp_path / "model.gguf", family, vocabulary_of=smollm2_path), PARAMS)
    client = ApiClient("key:editor")
    chat = [ChatMessage("system", "You are a helpful assistant. " * 20), ChatMessage("user", "Hello there")]
    respelled = 0
    try:
        for _ in range(2):
            written = backend.reply(
                backend.prepare(PromptRequest(chat, 64)), ReplyRequest(WORDS, lambda: False, lambda *_: None, client)
            )
            chat += [ChatMessage("assistant", written.text), ChatMessage("user", ASKED)]
            context = backend._llm.input_ids[: backend._llm.n_tokens].tolist()  # type: ignore[union-attr]
            canonical = backend.prepare(PromptRequest(chat, 64)).detail.tokens
            respelled += common_prefix(context, canonical) < len(context)
            new_message = len(canonical) - len(backend.prepare(PromptRequest(chat[:-1], 64)).detail.tokens)
            follow_up = backend.reply(
                backend.prepare(PromptRequest(chat, 64)), ReplyRequest(CONTINUE, lambda: False, lambda *_: None, client)
            )
            assert follow_up.stats.prompt_tokens_evaluated <= new_message + 8, "the reply was read again"
            chat += [ChatMessage("assistant", follow_up.text), ChatMessage("user", ASKED)]
        other = backend.reply(
            backend.prepare(PromptRequest(chat, 64)),
            ReplyRequest(CONTINUE, lambda: False, lambda *_: None, ApiClient("key:x")),
        )
        assert other.stats.prompt_tokens_evaluated == other.stats.prompt_tokens  # another key reuses nothing
    finally:
        backend.unload()
    assert respelled, "no reply was spelled otherwise by the tokenizer: the test shows nothing"
