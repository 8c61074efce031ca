"""The tokens a model wrote are the tokens it reads back. A reply is stored as text; the next prompt renders it and
tokenizes it again, and where the model wrote a word in pieces the tokenizer would not choose (" ch" "atch" for
" chatch") or a table's bars split otherwise, the new tokens leave the state that holds the reply. A dense model
reads again from there; a recurrent or hybrid one, whose state cannot be cut back, from the prompt before the
reply (a restart re-read 408 tokens of a 3,000-token chat: its last reply). So where the text a saved state spells
is the start of the prompt's text, the prompt is spelled with the state's own tokens, and only the rest is
tokenized: the text the model reads is the same, and nothing of the state is read again."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from fara_desktop.engine.kv_states import common_prefix

Spell = Callable[[Sequence[int]], bytes]  # tokens → the bytes they stand for, control tokens as their text


class UnspellableTokenError(ValueError):
    """A kept state's token that is no token of the vocabulary: a picture's pseudo token (negative), or a state of
    another model. llama.cpp aborts the process on one (``std::out_of_range``), so ``Spell`` refuses it first."""


Tokenize = Callable[[bytes], list[int]]  # bytes → tokens, control tokens parsed, no start-of-text token added


def respelled_as_read(
    tokens: Sequence[int], state: Sequence[int], spell: Spell, tokenize: Tokenize
) -> list[int] | None:
    """``tokens`` spelled with ``state``'s tokens as far as they spell the start of its text (all of them after a
    reply; up to the question a Branch or an Edit changes), the rest tokenized; None when that reuses no more
    than the tokens already shared, or the rest would not spell the same text (a tokenizer that adds a space
    before a fragment)."""
    shared = common_prefix(tokens, state)
    if shared >= len(state) or shared >= len(tokens):
        return None  # a prefix already (or the prompt ends inside the state: a Regenerate cuts back)
    ours = spell(tokens[shared:])
    end, spelled = shared, 0  # the state's tokens that spell the start of ``ours``, and their bytes
    while end < len(state):
        try:
            piece = spell(state[end : end + 1])
        except UnspellableTokenError:  # a picture's span: the state's text ends here
            break
        if not ours.startswith(piece, spelled) or spelled + len(piece) >= len(ours):
            break
        end, spelled = end + 1, spelled + len(piece)
    if end == shared:
        return None
    respelled = [*state[:end], *tokenize(ours[spelled:])]
    return respelled if spell(respelled[shared:]) == ours else None


def longest_respelled_as_read(
    tokens: Sequence[int], states: Sequence[Sequence[int]], spell: Spell, tokenize: Tokenize
) -> list[int] | None:
    """The respelling that keeps the most of a state's tokens; None when none keeps more than the prompt as it is
    already shares with one of them (the context a follow-up continues must not lose to another chat's spelling)."""
    best: tuple[int, list[int] | None] = (max((common_prefix(tokens, s) for s in states), default=0), None)
    for state in states:
        respelled = respelled_as_read(tokens, state, spell, tokenize)
        if respelled is not None:
            kept = common_prefix(respelled, state)
            if kept > best[0]:
                best = (kept, respelled)
    return best[1]
