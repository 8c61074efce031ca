"""The local API's replies decoded together (issue 63): each request a sequence of one ``SequenceBatch`` over the
loaded model, admitted by ``SequenceScheduler``, its tokens written as a reply of the model's own context writes
them (``ReplyWriting``: stop strings, the loop check, the budget), so several clients stream at once and one pass
over the weights serves a token of each.

A sequence's state is kept when its reply ends, for its principal alone: the principal's next request restores
the kept state that shares the longest prefix with its prompt and reads only the rest. The states are counted in
bytes (``kept_bytes``), the least recently used dropped first. What a sequence cannot do — pictures, log
probabilities, a forced tool call's grammar, mirostat — is replied to in the model's own context
(``takes`` says which). Runs on the inference thread; its owner (``LlamaBackend``) closes it before the model.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Hashable
from dataclasses import dataclass, replace

from fara_desktop.engine.backend import PreparedPrompt, ReplyRequest, ReplyResult
from fara_desktop.engine.errors import GenerationError
from fara_desktop.engine.llama_prompt import LlamaPrompt
from fara_desktop.engine.llama_tokens import json_gbnf
from fara_desktop.engine.reply_writing import ReplyWriting
from fara_desktop.engine.sequence_batch import Ended, SequenceBatch, SequenceEnd, SequenceState
from fara_desktop.engine.sequence_scheduler import SequenceRequest, SequenceScheduler
from fara_desktop.engine.types import ApiClient, principal_of
from fara_desktop.vocabulary.errors import FaraError
from fara_desktop.vocabulary.sampling import SamplingParams
from fara_desktop.vocabulary.stats import reply_stats

KEPT_BYTES = 512 * 1024 * 1024  # the states kept for the API's principals, together
ReplyDone = Callable[[ReplyResult | FaraError], None]


@dataclass
class _Reply:
    tokens: int  # the prompt's
    writing: ReplyWriting
    request: ReplyRequest
    principal: str | None  # whose state is kept when it ends (None: a one-off, nothing kept)
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
        n_batch: int = 512,
        kept_bytes: int = KEPT_BYTES,
        like: object = None,
        speculate: bool = True,
    ) -> None:
        """``like``: the model's own context's parameters (``SequenceBatch``: its replies are written alike);
        ``speculate``: greedy replies propose tokens from their own text (``NgramDrafter``)."""
        import llama_cpp

        self._llama_cpp = llama_cpp
        self._vocab = llama_cpp.llama_model_get_vocab(model)
        self.batch = SequenceBatch(model, n_ctx, sequences, n_threads, n_batch, like)
        self._scheduler = SequenceScheduler(self.batch)
        self._replies: dict[int, _Reply] = {}  # by the scheduler's ticket
        self._kept: list[tuple[str, SequenceState]] = []  # the least recently used first
        self.kept_bytes = kept_bytes
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
        principal = principal_of(owner) if isinstance(owner, ApiClient) else None
        reply = _Reply(len(detail.tokens), writing, request, principal, done, time.perf_counter())
        max_tokens = sampling.max_tokens or self.batch.n_ctx

        def on_token(token: int) -> Ended | None:
            if reply.first_token_at is None:
                reply.first_token_at = time.perf_counter()
            return writing.take(token, max_tokens)

        restore = self._take_kept(principal, detail.tokens) if principal is not None else None
        ticket = self._scheduler.submit(
            SequenceRequest(
                list(detail.tokens),
                sampling,
                on_token,
                request.should_cancel,
                restore=restore,
                keep=principal is not None,
                speculate=self.speculate and sampling.temperature <= 0,  # greedy: proposals while they pay here
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
        if end.state is not None and reply.principal is not None:
            self._keep(reply.principal, end.state)
        times = (reply.started, reply.first_token_at)
        cells = end.prompt_tokens + len(end.tokens)
        stats = reply_stats(
            reply.tokens, reply.tokens - end.reused, reply.writing.tokens, times, cells, self.batch.n_ctx
        )
        stats = replace(stats, draft_proposed=end.proposed, draft_accepted=end.accepted)
        reply.done(ReplyResult(reply.writing.text, stats, end.ended))

    # ------------------------------------------------------------------ kept states

    def _take_kept(self, principal: str, tokens: list[int]) -> SequenceState | None:
        """The principal's kept state sharing the longest prefix with ``tokens`` (taken out: the reply keeps its own
        when it ends); None when none shares a token."""
        best, best_shared = None, 0
        for index, (owner, state) in enumerate(self._kept):
            if owner != principal:
                continue
            shared = 0
            for a, b in zip(state.tokens, tokens, strict=False):
                if a != b:
                    break
                shared += 1
            if shared > best_shared:
                best, best_shared = index, shared
        return self._kept.pop(best)[1] if best is not None else None

    def _keep(self, principal: str, state: SequenceState) -> None:
        self._kept.append((principal, state))
        while self._kept and sum(len(s.data) for _, s in self._kept) > self.kept_bytes:
            self._kept.pop(0)

    @property
    def kept(self) -> int:
        return len(self._kept)

    def forget(self, conversation: Hashable | None) -> None:
        """Every kept state of this API principal (None: of all)."""
        if conversation is None:
            self._kept.clear()
        elif isinstance(conversation, ApiClient):
            self._kept = [(p, s) for p, s in self._kept if p != conversation.principal]

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
        self._kept.clear()
        self.batch.close()
        for reply in replies:
            reply.done(GenerationError("The model was unloaded while it replied."))
