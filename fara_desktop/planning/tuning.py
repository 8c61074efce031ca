"""Pure decisions about running a model on this machine: memory estimate, fit verdict, best model, parameters.

No I/O and no llama_cpp here: inputs are a model's metadata, a hardware profile and measured facts (thread
calibration, memory bandwidth); outputs are plain data the engine and the UI use and explain.

The memory estimate was calibrated on the two real models (SmolLM2-135M Q4_1, Gemma 3 270M Q4_K_M) against the
RSS increase after loading and reading a 600-token prompt at n_ctx 2048 and 8192
(tests/integration/planning/test_calibration.py):

    weights (tensor bytes, mmap'd and resident once read)
  + KV cache  2 × Σlayers n_head_kv × head_dim × n_ctx × bytes(cache type)   (sliding-window layers as such)
  + compute   n_ubatch × 4 B × (8·n_embd + 3·n_ff) + n_ubatch² × n_head × 4 B   (activations, one KQ block)
  + overhead  8 MiB + 220 B × n_vocab   (llama.cpp's vocabulary tables, output buffer, runtime)
"""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Literal

from fara_desktop.models.metadata import ModelMetadata
from fara_desktop.planning.params import TunedParams
from fara_desktop.text.format import GIB, MIB, format_parameters, format_size

KV_TYPES: dict[str, float] = {"f16": 2.0, "q8_0": 34 / 32, "q4_0": 18 / 32}
DEFAULT_CONTEXT_CAP = 8192
MIN_CONTEXT = 2048
PARALLEL_CHOICES = (4, 2)  # the local API's replies decoded together, tried in this order (``parallel_that_fits``)
FIT_HEADROOM = 0.8  # a model "fits" comfortably under 80 % of the budget; up to 100 % it is "tight"
QUANT_QUALITY = {
    "F32": 1.0,
    "F16": 1.0,
    "BF16": 1.0,
    "Q8_0": 1.0,
    "Q6_K": 0.99,
    "Q5_K_M": 0.98,
    "Q5_K_S": 0.97,
    "Q5_0": 0.96,
    "Q5_1": 0.97,
    "Q4_K_M": 0.95,
    "Q4_K_S": 0.93,
    "Q4_0": 0.9,
    "Q4_1": 0.91,
    "IQ4_XS": 0.93,
    "IQ4_NL": 0.93,
    "Q3_K_L": 0.85,
    "Q3_K_M": 0.82,
    "Q3_K_S": 0.75,
    "IQ3_M": 0.82,
    "IQ3_S": 0.8,
    "IQ3_XS": 0.76,
    "IQ3_XXS": 0.72,
    "Q2_K": 0.6,
    "Q2_K_S": 0.55,
    "IQ2_M": 0.6,
    "IQ2_S": 0.55,
    "IQ2_XS": 0.5,
    "IQ2_XXS": 0.45,
    "IQ1_M": 0.3,
    "IQ1_S": 0.25,
    "MXFP4_MOE": 0.97,
    "MXFP4": 0.97,  # the format gpt-oss was trained for
}
Verdict = Literal["fits", "tight", "too_big"]
KEEP_MARGIN = 0.85  # the last recommendation stays usable down to 85 % of the speed bar (bandwidth noise is ±10 %)
CALIBRATED_REASON = "measured fastest on this machine (calibration)"
COMFORTABLE_TOK_PER_S = 8.0  # below this a model that fits writes slower than people read: "fits, but slow here"
VERDICT_LABELS = {"fits": "Runs well", "slow": "Fits, but slow here", "tight": "Tight fit", "too_big": "Too big"}


def verdict_kind(verdict: Verdict, expected_tok_per_s: float) -> str:
    """The memory verdict with "fits" split by speed (a key of ``VERDICT_LABELS``)."""
    return "slow" if verdict == "fits" and expected_tok_per_s < COMFORTABLE_TOK_PER_S else verdict


# ---------------------------------------------------------------------- memory


def swa_layers(meta: ModelMetadata) -> int:
    """How many layers use a sliding window (the rest attend to the whole context)."""
    if not meta.sliding_window or not meta.n_layer:
        return 0
    if meta.architecture == "gemma3":
        return meta.n_layer - meta.n_layer // 6  # every sixth layer is global
    if meta.architecture == "gemma2":
        return meta.n_layer // 2
    return 0  # unknown pattern: count every layer as full (never under-estimate)


