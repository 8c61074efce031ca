"""How long Enter would make the user wait before the first word: the prompt tokens not yet in the KV cache at
the model's prompt-reading speed, measured on this machine's replies (predicted until one has been measured)."""

from __future__ import annotations

import statistics
from collections import deque

from fara_desktop.vocabulary.stats import GenerationStats

SHOWN_ABOVE_S = 3.0  # a shorter wait is not worth a word
MIN_MEASURED_TOKENS = 64  # fewer read tokens time the first token's decode more than the reading
_KEPT = 5


class PromptSpeed:
    """The prompt-reading speed of the loaded model: the median of its last replies that read enough tokens."""

    def __init__(self, predicted: float = 0.0) -> None:
        self.predicted = predicted
        self._measured: deque[float] = deque(maxlen=_KEPT)

    def reset(self, predicted: float) -> None:
        """Another model is loaded."""
        self.predicted = predicted
        self._measured.clear()

    def observe(self, stats: GenerationStats) -> None:
        if stats.prompt_tokens_evaluated >= MIN_MEASURED_TOKENS and stats.prompt_tok_per_s > 0:
            self._measured.append(stats.prompt_tok_per_s)

    @property
    def measured(self) -> bool:
        return bool(self._measured)

    @property
    def tok_per_s(self) -> float:
        return statistics.median(self._measured) if self._measured else self.predicted

    def seconds_for(self, tokens: int) -> float:
        speed = self.tok_per_s
        return tokens / speed if speed > 0 else 0.0


def wait_text(seconds: float) -> str:
    """What the composer says about the wait: nothing below ``SHOWN_ABOVE_S``, else a rounded figure."""
    return "" if seconds < SHOWN_ABOVE_S else f"{wait_words(seconds)} to read"


def wait_words(seconds: float) -> str:
    """A wait rounded as a person says it: ``about 0.4 s``, ``about 7 s``, ``about 25 s``, ``about 3 min``."""
    if seconds < 1:
        return f"about {seconds:.1f} s"
    if seconds < 60:
        return f"about {max(5, round(seconds / 5) * 5) if seconds >= 10 else round(seconds)} s"
    minutes = seconds / 60
    return f"about {minutes:.0f} min" if minutes >= 2 else f"about {seconds:.0f} s"
