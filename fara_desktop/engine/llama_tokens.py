"""A reply's tokens as llama.cpp gives them: their bytes, their log probabilities, and the grammars that hold
a reply to JSON or to a forced tool call (built once by llama.cpp before they reach its sampler chain)."""

from __future__ import annotations

import ctypes
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from fara_desktop.engine.chat_format import ForcedCall
from fara_desktop.engine.json_grammar import check_with_llama, schema_gbnf
from fara_desktop.engine.own_tokens import Spell, Tokenize, UnspellableTokenError
from fara_desktop.engine.tool_grammar import forced_call_grammar
from fara_desktop.engine.types import TokenLogprob
from fara_desktop.vocabulary.tools import ToolOffer

if TYPE_CHECKING:
    from llama_cpp import Llama
    from llama_cpp.llama_grammar import LlamaGrammar

PIECE_BUFFER = 256


def token_logprob(llm: Llama, vocab: Any, token: int, piece: bytes, top: int) -> TokenLogprob:
    """The sampled token's log probability under the model (its raw distribution, before temperature and the
    other samplers) and the ``top`` likeliest tokens, from the logits llama.cpp computed for this step."""
    import llama_cpp
    import numpy as np

    logits = np.ctypeslib.as_array(llama_cpp.llama_get_logits_ith(llm.ctx, -1), shape=(llm.n_vocab(),))
    shifted = logits.astype(np.float64) - float(logits.max())
    log_probs = shifted - np.log(np.exp(shifted).sum())
    best = np.argpartition(-log_probs, top)[:top] if top else np.array([], dtype=int)
    best = best[np.argsort(-log_probs[best])]
    buffer = ctypes.create_string_buffer(PIECE_BUFFER)
    alternatives = tuple((token_piece(vocab, int(t), buffer), float(log_probs[t])) for t in best)
    return TokenLogprob(piece, float(log_probs[token]), alternatives)


def within(logprobs: tuple[TokenLogprob, ...], length: int) -> tuple[TokenLogprob, ...]:
    """The entries of the tokens whose bytes lie within the reply's first ``length`` bytes (a stop string cut the
    rest, and it is never shown)."""
    kept, used = [], 0
    for entry in logprobs:
        if used >= length:
            break
        kept.append(entry)
        used += len(entry.token)
    return tuple(kept)


def json_grammar(vocab: Any, schema: str | None) -> LlamaGrammar | None:
    """llama.cpp's grammar for JSON output: any JSON object (``""``), or one that follows a JSON schema (within
    the budget of ``engine.json_grammar``, and built once by llama.cpp before it reaches the sampler chain)."""
    text = json_gbnf(vocab, schema)
    if text is None:
        return None
    from llama_cpp.llama_grammar import LlamaGrammar

    return LlamaGrammar.from_string(text, verbose=False)


def json_gbnf(vocab: Any, schema: str | None) -> str | None:
    """The GBNF ``json_grammar`` builds, checked by llama.cpp for ``vocab`` (None: free text)."""
    if schema is None:
        return None
    from llama_cpp.llama_grammar import JSON_GBNF

    text = schema_gbnf(schema) if schema else JSON_GBNF
    check_with_llama(vocab, text)
    return text


def call_grammar(vocab: Any, forced: Sequence[ForcedCall], tools: ToolOffer | None) -> LlamaGrammar:
    """The grammar that keeps a forced reply to a call of one of ``forced``, its arguments per the tool's schema."""
    from llama_cpp.llama_grammar import LlamaGrammar

    text = forced_call_grammar(forced, tools.schemas() if tools else {})
    check_with_llama(vocab, text)
    return LlamaGrammar.from_string(text, verbose=False)


def token_piece(vocab: Any, token: int, buffer: ctypes.Array[ctypes.c_char], special: bool = False) -> bytes:
    """A token's bytes (part of a character, maybe), into ``buffer`` or a bigger one when it does not fit. ``token``
    must be one of ``vocab``'s (llama.cpp aborts the process on another number): one the model sampled, or checked
    first (``spelling``)."""
    import llama_cpp

    n = llama_cpp.llama_token_to_piece(vocab, token, buffer, PIECE_BUFFER, 0, special)
    if n < 0:  # piece longer than the buffer
        big = ctypes.create_string_buffer(-n)
        n = llama_cpp.llama_token_to_piece(vocab, token, big, -n, 0, special)
        return big.raw[:n]
    return buffer.raw[:n]


def spelling(llm: Llama) -> tuple[Spell, Tokenize]:
    """How ``llm`` spells tokens as bytes (control tokens as their text) and tokenizes bytes (control tokens
    parsed, no start-of-text token): what ``own_tokens`` compares and respells with."""
    import llama_cpp

    vocab = llama_cpp.llama_model_get_vocab(llm.model)
    buffer = ctypes.create_string_buffer(PIECE_BUFFER)
    n_vocab = llama_cpp.llama_vocab_n_tokens(vocab)

    def spell(tokens: Sequence[int]) -> bytes:
        # a kept state's numbers are not all tokens (a picture's are negative): refused before llama.cpp sees them
        if any(not 0 <= token < n_vocab for token in tokens):
            raise UnspellableTokenError("a kept state holds a number that is no token of this model")
        return b"".join(token_piece(vocab, token, buffer, True) for token in tokens)

    return spell, lambda text: llm.tokenize(text, add_bos=False, special=True)
