"""Pure planning decisions: memory estimate, fit verdicts, the choice of model, tuned parameters."""

from __future__ import annotations

from dataclasses import replace

from fara_desktop.models.metadata import ModelMetadata
from fara_desktop.planning.tuning import (
    GIB,
    choose_model,
    estimate_memory,
    fit_verdict,
    kv_cache_bytes,
    max_context,
    memory_budget,
    swa_layers,
    tune,
)
from fara_desktop.settings import InferenceOverrides

LLAMA_8B = ModelMetadata(
    path="/m/llama-8b-q4.gguf", name="Llama 3.1 8B Instruct", architecture="llama", size_label="8B",
    parameters=8_030_000_000, quantization="Q4_K_M", context_length=131072, n_layer=32, n_embd=4096, n_ff=14336,
    n_vocab=128256, n_head=32, n_head_kv=8, head_dim_k=128, head_dim_v=128, sliding_window=None,
    has_chat_template=True, license="llama3.1", file_bytes=4_920_000_000, weights_bytes=4_900_000_000, instruct=True,
)  # fmt: skip


GEMMA_1B = replace(LLAMA_8B, path="/m/gemma-1b.gguf", name="Gemma 3 1B", architecture="gemma3", n_layer=26,
                   n_head=4, n_head_kv=1, head_dim_k=256, head_dim_v=256, sliding_window=512, parameters=1_000_000_000,
                   weights_bytes=800_000_000, file_bytes=806_000_000, size_label="1B")  # fmt: skip


def test_kv_cache_formula():
    # 2 × 32 layers × 8 kv heads × 128 dims × 8192 tokens × 2 bytes = 1 GiB
    assert kv_cache_bytes(LLAMA_8B, 8192, "f16") == 2 * 32 * 8 * 128 * 8192 * 2 == GIB
    assert kv_cache_bytes(LLAMA_8B, 8192, "q8_0") == int(GIB * 34 / 64)
    assert kv_cache_bytes(LLAMA_8B, 8192, "q4_0") == int(GIB * 18 / 64)


def test_sliding_window_layers_are_counted_as_such():
    assert swa_layers(GEMMA_1B) == 26 - 4
    full = kv_cache_bytes(GEMMA_1B, 8192, swa_full=True)
    windowed = kv_cache_bytes(GEMMA_1B, 8192, swa_full=False)
    per_layer_token = 1 * 512 * 2
    assert full == per_layer_token * 26 * 8192
    assert windowed == per_layer_token * (4 * 8192 + 22 * (512 + 512))
    assert swa_layers(LLAMA_8B) == 0


def test_estimate_parts_add_up():
    estimate = estimate_memory(LLAMA_8B, 4096)
    assert estimate.total == estimate.weights + estimate.kv_cache + estimate.compute + estimate.overhead
    assert estimate.weights == LLAMA_8B.weights_bytes and estimate.kv_cache == GIB // 2


def test_verdicts_and_what_would_make_it_fit():
    total = 16 * GIB
    fits = fit_verdict(LLAMA_8B, 4096, available=12 * GIB, total=total)
    assert fits.verdict == "fits" and "needs about" in fits.message
    # the free memory the catalog's header shows is named beside what a model may use of it (issue 53, item 10:
    # "20.8 GiB free" above, "of 18.8 GiB available" in the tooltip)
    assert "of the 10.4 GiB a model may use (12.0 GiB free, less some for the system)" in fits.message
    tight = fit_verdict(LLAMA_8B, 4096, available=int(7.8 * GIB), total=total)
    assert tight.verdict == "tight"
    too_big = fit_verdict(LLAMA_8B, 131072, available=8 * GIB, total=total)
    assert too_big.verdict == "too_big" and "short" in too_big.message
    assert any("context of" in s for s in too_big.suggestions)
    weights_too_big = fit_verdict(LLAMA_8B, 4096, available=6 * GIB, total=total)
    assert weights_too_big.verdict == "too_big"
    assert any("smaller quantization" in s and "Q3_K_M" in s for s in weights_too_big.suggestions)
    hopeless = fit_verdict(LLAMA_8B, 4096, available=3 * GIB, total=total)
    assert hopeless.suggestions == ["a smaller model"]


def test_max_context_stays_within_budget():
    budget = memory_budget(8 * GIB, 16 * GIB)
    ctx = max_context(LLAMA_8B, budget, cap=131072)
    assert ctx % 256 == 0 and 8192 < ctx < 131072
    assert estimate_memory(LLAMA_8B, ctx).total <= budget < estimate_memory(LLAMA_8B, ctx + 256).total


def test_best_model_prefers_chat_models_that_fit_then_quality():
    base = replace(LLAMA_8B, path="/m/base.gguf", has_chat_template=False, instruct=False, name="Base 8B")
    small = replace(LLAMA_8B, path="/m/small.gguf", parameters=1_000_000_000, weights_bytes=700_000_000)
    best, ranked = choose_model([base, small, LLAMA_8B], 12 * GIB, 16 * GIB, bandwidth=60e9)
    assert best is not None and best.path == LLAMA_8B.path
    assert [r.path for r in ranked][-1] == base.path
    assert "chat template" in best.reason and "tokens/s" in best.reason
    best_small_ram, _ = choose_model([small, LLAMA_8B], 3 * GIB, 16 * GIB, bandwidth=60e9)
    assert best_small_ram is not None and best_small_ram.path == small.path
    nothing, _ = choose_model([LLAMA_8B], 1 * GIB, 16 * GIB, bandwidth=60e9)
    assert nothing is None


