"""Every path that keeps part of a chat's context continues exactly as a fresh read would (issue 41): a Regenerate,
an Edit in the middle, a Branch, a switch back to a chat kept in RAM, a read-ahead thrown away by a key, a local
API request between turns, and a restart that restores the chat from disk. Greedy continuations after each are
compared with those of a second engine reading the same prompt from nothing — for a dense model, a sliding-window
one, a mixture of experts and three hybrid families whose recurrent state cannot be cut back to a prefix (short
convolutions, Mamba-2, gated delta-net). Real llama.cpp, small random-weight models of each architecture."""

from __future__ import annotations

from pathlib import Path

import pytest

from fara_desktop.engine.backend import ReplyResult
from fara_desktop.engine.kv_disk import KVDiskStore
from fara_desktop.engine.llama_backend import LlamaBackend
from fara_desktop.engine.types import ISOLATED, ChatMessage, SamplingParams
from fara_desktop.planning.params import LoadParams
from tests.helpers.gguf_factory import write_tiny_model
from tests.helpers.hybrid_factory import HYBRID_FAMILIES, write_tiny_hybrid

GREEDY = SamplingParams(temperature=0.0, max_tokens=10, ignore_eos=True)
PARAMS = LoadParams(n_ctx=2048, n_threads=2, prefault=False)
TEMPLATE = (
    "{% for m in messages %}<start_of_turn>{{ m['role'] }}\n{{ m['content'] }}<end_of_turn>\n{% endfor %}"
    "{% if add_generation_prompt %}<start_of_turn>assistant\n{% endif %}"
)
FAMILIES = ("llama", "gemma3", "qwen3moe", *HYBRID_FAMILIES)


def model_of(family: str, folder: Path) -> Path:
    path = folder / f"{family}.gguf"
    if family in HYBRID_FAMILIES:
        return write_tiny_hybrid(path, family, chat_template=TEMPLATE)
    return write_tiny_model(path, family, chat_template=TEMPLATE, context_length=2048)


SYSTEM = ChatMessage("system", "the cat sat on the mat. " * 30)  # a long shared start, short turns after it


def user(text: str) -> ChatMessage:
    return ChatMessage("user", text)


class Engines:
    """The engine under test (states in RAM and on disk) and a reference that reads every prompt from nothing."""

    def __init__(self, model: Path, store: KVDiskStore) -> None:
        self.model, self.store = model, store
        self.decoded = 0  # tokens llama.cpp was given to decode by the engine under test, as Llama.eval counts them
        self.tested = self._loaded()
        self.reference = LlamaBackend()
        self.reference.load(model, PARAMS)

    def _loaded(self) -> LlamaBackend:
        backend = LlamaBackend(state_store=self.store)
        backend.load(self.model, PARAMS)
        llm = backend._llm
        original = llm.eval

        def counted(tokens):
            self.decoded += len(tokens)
            return original(tokens)

        llm.eval = counted  # Llama.generate and the read-ahead both decode through it
        return backend

    def say(self, messages: list[ChatMessage], conversation: object) -> ReplyResult:
        prompt = self.tested.prepare(messages, 64)
        before = self.decoded
        result = self.tested.reply(prompt, GREEDY, lambda: False, lambda _text: None, conversation)
        self.read = self.decoded - before - (result.stats.completion_tokens - 1)  # of the prompt, really
        return result

    def fresh(self, messages: list[ChatMessage]) -> str:
        self.reference.forget_context(snapshots=True)
        prompt = self.reference.prepare(messages, 64)
        return self.reference.reply(prompt, GREEDY, lambda: False, lambda _text: None, None).text

    def check(self, path: str, messages: list[ChatMessage], conversation: object, reuses: bool = True) -> ReplyResult:
        """``reuses``: the path must read less than half of the prompt (it continues a saved state)."""
        result = self.say(messages, conversation)
        assert result.text == self.fresh(messages), f"{path}: the continuation differs from a fresh read"
        assert result.stats.prompt_tokens_evaluated == self.read, f"{path}: the reply's figures say otherwise"
        if reuses:
            assert self.read < result.stats.prompt_tokens / 2, f"{path}: read {self.read} of the prompt again"
        return result

    def restart(self) -> None:
        self.tested.keep_state(wait=True)
        self.tested.unload()
        self.tested = self._loaded()

    def close(self) -> None:
        self.tested.unload()
        self.reference.unload()


@pytest.fixture(params=FAMILIES)
def engines(request, tmp_path):
    pair = Engines(model_of(request.param, tmp_path), KVDiskStore(tmp_path / "kv"))
    yield pair
    pair.close()


def test_every_path_that_keeps_a_prefix_continues_as_a_fresh_read(engines):
    first = [SYSTEM, user("hello world")]
    one = engines.check("first reply", first, 1, reuses=False)
    engines.check("regenerate", first, 1)
    assert engines.read <= 1, "a Regenerate reads its prompt again"
    follow = [*first, ChatMessage("assistant", one.text), user("the dog")]
    engines.check("follow-up", follow, 1)
    edited = [*first, ChatMessage("assistant", one.text), user("a cat on a mat")]
    engines.check("edit in the middle", edited, 1)
    engines.check("branch", [*first, ChatMessage("assistant", one.text), user("hello dog")], 2)
    back = engines.check("back to the first chat (RAM)", [*edited, ChatMessage("assistant", "the cat"), user("dog")], 1)
    engines.check("a local API request", [SYSTEM, user("a dog sat")], ISOLATED, reuses=False)
    history = [*edited, ChatMessage("assistant", "the cat"), user("dog"), ChatMessage("assistant", back.text)]
    typed = engines.tested.prepare([*history, user("the mat the mat the")], 64)
    engines.tested.read_ahead(typed, 1, lambda: False, lambda _total, _done: None)
    sent = [*history, user("the world")]  # the user went on typing: the read-ahead's end is thrown away
    engines.check("read-ahead thrown away", sent, 1)
    engines.restart()
    engines.check("restored from disk", [*sent, ChatMessage("assistant", "a dog"), user("hello")], 1)
