"""Proposals from the model's own multi-token-prediction head (issue 65's third method, llama.cpp's ``draft-mtp``):
Qwen3.5's files carry a NextN block trained to predict the token after next from the model's hidden state and
the next token's embedding. It is one decoder layer over the model's own weights, so it proposes for a fraction
of a token's cost, with no second model to find, load or fit in memory.

``MtpHead`` owns the head's context (llama.cpp's ``LLAMA_CONTEXT_TYPE_MTP`` over the model loaded with
``load_mtp``). Its cells mirror the model's: the cell at position p holds the pair (token p, the model's hidden
state at p − 1), so the head attends over the chat as the model read it. After each of the model's decodes the
head reads the new tokens with the hidden states that decode left (``seen``); to propose, it chains itself —
the token it proposes and its own hidden state are its next input — and its proposal cells are taken back, for
the model decides which of them stand. Tokens the model read elsewhere (a read-ahead, a restored chat) come with
no hidden state: the head starts afresh after them (it proposes less well for a while, never wrongly: the model
checks every proposal). The tuning is ``NgramDrafter``'s, with the head's own seconds a proposal counted."""

from __future__ import annotations

import ctypes
import logging
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import numpy as np

from fara_desktop.engine.errors import GenerationError
from fara_desktop.engine.ngram_draft import PROBE, DecodeCost, NgramDrafter
from fara_desktop.machine.llama_internals import NextnStaging, follow_evals, nextn_staging

if TYPE_CHECKING:
    from llama_cpp import Llama

    from fara_desktop.models.gguf_file import GGUFHeader

log = logging.getLogger(__name__)

HEAD_UBATCH = 64
MTP_ARCHITECTURES = frozenset({"qwen35", "qwen35moe"})  # one NextN block with cells of its own, as tested here


def shared_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    """How many leading tokens two sequences share (compared as arrays: the chat may be thousands long)."""
    n = min(len(a), len(b))
    if n == 0:
        return 0
    differ = np.flatnonzero(np.asarray(a[:n], dtype=np.int64) != np.asarray(b[:n], dtype=np.int64))
    return int(differ[0]) if differ.size else n


