"""What each sampled token writes (``engine/reply_writing.py``), with SmolLM2's real vocabulary: the stop strings
hold back what may start one and cut the reply there, the budget ends it, an end-of-turn token ends it unless the
reply ignores it, and a log probability is asked once per token written."""

from __future__ import annotations

from pathlib import Path

import pytest

from fara_desktop.engine.reply_writing import ReplyWriting
from fara_desktop.vocabulary.sampling import SamplingParams

pytestmark = pytest.mark.real_model


@pytest.fixture(scope="module")
def llm(smollm2_path: Path):
    from llama_cpp import Llama

    model = Llama(str(smollm2_path), n_ctx=256, n_threads=2, verbose=False, vocab_only=True)
    yield model
    model.close()


def writing(llm, shown: list[str], asked: list[int], **sampling) -> ReplyWriting:
    import llama_cpp

    vocab = llama_cpp.llama_model_get_vocab(llm.model)
    logprob_of = lambda token, _piece: asked.append(token)  # noqa: E731 (a count, not a figure)
    return ReplyWriting(vocab, SamplingParams(**sampling), ("END",), shown.append, False, True, logprob_of)


def test_a_stop_string_cuts_the_reply_and_is_never_shown(llm):
    shown: list[str] = []
    asked: list[int] = []
    reply = writing(llm, shown, asked)
    tokens = llm.tokenize(b"Hello world. END of it", add_bos=False)
    taken = 0
    for token in tokens:
        taken += 1
        if reply.take(token, 100) is not None:
            break
    assert taken == len(tokens) - 2  # "END" ended it: " of it" was never written
    reply.end(())
    assert reply.text == "".join(shown) == "Hello world. "
    assert len(asked) == reply.tokens == taken


def test_the_budget_and_the_end_of_turn_end_a_reply(llm):
    tokens = llm.tokenize(b"one two three four", add_bos=False)
    reply = writing(llm, [], [])
    assert [reply.take(t, 2) for t in tokens[:2]] == [None, "length"]
    eog = llm.token_eos()
    assert writing(llm, [], []).take(eog, 10) == "stop"
    assert writing(llm, [], [], ignore_eos=True).take(eog, 10) is None
