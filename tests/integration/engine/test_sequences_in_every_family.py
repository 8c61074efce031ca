"""The engine's sequences (``engine/sequence_batch.py``) in the seven families of the prefix tests (F32 models, whose
rounding does not change with the number of tokens in a decode): proposals checked in the same decode give plain
decoding's reply, always right (every one accepted) or always wrong (every one rejected, its cells cut back) — a
recurrent or hybrid model proposes nothing, its state cannot be cut back to the last accepted token; and a
sequence's state kept at the end of a reply continues in another sequence as a fresh read does."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest

from fara_desktop.engine.ngram_draft import DecodeCost, NgramDrafter
from fara_desktop.engine.sequence_batch import SequenceBatch
from fara_desktop.vocabulary.sampling import SamplingParams
from tests.helpers.hybrid_factory import HYBRID_FAMILIES
from tests.integration.engine.test_prefix_paths import FAMILIES, model_of

GREEDY = SamplingParams(temperature=0.0, repeat_penalty=1.0, max_tokens=40, ignore_eos=True)


class Scripted(NgramDrafter):
    """Four proposals a step: the known reply's next tokens, or never them."""

    def __init__(self, reply: list[int], prompt_length: int, right: bool) -> None:
        super().__init__()
        self.reply, self.prompt_length, self.right = reply, prompt_length, right

    def draft(
        self, history: Sequence[int], cost: DecodeCost, others: int, room: int, writers: int = 1
    ) -> list[int]:
        upcoming = self.reply[len(history) - self.prompt_length :][: min(4, room)]
        return upcoming if self.right else [t - 1 if t > 0 else t + 1 for t in upcoming]


@pytest.mark.parametrize("family", FAMILIES)
def test_proposals_right_or_wrong_give_plain_decodings_reply(family: str, tmp_path: Path):
    from llama_cpp import Llama

    llm = Llama(str(model_of(family, tmp_path)), n_ctx=512, n_threads=2, verbose=False)
    batch = SequenceBatch(llm.model, 256, 1, 2)
    try:
        prompt = llm.tokenize(b"hello world, the quick brown fox", add_bos=True)

        def written(speculate: bool | NgramDrafter) -> list[int]:
            tokens: list[int] = []
            batch.add(prompt, GREEDY, tokens.append, speculate=speculate)
            batch.run()
            return tokens

        plain = written(False)
        for right in (True, False):
            before = (batch.proposed, batch.accepted)
            assert written(Scripted(plain, len(prompt), right)) == plain
            proposed, accepted = batch.proposed - before[0], batch.accepted - before[1]
            if family in HYBRID_FAMILIES:
                assert proposed == 0
            else:
                assert proposed > 0 and accepted == (proposed if right else 0)
    finally:
        batch.close()
        llm.close()


@pytest.mark.parametrize("family", FAMILIES)
def test_a_kept_sequence_state_continues_as_a_fresh_read_in_every_family(family: str, tmp_path: Path):
    """A conversation's state kept when its reply ends (``llama_state_seq_get_data``) and restored into another
    sequence for the next turn: only the new tokens are read, and the reply is what a fresh read gives — dense,
    sliding-window, mixture-of-experts and the hybrids' recurrent state alike."""
    from llama_cpp import Llama

    llm = Llama(str(model_of(family, tmp_path)), n_ctx=512, n_threads=2, verbose=False)
    batch = SequenceBatch(llm.model, 256, 2, 2)
    try:
        first = llm.tokenize(b"hello world, the quick brown fox", add_bos=True)
        reply: list[int] = []
        batch.add(first, GREEDY, reply.append, keep=True)
        (end,) = batch.run()
        assert end.state is not None and list(end.state.tokens) == first + reply[:-1]
        follow_up = first + reply + llm.tokenize(b" and then the lazy dog", add_bos=False)
        blocker: list[int] = []
        batch.add(first, GREEDY, blocker.append)  # sequence 0 is taken: the state goes into sequence 1
        restored: list[int] = []
        seq = batch.add(follow_up, GREEDY, restored.append, restore=end.state)
        again = next(e for e in batch.run() if e.seq_id == seq)
        assert seq == 1 and again.reused == len(end.state.tokens)
        fresh: list[int] = []
        batch.add(follow_up, GREEDY, fresh.append)
        batch.run()
        assert restored == fresh
    finally:
        batch.close()
        llm.close()
