"""How long Enter would make the user wait before the first word: the prompt tokens not yet in the KV cache at
the model's prompt-reading speed, measured on this machine's replies (predicted until one has been measured)."""

from __future__ import annotations

import statistics
import time
from collections import deque
from collections.abc import Callable

from fara_desktop.vocabulary.stats import MIN_MEASURED_TOKENS, GenerationStats

SHOWN_ABOVE_S = 3.0  # a shorter wait is not worth a word
_KEPT = 5
NOW_KEPT_S = 60.0  # the read-ahead's speed says how busy the machine is for this long
# Enter's full batches over the read-ahead's 128-token ones, on a CPU other programs keep busy, at SmolLM2-1.7B's
# shape: 29.8 vs 20.9 tok/s on the AVX-512 VM of issue 53; on the AMX Xeon of issue 64 a paste typed in under load
# was read at Enter about 1.5x the read-ahead's own speed (docs/performance.md).
FULL_BATCH_GAIN = 1.5


class PromptSpeed:
    """The prompt-reading speed of the loaded model: the speed measured now while it reads ahead, else the median of
    its last replies that read enough tokens (predicted until one has). A machine that got busy since the last
    reply reads slower now: a paste read ahead on it said "about 5 s" for a minute's reading. Speeds are kept as
    at the context's start: a token further in costs more (``span``: where it costs twice as much; ``tuning``)."""

    def __init__(self, predicted: float = 0.0, span: float = 0.0, clock: Callable[[], float] = time.monotonic) -> None:
        self.predicted = predicted
        self.span = span
        self._measured: deque[float] = deque(maxlen=_KEPT)
        self._clock = clock
        # The read-ahead's own speed, and when it was measured. Gone after a reply that measured one, and after
        # ``NOW_KEPT_S``: a reply that reads only Enter's token measures nothing, and a speed of a busy moment
        # minutes ago said later pastes would take 2–6 minutes for waits of 21–38 s.
        self._read_ahead_tok_per_s, self._read_ahead_at = 0.0, 0.0

    def reset(self, predicted: float, span: float = 0.0) -> None:
        """Another model is loaded."""
        self.predicted = predicted
        self.span = span
        self._measured.clear()
        self._read_ahead_tok_per_s = 0.0

    def observe(self, stats: GenerationStats) -> None:
        read = stats.prompt_tokens_evaluated
        if read >= MIN_MEASURED_TOKENS and stats.prompt_tok_per_s > 0:
            self._measured.append(self._at_start(stats.prompt_tok_per_s, stats.prompt_tokens - read, read))
            self._read_ahead_tok_per_s = 0.0  # the reply's reading is newer

    def observe_read_ahead(self, tok_per_s: float, start: int = 0, read: int = 0) -> None:
        """A read-ahead's speed so far, over ``read`` tokens from position ``start`` (0: not enough read yet)."""
        if tok_per_s > 0:
            self._read_ahead_tok_per_s, self._read_ahead_at = self._at_start(tok_per_s, start, read), self._clock()

    def _at_start(self, tok_per_s: float, start: int, read: int) -> float:
        return tok_per_s * self._cost(start, start + read) / max(read, 1) if read and self.span else tok_per_s

    def _cost(self, start: int, end: int) -> float:
        """Reading positions ``start``..``end``, in tokens at the context's start."""
        return (end - start) + (end * end - start * start) / (2 * self.span) if self.span else float(end - start)

    @property
    def measured(self) -> bool:
        return bool(self._measured) or self._fresh_read_ahead_tok_per_s > 0

    @property
    def _fresh_read_ahead_tok_per_s(self) -> float:
        return (
            self._read_ahead_tok_per_s
            if self._read_ahead_tok_per_s > 0 and self._clock() - self._read_ahead_at <= NOW_KEPT_S
            else 0.0
        )

    @property
    def tok_per_s(self) -> float:
        """At the context's start: the last replies' speed, and while a read-ahead reads, the speed Enter would read
        at now. The read-ahead's speed says how busy the machine is, but it reads in batches of 128 tokens, which a
        busy CPU slows more than Enter's full ones (``FULL_BATCH_GAIN``); a quiet one reads both alike, at about the
        replies' speed, which then bounds it."""
        replies = statistics.median(self._measured) if self._measured else 0.0
        now = self._fresh_read_ahead_tok_per_s
        if now > 0:
            return now if now >= replies else min(replies, now * FULL_BATCH_GAIN)
        return replies or self.predicted

    def seconds_for(self, tokens: int, start: int = 0) -> float:
        """Reading ``tokens`` from position ``start`` on."""
        speed = self.tok_per_s
        return self._cost(start, start + tokens) / speed if speed > 0 else 0.0


class ReadAheadWait:
    """The wait Enter would cause now, followed through the reports of the read-aheads: each measures its speed
    from where its own reading began."""

    def __init__(self, speed: PromptSpeed) -> None:
        self.speed = speed
        self._read_from: tuple[int, int] | None = None  # the read-ahead measured, and where its reading began

    def seconds(self, ahead_id: int, tokens: int, cached: int, tok_per_s: float) -> float:
        """A report of read-ahead ``ahead_id``: ``cached`` of ``tokens`` read, at ``tok_per_s`` (0: not measured)."""
        if self._read_from is None or self._read_from[0] != ahead_id:
            self._read_from = (ahead_id, cached)  # its first report: where its reading begins
        start = self._read_from[1]
        self.speed.observe_read_ahead(tok_per_s, start, cached - start)
        return self.speed.seconds_for(tokens - cached, cached)


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
