"""The window's replies check proposals from their own text in the model's own context (issue 65,
``engine/window_speculation.py``): greedy and seeded sampled replies are plain decoding's token for token, in each
of the prefix tests' eight families (a hybrid's recurrent state rolled back to the last accepted token where its
architecture keeps the states for it, else it proposes nothing); the
context is left as plain decoding leaves it, so the chat's next turn reuses the same; the reply's figures say how
many tokens were proposed and accepted. Real llama.cpp: small F32 models of each family, and the embedded SmolLM2
quoting a passage."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import ClassVar

import pytest

from fara_desktop.engine import window_speculation
from fara_desktop.engine.backend import PromptRequest, ReplyRequest, ReplyResult
from fara_desktop.engine.llama_backend import LlamaBackend
from fara_desktop.engine.ngram_draft import DecodeCost, NgramDrafter
from fara_desktop.planning.params import LoadParams
from fara_desktop.vocabulary.messages import ChatMessage
from fara_desktop.vocabulary.sampling import SamplingParams
from tests.helpers.hybrid_factory import HYBRID_FAMILIES
from tests.integration.engine.test_prefix_paths import FAMILIES, model_of

GREEDY = SamplingParams(temperature=0.0, repeat_penalty=1.0, max_tokens=60, ignore_eos=True)
SEEDED = SamplingParams(temperature=0.8, repeat_penalty=1.1, max_tokens=60, ignore_eos=True, seed=42)
# hybrids whose context keeps recurrent states to take tokens back (llama.cpp's ``n_rs_seq``); Mamba-2's does not
ROLLS_BACK = {"qwen35", "lfm2"}
CHAT = [ChatMessage("user", "Say it again: the cat sat on the mat, the cat sat on the mat, the cat sat on the mat.")]


def replies(
    path: Path, speculate: bool, sampling: SamplingParams, elsewhere: bool = False, draft: str = ""
) -> tuple[list[ReplyResult], list[int]]:
    """Two turns of one chat (the second continues from what the first left in the context; ``elsewhere``: from
    its state saved while another chat had a reply between them), and the tokens the context holds after the
    first."""
    backend = LlamaBackend()
    backend.load(path, LoadParams(n_ctx=2048, n_threads=2, prefault=False, speculate=speculate, draft_model=draft))
    try:
        assert backend.info is not None and backend.info.draft == (Path(draft).name if "llama" in draft else "")
        chat, results, held = list(CHAT), [], []
        for turn in range(2):
            prompt = backend.prepare(PromptRequest(chat, 200))
            results.append(backend.reply(prompt, ReplyRequest(sampling, lambda: False, lambda _: None, "chat")))
            if turn == 0:
                llm = backend._require()[0]
                held = [int(t) for t in llm.input_ids[: llm.n_tokens]]
            if turn == 0 and elsewhere:
                other = backend.prepare(PromptRequest([ChatMessage("user", "Something else entirely.")], 200))
                backend.reply(other, ReplyRequest(sampling, lambda: False, lambda *_: None, "another chat"))
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
        if family in HYBRID_FAMILIES and family not in ROLLS_BACK:
            assert proposed == 0  # its recurrent state could not take a rejected proposal back
        elif sampling is GREEDY and family not in HYBRID_FAMILIES:  # a random-weight greedy reply loops: its own
            assert accepted > 0 and proposed >= accepted  # text proposes the loop (these hybrids' do not, in 60)


class Oracle(NgramDrafter):
    """Proposes what a recorded reply wrote next, three tokens at a time, the third always wrong: every step then
    has proposals accepted and one rejected, taken back (a hybrid's recurrent state rolled back). Recording, it
    proposes nothing and keeps each history it was shown."""

    seen: ClassVar[list[list[int]]] = []
    recording: ClassVar[bool] = True

    def draft(self, history: Sequence[int], cost: DecodeCost, others: int, room: int, writers: int = 1) -> list[int]:
        if Oracle.recording:
            Oracle.seen.append(list(history))
            return []
        longer = max((h for h in Oracle.seen if h[: len(history)] == list(history)), key=len, default=[])
        proposed = longer[len(history) : len(history) + min(room, 3)]
        if len(proposed) == 3:
            proposed[2] ^= 1
        return proposed


@pytest.mark.parametrize("family", FAMILIES)
def test_proposals_accepted_and_rejected_in_every_step_leave_plain_decodings_reply(
    family: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    path = model_of(family, tmp_path)
    plain, plain_held = replies(path, False, GREEDY, elsewhere=True)
    monkeypatch.setattr(window_speculation, "NgramDrafter", Oracle)
    monkeypatch.setattr(Oracle, "seen", [])
    recorded, _ = replies(path, True, GREEDY, elsewhere=True)
    monkeypatch.setattr(Oracle, "recording", False)
    # the first reply ends inside a step, its rejected proposal taken back: the state the other chat's reply saves
    # of it, restored for the second turn, must be the one without that proposal
    speculated, held = replies(path, True, GREEDY, elsewhere=True)
    assert [r.text for r in recorded] == [r.text for r in speculated] == [r.text for r in plain]
    proposed = sum(r.stats.draft_proposed for r in speculated)
    accepted = sum(r.stats.draft_accepted for r in speculated)
    if family in HYBRID_FAMILIES and family not in ROLLS_BACK:
        assert proposed == 0
    else:
        assert 0 < accepted < proposed, (accepted, proposed)  # both paths taken, in each step
        assert held == plain_held


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


@pytest.mark.parametrize("family", sorted(ROLLS_BACK))
def test_a_copy_of_a_hybrids_state_after_a_reply_that_stopped_inside_a_step_is_the_state_its_cells_say(
    family: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    """llama.cpp takes a hybrid's recurrent state back at its next decode; a copy made before it (a chat's state
    saved when another chat takes the context, or on quitting) is taken from the snapshot it will go back to, not
    the state past the rejected proposal: probes decoded after the copy restored give the live context's logits."""
    import ctypes

    import llama_cpp

    path = model_of(family, tmp_path)
    monkeypatch.setattr(window_speculation, "NgramDrafter", Oracle)
    monkeypatch.setattr(Oracle, "seen", [])
    replies(path, True, GREEDY)
    monkeypatch.setattr(Oracle, "recording", False)
    backend = LlamaBackend()
    backend.load(path, LoadParams(n_ctx=2048, n_threads=2, prefault=False))
    try:
        short = replace(GREEDY, max_tokens=30)  # 1 + 3 × 9 + 2 tokens: it stops on a step's accepted second one
        result = backend.reply(backend.prepare(PromptRequest(CHAT, 200)), ReplyRequest(short, lambda: False, _none))
        assert 0 < result.stats.draft_accepted < result.stats.draft_proposed
        llm = backend._require()[0]
        ctx, held = llm.ctx, llm.n_tokens
        size = llama_cpp.llama_state_seq_get_size(ctx, 0)
        state = (ctypes.c_uint8 * size)()
        assert llama_cpp.llama_state_seq_get_data(ctx, state, size, 0) > 0

        def probe_logits() -> list[float]:
            llm.eval([5, 6, 7])  # decodes from ``held`` on (the cells past it are dropped first)
            return list(llama_cpp.llama_get_logits_ith(ctx, -1)[: llm.n_vocab()])

        live = probe_logits()
        llama_cpp.llama_memory_seq_rm(llama_cpp.llama_get_memory(ctx), -1, -1, -1)
        assert llama_cpp.llama_state_seq_set_data(ctx, state, size, 0) == size
        llm.n_tokens = held
        assert probe_logits() == live
    finally:
        backend.close()


