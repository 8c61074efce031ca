"""A reply that has begun repeating itself, noticed as it streams, so it can be stopped.

Small models loop: the same paragraph again and again until the context is full (a Regenerate with SmolLM2 ran
1,653 tokens of repeated paragraphs, 30 s on this CPU). What is looked for is a block of at least ``MIN_BLOCK``
characters that ends the reply ``REPEATS`` times in a row, exactly: normal prose, lists and code do not do that (a
list's items differ, a code line is shorter), a loop does at once. The check costs a few ``rfind`` calls on the
last few thousand characters, run every ``CHECK_EVERY`` characters of new text.
"""

from __future__ import annotations

import re

MIN_BLOCK = 40  # characters: shorter repeats are a list's rhythm, not a loop
MAX_BLOCK = 1500  # a repeated block longer than this would cost 4,500+ characters before it is noticed
REPEATS = 3
CHECK_EVERY = 32
MAX_CANDIDATES = 64  # earlier places the reply's end occurred, tried as the start of a period


class LoopDetector:
    """Fed the reply's text as it arrives; ``looping`` turns true once its end is a block repeated ``REPEATS``
    times (and stays so)."""

    def __init__(self) -> None:
        self._tail = ""
        self._since_check = 0
        self.looping = False
        self.period = 0  # the repeated block's length, once looping

    def feed(self, text: str) -> bool:
        if self.looping or not text:
            return self.looping
        self._tail = (self._tail + text)[-(MAX_BLOCK * REPEATS + MIN_BLOCK) :]
        self._since_check += len(text)
        if self._since_check >= CHECK_EVERY:
            self._since_check = 0
            self.period = repeated_period(self._tail)
            self.looping = self.period > 0
        return self.looping


def repeated_period(text: str) -> int:
    """The length of a block (``MIN_BLOCK`` to ``MAX_BLOCK`` characters) that ends ``text`` ``REPEATS`` times in
    a row; 0 when there is none."""
    if len(text) < MIN_BLOCK * REPEATS:
        return 0
    probe = text[-MIN_BLOCK:]
    end = len(text) - MIN_BLOCK  # earlier occurrences of the last MIN_BLOCK characters, nearest first
    for _ in range(MAX_CANDIDATES):
        found = text.rfind(probe, 0, end + MIN_BLOCK - 1)
        if found < 0:
            return 0
        period = len(text) - MIN_BLOCK - found
        if period > MAX_BLOCK or period * REPEATS > len(text):
            return 0
        if period >= MIN_BLOCK:
            block = text[-period:]
            if all(text[-period * (n + 1) : -period * n] == block for n in range(1, REPEATS)):
                return period
        end = found
    return 0


# A message that asks for repetition ("say this word four times", "repeat it 20 times", "over and over"): what it
# asks for is not a loop.
ASKED_REPETITION = re.compile(
    r"\b(repeat\w*|over and over|again and again|(\d+|two|three|four|five|six|seven|eight|nine|ten|twelve|twenty|"
    r"thirty|forty|fifty|hundred|thousand)\s+times)\b",
    re.IGNORECASE,
)


def asks_for_repetition(message: str) -> bool:
    """Whether the user's message asks the reply to repeat something (the loop stop is then left off)."""
    return ASKED_REPETITION.search(message[-4000:]) is not None
