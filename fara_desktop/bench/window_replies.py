"""A reply as the window writes it, in the model's own context, timed: the speculative section's unit of
measure (with proposals from any drafter, or plainly as ``Llama.generate`` writes it)."""

from __future__ import annotations

import time
from typing import Any

from fara_desktop.engine.llama_state import is_rewindable
from fara_desktop.engine.window_speculation import SpeculativeWriting, plain_tokens
from fara_desktop.machine.llama_internals import cut_context, reused_prefix
from fara_desktop.vocabulary.sampling import SamplingParams


def in_the_window(
    llm: Any, prompt: list[int], sampling: SamplingParams, writer: SpeculativeWriting | None
) -> tuple[list[int], float, tuple[int, int]]:
    """A reply as the window writes it, in the model's own context (``writer``: checking proposals, else
    ``Llama.generate``): its tokens, speed, and (proposed, accepted)."""
    if writer is not None:  # what generate's prefix matching keeps (a recurrent state cannot be cut: none)
        held = [int(t) for t in llm.input_ids[: llm.n_tokens]]
        cut_context(llm, reused_prefix(held, prompt) if is_rewindable(llm) else 0)
    tokens: list[int] = []
    times: list[float] = []
    generator = writer.tokens(prompt) if writer is not None else plain_tokens(llm, prompt, sampling, None, True)
    for token in generator:
        tokens.append(token)
        times.append(time.perf_counter())
        if len(tokens) >= (sampling.max_tokens or 0):
            break
    generator.close()
    speed = (len(tokens) - 1) / (times[-1] - times[0]) if len(times) > 1 and times[-1] > times[0] else 0.0
    return tokens, speed, (writer.proposed, writer.accepted) if writer is not None else (0, 0)
