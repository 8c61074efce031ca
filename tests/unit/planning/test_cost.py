"""What a model would cost here, before it is loaded: one memory figure (at the context it would load with), the
reply speed and the wait for a 1,000-token message."""

from __future__ import annotations

from fara_desktop.planning.cost import MachineFacts, cost_here
from fara_desktop.planning.tuning import GIB, estimate_memory, expected_prompt_tokens_per_second
from tests.unit.planning.test_tuning import GEMMA_1B, LLAMA_8B

ROOMY = MachineFacts(2, 2, 20 * GIB, 24 * GIB, 33e9, repacks_weights=True)


def test_the_memory_figure_is_for_the_context_the_model_would_load_with():
    cost = cost_here(LLAMA_8B, ROOMY)
    assert cost.tuned.n_ctx == 8192 and cost.memory.n_ctx == 8192  # not the 4k the ranking compares at
    assert cost.memory.total == estimate_memory(LLAMA_8B, 8192, "f16").total
    assert not cost.tuned.use_mmap  # a build that repacks reads the file: the weights count once


def test_a_tight_machine_gets_the_smaller_context_and_cache_it_would_really_use():
    tight = MachineFacts(2, 2, 6 * GIB, 8 * GIB, 20e9, repacks_weights=True)
    cost = cost_here(LLAMA_8B, tight)
    assert cost.memory.n_ctx == cost.tuned.n_ctx < 8192
    assert cost.memory.kv_type == cost.tuned.kv_type


def test_the_summary_names_memory_context_speed_and_the_wait_for_a_long_message():
    cost = cost_here(LLAMA_8B, ROOMY)
    expected_wait = 1000 / expected_prompt_tokens_per_second(LLAMA_8B, 2)
    assert abs(cost.typical_prompt_s - expected_wait) < 1e-9 and 100 < expected_wait < 160  # 8B, 2 cores: ~122 s read
    summary = cost.summary()
    assert summary.startswith("needs about ") and "with a context of 8,192 tokens" in summary
    assert f"about {cost.gen_tok_per_s:.0f} tokens/s" in summary
    assert f"a 1,000-token message is read in about {expected_wait:.0f} s" in summary


def test_a_small_model_reads_a_message_in_seconds():
    cost = cost_here(GEMMA_1B, ROOMY)
    assert cost.typical_prompt_s < cost_here(LLAMA_8B, ROOMY).typical_prompt_s / 5


def test_prompt_reading_is_predicted_for_the_instruction_set_the_kernels_use():
    from dataclasses import replace as with_

    avx2 = cost_here(LLAMA_8B, with_(ROOMY, cpu_features=("AVX", "AVX2", "FMA", "F16C")))
    vnni = cost_here(LLAMA_8B, with_(ROOMY, cpu_features=("AVX", "AVX2", "FMA", "F16C", "AVX512", "AVX512_VNNI")))
    assert avx2.prompt_tok_per_s == expected_prompt_tokens_per_second(LLAMA_8B, 2)
    assert 3.0 < vnni.prompt_tok_per_s / avx2.prompt_tok_per_s < 4.0  # 1.7B: 119 vs 37 tok/s measured
