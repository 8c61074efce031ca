"""Several sequences decoded together in one llama.cpp context, as llama.cpp's server serves its slots.

Generation on a CPU is bound by reading the weights; one pass over them serves a token of every sequence in the
batch, so four sequences cost little more than one (measured in docs/performance.md). ``SequenceBatch`` owns a
context of its own over a loaded model (llama.cpp's low-level API: ``n_seq_max`` sequences, each with its own KV
cells) and steps it: each ``step`` decodes one token of every sequence that is generating plus a chunk of one prompt
being read, so a long prompt holds the others' next tokens for one chunk at most. Each sequence has its own sampler
chain, token budget and cancel; one that ends (its end-of-generation token, its budget, a cancel) frees its cells at
once for the next. Runs on one thread (the inference thread's); ``close`` frees the native objects.
"""

from __future__ import annotations

import ctypes
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from fara_desktop.engine.errors import GenerationError, PromptTooLongError
from fara_desktop.engine.llama_tokens import json_gbnf
from fara_desktop.engine.ngram_draft import DecodeCost, NgramDrafter
from fara_desktop.vocabulary.errors import FaraError
from fara_desktop.vocabulary.sampling import SamplingParams

Ended = Literal["stop", "length", "context", "cancelled", "repetition"]
# Each token written, as it comes; what it returns ends the sequence (a stop string: "stop"; a loop: "repetition")
TokenSink = Callable[[int], Ended | None]


class SequencesFullError(FaraError):
    """Every sequence of the batch is in use: the request waits for one to end."""


@dataclass
class _Sequence:
    seq_id: int
    prompt: list[int]
    max_tokens: int
    on_token: TokenSink
    should_cancel: Callable[[], bool]
    sampler: Any  # llama_sampler_p, this sequence's own chain
    ignore_eos: bool = False
    first: bool = False  # the window's chat: its prompt is read before the others'
    keep: bool = False  # its state is copied out when it ends (``SequenceEnd.state``)
    reused: int = 0  # prompt tokens a restored state held
    drafter: NgramDrafter | None = None  # proposals from its own text (sequences that asked for them)
    undecoded: int = 0  # 1 while its last generated token is not in its cells yet
    read: int = 0  # prompt tokens decoded so far (or restored)
    next_token: int | None = None  # sampled, not decoded yet
    generated: list[int] = field(default_factory=list)
    proposed: int = 0  # tokens its drafter proposed, and of those the model accepted
    accepted: int = 0
    checkpoint: SequenceState | None = None  # its state once its prompt was read (``SequenceBatch.checkpoints``)

    @property
    def position(self) -> int:
        """Where ``next_token`` goes: after the prompt and the tokens generated before it."""
        return self.read + len(self.generated) - 1


@dataclass(frozen=True)
class SequenceState:
    """A sequence's cells copied out of the context (``llama_state_seq_get_data``), and the tokens they hold: a
    later prompt that starts with them continues from here in any free sequence."""

    tokens: tuple[int, ...]
    data: memoryview | bytearray  # writable: a ``KVSnapshot`` of the model's own context takes it as it is


@dataclass(frozen=True)
class SequenceEnd:
    """A sequence that ended in the last step: its tokens, why it ended, the prompt tokens it read and reused, and
    its state when it was asked to keep it (with, on a model whose restored states cannot be cut back, its state at
    the prompt's end: ``checkpoint``)."""

    seq_id: int
    tokens: tuple[int, ...]
    ended: Ended
    prompt_tokens: int
    reused: int = 0
    state: SequenceState | None = None
    proposed: int = 0  # tokens proposed from its own text, and accepted (speculation)
    accepted: int = 0
    checkpoint: SequenceState | None = None


