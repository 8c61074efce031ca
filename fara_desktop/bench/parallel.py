"""Several conversations at once, in the engine (issue 63's first step): ``SequenceBatch`` over the loaded model with
1, 2, 4 and 8 sequences, each a prompt of ``prompt_tokens`` and ``out_tokens`` generated greedily. The figures:
aggregate generation (tokens written by all sequences a second, once their prompts are read) per count, its gain
over one sequence, and the 95th percentile of the time to the first token of 8 sequences that arrive together
against one sequence at a time. Counts interleaved round by round, medians (the machines drift ±10–20 %)."""

from __future__ import annotations

import statistics
import time
from pathlib import Path
from typing import Any

from fara_desktop.engine.llama_loading import open_model
from fara_desktop.engine.sequence_batch import SequenceBatch
from fara_desktop.engine.sequence_scheduler import SequenceRequest, SequenceScheduler
from fara_desktop.models.gguf_file import read_gguf_header
from fara_desktop.planning.params import LoadParams
from fara_desktop.vocabulary.sampling import SamplingParams

COUNTS = (1, 2, 4, 8)
GREEDY = SamplingParams(temperature=0.0, repeat_penalty=1.0, ignore_eos=True)


def _prompts(llm: Any, count: int, tokens: int) -> list[list[int]]:
    """``count`` different prompts of ``tokens`` tokens (a different opening each: nothing shared)."""
    words = b" the quick brown fox jumps over the lazy dog and runs far away"
    base = llm.tokenize(words * (tokens // 8 + 2), add_bos=False)
    return [llm.tokenize(f"Client {i}:".encode(), add_bos=True) + base[: tokens - 8] for i in range(count)]


def _round(batch: SequenceBatch, prompts: list[list[int]], out_tokens: int) -> tuple[float, list[float]]:
    """All ``prompts`` submitted at once to the scheduler; (aggregate generation tok/s once every prompt is read,
    each first token's seconds)."""
    scheduler = SequenceScheduler(batch)
    started = time.perf_counter()
    firsts: dict[int, float] = {}
    counts: dict[int, int] = {}
    sampling = SamplingParams(**{**GREEDY.__dict__, "max_tokens": out_tokens})
    for i, prompt in enumerate(prompts):
        counts[i] = 0

        def got(_token: int, i: int = i) -> None:
            counts[i] += 1
            firsts.setdefault(i, time.perf_counter() - started)

        scheduler.submit(SequenceRequest(prompt, sampling, got))
    while len(firsts) < len(prompts):
        scheduler.step()
    read_all, written = time.perf_counter(), sum(counts.values())
    while not scheduler.idle:
        scheduler.step()
    seconds = time.perf_counter() - read_all
    return (sum(counts.values()) - written) / max(seconds, 1e-9), sorted(firsts.values())


def _p95(values: list[float]) -> float:
    return sorted(values)[max(0, round(0.95 * len(values)) - 1)]


def parallel_generation(
    model: Path, params: LoadParams, prompt_tokens: int = 500, out_tokens: int = 128, rounds: int = 3
) -> dict[str, Any]:
    """The section's figures (see the module)."""
    llm, _, _, used = open_model(model, read_gguf_header(model), params, None, None)
    out: dict[str, Any] = {}
    try:
        per_count: dict[int, list[float]] = {n: [] for n in COUNTS}
        one_at_a_time: list[float] = []
        together: list[float] = []
        n_ctx = prompt_tokens + out_tokens + 16
        for _ in range(rounds):
            for n in COUNTS:
                batch = SequenceBatch(llm.model, n_ctx, n, used.n_threads or 2, used.n_batch)
                try:
                    speed, firsts = _round(batch, _prompts(llm, n, prompt_tokens), out_tokens)
                finally:
                    batch.close()
                per_count[n].append(speed)
                if n == 8:
                    together.append(_p95(firsts))
                if n == 1:
                    # 8 clients served one at a time: the k-th waits for the k-1 replies before it
                    whole = firsts[0] + out_tokens / max(speed, 1e-9)
                    one_at_a_time.append(_p95([k * whole + firsts[0] for k in range(8)]))
        for n, speeds in per_count.items():
            out[f"parallel_gen_tok_per_s_{n}"] = round(statistics.median(speeds), 2)
            out[f"parallel_gain_{n}"] = round(
                statistics.median(s / b for s, b in zip(speeds, per_count[1], strict=True)), 3
            )
        out["parallel_first_token_p95_8_over_sequential"] = round(
            statistics.median(t / s for t, s in zip(together, one_at_a_time, strict=True)), 3
        )
        out["parallel_rounds"] = {str(n): [round(s, 2) for s in speeds] for n, speeds in per_count.items()}
    finally:
        llm.close()
    return out
