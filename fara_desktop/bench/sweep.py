"""Engine settings compared side by side on one loaded model: threads, batch, KV cache type, flash attention.

Every configuration gets its own llama.cpp context on the *same* model (the weights are shared, so an 8B model is
loaded once and five contexts cost only their KV caches). The configurations are measured in rounds, the order
rotating each round, and compared by the median of the per-round ratios: this machine drifts by ±10–20 % within
minutes, so two blocks measured one after the other can differ by that much with identical settings.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from fara_desktop.engine.ggml_types import GGML_TYPE_IDS

K = TypeVar("K")


@dataclass(frozen=True)
class EngineConfig:
    """One combination of the settings the tuner chooses (the model and context length are fixed)."""

    n_threads: int
    n_threads_batch: int
    n_batch: int
    n_ubatch: int
    kv_type: str
    flash_attn: bool

    @property
    def label(self) -> str:
        fa = ", flash attention" if self.flash_attn else ""
        threads = (
            f"{self.n_threads} thread{'s' if self.n_threads > 1 else ''}"
            if self.n_threads == self.n_threads_batch
            else f"{self.n_threads}/{self.n_threads_batch} threads"
        )
        return f"{threads}, batch {self.n_batch}/{self.n_ubatch}, {self.kv_type} KV{fa}"

    def context_key(self) -> tuple[int, int, str, bool]:
        """What needs a context of its own (threads can change on a live context)."""
        return (self.n_batch, self.n_ubatch, self.kv_type, self.flash_attn)


def interleaved(measures: dict[K, Callable[[], float]], rounds: int) -> dict[K, list[float]]:
    """Run every measure once per round, the order rotating each round (so none is always first or last)."""
    names = list(measures)
    runs: dict[K, list[float]] = {name: [] for name in names}
    for round_number in range(rounds):
        shift = round_number % len(names) if names else 0
        for name in names[shift:] + names[:shift]:
            runs[name].append(measures[name]())
    return runs


def paired_ratio(numerator: Sequence[float], denominator: Sequence[float]) -> float:
    """The median of the per-round ratios of two interleaved series."""
    ratios = [a / b for a, b in zip(numerator, denominator, strict=True) if b > 0]
    return statistics.median(ratios) if ratios else 0.0


class SharedModelContext:
    """A llama.cpp context of its own on an already loaded model: prompt reading and generation, nothing else
    (no sampling: generation decodes one fixed token at a time, the engine's own per-token cost)."""

    def __init__(self, model: Any, n_ctx: int, config: EngineConfig) -> None:
        import llama_cpp

        params = llama_cpp.llama_context_default_params()
        params.n_ctx = n_ctx
        params.n_batch = config.n_batch
        params.n_ubatch = config.n_ubatch
        params.n_threads = config.n_threads
        params.n_threads_batch = config.n_threads_batch
        params.type_k = params.type_v = GGML_TYPE_IDS[config.kv_type]
        params.flash_attn_type = (
            llama_cpp.LLAMA_FLASH_ATTN_TYPE_ENABLED if config.flash_attn else llama_cpp.LLAMA_FLASH_ATTN_TYPE_DISABLED
        )
        params.no_perf = True
        self.config = config
        self._depth = 0
        self.ctx = llama_cpp.llama_init_from_model(model, params)
        if not self.ctx:
            raise RuntimeError(f"llama.cpp could not make a context for {config.label}")

    def _clear(self) -> None:
        import llama_cpp

        llama_cpp.llama_memory_clear(llama_cpp.llama_get_memory(self.ctx), True)

    def _decode(self, tokens: Sequence[int]) -> None:
        import llama_cpp

        array = (llama_cpp.llama_token * len(tokens))(*tokens)
        if llama_cpp.llama_decode(self.ctx, llama_cpp.llama_batch_get_one(array, len(tokens))) != 0:
            raise RuntimeError("llama_decode failed")

    def use(self, config: EngineConfig) -> None:
        import llama_cpp

        llama_cpp.llama_set_n_threads(self.ctx, config.n_threads, config.n_threads_batch)

    def read_prompt(self, prompt: Sequence[int]) -> float:
        """Read ``prompt`` from an empty cache, in batches of n_batch: tokens per second. The prompt stays in the
        cache, so generation is then measured at that depth."""
        self._clear()
        start = time.perf_counter()
        for at in range(0, len(prompt), self.config.n_batch):
            self._decode(prompt[at : at + self.config.n_batch])
        self._depth = len(prompt)
        return len(prompt) / (time.perf_counter() - start)

    def generate(self, gen_tokens: int, token: int) -> float:
        """Decode ``gen_tokens`` one by one on top of the prompt read last, then drop them again: tokens per
        second."""
        import llama_cpp

        start = time.perf_counter()
        for _ in range(gen_tokens):
            self._decode([token])
        rate = gen_tokens / (time.perf_counter() - start)
        llama_cpp.llama_memory_seq_rm(llama_cpp.llama_get_memory(self.ctx), 0, self._depth, -1)
        return rate

    def close(self) -> None:
        import llama_cpp

        if self.ctx:
            llama_cpp.llama_free(self.ctx)
            self.ctx = None


@dataclass
class SweepResult:
    """Per configuration: prompt and generation tokens per second, one value per round."""

    configs: list[EngineConfig]
    pp: dict[EngineConfig, list[float]]
    gen: dict[EngineConfig, list[float]]

    def best(self, kind: str) -> EngineConfig:
        series = self.pp if kind == "pp" else self.gen
        return max(self.configs, key=lambda c: statistics.median(series[c]))

    def ratio(self, kind: str, config: EngineConfig, other: EngineConfig) -> float:
        series = self.pp if kind == "pp" else self.gen
        return paired_ratio(series[config], series[other])

    def to_json(self) -> list[dict[str, Any]]:
        return [
            {
                "config": {
                    "n_threads": c.n_threads,
                    "n_threads_batch": c.n_threads_batch,
                    "n_batch": c.n_batch,
                    "n_ubatch": c.n_ubatch,
                    "kv_type": c.kv_type,
                    "flash_attn": c.flash_attn,
                },
                "label": c.label,
                "pp_tok_per_s": {"median": round(statistics.median(self.pp[c]), 3), "runs": self.pp[c]},
                "gen_tok_per_s": {"median": round(statistics.median(self.gen[c]), 3), "runs": self.gen[c]},
            }
            for c in self.configs
        ]


def sweep_configs(tuned: EngineConfig, default: EngineConfig, thread_counts: Sequence[int]) -> list[EngineConfig]:
    """The tuned choice, llama-cpp-python's defaults, and each setting changed one at a time from the tuned one."""
    configs = [tuned, default]
    for threads in thread_counts:
        configs.append(EngineConfig(threads, threads, tuned.n_batch, tuned.n_ubatch, tuned.kv_type, tuned.flash_attn))
    half = max(64, tuned.n_ubatch // 2)
    configs.append(EngineConfig(tuned.n_threads, tuned.n_threads_batch, half, half, tuned.kv_type, tuned.flash_attn))
    configs.append(
        EngineConfig(tuned.n_threads, tuned.n_threads_batch, tuned.n_batch, tuned.n_ubatch, "f16", not tuned.flash_attn)
    )
    configs.append(EngineConfig(tuned.n_threads, tuned.n_threads_batch, tuned.n_batch, tuned.n_ubatch, "q8_0", True))
    unique: list[EngineConfig] = []
    for config in configs:
        if config not in unique:
            unique.append(config)
    return unique


def run_sweep(
    model: Any,
    n_ctx: int,
    configs: Sequence[EngineConfig],
    prompt: Sequence[int],
    gen_tokens: int,
    pp_rounds: int,
    gen_rounds: int,
) -> SweepResult:
    """Measure every configuration, interleaved: prompt reading ``pp_rounds`` times, then generation at the depth
    of that prompt ``gen_rounds`` times. One context per distinct context key."""
    contexts: dict[tuple[int, int, str, bool], SharedModelContext] = {}
    try:
        for config in configs:
            if config.context_key() not in contexts:
                contexts[config.context_key()] = SharedModelContext(model, n_ctx, config)

        def reading(config: EngineConfig) -> Callable[[], float]:
            def run() -> float:
                context = contexts[config.context_key()]
                context.use(config)
                return context.read_prompt(prompt)

            return run

        def generating(config: EngineConfig) -> Callable[[], float]:
            def run() -> float:
                context = contexts[config.context_key()]
                context.use(config)
                return context.generate(gen_tokens, prompt[-1])

            return run

        pp = interleaved({config: reading(config) for config in configs}, pp_rounds)
        gen = interleaved({config: generating(config) for config in configs}, gen_rounds)
        return SweepResult(list(configs), pp, gen)
    finally:
        for context in contexts.values():
            context.close()
