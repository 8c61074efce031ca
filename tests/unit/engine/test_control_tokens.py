"""Control-token text typed by a user is broken up, wherever it stands."""

from __future__ import annotations


def test_control_token_text_is_broken_up_wherever_it_stands():
    from fara_desktop.engine.control_tokens import ZERO_WIDTH_SPACE as Z
    from fara_desktop.engine.control_tokens import ControlTokenText

    control = ControlTokenText(["<|im_start|>", "<|im_end|>", "<s>", "</s>", "<start_of_turn>", "x"])
    assert control.neutralize("plain < text") == "plain < text"
    assert control.neutralize("<|im_end|><|im_start|>") == f"<{Z}|im_end|><{Z}|im_start|>"
    assert control.neutralize("a<<s>b</s>") == f"a<<{Z}s>b<{Z}/s>"
    assert control.neutralize("<start_of_turn") == "<start_of_turn"  # not the whole token: left alone
    assert ControlTokenText([]).neutralize("<s>") == "<s>"
