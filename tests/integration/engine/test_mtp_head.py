"""The model's own multi-token-prediction head proposes the window's next tokens (issue 65's third method,
``engine/mtp_head.py``): a Qwen3.5 file that carries a NextN block is loaded with it when replies speculate (and
without it when they do not); greedy and seeded replies are plain decoding's token for token, the hybrid's
recurrent state rolled back; the head's cells follow the chat exactly as a head that read the whole chat in one go
(the pairs of each token and the model's hidden state before it); a chat the model read elsewhere makes it start
afresh, never propose from a stale state; and its context is freed with the model. Real llama.cpp: a small F32
Qwen3.5 with a NextN block written by the suite (random weights: its proposals are seldom right, which is what
the exactness tests need)."""

from __future__ import annotations

import ctypes
from pathlib import Path

import numpy as np
import pytest

from fara_desktop.engine.backend import PromptRequest, ReplyRequest
from fara_desktop.engine.llama_backend import LlamaBackend
from fara_desktop.engine.mtp_head import MtpDrafter, carries_mtp
from fara_desktop.machine.llama_internals import nextn_staging
from fara_desktop.models.gguf_file import read_gguf_header
from fara_desktop.planning.params import LoadParams
from fara_desktop.vocabulary.messages import ChatMessage
from tests.helpers.hybrid_factory import write_tiny_hybrid
from tests.integration.engine.test_prefix_paths import TEMPLATE
from tests.integration.engine.test_window_speculation import GREEDY, SEEDED, replies


