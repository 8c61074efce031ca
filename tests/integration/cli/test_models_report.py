"""`fara-desktop models` gives one memory figure per model: the one for the context it will load with."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from fara_desktop.bench.runner import model_metadata
from fara_desktop.planning.tuning import estimate_memory
from fara_desktop.text.format import format_size

pytestmark = pytest.mark.real_model


def test_the_reported_estimate_is_for_the_tuned_context(fara_home, smollm2_path):
    env = {**os.environ, "FARA_HOME": str(fara_home)}
    result = subprocess.run(
        [sys.executable, "-m", "fara_desktop", "models", "--json"], capture_output=True, text=True, env=env, timeout=120
    )
    assert result.returncode == 0, result.stderr
    entry = next(m for m in json.loads(result.stdout)["models"] if m["path"] == str(smollm2_path))
    n_ctx, kv = entry["fit"]["n_ctx"], entry["tuned"]["kv_type"]
    assert n_ctx == min(entry["tuned"]["n_ctx"], 8192)  # SmolLM2 is trained on 8,192
    expected = estimate_memory(model_metadata(smollm2_path), n_ctx, kv).total
    assert entry["fit"]["estimate_bytes"] == expected
    assert format_size(expected) in entry["fit"]["message"]
