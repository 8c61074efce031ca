"""Proposals from the text itself (issue 65's first method, as llama.cpp's prompt lookup): where the last few tokens
of a sequence appeared before — in its prompt or its reply so far — the tokens that followed them there are
proposed as its next ones. Free (no second model) and strong where a CPU user waits longest: an answer quoting a
document's passage, an edit of pasted text or code, JSON re-formatted.

``NgramDrafter`` tunes itself, measured in use, not assumed: each proposed token is decoded, so it costs what a
token costs in a decode here (little on a machine bound by reading the weights, nearly a whole decode on one bound
by computing); it proposes as many as the sequence's measured acceptance pays for, and none where none pays; and
once its steps with proposals have been timed against plain ones, a sequence they made slower stops proposing."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

LONGEST_MATCH = 4  # the longest tail looked up; the longest that matches wins
SHORTEST_MATCH = 2
MAX_PROPOSED = 12
PROBE = 2  # proposed while the cost of a token in a decode is not known yet
MIN_GAIN = 0.05  # a count pays when it is expected to write this much faster than plain decoding
JUDGED_AFTER = 8  # steps with proposals timed before a sequence's proposals are judged against plain steps


def propose(history: Sequence[int], count: int) -> list[int]:
    """Up to ``count`` tokens that followed the latest earlier occurrence of ``history``'s longest tail (of
    ``LONGEST_MATCH`` down to ``SHORTEST_MATCH`` tokens); none when the tail never occurred before."""
    size = len(history)
    if count <= 0 or size < SHORTEST_MATCH + 1:
        return []
    last = history[-1]
    ends = [i for i in range(size - 2, -1, -1) if history[i] == last]  # where the tail's last token occurred
    for n in range(min(LONGEST_MATCH, size - 1), SHORTEST_MATCH - 1, -1):
        tail = list(history[size - n :])
        for end in ends:  # the latest occurrence first: the nearest context
            start = end - n + 1
            if start >= 0 and list(history[start : end + 1]) == tail:
                return list(history[end + 1 : end + 1 + count])
    return []


class DecodeCost:
    """A step's seconds here — the decode, the sampling of each token and the step's own work — fitted as
    ``fixed + per_token × tokens`` over the steps that only wrote (no prompt read in them), older ones forgotten
    gradually (the machine's load drifts)."""

    FORGET = 0.97

    def __init__(self) -> None:
        self._n = self._x = self._y = self._xx = self._xy = 0.0
        self.plain_seconds_per_token = 0.0  # of the steps without proposals (an average that forgets the oldest)

    def plain_step(self, seconds_per_token: float) -> None:
        previous = self.plain_seconds_per_token
        self.plain_seconds_per_token = seconds_per_token if previous == 0 else 0.9 * previous + 0.1 * seconds_per_token

    def observe(self, tokens: int, seconds: float) -> None:
        f = self.FORGET
        self._n, self._x, self._y = f * self._n + 1, f * self._x + tokens, f * self._y + seconds
        self._xx, self._xy = f * self._xx + tokens * tokens, f * self._xy + tokens * seconds

    def fitted(self) -> tuple[float, float] | None:
        """(fixed, per token) seconds; None until decodes of two different sizes were seen."""
        spread = self._n * self._xx - self._x * self._x
        if self._n < 2 or spread <= 1e-9 * max(1.0, self._n * self._xx):
            return None
        per_token = (self._n * self._xy - self._x * self._y) / spread
        fixed = (self._y - per_token * self._x) / self._n
        return max(fixed, 0.0), max(per_token, 1e-6)


@dataclass
class NgramDrafter:
    """One sequence's proposals: as many as pay for themselves here — the chance that each next proposed token is
    accepted (measured on this sequence) against what each costs in a decode (measured on this machine,
    ``DecodeCost``). None when none pays: the sequence then writes as plain decoding does."""

    successes: float = 4.0  # accepted proposed tokens (a hopeful prior of four in five: a sequence must try to learn)
    tries: float = 5.0  # proposed tokens that were judged (those after a rejection never were)
    proposed: int = 0
    accepted: int = 0
    timed_steps: int = 0  # steps with proposals timed, and their seconds per token written (averaged)
    seconds_per_token: float = 0.0
    off: bool = False  # measured slower than plain decoding: no more proposals for this sequence

    @property
    def acceptance(self) -> float:
        return self.successes / self.tries

    def count(self, cost: DecodeCost, others: int, room: int, writers: int = 1) -> int:
        """How many tokens to propose beside ``others`` tokens in the decode (this sequence's own next one
        included), of ``writers`` sequences writing a token each: the count with the most tokens written per second
        by all of them expected — a proposal slows every sequence's step, not only its own (four clients wrote 11 %
        slower when each sequence weighed only its own gain); 0 when proposing does not pay."""
        if self.off or (
            self.timed_steps >= JUDGED_AFTER
            and cost.plain_seconds_per_token > 0
            and self.seconds_per_token > cost.plain_seconds_per_token * (1 - MIN_GAIN / 2)
        ):
            self.off = True  # measured in use: its steps wrote slower than plain ones
            return 0
        fitted = cost.fitted()
        if fitted is None:
            return min(PROBE, room)  # a decode of another size: the cost of one more token is measured
        fixed, per_token = fitted
        q = min(self.acceptance, 0.98)
        making = self.proposal_seconds()
        best, best_rate = 0, writers / (fixed + per_token * others)
        for k in range(1, min(MAX_PROPOSED, room) + 1):
            expected = 1 + q * (1 - q**k) / (1 - q)  # the next token, and the run of proposals accepted before it
            rate = (writers - 1 + expected) / (fixed + per_token * (others + k) + making * k)
            if rate > best_rate * (1 + MIN_GAIN):
                best, best_rate = k, rate
        return best

    def draft(self, history: Sequence[int], cost: DecodeCost, others: int, room: int, writers: int = 1) -> list[int]:
        count = self.count(cost, others, room, writers)
        return propose(history, count) if count > 0 else []

    def proposal_seconds(self) -> float:
        """What making one proposal costs besides its place in the decode (nothing: a look-up in the text)."""
        return 0.0

    def release(self) -> None:
        """The sequence ended (a drafter with cells of its own frees them)."""

    def decoded(self, start: int, count: int) -> None:
        """The model just decoded a step of ``count`` tokens (the next and the proposals) at positions from
        ``start`` (a drafter that reads the model's hidden states takes them now: the next decode overwrites
        them)."""

    def timed(self, seconds_per_token: float) -> None:
        """A step with this sequence's proposals took ``seconds_per_token`` for each token written."""
        self.timed_steps += 1
        previous = self.seconds_per_token
        self.seconds_per_token = seconds_per_token if previous == 0 else 0.8 * previous + 0.2 * seconds_per_token

    def judge(self, proposed: int, accepted: int) -> None:
        """``accepted`` of the ``proposed`` tokens matched what the model wrote (in order: the first rejection ends
        the run, and the tokens after it were never judged)."""
        if proposed == 0:
            return
        self.proposed += proposed
        self.accepted += accepted
        self.successes += accepted
        self.tries += accepted + (1 if accepted < proposed else 0)
