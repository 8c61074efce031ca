"""Proposals from the model's own MTP head (issue 65's third method), for a model whose file carries one (Qwen3.5's
NextN block): the window's replies to the speculative section's six tasks, written plainly (the head reading
nothing), with the head's proposals (tuned as in use: once they do not pay, it stops proposing and reading), and
with the head paying its full cost while the reply's own next tokens stand in for what it proposes (the ceiling:
what a head that always agrees gives here, its own decodes counted; the reply it agrees with is the one written
with proposals, which on a quantized hybrid may part from plain decoding's at a near-tie). Interleaved round by
round, medians; where a reply with proposals parts from plain decoding's (a decode of several tokens rounds
otherwise than one), how many tokens they shared is said. On random weights (the real-size shapes) the head never
agrees, so the second figure is what an untrained head costs before the tuning turns it off."""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from functools import partial
from typing import Any

from fara_desktop.bench.window_replies import in_the_window
from fara_desktop.engine.llama_state import is_rewindable
from fara_desktop.engine.mtp_head import MtpDrafter, MtpHead, shared_prefix
from fara_desktop.engine.ngram_draft import DecodeCost
from fara_desktop.engine.window_speculation import SpeculativeWriting, WindowSpeculation
from fara_desktop.vocabulary.sampling import SamplingParams

CEILING_COUNT = 4  # proposals a step for the ceiling (as the text proposals' ceiling)


class AgreeingHead(MtpDrafter):
    """The head proposes (and its decodes are paid), but the reply's known next tokens are what it says: a head
    that always agrees, at the head's real cost here."""

    def __init__(self, head: MtpHead, reply: list[int], prompt_length: int) -> None:
        super().__init__(head)
        self.reply, self.prompt_length = reply, prompt_length

    def count(self, cost: DecodeCost, others: int, room: int, writers: int = 1) -> int:
        return min(CEILING_COUNT, room)

    def draft(self, history: Sequence[int], cost: DecodeCost, others: int, room: int, writers: int = 1) -> list[int]:
        paid = super().draft(history, cost, others, room, writers)
        written = len(history) - self.prompt_length
        return self.reply[written : written + len(paid)]


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
    proposed = accepted = agreed = 0
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
            # the reply a step of several tokens writes may part from plain decoding's at a near-tie (a quantized
            # hybrid rounds ~0.08 logits apart): the head "agrees" with the reply proposals write, found in a run
            # or two (each run's reply is the next one's script, until every proposal is accepted)
            script = plain
            for _attempt in range(3):
                agreeing = partial(AgreeingHead, head, script, len(prompt))
                writer = SpeculativeWriting(llm, sampling, agreeing, DecodeCost(), window.snapshots)
                best, best_speed, _ = _timed(llm, prompt, sampling, writer)
                if best == script:
                    break
                script = best
            agreed += best == script
            for kind, speed in (("mtp", fast_speed), ("ceiling", best_speed)):
                ratios[kind].setdefault(name, []).append(speed / plain_speed if plain_speed else 0.0)
    every = {kind: [x for r in by_task.values() for x in r] for kind, by_task in ratios.items()}
    out: dict[str, Any] = {
        f"speculative_mtp_ratio_{name}": round(statistics.median(r), 3) for name, r in ratios["mtp"].items()
    }
    out["speculative_mtp_worst_ratio"] = round(min(statistics.median(r) for r in ratios["mtp"].values()), 3)
    out["speculative_mtp_ceiling_ratio"] = round(statistics.median(every["ceiling"]), 3)
    out["speculative_mtp_ceiling_agreed"] = f"{agreed}/{len(every['ceiling'])}"  # runs with every proposal accepted
    out["speculative_mtp_accepted_of_proposed"] = f"{accepted}/{proposed}"
    # what one proposal costs on the head, in tokens of plain decoding (its chained decode: a layer and the head)
    median_plain = statistics.median(plain_seconds)
    out["speculative_mtp_proposal_cost"] = round(head.seconds_per_token / median_plain, 3) if median_plain else 0.0
    out["speculative_mtp_same_replies"] = shared == (sampling.max_tokens or 0)
    out["speculative_mtp_shared_tokens_worst"] = shared
    return out
