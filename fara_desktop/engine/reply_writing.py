"""A reply as llama.cpp's tokens arrive: each token's bytes through the stop strings to the reply's text, its log
probability when asked, the loop check, the token budget, and why the reply ends. The backend samples and reads;
this says what each sampled token writes."""

from __future__ import annotations

import ctypes
from collections.abc import Callable, Sequence
from typing import Any, Literal

from fara_desktop.engine.backend import TextSink
from fara_desktop.engine.chat_format import ForcedCall
from fara_desktop.engine.llama_tokens import PIECE_BUFFER, token_piece, within
from fara_desktop.engine.repetition import LoopDetector
from fara_desktop.engine.text_stream import TextStream
from fara_desktop.engine.types import TokenLogprob
from fara_desktop.vocabulary.sampling import SamplingParams

Finish = Literal["stop", "length", "context", "cancelled", "repetition"]
LogprobOf = Callable[[int, bytes], TokenLogprob]


class ReplyWriting:
    """The text a reply has written so far; ``take`` each sampled token, ``end`` once no token comes."""

    def __init__(
        self,
        vocab: Any,
        sampling: SamplingParams,
        stop: Sequence[str],
        on_text: TextSink,
        special: bool,
        loops_checked: bool,
        logprob_of: LogprobOf | None,
    ) -> None:
        import llama_cpp

        self.vocab, self.sampling, self.on_text, self.special = vocab, sampling, on_text, special
        self._is_end = llama_cpp.llama_vocab_is_eog  # looked up once, not at every token
        self.stream = TextStream((*stop, *sampling.stop))
        self.loops = LoopDetector() if loops_checked and sampling.stop_loops else None
        self.logprob_of = logprob_of
        self.tokens = 0
        self.logprobs: list[TokenLogprob] = []
        self._buffer = ctypes.create_string_buffer(PIECE_BUFFER)

    def take(self, token: int, max_tokens: int) -> Finish | None:
        """``token`` written; why the reply ends with it, or None to go on."""
        if not self.sampling.ignore_eos and self._is_end(self.vocab, token):
            return "stop"
        self.tokens += 1
        piece = token_piece(self.vocab, token, self._buffer, self.special)
        if self.logprob_of is not None:
            self.logprobs.append(self.logprob_of(token, piece))
        text = self.stream.feed(piece)
        if text:
            self.on_text(text)
        if self.stream.stopped:
            return "stop"
        if self.loops is not None and self.loops.feed(text):
            return "repetition"  # every further token would be the same paragraph again
        return "length" if self.tokens >= max_tokens else None

    def end(self, forced: Sequence[ForcedCall]) -> None:
        """The reply ended (not cancelled): what the stop strings held back, and a forced call's closing."""
        tail = self.stream.flush()
        if tail:
            self.on_text(tail)
        closing = next((c.closing for c in forced if self.stream.text.startswith(c.opening)), "")
        if closing:
            self.on_text(closing)

    @property
    def text(self) -> str:
        return self.stream.text

    def shown_logprobs(self) -> tuple[TokenLogprob, ...]:
        """The log probabilities of the tokens whose bytes the reply shows (a stop string cut the rest)."""
        return within(tuple(self.logprobs), len(self.stream.text.encode("utf-8")))
