"""The window's replies check proposals from their own text in the model's own context (issue 65,
``engine/window_speculation.py``): greedy and seeded sampled replies are plain decoding's token for token, in each
of the prefix tests' eight families (a hybrid, whose recurrent state cannot be cut back, proposes nothing); the
context is left as plain decoding leaves it, so the chat's next turn reuses the same; the reply's figures say how
many tokens were proposed and accepted. Real llama.cpp: small F32 models of each family, and the embedded SmolLM2
quoting a passage."""

from __future__ import annotations

from pathlib import Path

import pytest

from fara_desktop.engine.backend import PromptRequest, ReplyRequest, ReplyResult
from fara_desktop.engine.llama_backend import LlamaBackend
from fara_desktop.planning.params import LoadParams
from fara_desktop.vocabulary.messages import ChatMessage
from fara_desktop.vocabulary.sampling import SamplingParams
from tests.helpers.hybrid_factory import HYBRID_FAMILIES
from tests.integration.engine.test_prefix_paths import FAMILIES, model_of

GREEDY = SamplingParams(temperature=0.0, repeat_penalty=1.0, max_tokens=60, ignore_eos=True)
SEEDED = SamplingParams(temperature=0.8, repeat_penalty=1.1, max_tokens=60, ignore_eos=True, seed=42)
CHAT = [ChatMessage("user", "Say it again: the cat sat on the mat, the cat sat on the mat, the cat sat on the mat.")]


def replies(path: Path, speculate: bool, sampling: SamplingParams) -> tuple[list[ReplyResult], list[int]]:
    """Two turns of one chat (the second continues from what the first left in the context), and the tokens the
    context holds after the first."""
    backend = LlamaBackend()
    backend.load(path, LoadParams(n_ctx=2048, n_threads=2, prefault=False, speculate=speculate))
    try:
        chat, results, held = list(CHAT), [], []
        for turn in range(2):
            prompt = backend.prepare(PromptRequest(chat, 200))
            results.append(backend.reply(prompt, ReplyRequest(sampling, lambda: False, lambda _: None, "chat")))
            if turn == 0:
                llm = backend._require()[0]
                held = [int(t) for t in llm.input_ids[: llm.n_tokens]]
            chat += [ChatMessage("assistant", results[-1].text), ChatMessage("user", "And once more.")]
        return results, held
    finally:
        backend.close()


@pytest.mark.parametrize("family", FAMILIES)
def test_greedy_and_seeded_replies_are_plain_decodings_and_the_context_is_left_alike(family: str, tmp_path: Path):
    path = model_of(family, tmp_path)
    for sampling in (GREEDY, SEEDED):
        plain, plain_held = replies(path, False, sampling)
        speculated, held = replies(path, True, sampling)
        assert [r.text for r in speculated] == [r.text for r in plain], f"{family} at {sampling.temperature}"
        assert held == plain_held  # cells past the reply's last token (or a proposal) would differ from plain's
        for mine, theirs in zip(speculated, plain, strict=True):
            assert mine.stats.prompt_tokens_evaluated == theirs.stats.prompt_tokens_evaluated  # the same reuse
            assert theirs.stats.draft_proposed == 0
        proposed = sum(r.stats.draft_proposed for r in speculated)
        accepted = sum(r.stats.draft_accepted for r in speculated)
        if family in HYBRID_FAMILIES:
            assert proposed == 0  # a recurrent state could not take a rejected proposal back
        elif sampling is GREEDY:  # a random-weight model's greedy reply loops: its own text proposes the loop
            assert accepted > 0 and proposed >= accepted


def test_a_quote_of_the_prompt_is_proposed_and_accepted_and_said_in_the_figures(smollm2_path: Path):
    passage = "The lighthouse keeper climbed the spiral stairs every evening to light the great lamp."
    chat = [ChatMessage("user", f"Here is a passage:\n\n{passage}\n\nRepeat the passage word for word.")]
    sampling = SamplingParams(temperature=0.0, max_tokens=40)
    texts = []
    for speculate in (False, True):
        backend = LlamaBackend()
        backend.load(smollm2_path, LoadParams(n_ctx=1024, n_threads=2, prefault=False, speculate=speculate))
        try:
            prompt = backend.prepare(PromptRequest(chat, 100))
            result = backend.reply(prompt, ReplyRequest(sampling, lambda: False, lambda _: None))
        finally:
            backend.close()
        texts.append(result.text)
        if speculate:
            assert 0 < result.stats.draft_accepted <= result.stats.draft_proposed
    assert "lighthouse keeper climbed" in texts[0]
