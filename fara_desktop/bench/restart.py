"""A long chat after a restart, and an Edit and a Branch right after a reply, on the app's own engine: the tokens
a restart reads beyond the new message (``restart_tokens_reread``, goal 0), and each path's first word against
the reading it did. The model writes its replies (lowercase words: a random-weight model's bytes are not text),
so the next prompt tokenizes them again as a real chat's does."""

from __future__ import annotations

import tempfile
import time
from pathlib import Path
from typing import Any

from fara_desktop.bench.resume import chat_of
from fara_desktop.engine.backend import PromptRequest, ReplyRequest, ReplyResult
from fara_desktop.engine.kv_disk import KVDiskStore
from fara_desktop.engine.llama_backend import LlamaBackend
from fara_desktop.planning.params import LoadParams
from fara_desktop.vocabulary.messages import ChatMessage
from fara_desktop.vocabulary.sampling import SamplingParams

WORDS = SamplingParams(temperature=0.0, max_tokens=96, json_schema='{"type": "string", "pattern": "^[a-z ]{1,600}$"}')
FIRST_WORD = SamplingParams(temperature=0.0, max_tokens=1, ignore_eos=True)
ASKED = "And what happened after that?"


def restart(model: Path, params: LoadParams, history_tokens: int) -> dict[str, Any]:
    """A chat of about ``history_tokens`` whose last two replies the model wrote, the app closed after the last
    one and opened again, the next question; then a Branch and an Edit right after that reply (its state still
    on its way to disk)."""
    with tempfile.TemporaryDirectory(prefix="fara-restart-") as folder:
        store = KVDiskStore(Path(folder), budget_bytes=1 << 40)
        backend = LlamaBackend(state_store=store)

        def ask(chat: list[ChatMessage], sampling: SamplingParams, conversation: int) -> tuple[ReplyResult, float]:
            started = time.perf_counter()
            prompt = backend.prepare(PromptRequest(chat, 128))
            return backend.reply(prompt, ReplyRequest(sampling, lambda: False, lambda *_: None, conversation)), (
                time.perf_counter() - started
            )

        backend.load(model, params)
        try:
            chat = chat_of(backend, history_tokens)
            for _ in range(2):
                chat += [ChatMessage("assistant", ask(chat, WORDS, 1)[0].text), ChatMessage("user", ASKED)]
            held = backend._llm.n_tokens if backend._llm is not None else 0  # what the state at quit holds
            backend.save_to_disk(wait=True)  # at quit
            state_bytes = sum(p.stat().st_size for p in Path(folder).glob("*.kvstate"))
        finally:
            backend.unload()
        backend.load(model, params)  # the app opened again
        try:
            resumed, resumed_s = ask(chat, FIRST_WORD, 1)
            backend.save_to_disk()  # on its way to disk, as after every reply; the user goes on at once
            branch, branch_s = ask([*chat[:-1], ChatMessage("user", "Who else was there?")], FIRST_WORD, 2)
            edit, edit_s = ask([*chat[:-1], ChatMessage("user", "Where was that?")], FIRST_WORD, 1)
        finally:
            backend.unload()
    return {
        "restart_history_tokens": resumed.stats.prompt_tokens,
        "restart_tokens_read": resumed.stats.prompt_tokens_evaluated,
        # beyond the new message (what the state at quit did not hold): the goal is 0
        "restart_tokens_reread": max(0, resumed.stats.prompt_tokens_evaluated - (resumed.stats.prompt_tokens - held)),
        "restart_first_word_s": resumed_s,
        "restart_states_bytes": state_bytes,
        "branch_after_reply_tokens_read": branch.stats.prompt_tokens_evaluated,
        "branch_after_reply_first_word_s": branch_s,
        "edit_after_reply_tokens_read": edit.stats.prompt_tokens_evaluated,
        "edit_after_reply_first_word_s": edit_s,
    }
