"""Proposals from a draft model (issue 65's second method): a small model of the same vocabulary writes a
sequence's next tokens greedily, and the target model checks them in its next decode (``SequenceBatch``), as
llama.cpp's speculative example does. SmolLM2-135M drafts for SmolLM2-1.7B, Qwen3.5 0.8B for its 4B and 9B.

``DraftModel`` owns the draft's context (a sequence of its own for each of the target's), over a model its owner
loaded; each ``DraftModelDrafter`` keeps one sequence's cells in step with what the target accepted. The tuning is
``NgramDrafter``'s, with the draft's own seconds a token counted in each proposal's cost: a draft that is slow
here, or seldom agrees, proposes fewer tokens, and one measured to make the sequence slower stops."""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from fara_desktop.engine.errors import GenerationError
from fara_desktop.engine.kv_states import common_prefix
from fara_desktop.engine.ngram_draft import PROBE, DecodeCost, NgramDrafter
from fara_desktop.engine.sequence_batch import free_batch_and_context, sequences_context
from fara_desktop.planning.params import LoadParams
from fara_desktop.vocabulary.errors import FaraError

log = logging.getLogger(__name__)

VOCAB_SAMPLE = 997  # one token in this many is compared by its text (and the first 256, the control tokens)


class DraftVocabularyError(FaraError):
    """The draft model does not share the target's vocabulary: its tokens would mean other words."""


def same_vocabulary(llama_cpp: Any, target: Any, draft: Any) -> bool:
    """Whether two models (``llama_model_p``) number the same tokens alike: the same count, and the same text for
    the first 256 and one in ``VOCAB_SAMPLE`` of the rest."""
    vocabs = [llama_cpp.llama_model_get_vocab(m) for m in (target, draft)]
    sizes = [llama_cpp.llama_vocab_n_tokens(v) for v in vocabs]
    if sizes[0] != sizes[1]:
        return False
    for token in [*range(min(256, sizes[0])), *range(256, sizes[0], VOCAB_SAMPLE)]:
        texts = [llama_cpp.llama_vocab_get_text(v, token) for v in vocabs]
        if texts[0] != texts[1]:
            return False
    return True


class DraftModel:
    """A draft model's context over ``model`` (a ``llama_model_p`` of the same vocabulary as ``target``), with
    ``sequences`` sequences of ``n_ctx`` cells; its owner frees it (``close``) before either model."""

    def __init__(self, model: Any, target: Any, n_ctx: int, sequences: int, n_threads: int) -> None:
        import llama_cpp

        if not same_vocabulary(llama_cpp, target, model):
            raise DraftVocabularyError("The draft model does not share this model's vocabulary.")
        self._llama_cpp = llama_cpp
        self._ctx = sequences_context(llama_cpp, model, n_ctx, sequences, n_threads, 512)
        self._memory = llama_cpp.llama_get_memory(self._ctx)
        self._batch = llama_cpp.llama_batch_init(512, 0, 1)
        self._greedy = llama_cpp.llama_sampler_init_greedy()
        self._free = list(range(sequences))
        self.n_ctx = n_ctx
        self.decodes = 0  # llama_decode calls on the draft (what the tests count)
        # what a proposal costs on the draft here, measured over every sequence (a new one knows it at once: one
        # that believed proposals free proposed twelve at its first step, 0.85 of plain decoding's speed at 1.7B)
        self.seconds_per_token = 0.0

    def timed(self, seconds_per_token: float) -> None:
        previous = self.seconds_per_token
        self.seconds_per_token = seconds_per_token if previous == 0 else 0.8 * previous + 0.2 * seconds_per_token

    def drafter(self) -> DraftModelDrafter:
        """A drafter for one new sequence of the target (``release`` gives its cells back)."""
        if not self._free:
            raise GenerationError("Every sequence of the draft model is in use.")
        return DraftModelDrafter(self, self._free.pop(0))

    def _release(self, seq_id: int) -> None:
        self._llama_cpp.llama_memory_seq_rm(self._memory, seq_id, -1, -1)
        self._free.append(seq_id)

    def _cut(self, seq_id: int, keep: int) -> None:
        self._llama_cpp.llama_memory_seq_rm(self._memory, seq_id, keep, -1)

    def _decode(self, seq_id: int, tokens: Sequence[int], start: int) -> None:
        """``tokens`` at positions from ``start``, in batches; logits for the last one only."""
        llama_cpp, batch = self._llama_cpp, self._batch
        for offset in range(0, len(tokens), 512):
            chunk = tokens[offset : offset + 512]
            batch.n_tokens = len(chunk)
            for i, token in enumerate(chunk):
                batch.token[i], batch.pos[i] = token, start + offset + i
                batch.n_seq_id[i], batch.seq_id[i][0] = 1, seq_id
                batch.logits[i] = offset + i == len(tokens) - 1
            status = llama_cpp.llama_decode(self._ctx, batch)
            self.decodes += 1
            if status != 0:
                raise GenerationError(f"llama.cpp could not decode on the draft model (status {status}).")

    def _next(self) -> int:
        return int(self._llama_cpp.llama_sampler_sample(self._greedy, self._ctx, -1))

    def close(self) -> None:
        llama_cpp = self._llama_cpp
        if self._greedy is not None:
            llama_cpp.llama_sampler_free(self._greedy)
            self._greedy = None
        free_batch_and_context(llama_cpp, self._batch, self._ctx)
        self._batch = self._ctx = None


