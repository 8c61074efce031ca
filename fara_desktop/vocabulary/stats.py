"""What was measured of one reply."""

from __future__ import annotations

import time
from dataclasses import dataclass

# a prompt-reading speed measured over fewer tokens times the first token's decode (or a batch's start) more than
# the reading
MIN_MEASURED_TOKENS = 64
MIN_MEASURED_S = 1.0  # or fewer, read for this long (a loaded machine reads 64 tokens of a large model in 6 s)


@dataclass(frozen=True)
class GenerationStats:
    """Measured figures of one reply."""

    prompt_tokens: int
    prompt_tokens_evaluated: int  # prompt tokens not served from the reused KV cache
    completion_tokens: int
    ttft_s: float
    prompt_tok_per_s: float
    gen_tok_per_s: float
    context_used: int
    n_ctx: int
    total_s: float
    reasoning_tokens: int = 0  # of completion_tokens, those spent reasoning before the answer
    thinking_s: float = 0.0  # from the first reasoning token to the answer's first
    # why a finished reply ended early ("length", "context", "repetition"; "" when it ended by itself): kept with
    # the reply so that it says so under it, after a reopen too
    ended_early: str = ""
    # speculative decoding: tokens proposed from the reply's own text and checked in the same pass, and of those
    # the ones the model wrote too (each accepted one a token the memory bus did not have to pay for)
    draft_proposed: int = 0
    draft_accepted: int = 0


def reply_stats(
    prompt: int, read: int, written: int, times: tuple[float, float | None], cells: int, n_ctx: int
) -> GenerationStats:
    """A reply's figures: ``prompt`` tokens of which ``read`` were read, ``written`` tokens; ``times``: when the
    reply started and when its first token came (None: none came); ``cells``: the context's cells used after it."""
    started, first_token_at = times
    ended = time.perf_counter()
    ttft = (first_token_at or ended) - started
    gen_time = ended - (first_token_at or ended)
    return GenerationStats(
        prompt_tokens=prompt,
        prompt_tokens_evaluated=read,
        completion_tokens=written,
        ttft_s=ttft,
        prompt_tok_per_s=read / ttft if ttft > 0 else 0.0,
        gen_tok_per_s=(written - 1) / gen_time if written > 1 and gen_time > 0 else 0.0,
        context_used=cells,
        n_ctx=n_ctx,
        total_s=ended - started,
    )
