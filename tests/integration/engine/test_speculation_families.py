"""Proposals checked in the same decode give plain decoding's reply, on the eight families of the prefix tests
(F32 models, whose rounding does not change with the number of tokens in a decode): proposals always right (every
one accepted) and always wrong (every one rejected, its cells cut back). A recurrent or hybrid model proposes
nothing: its state cannot be cut back to the last accepted token."""

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

    def draft(self, history: Sequence[int], cost: DecodeCost, others: int, room: int) -> list[int]:
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
