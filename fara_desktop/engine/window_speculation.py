"""The window's replies written with proposals (issue 65 in the model's own context, where the window's chats,
their saved readings and checkpoints live): each decode holds the reply's next token and the tokens its drafter
proposes after it, with logits for each; the reply's own sampler then samples position after position and keeps
going while what it samples is what was proposed. So every accepted proposal is a token written without a pass of
its own over the weights.

That is llama.cpp's rule for sampled replies too: each token is drawn from the model's distribution given the
tokens before it, as plain decoding draws it, and exactly one draw is made per token written — so a seeded sampled
reply, like a greedy one, is the very reply plain decoding writes (as far as the CPU rounds a decode of several
tokens as it rounds one). ``llama-cpp-python``'s ``generate`` cannot check proposals without logits for every
prompt token (``logits_all``: a score row per cell of the context), hence this loop of its own."""

from __future__ import annotations

import time
from collections.abc import Callable, Generator
from typing import TYPE_CHECKING, Any

from fara_desktop.engine.draft_model import DraftModel
from fara_desktop.engine.mtp_head import MtpHead
from fara_desktop.engine.ngram_draft import MAX_PROPOSED, DecodeCost, NgramDrafter
from fara_desktop.engine.sequence_batch import sampler_chain
from fara_desktop.machine.llama_internals import cut_context, hold_tokens_from, mark_logits_stale
from fara_desktop.vocabulary.sampling import SamplingParams

if TYPE_CHECKING:
    from llama_cpp import Llama

ANY_SEED = 0xFFFFFFFF  # llama.cpp's LLAMA_DEFAULT_SEED: a seed of its own choosing, as ``Llama``'s default


class SpeculativeWriting:
    """One reply of ``llm``'s own context (its sequence 0) written with ``drafter``'s proposals, tuned by ``cost``
    (what a token costs in a decode of this context, measured over the model's replies); counts what it proposed
    and what the model accepted."""

    def __init__(
        self,
        llm: Llama,
        sampling: SamplingParams,
        drafter: Callable[[], NgramDrafter],
        cost: DecodeCost,
        snapshots: int = 0,
        release: bool = True,
    ) -> None:
        """``drafter``: gives the reply's drafter when its first token is asked for (``release``d when it ends).
        ``snapshots``: the recurrent states a hybrid keeps (``n_rs_seq``; 0 for a model whose cells are cut back
        as they are): it proposes no more than that, what llama.cpp can take back. ``release``: False for a drafter
        kept from reply to reply."""
        self._llm, self._sampling, self._make_drafter, self._cost = llm, sampling, drafter, cost
        self._release = release
        self._snapshots = snapshots
        self.proposed = self.accepted = 0

    def tokens(self, prompt: list[int]) -> Generator[int, None, None]:
        """The reply's tokens, one by one, as ``Llama.generate`` yields them (its end-of-generation token too). The
        context holds a prefix of ``prompt`` (not all of it): the rest is read by ``Llama.eval``, as plain decoding
        reads it. Raises ``RuntimeError`` when llama.cpp cannot decode (as ``Llama.eval`` does)."""
        import llama_cpp

        llm = self._llm
        ctx, vocab = llm.ctx, llama_cpp.llama_model_get_vocab(llm.model)
        memory = llama_cpp.llama_get_memory(ctx)
        drafter = self._make_drafter()
        sampler = sampler_chain(llama_cpp, self._sampling, ANY_SEED, vocab, None)
        batch = llama_cpp.llama_batch_init(MAX_PROPOSED + 1, 0, 1)
        history = list(prompt)
        try:
            llm.eval(prompt[llm.n_tokens :])
            history.append(int(llama_cpp.llama_sampler_sample(sampler, ctx, -1)))
            yield history[-1]
            start, pending = len(prompt), history[-1]  # the next token to decode, and where it goes
            while True:
                started = time.perf_counter()
                room = min(self._snapshots or MAX_PROPOSED, llm.n_ctx() - start - 2)
                drafts = drafter.draft(history, self._cost, 1, room) if room > 0 else []
                step = [pending, *drafts]
                _fill(batch, step, start)
                if not llama_cpp.llama_memory_seq_rm(memory, 0, start, -1):  # the last step's rejected proposals
                    raise RuntimeError("llama.cpp could not take back the rejected proposals")
                status = llama_cpp.llama_decode(ctx, batch)
                if status != 0:
                    raise RuntimeError(f"llama_decode returned {status}")
                hold_tokens_from(llm, start, step)
                drafter.decoded(start, len(step))
                working = time.perf_counter() - started  # the reader's time between tokens is not the decode's
                written = accepted = 0
                for i in range(len(step)):
                    sampled_at = time.perf_counter()
                    token = int(llama_cpp.llama_sampler_sample(sampler, ctx, i))
                    working += time.perf_counter() - sampled_at
                    drafted = i < len(drafts) and token == drafts[i]
                    written, accepted = written + 1, accepted + drafted
                    history.append(token)
                    yield token
                    if not drafted:
                        break
                start, pending = start + written, history[-1]  # the proposals after the first rejection go
                self._judged(drafter, drafts, accepted, working, written)
        finally:
            # As plain decoding leaves it: the cells hold the reply but for its last token (and no proposal past it)
            # (a hybrid's recurrent state goes back at its next decode; a copy made before it is taken from there)
            held = len(history) - 1
            if llm.n_tokens > held:
                if not llama_cpp.llama_memory_seq_rm(memory, 0, held, -1):
                    held = 0  # not taken back: nothing of it can be trusted, the next reply reads its prompt anew
                    llama_cpp.llama_memory_seq_rm(memory, -1, -1, -1)
                cut_context(llm, held)
            mark_logits_stale(llm)
            if self._release:
                drafter.release()
            llama_cpp.llama_sampler_free(sampler)
            llama_cpp.llama_batch_free(batch)

    def _judged(self, drafter: NgramDrafter, drafts: list[int], accepted: int, seconds: float, written: int) -> None:
        self._cost.observe(1 + len(drafts), seconds)
        if drafts:
            drafter.judge(len(drafts), accepted)
            drafter.timed(seconds / written)
            self.proposed += len(drafts)
            self.accepted += accepted
        else:
            self._cost.plain_step(seconds / written)


