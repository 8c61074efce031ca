"""The fastest thread count for the loaded model, measured on it: generation speed at each count, the counts
interleaved over rounds (the machine drifts within minutes), the median per count; and whether other programs
used the processor meanwhile (then the result is used, but measured again at the next start)."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from fara_desktop.engine.errors import CalibrationYieldedError
from fara_desktop.machine.busy import OtherProgramsMeter

if TYPE_CHECKING:
    from llama_cpp import Llama

ROUNDS = 2
PROMPT = b"Write a short story about a lighthouse keeper."


def measure_threads(
    llm: Llama,
    candidates: Sequence[int],
    tokens: int,
    threads_batch: int,
    should_yield: Callable[[], bool] | None,
    restore: Callable[[], None],
) -> tuple[dict[int, float], bool]:
    """Generation tok/s per count (greedy, from an empty cache) and whether the machine was busy. When
    ``should_yield()`` (a reply waits), ``restore()`` puts the count in use back and ``CalibrationYieldedError``
    is raised, so the first question never waits behind a measurement."""
    import llama_cpp

    prompt = llm.tokenize(PROMPT, add_bos=True)
    samples: dict[int, list[float]] = {t: [] for t in candidates}
    meter = OtherProgramsMeter()
    for _ in range(ROUNDS):
        for threads in candidates:
            llama_cpp.llama_set_n_threads(llm.ctx, threads, threads_batch)
            llm.reset()
            count, first = 0, 0.0
            for _token in llm.generate(prompt, temp=0.0):
                if should_yield is not None and should_yield():
                    restore()
                    raise CalibrationYieldedError("a reply is waiting")
                count += 1
                if count == 1:
                    first = time.perf_counter()  # time generation only, not the prompt
                if count > tokens:
                    break
            samples[threads].append((count - 1) / (time.perf_counter() - first))
    return {t: statistics.median(v) for t, v in samples.items()}, meter.busy()