def kv_cache_bytes(
    meta: ModelMetadata, n_ctx: int, kv_type: str = "f16", swa_full: bool = True, n_ubatch: int = 512
) -> int:
    """``2 × layers × kv_heads × head_dim × n_ctx × bytes``; sliding-window layers hold window + ubatch cells
    unless ``swa_full`` (the engine keeps them full-size so the prompt prefix can be reused across turns). Only
    the layers that attend hold one: a hybrid's recurrent layers keep a fixed state instead (``recurrent``)."""
    if meta.kv_values_full is not None:  # widths that differ by layer (Gemma 4), summed from the file
        swa_cells = n_ctx if swa_full else min(n_ctx, (meta.sliding_window or n_ctx) + n_ubatch)
        return int(KV_TYPES[kv_type] * (meta.kv_values_full * n_ctx + (meta.kv_values_swa or 0) * swa_cells))
    layers = meta.kv_layers if meta.kv_layers is not None else meta.n_layer or 0
    per_token_layer = (meta.n_head_kv or 0) * ((meta.head_dim_k or 0) + (meta.head_dim_v or 0)) * KV_TYPES[kv_type]
    swa = 0 if swa_full else swa_layers(meta)
    window_cells = min(n_ctx, (meta.sliding_window or n_ctx) + n_ubatch)
    return int(per_token_layer * ((layers - swa) * n_ctx + swa * window_cells))


@dataclass(frozen=True)
class MemoryEstimate:
    """Bytes a loaded model needs, by part."""

    weights: int
    kv_cache: int
    compute: int
    overhead: int
    n_ctx: int
    kv_type: str
    recurrent: int = 0  # the recurrent layers' state: fixed per sequence, whatever the context
    vision: int = 0  # the vision projector loaded beside it: its weights and the encoder's buffers
    sequences: int = 0  # the local API's replies decoded together: their context (``parallel_bytes``)
    draft: int = 0  # a draft model loaded beside it for speculation: its weights, context and buffers

    @property
    def total(self) -> int:
        beside = self.vision + self.sequences + self.draft
        return self.weights + self.kv_cache + self.recurrent + self.compute + self.overhead + beside


# the recurrent states a hybrid's context keeps a sequence (llama.cpp's ``n_rs_seq``) to take back rejected
# proposals (speculation), for the architectures llama.cpp keeps them for (``llm_arch_supports_rs_rollback``):
# Qwen3.5 2B's 19 MiB state becomes 96 MiB
RECURRENT_SNAPSHOTS = 4
ROLLS_BACK = frozenset(
    {
        "qwen35",
        "qwen35moe",
        "qwen4exp",
        "deepseek4",
        "nemotron_h",
        "nemotron_h_moe",
        "bailingmoe3",
        "lfm2",
        "lfm2moe",
        "kimi-k3",
        "glm5-next",
    }
)


def recurrent_bytes(meta: ModelMetadata) -> int:
    """The recurrent state a sequence of ``meta`` keeps, with the snapshots for taking proposals back."""
    snapshots = RECURRENT_SNAPSHOTS if meta.architecture in ROLLS_BACK else 0
    return meta.recurrent_state_bytes * (1 + snapshots)


def estimate_memory(
    meta: ModelMetadata,
    n_ctx: int,
    kv_type: str = "f16",
    n_ubatch: int = 512,
    swa_full: bool = True,
    mapped_and_repacked: bool = False,
    parallel: int = 1,
) -> MemoryEstimate:
    """``mapped_and_repacked``: the file is mapped by a build that repacks weights, so its pages stay resident
    beside the repacked copy: the weights count twice (an upper bound; the file pages can be reclaimed).
    ``parallel``: the local API's replies decoded together, in a context of their own (``parallel_bytes``)."""
    compute = _compute_bytes(meta, min(n_ubatch, n_ctx))
    overhead = 8 * MIB + 220 * (meta.n_vocab or 32000)
    return MemoryEstimate(
        weights=meta.resident_weights_bytes * (2 if mapped_and_repacked else 1),
        kv_cache=kv_cache_bytes(meta, n_ctx, kv_type, swa_full, n_ubatch),
        compute=compute,
        overhead=overhead,
        n_ctx=n_ctx,
        kv_type=kv_type,
        recurrent=recurrent_bytes(meta),
        sequences=parallel_bytes(meta, n_ctx, kv_type, parallel, n_ubatch),
    )