class MtpHead:
    """The MTP head of ``llm`` (a ``Llama`` loaded with ``load_mtp``) in a context of its own; its owner closes it
    before ``llm``. Raises ``GenerationError`` when llama.cpp cannot make the context."""

    def __init__(self, llm: Llama, n_threads: int, staging: NextnStaging) -> None:
        import llama_cpp

        self._llama_cpp, self._llm, self._staging = llama_cpp, llm, staging
        params = llama_cpp.llama_context_default_params()
        params.n_ctx = llm.n_ctx()
        params.n_batch = llm.n_batch
        # its compute buffer holds a score row per cell for each token of a micro-batch: 64 tokens, not 512
        # (Qwen3.5 2B shape, 8,192 cells: the head's memory after a reply fell from 142 to 95 MiB)
        params.n_ubatch = min(llm.n_batch, HEAD_UBATCH)
        params.n_threads = params.n_threads_batch = n_threads
        params.ctx_type = llama_cpp.LLAMA_CONTEXT_TYPE_MTP
        like = llm.context_params  # the model's attention and KV cache types (flash attention: no score matrix)
        params.flash_attn_type, params.type_k, params.type_v = like.flash_attn_type, like.type_k, like.type_v
        self._ctx = llama_cpp.llama_init_from_model(llm.model, params)
        if not self._ctx:
            raise GenerationError("llama.cpp could not make a context for the model's MTP head.")
        self._memory = llama_cpp.llama_get_memory(self._ctx)
        self._batch = llama_cpp.llama_batch_ext_init(self._ctx)
        self._greedy = llama_cpp.llama_sampler_init_greedy()
        self._n_embd = int(llama_cpp.llama_model_n_embd_out(llm.model))
        self._zeros = np.zeros(self._n_embd, dtype=np.float32)
        staging.set(self._ctx, True, True)  # the head keeps its proposals' hidden states only
        # the tokens whose pairs the head's cells hold from ``_base`` on (those before it: what they were read after)
        self._tokens: list[int] = []
        self._base = 0
        # the model's hidden states at its last decode: rows for positions from ``_rows_start``, after ``_rows_of``
        self._rows = np.zeros((0, self._n_embd), dtype=np.float32)
        self._rows_start = 0
        self._rows_of: list[int] = []
        self.decodes = 0  # llama.cpp calls on the head (what the tests count)
        self.seconds_per_token = 0.0  # what a proposal costs on the head here (its own decode)
        self._unfollow: Callable[[], None] | None = None
        self.follow(True)

    def drafter(self) -> MtpDrafter:
        return MtpDrafter(self)

    @property
    def following(self) -> bool:
        return self._unfollow is not None

    def follow(self, on: bool) -> None:
        """Whether the head reads what the model reads, by whichever path (``Llama.eval``: a prompt read up to
        its last token, a read-ahead, a plain reply): off once its proposals were measured not to pay here (each
        token it reads costs a layer's work), or while a benchmark times plain decoding."""
        if on and self._unfollow is None:
            self._staging.set(self._llm.ctx, True, False)  # the model keeps every token's hidden state at a decode
            self._unfollow = follow_evals(self._llm, self.seen)
        elif not on and self._unfollow is not None:
            self._unfollow()
            self._unfollow = None
            if self._llm.ctx:
                self._staging.set(self._llm.ctx, False, False)

    # ------------------------------------------------------------ following the model

    def seen(self, start: int, count: int) -> None:
        """The model just decoded ``count`` tokens at positions from ``start`` (``Llama.input_ids`` holds them):
        the head reads them, each with the model's hidden state at the token before it."""
        llm = self._llm
        pointer = self._staging.rows(llm.ctx)
        if not pointer or count <= 0:
            return
        rows = np.ctypeslib.as_array(pointer, shape=(count, self._n_embd)).copy()
        now: list[int] = llm.input_ids[: start + count].tolist()
        before = self._state_before(now, start)
        self._cut_to(now)
        if len(self._tokens) < start:  # tokens the model read without the head (a restored chat): afresh from here
            self._restart(now, start)
        first = len(self._tokens)
        zeros = self._zeros
        pairs = [
            (zeros if before is None else before) if p == start else rows[p - 1 - start]
            for p in range(first, start + count)
        ]
        try:
            if pairs:
                self._decode(now[first:], first, pairs, output=False)
            self._tokens = now
        except GenerationError as exc:  # the model's reading goes on: the head starts afresh after it
            log.warning("The MTP head could not read on: %s", exc)
            self._restart(now, start + count)
        self._rows, self._rows_start, self._rows_of = rows, start, now

    def _state_before(self, chat: Sequence[int], position: int) -> np.ndarray | None:
        """The model's hidden state at ``position - 1`` in ``chat``, from its last decode (None when that decode
        did not hold it, or held it after other tokens)."""
        row = position - 1 - self._rows_start
        if 0 <= row < len(self._rows) and shared_prefix(self._rows_of, chat) >= position:
            state: np.ndarray = self._rows[row]
            return state
        return None

    def _cut_to(self, chat: Sequence[int]) -> None:
        """Cells past what ``chat`` shares with what they were read after go."""
        keep = shared_prefix(self._tokens, chat)
        if keep < len(self._tokens):
            self._llama_cpp.llama_memory_seq_rm(self._memory, 0, keep, -1)
            self._tokens = self._tokens[:keep]
            self._base = min(self._base, keep)

    def _restart(self, chat: Sequence[int], position: int) -> None:
        """No cells: the next ones start at ``position`` of ``chat`` (llama.cpp lets an empty sequence start
        anywhere; its positions must then run on)."""
        self._llama_cpp.llama_memory_seq_rm(self._memory, 0, -1, -1)
        self._base, self._tokens = position, [int(t) for t in chat[:position]]

    # ------------------------------------------------------------ proposing

    def ready(self, history: Sequence[int]) -> bool:
        """Whether the head can propose after ``history`` (its last token about to be decoded by the model): the
        model's hidden state at the token before that one is known."""
        return len(history) >= 2 and self._state_before(history, len(history) - 1) is not None

    def propose(self, history: Sequence[int], count: int) -> list[int]:
        """Up to ``count`` tokens after ``history`` (``ready``), greedily, the head chained on its own hidden
        state; its proposal cells are taken back but the first (the pair the model's next decode gives it too)."""
        position = len(history) - 1
        state = self._state_before(history, position)
        assert state is not None
        self._cut_to(history[:position])
        if len(self._tokens) < position:
            self._restart(history, position)
        proposed: list[int] = []
        token = int(history[-1])
        try:
            for i in range(count):
                self._decode([token], position + i, [state], output=True)
                token = int(self._llama_cpp.llama_sampler_sample(self._greedy, self._ctx, -1))
                proposed.append(token)
                pointer = self._staging.row(self._ctx, 0)
                if not pointer:
                    break
                state = np.ctypeslib.as_array(pointer, shape=(self._n_embd,)).copy()
        finally:
            kept = position + 1 if proposed else position
            self._llama_cpp.llama_memory_seq_rm(self._memory, 0, kept, -1)
            self._tokens = [int(t) for t in history[:kept]]
        return proposed

    def _decode(self, tokens: Sequence[int], start: int, states: Sequence[np.ndarray], output: bool) -> None:
        """``tokens`` at positions from ``start``, each with its hidden state, in batches of the model's size."""
        llama_cpp, batch = self._llama_cpp, self._batch
        block = np.ascontiguousarray(np.stack(states), dtype=np.float32)
        step = max(1, self._llm.n_batch)
        for offset in range(0, len(tokens), step):
            llama_cpp.llama_batch_ext_clear(batch)
            chunk = tokens[offset : offset + step]
            for i, token in enumerate(chunk):
                index = llama_cpp.llama_batch_ext_add_token(batch, 0, int(token))
                llama_cpp.llama_batch_ext_set_pos(batch, index, (llama_cpp.llama_pos * 1)(start + offset + i))
                row = block[offset + i]
                embd = llama_cpp.llama_embd(row.ctypes.data_as(ctypes.POINTER(ctypes.c_float)), 1, self._n_embd)
                if not llama_cpp.llama_batch_ext_set_embd_token(batch, index, embd):
                    raise GenerationError("llama.cpp refused a hidden state for the MTP head.")
                if output and offset + i == len(tokens) - 1:
                    llama_cpp.llama_batch_ext_set_output_logits(batch, index, True)
            status = llama_cpp.llama_process(self._ctx, llama_cpp.LLAMA_PROCESS_TYPE_DECODE, batch)
            self.decodes += 1
            if status != 0:
                raise GenerationError(f"llama.cpp could not decode on the MTP head (status {status}).")

    def timed(self, seconds_per_token: float) -> None:
        previous = self.seconds_per_token
        self.seconds_per_token = seconds_per_token if previous == 0 else 0.8 * previous + 0.2 * seconds_per_token

    def close(self) -> None:
        llama_cpp = self._llama_cpp
        if self._greedy is not None:
            llama_cpp.llama_sampler_free(self._greedy)
            self._greedy = None
        if self._batch is not None:
            llama_cpp.llama_batch_ext_free(self._batch)
            self._batch = None
        self.follow(False)  # the model's ``eval`` as it was, and no hidden states kept for a head that is gone
        if self._ctx:
            llama_cpp.llama_free(self._ctx)
            self._ctx = None