def test_tune_uses_calibration_and_quantizes_kv_when_tight():
    roomy = tune(LLAMA_8B, 4, 8, 12 * GIB, 16 * GIB)
    assert roomy.n_ctx == 8192 and roomy.kv_type == "f16" and not roomy.flash_attn
    assert roomy.n_threads == 4 and roomy.n_threads_batch == 4
    calibrated = tune(LLAMA_8B, 4, 8, 12 * GIB, 16 * GIB, calibrated_threads=3)
    assert calibrated.n_threads == 3 and "calibration" in calibrated.reasons["n_threads"]
    tight = tune(LLAMA_8B, 4, 8, int(6.5 * GIB), 16 * GIB)  # 2,048 tokens of f16 cache do not fit
    assert tight.kv_type == "q8_0" and tight.flash_attn and 1024 <= tight.n_ctx < 2048
    assert "q8_0" in tight.reasons["kv_type"]
    battery = tune(LLAMA_8B, 8, 8, 12 * GIB, 16 * GIB, on_battery=True)
    assert battery.n_threads == 4


def test_overrides_win_and_bad_values_fall_back_to_auto():
    tuned = tune(LLAMA_8B, 4, 8, 12 * GIB, 16 * GIB)
    params = InferenceOverrides(n_ctx=2048, n_threads=2).apply(tuned)
    assert (params.n_ctx, params.n_threads, params.n_threads_batch) == (2048, 2, tuned.n_threads_batch)
    quantized = InferenceOverrides(kv_type="q4_0").apply(tuned)
    assert quantized.kv_type == "q4_0" and quantized.flash_attn
    bad = InferenceOverrides(n_ctx=-5, n_threads=0, kv_type="q3_x").validated()  # type: ignore[arg-type]
    assert bad == InferenceOverrides()


def test_a_model_too_slow_for_this_machine_loses_to_a_fast_one():
    small = replace(LLAMA_8B, path="/m/small.gguf", parameters=1_000_000_000, weights_bytes=700_000_000)
    best, _ = choose_model([small, LLAMA_8B], 12 * GIB, 16 * GIB, bandwidth=20e9)  # 8B: ~2.4 tok/s here
    assert best is not None and best.path == small.path


def test_a_build_that_repacks_weights_reads_the_file_instead_of_mapping_it():
    mapped = tune(LLAMA_8B, 4, 8, 12 * GIB, 16 * GIB)
    read = tune(LLAMA_8B, 4, 8, 12 * GIB, 16 * GIB, repacks_weights=True)
    assert mapped.use_mmap and not read.use_mmap and "rearranges" in read.reasons["use_mmap"]
    once = estimate_memory(LLAMA_8B, 4096)
    twice = estimate_memory(LLAMA_8B, 4096, mapped_and_repacked=True)
    assert twice.total - once.total == LLAMA_8B.weights_bytes


def test_parallel_conversations_are_as_many_as_fit_and_counted_in_the_fit_check():
    """Issue 63: auto decodes four local API replies together where their KV caches fit beside the model, two where
    only two do, else one; the fit check counts their context (a KV cache of the whole context each)."""
    assert tune(LLAMA_8B, 4, 8, 24 * GIB, 32 * GIB).parallel == 4
    two = tune(LLAMA_8B, 4, 8, 12 * GIB, 32 * GIB)  # 8,192 tokens: 1 GiB of cache a sequence
    assert two.parallel == 2 and "1.00 GiB" in two.reasons["parallel"]
    assert tune(LLAMA_8B, 4, 8, 9 * GIB, 32 * GIB).parallel == 1
    alone, four = estimate_memory(LLAMA_8B, 8192), estimate_memory(LLAMA_8B, 8192, parallel=4)
    assert four.sequences == 4 * GIB + four.compute and four.total == alone.total + four.sequences
    assert estimate_memory(LLAMA_8B, 8192, parallel=1).sequences == 0
    assert fit_verdict(LLAMA_8B, 8192, available=12 * GIB, total=32 * GIB).verdict == "fits"
    too_many = fit_verdict(LLAMA_8B, 8192, available=12 * GIB, total=32 * GIB, parallel=8)
    assert too_many.verdict == "too_big"
    (suggestion,) = too_many.suggestions
    assert suggestion.startswith("fewer parallel API conversations, or one at a time")


def test_parallel_conversations_are_made_only_while_the_local_api_is_on_unless_pinned():
    tuned = tune(LLAMA_8B, 4, 8, 24 * GIB, 32 * GIB)
    assert InferenceOverrides().apply(tuned).parallel == 1  # the window without the API: nothing reserved
    assert InferenceOverrides().apply(tuned, serving=True).parallel == 4  # serve, or the API switched on
    assert InferenceOverrides(parallel=3).apply(tuned).parallel == 3
    assert InferenceOverrides(parallel=1).apply(tuned, serving=True).parallel == 1