def _compute_bytes(meta: ModelMetadata, ubatch: int) -> int:
    n_embd, n_ff, n_head = meta.n_embd or 0, meta.n_ff or 4 * (meta.n_embd or 0), meta.n_head or 1
    return ubatch * 4 * (8 * n_embd + 3 * n_ff) + ubatch * ubatch * n_head * 4


def parallel_bytes(meta: ModelMetadata, n_ctx: int, kv_type: str, parallel: int, n_ubatch: int = 512) -> int:
    """The context of ``parallel`` replies decoded together (``engine.parallel_replies``): a KV cache of the whole
    context and a recurrent state for each, and its own compute buffer; 0 for one at a time (the model's own
    context serves it)."""
    if parallel <= 1:
        return 0
    per_sequence = kv_cache_bytes(meta, n_ctx, kv_type, True, n_ubatch) + meta.recurrent_state_bytes
    return parallel * per_sequence + _compute_bytes(meta, min(n_ubatch, n_ctx))


def memory_budget(available: int, total: int) -> int:
    """What a model may use: available RAM minus a reserve for the OS, the app and the user's other work."""
    reserve = min(2 * GIB, max(512 * MIB, total // 10))
    return max(0, available - reserve)


def max_context(meta: ModelMetadata, budget: int, kv_type: str = "f16", cap: int | None = None) -> int:
    """The largest context (a multiple of 256) whose estimate stays within ``budget``; 0 when none does."""
    limit = min(cap or DEFAULT_CONTEXT_CAP, meta.context_length or DEFAULT_CONTEXT_CAP)
    base = estimate_memory(meta, 256, kv_type)
    per_token = max(1.0, (estimate_memory(meta, 1 << 16, kv_type).total - base.total) / ((1 << 16) - 256))
    fit = int((budget - base.total) / per_token) + 256 if budget > base.total else 0
    fit = min(limit, fit) // 256 * 256
    while fit >= 256 and estimate_memory(meta, fit, kv_type).total > budget:
        fit -= 256
    return max(0, fit)


@dataclass(frozen=True)
class FitVerdict:
    """Will it fit, with the estimate behind it and what to change when it does not."""

    verdict: Verdict
    estimate: MemoryEstimate
    budget: int
    message: str
    suggestions: list[str] = field(default_factory=list)


def fit_verdict(
    meta: ModelMetadata,
    n_ctx: int,
    available: int,
    total: int,
    kv_type: str = "f16",
    estimate: MemoryEstimate | None = None,
    parallel: int = 1,
) -> FitVerdict:
    """``estimate``: the memory figure shown elsewhere for this load, so that the verdict speaks of the same one;
    ``parallel``: the local API's replies decoded together, whose context counts too."""
    estimate = estimate or estimate_memory(meta, n_ctx, kv_type, parallel=parallel)
    budget = memory_budget(available, total)
    need = estimate.total
    # the free memory as the machine says it (the figure shown above the catalog), and what a model may take of it
    of = f"of the {format_size(budget)} a model may use ({format_size(available)} free, less some for the system)"
    if need <= budget * FIT_HEADROOM:
        return FitVerdict("fits", estimate, budget, f"needs about {format_size(need)} {of}")
    if need <= budget:
        return FitVerdict(
            "tight", estimate, budget, f"needs about {format_size(need)} {of}: little room left for other programs"
        )
    if estimate.sequences and need - estimate.sequences <= budget:  # the parallel conversations' caches tip it
        suggestions = [
            "fewer parallel API conversations, or one at a time (Settings ▸ Inference ▸ Parallel API conversations)"
        ]
    else:
        suggestions = _what_would_fit(meta, budget, need, estimate)
    return FitVerdict(
        "too_big",
        estimate,
        budget,
        f"needs about {format_size(need)} but only {format_size(budget)} is available "
        f"({format_size(need - budget)} short)",
        suggestions,
    )


def _what_would_fit(meta: ModelMetadata, budget: int, need: int, estimate: MemoryEstimate) -> list[str]:
    """A smaller context (or KV cache), else a smaller quantization or model."""
    suggestions = []
    for candidate_type in ("f16", "q8_0"):
        ctx = max_context(meta, budget, candidate_type)
        if ctx >= 512:
            kv_note = "" if candidate_type == "f16" else " with a q8_0 (quantized) KV cache"
            suggestions.append(f"a context of {ctx:,} tokens{kv_note} would fit")
            break
    else:
        weights_room = budget - (need - estimate.weights)
        bits = 8 * weights_room / meta.parameters if weights_room > 0 and meta.parameters else 0.0
        examples = [(5.5, "Q5_K_M"), (4.8, "Q4_K_M"), (3.9, "Q3_K_M"), (3.0, "Q2_K / IQ3_XS"), (2.5, "IQ2_M")]
        fitting = next((name for need, name in examples if bits >= need), None)
        if fitting and bits < meta.bits_per_weight:
            suggestions.append(
                f"a smaller quantization of this model (at most {bits:.1f} bits per weight, e.g. {fitting})"
            )
        suggestions.append("a smaller model")
    return suggestions


# ---------------------------------------------------------------------- parameters


def size_class(meta: ModelMetadata) -> str:
    gb = meta.weights_bytes / GIB
    return "tiny" if gb < 0.5 else "small" if gb < 2 else "medium" if gb < 6 else "large"


def default_threads(physical: int | None, usable: int) -> int:
    """Before calibration: physical cores (generation is memory-bound; SMT siblings only contend)."""
    return max(1, min(physical or usable, usable))


def tune(
    meta: ModelMetadata,
    physical_cores: int | None,
    usable_cores: int,
    available: int,
    total: int,
    calibrated_threads: int | None = None,
    on_battery: bool | None = None,
    context_cap: int = DEFAULT_CONTEXT_CAP,
    repacks_weights: bool = False,
) -> TunedParams:
    """``repacks_weights``: the llama.cpp build copies weights into a repacked layout (see
    ``machine.llama_build.weights_are_repacked``); mmap then saves nothing and keeps the file resident too."""
    reasons: dict[str, str] = {}
    budget = memory_budget(available, total)
    trained = meta.context_length or context_cap
    kv_type = "f16"
    n_ctx = max_context(meta, budget, "f16", context_cap)
    if n_ctx >= min(MIN_CONTEXT, trained):
        reasons["n_ctx"] = f"largest that fits, capped at {min(context_cap, trained):,} (trained {trained:,})"
    else:
        quantized = max_context(meta, budget, "q8_0", context_cap)
        if quantized > n_ctx:
            kv_type, n_ctx = "q8_0", quantized
            reasons["kv_type"] = "memory is tight: a q8_0 KV cache halves its size (needs flash attention)"
        reasons["n_ctx"] = "limited by free memory"
    n_ctx = max(n_ctx, 256)
    reasons.setdefault("kv_type", "f16: fastest on CPUs; quantized caches save memory but read slower")
    flash_attn = kv_type != "f16"
    reasons["flash_attn"] = "required by a quantized KV cache" if flash_attn else "off: no gain on CPUs here"
    if calibrated_threads:
        threads = calibrated_threads
        reasons["n_threads"] = CALIBRATED_REASON
    else:
        threads = default_threads(physical_cores, usable_cores)
        reasons["n_threads"] = "physical cores (not yet calibrated)"
    if on_battery and threads > 2:
        threads = max(2, threads // 2)
        reasons["n_threads"] += "; halved on battery"
    threads_batch = max(threads, default_threads(physical_cores, usable_cores))
    reasons["n_threads_batch"] = "all physical cores: reading your message is arithmetic, every core helps"
    n_batch = n_ubatch = 512
    reasons["n_batch"] = "512: the size at which llama.cpp reads a message fastest on CPUs"
    use_mmap = not repacks_weights
    reasons["use_mmap"] = (
        "off: this llama.cpp rearranges the model in memory to compute faster, so a file read on demand would stay "
        "in memory beside the rearranged copy — twice the memory (measured at 1.7B: 2.68 GB mapped, 1.93 GB read)"
        if repacks_weights
        else "weights stay in the page cache and load instantly next time"
    )
    reasons["use_mlock"] = "off unless asked: locking can starve the rest of the machine"
    parallel, reasons["parallel"] = parallel_that_fits(meta, n_ctx, kv_type, budget)
    return TunedParams(
        n_ctx, threads, threads_batch, n_batch, n_ubatch, kv_type, flash_attn, use_mmap, False, reasons, parallel
    )


def parallel_that_fits(meta: ModelMetadata, n_ctx: int, kv_type: str, budget: int) -> tuple[int, str]:
    """How many local API replies decode together while the API is on: four (llama.cpp's server and LM Studio
    serve four), else two, where their caches fit beside the model with the headroom a comfortable fit keeps; one
    at a time otherwise. Generation reads every weight once a step, whatever the number of sequences: measured here
    on 2 cores, four wrote 1.84× one's tokens (the 1.7B shape through ``serve``), so the cores are never the limit."""
    for parallel in PARALLEL_CHOICES:
        if estimate_memory(meta, n_ctx, kv_type, parallel=parallel).total <= budget * FIT_HEADROOM:
            each = format_size(kv_cache_bytes(meta, n_ctx, kv_type) + meta.recurrent_state_bytes)
            return parallel, (
                f"{parallel} while the local API is on: one pass over the weights writes a token of each; each "
                f"holds a KV cache of the whole context ({each})"
            )
    return 1, "one at a time: the KV caches of two more would not fit in memory beside the model"


# ---------------------------------------------------------------------- choosing a model


# Fitted at real size (2 threads, random weights of real shapes, Q4_K_M) against interleaved measurements:
# SmolLM2-1.7B 15.4 tok/s, Llama-3.1-8B 4.87, Qwen2.5-7B 4.42 and Gemma-3-1B 22.9, at 29.6-34.5 GB/s of probed
# read bandwidth (AVX2). Reading the weights at 0.65 of the probe plus 0.4 ms a layer puts each within 0.87-1.16.
# The per-layer part is compute (thread hand-offs, small products), so it shrinks with the kernels' speed: on an
# AVX-512 VNNI machine it is 0.4 ms × 62/220 (measured there beside two mixtures of experts: see
# ``PROMPT_FLOPS_PER_THREAD``; with 0.4 ms the 1.7B was predicted at 0.74 of its speed, with 0.11 ms at 0.88).
GENERATION_BANDWIDTH_EFFICIENCY = 0.65
PER_LAYER_OVERHEAD_S = 0.0004


def expected_tokens_per_second(
    meta: ModelMetadata,
    bandwidth_bytes_per_s: float,
    efficiency: float = GENERATION_BANDWIDTH_EFFICIENCY,
    cpu_features: Collection[str] = (),
) -> float:
    """Generation reads every weight a token touches once per token (bandwidth-bound) — all of a dense model, the
    routed experts of a mixture — plus a fixed cost per layer (graph and thread hand-offs) that scales with the
    CPU's kernels. Tiny models (135M) are bound by per-token overheads this does not model: they run 2× faster
    than it says, which only ever under-sells them."""
    if not meta.weights_bytes or bandwidth_bytes_per_s <= 0:
        return 0.0
    per_layer = PER_LAYER_OVERHEAD_S * PROMPT_FLOPS_PER_THREAD / _flops_per_thread(cpu_features)
    seconds = meta.active_weights_bytes / (bandwidth_bytes_per_s * efficiency) + (meta.n_layer or 0) * per_layer
    return 1.0 / seconds


# Reading a prompt is compute-bound, and how fast depends on the instruction set llama.cpp's kernels use. Fitted to
# the app's own prompts (1,000-3,000 tokens, 2 threads, Q4_K_M) on two 2-core EPYC VMs: with AVX2 only, a 1.7B model
# read 37 tok/s and an 8B 8.2 (about 62 GFLOP/s a thread); with AVX-512 and VNNI (int8 dot products), the 1.7B 119
# and the 8B 31.9 tok/s (200 and 256 GFLOP/s). Gemma-3-1B, whose 1152-wide rows fall back to q5_0/q8_0, reads at
# 0.74 of this.
PROMPT_FLOPS_PER_THREAD = 62e9
PROMPT_FLOPS_PER_THREAD_VNNI = 220e9
# A mixture of experts reads a prompt at 0.62-0.66 of the rate its active parameters alone would give: a batch
# splits into one small product per expert (measured, 2 threads, AVX-512 VNNI, beside a dense 1.7B at 1.07: the
# llama-layout 32-expert shape 152 tok/s for 230 predicted, OLMoE's 107 for 172).
MOE_PROMPT_EFFICIENCY = 0.65


def expected_prompt_tokens_per_second(meta: ModelMetadata, threads: int, cpu_features: Collection[str] = ()) -> float:
    """About two floating-point operations per parameter a token goes through (all of a dense model, the routed
    experts of a mixture, whose batches split into one small matrix product per expert: ``MOE_PROMPT_EFFICIENCY``),
    at what llama.cpp's matrix kernels reach on one core with this CPU's instruction set
    (``HardwareProfile.cpu_features``), times the threads reading it."""
    if not meta.parameters or threads <= 0:
        return 0.0
    per_thread = _flops_per_thread(cpu_features)
    if meta.is_moe:
        per_thread *= MOE_PROMPT_EFFICIENCY
    return per_thread * threads / (2.0 * meta.active_parameters)


# A prompt token costs more the further into the context it stands: its attention reads every earlier one. Measured
# on SmolLM2-1.7B's shape here (2 threads, 512-token batches): 79 → 46 tok/s from position 0 to 2,560 without flash
# attention, 84 → 53 with it — a token at position 3,430 (4,050) took twice one at the start, 4.5× sooner than the
# attention's arithmetic alone says (its f16 products run far below the weights' quantized kernels).
ATTENTION_COST = 4.5


def prompt_slowdown_span(meta: ModelMetadata) -> float:
    """The position at which reading a prompt token takes twice as long as at the context's start (0: unknown):
    the parameters a token goes through over what its attention does per earlier token (in the layers that
    attend: a hybrid's recurrent layers cost the same anywhere)."""
    layers = meta.kv_layers if meta.kv_layers is not None else meta.n_layer
    if not meta.parameters or not layers or not meta.n_embd:
        return 0.0
    return meta.active_parameters / (2.0 * layers * meta.n_embd * ATTENTION_COST)


def _flops_per_thread(cpu_features: Collection[str]) -> float:
    vnni = "AVX512" in cpu_features and "AVX512_VNNI" in cpu_features
    return PROMPT_FLOPS_PER_THREAD_VNNI if vnni else PROMPT_FLOPS_PER_THREAD


# Models of architectures llama.cpp learned in 2025 or later (the generation trained on far more and better data:
# Qwen3 4B matches Qwen2.5 7B on the published benchmarks) count as twice their parameters; one place to say it.
NEWER_GENERATION_ARCHITECTURES = frozenset(
    {
        "qwen3",
        "qwen3moe",
        "qwen3next",
        "qwen35",
        "qwen35moe",
        "gemma3",
        "gemma3n",
        "gemma4",
        "lfm2",
        "lfm2moe",
        "smollm3",
        "granitehybrid",
        "granitemoe",
        "gpt-oss",
        "mistral3",
        "ernie4_5",
        "ernie4_5-moe",
        "exaone4",
        "glm4moe",
        "nemotron_h",
        "nemotron_h_moe",
        "falcon-h1",
        "seed_oss",
        "apertus",
    }
)


def effective_parameters(meta: ModelMetadata) -> float:
    """The dense size a model answers like. A mixture of experts: the geometric mean of its total and its active
    parameters (the rule of thumb its makers quote: Qwen3-30B-A3B answers like a dense ~10B, and
    gpt-oss-20b, 3.6 B active of 21 B, like a ~9B); then ×2 for the newer generation."""
    size = float(max(meta.parameters, 1))
    if meta.is_moe:
        size = math.sqrt(size * max(meta.active_parameters, 1))
    if meta.architecture in NEWER_GENERATION_ARCHITECTURES:
        size *= 2
    return size


def quality_score(meta: ModelMetadata) -> float:
    return math.log10(effective_parameters(meta)) * QUANT_QUALITY.get(meta.quantization, 0.8)


def architecture_reasons(meta: ModelMetadata) -> list[str]:
    """What sets this model apart from a dense transformer, in words: a mixture of experts ("reads about 2.0 GB
    per word: 3.6B of its 21B parameters are used for each"), a hybrid's layers and state, what is not known."""
    reasons = []
    if meta.is_moe:
        reasons.append(
            f"reads about {format_size(meta.active_weights_bytes)} per word: "
            f"{format_parameters(meta.active_parameters)} of its {format_parameters(meta.parameters)} parameters "
            "are used for each"
        )
    if meta.recurrent_layers and meta.n_layer:
        attending = meta.kv_layers if meta.kv_layers is not None else meta.n_layer
        reasons.append(
            f"{attending} of its {meta.n_layer} layers keep a KV cache that grows with the chat, "
            f"{meta.recurrent_layers} a fixed {format_size(meta.recurrent_state_bytes)} state"
        )
    if meta.lazy_weights_bytes:
        reasons.append(
            f"reads about {format_size(meta.active_weights_bytes)} per word and keeps "
            f"{format_size(meta.resident_weights_bytes)} in memory: its per-layer embeddings "
            f"({format_size(meta.lazy_weights_bytes)} of the file) stay on disk, a row read for each word"
        )
    if meta.architecture_note:
        reasons.append(meta.architecture_note)
    return reasons


@dataclass(frozen=True)
class Recommendation:
    path: str
    verdict: FitVerdict
    expected_tok_per_s: float
    reason: str


def choose_model(
    models: Sequence[ModelMetadata],
    available: int,
    total: int,
    bandwidth: float,
    min_tok_per_s: float = 5.0,
    estimates: Mapping[str, MemoryEstimate] | None = None,
    previous: str | None = None,
    cpu_features: Collection[str] = (),
) -> tuple[Recommendation | None, list[Recommendation]]:
    """Rank models that fit: chat-ready first, then quality, then speed. Returns (best, all ranked).

    ``estimates``: each model's memory at the context it would be loaded with (``cost_here``), so the verdict
    quotes the figure shown beside it; without one a model is judged at 4k. ``previous``: the model recommended
    last time, which keeps its place unless it falls clearly below the speed bar (``KEEP_MARGIN``): a bandwidth
    measured a few percent apart must not flip the recommendation between runs."""
    ranked: list[tuple[tuple[float, ...], Recommendation]] = []
    for meta in models:
        if meta.embedding:  # a sentence embedder cannot chat: it serves document search
            continue
        estimate = (estimates or {}).get(meta.path)
        n_ctx = estimate.n_ctx if estimate else min(MIN_CONTEXT * 2, meta.context_length or MIN_CONTEXT * 2)
        verdict = fit_verdict(meta, n_ctx, available, total, estimate.kv_type if estimate else "f16", estimate)
        speed = expected_tokens_per_second(meta, bandwidth, cpu_features=cpu_features)
        usable_speed = speed >= min_tok_per_s * (KEEP_MARGIN if meta.path == previous else 1.0)
        key = (
            verdict.verdict != "too_big",
            meta.has_chat_template or meta.instruct,
            usable_speed,
            verdict.verdict == "fits",
            quality_score(meta),
            speed,
        )
        parts = []
        parts.append(
            "instruction-tuned with a chat template"
            if meta.has_chat_template
            else "instruction-tuned"
            if meta.instruct
            else "a base model (no chat template)"
        )
        parts.append(f"{meta.size_label or format_parameters(meta.parameters)} parameters at {meta.quantization}")
        parts.append(f"about {speed:.0f} tokens/s expected here")
        parts += architecture_reasons(meta)
        parts.append(verdict.message)
        ranked.append((key, Recommendation(meta.path, verdict, speed, "; ".join(parts))))
    ranked.sort(key=lambda item: item[0], reverse=True)
    ordered = [rec for _, rec in ranked]
    best = next((rec for rec in ordered if rec.verdict.verdict != "too_big"), None)
    return best, ordered


def with_calibrated_threads(tuned: TunedParams, best: int) -> TunedParams:
    """The tuned values once the thread count is measured here: what the model runs with now (the settings page
    and the machine panel then say the same)."""
    return replace(tuned, n_threads=best, reasons={**tuned.reasons, "n_threads": CALIBRATED_REASON})