def sampler_chain(llama_cpp: Any, sampling: SamplingParams, seed: int, vocab: Any, gbnf: str | None) -> Any:
    """A llama.cpp sampler chain for ``sampling``: the grammar ``gbnf`` first, the repeat penalty over the last 64
    tokens, then greedy at temperature 0, else top-k, top-p, min-p, temperature and a seeded draw."""
    chain = llama_cpp.llama_sampler_chain_init(llama_cpp.llama_sampler_chain_default_params())
    if gbnf is not None:
        llama_cpp.llama_sampler_chain_add(chain, llama_cpp.llama_sampler_init_grammar(vocab, gbnf.encode(), b"root"))
    if sampling.repeat_penalty != 1.0:
        # this llama.cpp's penalties take the vocabulary's size first (the last 64 tokens: llama-cpp-python's own)
        n_vocab = llama_cpp.llama_vocab_n_tokens(vocab)
        penalties = llama_cpp.llama_sampler_init_penalties(n_vocab, 64, sampling.repeat_penalty, 0.0, 0.0)
        llama_cpp.llama_sampler_chain_add(chain, penalties)
    if sampling.temperature <= 0:
        llama_cpp.llama_sampler_chain_add(chain, llama_cpp.llama_sampler_init_greedy())
        return chain
    llama_cpp.llama_sampler_chain_add(chain, llama_cpp.llama_sampler_init_top_k(sampling.top_k))
    llama_cpp.llama_sampler_chain_add(chain, llama_cpp.llama_sampler_init_top_p(sampling.top_p, 1))
    llama_cpp.llama_sampler_chain_add(chain, llama_cpp.llama_sampler_init_min_p(sampling.min_p, 1))
    llama_cpp.llama_sampler_chain_add(chain, llama_cpp.llama_sampler_init_temp(sampling.temperature))
    draw_seed = sampling.seed if sampling.seed is not None else seed
    llama_cpp.llama_sampler_chain_add(chain, llama_cpp.llama_sampler_init_dist(draw_seed & 0xFFFFFFFF))
    return chain


def sequences_context(
    llama_cpp: Any, model: Any, n_ctx: int, sequences: int, n_threads: int, n_batch: int, like: Any = None
) -> Any:
    """A llama.cpp context over ``model`` holding ``sequences`` sequences of ``n_ctx`` cells each; ``like``: a
    context's parameters whose attention and KV cache types it takes. Raises ``GenerationError``."""
    params = llama_cpp.llama_context_default_params()
    params.n_ctx = n_ctx * sequences
    params.n_batch = params.n_ubatch = n_batch
    params.n_seq_max = sequences
    params.n_threads = params.n_threads_batch = n_threads
    params.kv_unified = False  # each sequence its own n_ctx cells: one never takes another's room
    if like is not None:
        params.flash_attn_type, params.swa_full = like.flash_attn_type, like.swa_full
        params.type_k, params.type_v = like.type_k, like.type_v
    ctx = llama_cpp.llama_init_from_model(model, params)
    if not ctx:
        raise GenerationError("llama.cpp could not make a context for several sequences.")
    return ctx


def free_batch_and_context(llama_cpp: Any, batch: Any, ctx: Any) -> None:
    """A batch and the context it was decoded in, freed (either may be None: freed before)."""
    if batch is not None:
        llama_cpp.llama_batch_free(batch)
    if ctx:
        llama_cpp.llama_free(ctx)


