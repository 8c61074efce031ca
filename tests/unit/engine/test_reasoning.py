"""Reasoning and answer told apart as they stream, for every marker family the real templates declare."""

from __future__ import annotations

import pytest

from fara_desktop.engine.reasoning import (
    KNOWN_MARKERS,
    THINK,
    ReasoningSplitter,
    ReasoningSyntax,
    markers_for_template,
    split_reasoning,
    syntax_for_prompt,
)
from tests.helpers.paths import FIXTURES

TEMPLATES = FIXTURES / "chat_templates"


def streamed(text: str, syntax: ReasoningSyntax, size: int) -> tuple[str, str, list[bool]]:
    splitter = ReasoningSplitter(syntax)
    pieces = []
    for start in range(0, len(text), size):
        pieces += splitter.feed(text[start : start + size])
    pieces += splitter.finish()
    return "".join(t for t, r in pieces if r), "".join(t for t, r in pieces if not r), [r for _, r in pieces]


@pytest.mark.parametrize("markers", KNOWN_MARKERS, ids=lambda m: m.open)
def test_every_family_splits_the_same_whatever_the_piece_size(markers):
    prefix = "".join(markers.answer_prefixes)
    text = f"\n{markers.open}\nThe user asks 2+2. That is 4.\n{markers.close}\n\n{prefix}**4**, and `<b>` stays."
    syntax = ReasoningSyntax(KNOWN_MARKERS)
    for size in (1, 2, 3, 5, 7, 64):
        reasoning, answer, flags = streamed(text, syntax, size)
        assert reasoning == "The user asks 2+2. That is 4.\n", size
        assert answer == "**4**, and `<b>` stays.", size
        assert flags == sorted(flags, reverse=True)  # all reasoning first, then all answer


def test_a_prompt_that_opens_the_block_starts_the_reply_inside_it():
    r1_prompt = "<｜User｜>Hi<｜Assistant｜><think>\n"
    syntax = syntax_for_prompt((THINK,), r1_prompt)
    assert syntax.opened == THINK
    assert split_reasoning("Greeting.\n</think>\n\nHello!", syntax) == ("Greeting.\n", "Hello!")
    # Qwen3 with thinking off closes an empty block in the prompt: the reply is all answer
    assert syntax_for_prompt((THINK,), "<|im_start|>assistant\n<think>\n\n</think>\n\n").opened is None


def test_markers_only_open_a_block_at_the_start_of_a_reply():
    syntax = ReasoningSyntax((THINK,))
    text = "Use a <think> tag like this: <think>x</think>"
    assert split_reasoning(text, syntax) == ("", text)


def test_an_unclosed_block_is_all_reasoning_and_a_partial_marker_is_released_at_the_end():
    syntax = ReasoningSyntax((THINK,))
    assert split_reasoning("<think>still going </thi", syntax) == ("still going </thi", "")
    assert split_reasoning("  <thi", syntax) == ("", "  <thi")


def test_templates_declare_their_markers():
    assert markers_for_template(None) == (THINK,)
    gpt_oss = markers_for_template((TEMPLATES / "openai-gpt-oss-120b.jinja").read_text())
    assert any(m.open.startswith("<|channel|>analysis") for m in gpt_oss)
    r1 = markers_for_template((TEMPLATES / "deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja").read_text())
    assert r1 == (THINK,)
