"""One display name per model (issue 29, item 5): the file's name without its quantization, unless it says
nothing; then the GGUF's name fields. A server's model by its id, a path id by its file's name."""

from __future__ import annotations

import pytest

from fara_desktop.models.naming import model_display_name, name_from_file, server_model_name


@pytest.mark.parametrize(
    ("file_name", "shown"),
    [
        ("SmolLM2-135M-Instruct.Q4_1.gguf", "SmolLM2-135M-Instruct"),
        ("Qwen2.5-0.5B-Instruct-Q8_0.gguf", "Qwen2.5-0.5B-Instruct"),
        ("Meta-Llama-3.1-8B-Instruct-Q4_K_M.gguf", "Meta-Llama-3.1-8B-Instruct"),
        ("gemma-3-1b-it-UD-Q4_K_XL.gguf", "gemma-3-1b-it"),
        ("mistral-7b-instruct-v0.2.Q5_K_M.gguf", "mistral-7b-instruct-v0.2"),
        ("DeepSeek-R1-Distill-Qwen-7B-IQ3_XXS.gguf", "DeepSeek-R1-Distill-Qwen-7B"),
        ("Qwen3-30B-A3B-Q4_K_M-00001-of-00003.gguf", "Qwen3-30B-A3B"),
        ("phi-4-f16.gguf", "phi-4"),
        ("gpt-oss-20b-MXFP4.gguf", "gpt-oss-20b"),
        ("gemma-3-270m-q4_k_m.gguf", "gemma-3-270m"),
    ],
)
def test_the_file_name_without_its_quantization(file_name: str, shown: str):
    assert name_from_file(file_name) == shown
    assert model_display_name(file_name, "Smollm2 135M 8k Lc100K Mix1 Ep2") == shown


@pytest.mark.parametrize(
    "file_name",
    [
        "sha256-6a0746a1ec1aef3e7ec53868f220ff6e389f6f8ef87a01d77c96807de94ca2aa",  # an Ollama blob
        "model.gguf",
        "ggml-model-q4_0.gguf",
        "ggml-model-f16.gguf",
        "a.gguf",
        "Q4_K_M.gguf",
    ],
)
def test_a_file_name_that_says_nothing_gives_way_to_the_gguf_name(file_name: str):
    assert name_from_file(file_name) == ""
    assert model_display_name(file_name, "Llama 3.2 3B Instruct") == "Llama 3.2 3B Instruct"
    assert model_display_name(file_name, None, "llama-3.2", "3B") == "llama-3.2 3B"


def test_names_are_one_line_and_capped():
    shown = model_display_name("model.gguf", "evil\nname\x1b[31m" + "x" * 500)
    assert "\n" not in shown and "\x1b" not in shown and len(shown) <= 120
    assert model_display_name("model.gguf") == "model.gguf"  # nothing better: the file as it is


@pytest.mark.parametrize(
    ("model_id", "shown"),
    [
        ("qwen2.5:7b", "qwen2.5:7b"),
        ("gpt-4o-mini", "gpt-4o-mini"),
        ("/models/very/long/folder/SmolLM2-135M-Instruct.Q4_1.gguf", "SmolLM2-135M-Instruct"),
        ("C:\\models\\Qwen3-4B-Q4_K_M.gguf", "Qwen3-4B"),
        ("meta-llama/Llama-3.1-8B-Instruct", "meta-llama/Llama-3.1-8B-Instruct"),
    ],
)
def test_a_server_model_by_its_id_and_a_path_id_by_its_file(model_id: str, shown: str):
    assert server_model_name(model_id) == shown
