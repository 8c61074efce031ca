"""Replies split into blocks for display: paragraphs, code kept whole, single line breaks kept."""

from __future__ import annotations


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
