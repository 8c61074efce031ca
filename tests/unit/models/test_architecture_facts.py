"""Experts and recurrent layers read from the file (issue 41): what a token touches, which layers hold a KV cache,
what a sequence's recurrent state weighs, and the speed, memory, quality and words that follow from them."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest

from fara_desktop.models.gguf_file import read_gguf_header
from fara_desktop.models.metadata import metadata_from_header
from fara_desktop.planning.tuning import (
    RECURRENT_SNAPSHOTS,
    architecture_reasons,
    effective_parameters,
    estimate_memory,
    expected_prompt_tokens_per_second,
    expected_tokens_per_second,
    kv_cache_bytes,
    quality_score,
)
from tests.helpers.gguf_factory import write_tiny_model
from tests.helpers.hybrid_factory import HYBRID_FAMILIES, N_EMBD, N_LAYER, write_tiny_hybrid


def meta_of(path):
    return metadata_from_header(read_gguf_header(path))


def test_a_dense_model_reads_every_weight_and_keeps_a_kv_cache_in_every_layer(tmp_path):
    meta = meta_of(write_tiny_model(tmp_path / "dense.gguf"))
    assert (meta.is_moe, meta.active_fraction, meta.kv_layers, meta.recurrent_layers) == (False, 1.0, None, 0)
    assert meta.rewindable and meta.active_weights_bytes == meta.weights_bytes
    assert architecture_reasons(meta) == []


@pytest.mark.parametrize("arch", ["qwen3moe", "gpt-oss"])  # gpt-oss: its experts' biases are the experts' too
def test_a_mixture_of_experts_reads_only_the_experts_a_token_is_routed_to(tmp_path, arch):
    meta = meta_of(write_tiny_model(tmp_path / "moe.gguf", arch))  # 4 experts, 2 used
    header = read_gguf_header(tmp_path / "moe.gguf")
    experts = sum(4 * math.prod(t.shape) for t in header.tensors if "_exps" in t.name)
    other = sum(4 * math.prod(t.shape) for t in header.tensors if "_exps" not in t.name)
    assert meta.is_moe and (meta.n_expert, meta.n_expert_used) == (4, 2)
    assert meta.active_fraction == pytest.approx((other + experts / 2) / (other + experts))
    dense_twin = replace(meta, n_expert=0, n_expert_used=0, active_fraction=1.0, active_parameter_fraction=1.0)
    assert expected_tokens_per_second(meta, 30e9) > expected_tokens_per_second(dense_twin, 30e9)
    assert expected_prompt_tokens_per_second(meta, 2) > expected_prompt_tokens_per_second(dense_twin, 2)
    (reason,) = architecture_reasons(meta)
    assert reason.startswith("reads about ") and "parameters are used for each" in reason


@pytest.mark.parametrize("family", HYBRID_FAMILIES)
def test_a_hybrid_keeps_kv_only_in_the_layers_that_attend_and_a_fixed_state_in_the_others(tmp_path, family):
    meta = meta_of(write_tiny_hybrid(tmp_path / f"{family}.gguf", family))
    assert (meta.kv_layers, meta.recurrent_layers, meta.rewindable) == (N_LAYER // 2, N_LAYER // 2, False)
    per_layer = {  # llama.cpp's n_embd_r() + n_embd_s() for the factory's sizes, in f32
        "lfm2": N_EMBD * (3 - 1),
        "granitehybrid": (4 - 1) * (2 * N_EMBD + 2 * 2 * 16) + 16 * 2 * N_EMBD,
        "qwen35": (4 - 1) * (16 * 4 + 2 * 2 * 16) + 16 * 16 * 4,
    }[family]
    assert meta.recurrent_state_bytes == 2 * per_layer * 4
    every_layer = replace(meta, kv_layers=None)
    assert kv_cache_bytes(meta, 4096) * 2 == kv_cache_bytes(every_layer, 4096)
    estimate = estimate_memory(meta, 4096)
    # with the snapshots speculation keeps to take proposals back, where llama.cpp keeps them (not Mamba-2's)
    snapshots = RECURRENT_SNAPSHOTS if family in ("lfm2", "qwen35") else 0
    assert estimate.recurrent == meta.recurrent_state_bytes * (1 + snapshots)
    parts = estimate.weights + estimate.kv_cache + estimate.recurrent + estimate.compute + estimate.overhead
    assert estimate.total == parts
    assert any("a fixed" in reason for reason in architecture_reasons(meta))


def test_a_hybrid_whose_pattern_is_unknown_is_counted_generously_and_says_so(tmp_path):
    header = read_gguf_header(write_tiny_hybrid(tmp_path / "lfm2.gguf", "lfm2"))
    # Falcon-H1's layers attend and run Mamba-2 side by side: a hybrid whose pattern this app does not read
    header.metadata = {k.replace("lfm2.", "falcon-h1."): v for k, v in header.metadata.items()}
    header.metadata["general.architecture"] = "falcon-h1"
    meta = metadata_from_header(header)
    assert meta.kv_layers == N_LAYER and meta.recurrent_layers == N_LAYER and not meta.rewindable
    assert meta.architecture_note and "not known" in meta.architecture_note


def test_quality_counts_a_mixture_by_what_it_uses_and_a_newer_generation_above_its_size(tmp_path):
    dense = meta_of(write_tiny_model(tmp_path / "dense.gguf"))
    old_3b = replace(dense, parameters=3_000_000_000, architecture="llama")
    new_3b = replace(old_3b, architecture="qwen3")
    moe = replace(old_3b, parameters=21_000_000_000, n_expert=32, n_expert_used=4, active_parameter_fraction=0.17)
    assert effective_parameters(moe) == pytest.approx((21e9 * 21e9 * 0.17) ** 0.5, rel=1e-3)
    assert quality_score(new_3b) > quality_score(replace(old_3b, parameters=4_000_000_000))
    assert quality_score(old_3b) < quality_score(moe) < quality_score(replace(old_3b, parameters=21_000_000_000))
