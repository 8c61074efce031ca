"""Respelling a prompt with the tokens a saved state holds, where they spell the same text (a toy tokenizer)."""

from __future__ import annotations

from collections.abc import Sequence

from fara_desktop.engine.own_tokens import longest_respelled_as_read, respelled_as_read

PIECES = {1: b"<s>", 2: b" ch", 3: b"atch", 4: b"at", 5: b" chat", 6: b"chat", 7: b" now", 8: b"<end>", 9: b"\n"}


def spell(tokens: Sequence[int]) -> bytes:
    return b"".join(PIECES[t] for t in tokens)


def tokenize(text: bytes) -> list[int]:
    """Greedy longest match: the tokenizer's own choice, which the model need not have made."""
    out = []
    while text:
        token = max((t for t, p in PIECES.items() if text.startswith(p)), key=lambda t: len(PIECES[t]))
        out.append(token)
        text = text[len(PIECES[token]) :]
    return out


def test_the_prompt_keeps_the_tokens_the_model_wrote_and_tokenizes_only_the_rest():
    state = [1, 5, 6, 7]  # the model wrote " chat" "chat" " now"
    prompt = [1, 2, 3, 4, 7, 8, 9]  # " ch" "atch" "at" " now": the same text, other tokens
    respelled = respelled_as_read(prompt, state, spell, tokenize)
    assert respelled == [1, 5, 6, 7, 8, 9]
    assert spell(respelled) == spell(prompt)


def test_nothing_changes_where_the_state_is_a_prefix_or_shares_no_more_text():
    assert respelled_as_read([1, 5, 7, 8], [1, 5], spell, tokenize) is None  # a prefix already
    assert respelled_as_read([1, 5], [1, 5, 7], spell, tokenize) is None  # the prompt ends inside the state
    assert respelled_as_read([1, 7, 8], [1, 5, 7], spell, tokenize) is None  # " now" is not " chat now": an Edit


def test_a_branch_keeps_the_state_as_far_as_its_text_goes():
    state = [1, 5, 6, 7, 8]  # " chat" "chat" " now" <end>: then the question the Branch changes
    prompt = [1, 2, 3, 4, 9, 8]  # " ch" "atch" "at" "\n" <end>: the same reply, then another text
    respelled = respelled_as_read(prompt, state, spell, tokenize)
    assert respelled == [1, 5, 6, 9, 8] and spell(respelled) == spell(prompt)


def test_a_tokenizer_that_would_spell_the_rest_otherwise_is_not_trusted():
    def adds_a_space(text: bytes) -> list[int]:
        return [7, *tokenize(text)]  # a fragment gets a leading " now"

    assert respelled_as_read([1, 2, 3, 4, 7, 8], [1, 5, 6], spell, adds_a_space) is None


def test_the_longest_state_the_prompt_starts_with_wins():
    prompt = [1, 2, 3, 4, 7, 8, 9]
    states = [[1, 5, 6], [1, 5, 6, 7], [1, 2, 2]]
    assert longest_respelled_as_read(prompt, states, spell, tokenize) == [1, 5, 6, 7, 8, 9]
    assert longest_respelled_as_read(prompt, [[1, 2, 2], [1, 2, 3, 4]], spell, tokenize) is None


def test_a_state_the_prompt_already_continues_is_not_spelled_away():
    """The context holds the prompt's start as it is (a follow-up); another chat spells a shorter part of it
    otherwise: respelling with that one would make the context useless."""
    prompt = [1, 5, 6, 7, 8, 9]
    context = [1, 5, 6, 7]  # the prompt's own start: 4 tokens kept as they are
    other = [1, 2, 3, 4]  # " ch" "atch" "at": the same text, 4 tokens of another spelling... kept 4, not more
    assert longest_respelled_as_read(prompt, [context, other], spell, tokenize) is None
    assert longest_respelled_as_read(prompt, [other], spell, tokenize) is not None
