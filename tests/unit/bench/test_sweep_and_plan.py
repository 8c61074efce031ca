"""The benchmark's bookkeeping: interleaved rounds, paired ratios, the configurations swept, run lengths by size."""

from __future__ import annotations

from dataclasses import replace

from fara_desktop.bench.plan import default_sections, plan_for
from fara_desktop.bench.sweep import EngineConfig, interleaved, paired_ratio, sweep_configs
from tests.unit.planning.test_tuning import GEMMA_1B, LLAMA_8B


def test_rounds_rotate_so_no_configuration_is_always_first():
    order: list[str] = []
    runs = interleaved({name: (lambda n=name: order.append(n) or 1.0) for name in "abc"}, 3)
    assert order == ["a", "b", "c", "b", "c", "a", "c", "a", "b"]
    assert runs == {"a": [1.0] * 3, "b": [1.0] * 3, "c": [1.0] * 3}


def test_a_paired_ratio_cancels_drift_that_a_ratio_of_medians_would_not():
    # the machine slows down round by round; b is always 10 % faster than a in the same round
    a = [100.0, 80.0, 60.0, 40.0]
    b = [110.0, 88.0, 66.0, 44.0]
    assert abs(paired_ratio(b, a) - 1.1) < 1e-9


def test_each_setting_is_varied_from_the_tuned_one_and_duplicates_are_dropped():
    tuned = EngineConfig(2, 2, 512, 512, "f16", False)
    default = EngineConfig(1, 2, 512, 512, "f16", False)
    configs = sweep_configs(tuned, default, [1, 2])
    assert configs[0] == tuned and configs[1] == default
    assert len(configs) == len(set(configs)) == 6
    assert EngineConfig(1, 1, 512, 512, "f16", False) in configs
    assert EngineConfig(2, 2, 256, 256, "f16", False) in configs
    assert EngineConfig(2, 2, 512, 512, "f16", True) in configs
    assert EngineConfig(2, 2, 512, 512, "q8_0", True) in configs
    assert len({c.label for c in configs}) == len(configs)


def test_runs_scale_with_the_model_and_slow_sections_wait_to_be_asked_at_size():
    tiny = replace(GEMMA_1B, parameters=135_000_000, weights_bytes=100_000_000, n_layer=30)  # SmolLM2-135M-like
    small, big = plan_for(tiny, 33e9, 2, quick=False), plan_for(LLAMA_8B, 33e9, 2, quick=False)
    assert big.gen_tokens < small.gen_tokens and big.pp_tokens <= small.pp_tokens
    assert big.big and not small.big
    assert "turns" in default_sections(small) and "turns" not in default_sections(big)
    assert "cold" not in default_sections(small)  # it evicts the file from the page cache: only when asked
    quick = plan_for(LLAMA_8B, 33e9, 2, quick=True)
    assert (quick.gen_tokens, quick.pp_rounds, quick.gen_rounds) == (16, 1, 1)
