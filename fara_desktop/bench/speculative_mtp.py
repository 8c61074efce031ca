"""Proposals from the model's own MTP head (issue 65's third method), for a model whose file carries one (Qwen3.5's
NextN block): the window's replies to the speculative section's six tasks, written plainly (the head reading
nothing) and with the head's proposals (tuned as in use: once they do not pay, it stops proposing and reading),
interleaved round by round, medians; where a reply with proposals parts from plain decoding's (a decode of several
tokens rounds otherwise than one), how many tokens they shared is said.

The ceiling — what a head that always agrees gives here — is timed, not waited for: the head proposes four tokens
every step and each step's seconds (the head's four decodes, the model's decode of five tokens, the sampling) are
summed, and five tokens a step counted as written. A script of the reply cannot stand in for a head that agrees:
on a quantized hybrid a decode of several tokens rounds ~0.08 logits away from one, so a random-weight model's
replies part at its many near-ties, and three runs seldom found one that every proposal matched. On random
weights (the real-size shapes) the head never agrees, so its own figure is what an untrained head costs before
the tuning turns it off."""

from __future__ import annotations

import statistics
from functools import partial
from typing import Any

from fara_desktop.bench.window_replies import in_the_window
from fara_desktop.engine.llama_state import is_rewindable
from fara_desktop.engine.mtp_head import MtpDrafter, MtpHead, shared_prefix
from fara_desktop.engine.ngram_draft import DecodeCost
from fara_desktop.engine.window_speculation import SpeculativeWriting, WindowSpeculation
from fara_desktop.vocabulary.sampling import SamplingParams

CEILING_COUNT = 4  # proposals a step for the ceiling (as the text proposals' ceiling)


class FullHead(MtpDrafter):
    """The head proposing ``CEILING_COUNT`` tokens every step, whatever they are worth: steps that cost what a
    head that always agreed would cost (its decodes, and the model's decode of five tokens)."""

    def count(self, cost: DecodeCost, others: int, room: int, writers: int = 1) -> int:
        return min(CEILING_COUNT, room)


class StepClock(DecodeCost):
    """A step's tokens and seconds, summed (``SpeculativeWriting`` times each step: the head's proposals, the
    model's decode and the sampling, not the reader's time)."""

    def __init__(self) -> None:
        super().__init__()
        self.tokens = 0
        self.seconds = 0.0

    def observe(self, tokens: int, seconds: float) -> None:
        super().observe(tokens, seconds)
        self.tokens, self.seconds = self.tokens + tokens, self.seconds + seconds


def _timed(llm: Any, prompt: list[int], sampling: SamplingParams, writer: SpeculativeWriting | None) -> Any:
    if not is_rewindable(llm):  # a recurrent state cannot be cut back to a prefix: every reply reads its prompt
        llm.reset()
    return in_the_window(llm, prompt, sampling, writer)


def mtp_rounds(
    llm: Any, head: MtpHead, prompts: dict[str, list[int]], sampling: SamplingParams, rounds: int
) -> dict[str, Any]:
    """The section's MTP figures over ``prompts`` (see the module)."""
    window = WindowSpeculation.of(llm, True, is_rewindable(llm), mtp=head)
    ratios: dict[str, dict[str, list[float]]] = {"mtp": {}, "ceiling": {}}
    proposed = accepted = 0
    shared = sampling.max_tokens or 0  # the tokens every reply with proposals shared with plain decoding's
    plain_seconds: list[float] = []
    for _ in range(rounds):
        for name, prompt in prompts.items():
            head.follow(False)  # plain decoding as without a head: it reads nothing
            plain, plain_speed, _ = _timed(llm, prompt, sampling, None)
            plain_seconds.append(1 / plain_speed if plain_speed else 0.0)
            fast, fast_speed, (n, m) = _timed(llm, prompt, sampling, window.writing(llm, sampling))
            proposed, accepted = proposed + n, accepted + m
            shared = min(shared, shared_prefix(plain, fast))
            head.follow(True)
            clock = StepClock()  # steps of five tokens, all of them counted as written: a head always right
            _timed(
                llm,
                prompt,
                sampling,
                SpeculativeWriting(llm, sampling, partial(FullHead, head), clock, window.snapshots),
            )
            full_speed = clock.tokens / clock.seconds if clock.seconds else 0.0
            ratios["ceiling"].setdefault(name, []).append(full_speed / plain_speed if plain_speed else 0.0)
            ratios["mtp"].setdefault(name, []).append(fast_speed / plain_speed if plain_speed else 0.0)
    every = {kind: [x for r in by_task.values() for x in r] for kind, by_task in ratios.items()}
    out: dict[str, Any] = {
        f"speculative_mtp_ratio_{name}": round(statistics.median(r), 3) for name, r in ratios["mtp"].items()
    }
    out["speculative_mtp_worst_ratio"] = round(min(statistics.median(r) for r in ratios["mtp"].values()), 3)
    out["speculative_mtp_ceiling_ratio"] = round(statistics.median(every["ceiling"]), 3)
    out["speculative_mtp_ceiling_rounds"] = {name: [round(x, 3) for x in r] for name, r in ratios["ceiling"].items()}
    out["speculative_mtp_accepted_of_proposed"] = f"{accepted}/{proposed}"
    # what one proposal costs on the head, in tokens of plain decoding (its chained decode: a layer and the head)
    median_plain = statistics.median(plain_seconds)
    out["speculative_mtp_proposal_cost"] = round(head.seconds_per_token / median_plain, 3) if median_plain else 0.0
    out["speculative_mtp_same_replies"] = shared == (sampling.max_tokens or 0)
    out["speculative_mtp_shared_tokens_worst"] = shared
    return out
