"""How long Enter would make the user wait before the first word: the prompt tokens not yet in the KV cache at
the model's prompt-reading speed, measured on this machine's replies (predicted until one has been measured)."""

from __future__ import annotations

import math
import statistics
from collections import deque

from fara_desktop.vocabulary.stats import MIN_MEASURED_TOKENS, GenerationStats

SHOWN_ABOVE_S = 3.0  # a shorter wait is not worth a word
_KEPT = 5


class PromptSpeed:
    """The prompt-reading speed of the loaded model: the speed measured now while it reads ahead, else the median of
    its last replies that read enough tokens (predicted until one has). A machine that got busy since the last
    reply reads slower now: a paste read ahead on it said "about 5 s" for a minute's reading. Speeds are kept as
    at the context's start: a token further in costs more (``span``: where it costs twice as much; ``tuning``)."""

    def __init__(self, predicted: float = 0.0, span: float = 0.0) -> None:
        self.predicted = predicted
        self.span = span
        self._measured: deque[float] = deque(maxlen=_KEPT)
        self._now = 0.0  # the read-ahead's own speed; 0 when no read-ahead has measured one since the last reply

    def reset(self, predicted: float, span: float = 0.0) -> None:
        """Another model is loaded."""
        self.predicted = predicted
        self.span = span
        self._measured.clear()
        self._now = 0.0

    def observe(self, stats: GenerationStats) -> None:
        read = stats.prompt_tokens_evaluated
        if read >= MIN_MEASURED_TOKENS and stats.prompt_tok_per_s > 0:
            self._measured.append(self._at_start(stats.prompt_tok_per_s, stats.prompt_tokens - read, read))
            self._now = 0.0  # the reply's reading is newer

    def observe_now(self, tok_per_s: float, start: int = 0, read: int = 0) -> None:
        """A read-ahead's speed so far, over ``read`` tokens from position ``start`` (0: not enough read yet)."""
        if tok_per_s > 0:
            self._now = self._at_start(tok_per_s, start, read)

    def _at_start(self, tok_per_s: float, start: int, read: int) -> float:
        return tok_per_s * self._cost(start, start + read) / max(read, 1) if read and self.span else tok_per_s

    def _cost(self, start: int, end: int) -> float:
        """Reading positions ``start``..``end``, in tokens at the context's start."""
        return (end - start) + (end * end - start * start) / (2 * self.span) if self.span else float(end - start)

    @property
    def measured(self) -> bool:
        return bool(self._measured) or self._now > 0

    @property
    def tok_per_s(self) -> float:
        """At the context's start: the last replies' speed, and while a read-ahead reads, between that and the
        read-ahead's own. The read-ahead's speed says how busy the machine is now, but it reads in small batches,
        which a busy CPU slows far more than the reply's full ones (at 1.7B with two other programs spinning, the
        wait said at the read-ahead's speed was 1.8× the first word's, at the last reply's 0.34×)."""
        replies = statistics.median(self._measured) if self._measured else 0.0
        if self._now > 0:
            return math.sqrt(self._now * replies) if replies else self._now
        return replies or self.predicted

    def seconds_for(self, tokens: int, start: int = 0) -> float:
        """Reading ``tokens`` from position ``start`` on."""
        speed = self.tok_per_s
        return self._cost(start, start + tokens) / speed if speed > 0 else 0.0


def wait_text(seconds: float) -> str:
    """What the composer says about the wait: nothing below ``SHOWN_ABOVE_S``, else a rounded figure."""
    return "" if seconds < SHOWN_ABOVE_S else f"{wait_words(seconds)} to read"


def wait_words(seconds: float) -> str:
    """A wait rounded as a person says it: ``about 0.4 s``, ``about 7 s``, ``about 25 s``, ``about 3 min``."""
    if seconds < 0.1:
        return "under a tenth of a second"  # "about 0.0 s" read as a broken figure
    if seconds < 1:
        return f"about {seconds:.1f} s"
    if seconds < 60:
        return f"about {max(5, round(seconds / 5) * 5) if seconds >= 10 else round(seconds)} s"
    minutes = seconds / 60
    return f"about {minutes:.0f} min" if minutes >= 2 else f"about {seconds:.0f} s"