class MtpDrafter(NgramDrafter):
    """The window's proposals from the model's MTP head: as many as pay (``NgramDrafter``'s tuning, the head's
    own seconds a proposal counted), after the model's hidden state it follows (``seen``)."""

    def __init__(self, head: MtpHead) -> None:
        super().__init__()
        self._head = head

    def draft(self, history: Sequence[int], cost: DecodeCost, others: int, room: int, writers: int = 1) -> list[int]:
        count = self.count(cost, others, room, writers)
        # proposals that do not pay here (or were measured slower): the head stops reading what the model reads,
        # a layer's work a token; should they pay again (the machine's load drifts), it reads on, afresh
        self._head.follow(count > 0)
        if self._head.seconds_per_token == 0:
            count = min(count, PROBE)  # what a proposal costs on the head is not known yet
        if count <= 0 or not self._head.ready(history):
            return []
        started = time.perf_counter()
        proposed = self._head.propose(history, count)
        if proposed:
            self._head.timed((time.perf_counter() - started) / len(proposed))
        return proposed

    def decoded(self, start: int, count: int) -> None:
        if self._head.following:
            self._head.seen(start, count)

    def proposal_seconds(self) -> float:
        return self._head.seconds_per_token


def carries_mtp(header: GGUFHeader) -> bool:
    """Whether a file carries an MTP head this app drives: one NextN block of an architecture above (llama.cpp
    asserts a single block for them: a file saying more is never given to it as a head)."""
    return header.architecture in MTP_ARCHITECTURES and header.arch_int("nextn_predict_layers", 0, 1 << 16) == 1


def mtp_beside(llm: Llama, n_threads: int) -> MtpHead | None:
    """The MTP head of ``llm``, which was loaded with its MTP layers (``carries_mtp``; else the head would have no
    weights); None when this llama.cpp build cannot drive it (said in the log: the model goes on without it)."""
    staging = nextn_staging()
    if staging is None:
        return None
    try:
        return MtpHead(llm, n_threads, staging)
    except GenerationError as exc:
        log.warning("The model's MTP head does not serve: %s", exc)
        return None