def _fill(batch: Any, tokens: list[int], start: int) -> None:
    """``tokens`` at positions from ``start`` in sequence 0, logits for each."""
    batch.n_tokens = len(tokens)
    for i, token in enumerate(tokens):
        batch.token[i], batch.pos[i] = token, start + i
        batch.n_seq_id[i], batch.seq_id[i][0] = 1, 0
        batch.logits[i] = True


class WindowSpeculation:
    """Whether the loaded model's window replies speculate (``LoadParams.speculate``, on a model whose cells can be
    cut back or a hybrid that keeps recurrent states to take proposals back), and what a token costs in a decode of
    its context, measured over its replies (each reply's drafter learns its own text's acceptance, and stops
    proposing where its steps were measured slower than plain ones)."""

    def __init__(
        self, enabled: bool, snapshots: int = 0, draft: DraftModel | None = None, mtp: MtpHead | None = None
    ) -> None:
        """``snapshots``: the recurrent states a hybrid's context keeps to take proposals back (0: none, or a model
        whose cells are cut back as they are). ``draft``: a draft model writes the proposals; ``mtp``: the model's
        own MTP head does (else the reply's own text does)."""
        self.enabled, self.snapshots, self.draft, self.mtp = enabled, snapshots, draft, mtp
        self.cost = DecodeCost()
        self._kept: NgramDrafter | None = None

    @classmethod
    def of(
        cls,
        llm: Llama,
        speculate: bool,
        rewindable: bool,
        draft: DraftModel | None = None,
        mtp: MtpHead | None = None,
    ) -> WindowSpeculation:
        """For the model just loaded: on where asked for and proposals can be taken back (its cells cut, or the
        recurrent states its context keeps)."""
        import llama_cpp

        snapshots = 0 if rewindable else int(llama_cpp.llama_n_rs_seq(llm.ctx))
        return cls(speculate and (rewindable or snapshots > 0), snapshots, draft, mtp)

    def writing(self, llm: Llama, sampling: SamplingParams) -> SpeculativeWriting | None:
        """A writer for the next reply, or None where plain decoding writes it: speculation off, or a sampling
        this loop does not draw as ``Llama.generate`` does (mirostat)."""
        if not self.enabled or sampling.mirostat_mode != 0:
            return None
        if self.draft is None and self.mtp is None:
            return SpeculativeWriting(llm, sampling, NgramDrafter, self.cost, self.snapshots)
        return SpeculativeWriting(llm, sampling, self._kept_drafter, self.cost, self.snapshots, release=False)

    def _kept_drafter(self) -> NgramDrafter:
        """The MTP head's or draft model's one drafter, kept from reply to reply: its cells keep the chat it read
        (the next reply reads only what is new to it), and what it learned of its acceptance and cost here stays
        with this model (one measured slower than plain decoding stays off). Its owner frees the cells."""
        if self._kept is None:
            if self.mtp is not None:
                self._kept = self.mtp.drafter()
            elif self.draft is not None:
                self._kept = self.draft.drafter()
        assert self._kept is not None
        return self._kept


def plain_tokens(
    llm: Llama, tokens: list[int], sampling: SamplingParams, grammar: Any, reset: bool
) -> Generator[int, None, None]:
    """A reply's tokens as ``Llama.generate`` writes them, with no proposals (``reset``: it matches ``tokens``
    against what the context holds; else the context holds all of them but the first)."""
    return llm.generate(
        tokens,
        top_k=sampling.top_k,
        top_p=sampling.top_p,
        min_p=sampling.min_p,
        temp=sampling.temperature,
        repeat_penalty=sampling.repeat_penalty,
        mirostat_mode=sampling.mirostat_mode,
        mirostat_tau=sampling.mirostat_tau,
        mirostat_eta=sampling.mirostat_eta,
        reset=reset,
        grammar=grammar,
    )