def _none(*_: object) -> None:
    return None


def test_a_draft_model_beside_proposes_the_windows_tokens_and_one_of_another_vocabulary_is_left_out(
    tmp_path: Path, smollm2_path: Path
):
    """The same weights as a draft: every proposal accepted, the reply plain decoding's; SmolLM2 (another
    vocabulary) is not loaded as a draft, and the model goes on without one (``replies`` checks ``info.draft``)."""
    path = model_of("llama", tmp_path)
    plain, plain_held = replies(path, False, GREEDY)
    drafted, held = replies(path, True, GREEDY, draft=str(path))
    assert [r.text for r in drafted] == [r.text for r in plain] and held == plain_held
    proposed = sum(r.stats.draft_proposed for r in drafted)
    assert proposed > 0 and sum(r.stats.draft_accepted for r in drafted) == proposed
    refused, _ = replies(path, True, GREEDY, draft=str(smollm2_path))
    assert [r.text for r in refused] == [r.text for r in plain]


def test_a_hostile_draft_file_is_refused_before_llama_cpp_reads_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """A draft model is a file from outside like any model: one llama.cpp could abort on (heads that do not divide
    its width) is refused by the same checks, and the model goes on without a draft."""
    import gguf

    from fara_desktop.engine import llama_loading
    from fara_desktop.engine.draft_model import draft_beside
    from tests.helpers.gguf_factory import rewrite_gguf

    path = model_of("llama", tmp_path)
    hostile = rewrite_gguf(
        path, tmp_path / "hostile.gguf", {"llama.attention.head_count": (gguf.GGUFValueType.UINT32, 3)}
    )
    backend = LlamaBackend()
    backend.load(path, LoadParams(n_ctx=512, n_threads=2, prefault=False))
    try:

        def never(*_: object, **__: object) -> None:
            raise AssertionError("the hostile draft reached llama.cpp")

        monkeypatch.setattr(llama_loading, "open_model", never)
        assert draft_beside(backend._require()[0], LoadParams(draft_model=str(hostile)), 512) is None
    finally:
        backend.close()
