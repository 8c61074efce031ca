"""Pure core: incremental text decoding with stop strings, chat-format fallbacks, conversation trimming."""

from __future__ import annotations

from fara_desktop.engine.chat_format import (
    GemmaTurnFormatter,
    JinjaChatFormatter,
    TranscriptFormatter,
    formatter_for,
)
from fara_desktop.engine.text_stream import TextStream
from fara_desktop.engine.types import ChatMessage

MESSAGES = [ChatMessage("system", "Be brief."), ChatMessage("user", "Hi"), ChatMessage("assistant", "Hello")]


def test_multibyte_characters_split_across_tokens():
    stream = TextStream()
    snowman = "☃".encode()
    assert stream.feed(snowman[:1]) == ""
    assert stream.feed(snowman[1:]) == "☃"
    assert stream.feed(b" ok") == " ok"
    assert stream.text == "☃ ok"


def test_stop_string_is_held_back_and_cut():
    stream = TextStream(stop=("\n### ",))
    out = [stream.feed(p.encode()) for p in ["Hello", "\n", "##", "# User"]]
    assert "".join(out) == "Hello"
    assert stream.stopped
    assert stream.flush() == ""


def test_held_back_text_that_is_not_a_stop_is_released():
    stream = TextStream(stop=("\n### ",))
    assert stream.feed(b"a\n#") == "a"
    assert stream.feed(b"x") == "\n#x"
    assert stream.feed(b"\n") == ""
    assert stream.flush() == "\n"
    assert stream.text == "a\n#x\n"


def test_fallbacks_by_architecture():
    assert isinstance(formatter_for(None, "gemma3", "<bos>", "<eos>"), GemmaTurnFormatter)
    assert isinstance(formatter_for("", "llama", "<s>", "</s>"), TranscriptFormatter)
    assert isinstance(formatter_for("{{ messages }}", "llama", "<s>", "</s>"), JinjaChatFormatter)


def test_gemma_fallback_folds_the_system_prompt_into_the_first_turn():
    rendered = GemmaTurnFormatter().render([*MESSAGES, ChatMessage("user", "Bye")])
    assert rendered.text == (
        "<start_of_turn>user\nBe brief.\n\nHi<end_of_turn>\n"
        "<start_of_turn>model\nHello<end_of_turn>\n"
        "<start_of_turn>user\nBye<end_of_turn>\n"
        "<start_of_turn>model\n"
    )
    assert rendered.add_bos


def test_transcript_fallback():
    rendered = TranscriptFormatter().render(MESSAGES)
    assert rendered.text.endswith("### Assistant:\nHello\n\n### Assistant:\n")
    assert rendered.stop == ("\n### ",)


def test_jinja_template_renders_in_a_sandbox():
    template = "{% for m in messages %}<{{ m.role }}>{{ m.content }}{% endfor %}{{ bos_token }}"
    rendered = JinjaChatFormatter(template, "<s>", "</s>").render(MESSAGES)
    assert rendered.text == "<system>Be brief.<user>Hi<assistant>Hello<s>"
    assert not rendered.add_bos


def test_prose_is_split_into_paragraphs_and_code_kept_whole():
    from fara_desktop.ui.widgets.text_blocks import split_blocks

    blocks = split_blocks("One\nstill one\n\nTwo\n\n```py\na = 1\n\nb = 2\n```\nThree")
    assert [(b.kind, b.text) for b in blocks] == [
        ("text", "One\nstill one"),
        ("text", "Two"),
        ("code", "a = 1\n\nb = 2"),
        ("text", "Three"),
    ]
    streaming = split_blocks("Intro\n\n```python\nprint(1)")
    assert streaming[-1].kind == "code" and not streaming[-1].closed


def test_single_line_breaks_are_kept_but_tables_lists_and_rules_stay_markdown():
    from fara_desktop.ui.widgets.text_blocks import keep_line_breaks

    assert keep_line_breaks("Roses are red\nViolets are blue") == "Roses are red\u2028Violets are blue"
    for markdown in ("| a | b |\n|---|---|\n| 1 | 2 |", "- one\n- two", "# Title\nText", "1. a\n2. b", "> q\n> r"):
        assert keep_line_breaks(markdown) == markdown
    assert keep_line_breaks("- item\n  goes on") == "- item\u2028  goes on"
