"""Incremental decoding of streamed tokens: multibyte characters and stop strings."""

from __future__ import annotations

from fara_desktop.engine.text_stream import TextStream


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
