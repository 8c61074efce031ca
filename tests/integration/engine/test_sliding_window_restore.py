"""Issue 61, suspected: a sliding-window restore wasted, then refused by ``can_cut_back``. A sliding-window cache
restored from a snapshot holds only the window before the snapshot's end, so cutting it back anywhere short of that
end is refused and the prompt read from the start — after the snapshot was copied into llama.cpp for nothing (at
Gemma 3's sizes, hundreds of MB). A snapshot is restored only where it can be used."""

from __future__ import annotations

from pathlib import Path

from fara_desktop.engine import context_states
from fara_desktop.engine.backend import PromptRequest, ReplyRequest
from fara_desktop.engine.llama_backend import LlamaBackend
from fara_desktop.engine.types import ApiClient
from fara_desktop.planning.params import LoadParams
from fara_desktop.vocabulary.messages import ChatMessage
from fara_desktop.vocabulary.sampling import SamplingParams
from tests.integration.engine.test_prefix_paths import model_of

GREEDY = SamplingParams(temperature=0.0, max_tokens=4, ignore_eos=True, repeat_penalty=1.0)
# One token: the context then holds the prompt alone, which the follow-up starts with whatever the (random-weight)
# model wrote — its bytes need not be text, which the own-token spelling of a longer reply would need.
ONE = SamplingParams(temperature=0.0, max_tokens=1, ignore_eos=True, repeat_penalty=1.0)


def never() -> bool:
    return False


def ignore(*_: object) -> None:
    return None


def test_a_snapshot_a_sliding_window_cannot_be_cut_back_to_is_not_restored(tmp_path: Path, monkeypatch):
    restores: list[int] = []
    real_restore = context_states.restore_sequence

    def counted(llm, snapshot):  # type: ignore[no-untyped-def]
        restores.append(len(snapshot.tokens))
        return real_restore(llm, snapshot)

    monkeypatch.setattr(context_states, "restore_sequence", counted)
    backend = LlamaBackend()
    backend.load(model_of("gemma3", tmp_path), LoadParams(n_ctx=2048, n_threads=2, prefault=False))
    try:
        system = ChatMessage("system", "the cat sat on the mat. " * 40)  # longer than the window (128)
        for asked, owner in (("hello", 1), ("what is new", ApiClient("key:a"))):  # chat 1 to RAM for a client
            backend.reply(
                backend.prepare(PromptRequest([system, ChatMessage("user", asked)], 64)),
                ReplyRequest(ONE, never, ignore, owner),
            )
        other = backend.prepare(PromptRequest([system, ChatMessage("user", "a dog ran in the park today")], 64))
        result = backend.reply(other, ReplyRequest(GREEDY, never, ignore, 2))  # shares the long system prompt
        assert not restores, f"restored {restores} tokens, then read the prompt whole"
        chat = [system, ChatMessage("user", "hello"), ChatMessage("assistant", "a"), ChatMessage("user", "and then")]
        again = backend.reply(
            backend.prepare(PromptRequest(chat, 64)), ReplyRequest(GREEDY, never, ignore, 1)
        )  # chat 1 goes on
    finally:
        backend.unload()
    assert result.stats.prompt_tokens_evaluated == result.stats.prompt_tokens
    assert restores, "a snapshot usable from its end was not restored"
    assert again.stats.prompt_tokens_evaluated == again.stats.prompt_tokens - restores[-1]  # read from its end on
