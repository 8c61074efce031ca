"""Keep the text of control tokens inside messages from becoming control tokens.

The rendered prompt is tokenized with ``special=True`` so that the template's own markers (``<|im_start|>``,
``<start_of_turn>``…) become the control tokens they stand for. The same text typed by the user, pasted from a web
page or written by the model in an earlier reply would become control tokens too: a message could close its own
turn and open a fake system turn. Before rendering, every control token's text inside a message gets a zero-width
space after its first character, which the tokenizer then reads as ordinary text. What is stored and shown is not
changed; only the prompt's copy is.

(User-defined tokens need no such care: llama.cpp matches them whatever ``special`` says; only control and unknown
tokens depend on it.)
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from llama_cpp import Llama

ZERO_WIDTH_SPACE = "\u200b"


class ControlTokenText:
    """The texts of a vocabulary's control tokens, and ``neutralize`` to break them up inside a message."""

    def __init__(self, texts: Iterable[str]) -> None:
        unique = sorted({t for t in texts if len(t) >= 2}, key=len, reverse=True)  # longest first
        self.count = len(unique)
        # Gemma's vocabulary has 6,250 control tokens: one alternation of all of them costs ~1 s per MB of text.
        # Candidates are found by their first two characters (a handful of prefixes), then checked one by one.
        self._by_prefix: dict[str, list[str]] = {}
        for text in unique:
            self._by_prefix.setdefault(text[:2], []).append(text)
        prefixes = "|".join(map(re.escape, sorted(self._by_prefix)))
        self._candidates = re.compile(f"(?=(?:{prefixes}))") if unique else None

    @classmethod
    def of(cls, llm: Llama) -> ControlTokenText:
        import llama_cpp

        vocab = llama_cpp.llama_model_get_vocab(llm.model)
        wanted = llama_cpp.LLAMA_TOKEN_ATTR_CONTROL | llama_cpp.LLAMA_TOKEN_ATTR_UNKNOWN
        texts = []
        for token in range(llama_cpp.llama_vocab_n_tokens(vocab)):
            if llama_cpp.llama_vocab_get_attr(vocab, token) & wanted:
                texts.append(llama_cpp.llama_vocab_get_text(vocab, token).decode("utf-8", errors="replace"))
        return cls(texts)

    def neutralize(self, text: str) -> str:
        if self._candidates is None:
            return text
        parts: list[str] = []
        done = 0
        for match in self._candidates.finditer(text):
            position = match.start()
            if position < done:
                continue  # inside a token already broken up
            for token in self._by_prefix[text[position : position + 2]]:
                if text.startswith(token, position):
                    parts += [text[done : position + 1], ZERO_WIDTH_SPACE]
                    done = position + 1
                    break
        return "".join(parts) + text[done:] if parts else text
