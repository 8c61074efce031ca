"""Every path that keeps part of a chat's context continues exactly as a fresh read would (issue 41): a Regenerate, an
Edit in the middle, a Branch, a switch back to a chat kept in RAM, a read-ahead thrown away by a key or stopped
inside a batch (issue 50), a local API client's request between turns and its follow-up (another client sending the
same words reads them whole: issue 52), and a restart that restores the chat from disk (``bench/prefix_paths.py``
walks them). Greedy continuations after each are compared with those of a second engine reading the same prompt
from nothing — for a dense model, a sliding-window one, two mixtures of experts (Qwen3's layout and gpt-oss's,
sliding window and all) and three hybrid families whose recurrent state cannot be cut back to a prefix (short
convolutions, Mamba-2, gated delta-net) — and what llama.cpp really decoded with what the reply's figures say. Real
llama.cpp, small random-weight models of each architecture."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from fara_desktop.bench.prefix_paths import GREEDY, PathResult, PrefixPaths, split_stable
from fara_desktop.engine.backend import PromptRequest, ReplyRequest
from fara_desktop.engine.kv_disk import KVDiskStore
from fara_desktop.engine.types import ApiClient
from fara_desktop.planning.params import LoadParams
from fara_desktop.vocabulary.messages import ChatMessage
from tests.helpers.gguf_factory import write_tiny_model
from tests.helpers.hybrid_factory import HYBRID_FAMILIES, write_tiny_hybrid

PARAMS = LoadParams(n_ctx=2048, n_threads=2, prefault=False)
TEMPLATE = (
    "{% for m in messages %}<start_of_turn>{{ m['role'] }}\n{{ m['content'] }}<end_of_turn>\n{% endfor %}"
    "{% if add_generation_prompt %}<start_of_turn>assistant\n{% endif %}"
)
FAMILIES = ("llama", "gemma3", "qwen3moe", "gpt-oss", *HYBRID_FAMILIES)
SLIDING_WINDOW = {"gemma3", "gpt-oss"}
# A sliding-window cache restored from RAM holds only the window before its end: cutting it back further would
# continue without part of the window (``can_cut_back``), so such a path reads the chat again, correctly.
CUT_AFTER_A_RESTORE = {"back to the first chat (RAM)", "restored from disk"}


def model_of(family: str, folder: Path) -> Path:
    path = folder / f"{family}.gguf"
    if family in HYBRID_FAMILIES:
        return write_tiny_hybrid(path, family, chat_template=TEMPLATE)
    return write_tiny_model(path, family, chat_template=TEMPLATE, context_length=2048)


def assert_the_path_holds(result: PathResult, family: str) -> None:
    assert result.same, f"{result.path}: the continuation differs from a fresh read"
    assert result.read == result.reported, f"{result.path}: the reply's figures say otherwise"
    if result.expect_reuse and not (family in SLIDING_WINDOW and result.path in CUT_AFTER_A_RESTORE):
        assert result.read < result.prompt_tokens / 2, f"{result.path}: read {result.read} tokens again"
    elif not result.expect_reuse:  # a first reply, or a principal that may not reuse what another left
        assert result.read == result.prompt_tokens, f"{result.path}: reused what it may not"


@pytest.mark.parametrize("family", FAMILIES)
def test_every_path_that_keeps_a_prefix_continues_as_a_fresh_read(tmp_path, family):
    paths = PrefixPaths(model_of(family, tmp_path), PARAMS, KVDiskStore(tmp_path / "kv"))
    try:
        for result in paths.walk():
            assert_the_path_holds(result, family)
            if result.path == "regenerate":
                assert result.read <= 1, "a Regenerate reads its prompt again"
        # the control: F32 weights give the same continuation however the prompt is split into batches
        assert split_stable(paths.reference, [ChatMessage("system", "the cat sat on the mat. " * 12)])
    finally:
        paths.close()


def test_a_regenerate_after_a_reply_longer_than_the_sliding_window_continues_as_a_fresh_read(tmp_path):
    """A sliding-window layer's cache reuses the cells of tokens that left its window (once a restored state
    starts the cache over): after a reply longer than the window, cutting back to the prompt's end would continue
    without the window before it (Gemma 3's is 512 or 1,024 tokens; this model's 128)."""
    paths = PrefixPaths(model_of("gemma3", tmp_path), PARAMS, KVDiskStore(tmp_path / "kv"))
    long_reply = replace(GREEDY, max_tokens=400)
    try:
        chat = [ChatMessage("system", "the cat sat on the mat. " * 10), ChatMessage("user", "hello world")]
        prompt = paths.tested.prepare(PromptRequest(chat, 500))
        paths.tested.reply(prompt, ReplyRequest(long_reply, lambda: False, lambda *_: None, 1))
        asked = [ChatMessage("user", "a dog sat")]
        paths.check("a local API request", asked, ApiClient("local-clients"))  # the chat goes to RAM
        paths.tested.reply(
            prompt, ReplyRequest(long_reply, lambda: False, lambda *_: None, 1)
        )  # and comes back: restored
        again = paths.check("regenerate", chat, 1)
        assert again.same, "the Regenerate continued from a window that is no longer there"
    finally:
        paths.close()


@pytest.mark.parametrize("family", FAMILIES)
def test_every_path_holds_with_two_sequences_in_the_context(tmp_path, family):
    """Issue 63: the model loaded for two replies at once (``LoadParams.parallel``): the API client's requests are
    sequences of the batch, each beside another that writes all along; its follow-up continues its own kept state
    (read well under half), another client's same words are read whole, and every continuation is a fresh read's.
    The window's paths, in the model's own context beside the batch, hold as before."""
    paths = PrefixPaths(model_of(family, tmp_path), replace(PARAMS, parallel=2), KVDiskStore(tmp_path / "kv"))
    try:
        for result in paths.walk():
            assert_the_path_holds(result, family)
        assert paths.in_sequences == 3  # the API's three paths went through the sequences
    finally:
        paths.close()
