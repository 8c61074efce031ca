"""One table of ggml types (issue 28: the engine and the benchmark each had one, with different contents)."""

from __future__ import annotations


def test_the_one_table_of_ggml_types_matches_llama_cpp():
    import llama_cpp

    from fara_desktop.engine.ggml_types import GGML_TYPE_IDS
    from fara_desktop.planning.tuning import KV_TYPES

    assert set(GGML_TYPE_IDS) == set(KV_TYPES)  # every KV cache type offered can be passed to llama.cpp
    for name, value in GGML_TYPE_IDS.items():
        assert getattr(llama_cpp, f"GGML_TYPE_{name.upper()}") == value
