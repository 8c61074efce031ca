"""Proposals from a draft model (issue 65's second method, ``engine/draft_model.py``): greedy replies are plain
decoding's, token for token, whether the draft always agrees (the same file: every proposal accepted) or seldom
does (another model of the same vocabulary); each sequence has cells of its own in the draft's context, given back
when it ends; a draft of another vocabulary is refused. Real llama.cpp, small F32 models of each family whose
cells can be cut back (a recurrent state cannot be, so a hybrid proposes nothing)."""

from __future__ import annotations

from pathlib import Path

import pytest

from fara_desktop.engine.draft_model import DraftModel, DraftVocabularyError
from fara_desktop.engine.sequence_batch import SequenceBatch
from fara_desktop.vocabulary.sampling import SamplingParams
from tests.helpers.gguf_factory import write_tiny_model
from tests.integration.engine.test_prefix_paths import TEMPLATE

GREEDY = SamplingParams(temperature=0.0, repeat_penalty=1.0, max_tokens=40, ignore_eos=True)
FAMILIES = ("llama", "gemma3", "qwen3moe", "gpt-oss")


def tiny(folder: Path, family: str, seed: int) -> Path:
    path = folder / f"{family}-{seed}.gguf"
    return write_tiny_model(path, family, chat_template=TEMPLATE, context_length=2048, seed=seed)


@pytest.mark.parametrize("family", FAMILIES)
def test_a_draft_that_agrees_or_not_gives_plain_decodings_reply(family: str, tmp_path: Path):
    from llama_cpp import Llama

    target = Llama(str(tiny(tmp_path, family, 0)), n_ctx=512, n_threads=2, verbose=False)
    agreeing = Llama(str(tiny(tmp_path, family, 0)), n_ctx=64, n_threads=2, verbose=False)  # the same weights
    other = Llama(str(tiny(tmp_path, family, 7)), n_ctx=64, n_threads=2, verbose=False)
    batch = SequenceBatch(target.model, 256, 2, 2)
    drafts = [DraftModel(m.model, target.model, 256, 2, 2) for m in (agreeing, other)]
    try:
        prompts = [target.tokenize(text, add_bos=True) for text in (b"hello world, the quick brown", b"a dog sat")]

        def written(draft: DraftModel | None) -> list[list[int]]:
            replies: list[list[int]] = [[], []]
            for prompt, reply in zip(prompts, replies, strict=True):
                batch.add(prompt, GREEDY, reply.append, speculate=draft.drafter() if draft else False)
            batch.run()
            return replies

        plain = written(None)
        for draft, always in zip(drafts, (True, False), strict=True):
            before = (batch.proposed, batch.accepted, draft.decodes)
            assert written(draft) == plain
            proposed, accepted = batch.proposed - before[0], batch.accepted - before[1]
            assert draft.decodes > before[2] and proposed > 0
            if always:
                assert accepted == proposed, f"the same weights disagreed: {accepted} of {proposed}"
            else:
                assert accepted < proposed
            assert len(draft._free) == 2  # each sequence's cells given back as it ended
    finally:
        for draft in drafts:
            draft.close()
        batch.close()
        for llm in (target, agreeing, other):
            llm.close()


def test_a_draft_of_another_vocabulary_is_refused(tmp_path: Path, smollm2_path: Path):
    from llama_cpp import Llama

    target = Llama(str(smollm2_path), n_ctx=256, n_threads=2, verbose=False)
    stranger = Llama(str(tiny(tmp_path, "llama", 0)), n_ctx=64, n_threads=2, verbose=False)
    try:
        with pytest.raises(DraftVocabularyError):
            DraftModel(stranger.model, target.model, 256, 1, 2)
    finally:
        stranger.close()
        target.close()


def test_a_hybrids_sequence_gives_back_the_draft_cells_it_cannot_use(tmp_path: Path):
    """A recurrent state cannot take a rejected proposal back, so its sequence proposes nothing; the draft's
    sequence it was handed goes back at once (else the draft runs out of sequences: found by the benchmark on a
    Qwen3.5 shape, "Every sequence of the draft model is in use")."""
    from llama_cpp import Llama

    from tests.helpers.hybrid_factory import write_tiny_hybrid

    path = write_tiny_hybrid(tmp_path / "qwen35.gguf", "qwen35", chat_template=TEMPLATE)
    target = Llama(str(path), n_ctx=256, n_threads=2, verbose=False)
    draft_llm = Llama(str(path), n_ctx=64, n_threads=2, verbose=False)
    batch = SequenceBatch(target.model, 256, 1, 2)
    draft = DraftModel(draft_llm.model, target.model, 256, 1, 2)
    try:
        prompt = target.tokenize(b"the cat sat", add_bos=True)
        for _ in range(2):  # one draft sequence: the second reply gets it only if the first gave it back
            batch.add(prompt, GREEDY, lambda _token: None, speculate=draft.drafter())
            batch.run()
        assert batch.proposed == 0 and len(draft._free) == 1
    finally:
        draft.close()
        batch.close()
        draft_llm.close()
        target.close()
