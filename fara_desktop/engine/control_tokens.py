"""Keep the text of control tokens inside messages from becoming control tokens.

The rendered prompt is tokenized with ``special=True`` so that the template's own markers (``<|im_start|>``,
``<start_of_turn>``…) become the control tokens they stand for. The same text typed by the user, pasted from a web
page or written by the model in an earlier reply would become control tokens too: a message could close its own
turn and open a fake system turn. Before rendering, every control token's text inside a message gets a zero-width
space after its first character, which the tokenizer then reads as ordinary text. What is stored and shown is not
changed; only the prompt's copy is.

User-defined tokens are matched by llama.cpp whatever ``special`` says. Most are markup and whitespace (Gemma's
``<table>``, ``<td>``, runs of spaces) and stay as they are: text spells them so too. Those that are markers —
Gemma 3's ``<start_of_image>``, ``[multimodal]``: not a tag of markup, not whitespace — are broken up as control
tokens are: typed before a picture chat's state, ``<start_of_image>`` made the next prompt continue into the
state's picture span.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from llama_cpp import Llama

ZERO_WIDTH_SPACE = "\u200b"
MARKUP_TAG = re.compile(r"</?[A-Za-z][A-Za-z0-9]*>")


def is_marker(text: str) -> bool:
    """A user-defined token that marks something for the model (``<start_of_image>``), not markup or spacing."""
    return len(text) >= 2 and text.strip() == text and not text.isspace() and not MARKUP_TAG.fullmatch(text)


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
            attributes = llama_cpp.llama_vocab_get_attr(vocab, token)
            if attributes & (wanted | llama_cpp.LLAMA_TOKEN_ATTR_USER_DEFINED):
                text = llama_cpp.llama_vocab_get_text(vocab, token).decode("utf-8", errors="replace")
                if attributes & wanted or is_marker(text):
                    texts.append(text)
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