@pytest.fixture(scope="module")
def with_mtp(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("mtp")
    return write_tiny_hybrid(folder / "qwen35-mtp.gguf", "qwen35", chat_template=TEMPLATE, mtp=True)


def test_a_file_with_a_nextn_block_is_seen_to_carry_one(with_mtp: Path, tmp_path: Path):
    assert carries_mtp(read_gguf_header(with_mtp))
    plain = write_tiny_hybrid(tmp_path / "qwen35.gguf", "qwen35", chat_template=TEMPLATE)
    assert not carries_mtp(read_gguf_header(plain))


def test_the_head_is_loaded_only_where_replies_speculate_and_freed_with_the_model(with_mtp: Path):
    for speculate in (False, True):
        backend = LlamaBackend()
        backend.load(with_mtp, LoadParams(n_ctx=1024, n_threads=2, prefault=False, speculate=speculate))
        try:
            assert backend.info is not None
            assert backend.info.mtp is speculate and backend.info.speculates is speculate
            assert (backend._mtp is not None) is speculate
            head = backend._mtp
        finally:
            backend.close()
        assert backend._mtp is None
        if head is not None:
            assert head._ctx is None and head._batch is None and head._greedy is None  # closed, before the model


@pytest.mark.parametrize("sampling", [GREEDY, SEEDED], ids=["greedy", "seeded"])
def test_replies_with_the_heads_proposals_are_plain_decodings(with_mtp: Path, sampling):
    plain, plain_held = replies(with_mtp, False, sampling, elsewhere=True)
    speculated, held = replies(with_mtp, True, sampling, elsewhere=True)
    assert [r.text for r in speculated] == [r.text for r in plain]
    assert held == plain_held  # the context left as plain decoding leaves it: the next turn reuses the same
    assert sum(r.stats.draft_proposed for r in speculated) > 0  # the head did propose (and was checked)
    assert all(r.stats.draft_proposed == 0 for r in plain)


def _one_go(llm, chat: list[int], count: int) -> tuple[list[int], np.ndarray]:
    """What a fresh MTP context proposes after ``chat`` (and its last logits), written out here by llama.cpp's
    rule rather than by ``MtpHead``: the model reads ``chat`` but its last token anew, in one go; the head reads
    each token p with the model's hidden state at p − 1 (zeros before the first), then chains on its own."""
    import llama_cpp

    staging = nextn_staging()
    assert staging is not None
    llm.reset()
    llama_cpp.llama_memory_seq_rm(llama_cpp.llama_get_memory(llm.ctx), -1, -1, -1)
    llm.eval(chat[:-1])
    n_embd = llm.n_embd()
    rows = np.ctypeslib.as_array(staging.rows(llm.ctx), shape=(len(chat) - 1, n_embd)).copy()
    params = llama_cpp.llama_context_default_params()
    params.n_ctx, params.n_batch, params.n_ubatch = 1024, 512, 512
    params.ctx_type = llama_cpp.LLAMA_CONTEXT_TYPE_MTP
    ctx = llama_cpp.llama_init_from_model(llm.model, params)
    staging.set(ctx, True, True)
    batch = llama_cpp.llama_batch_ext_init(ctx)
    n_vocab = llama_cpp.llama_vocab_n_tokens(llama_cpp.llama_model_get_vocab(llm.model))
    try:
        states = np.vstack([np.zeros((1, n_embd), np.float32), rows])
        # the chat's pairs but the last, then one token a decode (as llama.cpp's driver: a masked context keeps
        # the hidden state of its batch's first rows, so a decode that asks for one holds one token)
        steps = [(list(chat[:-1]), list(range(len(chat) - 1)), states[:-1], False)]
        steps.append(([chat[-1]], [len(chat) - 1], states[-1:], True))
        proposed: list[int] = []
        while len(proposed) < count:
            tokens, positions, step_states, output = steps.pop(0)
            llama_cpp.llama_batch_ext_clear(batch)
            for i, (token, position) in enumerate(zip(tokens, positions, strict=True)):
                index = llama_cpp.llama_batch_ext_add_token(batch, 0, token)
                llama_cpp.llama_batch_ext_set_pos(batch, index, (llama_cpp.llama_pos * 1)(position))
                row = np.ascontiguousarray(step_states[i])
                embd = llama_cpp.llama_embd(row.ctypes.data_as(ctypes.POINTER(ctypes.c_float)), 1, n_embd)
                assert llama_cpp.llama_batch_ext_set_embd_token(batch, index, embd)
                llama_cpp.llama_batch_ext_set_output_logits(batch, index, output)
            assert llama_cpp.llama_process(ctx, llama_cpp.LLAMA_PROCESS_TYPE_DECODE, batch) == 0
            if not output:
                continue
            logits = np.ctypeslib.as_array(llama_cpp.llama_get_logits_ith(ctx, -1), shape=(n_vocab,)).copy()
            proposed.append(int(np.argmax(logits)))
            own = np.ctypeslib.as_array(staging.row(ctx, 0), shape=(n_embd,)).copy()
            steps.append(([proposed[-1]], [positions[0] + 1], own[None, :], True))
        return proposed, logits
    finally:
        llama_cpp.llama_batch_ext_free(batch)
        llama_cpp.llama_free(ctx)


def test_the_heads_cells_follow_the_chat_as_a_head_that_read_it_in_one_go(
    with_mtp: Path, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.setattr(MtpDrafter, "count", lambda *_: 2)  # proposals that pay whatever the timings say
    backend = LlamaBackend()
    backend.load(with_mtp, LoadParams(n_ctx=1024, n_threads=2, prefault=False, speculate=True))
    try:
        chat = [ChatMessage("user", "Count with me: one two three four five six seven eight nine ten.")]
        prompt = backend.prepare(PromptRequest(chat, 100))
        result = backend.reply(prompt, ReplyRequest(GREEDY, lambda: False, lambda _: None, "chat"))
        assert result.stats.draft_proposed > 0
        llm, head = backend._require()[0], backend._mtp
        assert head is not None
        held = [int(t) for t in llm.input_ids[: llm.n_tokens]]
        # a pair for each token the model holds (and for the last step's tokens past them, cut at the next step)
        assert head._tokens[: len(held)] == held
        import llama_cpp

        after = head.propose([*held, 7], 3)  # the chat's next token, about to be decoded
        n_vocab = llama_cpp.llama_vocab_n_tokens(llama_cpp.llama_model_get_vocab(llm.model))
        last = np.ctypeslib.as_array(llama_cpp.llama_get_logits_ith(head._ctx, -1), shape=(n_vocab,)).copy()
        expected, expected_last = _one_go(llm, [*held, 7], 3)
        assert after == expected
        assert np.allclose(last, expected_last, rtol=1e-3, atol=1e-3)  # F32: batches round alike to ~1e-6
    finally:
        backend.close()


def test_a_chat_restored_without_the_head_makes_it_start_afresh_never_propose_from_a_stale_state(with_mtp: Path):
    backend = LlamaBackend()
    backend.load(with_mtp, LoadParams(n_ctx=1024, n_threads=2, prefault=False, speculate=True))
    try:
        llm, head = backend._require()[0], backend._mtp
        assert head is not None
        first = [int(t) for t in llm.tokenize(b"the cat sat on the mat", add_bos=True)]
        llm.eval(first)  # the head reads whatever the model reads
        assert head._tokens == first and head.ready([*first, 5])
        saved = llm.save_state()
        llm.reset()
        other = [int(t) for t in llm.tokenize(b"a dog ran in the park today", add_bos=True)]
        llm.eval(other)
        llm.load_state(saved)  # a chat restored: the model holds ``first`` again, and decoded nothing for it
        assert not head.ready([*first, 5])  # the hidden state it holds is the other chat's: nothing to propose from
        llm.eval([9, 10])
        assert head._base == len(first) and head._tokens == [*first, 9, 10]  # its cells started afresh there
        assert head.ready([*first, 9, 10, 5]) and len(head.propose([*first, 9, 10, 5], 2)) == 2
    finally:
        backend.close()


def test_the_staging_functions_give_the_models_hidden_state_of_every_token_read(with_mtp: Path):
    """The canary of the C++-named functions: a row a token, the last equal to the one asked by its index."""
    staging = nextn_staging()
    assert staging is not None
    backend = LlamaBackend()
    backend.load(with_mtp, LoadParams(n_ctx=512, n_threads=2, prefault=False, speculate=True))
    try:
        llm = backend._require()[0]
        llm.eval([1, 2, 3, 4])
        n_embd = llm.n_embd()
        rows = np.ctypeslib.as_array(staging.rows(llm.ctx), shape=(4, n_embd))
        last = np.ctypeslib.as_array(ctypes.cast(staging.row(llm.ctx, 3), ctypes.POINTER(ctypes.c_float)), (n_embd,))
        assert np.array_equal(rows[3], last) and not np.array_equal(rows[0], rows[3])
    finally:
        backend.close()


def test_a_head_whose_proposals_do_not_pay_stops_reading_what_the_model_reads_and_reads_on_afresh(
    with_mtp: Path, monkeypatch: pytest.MonkeyPatch
):
    pays = [0]
    monkeypatch.setattr(MtpDrafter, "count", lambda *_: pays[0])
    backend = LlamaBackend()
    backend.load(with_mtp, LoadParams(n_ctx=1024, n_threads=2, prefault=False, speculate=True))
    try:
        llm, head = backend._require()[0], backend._mtp
        assert head is not None and head.following and "eval" in llm.__dict__
        chat = [ChatMessage("user", "the cat sat on the mat")]
        prompt = backend.prepare(PromptRequest(chat, 20))
        backend.reply(prompt, ReplyRequest(GREEDY, lambda: False, lambda _: None, "chat"))
        assert not head.following and "eval" not in llm.__dict__  # Llama.eval as it was: no layer's work a token
        decodes = head.decodes
        llm.eval([9, 10, 11])
        assert head.decodes == decodes  # it reads nothing now
        pays[0] = 2
        second = backend.prepare(
            PromptRequest([*chat, ChatMessage("assistant", "yes"), ChatMessage("user", "and")], 20)
        )
        result = backend.reply(second, ReplyRequest(GREEDY, lambda: False, lambda _: None, "chat"))
        assert head.following and result.stats.draft_proposed > 0  # it read on (afresh) and proposes again
    finally:
        backend.close()