class SequenceBatch:
    """``sequences`` conversations decoded together over ``model`` (a ``llama_model_p``), each with ``n_ctx`` cells."""

    def __init__(
        self, model: Any, n_ctx: int, sequences: int, n_threads: int, n_batch: int = 512, like: Any = None
    ) -> None:
        """``like``: the ``llama_context_params`` of the model's own context, whose attention and KV cache types this
        context takes (flash attention or not rounds differently: a greedy reply would part from the same reply
        written there)."""
        import llama_cpp

        self._llama_cpp = llama_cpp
        self.n_ctx, self.sequences, self.n_batch = n_ctx, sequences, n_batch
        self._ctx = sequences_context(llama_cpp, model, n_ctx, sequences, n_threads, n_batch, like)
        self._memory = llama_cpp.llama_get_memory(self._ctx)
        self._vocab = llama_cpp.llama_model_get_vocab(model)
        # A recurrent state cannot be cut back to a prefix: no proposals (the rejected ones could not be undone)
        self.rewindable = not (llama_cpp.llama_model_is_recurrent(model) or llama_cpp.llama_model_is_hybrid(model))
        # A kept sequence's state at its prompt's end too, where a restored state cannot be cut back (a recurrent
        # state; a sliding window's, restored, holds only the window before its end): a follow-up whose last reply
        # comes back spelled otherwise (``own_tokens`` respells only what is valid text) continues from there.
        self.checkpoints = not self.rewindable or int(llama_cpp.llama_model_n_swa(model)) > 0
        self._batch = llama_cpp.llama_batch_init(n_batch, 0, 1)
        self._active: dict[int, _Sequence] = {}
        self._seeds = 0
        self.decodes = 0  # llama_decode calls made (what the tests count)
        self.prompt_tokens_read = 0  # prompt tokens decoded (a restored state's are not)
        self.restores_refused = 0  # states llama.cpp would not take back
        self.proposed = self.accepted = 0  # tokens proposed from the sequences' own text, and accepted
        self.cost = DecodeCost()

    # ------------------------------------------------------------------ sequences

    @property
    def free(self) -> int:
        return self.sequences - len(self._active)

    @property
    def active(self) -> int:
        return len(self._active)

    def add(
        self,
        prompt: list[int],
        sampling: SamplingParams,
        on_token: TokenSink,
        should_cancel: Callable[[], bool] = lambda: False,
        restore: SequenceState | None = None,
        keep: bool = False,
        first: bool = False,
        speculate: bool | NgramDrafter = False,
    ) -> int:
        """A new sequence reading ``prompt`` then generating; its id. ``restore``: a state whose tokens the prompt may
        start with — what they share is not read again (a state that shares nothing, or that llama.cpp cannot cut back
        to what is shared, is not used). ``keep``: its state is copied out when it ends. ``first``: its prompt is read
        before any other's (the window's chat). ``speculate``: the sequence proposes its next tokens from its own text
        and checks them in the same decode (``NgramDrafter``, or the drafter given), on a model whose cells can be cut
        back (not a recurrent or hybrid one); its sampler samples each position and keeps a proposal while it drew it
        (llama.cpp's rule: one draw a token written, so a greedy or seeded reply is the one plain decoding gives, as
        far as the CPU rounds a decode of several tokens as it rounds one). ``sampling.json_schema`` holds this
        sequence alone to its grammar. Raises ``SequencesFullError`` when every sequence is in use,
        ``PromptTooLongError`` when the prompt leaves no room for a reply, ``GrammarError`` for a schema no grammar
        can be built of."""
        if not prompt or len(prompt) >= self.n_ctx:
            raise PromptTooLongError(f"The prompt takes {len(prompt)} of the sequence's {self.n_ctx} tokens.")
        seq_id = next((i for i in range(self.sequences) if i not in self._active), None)
        if seq_id is None:
            raise SequencesFullError("Every sequence is in use.")
        gbnf = json_gbnf(self._vocab, sampling.json_schema)
        self._seeds += 1
        budget = min(sampling.max_tokens or self.n_ctx, self.n_ctx - len(prompt))
        sampler = sampler_chain(self._llama_cpp, sampling, 0x5EED + self._seeds, self._vocab, gbnf)
        sequence = _Sequence(seq_id, list(prompt), budget, on_token, should_cancel, sampler, sampling.ignore_eos)
        sequence.first, sequence.keep = first, keep
        if speculate is not False and self.rewindable:
            sequence.drafter = speculate if isinstance(speculate, NgramDrafter) else NgramDrafter()
        elif isinstance(speculate, NgramDrafter):  # cells that cannot be cut back propose nothing: its cells go back
            speculate.release()
        self._active[seq_id] = sequence
        if restore is not None:
            sequence.reused = sequence.read = self._restore(seq_id, restore, prompt)
        return seq_id

    def _restore(self, seq_id: int, state: SequenceState, prompt: Sequence[int]) -> int:
        """``state`` into the free sequence ``seq_id``; the prompt tokens it holds (0: it is not used)."""
        llama_cpp = self._llama_cpp
        shared = 0
        for a, b in zip(state.tokens, prompt, strict=False):
            if a != b:
                break
            shared += 1
        shared = min(shared, len(prompt) - 1)  # the prompt's last token is read: its logits give the first token
        if shared <= 0:
            return 0
        buffer = (ctypes.c_uint8 * len(state.data)).from_buffer_copy(state.data)
        if llama_cpp.llama_state_seq_set_data(self._ctx, buffer, len(state.data), seq_id) != len(state.data):
            llama_cpp.llama_memory_seq_rm(self._memory, seq_id, -1, -1)
            self.restores_refused += 1
            return 0
        if shared < len(state.tokens) and not llama_cpp.llama_memory_seq_rm(self._memory, seq_id, shared, -1):
            llama_cpp.llama_memory_seq_rm(self._memory, seq_id, -1, -1)  # a recurrent state cannot be cut back
            return 0
        return shared

    def _state_of(self, sequence: _Sequence) -> SequenceState:
        llama_cpp = self._llama_cpp
        size = llama_cpp.llama_state_seq_get_size(self._ctx, sequence.seq_id)
        buffer = (ctypes.c_uint8 * size)()
        written = llama_cpp.llama_state_seq_get_data(self._ctx, buffer, size, sequence.seq_id)
        decoded = sequence.prompt[: sequence.read] + sequence.generated[: len(sequence.generated) - sequence.undecoded]
        return SequenceState(tuple(decoded), memoryview(buffer).cast("B")[:written])

    def cancel(self, seq_id: int) -> SequenceEnd | None:
        """End a sequence now (its client left): its cells are freed; the others' are untouched."""
        sequence = self._active.get(seq_id)
        return self._end(sequence, "cancelled") if sequence is not None else None

    # ------------------------------------------------------------------ stepping

    def step(self) -> list[SequenceEnd]:
        """One decode: a token of every generating sequence (with its proposals, for one that speculates), then as
        much of one prompt as the batch has room for. Returns the sequences that ended."""
        llama_cpp, batch = self._llama_cpp, self._batch
        started = time.perf_counter()
        ended = [self._end(s, "cancelled") for s in list(self._active.values()) if s.should_cancel()]
        batch.n_tokens = 0
        writing = [s for s in self._active.values() if s.next_token is not None]
        outputs: list[tuple[_Sequence, list[int], list[int]]] = []  # sequence, its indices in the batch, proposals
        # Proposals fill the arithmetic a decode bound by reading the weights leaves idle; other sequences' tokens
        # fill it too, and theirs are certain. So a sequence proposes only when it writes alone, and never in a
        # step that reads a prompt (proposals would add to its arithmetic at full price and shrink its chunk).
        # Measured through serve on the 1.7B shape: proposals beside three other clients cost 9 % of the writing
        # and 14 % of the whole (19.8 against 21.8, 13.2 against 15.3 tok/s), and gave one client 32 % more.
        reading = self._reading()
        alone = len(writing) == 1
        for k, sequence in enumerate(writing):
            assert sequence.next_token is not None
            room = self.n_batch - batch.n_tokens - (len(writing) - k)  # one cell kept for each sequence after it
            room = min(room, self.n_ctx - sequence.position - 2, sequence.max_tokens - len(sequence.generated))
            others = len(writing) + batch.n_tokens - k  # this decode's tokens without proposals, as far as known
            drafter = sequence.drafter if reading is None and alone else None
            drafts = drafter.draft(self._history(sequence), self.cost, others, room, len(writing)) if drafter else []
            tokens = [sequence.next_token, *drafts]
            indices = [self._put(t, sequence.position + i, sequence.seq_id, True) for i, t in enumerate(tokens)]
            outputs.append((sequence, indices, drafts))
        if reading is not None:
            room = self.n_batch - batch.n_tokens
            chunk = reading.prompt[reading.read : reading.read + room]
            for offset, token in enumerate(chunk):
                last = reading.read + offset == len(reading.prompt) - 1
                index = self._put(token, reading.read + offset, reading.seq_id, last)
                if last:
                    outputs.append((reading, [index], []))
            reading.read += len(chunk)
            self.prompt_tokens_read += len(chunk)
        if batch.n_tokens == 0:
            return ended
        status = llama_cpp.llama_decode(self._ctx, batch)
        self.decodes += 1
        if status != 0:
            raise GenerationError(f"llama.cpp could not decode the batch (status {status}).")
        for sequence, _, _ in outputs:
            sequence.next_token, sequence.undecoded = None, 0  # decoded: its cells hold it
        if reading is not None and reading.keep and self.checkpoints and reading.read == len(reading.prompt):
            reading.checkpoint = self._state_of(reading)  # before its first token is written: the prompt's end
        written = 0
        for sequence, indices, drafts in outputs:
            after = sequence.read + len(sequence.generated)  # the first position past what is decoded for sure
            why, accepted = self._write_from(sequence, indices, drafts)
            written += sequence.read + len(sequence.generated) - after
            if sequence.drafter is not None and drafts:
                sequence.drafter.judge(len(drafts), accepted)
                self.proposed += len(drafts)
                self.accepted += accepted
                sequence.proposed += len(drafts)
                sequence.accepted += accepted
                llama_cpp.llama_memory_seq_rm(self._memory, sequence.seq_id, after + accepted, -1)  # the rejected
            if why is not None:
                ended.append(self._end(sequence, why))
        if reading is None:  # a step that only wrote: what a token costs in one (decode and sampling), for proposals
            seconds = time.perf_counter() - started
            self.cost.observe(sum(len(indices) for _, indices, _ in outputs), seconds)
            drafting = [s.drafter for s, _, drafts in outputs if drafts and s.drafter is not None]
            for drafter in drafting:
                drafter.timed(seconds / max(written, 1))
            if not drafting:
                self.cost.plain_step(seconds / max(written, 1))
        return ended

    def _reading(self) -> _Sequence | None:
        waiting = [s for s in self._active.values() if s.read < len(s.prompt)]
        return next((s for s in waiting if s.first), waiting[0] if waiting else None)

    @staticmethod
    def _history(sequence: _Sequence) -> list[int]:
        return sequence.prompt + sequence.generated

    def _write_from(self, sequence: _Sequence, indices: list[int], drafts: list[int]) -> tuple[Ended | None, int]:
        """The tokens the decode gives ``sequence``: one per index while the model agrees with the proposals (each
        agreed proposal is decoded already, so the model's next token follows it); why it ended, and how many
        proposals were accepted."""
        accepted = 0
        for i, index in enumerate(indices):
            token = int(self._llama_cpp.llama_sampler_sample(sequence.sampler, self._ctx, index))
            drafted = i < len(drafts) and token == drafts[i]
            accepted += drafted
            why = self._write(sequence, token, drafted)
            if why is not None or not drafted:
                return why, accepted
        return None, accepted

    def _write(self, sequence: _Sequence, token: int, decoded: bool) -> Ended | None:
        if not sequence.ignore_eos and self._llama_cpp.llama_vocab_is_eog(self._vocab, token):
            return "stop"
        sequence.generated.append(token)
        sequence.next_token, sequence.undecoded = (None, 0) if decoded else (token, 1)
        said = sequence.on_token(token)
        if said is not None:
            return said
        if len(sequence.generated) >= sequence.max_tokens:
            return "context" if len(sequence.prompt) + len(sequence.generated) >= self.n_ctx else "length"
        return None

    def _put(self, token: int, position: int, seq_id: int, logits: bool) -> int:
        batch = self._batch
        i = int(batch.n_tokens)
        batch.token[i] = token
        batch.pos[i] = position
        batch.n_seq_id[i] = 1
        batch.seq_id[i][0] = seq_id
        batch.logits[i] = logits
        batch.n_tokens = i + 1
        return i

    def _end(self, sequence: _Sequence, why: Ended) -> SequenceEnd:
        llama_cpp = self._llama_cpp
        state = self._state_of(sequence) if sequence.keep and why != "cancelled" else None
        del self._active[sequence.seq_id]
        llama_cpp.llama_memory_seq_rm(self._memory, sequence.seq_id, -1, -1)
        if sequence.drafter is not None:
            sequence.drafter.release()
        llama_cpp.llama_sampler_free(sequence.sampler)
        return SequenceEnd(
            sequence.seq_id,
            tuple(sequence.generated),
            why,
            len(sequence.prompt),
            sequence.reused,
            state,
            sequence.proposed,
            sequence.accepted,
            sequence.checkpoint if state is not None else None,
        )

    def run(self, until: Callable[[], bool] = lambda: False) -> list[SequenceEnd]:
        """Step until no sequence is left (or ``until()``); every sequence that ended, in order."""
        ended: list[SequenceEnd] = []
        while self._active and not until():
            ended.extend(self.step())
        return ended

    def set_threads(self, n_threads: int) -> None:
        """The threads each decode uses from now on (the count measured fastest for this model)."""
        self._llama_cpp.llama_set_n_threads(self._ctx, n_threads, n_threads)

    def end_all(self) -> None:
        """Every sequence ends now, its cells freed (a decode failed: none of them can be trusted to go on)."""
        for sequence in list(self._active.values()):
            self._end(sequence, "cancelled")

    def close(self) -> None:
        self.end_all()
        free_batch_and_context(self._llama_cpp, self._batch, self._ctx)
        self._batch = self._ctx = None
