"""What a model would cost on this machine before anyone loads or downloads it: memory at the context it would
be loaded with, reply speed, and the wait before a typical message is read."""

from __future__ import annotations

from dataclasses import dataclass

from fara_desktop.models.metadata import ModelMetadata
from fara_desktop.planning.params import TunedParams
from fara_desktop.planning.tuning import (
    MemoryEstimate,
    estimate_memory,
    expected_prompt_tokens_per_second,
    expected_tokens_per_second,
    tune,
)
from fara_desktop.text.format import format_size

TYPICAL_PROMPT_TOKENS = 1000


@dataclass(frozen=True)
class MachineFacts:
    """What the cost depends on besides the model: cores, memory, bandwidth, the llama.cpp build."""

    physical_cores: int | None
    usable_cores: int
    available_bytes: int
    total_bytes: int
    bandwidth_bytes_per_s: float
    repacks_weights: bool = False
    calibrated_threads: int | None = None
    cpu_features: tuple[str, ...] = ()  # the instruction sets prompt reading depends on


@dataclass(frozen=True)
class CostHere:
    """The tuned load, its memory, and the speeds the tuning model expects on this machine."""

    tuned: TunedParams
    memory: MemoryEstimate
    gen_tok_per_s: float
    prompt_tok_per_s: float

    @property
    def typical_prompt_s(self) -> float:
        return TYPICAL_PROMPT_TOKENS / self.prompt_tok_per_s if self.prompt_tok_per_s > 0 else float("inf")

    def summary(self) -> str:
        """One line, e.g. "needs about 3.5 GB with a context of 8,192 tokens · about 13 tokens/s · a 1,000-token
        message is read in about 20 s"."""
        wait = self.typical_prompt_s
        wait_text = f"about {wait:.0f} s" if wait >= 1.5 else "about a second" if wait >= 0.5 else "under a second"
        return (
            f"needs about {format_size(self.memory.total)} with a context of {self.memory.n_ctx:,} tokens · "
            f"about {self.gen_tok_per_s:.0f} tokens/s · a {TYPICAL_PROMPT_TOKENS:,}-token message is read in "
            f"{wait_text}"
        )


def cost_here(meta: ModelMetadata, facts: MachineFacts) -> CostHere:
    """As the window would load it: the tuned context and KV type, and the mmap choice of this build."""
    tuned = tune(
        meta,
        facts.physical_cores,
        facts.usable_cores,
        facts.available_bytes,
        facts.total_bytes,
        facts.calibrated_threads,
        repacks_weights=facts.repacks_weights,
    )
    memory = estimate_memory(
        meta,
        tuned.n_ctx,
        tuned.kv_type,
        tuned.n_ubatch,
        mapped_and_repacked=tuned.use_mmap and facts.repacks_weights,
    )
    return CostHere(
        tuned,
        memory,
        expected_tokens_per_second(meta, facts.bandwidth_bytes_per_s, cpu_features=facts.cpu_features),
        expected_prompt_tokens_per_second(meta, tuned.n_threads_batch, facts.cpu_features),
    )
