"""How a reply's tokens are picked, and the room kept for the reply."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class SamplingParams:
    """How the next token is picked. ``temperature == 0`` is greedy decoding."""

    temperature: float = 0.7
    top_p: float = 0.95
    top_k: int = 40
    min_p: float = 0.05
    repeat_penalty: float = 1.1
    mirostat_mode: int = 0  # 0 off, 1 or 2: Mirostat v1/v2 (then top-k/top-p are ignored)
    mirostat_tau: float = 5.0
    mirostat_eta: float = 0.1
    seed: int | None = None
    max_tokens: int | None = None
    # Test/benchmark knob: keep generating past end-of-turn tokens until max_tokens.
    ignore_eos: bool = False
    stop: tuple[str, ...] = ()  # the reply ends before the first of these (never shown, even in part)
    # JSON output, constrained by a grammar: None free text, "" any JSON object, else a JSON schema (as text)
    json_schema: str | None = None
    logprobs: int | None = None  # None: none; N: each token's log probability and the N likeliest (0 to 20)
    stop_loops: bool = True  # end a reply whose text starts repeating itself (``engine.repetition``); not for the API


def reply_reserve(sampling: SamplingParams, n_ctx: int) -> int:
    """Tokens kept free for the reply when fitting the history into the context window."""
    if sampling.max_tokens:
        return min(sampling.max_tokens, n_ctx // 2)
    return min(512, n_ctx // 4)