class DraftModelDrafter(NgramDrafter):
    """One sequence's proposals written by the draft model: its cells hold what the target accepted (cut back
    where the target parted from them), and it writes the next ones greedily."""

    def __init__(self, draft: DraftModel, seq_id: int) -> None:
        super().__init__()
        self._draft, self._seq_id = draft, seq_id
        self._held: list[int] = []  # the tokens the draft's cells hold for this sequence

    def draft(self, history: Sequence[int], cost: DecodeCost, others: int, room: int, writers: int = 1) -> list[int]:
        count = min(self.count(cost, others, room, writers), self._draft.n_ctx - len(history) - 1)
        if self._draft.seconds_per_token == 0:
            count = min(count, PROBE)  # what a proposal costs on the draft is not known yet
        if count <= 0:
            return []
        draft = self._draft
        shared = min(common_prefix(self._held, history), len(history) - 1)  # the last one is decoded for logits
        if shared < len(self._held):
            draft._cut(self._seq_id, shared)
        catching_up = len(history) - shared > count + 1  # the prompt, read once: not what a proposal costs
        started = time.perf_counter()
        draft._decode(self._seq_id, history[shared:], shared)
        if catching_up:
            started = time.perf_counter()
        proposed = [draft._next()]
        while len(proposed) < count:
            draft._decode(self._seq_id, proposed[-1:], len(history) + len(proposed) - 1)
            proposed.append(draft._next())
        # the proposals' cells go: the target decides which of them stand
        draft._cut(self._seq_id, len(history))
        self._held = list(history)
        draft.timed((time.perf_counter() - started) / len(proposed))
        return proposed

    def proposal_seconds(self) -> float:
        return self._draft.seconds_per_token

    def release(self) -> None:
        """The sequence ended: its cells in the draft's context are freed for another."""
        self._draft._release(self._seq_id)
        self._held = []


class DraftBeside:
    """A draft model loaded beside the model in use: its ``Llama`` and its context (``model``); ``close`` frees the
    context, then the model."""

    def __init__(self, llm: Any, model: DraftModel, name: str) -> None:
        self.llm, self.model, self.name = llm, model, name

    def close(self) -> None:
        self.model.close()
        self.llm.close()


def draft_beside(target: Any, params: LoadParams, n_ctx: int) -> DraftBeside | None:
    """The draft model ``params.draft_model`` names, loaded beside ``target`` (a ``Llama``) as the engine loads any
    model (its kernel path alike), with a context of one sequence of ``n_ctx`` cells; None when none is named or it
    cannot serve (its load failed, another vocabulary: said in the log; the model goes on without one)."""
    from fara_desktop.engine.llama_loading import open_model
    from fara_desktop.models.gguf_checks import check_loadable
    from fara_desktop.models.gguf_file import read_gguf_header

    if params.draft_model in ("", "auto"):
        return None
    path = Path(params.draft_model)
    own = replace(params, n_ctx=256, projector=None, parallel=1, draft_model="", prefault=False)  # not used:
    try:  # ``DraftModel`` has a context of its own
        header = read_gguf_header(path)
        check_loadable(header)  # a file llama.cpp would abort on never reaches it, as for the model itself
        llm = open_model(path, header, own, None, None)[0]
    except (FaraError, OSError) as exc:
        log.warning("The draft model %s was not loaded: %s", path.name, exc)
        return None
    try:
        return DraftBeside(llm, DraftModel(llm.model, target.model, n_ctx, 1, params.n_threads or 2), path.name)
    except FaraError as exc:
        log.warning("The draft model %s does not serve: %s", path.name, exc)
        llm.close()
        return None
    except BaseException:
        llm.close()
        raise
