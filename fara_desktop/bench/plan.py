"""How much to measure: the benchmark scales its runs with what each costs on this machine for this model.

A 135M model generates 60 tokens a second here and an 8B model 5; the same run lengths would take ten times
longer at 8B for no better figure. Each run aims at a few seconds of work, and the slow sections that say nothing
new at size (multi-turn chats re-read whole histories) run only when asked for.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass

from fara_desktop.models.metadata import ModelMetadata
from fara_desktop.planning.tuning import expected_prompt_tokens_per_second, expected_tokens_per_second

SECTIONS = (
    "bandwidth",
    "engine",
    "app",
    "memory",
    "startup",
    "turns",
    "resume",
    "typeahead",
    "cold",
    "retrieval",
    "loops",
    "prefix",
    "vision",
    "api",
    "kernels",
    "parallel",
    "speculative",
)
SECTION_HELP = {
    "bandwidth": "the machine's memory read bandwidth, probed twice",
    "engine": "tuned settings vs llama-cpp-python's defaults vs a sweep over threads, batch, KV type and flash "
    "attention (interleaved, paired ratios), and predicted vs measured speed",
    "app": "generation through the real window vs the raw engine, and the event loop's longest stalls while the "
    "model loads, reads a long prompt and streams",
    "memory": "the memory estimate vs the RSS a load adds, at 4k and the tuned context, f16 and q8_0 KV",
    "startup": "the real app launched: window shown, model ready, RSS",
    "turns": "time to first token over an 8-turn chat with and without KV reuse, and switching chats back",
    "resume": "a long chat resumed from its KV state on disk (cold page cache) vs re-read, and whether the "
    "continuation is the same; a restart's tokens read beyond the new message (goal 0), and a Branch and an Edit "
    "right after a reply",
    "typeahead": "a 1,000-token paste read ahead while a question is typed for 5 s vs read at Enter, the longest "
    "stall meanwhile, and the wait forecast vs the reading; a 2,400-token paste's wait as said 2 s in vs the "
    "first word when Enter is pressed then, on a quiet and on a loaded machine",
    "cold": "start-up with the model file evicted from the page cache, read vs mapped vs pre-read",
    "retrieval": "document search with all-MiniLM-L6-v2 (converted from its installed package): recall@5 and MRR "
    "of lexical, semantic and fused search on two question sets, fusion weights and passage sizes, embedding "
    "speed, query latency during background indexing, and a 32 MB corpus made searchable (~20 min)",
    "loops": "replies that repeat themselves: 16 prompts, the app's sampling and greedy, up to 800 tokens each; "
    "loops caught, loops missed and normal replies the detector would cut",
    "prefix": "every path that keeps part of a chat's context (regenerate, edit, branch, chat switch, read-ahead "
    "thrown away, local API, restart) against a fresh read: the same greedy continuation, and the prompt tokens "
    "llama.cpp really decoded",
    "vision": "pictures, for each mmproj*.gguf beside the model: encode time vs its forecast, encodings on a second "
    "question, a chat with a picture resumed from disk vs re-read, the projector's memory vs its estimate, and "
    "hostile pictures (a bomb, a truncated file, 10,000 GIF frames) through the sandbox",
    "kernels": "each kernel path correct on this machine (checked in child processes), prompt and reply speed on "
    "the model, one child per path and sample, interleaved, medians; the path chosen from them against the "
    "fastest and against llama.cpp's default",
    "api": "the local API as a chat client uses it (fara-desktop serve, a key per app): a ~2,500-token "
    "conversation's follow-up vs its first request, and the tokens another key reused (must be 0)",
    "parallel": "several conversations decoded together in one context (1, 2, 4, 8 sequences of a 500-token "
    "prompt and 128 tokens out, interleaved, medians): aggregate generation and its gain over one, and the "
    "p95 first token of 8 arriving together against one at a time",
    "speculative": "proposals from the reply's own text, checked in the same decode: three copying and three free "
    "tasks with and without (interleaved, medians, the replies compared token for token), and a drafter always "
    "right (the ceiling here) and always wrong (the cost before the self-tuning turns it off)",
}
SLOW_AT_SIZE = frozenset({"turns", "cold"})  # not run by default when generation is predicted below 20 tok/s
# slow, or not about the chat model's speed
ONLY_WHEN_ASKED = frozenset(
    {"cold", "retrieval", "loops", "prefix", "vision", "api", "kernels", "parallel", "speculative"}
)
BIG_MODEL_TOK_PER_S = 20.0


@dataclass(frozen=True)
class BenchPlan:
    """Run lengths and counts for one model on this machine."""

    gen_tokens: int
    pp_tokens: int
    pp_rounds: int
    gen_rounds: int
    repeats: int  # of the app-path and raw-engine runs
    long_prompt_tokens: int  # the prompt whose reading the event-loop probe watches
    predicted_gen_tok_per_s: float
    predicted_pp_tok_per_s: float

    @property
    def big(self) -> bool:
        return self.predicted_gen_tok_per_s < BIG_MODEL_TOK_PER_S


def _clamp(value: float, low: int, high: int) -> int:
    return int(max(low, min(high, value)))


def plan_for(
    meta: ModelMetadata, bandwidth: float, threads: int, quick: bool, cpu_features: Collection[str] = ()
) -> BenchPlan:
    gen_speed = expected_tokens_per_second(meta, bandwidth, cpu_features=cpu_features)
    pp_speed = expected_prompt_tokens_per_second(meta, threads, cpu_features)
    if quick:
        return BenchPlan(16, 64, 1, 1, 1, 128, gen_speed, pp_speed)
    return BenchPlan(
        gen_tokens=_clamp(3.0 * gen_speed, 16, 256) // 8 * 8,
        pp_tokens=_clamp(5.0 * pp_speed, 64, 512) // 32 * 32,
        pp_rounds=3,
        gen_rounds=5,
        repeats=3 if gen_speed >= BIG_MODEL_TOK_PER_S else 2,
        long_prompt_tokens=_clamp(8.0 * pp_speed, 128, 1500) // 32 * 32,
        predicted_gen_tok_per_s=gen_speed,
        predicted_pp_tok_per_s=pp_speed,
    )


def default_sections(plan: BenchPlan) -> list[str]:
    return [
        section for section in SECTIONS if not (plan.big and section in SLOW_AT_SIZE) and section not in ONLY_WHEN_ASKED
    ]
