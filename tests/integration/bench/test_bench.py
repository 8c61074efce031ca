"""`fara-desktop bench --quick` runs end to end on the real model and prints every figure."""

from __future__ import annotations

import json
import os
import subprocess
import sys

HEADLINE_KEYS = [
    "app_vs_raw_gen_ratio",
    "tuned_vs_default_gen_ratio",
    "tuned_vs_default_pp_ratio",
    "tuned_vs_best_sweep_gen_ratio",
    "ttft_turn8_over_turn1",
    "switch_back_ttft_ratio",
    "max_event_loop_stall_ms",
    "window_shown_s",
    "roofline_fraction",
]


def test_quick_benchmark_prints_every_headline_figure(fara_home, smollm2_path):
    env = {**os.environ, "FARA_HOME": str(fara_home)}
    result = subprocess.run(
        [sys.executable, "-m", "fara_desktop", "bench", "--quick", "--json"],
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    stages = [line for line in result.stderr.splitlines() if line.startswith("bench: [")]
    assert [line.split("]")[0] for line in stages] == [f"bench: [{n}/7" for n in range(1, 8)], result.stderr[-2000:]
    assert result.stderr.rstrip().splitlines()[-1].startswith("bench: done in")
    data = json.loads(result.stdout[result.stdout.index("{") :])
    for key in HEADLINE_KEYS:
        assert isinstance(data[key], float) and data[key] > 0, key
    assert 0.1 < data["app_vs_raw_gen_ratio"] < 2
    assert data["raw"]["tuned"]["gen_tok_per_s"]["median"] > 1
    assert data["switch_back_ttft_ratio"] < 1  # a restored snapshot beats re-reading 1,400 tokens
    assert 0 < data["roofline_fraction"] < 1.5
    assert data["memory"]["rss_model_loaded_bytes"] > data["memory"]["rss_no_model_bytes"]
    assert set(data["ttft_s"]["reuse"]) == {"1", "4", "8"}
