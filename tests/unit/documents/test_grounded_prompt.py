"""The passages a question gets leave the room the engine keeps for the reply, the user's max tokens included
(issue 28: the documents controller copied the worker's reply reserve and ignored max_tokens)."""

from __future__ import annotations

from fara_desktop.documents.grounding import grounded_prompt
from fara_desktop.documents.index import DocumentIndex
from fara_desktop.documents.indexer import index_collection
from fara_desktop.vocabulary.messages import ChatMessage
from fara_desktop.vocabulary.sampling import SamplingParams


def test_a_longer_reply_asked_for_leaves_less_room_for_passages(tmp_path):
    folder = tmp_path / "manuals"
    folder.mkdir()
    for number in range(12):
        sentence = f"Manual {number}: the pump must be primed with water before the valve opens. "
        (folder / f"manual-{number}.txt").write_text(sentence * 40, encoding="utf-8")
    index = DocumentIndex(tmp_path / "index.sqlite3")
    try:
        index_collection(index, "manuals", [folder])
        question = [ChatMessage("user", "How is the pump primed?")]
        short_reply = grounded_prompt(index, ["manuals"], question, None, 4096, SamplingParams(max_tokens=64))
        long_reply = grounded_prompt(index, ["manuals"], question, None, 4096, SamplingParams(max_tokens=2000))
    finally:
        index.close()
    (short_messages, short_sources), (long_messages, long_sources) = short_reply, long_reply
    assert short_sources and [s.number for s in short_sources] == list(range(1, len(short_sources) + 1))
    assert len(long_messages[-1].content) < len(short_messages[-1].content)
    assert len(long_sources) <= len(short_sources)
    assert "[1]" in short_messages[-1].content and short_messages[-1].content.endswith("How is the pump primed?")


def test_a_slow_model_gets_the_passages_it_reads_in_the_accepted_wait():
    from fara_desktop.documents.grounding import MIN_BUDGET_TOKENS, passage_budget

    roomy = passage_budget(32768, 0, 512)
    assert roomy == 2000  # a fast model (or none measured) is limited by the context only
    assert passage_budget(32768, 0, 512, readable=12 * 10) == MIN_BUDGET_TOKENS  # 8B here: 12 tok/s × 10 s
    assert passage_budget(32768, 0, 512, readable=60 * 10) == 600  # 1.7B: 60 tok/s × 10 s
