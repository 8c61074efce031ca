"""The local API's replies decoded together (issue 63): each request a sequence of one ``SequenceBatch`` over the
loaded model, admitted by ``SequenceScheduler``, its tokens written as a reply of the model's own context writes
them (``ReplyWriting``: stop strings, the loop check, the budget), so several clients stream at once and one pass
over the weights serves a token of each.

A sequence's state is kept when its reply ends, for its principal alone, as one of its slots (``ApiSlots``: the
slot sharing the longest prefix above a similarity threshold, else a new one in place of the least recently used,
as llama.cpp's server chooses): the principal's next request restores the slot's state, or its other state sharing
the longest prefix, and reads only the rest. The states live in the model's ``ContextStates`` — counted in bytes
inside the saved readings' budget, beside the window's chats (under ``SequenceSlot`` keys: llama.cpp restores a
state only into a context of the layout that wrote it, so a sequence never tries one of the model's own context's,
nor that context one of theirs). What a sequence cannot do — pictures, log
probabilities, a forced tool call's grammar, mirostat — is replied to in the model's own context
(``takes`` says which). Runs on the inference thread; its owner (``LlamaBackend``) closes it before the model.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, replace

from fara_desktop.engine.backend import PreparedPrompt, ReplyRequest, ReplyResult
from fara_desktop.engine.context_states import ContextStates
from fara_desktop.engine.errors import GenerationError
from fara_desktop.engine.kv_states import KVSnapshot, usable_prefix
from fara_desktop.engine.llama_prompt import LlamaPrompt
from fara_desktop.engine.llama_tokens import json_gbnf
from fara_desktop.engine.own_tokens import Spell, Tokenize, longest_respelled_as_read
from fara_desktop.engine.reply_writing import ReplyWriting
from fara_desktop.engine.sequence_batch import Ended, SequenceBatch, SequenceEnd, SequenceState
from fara_desktop.engine.sequence_scheduler import SequenceRequest, SequenceScheduler
from fara_desktop.engine.types import ApiClient, SequenceSlot
from fara_desktop.vocabulary.errors import FaraError
from fara_desktop.vocabulary.sampling import SamplingParams
from fara_desktop.vocabulary.stats import reply_stats

ReplyDone = Callable[[ReplyResult | FaraError], None]


@dataclass
class _Reply:
    tokens: int  # the prompt's
    writing: ReplyWriting
    request: ReplyRequest
    slot: SequenceSlot | None  # where its state is kept when it ends (None: a one-off, nothing kept)
    done: ReplyDone
    started: float
    first_token_at: float | None = None


class ParallelReplies:
    """Up to ``sequences`` replies decoding together over ``model`` (a ``llama_model_p``), each in ``n_ctx``
    cells of its own."""

    def __init__(
        self,
        model: object,
        n_ctx: int,
        sequences: int,
        n_threads: int,
        states: ContextStates,
        spelling: tuple[Spell, Tokenize],
        n_batch: int = 512,
        like: object = None,
        speculate: bool = True,
    ) -> None:
        """``states``: the model's saved readings, where the sequences' states are kept (its owner's); ``spelling``:
        how the model spells and tokenizes (a prompt is spelled with the tokens a kept state read, ``own_tokens``);
        ``like``: the model's own context's parameters (``SequenceBatch``: its replies are written alike);
        ``speculate``: replies propose tokens from their own text (``NgramDrafter``)."""
        import llama_cpp

        self._llama_cpp = llama_cpp
        self._vocab = llama_cpp.llama_model_get_vocab(model)
        self.batch = SequenceBatch(model, n_ctx, sequences, n_threads, n_batch, like)
        self._scheduler = SequenceScheduler(self.batch)
        self._replies: dict[int, _Reply] = {}  # by the scheduler's ticket
        self._states = states
        self._spelling = spelling
        self.speculate = speculate

    @property
    def sequences(self) -> int:
        return self.batch.sequences

    @property
    def running(self) -> int:
        """Replies under way or waiting for a sequence."""
        return len(self._replies)

    @property
    def idle(self) -> bool:
        return not self._replies

    def takes(self, prompt: PreparedPrompt, sampling: SamplingParams) -> bool:
        """Whether a sequence can write this reply as the model's own context would."""
        detail = prompt.detail
        return (
            isinstance(detail, LlamaPrompt)
            and detail.vision is None
            and not detail.rendered.forced_calls
            and sampling.logprobs is None
            and sampling.mirostat_mode == 0
            and 0 < len(detail.tokens) < self.batch.n_ctx
        )

    def submit(self, prompt: PreparedPrompt, request: ReplyRequest, done: ReplyDone) -> None:
        """Reply to ``prompt`` (``takes`` said yes) as sequences free; ``done`` gets its result, or the
        ``FaraError`` that ended it, on this thread during a later ``step``. Raises ``GrammarError`` for a JSON schema
        no grammar can be built of (before it takes a sequence)."""
        detail = prompt.detail
        assert isinstance(detail, LlamaPrompt)
        sampling = request.sampling
        json_gbnf(self._vocab, sampling.json_schema)  # checked here: in the batch it would end every reply
        special = prompt.tool_family is not None
        loops_checked = sampling.json_schema is None
        on_text = request.on_text
        writing = ReplyWriting(self._vocab, sampling, detail.rendered.stop, on_text, special, loops_checked, None)
        owner = request.conversation
        tokens = list(detail.tokens)
        slot = self._slot_for(owner.principal, tokens) if isinstance(owner, ApiClient) else None
        restore = None
        if slot is not None:
            tokens, restore = self._kept_for(slot, tokens)
        reply = _Reply(len(tokens), writing, request, slot, done, time.perf_counter())
        max_tokens = sampling.max_tokens or self.batch.n_ctx

        def on_token(token: int) -> Ended | None:
            if reply.first_token_at is None:
                reply.first_token_at = time.perf_counter()
            return writing.take(token, max_tokens)

        ticket = self._scheduler.submit(
            SequenceRequest(
                tokens,
                sampling,
                on_token,
                request.should_cancel,
                restore=restore,
                keep=slot is not None,
                speculate=self.speculate,  # proposals while they pay here (sampled ones keep their distribution)
            )
        )
        self._replies[ticket] = reply

    def step(self) -> None:
        """One decode of every reply under way; each one that ended is told (``done``)."""
        try:
            ended = self._scheduler.step()
        except FaraError as exc:  # the batch failed: every reply under way fails with it
            self.fail_all(exc)
            return
        for ticket, end in ended:
            reply = self._replies.pop(ticket)
            self._finish(reply, end)

    def _finish(self, reply: _Reply, end: SequenceEnd) -> None:
        if end.ended != "cancelled":
            reply.writing.end(())
        if end.state is not None and reply.slot is not None:
            if end.checkpoint is not None:
                self._states.cache.put_checkpoint(reply.slot, KVSnapshot(end.checkpoint.tokens, end.checkpoint.data))
            self._states.cache.put(reply.slot, KVSnapshot(end.state.tokens, end.state.data))
        times = (reply.started, reply.first_token_at)
        cells = end.prompt_tokens + len(end.tokens)
        stats = reply_stats(
            reply.tokens, reply.tokens - end.reused, reply.writing.tokens, times, cells, self.batch.n_ctx
        )
        stats = replace(stats, draft_proposed=end.proposed, draft_accepted=end.accepted)
        reply.done(ReplyResult(reply.writing.text, stats, end.ended))

    # ------------------------------------------------------------------ kept states

    def _slot_for(self, principal: str, tokens: list[int]) -> SequenceSlot:
        slot, dropped = self._states.api_slots.slot_for(principal, tokens)
        self._states.forget_slots(dropped)
        return SequenceSlot(slot.principal, slot.number)

    def _kept_for(self, slot: SequenceSlot, tokens: list[int]) -> tuple[list[int], SequenceState | None]:
        """The prompt spelled with the tokens the principal's kept states read where they spell its text
        (``own_tokens``: a reply's tokens seldom come back as they were written), and the slot's state, or the
        principal's other state, that saves the most reading of it (a recurrent model's only where it ends exactly
        on a prefix; a sliding window's only from its end); None when none saves any. Another principal's states
        are never looked at."""
        cache, rewindable, window = self._states.cache, self._states.rewindable, self._states.window
        closest = cache.closest(tokens, rewindable, slot.principal, window, sequences=True)
        candidates = [s for s in (cache.get(slot), closest) if s]
        respelled = longest_respelled_as_read(tokens, [s.tokens for s in candidates], *self._spelling)
        if respelled is not None and len(respelled) < self.batch.n_ctx:
            tokens = respelled
        scored = [(usable_prefix(s.tokens, tokens, rewindable, window), s) for s in candidates]
        shared, best = max(scored, key=lambda item: item[0], default=(0, None))
        return tokens, SequenceState(best.tokens, best.data) if best is not None and shared > 0 else None

    # ------------------------------------------------------------------ the end

    def set_threads(self, n_threads: int) -> None:
        self.batch.set_threads(n_threads)

    def fail_all(self, error: FaraError) -> None:
        """Every reply under way ends with ``error`` (``done``), their sequences freed."""
        replies, self._replies = list(self._replies.values()), {}
        self.batch.end_all()
        self._scheduler = SequenceScheduler(self.batch)
        for reply in replies:
            reply.done(error)

    def close(self) -> None:
        """Every reply under way ends (``done`` gets a ``GenerationError``), then the context is freed."""
        replies, self._replies = list(self._replies.values()), {}
        self.batch.close()
        for reply in replies:
            reply.done(GenerationError("The model was unloaded while it replied."))
